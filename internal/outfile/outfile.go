// Package outfile writes a command's output files so that a failed or
// interrupted run leaves nothing that looks complete: each file goes to a
// temporary file renamed over its path once whole (Write), and a directory
// of them is taken back whole when the run fails (WithDir). A path ending in
// .gz or .zst is compressed.
package outfile

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"

	"github.com/bfcsim/bfcsim/trace"
)

// Copy copies the file src to dst as Write writes it: whole or not at all,
// compressed if dst ends in .gz or .zst.
func Copy(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	return Write(dst, func(w io.Writer) error {
		if _, err := io.Copy(w, f); err != nil {
			return fmt.Errorf("writing %s: %w", dst, err)
		}
		return nil
	})
}

// Write writes path through fn: into a temporary file on the same file
// system, renamed over path only if fn and every write succeed, so a
// failed run never leaves a half-written file that looks complete. A .gz or
// .zst path is compressed. A path that exists and is not a regular file (a
// FIFO, /dev/stdout, a terminal) is written directly: renaming over it would
// replace it.
func Write(path string, fn func(w io.Writer) error) error {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		if st.IsDir() {
			return fmt.Errorf("%s is a directory", path)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		werr := writeCompressed(f, path, fn)
		if cerr := f.Close(); werr == nil && cerr != nil {
			werr = fmt.Errorf("writing %s: %w", path, cerr)
		}
		return werr
	}
	pf, err := renameio.NewPendingFile(path, renameio.WithPermissions(0o644), renameio.WithExistingPermissions())
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	defer pf.Cleanup()
	if err := writeCompressed(pf, path, fn); err != nil {
		return err
	}
	if err := pf.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Dir writes a command's files into a directory (WithDir), each
// atomically, stopping between files once ctx is done. If the command then
// fails (or is interrupted) before it is complete, every file it wrote is
// taken back, and the directory if it was made, so that a failed run
// leaves no output of its own.
type Dir struct {
	ctx     context.Context
	dir     string
	made    bool // the directory did not exist before
	written []string
}

// newDir makes dir, and its parents, unless they exist.
func newDir(ctx context.Context, dir string) (*Dir, error) {
	_, err := os.Stat(dir)
	made := os.IsNotExist(err)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &Dir{ctx: ctx, dir: dir, made: made}, nil
}

// WithDir makes dir, and its parents, unless they exist, and runs fn on
// it; when fn fails, every file written through the Dir is taken back, and
// the directory if WithDir made it.
func WithDir(ctx context.Context, dir string, fn func(*Dir) error) error {
	d, err := newDir(ctx, dir)
	if err != nil {
		return err
	}
	if err := fn(d); err != nil {
		d.abandon()
		return err
	}
	return nil
}

// Write writes the file name in the directory through fn, as Write does.
func (o *Dir) Write(name string, fn func(w io.Writer) error) error {
	if err := o.ctx.Err(); err != nil {
		return err
	}
	path := filepath.Join(o.dir, name)
	if err := Write(path, fn); err != nil {
		return err
	}
	o.written = append(o.written, path)
	return nil
}

// abandon removes what the command wrote, and the directory if it made it
// and nothing else is in it.
func (o *Dir) abandon() {
	for _, p := range o.written {
		_ = os.Remove(p)
	}
	if o.made {
		_ = os.Remove(o.dir) // fails, as it should, if anything else is there
	}
}

// writeCompressed runs fn on w, compressed as path's extension says.
func writeCompressed(w io.Writer, path string, fn func(w io.Writer) error) error {
	zw, err := trace.NewCompressWriter(w, trace.CompressionForPath(path))
	if err != nil {
		return err
	}
	if err := fn(zw); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
