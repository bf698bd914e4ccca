package scale

import (
	"cmp"
	"context"
	"maps"
	"slices"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/search"
	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
)

// FitInOptions say what FitIn searches.
type FitInOptions struct {
	// Capacity is the device (or memory limit) the program must fit.
	Capacity uint64
	// Spec is the allocator and its settings.
	Spec sim.AllocatorSpec
	// Search says how each replay runs.
	Search search.Options
	// Max bounds the values tried; 0 is 64 times the largest recorded.
	Max int64
	// Checked, if set, is told of each value tried.
	Checked func(value int64, fits bool)
}

// Largest is FitIn's answer.
type Largest struct {
	// Value is the largest value whose program fits; Fits is false when
	// not even the smallest value, 1, does (Value is then 0).
	Value int64
	Fits  bool
	// AtMax says the search stopped at FitInOptions.Max, which fits.
	AtMax bool
	// MinCapacityBytes is the smallest capacity the program at Value runs
	// on (fit's search).
	MinCapacityBytes uint64
	Settings         map[string]string
	// Checks counts the programs tried; Replays, the replays of them
	// (probes under the capacity, and the fit's).
	Checks, Replays int
}

// Load loads the program onto a search tape, read as a recording's trace
// would be (trace.NewEventReader): a search of it is a search of any
// trace.
func (p *Program) Load(ctx context.Context, specs []sim.AllocatorSpec, opt search.Options) (*search.Trace, error) {
	setup, err := sim.SetupOf(p.Header)
	if err != nil {
		return nil, err
	}
	r := trace.NewEventReader(p.Header, p.Stacks, p.Events, p.Header.Name)
	return search.Load(ctx, r, setup, specs, opt)
}

// At is the program with every step at value x, as many steps as were
// recorded.
func (m *Model) At(rec *Recording, x int64) (*Program, error) {
	targets := make([]int64, len(m.Steps))
	for i := range targets {
		targets[i] = x
	}
	return m.Write(rec, targets)
}

// FitIn finds the largest value whose program (every step at it) fits
// opt.Capacity: from the largest recorded value it doubles until a program
// does not fit (or halves until one does), then bisects between the two.
// Each value tried costs one replay of its program under the capacity;
// the answer's smallest capacity, one fit more.
func (m *Model) FitIn(ctx context.Context, rec *Recording, opt FitInOptions) (Largest, error) {
	// The settings the programs run with: the recording's, and the spec's
	// over them.
	settings := map[string]string{}
	if rs, ok, err := rec.Header.Settings(); err == nil && ok && rs.Allocator == opt.Spec.Name {
		maps.Copy(settings, rs.Options)
	}
	maps.Copy(settings, opt.Spec.Options)
	v := newValueSearch(m, rec, opt)
	good, alive, err := v.largest(ctx, 0, v.hi, []sim.AllocatorSpec{opt.Spec})
	res := Largest{Settings: settings}
	if err != nil {
		return res, err
	}
	return v.answer(ctx, res, good, alive)
}

// FitInAdvised searches advise's settings (search.AdvisedSettings) for a
// larger value than base, FitIn's answer with opt.Spec: as advise does,
// it changes one setting at a time from the recorded ones and keeps the
// best change, until none helps; here the best is the change whose
// program fits at the largest value. Each round tries every change on the
// program at the value after the best so far (one replay each), and
// searches on with those that fit it, dropping each as it stops fitting.
func (m *Model) FitInAdvised(ctx context.Context, rec *Recording, opt FitInOptions, base Largest) (Largest, error) {
	setup, err := sim.SetupOf(programHeader(rec.Header))
	if err != nil {
		return base, err
	}
	free, current, err := search.AdviseStart(setup, opt.Spec)
	if err != nil {
		return base, err
	}
	v := newValueSearch(m, rec, opt)
	if base.AtMax {
		return base, nil // no value larger is tried
	}
	best, alive := base.Value, []sim.AllocatorSpec(nil)
	for round := 0; round < 3; round++ {
		var tried []sim.AllocatorSpec
		for _, c := range search.Changes(free, current) {
			opts := maps.Clone(opt.Spec.Options)
			if opts == nil {
				opts = allocators.Options{}
			}
			maps.Copy(opts, c.Settings)
			tried = append(tried, sim.AllocatorSpec{Name: opt.Spec.Name, Options: opts})
		}
		probes, err := v.probeAt(ctx, best+1, tried)
		if err != nil {
			return base, err
		}
		// Those that fit, the one that held the least first: the value
		// search tries them in turn.
		var fit []int
		for i, p := range probes {
			if p.OK {
				fit = append(fit, i)
			}
		}
		slices.SortStableFunc(fit, func(a, b int) int { return cmp.Compare(probes[a].PeakReservedBytes, probes[b].PeakReservedBytes) })
		var next []sim.AllocatorSpec
		for _, i := range fit {
			next = append(next, tried[i])
		}
		if len(next) == 0 {
			break
		}
		good, still, err := v.largest(ctx, best+1, 0, next)
		if err != nil {
			return base, err
		}
		best, alive = good, still
		for k := range current {
			current[k] = alive[0].Options[k]
		}
	}
	if alive == nil {
		// No change fits more: the recorded settings are advise's best
		// here, and base is the answer, at the cost of both searches.
		base.Replays += v.replays
		base.Checks += v.checks
		return base, nil
	}
	res := Largest{Settings: maps.Clone(alive[0].Options)}
	res, err = v.answer(ctx, res, best, alive[:1])
	res.Replays += base.Replays
	res.Checks += base.Checks
	return res, err
}

// valueSearch searches the values whose programs fit a capacity, with one
// or more allocator specs, and counts its replays.
type valueSearch struct {
	m      *Model
	rec    *Recording
	opt    FitInOptions
	checks int
	// hi is the largest recorded value; limit the largest value tried
	// (FitInOptions.Max, else 64 times hi), and atMax says a search
	// stopped at it.
	hi, limit int64
	atMax     bool
	// replays counts replays of programs: probes under the capacity, and
	// those of fits.
	replays int
}

func newValueSearch(m *Model, rec *Recording, opt FitInOptions) *valueSearch {
	v := &valueSearch{m: m, rec: rec, opt: opt, limit: opt.Max}
	for s, x := range m.Values {
		if m.Known[s] {
			v.hi = max(v.hi, x)
		}
	}
	if v.limit <= 0 {
		v.limit = 64 * v.hi
	}
	return v
}

// load loads the program at x onto a tape, for probes.
func (v *valueSearch) load(ctx context.Context, x int64, specs []sim.AllocatorSpec) (*search.Trace, error) {
	p, err := v.m.At(v.rec, x)
	if err != nil {
		return nil, err
	}
	return p.Load(ctx, specs, v.opt.Search)
}

// probeAt probes each of specs on the program at x under the capacity,
// one replay each, on the search's workers.
func (v *valueSearch) probeAt(ctx context.Context, x int64, specs []sim.AllocatorSpec) ([]search.Probe, error) {
	tr, err := v.load(ctx, x, nil)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	v.checks++
	v.replays += len(specs)
	probes := make([]search.Probe, len(specs))
	jobs := make([]int, len(specs))
	for i := range jobs {
		jobs[i] = i
	}
	err = search.RunJobs(ctx, jobs, v.opt.Search.Workers, func(ctx context.Context, i int) error {
		var err error
		probes[i], err = tr.Probe(ctx, specs[i], v.opt.Capacity)
		return err
	}, nil)
	if err == nil && v.opt.Checked != nil {
		v.opt.Checked(x, slices.ContainsFunc(probes, func(p search.Probe) bool { return p.OK }))
	}
	return probes, err
}

// fitsFirst tries specs in turn on the program at x under the capacity,
// one replay each, until one fits; it returns that one's index, or -1.
func (v *valueSearch) fitsFirst(ctx context.Context, x int64, specs []sim.AllocatorSpec) (int, error) {
	tr, err := v.load(ctx, x, nil)
	if err != nil {
		return -1, err
	}
	defer tr.Close()
	v.checks++
	first := -1
	for i, s := range specs {
		v.replays++
		ok, err := tr.Fits(ctx, s, v.opt.Capacity)
		if err != nil {
			return -1, err
		}
		if ok {
			first = i
			break
		}
	}
	if v.opt.Checked != nil {
		v.opt.Checked(x, first >= 0)
	}
	return first, nil
}

// largest finds the largest value whose program one of specs fits, from
// good (known to fit with specs[0]; 0: none known) or, with good 0, from
// first. From good it takes steps of good/8, doubling, until a program
// does not fit; from first it doubles (or halves) as FitIn says; then it
// bisects. At each value the specs are tried in turn until one fits;
// those before it are dropped, as they fit no larger value. It returns
// the largest value and the specs left, the first of which fits it (0
// and specs where none fits).
func (v *valueSearch) largest(ctx context.Context, good, first int64, specs []sim.AllocatorSpec) (int64, []sim.AllocatorSpec, error) {
	bad := int64(0) // fits none (0: not known): the answer is in [good, bad)
	try := func(x int64) error {
		i, err := v.fitsFirst(ctx, x, specs)
		if err != nil {
			return err
		}
		if i < 0 {
			bad = x
		} else {
			good, specs = x, specs[i:]
		}
		return nil
	}
	if good == 0 {
		if err := try(first); err != nil {
			return 0, specs, err
		}
	}
	step := max(good/8, 1)
	if good == first {
		step = good // from a recorded value: double
	}
	for good > 0 && bad == 0 { // up until one does not fit
		next := min(good+step, v.limit)
		if next == good {
			v.atMax = true
			break
		}
		if err := try(next); err != nil {
			return 0, specs, err
		}
		step *= 2
	}
	for good == 0 && bad > 1 { // halve until one fits
		if err := try(bad / 2); err != nil {
			return 0, specs, err
		}
	}
	for good > 0 && bad-good > 1 { // bisect
		if err := try(good + (bad-good)/2); err != nil {
			return 0, specs, err
		}
	}
	return good, specs, nil
}

// answer completes res with the value found, good (0: none fits), and the
// smallest capacity its program runs on with specs[0]: one fit.
func (v *valueSearch) answer(ctx context.Context, res Largest, good int64, specs []sim.AllocatorSpec) (Largest, error) {
	res.AtMax, res.Checks, res.Replays = v.atMax, v.checks, v.replays
	if good == 0 {
		return res, nil
	}
	res.Value, res.Fits = good, true
	tr, err := v.load(ctx, good, nil)
	if err != nil {
		return res, err
	}
	defer tr.Close()
	f, err := tr.FitOne(ctx, specs[0])
	if err != nil {
		return res, err
	}
	res.MinCapacityBytes = f.MinCapacityBytes
	res.Replays += f.Probes
	return res, nil
}
