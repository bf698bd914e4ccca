package search

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/sim"
)

// FitResult is the smallest device one allocator runs a trace on.
type FitResult struct {
	Allocator string
	// Options are the allocator's effective options in the replay without a
	// limit, and Set the keys of those given (not defaults, not the
	// recording's).
	Options map[string]any
	Set     []string
	// MinCapacityBytes is the smallest capacity (or memory limit, see
	// LimitOption) on which no allocation failed, to GranularityBytes; 0
	// when none up to MaxProbedBytes did (Fits is false).
	MinCapacityBytes uint64
	Fits             bool
	// MaxProbedBytes is the largest capacity tried.
	MaxProbedBytes   uint64
	GranularityBytes uint64
	// LimitOption is the option the search set ("memory_limit" for
	// pytorch: set_per_process_memory_fraction's limit on a device of the
	// trace's size); "" when it set the device's capacity.
	LimitOption string
	// Probes counts the replays the search made, the one without a limit
	// and those a round's success made moot included, and Trials lists
	// them: round by round, each round's by capacity, the moot ones marked
	// Cancelled whether or not they had begun (so the list does not depend
	// on which probe ended first).
	Probes int
	Trials []Probe
	// PeakLiveBytes and PeakReservedBytes are the replay's without a limit:
	// the bounds the search started from.
	PeakLiveBytes, PeakReservedBytes uint64
	// ScratchFailures counts the failed scratch allocations at the smallest
	// capacity (tolerated: Options.TolerateScratch).
	ScratchFailures int64
	// Decisions say what the allocator did with the recording's decisions
	// at the smallest capacity.
	Decisions *sim.Decisions
}

// Fit finds, for each allocator the trace was loaded with, the smallest
// device on which its replay has no failed allocation: for an allocator
// whose reference takes a memory limit (pytorch), the smallest limit on
// the trace's device. It searches as follows:
//
//  1. The replay without a limit (Load's) bounds it: no allocator can run
//     on less than the peak of live bytes (a capacity just below it fails
//     unprobed), and the replay's own peak of reserved bytes is taken to
//     be enough. That is probed only if nothing below it succeeds, as a
//     limit can change what an allocator does before it is reached
//     (PyTorch checks a whole segment's size against it, and its garbage
//     collection works towards a fraction of it); if it fails, the search
//     climbs above it. A replay that fails on the whole device is tried
//     on devices twice as large, up to the largest a space holds.
//  2. Rounds of probesPerRound probes run on the workers at once, each a
//     replay that stops at its first fatal failure. The first round asks
//     whether the peak less one step already fails; every round splits
//     the interval between the largest failing and the smallest
//     succeeding capacity evenly, and a succeeding probe that reserved
//     less than it was allowed proposes its own peak for the next. A
//     round takes the smallest capacity that succeeded as the new upper
//     end and the largest below it that failed as the lower.
//  3. It ends when the two are one step apart: the answer is the upper.
//
// The search assumes that a replay that succeeds on a device succeeds on
// any larger one. Caching allocators need not behave so; the trials list
// every capacity tried, and the capacities depend only on the answers, so
// the same trace gives the same answer on any machine.
func (t *Trace) Fit(ctx context.Context) ([]FitResult, error) {
	out := make([]FitResult, len(t.Unlimited))
	for i := range t.Unlimited {
		r, err := t.fit(ctx, i)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// Fits replays the trace once against spec on capacity bytes (the memory
// limit, for an allocator that takes one) and says whether every
// allocation is served.
func (t *Trace) Fits(ctx context.Context, spec sim.AllocatorSpec, capacity uint64) (bool, error) {
	p, err := t.Probe(ctx, spec, capacity)
	return p.OK, err
}

// Probe is Fits with what the replay found: whether it fit (OK), and the
// most the allocator held.
func (t *Trace) Probe(ctx context.Context, spec sim.AllocatorSpec, capacity uint64) (Probe, error) {
	return t.probe(ctx, spec, capacity)
}

// FitOne finds the smallest device for spec, an allocator with options,
// on this trace: Fit for one configuration, whose replay without a limit
// is made first.
func (t *Trace) FitOne(ctx context.Context, spec sim.AllocatorSpec) (FitResult, error) {
	res, err := sim.Replay(ctx, t.tape.reader(), t.config([]sim.AllocatorSpec{spec}))
	if err != nil {
		return FitResult{}, err
	}
	return t.search(ctx, spec, res[0])
}

func (t *Trace) fit(ctx context.Context, i int) (FitResult, error) {
	return t.search(ctx, t.specs[i], t.Unlimited[i])
}

// search is Fit for spec, given its replay without a limit.
func (t *Trace) search(ctx context.Context, spec sim.AllocatorSpec, u sim.Result) (FitResult, error) {
	f, err := allocators.Lookup(spec.Name)
	if err != nil {
		return FitResult{}, err
	}
	gran := f.Granularity
	if gran == 0 {
		gran = allocators.VirtualGranule
	}
	res := FitResult{Allocator: spec.Name, Options: u.Options, Set: slices.Sorted(maps.Keys(spec.Options)),
		GranularityBytes: gran, LimitOption: f.LimitOption,
		PeakLiveBytes: u.PeakLiveBytes, PeakReservedBytes: u.PeakReservedBytes, Probes: 1}
	device := t.opt.Space.Capacity
	unlimited := Probe{Allocator: spec.Name, Options: spec.Options, CapacityBytes: device,
		OK: u.FailedAllocs == u.ScratchFailures, PeakReservedBytes: u.PeakReservedBytes,
		FailedEvent: u.FirstOOMEvent, ScratchFailures: u.ScratchFailures, Decisions: u.Decisions}
	res.Trials = append(res.Trials, unlimited)
	s := &bisection{t: t, spec: spec, gran: gran, res: &res}
	// Known to fail: anything below the peak of live bytes.
	s.lo = 0
	if u.PeakLiveBytes > 0 {
		s.lo = alignDown(u.PeakLiveBytes-1, gran)
	}
	switch {
	case !unlimited.OK:
		// Not even the whole device: try larger ones.
		s.lo = max(s.lo, alignDown(device, gran))
		if err := s.grow(ctx, device); err != nil {
			return FitResult{}, err
		}
		if !res.Fits {
			return res, nil
		}
	case f.LimitOption != "" || u.PeakReservedBytes < device:
		// The peak without a limit, as a limit: taken to succeed until a
		// probe below it does, or it is probed at the end.
		s.hi, s.tentative, res.Fits = alignUp(max(u.PeakReservedBytes, 1), gran), true, true
	default:
		s.hi, s.best = device, unlimited
		res.Fits = true
	}
	if err := s.narrow(ctx); err != nil {
		return FitResult{}, err
	}
	for s.tentative {
		if err := s.confirm(ctx); err != nil {
			return FitResult{}, err
		}
		if err := s.narrow(ctx); err != nil {
			return FitResult{}, err
		}
	}
	res.MinCapacityBytes = s.hi
	res.ScratchFailures, res.Decisions = s.best.ScratchFailures, s.best.Decisions
	res.MaxProbedBytes = max(res.MaxProbedBytes, device)
	for _, p := range res.Trials {
		res.MaxProbedBytes = max(res.MaxProbedBytes, p.CapacityBytes)
	}
	return res, nil
}

// bisection is the state of one allocator's search: capacities at or
// below lo fail, hi succeeds (with best's probe).
type bisection struct {
	t      *Trace
	spec   sim.AllocatorSpec
	gran   uint64
	lo, hi uint64
	best   Probe
	// tentative says hi has not been probed: it is the peak without a
	// limit, which a limit need not leave enough (confirm).
	tentative bool
	res       *FitResult
	// next is a capacity a succeeding probe proposed, or 0.
	next uint64
}

// grow probes capacities from twice from on until one succeeds, or the
// largest a space holds fails.
func (s *bisection) grow(ctx context.Context, from uint64) error {
	for c := from; c < allocators.MaxCapacity; {
		c = min(max(c*2, c+s.gran), allocators.MaxCapacity)
		c = alignDown(c, s.gran)
		p, err := s.run(ctx, c)
		if err != nil {
			return err
		}
		if p.OK {
			s.hi, s.best, s.res.Fits = c, p, true
			s.propose(p)
			return nil
		}
		s.lo = c
	}
	return nil
}

// confirm probes hi, the peak without a limit, and looks above it if it
// fails.
func (s *bisection) confirm(ctx context.Context) error {
	s.tentative = false
	p, err := s.run(ctx, s.hi)
	if err != nil {
		return err
	}
	if p.OK {
		s.best, s.res.Fits = p, true
		return nil
	}
	s.res.Fits = false
	// A limit made the allocator fail below where it reached without one
	// (PyTorch checks a whole request against its limit): step up.
	s.lo = s.hi
	for step := s.gran; ; step *= 2 {
		c := s.lo + step
		if c >= allocators.MaxCapacity {
			return s.grow(ctx, s.lo)
		}
		p, err := s.run(ctx, c)
		if err != nil {
			return err
		}
		if p.OK {
			s.hi, s.best, s.res.Fits = c, p, true
			return nil
		}
		s.lo = c
	}
}

// narrow probes between lo and hi until they are one step apart.
func (s *bisection) narrow(ctx context.Context) error {
	first := true
	for s.hi-s.lo > s.gran {
		if err := s.round(ctx, s.points(probesPerRound, first)); err != nil {
			return err
		}
		first = false
	}
	return nil
}

// probesPerRound is how many capacities a round probes at once: the
// interval shrinks fourfold a round. It is fixed, not the number of
// workers, so that the capacities tried, and the answer, are the same on
// any machine.
const probesPerRound = 3

// finalSteps is how many steps an interval may span for its every
// capacity to be probed in one round: rounds of probesPerRound would take
// two more.
const finalSteps = 9

// points picks a round's capacities: at most n, strictly between lo and
// hi, in ascending order.
func (s *bisection) points(n int, first bool) []uint64 {
	var pts []uint64
	add := func(c uint64) {
		c = alignDown(c, s.gran)
		if c > s.lo && c < s.hi && !slices.Contains(pts, c) && len(pts) < n {
			pts = append(pts, c)
		}
	}
	if s.next > 0 {
		add(s.next) // a succeeding probe's own peak
		s.next = 0
	}
	if first {
		add(s.hi - s.gran) // the peak less one step: often the answer
	}
	steps := (s.hi - s.lo) / s.gran
	if steps <= finalSteps {
		// Few capacities are left: probe them all in one round, rather
		// than a round or two more of full replays (the smallest that
		// succeeds cancels the rest).
		for c := s.lo + s.gran; c < s.hi; c += s.gran {
			pts = append(pts, c)
		}
		slices.Sort(pts)
		return slices.Compact(pts)
	}
	for k := uint64(1); len(pts) < n && k <= uint64(n); k++ {
		add(s.lo + steps*k/uint64(n+1)*s.gran)
	}
	if len(pts) == 0 {
		add(s.lo + (s.hi-s.lo)/2)
	}
	slices.Sort(pts)
	return pts
}

// round probes points at once, then takes the smallest that succeeded as
// hi and the largest below it that failed as lo. A success at c makes
// every probe above c moot, and cancels it; nothing else is cancelled, so
// that the outcome never depends on which probe ends first.
func (s *bisection) round(ctx context.Context, points []uint64) error {
	cancels := make([]context.CancelFunc, len(points))
	ctxs := make([]context.Context, len(points))
	for i := range points {
		ctxs[i], cancels[i] = context.WithCancel(ctx)
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	probes := make([]*Probe, len(points))
	fns := make([]func(context.Context) error, len(points))
	for i, c := range points {
		fns[i] = func(context.Context) error {
			if ctxs[i].Err() != nil {
				return nil // moot before it began
			}
			p, err := s.t.probe(ctxs[i], s.spec, c)
			if err != nil {
				if errors.Is(err, context.Canceled) && ctx.Err() == nil {
					return nil // made moot
				}
				return err
			}
			probes[i] = &p
			if p.OK {
				for j := i + 1; j < len(points); j++ {
					cancels[j]()
				}
			}
			return nil
		}
	}
	err := runAll(ctx, s.t.opt.workers(), fns)
	// The trials, whatever order the probes ended in: those below the
	// smallest success (every one ran to its end), that success, and the
	// rest marked moot, whether or not they began or ended, so that the
	// record does not depend on timing.
	won := -1
	for i, p := range probes {
		if p != nil && p.OK {
			won = i
			break
		}
	}
	for i, p := range probes {
		switch {
		case won >= 0 && i > won:
			s.record(Probe{Allocator: s.spec.Name, Options: s.spec.Options, CapacityBytes: points[i], Cancelled: true, FailedEvent: -1})
		case p != nil:
			s.record(*p)
		case err != nil && ctx.Err() != nil:
			s.record(Probe{Allocator: s.spec.Name, Options: s.spec.Options, CapacityBytes: points[i], Cancelled: true, FailedEvent: -1})
		}
	}
	if err != nil {
		return err
	}
	if won >= 0 {
		s.hi, s.best, s.tentative = points[won], *probes[won], false
		s.propose(*probes[won])
	}
	for i, p := range probes {
		if p != nil && !p.OK && points[i] < s.hi {
			s.lo = max(s.lo, points[i])
		}
	}
	return nil
}

// propose takes a succeeding probe's peak as the next capacity to try:
// an allocator that held less than it was given may run on that much.
func (s *bisection) propose(p Probe) {
	if c := alignUp(p.PeakReservedBytes, s.gran); c > s.lo && c < s.hi {
		s.next = c
	}
}

// run makes one probe and records it.
func (s *bisection) run(ctx context.Context, c uint64) (Probe, error) {
	p, err := s.t.probe(ctx, s.spec, c)
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			s.record(Probe{Allocator: s.spec.Name, Options: s.spec.Options, CapacityBytes: c, Cancelled: true, FailedEvent: -1})
		}
		return Probe{}, err
	}
	s.record(p)
	return p, nil
}

func (s *bisection) record(p Probe) {
	s.res.Trials = append(s.res.Trials, p)
	s.res.Probes++
	if s.t.opt.Progress != nil {
		s.t.opt.Progress(p)
	}
}

func alignUp(x, a uint64) uint64   { return (x + a - 1) / a * a }
func alignDown(x, a uint64) uint64 { return x / a * a }
