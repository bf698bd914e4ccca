package main

import (
	"fmt"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/internal/progress"
	"github.com/bfcsim/bfcsim/report"
	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace/input"
)

type replayOptions struct {
	allocators []string
	capacity   string
	space      string
	touch      bool
	// spaceKind and device are --space read: virtual, host or cuda, and
	// the GPU of cuda:N (plan sets them).
	spaceKind string
	device    int
	// costs is --costs: a calibration whose space options price the
	// device calls, under any --set space.KEY=VALUE.
	costs       string
	sets        []string
	format      string
	out         string
	eventsOut   string
	skipInvalid bool
	stopOnOOM   bool
	check       bool
	quiet       bool
	// latencySample times one call in this many (sim.Config.LatencySample).
	latencySample int
	// record, when set, asks the replay for the series plots are drawn from.
	record *sim.RecordConfig
	// tfAllocator picks the allocator of a TensorFlow profiler capture
	// (--allocator GPU_0_bfc).
	tfAllocator string
	// frames are path fragments of the user's own code (--frames).
	frames string
	// allocatorsGiven says -a was given. When it was not, an allocator
	// named by --set joins the default set: --set pytorch.KEY=VALUE alone
	// is enough to replay pytorch; and a recording's own allocator comes
	// first (sim.Setup.RecordedFirst).
	allocatorsGiven bool
	// recordedOnly replays a recording's own allocator in place of the
	// one allocator given (a per-allocator plot without -a).
	recordedOnly bool
	// recordingDevice is --device: the device of a recording of several
	// to replay alone; -1 replays each one with allocations.
	recordingDevice int
}

func newReplayCmd(e *env) *cobra.Command {
	o := &replayOptions{}
	cmd := &cobra.Command{
		Use:   "replay [flags] TRACE...",
		Short: "Replay traces against allocators and report what happened",
		Long: `Replay each trace against every selected allocator, each over its own fresh
device, and print one row per allocator: peak reserved and in-use bytes,
fragmentation (1 - peak live / peak reserved), internal waste at the reserved
peak, TensorFlow's fragmentation metric, failed allocations, device calls and
their modeled time, allocation latency, and replay speed.

A trace is a JSON Lines file (optionally .gz or .zst), or - for standard input.
A recording is taken as it is, recognised by its content, and converted on
the fly as 'bfcsim import' would: a PyTorch memory snapshot (pickle or JSON;
its device with the most entries), a TensorFlow profiler capture (*.xplane.pb
or *.memory_profile.json.gz; --allocator picks its allocator), a glibc
mtrace log, a malloc-lab trace.
Without -a, a recording is replayed by its own allocator first, as it ran
(pytorch for a PyTorch snapshot, bfc for a TensorFlow or JAX capture), then
by bfc, arena, aligned and naive.
The device capacity is --capacity, else the trace header's, else 80GiB.
A recording's own allocator settings (a PyTorch snapshot's
allocator_settings: expandable_segments and the rest) are where the
allocator that models it starts; --set overrides any of them, and the
report lists those taken from the recording.

Allocators (-a) and their options (--set NAME.KEY=VALUE):
` + allocators.Help(),
		Example: `  bfcsim replay traces/transformer-train.jsonl
  bfcsim replay run.jsonl.gz -a bfc,naive --capacity 16GiB -f json
  bfcsim replay snapshot.pickle -a pytorch,bfc
  bfcsim replay t.jsonl --set bfc.allow_growth=false --set bfc.garbage_collection=true
  bfcsim replay t.jsonl -o out/ --events-out out/events.jsonl.zst`,
		Args: traceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.allocatorsGiven = cmd.Flags().Changed("allocators")
			return runReplay(cmd, e, o, args)
		},
	}
	o.addFlags(cmd, true)
	o.addFramesFlag(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.format, "format", "f", "table", "output format: "+strings.Join(report.Formats, ", "))
	f.StringVarP(&o.out, "out", "o", "", "also write report.json, report.md, timeline.csv, every plot (PNG and SVG), index.html and bfc's memory dumps into this directory")
	f.StringVar(&o.eventsOut, "events-out", "", "write per-event results (JSON Lines; .gz or .zst compressed) to this file")
	_ = cmd.RegisterFlagCompletionFunc("format", fixedCompletion(report.Formats...))
	return cmd
}

// addFlags registers the flags that say how to replay: allocators, device,
// options and trace handling. Commands that replay (replay, compare, plot)
// share them; multi says whether -a takes a list.
func (o *replayOptions) addFlags(cmd *cobra.Command, multi bool) {
	f := cmd.Flags()
	if multi {
		f.StringSliceVarP(&o.allocators, "allocators", "a", allocators.DefaultNames, "comma-separated allocators to replay against (a recording's own comes first unless -a is given)")
	}
	f.StringVar(&o.capacity, "capacity", "", "device capacity, e.g. 80GiB or 16GB (default: the trace header's, else 80GiB)")
	f.StringVar(&o.space, "space", "virtual", "address space: virtual (simulated device), host (real mmap'd memory) or cuda[:N] (GPU N's memory, real device calls, timed)")
	f.BoolVar(&o.touch, "touch", false, "with --space host or cuda, write every page of each allocation as it is made")
	f.StringArrayVar(&o.sets, "set", nil, "allocator or space option NAME.KEY=VALUE, repeatable (e.g. bfc.allow_growth=false)")
	f.StringVar(&o.costs, "costs", "", "price device calls as the GPU 'bfcsim calibrate' measured and wrote to this `FILE` (--set space.KEY=VALUE still wins)")
	f.BoolVar(&o.skipInvalid, "skip-invalid", false, "count and skip invalid events instead of stopping at the first")
	f.StringVar(&o.tfAllocator, "allocator", "", "a TensorFlow profiler capture's allocator to replay, e.g. GPU_0_bfc (needed when it has several)")
	f.IntVar(&o.recordingDevice, "device", -1, "a PyTorch snapshot of several devices: replay device `N` alone (default: every device with allocations, each a trace of its own)")
	f.BoolVar(&o.stopOnOOM, "stop-on-oom", false, "stop each allocator's replay at its first failed allocation")
	f.BoolVar(&o.check, "check", false, "verify every allocation with the invariant checker (slower)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress bar, and no line saying how a recording was converted")
	f.IntVar(&o.latencySample, "latency-sample", sim.DefaultLatencySample, "time one Allocate and one Free in this many (1: every call, which makes a replay about half as slow again)")
	_ = cmd.RegisterFlagCompletionFunc("allocators", fixedCompletion(allocators.Names()...))
	_ = cmd.RegisterFlagCompletionFunc("space", fixedCompletion(allocators.SpaceKinds...))
}

func fixedCompletion(words ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return words, cobra.ShellCompDirectiveNoFileComp
	}
}

// replayPlan is a replay's checked configuration, ready to run on each trace.
type replayPlan struct {
	specs     []sim.AllocatorSpec
	capacity  uint64 // 0: the trace header's, else sim.DefaultCapacity
	spaceOpts allocators.Options
}

// plan checks the options that say how to replay, before any trace is read.
func (o *replayOptions) plan(paths []string) (*replayPlan, error) {
	if len(o.allocators) == 0 {
		return nil, fmt.Errorf("no allocators given (-a)")
	}
	for i, n := range o.allocators {
		if _, err := allocators.Lookup(n); err != nil {
			return nil, err
		}
		if slices.Contains(o.allocators[:i], n) {
			return nil, fmt.Errorf("-a lists %s twice", n)
		}
	}
	if !o.allocatorsGiven {
		for _, s := range o.sets {
			name, _, _ := strings.Cut(s, ".")
			if _, err := allocators.Lookup(name); err == nil && !slices.Contains(o.allocators, name) {
				o.allocators = append(slices.Clip(o.allocators), name)
			}
		}
	}
	per, spaceOpts, err := allocators.ParseSets(o.sets, o.allocators)
	if err != nil {
		return nil, err
	}
	if o.costs != "" {
		costs, err := readCosts(o.costs)
		if err != nil {
			return nil, err
		}
		for k, v := range costs {
			if _, set := spaceOpts[k]; !set {
				spaceOpts[k] = v
			}
		}
	}
	p := &replayPlan{spaceOpts: spaceOpts}
	if o.capacity != "" {
		if p.capacity, err = allocators.ParseSize(o.capacity); err != nil {
			return nil, fmt.Errorf("--capacity: %w", err)
		}
		if p.capacity == 0 {
			return nil, fmt.Errorf("--capacity must be more than 0 bytes")
		}
	}
	if o.eventsOut != "" && len(paths) > 1 {
		return nil, fmt.Errorf("--events-out takes one trace, got %d", len(paths))
	}
	if o.latencySample < 1 {
		return nil, fmt.Errorf("--latency-sample %d: want 1 (every call) or more", o.latencySample)
	}
	if o.spaceKind, o.device, err = allocators.ParseSpace(o.space); err != nil {
		return nil, err
	}
	if o.touch && o.spaceKind == "virtual" {
		return nil, fmt.Errorf("--touch needs --space host or cuda")
	}
	// Check the space before reading any trace; the capacity is known per trace.
	if _, err := (allocators.SpaceConfig{Kind: o.spaceKind, Capacity: 1, Options: spaceOpts}).Validate(); err != nil {
		return nil, err
	}
	if o.spaceKind == "cuda" {
		if err := checkCUDA(o); err != nil {
			return nil, err
		}
	}
	if err := checkStdinOnce(paths); err != nil {
		return nil, err
	}
	p.specs = make([]sim.AllocatorSpec, len(o.allocators))
	for i, n := range o.allocators {
		p.specs[i] = sim.AllocatorSpec{Name: n, Options: per[n]}
	}
	return p, nil
}

// replayAll replays every trace in turn.
// A recording of several devices (a PyTorch snapshot of a multi-GPU job)
// is replayed device by device, each a trace of its own named
// NAME-deviceN, in device order: the device with the most trace entries
// first, which says which others hold allocations, then each of those
// read again.
func (o *replayOptions) replayAll(cmd *cobra.Command, e *env, p *replayPlan, paths []string) ([]report.TraceRun, error) {
	var runs []report.TraceRun
	for _, path := range paths {
		first := len(runs)
		err := input.EachDevice(o.recordingDevice, func(device int) ([]int, error) {
			run, others, err := replayOne(cmd, e, o, path, device, p.specs, p.capacity, p.spaceOpts)
			runs = append(runs, run)
			return others, err
		})
		if err != nil {
			return nil, err
		}
		if devices := runs[first:]; len(devices) > 1 {
			for i := range devices {
				if d, ok := devices[i].Header.Device(); ok {
					devices[i].Name = input.DeviceName(devices[i].Name, d)
				}
			}
			slices.SortStableFunc(devices, func(a, b report.TraceRun) int {
				da, _ := a.Header.Device()
				db, _ := b.Header.Device()
				return da - db
			})
		}
	}
	return runs, nil
}

func runReplay(cmd *cobra.Command, e *env, o *replayOptions, paths []string) error {
	if !slices.Contains(report.Formats, o.format) {
		return fmt.Errorf("unknown format %q (want one of %s)", o.format, strings.Join(report.Formats, ", "))
	}
	p, err := o.plan(paths)
	if err != nil {
		return err
	}
	if err := checkOutputs(paths, o.out, o.eventsOut); err != nil {
		return err
	}
	if o.out != "" {
		o.record = &sim.RecordConfig{}
	}
	runs, err := o.replayAll(cmd, e, p, paths)
	if err != nil {
		return err
	}
	rep := report.Build(runs)
	if o.out != "" {
		// The allocators' tables are garbage now: collect them, and
		// give what is free back to the system, before the plots and
		// dumps are made (docs/performance.md).
		debug.FreeOSMemory()
		if err := report.WriteDir(cmd.Context(), o.out, rep, runs); err != nil {
			return err
		}
	}
	return report.Render(cmd.OutOrStdout(), rep, o.format)
}

// replayOne replays device (-1: the one with the most trace entries) of
// the trace at path. others are the other devices of a recording of
// several that hold allocations, when device was -1.
func replayOne(cmd *cobra.Command, e *env, o *replayOptions, path string, device int, specs []sim.AllocatorSpec,
	capacity uint64, spaceOpts allocators.Options) (run report.TraceRun, others []int, err error) {
	t, err := input.OpenFile(cmd.Context(), path, e.stdin, input.Options{SkipInvalid: o.skipInvalid, Allocator: o.tfAllocator,
		Device: device, Frames: o.frameRule(), CallSites: true})
	if err != nil {
		return report.TraceRun{}, nil, err
	}
	defer t.Close()
	h := t.Header()
	setup, err := sim.SetupOf(h)
	if err != nil {
		return report.TraceRun{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	capacity = setup.Capacity(capacity)
	switch {
	case o.recordedOnly && setup.Recorded.Allocator != "":
		specs = setup.RecordedFirst(nil)
	case !o.allocatorsGiven:
		specs = setup.RecordedFirst(specs)
	}
	cfg := sim.Config{
		Allocators: specs,
		Space: allocators.SpaceConfig{Kind: o.spaceKind, Device: o.device, Capacity: capacity, Touch: o.touch,
			Options: spaceOpts, OpenDriver: openCUDA},
		StopOnOOM: o.stopOnOOM,
		Check:     o.check,
		// -o DIR holds a MemoryDump of each bfc pool at its peak.
		PeakSnapshots: o.out != "",
		Record:        o.record,
		LatencySample: o.latencySample,
	}
	// The device the recording's addresses need, unless --set says otherwise.
	setup.Apply(&cfg)
	// The planner reads the trace twice; a pipe cannot be read again.
	if path != "-" && t.Size >= 0 {
		var reopened []*input.File
		defer func() {
			for _, r := range reopened {
				r.Close()
			}
		}()
		cfg.Reread = func() (sim.Source, error) {
			r, err := input.OpenFile(cmd.Context(), path, e.stdin, input.Options{SkipInvalid: o.skipInvalid, Allocator: o.tfAllocator,
				Device: device, Frames: o.frameRule()})
			if err != nil {
				return nil, err
			}
			reopened = append(reopened, r)
			return r, nil
		}
	}
	var events *report.EventsFile
	if o.eventsOut != "" {
		if events, err = report.NewEventsFile(o.eventsOut); err != nil {
			return report.TraceRun{}, nil, err
		}
		defer events.Cleanup()
		cfg.Events = events.Writer
	}
	var src sim.Source = t
	var p *progress.Bar
	if e.progress && !o.quiet {
		p = progress.NewBar(e.stderr, e.redraw, path, t.Size, t.BytesRead)
		src = p.Count(t)
		defer p.Finish()
	}
	results, err := sim.Replay(cmd.Context(), src, cfg)
	if err != nil {
		return report.TraceRun{}, nil, err
	}
	if events != nil {
		order := make([]string, len(specs))
		for i, sp := range specs {
			order[i] = sp.Name
		}
		if err := events.Commit(order); err != nil {
			return report.TraceRun{}, nil, err
		}
	}
	if p != nil {
		p.Finish() // before anything else is written to standard error
	}
	if !o.quiet {
		printConversionNote(e.stderr, t, device < 0)
	}
	if sum := t.Summary(); sum.Allocs == 0 {
		// Said even with -q: a report of zeros is otherwise easy to
		// take for a result.
		where := path
		if path == "-" {
			where = "standard input"
		}
		fmt.Fprintf(e.stderr, "bfcsim: warning: %s has no allocations: the replay did nothing, and its report is all zeros\n", where)
	}
	name := h.Name
	if name == "" {
		name = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), ".jsonl")
		if path == "-" {
			name = "stdin"
		}
	}
	return report.TraceRun{
		Name: name, Path: path, Header: h, Summary: t.Summary(),
		CapacityBytes: capacity, Space: o.space, Skipped: t.SkippedErrors(), Results: results,
		CallSites: t.PeakCallSites(), Stacks: t.Stacks(), Frames: o.frameRule(),
	}, t.OtherDevices(), nil
}
