package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/internal/outfile"
	"github.com/bfcsim/bfcsim/internal/progress"
	"github.com/bfcsim/bfcsim/report"
	"github.com/bfcsim/bfcsim/search"
	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace/input"
)

// searchFlags are the flags fit and advise share.
type searchFlags struct {
	replay replayOptions
	strict bool
	jobs   int
	format string
	out    string
	// gpu is --device-memory: the GPU to write a JAX capture's memory
	// fraction for.
	gpu      string
	gpuBytes uint64
}

// add registers the flags on cmd: the replay flags, less those a search
// has no use for, and its own.
func (o *searchFlags) add(cmd *cobra.Command) {
	o.replay.addFlags(cmd, true)
	f := cmd.Flags()
	f.BoolVar(&o.strict, "strict", false, "count every failed allocation, scratch buffers a library could do without included")
	f.IntVarP(&o.jobs, "jobs", "j", 0, "replays to run at once (default: the number of CPUs)")
	f.StringVarP(&o.format, "format", "f", "table", "output format: "+strings.Join(report.FitFormats, ", "))
	f.StringVarP(&o.out, "out", "o", "", "also write the JSON report to this `FILE`")
	f.StringVar(&o.gpu, "device-memory", "", "a JAX capture: the total memory of the GPU to run on, as the CUDA driver gives it (bytes_limit ÷ the fraction in jax's memory_stats(), or torch.cuda.mem_get_info()[1]), to write XLA_PYTHON_CLIENT_MEM_FRACTION for (`SIZE`)")
	_ = cmd.RegisterFlagCompletionFunc("format", fixedCompletion(report.FitFormats...))
	hideFlags(cmd, "touch", "check", "latency-sample", "stop-on-oom")
}

// check refuses, before anything is read, what a search cannot do with
// paths.
func (o *searchFlags) check(cmd string, paths []string) error {
	if !slices.Contains(report.FitFormats, o.format) {
		return fmt.Errorf("unknown format %q (want one of %s)", o.format, strings.Join(report.FitFormats, ", "))
	}
	if o.jobs < 0 {
		return fmt.Errorf("-j %d: want at least 1 replay at a time", o.jobs)
	}
	if slices.Contains(paths, "-") {
		return fmt.Errorf("%s reads the trace onto a temporary tape and replays it many times: give a file, or save standard input to one", cmd)
	}
	if o.gpu != "" {
		var err error
		if o.gpuBytes, err = allocators.ParseSize(o.gpu); err != nil || o.gpuBytes == 0 {
			return fmt.Errorf("--device-memory %q: want a size such as 85017493504 or 79.18GiB", o.gpu)
		}
	}
	return checkOutputs(paths, "", o.out)
}

// fitOptions are one fit invocation's flags.
type fitOptions struct {
	searchFlags
	max string
	// gpu is --gpu: the one GPU to check; reserve --context-reserve.
	gpu, reserve string
}

func newFitCmd(e *env) *cobra.Command {
	o := &fitOptions{}
	cmd := &cobra.Command{
		Use:   "fit TRACE... [flags]",
		Short: "Find the smallest device each allocator runs a trace on",
		Long: `Find, for each allocator, the smallest device on which replaying the trace
fails no allocation, to the allocator's granularity: 2 MiB for pytorch, whose
limit is PyTorch's own (torch.cuda.set_per_process_memory_fraction: a limit on
the bytes it reserves, on a device of the trace's size); 1 MiB for bfc (as
TensorFlow takes a GPU's memory limit); the device's 256 bytes otherwise.

The answer is printed with the settings it holds for, and, for each GPU
people run on, whether the trace fits and with how much to spare: in the
GPU's memory as its driver reports it (cudaMemGetInfo's total, less than the
size on the box), less what the CUDA context and libraries take first
(--context-reserve; docs/fit.md gives every figure's source). With --max
SIZE, fit exits 1 when an allocator does not fit in SIZE, and with --gpu NAME
when it does not fit that GPU: a CI check that a model still fits its GPU.

A job of several GPUs fits when every device does. A PyTorch snapshot of
several devices is such a job (--device N fits one), and so are several
recordings given at once, one per rank of a run: fit answers for each
device, then for the job, naming the device that decides.

A PyTorch recording is replayed as recorded (its settings, its segments while
the model would make the same decisions; see 'bfcsim replay --help'), and
pytorch is the allocator searched unless -a says otherwise. A failed
allocation that the program frees before it allocates anything else is taken
as a library's workspace that it does without (PyTorch's cuDNN convolutions
catch the error and pick an algorithm that needs less); --strict counts it
as a failure. A JAX capture counts every failure: XLA is not known to go on
after one.

A JAX capture (from jax.profiler.trace) is searched with bfc as XLA set it
up (preallocating or growing, as the capture shows); the answer is XLA's
memory limit, and with --device-memory the XLA_PYTHON_CLIENT_MEM_FRACTION
that gives it on that GPU.

How: the trace is read once, replayed without a limit (its peak of live bytes
bounds the answer from below, its peak of reserved bytes from above), then
probed, on every core at once, each probe a replay that stops at its first
failed allocation, until the smallest capacity that works is known to one
step. The search takes a replay that works on a device to work on any larger
one, which caching allocators need not do; every capacity tried is in -f json.`,
		Example: `  bfcsim fit snapshot.pickle                       # PyTorch: the smallest memory limit, and the GPUs it fits
  bfcsim fit snapshot.pickle --max 24GiB           # exit 1 if it no longer fits a 24 GiB GPU
  bfcsim fit snapshot.pickle --set pytorch.expandable_segments=true
  bfcsim fit traces/transformer-train.jsonl -a bfc,naive -f json
  bfcsim fit jax.xplane.pb --device-memory 85017493504   # JAX: the fraction for an H100 80GB
  bfcsim fit rank0.pickle rank1.pickle rank2.pickle rank3.pickle --gpu A100-40GB   # a job, one file per rank`,
		Args: traceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.replay.allocatorsGiven = cmd.Flags().Changed("allocators")
			return runFit(cmd, e, o, args)
		},
	}
	o.add(cmd)
	f := cmd.Flags()
	f.StringVar(&o.max, "max", "", "exit 1 when an allocator needs more than this `SIZE` (e.g. 24GiB)")
	f.StringVar(&o.gpu, "gpu", "", "weigh the answer against this GPU alone, and exit 1 when it does not fit (e.g. H100-80GB, L4; see --help's list)")
	f.StringVar(&o.reserve, "context-reserve", report.Bytes(search.DefaultContextReserveBytes), "what the CUDA context and libraries take of each GPU before the allocator reserves a byte (`SIZE`)")
	return cmd
}

// hideFlags hides the replay flags a command takes but has no use for.
func hideFlags(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		_ = cmd.Flags().MarkHidden(n)
	}
}

func runFit(cmd *cobra.Command, e *env, o *fitOptions, paths []string) error {
	var maxBytes uint64
	if o.max != "" {
		var err error
		if maxBytes, err = allocators.ParseSize(o.max); err != nil || maxBytes == 0 {
			return fmt.Errorf("--max %q: want a size such as 24GiB", o.max)
		}
	}
	if err := o.check("fit", paths); err != nil {
		return err
	}
	opt := report.FitOptions{DeviceMemoryBytes: o.gpuBytes, GPUs: search.GPUs, MaxBytes: maxBytes}
	var err error
	if opt.ContextReserveBytes, err = allocators.ParseSize(o.reserve); err != nil {
		return fmt.Errorf("--context-reserve %q: want a size such as 768MiB", o.reserve)
	}
	if o.gpu != "" {
		g, err := search.LookupGPU(o.gpu)
		if err != nil {
			return fmt.Errorf("--gpu: %w", err)
		}
		opt.GPUs, opt.CheckGPU = []search.GPU{g}, g.Name
	}
	s, err := openSearch(cmd, e, &o.replay, paths, searchHow{tolerate: !o.strict, jobs: o.jobs, gpu: o.gpuBytes})
	if err != nil {
		return err
	}
	defer s.close()
	fits, err := search.Traces(s.members).Fit(cmd.Context())
	s.finish()
	if err != nil {
		return err
	}
	rep := report.NewFitReport(s.members, fits, opt)
	if o.out != "" {
		if err := outfile.Write(o.out, func(w io.Writer) error { return rep.Render(w, "json") }); err != nil {
			return err
		}
	}
	if err := rep.Render(cmd.OutOrStdout(), o.format); err != nil {
		return err
	}
	if over := rep.Exceeds(); len(over) > 0 {
		what := o.max + " (--max)"
		if o.max == "" {
			g := opt.GPUs[0]
			what = fmt.Sprintf("the %s's %s (--gpu)", g.Name, report.Bytes(g.TotalBytes-min(opt.ContextReserveBytes, g.TotalBytes)))
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("%s does not fit in %s", strings.Join(over, ", "), what)}
	}
	return nil
}

// searchRun is the traces loaded for a search, one per device of the job
// they make (one for a single recording), with a progress bar.
type searchRun struct {
	members []search.Recording
	specs   []sim.AllocatorSpec // the allocators searched, with their options
	bar     *progressbar.ProgressBar
	probes  atomic.Int64
}

// close lets the traces' tapes go.
func (s *searchRun) close() {
	for _, m := range s.members {
		m.Close()
	}
}

// finish clears the progress bar.
func (s *searchRun) finish() {
	if s.bar != nil {
		_ = s.bar.Finish()
	}
}

// searchHow says how openSearch loads: whether a failed scratch buffer
// is survived, the replays at once, --device-memory; every allocator
// replay would replay (diff) rather than the recording's alone; the call
// sites at the peak, and the series plots are drawn from.
type searchHow struct {
	tolerate, every, callSites bool
	jobs                       int
	gpu                        uint64
	record                     *sim.RecordConfig
}

// openSearch reads the traces at paths for a search (fit, advise, diff) as
// one job (search.LoadJob): the allocators and options as replay takes
// them, a recording's own allocator alone unless -a is given or how.every.
func openSearch(cmd *cobra.Command, e *env, o *replayOptions, paths []string, how searchHow) (*searchRun, error) {
	s := &searchRun{}
	jobs := how.jobs
	if jobs == 0 {
		jobs = runtime.NumCPU()
	}
	if e.progress && !o.quiet {
		s.bar = progress.Spinner(e.stderr, "reading "+strings.Join(paths, " "))
	}
	plan := func(setup sim.Setup, path string) ([]sim.AllocatorSpec, search.Options, error) {
		if !o.allocatorsGiven && setup.Recorded.Allocator != "" && !how.every {
			// A recording: the allocator that made it.
			o.allocators = []string{setup.Recorded.Allocator}
			o.allocatorsGiven = true
		}
		p, err := o.plan([]string{path})
		if err != nil {
			return nil, search.Options{}, err
		}
		if o.spaceKind == "cuda" {
			return nil, search.Options{}, fmt.Errorf("--space cuda: %s runs many replays at once, which would share the GPU's memory; replay one allocator at a time on a GPU instead", cmd.Name())
		}
		s.specs = p.specs
		if !o.allocatorsGiven {
			s.specs = setup.RecordedFirst(s.specs)
		}
		return s.specs, search.Options{
			Space:           allocators.SpaceConfig{Kind: o.spaceKind, Capacity: p.capacity, Options: p.spaceOpts},
			Workers:         jobs,
			TolerateScratch: how.tolerate,
			Record:          how.record,
			Progress: func(search.Probe) {
				n := s.probes.Add(1)
				if s.bar != nil {
					s.bar.Describe(fmt.Sprintf("%d probes", n))
					_ = s.bar.Add(1)
				}
			},
		}, nil
	}
	opened := func(t *input.File, everyDevice bool) {
		if !o.quiet {
			printConversionNote(e.stderr, t, everyDevice)
		}
	}
	var err error
	s.members, err = search.LoadJob(cmd.Context(), paths, search.LoadOptions{
		Input: input.Options{SkipInvalid: o.skipInvalid, Allocator: o.tfAllocator, Device: o.recordingDevice, Frames: o.frameRule(), CallSites: how.callSites},
		Stdin: e.stdin, Plan: plan, Opened: opened,
	})
	if err != nil {
		s.finish()
		return nil, err
	}
	if how.gpu > 0 && !s.members[0].IsJAX() {
		fmt.Fprintf(e.stderr, "bfcsim: warning: --device-memory is for JAX captures (XLA_PYTHON_CLIENT_MEM_FRACTION is a fraction of it); %s is not one, and it changes nothing\n", paths[0])
	}
	return s, nil
}
