package sim

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/allocators/bfcstate"
	"github.com/bfcsim/bfcsim/internal/paged"
	"github.com/bfcsim/bfcsim/trace"
)

// Latency summarises the wall-clock time of one kind of call, in nanoseconds.
type Latency struct {
	// Count is how many calls were timed: one in Config.LatencySample.
	Count                    int64
	P50, P90, P99, P999, Max int64
	Mean                     float64
	// Curve is the distribution: the latency at each of CurveQuantiles,
	// from the histogram (empty if there were no calls).
	Curve []int64
}

// CurveQuantiles are the quantiles of Latency.Curve: ten steps per decade of
// 1/(1-q), from 0 to 0.99999, then 1 (the maximum).
var CurveQuantiles = func() []float64 {
	var q []float64
	for k := 0; k <= 50; k++ {
		q = append(q, 1-math.Pow(10, -float64(k)/10))
	}
	return append(q, 1)
}()

// Result is what one allocator did with one trace. Byte counts follow docs/metrics.md.
type Result struct {
	Allocator string
	// Options are the allocator's effective options, defaults included.
	Options map[string]any
	// SpaceOptions are the space's effective options.
	SpaceOptions map[string]any

	Events       int64 // events the allocator saw (fewer than the trace's if it stopped)
	OKAllocs     int64 // allocations served, size-0 ones included
	FailedAllocs int64
	// ScratchFailures counts the failed allocations the program freed
	// before allocating anything else (Config.TolerateScratch); they are
	// among FailedAllocs.
	ScratchFailures int64
	ZeroSizeAllocs  int64
	// FirstOOMEvent is the 0-based index of the first failed alloc in the
	// trace's events, and FirstOOMLine its line; both -1 if none failed.
	FirstOOMEvent, FirstOOMLine int64
	// Stopped is set when StopOnOOM ended the replay early.
	Stopped bool

	PeakLiveBytes            uint64
	PeakInUseBytes           uint64
	PeakReservedBytes        uint64
	FinalReservedBytes       uint64
	InternalWasteAtPeakBytes uint64
	// TFFragmentationMax and Mean are TensorFlow's metric sampled after
	// every event, (free_in_pool - largest_free) / free_in_pool, 0 when
	// nothing in the pool is free.
	TFFragmentationMax, TFFragmentationMean float64

	Space allocators.SpaceStats

	AllocLatency, FreeLatency Latency
	// LatencySampleEvery is how sparsely calls were timed: one in this many.
	LatencySampleEvery int
	// ReplaySeconds is the time the allocator's worker spent applying events
	// (trace parsing, done once for all allocators, is not included).
	ReplaySeconds float64

	// AddrChecked and AddrMatched count allocations whose trace carried the
	// recorded address, and those the allocator placed at the same address.
	AddrChecked, AddrMatched int64
	// BlockChecked and BlockMatched count allocations the allocator served
	// whose trace carried the recorded block size (trace.HasBlock), and
	// those whose block (allocators.Block.Size: the bytes the allocator set
	// aside, rounding and unsplit slack included) has exactly that size.
	BlockChecked, BlockMatched int64
	// RecordedOOMs counts the allocations the recorded program failed (an
	// alloc after a trace.RecordedOOMMark mark), and OOMsMatched
	// those the allocator failed too.
	RecordedOOMs, OOMsMatched int64

	// OptionsFromRecording are the options taken from the trace's recorded
	// settings (Config.Recorded), sorted; nil if none.
	OptionsFromRecording []string

	// AllocatorStats are the allocator's own counters (StatsReporter), or nil.
	AllocatorStats map[string]int64

	// Decisions says what the allocator did with the segment decisions the
	// trace recorded (its reserve and release events): nil for an
	// allocator that does not take them (allocators.DecisionFollower) or a
	// trace that has none.
	Decisions *Decisions

	// OOMSnapshot is the pool right after the first failed allocation, for
	// allocators that can describe it (allocators.Snapshotter); nil
	// otherwise. Its Request, Event and Line name the failed allocation.
	OOMSnapshot *bfcstate.Snapshot
	// PeakSnapshot is the pool when its bytes in use first reached their
	// peak, with Event and Line naming the allocation that reached it; only
	// with Config.PeakSnapshots.
	PeakSnapshot *bfcstate.Snapshot

	// Held is what the reserved bytes held at their peak, by call site;
	// nil for a probe (Config.Probe) or when nothing was reserved.
	// HeldAtOOM is what they held at the first failed allocation, of
	// FirstOOMBytes bytes; nil for a probe or without a failure.
	Held          *PeakHeld
	HeldAtOOM     *PeakHeld
	FirstOOMBytes uint64

	// Timeline, Memmap and Layout are the series plots are drawn from; only
	// with Config.Record. Layout is nil if the trace ended before the event
	// asked for.
	Timeline *Timeline
	Memmap   *Memmap
	Layout   *Layout
}

// Decisions says what an allocator did with a recording's segment
// decisions, and why.
type Decisions struct {
	// Mode is the allocator's segments option: "auto", "recorded" or
	// "model".
	Mode string
	// Outcome is what happened: "followed" (the model made every recorded
	// decision itself, to the end), "diverged" (it did up to DivergedEvent,
	// then decided alone), "model" (it decided alone from the start) or
	// "adopted" (every recorded segment was taken as it was).
	Outcome string
	// Reason says why the model decided alone: the first decision of its
	// own, or the settings that make the replay a what-if.
	Reason string
	// Followed counts the recorded device calls the model made itself.
	Followed int64
	// DivergedEvent and DivergedLine are the event (0-based) and its line
	// at which the model stopped following; -1 when it did not.
	DivergedEvent, DivergedLine int64
	// WhatIf lists the options, as KEY=VALUE, whose values differ from the
	// recording's: they made the allocator decide alone from the start.
	WhatIf []string
}

// Fragmentation is 1 - peak live / peak reserved (0 when nothing was reserved).
func (r *Result) Fragmentation() float64 {
	if r.PeakReservedBytes == 0 {
		return 0
	}
	return 1 - float64(r.PeakLiveBytes)/float64(r.PeakReservedBytes)
}

// Utilization is peak live / peak reserved (1 when nothing was reserved).
func (r *Result) Utilization() float64 {
	if r.PeakReservedBytes == 0 {
		return 1
	}
	return float64(r.PeakLiveBytes) / float64(r.PeakReservedBytes)
}

// EventsPerSecond is Events / ReplaySeconds.
func (r *Result) EventsPerSecond() float64 {
	if r.ReplaySeconds == 0 {
		return 0
	}
	return float64(r.Events) / r.ReplaySeconds
}

// latencyMax is the largest call time the histograms track exactly; slower
// calls (a page-faulting host reservation, say) are clamped to it.
const latencyMax = int64(10 * time.Second)

// histogram records call times.
type histogram struct {
	h     *hdrhistogram.Histogram
	sum   float64
	max   int64
	count int64
}

func newHistogram() histogram {
	return histogram{h: hdrhistogram.New(1, latencyMax, 3)}
}

func (h *histogram) record(d time.Duration) {
	ns := min(max(int64(d), 1), latencyMax)
	_ = h.h.RecordValue(ns) // ns is within the histogram's range
	h.sum += float64(d)
	h.max = max(h.max, int64(d))
	h.count++
}

func (h *histogram) summary() Latency {
	l := Latency{Count: h.count, Max: h.max}
	if h.count == 0 {
		return l
	}
	l.P50 = h.h.ValueAtQuantile(50)
	l.P90 = h.h.ValueAtQuantile(90)
	l.P99 = h.h.ValueAtQuantile(99)
	l.P999 = h.h.ValueAtQuantile(99.9)
	l.Mean = h.sum / float64(h.count)
	l.Curve = make([]int64, len(CurveQuantiles))
	for i, q := range CurveQuantiles {
		// The histogram answers with the top of a bucket, which may
		// exceed the largest call.
		l.Curve[i] = min(h.h.ValueAtQuantile(100*q), h.max)
	}
	l.Curve[len(l.Curve)-1] = h.max
	return l
}

// checkEvery is how often (in events) the checker compares counters that are
// costly to read, such as an allocator's stats map.
const checkEvery = 4096

// runner replays events against one allocator.
type runner struct {
	held     *heldTracker // nil for a probe
	name     string
	alloc    allocators.Allocator
	space    allocators.Space         // the real space, for stats
	vspace   *allocators.VirtualSpace // space, when it is virtual
	toucher  allocators.Toucher
	largest  allocators.LargestFreeReporter
	stepper  allocators.Stepper
	stats    allocators.StatsReporter
	snap     allocators.Snapshotter
	extent   allocators.Extenter
	streams  allocators.StreamAllocator
	segments allocators.SegmentObserver
	replayer allocators.Replayer
	// follower is the allocator when it follows recorded decisions, and
	// following says it still did after the last event.
	follower  allocators.DecisionFollower
	following bool
	// recordedCalls counts the trace's reserve and release events, and
	// sawStartState says it opened with a recorded start state.
	recordedCalls int64
	sawStartState bool
	// probe: Config.Probe.
	probe     bool
	chk       *checker
	stopOnOOM bool
	// With tolerateScratch, a failed allocation waits (scratchPending, its
	// slot scratchSlot) to be told apart: freed before the next allocation,
	// it was a scratch buffer; otherwise it was fatal.
	tolerateScratch bool
	scratchPending  bool
	scratchSlot     uint32
	spaceOptions    map[string]any
	// peakSnapshots: take Result.PeakSnapshot.
	peakSnapshots bool
	rec           *recQueue // nil unless Config.Record

	blocks paged.Table[allocators.Block] // by Slot; Size 0 means "no block"
	// oomNext: the recorded program failed the next allocation.
	oomNext bool

	live, inUse         uint64
	fragSum             float64
	fragSamples         int64
	allocHist, freeHist histogram
	busy                time.Duration
	// Calls are timed one in sampleEvery: the first, then each time the
	// countdown of its kind reaches zero (a division per call would cost
	// more than the counting).
	sampleEvery           uint64
	allocUntil, freeUntil uint64
	epoch                 time.Time // what clock counts from

	// A peak snapshot is taken lazily: when bytes in use reach a new peak
	// the allocation is remembered, and the pool is described just before
	// the next call that could change it without raising the peak further
	// (a free, a step, or an allocation the pool may have to grow or
	// collect for). A ramp of allocations costs one snapshot, not one each.
	peakPending         bool
	peakEvent, peakLine int64
	// Describing the pool costs a pass over its chunks. A trace whose peak
	// creeps up, a little at a time between frees, would have it described
	// at every step: quadratic. So describing stops once the chunks
	// described outnumber peakSnapshotBudget's allowance; peakStale then
	// says that the peak at peakEvent was not described, and Replay
	// replays the trace again to that event to describe it (Config.Reread).
	snapChunks int64
	peakStale  bool
	// checkpoint is snap when it can save its pool cheaply (useCheckpoints):
	// then each peak is saved as it is left, and peakSaved says the last
	// one is to be described at the end.
	checkpoint allocators.Checkpointer
	peakSaved  bool
	// A peak that the next events are sure to pass need not be saved at
	// all (risesAhead): on a trace whose peak creeps up, a free at a time,
	// most are. peakUnsaved says the last peak was passed over so; should
	// the rise fail to come (an allocation that fails), Replay replays the
	// trace to it, as for peakStale. Only with Config.Reread (canSkip).
	canSkip     bool
	peakUnsaved bool
	// batch is the batch being applied, and batchFirst the index of its
	// first event: the events risesAhead looks at.
	batch      []trace.Event
	batchFirst int64

	out     *bufio.Writer
	outErr  error
	lineBuf []byte
	closers []func()

	result Result
}

func newRunner(spec AllocatorSpec, cfg Config) (*runner, error) {
	sp, err := allocators.NewSpace(cfg.Space)
	if err != nil {
		return nil, err
	}
	r := &runner{name: spec.Name, space: sp, stopOnOOM: cfg.StopOnOOM}
	r.vspace, _ = sp.(*allocators.VirtualSpace)
	if c, ok := sp.(interface{ Close() error }); ok {
		r.closers = append(r.closers, func() { c.Close() })
	}
	var under allocators.Space = sp
	if cfg.Check {
		r.chk = newChecker(spec.Name, sp)
		under = checkedSpace{Space: sp, c: r.chk}
	}
	var observers regionObservers
	if !cfg.Probe {
		r.held = newHeldTracker(sp.Granule())
		observers = append(observers, r.held)
	}
	if cfg.Record != nil {
		rc, err := cfg.Record.withDefaults()
		if err != nil {
			r.close()
			return nil, err
		}
		r.rec = newRecQueue(newRecorder(rc, sp.Granule()))
		r.closers = append(r.closers, r.rec.stop)
		observers = append(observers, r.rec)
	}
	switch len(observers) {
	case 0:
	case 1:
		under = recordingSpace{Space: under, rec: observers[0]}
	default:
		under = recordingSpace{Space: under, rec: observers}
	}
	opts, fromRec := withRecorded(spec, cfg.Recorded)
	whatIf, err := whatIfOptions(spec, cfg.Recorded, opts, cfg.Space.Capacity)
	if err != nil {
		r.close()
		return nil, err
	}
	if len(whatIf) > 0 {
		// Other settings than the recording's make other decisions:
		// the recorded ones are not followed, from the start.
		opts = maps.Clone(opts)
		opts["segments"] = allocators.PyTorchSegmentsModel
	}
	a, eff, err := allocators.New(spec.Name, under, opts)
	if err != nil {
		r.close()
		if len(fromRec) > 0 {
			err = fmt.Errorf("%w (%s came from the trace header's %s; --set %s.KEY=VALUE overrides)",
				err, strings.Join(fromRec, ", "), trace.SettingsKey, spec.Name)
		}
		return nil, err
	}
	r.alloc = a
	if cfg.Space.Touch {
		r.toucher, _ = sp.(allocators.Toucher)
	}
	r.largest, _ = a.(allocators.LargestFreeReporter)
	r.stepper, _ = a.(allocators.Stepper)
	r.stats, _ = a.(allocators.StatsReporter)
	r.snap, _ = a.(allocators.Snapshotter)
	if j, ok := a.(allocators.RegionJoiner); ok && r.held != nil {
		r.held.joins = j.JoinsRegions()
	}
	if e, ok := a.(allocators.ExtentIsRegion); ok && r.held != nil {
		r.held.regionPerBlock = e.ExtentIsRegion()
	}
	r.extent, _ = a.(allocators.Extenter)
	r.streams, _ = a.(allocators.StreamAllocator)
	r.segments, _ = a.(allocators.SegmentObserver)
	r.replayer, _ = a.(allocators.Replayer)
	if ro, ok := a.(allocators.RangeObserver); ok {
		for _, rg := range cfg.ExpandableRanges {
			ro.RecordedRange(rg.Addr, rg.Small, rg.Stream)
		}
	}
	r.probe = cfg.Probe
	r.stopOnOOM = r.stopOnOOM || cfg.Probe
	r.tolerateScratch = cfg.TolerateScratch
	r.peakSnapshots = cfg.PeakSnapshots && r.snap != nil
	if c, ok := a.(allocators.Checkpointer); ok && r.peakSnapshots && useCheckpoints {
		r.checkpoint = c
	}
	r.canSkip = r.peakSnapshots && cfg.Reread != nil && skipPassedPeaks
	if r.chk != nil {
		if l, ok := a.(allocators.AlignmentLimiter); ok {
			r.chk.maxAlign = l.MaxAlign()
		}
		if err := r.chk.err(); err != nil { // a fixed arena reserves up front
			r.close()
			return nil, err
		}
	}
	if cfg.Events != nil {
		if w := cfg.Events(spec.Name); w != nil {
			r.out = bufio.NewWriterSize(w, 64<<10)
		}
	}
	r.allocHist, r.freeHist = newHistogram(), newHistogram()
	r.epoch = time.Now()
	r.sampleEvery = uint64(cfg.LatencySample)
	if cfg.LatencySample <= 0 {
		r.sampleEvery = DefaultLatencySample
	}
	r.result = Result{Allocator: spec.Name, Options: eff, FirstOOMEvent: -1, FirstOOMLine: -1,
		OptionsFromRecording: fromRec}
	if f, ok := a.(allocators.DecisionFollower); ok {
		r.follower, r.following = f, f.Following()
		r.result.Decisions = &Decisions{DivergedEvent: -1, DivergedLine: -1, WhatIf: whatIf}
	}
	return r, nil
}

// withRecorded returns spec's options over the recorded settings that are
// options of spec's allocator, and the keys taken from the recording.
func withRecorded(spec AllocatorSpec, rec trace.RecordedSettings) (allocators.Options, []string) {
	if rec.Allocator != spec.Name || len(rec.Options) == 0 {
		return spec.Options, nil
	}
	f, err := allocators.Lookup(spec.Name)
	if err != nil {
		return spec.Options, nil
	}
	opts := allocators.Options{}
	var from []string
	for _, k := range rec.Keys() {
		if _, set := spec.Options[k]; set || !slices.ContainsFunc(f.Options, func(o allocators.Option) bool { return o.Key == k }) {
			continue
		}
		opts[k] = rec.Options[k]
		from = append(from, k)
	}
	if len(from) == 0 {
		return spec.Options, nil
	}
	for k, v := range spec.Options {
		opts[k] = v
	}
	return opts, from
}

func (r *runner) close() {
	for _, c := range r.closers {
		c()
	}
	r.closers = nil
}

// apply replays a batch of events; first is the trace index of events[0].
func (r *runner) apply(events []trace.Event, first int64) error {
	if r.result.Stopped {
		return nil
	}
	start := time.Now()
	defer func() { r.busy += time.Since(start) }()
	r.batch, r.batchFirst = events, first
	defer func() {
		r.batch = nil
		if r.rec != nil {
			r.rec.flush()
		}
	}()
	for j := range events {
		ev := &events[j]
		i := first + int64(j)
		r.result.Events++
		failed := r.result.FailedAllocs
		if r.rec != nil {
			r.rec.now = i
		}
		if r.held != nil {
			r.held.now = i
		}
		switch ev.Op {
		case trace.OpAlloc:
			if r.scratchPending {
				// Another allocation before the failed one's free: the
				// failure was fatal.
				r.scratchPending = false
				if r.stopOnOOM {
					r.result.Stopped = true
					return nil
				}
			}
			if err := r.doAlloc(ev, i); err != nil {
				return err
			}
		case trace.OpFree:
			if r.scratchPending && ev.Slot == r.scratchSlot {
				r.scratchPending = false
				r.result.ScratchFailures++
			}
			if err := r.doFree(ev, i); err != nil {
				return err
			}
		case trace.OpStep:
			if r.stepper != nil {
				r.takePeakSnapshot()
				r.stepper.Step()
			}
			if r.rec != nil {
				r.rec.mark(i, ev)
			}
		case trace.OpMark:
			if r.rec != nil {
				r.rec.mark(i, ev)
			}
			r.oomNext = trace.IsRecordedOOMMark(ev.Name)
			r.sawStartState = r.sawStartState || ev.Name == allocators.StartStateMark
			if r.replayer != nil {
				r.replayer.Mark(ev.Name)
			}
		case trace.OpReserve:
			r.recordedCalls++
			if r.segments != nil {
				r.takePeakSnapshot()
				r.segments.RecordedReserve(ev.Addr, ev.Size, ev.Stream)
			}
		case trace.OpRelease:
			r.recordedCalls++
			if r.segments != nil {
				r.takePeakSnapshot()
				r.segments.RecordedRelease(ev.Addr, ev.Size)
			}
		}
		if r.following && !r.follower.Following() {
			r.following = false
			r.result.Decisions.DivergedEvent, r.result.Decisions.DivergedLine = i, ev.Line
		}
		if r.probe {
			r.observePeaks()
			if r.result.Stopped {
				return nil
			}
			continue
		}
		peakBefore := r.result.PeakReservedBytes
		reserved, frag := r.observe()
		if r.held != nil && r.result.PeakReservedBytes > peakBefore {
			r.held.peak(i, ev.Line)
		}
		if r.rec != nil {
			r.rec.after(i, ev.Line, r.live, r.inUse, reserved, frag, r.result.FailedAllocs > failed)
		}
		if r.chk != nil {
			var stats map[string]int64
			if r.stats != nil && r.result.Events%checkEvery == 0 {
				stats = r.stats.Stats()
			}
			r.chk.accounting(r.inUse, r.space.Stats(), stats)
			if err := r.chk.err(); err != nil {
				return fmt.Errorf("event %d (line %d): %w", i, ev.Line, err)
			}
		}
		if r.result.Stopped {
			return nil
		}
	}
	return r.outErr
}

func (r *runner) doAlloc(ev *trace.Event, i int64) error {
	recordedOOM := r.oomNext
	r.oomNext = false
	r.blocks.Grow(ev.Slot)
	if ev.Size == 0 {
		*r.blocks.At(ev.Slot) = allocators.Block{}
		r.result.OKAllocs++
		r.result.ZeroSizeAllocs++
		r.emit(i, ev, allocators.Block{}, true)
		return nil
	}
	if r.peakPending && (r.largest == nil || r.largest.LargestFreeBytes() < ev.Size) {
		r.takePeakSnapshot() // the pool may grow, or be collected, to serve it
	}
	timed := r.allocUntil == 0 && !r.probe
	if timed {
		r.allocUntil = r.sampleEvery
	}
	r.allocUntil--
	var t0 time.Duration
	if timed {
		t0 = r.clock()
	}
	var b allocators.Block
	var err error
	switch {
	case r.replayer != nil && ev.Flags&trace.HasAddr != 0:
		b, err = r.replayer.AllocateAt(ev.Size, ev.Align, ev.Stream, ev.Addr)
	case r.streams != nil:
		b, err = r.streams.AllocateOnStream(ev.Size, ev.Align, ev.Stream)
	default:
		b, err = r.alloc.Allocate(ev.Size, ev.Align)
	}
	if err == nil && r.toucher != nil {
		r.toucher.Touch(b.Addr, ev.Size)
	}
	if timed {
		r.allocHist.record(r.clock() - t0)
	}
	if err != nil {
		if !errors.Is(err, allocators.ErrOutOfMemory) {
			return fmt.Errorf("event %d (line %d): allocating %d bytes: %w", i, ev.Line, ev.Size, err)
		}
		*r.blocks.At(ev.Slot) = allocators.Block{}
		r.result.FailedAllocs++
		if recordedOOM {
			r.result.RecordedOOMs++
			r.result.OOMsMatched++
		}
		if r.result.FirstOOMEvent < 0 {
			r.result.FirstOOMEvent, r.result.FirstOOMLine = i, ev.Line
			r.result.FirstOOMBytes = ev.Size
			if r.held != nil {
				r.result.HeldAtOOM = r.held.current(i, ev.Line)
			}
			if r.snap != nil {
				s := r.snap.Snapshot()
				if s.Request == nil {
					s.Request = &bfcstate.Request{Bytes: ev.Size}
				}
				s.Event, s.Line = i, ev.Line
				r.result.OOMSnapshot = s
			}
		}
		r.emit(i, ev, allocators.Block{}, false)
		if r.tolerateScratch && !recordedOOM {
			r.scratchPending, r.scratchSlot = true, ev.Slot
			return nil
		}
		if r.stopOnOOM {
			r.result.Stopped = true
		}
		return nil
	}
	*r.blocks.At(ev.Slot) = b
	r.result.OKAllocs++
	if recordedOOM {
		r.result.RecordedOOMs++
	}
	r.live += ev.Size
	r.inUse += b.Size
	if r.rec != nil || r.held != nil {
		at := b // the bytes the block takes from the space, as plots and held ranges show it
		if r.extent != nil {
			at.Addr, at.Size = r.extent.Extent(b)
		}
		if r.rec != nil {
			r.rec.alloc(ev.Slot, at, ev.Size, ev.Tag, ev.Stack, ev.ID, ev.Line)
		}
		if r.held != nil {
			r.held.alloc(ev.Slot, at, ev.Size, ev.Tag, ev.Stack)
		}
	}
	// observe has not yet seen this allocation: the result still holds the
	// peak before it.
	if r.inUse > r.result.PeakInUseBytes {
		if r.peakSnapshots {
			r.peakEvent, r.peakLine = i, ev.Line
			r.peakPending, r.peakUnsaved = true, false
		}
		if r.rec != nil {
			r.rec.peak(i, ev.Line)
		}
	}
	if ev.Flags&trace.HasAddr != 0 {
		r.result.AddrChecked++
		if ev.Addr == b.Addr {
			r.result.AddrMatched++
		}
	}
	if ev.Flags&trace.HasBlock != 0 {
		r.result.BlockChecked++
		if ev.Block == b.Size {
			r.result.BlockMatched++
		}
	}
	if r.chk != nil {
		r.chk.onAlloc(ev.Size, ev.Align, b)
	}
	r.emit(i, ev, b, true)
	return nil
}

func (r *runner) doFree(ev *trace.Event, i int64) error {
	bp := r.blocks.At(ev.Slot)
	b := *bp
	if b.Size == 0 {
		// A size-0 allocation, or one that failed: nothing to give back.
		r.emit(i, ev, b, true)
		return nil
	}
	*bp = allocators.Block{}
	if r.chk != nil {
		r.chk.onFree(ev.Size, b)
	}
	if r.peakPending && r.canSkip && r.risesAhead(i, r.inUse-b.Size) {
		r.peakPending, r.peakUnsaved = false, true
	} else {
		r.takePeakSnapshot()
	}
	timed := r.freeUntil == 0 && !r.probe
	if timed {
		r.freeUntil = r.sampleEvery
	}
	r.freeUntil--
	var t0 time.Duration
	if timed {
		t0 = r.clock()
	}
	err := r.alloc.Free(b)
	if timed {
		r.freeHist.record(r.clock() - t0)
	}
	if err != nil {
		return fmt.Errorf("event %d (line %d): freeing id %d: %w", i, ev.Line, ev.ID, err)
	}
	r.live -= ev.Size
	r.inUse -= b.Size
	if r.rec != nil {
		r.rec.free(ev.Slot, ev.Line)
	}
	if r.held != nil {
		r.held.free(ev.Slot)
	}
	r.emit(i, ev, b, true)
	return nil
}

// takePeakSnapshot describes the pool if it is at a peak not yet described.
func (r *runner) takePeakSnapshot() {
	if !r.peakPending {
		return
	}
	r.peakPending = false
	if r.checkpoint != nil {
		r.checkpoint.Checkpoint() // described once, at the end (finish)
		r.peakSaved = true
		return
	}
	if r.snapChunks > peakSnapshotBudget(r.result.Events) {
		r.peakStale = true
		return
	}
	s := r.snap.Snapshot()
	r.snapChunks += int64(len(s.Chunks))
	r.peakStale = false
	r.result.PeakSnapshot = atPeak(s, r.peakEvent, r.peakLine)
}

// peakLookahead is how many events risesAhead looks at, at most: enough for
// the next rise of a peak that creeps up between frees, and few enough that
// looking costs less than saving the pool.
const peakLookahead = 64

// skipPassedPeaks lets the replay skip saving peaks that the next events
// pass (risesAhead), and skipNeedsRoom has it skip only those it is sure
// of; tests turn them off.
var skipPassedPeaks, skipNeedsRoom = true, true

// risesAhead reports whether the events after event i, in its batch and
// at most peakLookahead of them, are sure to take bytes in use, inUse
// after event i, above the peak, provided that every allocation among them
// succeeds. It follows a lower bound: an allocation adds its request (a
// block is never smaller); a free takes away the larger of the block its
// slot holds now and its request (the block of an allocation made among
// these events is not known, and whatever its slot held before is
// no smaller than what this counts for it).
//
// An allocation that fails would leave the peak unpassed, and the trace to
// be read again; so it answers no unless the pool's largest free block
// holds the allocations up to the rise with room to spare: twice their
// requests, and 1 KiB each for rounding.
func (r *runner) risesAhead(i int64, inUse uint64) bool {
	if r.largest == nil {
		return false
	}
	room := r.largest.LargestFreeBytes()
	rest := r.batch[i-r.batchFirst+1:]
	rest = rest[:min(len(rest), peakLookahead)]
	peak := r.result.PeakInUseBytes
	var need uint64
	for k := range rest {
		ev := &rest[k]
		switch ev.Op {
		case trace.OpAlloc:
			if ev.Size == 0 {
				continue
			}
			if need += 2*ev.Size + 1<<10; skipNeedsRoom && (ev.Size > room || need > room) {
				return false
			}
			inUse += ev.Size
			if inUse > peak {
				return true
			}
		case trace.OpFree:
			n := ev.Size
			if int(ev.Slot) < r.blocks.Len() {
				n = max(n, r.blocks.At(ev.Slot).Size)
			}
			inUse -= min(n, inUse)
		}
	}
	return false
}

// atPeak marks s as the pool at the peak reached by event, on line: a peak
// is no failed request.
func atPeak(s *bfcstate.Snapshot, event, line int64) *bfcstate.Snapshot {
	s.Request = nil
	s.Event, s.Line = event, line
	return s
}

// peakSnapshotBudget is how many chunks peak snapshots may have described,
// in all, by the time a replay has seen events events: one per eight
// events, and 65,536 to begin with, so that an ordinary trace, whose peak
// rises a few times over a pool of thousands of chunks, has every one
// described as it happens. Past it, the last peak costs one more replay up
// to it (snapshotAt), at most the trace again.
func peakSnapshotBudget(events int64) int64 {
	return peakBudgetBase + events/peakBudgetEventsPerChunk
}

// useCheckpoints lets allocators that can (allocators.Checkpointer) save
// their pool at each peak instead of describing it; tests turn it off to
// exercise the budget.
var useCheckpoints = true

// The terms of peakSnapshotBudget; tests lower them.
var peakBudgetBase, peakBudgetEventsPerChunk int64 = 1 << 16, 8

// observe updates the peaks and samples the fragmentation metric; it
// returns the bytes reserved and the metric. It runs after every event, so
// the metric's mean is over the trace's events.
func (r *runner) observe() (reserved uint64, frag float64) {
	res := &r.result
	reserved = r.observePeaks()
	if reserved > r.inUse {
		free := reserved - r.inUse
		var largest uint64
		if r.largest != nil {
			largest = min(r.largest.LargestFreeBytes(), free)
		}
		frag = float64(free-largest) / float64(free)
	}
	r.fragSum += frag
	r.fragSamples++
	if frag > res.TFFragmentationMax { // frag is never NaN: math.Max's care is not needed
		res.TFFragmentationMax = frag
	}
	return reserved, frag
}

// observePeaks updates the peaks, all a probe measures, and returns the
// bytes reserved.
func (r *runner) observePeaks() (reserved uint64) {
	res := &r.result
	if r.vspace != nil {
		reserved = r.vspace.Stats().ReservedBytes // a direct call, inlined
	} else {
		reserved = r.space.Stats().ReservedBytes
	}
	res.PeakLiveBytes = max(res.PeakLiveBytes, r.live)
	res.PeakInUseBytes = max(res.PeakInUseBytes, r.inUse)
	if reserved > res.PeakReservedBytes {
		res.PeakReservedBytes = reserved
		res.InternalWasteAtPeakBytes = r.inUse - r.live
	}
	return reserved
}

// clock reads the monotonic clock, as the time since r.epoch: one read of
// the system's clock where time.Now makes two (the wall clock as well), so
// that timing a call costs two reads, not three.
func (r *runner) clock() time.Duration { return time.Since(r.epoch) }

// emit writes one per-event result line.
func (r *runner) emit(i int64, ev *trace.Event, b allocators.Block, ok bool) {
	if r.out == nil || r.outErr != nil {
		return
	}
	l := append(r.lineBuf[:0], `{"i":`...)
	l = strconv.AppendInt(l, i, 10)
	l = append(l, `,"allocator":`...)
	l = strconv.AppendQuote(l, r.name)
	l = append(l, `,"op":"`...)
	l = append(l, ev.Op.String()...)
	l = append(l, `","id":`...)
	l = strconv.AppendUint(l, ev.ID, 10)
	if b.Size > 0 {
		l = append(l, `,"addr":`...)
		l = strconv.AppendUint(l, b.Addr, 10)
	}
	l = append(l, `,"size":`...)
	l = strconv.AppendUint(l, ev.Size, 10)
	l = append(l, `,"ok":`...)
	l = strconv.AppendBool(l, ok)
	if b.Size > 0 {
		l = append(l, `,"block":`...)
		l = strconv.AppendUint(l, b.Size, 10)
	}
	l = append(l, `,"line":`...)
	l = strconv.AppendInt(l, ev.Line, 10)
	l = append(l, "}\n"...)
	r.lineBuf = l
	if _, err := r.out.Write(l); err != nil {
		r.outErr = fmt.Errorf("writing events: %w", err)
	}
}

// finish fills in the Result once the trace is done.
func (r *runner) finish() error {
	res := &r.result
	r.blocks = paged.Table[allocators.Block]{}
	if r.rec != nil {
		// The layout, the memory map and the pool's description are
		// built now, beside the allocator's own tables, and the heap
		// would grow to twice what the replay held before it is
		// collected; large new slices would not fit among the pages
		// the dropped tables leave free, either. So the heap is
		// collected, and what is free given back to the system, once
		// what the trace's reading held is garbage, and again once
		// the recorder's tables are: a large replay's peak is then
		// near what it holds (docs/performance.md).
		debug.FreeOSMemory()
		res.Timeline, res.Memmap, res.Layout = r.rec.finish(res.Events)
		r.rec = nil
		debug.FreeOSMemory()
	}
	if r.held != nil {
		res.Held = r.held.finish()
		r.held = nil
	}
	r.takePeakSnapshot()
	if r.peakUnsaved {
		// The rise that was to pass the last peak never came.
		r.peakStale, r.peakSaved = true, false
	}
	if r.peakSaved {
		r.result.PeakSnapshot = atPeak(r.checkpoint.CheckpointSnapshot(), r.peakEvent, r.peakLine)
	}
	st := r.space.Stats()
	res.Space = st
	res.FinalReservedBytes = st.ReservedBytes
	res.SpaceOptions = r.spaceOptions
	if r.fragSamples > 0 {
		res.TFFragmentationMean = r.fragSum / float64(r.fragSamples)
	}
	res.LatencySampleEvery = int(r.sampleEvery)
	res.AllocLatency = r.allocHist.summary()
	res.FreeLatency = r.freeHist.summary()
	res.ReplaySeconds = r.busy.Seconds()
	if r.stats != nil && !r.probe {
		res.AllocatorStats = r.stats.Stats()
	}
	r.finishDecisions()
	if r.chk != nil {
		r.chk.accounting(r.inUse, st, res.AllocatorStats)
		if err := r.chk.err(); err != nil {
			return fmt.Errorf("at the end of the trace: %w", err)
		}
	}
	if r.out != nil && r.outErr == nil {
		if err := r.out.Flush(); err != nil {
			r.outErr = fmt.Errorf("writing events: %w", err)
		}
	}
	return r.outErr
}
