// Package progress draws bfcsim's progress bars on a terminal: how far
// through a trace file a replay is (Bar: the bytes read and the events
// replayed), how many jobs of a sweep are done (Jobs), and how many probes
// a search has made (Spinner). The command decides whether a bar is drawn
// at all (on a terminal, outside CI, unless quiet); a bar costs the replay
// one counter, updated every few thousand events.
package progress

import (
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/bfcsim/bfcsim/report"
	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/input"
)

// Bar shows how far through a trace file a replay is, on a terminal:
// the bytes of the file read and left (the bar, its rate and its time
// left are from the file's size) and the events replayed and their rate.
// It redraws on a timer, not per event, so that it moves while a recording
// is being read before its first event, and costs the replay one counter.
type Bar struct {
	bar    *progressbar.ProgressBar
	name   string
	read   func() int64 // bytes of the file read so far
	events atomic.Int64 // events replayed, updated every `every`
	start  time.Time
	stop   chan struct{}
	done   sync.WaitGroup
	once   sync.Once
}

// NewBar returns a progress bar, drawn on w every tick (0: Tick), for a
// file of size bytes (-1: unknown) named path. read reports the bytes
// read; it is called from the bar's own goroutine.
func NewBar(w io.Writer, tick time.Duration, path string, size int64, read func() int64) *Bar {
	if tick == 0 {
		tick = Tick
	}
	name := filepath.Base(path)
	if path == "-" {
		name = "stdin"
	}
	bar := progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(name),
		progressbar.OptionShowBytes(true),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionThrottle(tick),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetPredictTime(true),
	)
	p := &Bar{bar: bar, name: name, read: read, start: time.Now(), stop: make(chan struct{})}
	p.done.Add(1)
	go p.run(tick)
	return p
}

// Tick is how often a bar is redrawn: smooth enough, cheap enough.
const Tick = 100 * time.Millisecond

func (p *Bar) run(tick time.Duration) {
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

func (p *Bar) draw() {
	if n := p.events.Load(); n > 0 {
		if s := time.Since(p.start).Seconds(); s > 0 {
			p.bar.Describe(fmt.Sprintf("%s %s events, %s", p.name, report.Count(n), report.Rate(float64(n)/s)))
		}
	}
	_ = p.bar.Set64(p.read())
}

// Finish draws the bar a last time, then clears it; nothing else may
// write to the bar's writer until it has. Calls after the first do
// nothing.
func (p *Bar) Finish() {
	p.once.Do(func() {
		close(p.stop)
		p.done.Wait()
		p.draw()
		_ = p.bar.Finish()
	})
}

// every is how many events pass between updates of the count the bar
// shows: often enough to move smoothly, rarely enough to cost nothing
// per event.
const every = 1 << 14

// Source counts, for its bar, the events a replay takes from a trace.
type Source struct {
	*input.File
	p *Bar
	n int64
}

// Count returns f as a source of a replay whose events the bar counts.
func (p *Bar) Count(f *input.File) *Source { return &Source{File: f, p: p} }

// NextBatch is Next for many events at once (sim.BatchSource).
func (s *Source) NextBatch(dst []trace.Event) []trace.Event {
	k := len(dst)
	dst = s.File.NextBatch(dst)
	s.n += int64(len(dst) - k)
	s.p.events.Store(s.n)
	return dst
}

// NextLent is NextBatch without the copy (sim.LendingSource).
func (s *Source) NextLent() trace.Lent {
	l := s.File.NextLent()
	s.n += int64(len(l.Events))
	s.p.events.Store(s.n)
	return l
}

func (s *Source) Next() bool {
	ok := s.File.Next()
	if s.n++; s.n%every == 0 || !ok {
		s.p.events.Store(s.n)
	}
	return ok
}

// Jobs returns a bar on w counting jobs done of n (Add, then Finish).
func Jobs(w io.Writer, n int) *progressbar.ProgressBar {
	return progressbar.NewOptions(n,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("sweep"),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(Tick),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
	)
}

// Spinner returns a spinner on w that says what is being done (Describe,
// Add, then Finish), for work of unknown length.
func Spinner(w io.Writer, what string) *progressbar.ProgressBar {
	return progressbar.NewOptions(-1, progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(what), progressbar.OptionSpinnerType(14),
		progressbar.OptionThrottle(Tick), progressbar.OptionClearOnFinish())
}
