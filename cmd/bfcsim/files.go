package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/bfcsim/bfcsim/report"
	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/input"
)

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
// the bytes of the file read and left (the bar, its rate and its time
// left are from the file's size) and the events replayed and their rate.
// It redraws on a timer, not per event, so that it moves while a recording
// is being read before its first event, and costs the replay one counter.
type progress struct {
	bar    *progressbar.ProgressBar
	name   string
	read   func() int64 // bytes of the file read so far
	events atomic.Int64 // events replayed, updated every progressEvery
	start  time.Time
	stop   chan struct{}
	done   sync.WaitGroup
	once   sync.Once
}

// newProgress returns a progress bar for a file of size bytes (-1:
// unknown) named path, or nil when no bar should be drawn (not a
// terminal, in CI, or quiet). read reports the bytes read; it is called
// from the bar's own goroutine.
func newProgress(e *env, path string, size int64, read func() int64, quiet bool) *progress {
	if !e.progress || quiet {
		return nil
	}
	tick := e.redraw
	if tick == 0 {
		tick = progressTick
	}
	name := filepath.Base(path)
	if path == "-" {
		name = "stdin"
	}
	bar := progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(e.stderr),
		progressbar.OptionSetDescription(name),
		progressbar.OptionShowBytes(true),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionThrottle(tick),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetPredictTime(true),
	)
	p := &progress{bar: bar, name: name, read: read, start: time.Now(), stop: make(chan struct{})}
	p.done.Add(1)
	go p.run(tick)
	return p
}

// progressTick is how often a bar is redrawn: smooth enough, cheap enough.
const progressTick = 100 * time.Millisecond

func (p *progress) run(tick time.Duration) {
	defer p.done.Done()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.draw()
		}
	}
}

func (p *progress) draw() {
	if n := p.events.Load(); n > 0 {
		if s := time.Since(p.start).Seconds(); s > 0 {
			p.bar.Describe(fmt.Sprintf("%s %s events, %s", p.name, report.Count(n), report.Rate(float64(n)/s)))
		}
	}
	_ = p.bar.Set64(p.read())
}

// finish draws the bar a last time, then clears it; nothing else may
// write to standard error until it has. Calls after the first do nothing.
func (p *progress) finish() {
	p.once.Do(func() {
		close(p.stop)
		p.done.Wait()
		p.draw()
		_ = p.bar.Finish()
	})
}

// progressEvery is how many events pass between updates of the count the
// bar shows: often enough to move smoothly, rarely enough to cost nothing
// per event.
const progressEvery = 1 << 14

// progressSource counts the events a replay takes from a trace.
type progressSource struct {
	*input.File
	p *progress
	n int64
}

// NextBatch is Next for many events at once (sim.BatchSource).
func (s *progressSource) NextBatch(dst []trace.Event) []trace.Event {
	k := len(dst)
	dst = s.File.NextBatch(dst)
	s.n += int64(len(dst) - k)
	s.p.events.Store(s.n)
	return dst
}

// NextLent is NextBatch without the copy (sim.LendingSource).
func (s *progressSource) NextLent() trace.Lent {
	l := s.File.NextLent()
	s.n += int64(len(l.Events))
	s.p.events.Store(s.n)
	return l
}

func (s *progressSource) Next() bool {
	ok := s.File.Next()
	if s.n++; s.n%progressEvery == 0 || !ok {
		s.p.events.Store(s.n)
	}
	return ok
}
