package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
	"github.com/schollz/progressbar/v3"

	"github.com/bfcsim/bfcsim/trace"
)

// openedTrace is a trace file opened for reading.
type openedTrace struct {
	*trace.Reader
	path string
	size int64 // bytes on disk, or -1 for standard input
	file *os.File
}

func (t *openedTrace) Close() error {
	t.Reader.Close()
	if t.file != nil {
		return t.file.Close()
	}
	return nil
}

// openTrace opens path ("-" for standard input) as a trace.
func openTrace(e *env, path string, opts ...trace.ReaderOption) (*openedTrace, error) {
	t := &openedTrace{path: path, size: -1}
	var in io.Reader = e.stdin
	name := "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			t.size = st.Size()
		}
		t.file, in, name = f, f, path
	}
	r, err := trace.NewReader(in, name, opts...)
	if err != nil {
		if t.file != nil {
			t.file.Close()
		}
		return nil, err
	}
	t.Reader = r
	return t, nil
}

// writeFileAtomic writes path through fn: into a temporary file beside it,
// renamed over path only if fn and every write succeed, so a failed run never
// leaves a half-written file that looks complete. A .gz or .zst path is
// compressed.
func writeFileAtomic(path string, fn func(w io.Writer) error) error {
	pf, err := renameio.NewPendingFile(path, renameio.WithPermissions(0o644), renameio.WithExistingPermissions())
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	defer pf.Cleanup()
	zw, err := trace.NewCompressWriter(pf, trace.CompressionForPath(path))
	if err != nil {
		return err
	}
	if err := fn(zw); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := pf.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// progress shows how far through a trace file a replay is, on a terminal.
type progress struct {
	bar *progressbar.ProgressBar
	t   *openedTrace
	n   int
}

// newProgress returns a progress reporter for t, or nil when no bar should
// be drawn (not a terminal, in CI, or quiet).
func newProgress(e *env, t *openedTrace, quiet bool) *progress {
	if !e.progress || quiet {
		return nil
	}
	bar := progressbar.NewOptions64(t.size,
		progressbar.OptionSetWriter(e.stderr),
		progressbar.OptionSetDescription(filepath.Base(t.path)),
		progressbar.OptionShowBytes(true),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionThrottle(100_000_000), // 100 ms
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
	)
	return &progress{bar: bar, t: t}
}

// Next advances the trace and, every few thousand events, the bar.
func (p *progress) Next() bool {
	ok := p.t.Next()
	if p.n++; p.n%4096 == 0 || !ok {
		_ = p.bar.Set64(p.t.BytesRead())
	}
	return ok
}

func (p *progress) Event() trace.Event { return p.t.Event() }
func (p *progress) Err() error         { return p.t.Err() }
func (p *progress) finish()            { _ = p.bar.Finish() }
