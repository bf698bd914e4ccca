package search

import (
	"context"
	"fmt"
	"maps"
	"runtime"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
)

// Trace is a trace held for a search: its events on a tape, read once, and
// what its header says about replaying it. Close lets the tape go.
type Trace struct {
	// Setup is what the header says (sim.SetupOf).
	Setup sim.Setup
	// Summary is the trace reader's summary of the events.
	Summary trace.Summary
	// Unlimited are the replays Load made while reading the trace, one per
	// allocator: on the device (Options.Space) without a memory limit.
	Unlimited []sim.Result

	tape  *tape
	opt   Options
	specs []sim.AllocatorSpec
}

// Options say how a search replays.
type Options struct {
	// Space is the device each replay runs on; a zero Capacity is the
	// trace's (Setup.Capacity), an empty Kind a virtual device.
	Space allocators.SpaceConfig
	// Workers is how many replays run at once; 0 is one per CPU.
	Workers int
	// TolerateScratch counts an allocation that fails but that the program
	// frees before allocating anything else as survived (a library's
	// workspace: sim.Config.TolerateScratch). Load turns it off for a JAX
	// capture: XLA is not known to catch a failed allocation and go on
	// with less, as PyTorch's cuDNN convolutions do, so every one counts.
	TolerateScratch bool
	// TempDir holds the tape of a trace too long to keep in memory ("":
	// the system's temporary directory).
	TempDir string
	// Progress, if set, is told of every probe as it ends, from the
	// goroutine that ran it (calls may overlap).
	Progress func(Probe)
	// Record, if set, asks Load's replays without a limit for the series
	// plots are drawn from (Unlimited's Timeline): they are then full
	// replays, not probes, and take longer.
	Record *sim.RecordConfig
}

func (o Options) workers() int {
	if o.Workers > 0 {
		return o.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// Summarizer is a sim.Source that summarises what it read, as a
// trace.Reader does.
type Summarizer interface {
	sim.Source
	Summary() trace.Summary
}

// Load reads src, a trace whose header gave setup, to its end onto a tape,
// and replays it as it reads against each of specs on the device opt.Space
// (its capacity, else the trace's), without a memory limit: the replays a
// search starts from (none without specs: then only probes can be made).
// The trace is read once; searches replay the tape.
func Load(ctx context.Context, src sim.Source, setup sim.Setup, specs []sim.AllocatorSpec, opt Options) (*Trace, error) {
	t := &Trace{Setup: setup, tape: newTape(opt.TempDir), opt: opt, specs: specs}
	t.opt.Space.Capacity = setup.Capacity(opt.Space.Capacity)
	if setup.Source == JAXSource {
		t.opt.TolerateScratch = false
	}
	if t.opt.Space.Kind == "" {
		t.opt.Space.Kind = "virtual"
	}
	rec := &recorder{src: src, t: t.tape}
	cfg := t.config(specs)
	cfg.Record, cfg.Probe = opt.Record, opt.Record == nil // a probe records no series
	var res []sim.Result
	var err error
	if len(specs) == 0 {
		// Only the tape: the caller probes it.
		err = t.fill(ctx, rec)
	} else if hasPlanner(specs) {
		// A planner must see the whole trace before its first
		// allocation: the tape is filled first, then replayed.
		if err = t.fill(ctx, rec); err == nil {
			res, err = sim.Replay(ctx, t.tape.reader(), cfg)
		}
	} else {
		first := cfg
		first.Reread = nil // the tape is not written yet
		if res, err = sim.Replay(ctx, rec, first); err == nil {
			// A replay that failed stopped reading: the tape takes the rest.
			err = t.fill(ctx, rec)
		}
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	t.setSummary(src)
	t.Unlimited = res
	return t, nil
}

// fill reads what is left of rec onto the tape, and ends the tape.
func (t *Trace) fill(ctx context.Context, rec *recorder) error {
	for rec.Next() {
		if rec.t.events%(1<<16) == 0 && ctx.Err() != nil {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := rec.Err(); err != nil {
		return err
	}
	return t.tape.finish()
}

func (t *Trace) setSummary(src sim.Source) {
	if s, ok := src.(Summarizer); ok {
		t.Summary = s.Summary()
	}
}

// Close lets the trace's tape go.
func (t *Trace) Close() { t.tape.close() }

// Capacity is the device the search replays on.
func (t *Trace) Capacity() uint64 { return t.opt.Space.Capacity }

// hasPlanner reports whether any of specs plans offline.
func hasPlanner(specs []sim.AllocatorSpec) bool {
	for _, s := range specs {
		sp := allocators.NewVirtualSpace(1<<30, allocators.CostModel{}, allocators.Paged)
		if a, _, err := allocators.New(s.Name, sp, s.Options); err == nil {
			if _, ok := a.(allocators.Planner); ok {
				return true
			}
		}
	}
	return false
}

// config returns a probe replay's configuration for specs on the trace's
// device.
func (t *Trace) config(specs []sim.AllocatorSpec) sim.Config {
	cfg := sim.Config{
		Allocators:      specs,
		Space:           t.opt.Space,
		Probe:           true,
		TolerateScratch: t.opt.TolerateScratch,
		Reread:          func() (sim.Source, error) { return t.tape.reader(), nil },
	}
	cfg.Space.Options = maps.Clone(cfg.Space.Options)
	t.Setup.Apply(&cfg)
	return cfg
}

// Probe is one replay of a search: an allocator with its options on a
// device of a capacity (or under a memory limit), and whether every
// allocation succeeded.
type Probe struct {
	Allocator string
	// Options are the options set for the probe (the searched settings;
	// not the defaults).
	Options allocators.Options
	// CapacityBytes is the device's capacity, or the memory limit for an
	// allocator whose reference takes one (allocators.Factory.LimitOption).
	CapacityBytes uint64
	// OK says every allocation succeeded (failures of scratch buffers
	// aside, with Options.TolerateScratch).
	OK bool
	// Cancelled says the probe was stopped before its answer, which
	// another probe made moot.
	Cancelled bool
	// PeakReservedBytes is the most the allocator held, up to where it
	// stopped.
	PeakReservedBytes uint64
	// FailedEvent is the event of the first failed allocation, or -1.
	FailedEvent int64
	// ScratchFailures counts failed allocations tolerated as scratch.
	ScratchFailures int64
	// Decisions say what the allocator did with the recording's decisions.
	Decisions *sim.Decisions
}

// probe replays the trace once against spec with the memory limited to
// limit bytes. It returns ctx's error if ctx is done first.
func (t *Trace) probe(ctx context.Context, spec sim.AllocatorSpec, limit uint64) (Probe, error) {
	f, err := allocators.Lookup(spec.Name)
	if err != nil {
		return Probe{}, err
	}
	opts := maps.Clone(spec.Options)
	if opts == nil {
		opts = allocators.Options{}
	}
	cfg := t.config(nil)
	if f.LimitOption != "" {
		opts[f.LimitOption] = fmt.Sprint(limit)
		cfg.Space.Capacity = max(cfg.Space.Capacity, limit)
	} else {
		cfg.Space.Capacity = limit
	}
	cfg.Allocators = []sim.AllocatorSpec{{Name: spec.Name, Options: opts}}
	res, err := sim.Replay(ctx, t.tape.reader(), cfg)
	if err != nil {
		return Probe{}, err
	}
	r := &res[0]
	p := Probe{Allocator: spec.Name, Options: spec.Options, CapacityBytes: limit,
		OK:                r.FailedAllocs == r.ScratchFailures,
		PeakReservedBytes: r.PeakReservedBytes, FailedEvent: r.FirstOOMEvent,
		ScratchFailures: r.ScratchFailures, Decisions: r.Decisions}
	return p, nil
}

// runAll runs fns on the search's workers (RunJobs).
func runAll(ctx context.Context, workers int, fns []func(context.Context) error) error {
	jobs := make([]int, len(fns))
	for i := range jobs {
		jobs[i] = i
	}
	return RunJobs(ctx, jobs, workers, func(ctx context.Context, i int) error { return fns[i](ctx) }, nil)
}
