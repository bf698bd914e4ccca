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
// path.
func (o *searchFlags) check(cmd string, path string) error {
	if !slices.Contains(report.FitFormats, o.format) {
		return fmt.Errorf("unknown format %q (want one of %s)", o.format, strings.Join(report.FitFormats, ", "))
	}
	if o.jobs < 0 {
		return fmt.Errorf("-j %d: want at least 1 replay at a time", o.jobs)
	}
	if path == "-" {
		return fmt.Errorf("%s reads the trace onto a temporary tape and replays it many times: give a file, or save standard input to one", cmd)
	}
	if o.gpu != "" {
		var err error
		if o.gpuBytes, err = allocators.ParseSize(o.gpu); err != nil || o.gpuBytes == 0 {
			return fmt.Errorf("--device-memory %q: want a size such as 85017493504 or 79.18GiB", o.gpu)
		}
	}
	return checkOutputs([]string{path}, "", o.out)
}

// fitOptions are one fit invocation's flags.
type fitOptions struct {
	searchFlags
	max string
}

func newFitCmd(e *env) *cobra.Command {
	o := &fitOptions{}
	cmd := &cobra.Command{
		Use:   "fit TRACE [flags]",
		Short: "Find the smallest device each allocator runs a trace on",
		Long: `Find, for each allocator, the smallest device on which replaying the trace
fails no allocation, to the allocator's granularity: 2 MiB for pytorch, whose
limit is PyTorch's own (torch.cuda.set_per_process_memory_fraction: a limit on
the bytes it reserves, on a device of the trace's size); 1 MiB for bfc (as
TensorFlow takes a GPU's memory limit); the device's 256 bytes otherwise.

The answer is printed with the settings it holds for, and, for each common
GPU size (16, 24, 32, 40, 48, 80, 94 and 141 GiB), whether the trace fits and
with how much to spare. With --max SIZE, fit exits 1 when an allocator does
not fit in SIZE: a CI check that a model still fits its GPU.

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
  bfcsim fit jax.xplane.pb --device-memory 85017493504   # JAX: the fraction for an H100 80GB`,
		Args: exactlyOneTrace,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.replay.allocatorsGiven = cmd.Flags().Changed("allocators")
			return runFit(cmd, e, o, args[0])
		},
	}
	o.add(cmd)
	cmd.Flags().StringVar(&o.max, "max", "", "exit 1 when an allocator needs more than this `SIZE` (e.g. 24GiB)")
	return cmd
}

// exactlyOneTrace requires one trace argument.
func exactlyOneTrace(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s takes one trace file (see '%s --help')", cmd.Name(), cmd.CommandPath())
	}
	return nil
}

// hideFlags hides the replay flags a command takes but has no use for.
func hideFlags(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		_ = cmd.Flags().MarkHidden(n)
	}
}

func runFit(cmd *cobra.Command, e *env, o *fitOptions, path string) error {
	var maxBytes uint64
	if o.max != "" {
		var err error
		if maxBytes, err = allocators.ParseSize(o.max); err != nil || maxBytes == 0 {
			return fmt.Errorf("--max %q: want a size such as 24GiB", o.max)
		}
	}
	if err := o.check("fit", path); err != nil {
		return err
	}
	s, err := openSearch(cmd, e, &o.replay, path, !o.strict, o.jobs, o.gpuBytes)
	if err != nil {
		return err
	}
	defer s.tr.Close()
	results, err := s.tr.Fit(cmd.Context())
	s.finish()
	if err != nil {
		return err
	}
	rep := report.NewFit(s.name, path, s.tr, results, o.gpuBytes)
	rep.MaxBytes = maxBytes
	if o.out != "" {
		if err := outfile.Write(o.out, func(w io.Writer) error { return report.RenderFit(w, rep, "json") }); err != nil {
			return err
		}
	}
	if err := report.RenderFit(cmd.OutOrStdout(), rep, o.format); err != nil {
		return err
	}
	if over := rep.Exceeds(); len(over) > 0 {
		return &exitError{code: exitFailed, err: fmt.Errorf("%s does not fit in %s (--max)", strings.Join(over, ", "), o.max)}
	}
	return nil
}

// searchRun is a trace loaded for a search, with its progress bar.
type searchRun struct {
	tr     *search.Trace
	specs  []sim.AllocatorSpec // the allocators searched, with their options
	name   string
	bar    *progressbar.ProgressBar
	probes atomic.Int64
}

// finish clears the progress bar.
func (s *searchRun) finish() {
	if s.bar != nil {
		_ = s.bar.Finish()
	}
}

// openSearch reads the trace at path for a search (fit, advise): the
// allocators and options as replay takes them, pytorch alone for a PyTorch
// recording unless -a is given.
func openSearch(cmd *cobra.Command, e *env, o *replayOptions, path string, tolerate bool, jobs int, gpu uint64) (*searchRun, error) {
	t, err := input.OpenFile(cmd.Context(), path, e.stdin, input.Options{SkipInvalid: o.skipInvalid, Allocator: o.tfAllocator, Device: o.recordingDevice})
	if err != nil {
		return nil, err
	}
	defer t.Close()
	setup, err := sim.SetupOf(t.Header())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !o.allocatorsGiven && setup.Recorded.Allocator != "" {
		// A recording: the allocator that made it.
		o.allocators = []string{setup.Recorded.Allocator}
		o.allocatorsGiven = true
	}
	p, err := o.plan([]string{path})
	if err != nil {
		return nil, err
	}
	if o.spaceKind == "cuda" {
		return nil, fmt.Errorf("--space cuda: %s runs many replays at once, which would share the GPU's memory; replay one allocator at a time on a GPU instead", cmd.Name())
	}
	if jobs == 0 {
		jobs = runtime.NumCPU()
	}
	s := &searchRun{name: traceName(t.Header().Name, path), specs: p.specs}
	if e.progress && !o.quiet {
		s.bar = progressbar.NewOptions(-1, progressbar.OptionSetWriter(e.stderr),
			progressbar.OptionSetDescription("reading "+path), progressbar.OptionSpinnerType(14),
			progressbar.OptionThrottle(progressTick), progressbar.OptionClearOnFinish())
	}
	opt := search.Options{
		Space:           allocators.SpaceConfig{Kind: o.spaceKind, Capacity: p.capacity, Options: p.spaceOpts},
		Workers:         jobs,
		TolerateScratch: tolerate,
		Progress: func(search.Probe) {
			n := s.probes.Add(1)
			if s.bar != nil {
				s.bar.Describe(fmt.Sprintf("%s: %d probes", s.name, n))
				_ = s.bar.Add(1)
			}
		},
	}
	tr, err := search.Load(cmd.Context(), t, setup, p.specs, opt)
	if err != nil {
		s.finish()
		return nil, err
	}
	s.tr = tr
	if !o.quiet {
		printConversionNote(e.stderr, t, false)
	}
	if gpu > 0 && !tr.IsJAX() {
		fmt.Fprintf(e.stderr, "bfcsim: warning: --device-memory is for JAX captures (XLA_PYTHON_CLIENT_MEM_FRACTION is a fraction of it); %s is not one, and it changes nothing\n", path)
	}
	return s, nil
}

// traceName is a trace's name for reports: its header's, else its file's.
func traceName(header, path string) string {
	if header != "" {
		return header
	}
	return input.NameOf(path, "stdin")
}
