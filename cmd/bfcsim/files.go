package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/renameio/v2"
	"github.com/schollz/progressbar/v3"

	"github.com/bfcsim/bfcsim/report"
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

// writeFileAtomic writes path through fn: into a temporary file on the same
// file system, renamed over path only if fn and every write succeed, so a
// failed run never leaves a half-written file that looks complete. A .gz or
// .zst path is compressed. A path that exists and is not a regular file (a
// FIFO, /dev/stdout, a terminal) is written directly: renaming over it would
// replace it.
func writeFileAtomic(path string, fn func(w io.Writer) error) error {
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

// checkOutputs refuses, before any work is done, output paths that would
// fail at the end or destroy something: a directory where a file must go, a
// file where a directory must go, an output that is also an input, or two
// outputs that are the same file.
func checkOutputs(inputs []string, dir string, files ...string) error {
	if dir != "" {
		if st, err := os.Stat(dir); err == nil && !st.IsDir() {
			return fmt.Errorf("-o %s: not a directory", dir)
		}
		for _, name := range []string{"report.json", "report.md", "index.html", "timeline.csv"} {
			files = append(files, filepath.Join(dir, name))
		}
	}
	seen := map[string]string{}
	for _, f := range files {
		if f == "" {
			continue
		}
		if st, err := os.Stat(f); err == nil && st.IsDir() {
			return fmt.Errorf("%s is a directory", f)
		}
		abs, err := filepath.Abs(f)
		if err != nil {
			return err
		}
		if other, dup := seen[abs]; dup {
			return fmt.Errorf("%s and %s are the same file", other, f)
		}
		seen[abs] = f
		for _, in := range inputs {
			if in == "-" {
				continue
			}
			a, errA := os.Stat(in)
			b, errB := os.Stat(f)
			if errA == nil && errB == nil && os.SameFile(a, b) {
				return fmt.Errorf("refusing to overwrite the input %s with an output", in)
			}
		}
	}
	return nil
}

// checkStdinOnce refuses "-" given more than once: standard input can be read once.
func checkStdinOnce(paths []string) error {
	n := 0
	for _, p := range paths {
		if p == "-" {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("- (standard input) is given %d times; it can be read only once", n)
	}
	return nil
}

// progress shows how far through a trace file a replay is, on a terminal:
// the bytes read and left (the bar, its rate and its time left are from
// the file's size) and the events replayed and their rate.
type progress struct {
	bar   *progressbar.ProgressBar
	t     *openedTrace
	n     int
	name  string
	start time.Time
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
		progressbar.OptionSetPredictTime(true),
	)
	return &progress{bar: bar, t: t, name: filepath.Base(t.path), start: time.Now()}
}

// progressEvery is how many events pass between updates of the bar: often
// enough to move smoothly, rarely enough to cost nothing per event.
const progressEvery = 1 << 14

// Next advances the trace and, every progressEvery events, the bar.
func (p *progress) Next() bool {
	ok := p.t.Next()
	if p.n++; p.n%progressEvery == 0 || !ok {
		if s := time.Since(p.start).Seconds(); s > 0 {
			p.bar.Describe(fmt.Sprintf("%s %s events, %s", p.name,
				report.Count(int64(p.n)), report.Rate(float64(p.n)/s)))
		}
		_ = p.bar.Set64(p.t.BytesRead())
	}
	return ok
}

func (p *progress) Event() trace.Event { return p.t.Event() }
func (p *progress) Err() error         { return p.t.Err() }
func (p *progress) finish()            { _ = p.bar.Finish() }
