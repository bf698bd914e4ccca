package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/allocators/bfcstate"
	"github.com/bfcsim/bfcsim/trace"
)

// DefaultCapacity is the device size used when neither the command line nor
// the trace header gives one: 80 GiB, an A100/H100-class GPU.
const DefaultCapacity = 80 << 30

// batchEvents is how many events travel together from the producer to the
// workers: large enough that channel operations cost nothing per event,
// small enough that the pool of batches stays around a megabyte.
const batchEvents = 2048

// Source is a stream of valid events with Slots assigned; *trace.Reader is one.
type Source interface {
	Next() bool
	Event() trace.Event
	Err() error
}

// BatchSource is a Source that can also hand over events in bulk, as
// *trace.Reader can: NextBatch appends events up to dst's capacity, fewer
// only at the end (then Err tells why).
type BatchSource interface {
	Source
	NextBatch(dst []trace.Event) []trace.Event
}

// LendingSource is a Source that can also lend its events in place, as
// *trace.Reader can (trace.Reader.NextLent), so that they reach the
// allocators without being copied. It lends no events only at the end
// (then Err tells why).
type LendingSource interface {
	Source
	NextLent() trace.Lent
}

// AllocatorSpec names an allocator and its options.
type AllocatorSpec struct {
	Name    string
	Options allocators.Options
}

// Config configures a replay.
type Config struct {
	// Allocators to replay against, in report order.
	Allocators []AllocatorSpec
	// Space describes the space each allocator gets (a fresh one each).
	Space allocators.SpaceConfig
	// StopOnOOM stops an allocator's replay at its first failed allocation.
	StopOnOOM bool
	// Check runs the invariant checker on every event.
	Check bool
	// Events, if set, is asked once per allocator for a writer of per-event
	// results (JSON Lines). Each writer is written by one goroutine.
	Events func(allocator string) io.Writer
	// PeakSnapshots asks allocators that can describe their pool
	// (allocators.Snapshotter) for a snapshot at their peak bytes in use,
	// in Result.PeakSnapshot. Snapshots at the first failed allocation are
	// always taken.
	PeakSnapshots bool
	// Record, if set, asks for the series plots are drawn from (see
	// RecordConfig), in Result.Timeline, Memmap and Layout.
	Record *RecordConfig
	// Reread opens the trace again from the start, for allocators that plan
	// offline (allocators.Planner): Replay reads it once through Reread to
	// gather every allocation's lifetime before replaying src. It must give
	// the same events as src. What it opens stays the caller's to close. A
	// planner configured without Reread (a trace on standard input) is an
	// error.
	Reread func() (Source, error)
	// Recorded are the settings of the allocator the trace was recorded
	// with (the header's allocator_settings). The allocator they name
	// starts from them: each of its options they set that the spec does
	// not is taken from them, and Result.OptionsFromRecording lists it.
	Recorded trace.RecordedSettings
	// LatencySample times one Allocate and one Free in this many (the
	// first, then every LatencySample-th); 0 means DefaultLatencySample, 1
	// times every call.
	LatencySample int
	// ExpandableRanges are where the recording's expandable segments'
	// ranges start (the header's expandable_ranges), told to allocators
	// that take them (allocators.RangeObserver) before the first event.
	ExpandableRanges []trace.ExpandableRange
	// Probe replays for a yes-or-no answer only: did every allocation
	// succeed? It measures nothing but the counts, peaks and failures of a
	// Result (no latencies, no fragmentation metric, no allocator stats),
	// and stops each allocator at its first failed allocation (its first
	// fatal one, with TolerateScratch).
	Probe bool
	// TolerateScratch takes a failed allocation that the program frees
	// before it allocates anything else as one it survives: a library's
	// workspace, which it does without (PyTorch's cuDNN convolutions catch
	// the out-of-memory error and try an algorithm with a smaller
	// workspace). Such failures are counted in Result.ScratchFailures and
	// do not stop a replay (StopOnOOM, Probe); a failure the recording
	// itself had (a recorded out-of-memory) never counts as one.
	TolerateScratch bool
}

// DefaultLatencySample is how sparsely a replay times calls by default.
// Reading the clock twice around a call costs about as much as a BFC
// allocation itself: timing every call makes a replay of the Python trace
// of docs/performance.md 1.49× as long, end to end. Timing one call in 16
// keeps the cost to a few percent and still gives thousands of samples for
// the percentiles of any trace worth timing. The maximum is then the
// largest sampled call.
const DefaultLatencySample = 16

// Replay drives every event of src through each configured allocator and
// returns one Result per allocator, in configuration order. An allocator
// that plans offline (allocators.Planner) first gets every allocation of the
// trace, read once more through cfg.Reread (see prepass.go). It returns an
// error for a bad configuration (a planner without Reread among them), an
// invalid trace (src.Err), a violated invariant, a failing events writer, or
// a cancelled context; the results are then nil.
func Replay(ctx context.Context, src Source, cfg Config) ([]Result, error) {
	if len(cfg.Allocators) == 0 {
		return nil, errors.New("no allocators to replay")
	}
	seen := map[string]bool{}
	for _, spec := range cfg.Allocators {
		if seen[spec.Name] {
			return nil, fmt.Errorf("allocator %s is listed twice", spec.Name)
		}
		seen[spec.Name] = true
	}
	spaceEff, err := cfg.Space.Validate()
	if err != nil {
		return nil, err
	}
	runners := make([]*runner, 0, len(cfg.Allocators))
	defer func() {
		for _, r := range runners {
			if r != nil {
				r.close()
			}
		}
	}()
	for _, spec := range cfg.Allocators {
		r, err := newRunner(spec, cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", spec.Name, err)
		}
		r.spaceOptions = spaceEff
		runners = append(runners, r)
	}
	if err := planOffline(ctx, runners, cfg.Reread); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	type batch struct {
		events []trace.Event
		lent   trace.Lent // what events were lent as, if they were
		first  int64      // index of events[0] in the trace
		refs   atomic.Int32
	}
	lender, lends := src.(LendingSource)
	pool := make(chan *batch, 2*len(runners)+2)
	if lends {
		// A lent batch is a chunk of the input, thousands of events: a
		// few in flight keep the allocators busy, and the Reader keeps
		// room for that many.
		pool = make(chan *batch, 4)
	}
	for range cap(pool) {
		b := &batch{}
		if !lends {
			b.events = make([]trace.Event, 0, batchEvents)
		}
		pool <- b
	}
	chans := make([]chan *batch, len(runners))
	var wg sync.WaitGroup
	var running atomic.Int64 // runners not stopped at an out-of-memory
	running.Store(int64(len(runners)))
	for i, r := range runners {
		ch := make(chan *batch, cap(pool))
		chans[i] = ch
		wg.Go(func() {
			failed, stopped := false, false
			for b := range ch {
				if !failed && ctx.Err() == nil {
					if err := r.apply(b.events, b.first); err != nil {
						failed = true
						cancel(fmt.Errorf("%s: %w", r.name, err))
					}
				}
				if r.result.Stopped && !stopped {
					stopped = true
					running.Add(-1)
				}
				if b.refs.Add(-1) == 0 {
					b.lent.Return()
					b.lent = trace.Lent{}
					pool <- b
				}
			}
			if !failed {
				if err := r.finish(); err != nil {
					cancel(fmt.Errorf("%s: %w", r.name, err))
				}
			}
		})
	}

	// If the producer panics (a source that does), the allocators stop
	// before their spaces are closed, so that a real device's memory is
	// never given back under an allocator still using it.
	producing := true
	defer func() {
		if producing {
			cancel(errors.New("the replay stopped"))
			for _, ch := range chans {
				close(ch)
			}
			wg.Wait()
		}
	}()

	// The producer runs here, on the caller's goroutine. A probe reads no
	// further once every allocator has stopped: its answer is known, and
	// the trace was checked when it was first read.
	var index int64
	more := true
	for more && ctx.Err() == nil && (!cfg.Probe || running.Load() > 0) {
		var b *batch
		select {
		case b = <-pool:
		case <-ctx.Done():
		}
		if b == nil {
			break
		}
		b.events, b.first = b.events[:0], index
		if lends {
			b.lent = lender.NextLent()
			b.events = b.lent.Events
			more = len(b.events) > 0
		} else if bs, ok := src.(BatchSource); ok {
			b.events = bs.NextBatch(b.events)
			more = len(b.events) == cap(b.events)
		} else {
			for len(b.events) < batchEvents {
				if !src.Next() {
					more = false
					break
				}
				b.events = append(b.events, src.Event())
			}
		}
		index += int64(len(b.events))
		b.refs.Store(int32(len(runners)))
		for _, ch := range chans {
			ch <- b
		}
	}
	producing = false
	for _, ch := range chans {
		close(ch)
	}
	wg.Wait()

	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	if err := src.Err(); err != nil {
		return nil, err
	}
	results := make([]Result, len(runners))
	type peak struct {
		i           int
		event, line int64
	}
	var stale []peak
	for i, r := range runners {
		results[i] = r.result
		if r.peakStale {
			stale = append(stale, peak{i, r.peakEvent, r.peakLine})
		}
	}
	if len(stale) == 0 {
		return results, nil
	}
	// The allocators of this replay are done with: let their memory go
	// before a fresh one replays the trace again.
	for _, r := range runners {
		r.close()
	}
	clear(runners)
	for _, p := range stale {
		s, err := snapshotAt(ctx, cfg, cfg.Allocators[p.i], p.event, p.line)
		if err != nil {
			return nil, fmt.Errorf("%s: describing the pool at its peak: %w", cfg.Allocators[p.i].Name, err)
		}
		results[p.i].PeakSnapshot = s
	}
	return results, nil
}

// snapshotAt replays the trace again, through cfg.Reread, with a fresh
// allocator of spec, up to and including event (on line), and describes the
// pool there: the peak snapshot of a trace whose peak rose too often to
// describe it each time. It returns nil, and no error, if the trace cannot
// be read again (standard input).
func snapshotAt(ctx context.Context, cfg Config, spec AllocatorSpec, event, line int64) (*bfcstate.Snapshot, error) {
	if cfg.Reread == nil {
		return nil, nil
	}
	cfg.Record, cfg.Events, cfg.Check, cfg.PeakSnapshots = nil, nil, false, false
	r, err := newRunner(spec, cfg)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if err := planOffline(ctx, []*runner{r}, cfg.Reread); err != nil {
		return nil, err
	}
	src, err := cfg.Reread()
	if err != nil {
		return nil, err
	}
	events := make([]trace.Event, 0, batchEvents)
	for first := int64(0); first <= event; first += int64(len(events)) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		events = events[:0]
		for int64(len(events)) < min(batchEvents, event+1-first) && src.Next() {
			events = append(events, src.Event())
		}
		if len(events) == 0 {
			if err := src.Err(); err != nil {
				return nil, err
			}
			return nil, errors.New("the trace ended before the peak it had the first time")
		}
		if err := r.apply(events, first); err != nil {
			return nil, err
		}
	}
	return atPeak(r.snap.Snapshot(), event, line), nil
}
