package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/report"
	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/input"
	"github.com/bfcsim/bfcsim/trace/malloclab"
	"github.com/bfcsim/bfcsim/trace/mtrace"
	"github.com/bfcsim/bfcsim/trace/pytorch"
	"github.com/bfcsim/bfcsim/trace/tensorflow"
)

// importFormat is one input format of `bfcsim import`. Adding a format is
// adding it to package input (which converts it, for import and for
// replaying it directly) and an entry here: its help, the names of the
// format-specific flags it reads, and the summary of what its importer
// reports.
type importFormat struct {
	format input.Format
	name   string // the FORMAT argument
	help   string // one line for --help
	// flags names the format-specific flags (importFlags) this format
	// reads; giving one that it does not read is a usage error.
	flags []string
	// summarize turns the importer's statistics into the summary line.
	summarize func(stats any) importResult
}

// importFormats is the table of formats, sorted by name.
var importFormats = []importFormat{
	{
		format:    input.Malloclab,
		name:      input.Malloclab.Name(),
		help:      "a CMU malloc-lab trace file (.rep): a ID BYTES, r ID BYTES, f ID",
		summarize: func(st any) importResult { return malloclabResult(st.(malloclab.Stats)) },
	},
	{
		format:    input.Mtrace,
		name:      input.Mtrace.Name(),
		help:      "a glibc mtrace log (MALLOC_TRACE; see docs/recording.md, or use bfcsim record)",
		flags:     []string{"no-addr"},
		summarize: func(st any) importResult { return mtraceResult(st.(mtrace.Stats)) },
	},
	{
		format:    input.PyTorch,
		name:      input.PyTorch.Name(),
		help:      "a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot), pickle or JSON",
		flags:     []string{"device"},
		summarize: func(st any) importResult { return pytorchResult(st.(pytorch.Stats)) },
	},
	{
		format:    input.TensorFlow,
		name:      input.TensorFlow.Name(),
		help:      "a TensorFlow profiler capture: *.xplane.pb (tf.profiler, TensorBoard's profile_batch) or *.memory_profile.json.gz",
		flags:     []string{"allocator"},
		summarize: func(st any) importResult { return tensorflowResult(st.(tensorflow.Stats)) },
	},
}

// importFlags are the format-specific flags, with the formats' names in
// their help. A flag that no format in importFormats reads is hidden.
var importFlags = []string{"no-addr", "device", "allocator"}

// importOptions are the flags of `bfcsim import`.
type importOptions struct {
	out         string
	name        string
	skipInvalid bool
	noAddr      bool   // mtrace
	device      int    // pytorch; -1 picks the device with the most entries
	allocator   string // tensorflow; "" takes the only one
	frames      string // pytorch: path fragments of the user's own frames
	quiet       bool
}

// importResult is what a conversion reports for the summary line.
type importResult struct {
	events, allocs, frees int64
	peakLiveBytes         uint64
	// notes are format-specific counts worth a mention in the summary line
	// ("12 frees of addresses allocated before tracing dropped").
	notes []string
	// warnings are printed one per line, "bfcsim: warning: ...".
	warnings []string
}

func importFormatNames() []string {
	names := make([]string, len(importFormats))
	for i, f := range importFormats {
		names[i] = f.name
	}
	return names
}

func findImportFormat(name string) (importFormat, error) {
	for _, f := range importFormats {
		if f.name == name {
			return f, nil
		}
	}
	return importFormat{}, fmt.Errorf("unknown import format %q (want one of %s)", name, strings.Join(importFormatNames(), ", "))
}

func newImportCmd(e *env) *cobra.Command {
	o := &importOptions{}
	var formats strings.Builder
	for _, f := range importFormats {
		fmt.Fprintf(&formats, "  %-10s %s\n", f.name, f.help)
	}
	cmd := &cobra.Command{
		Use:   "import FORMAT INPUT [-o OUTPUT]",
		Short: "Convert a recording (PyTorch snapshot, TensorFlow capture, mtrace, malloc-lab) to a bfcsim trace",
		Long: `Convert a trace recorded by another tool to a bfcsim trace. Formats:

` + formats.String() + `
INPUT may be gzip- or zstd-compressed, or - for standard input; an input
that is plainly another of the formats is refused. The trace is written to
-o, compressed when it ends in .gz or .zst, atomically: a failed conversion
leaves no file. Without -o, or with -o -, it goes to standard output. A
one-line summary goes to standard error, and a progress bar (bytes read) on
a terminal.

replay, plot, compare, sweep and validate also take these recordings
directly, recognised by their content, and convert them on the fly to the
same trace; import is for keeping the trace, or picking --device.
(replay and the others take --allocator too.)

An input line that cannot be converted stops the conversion with
file:line: reason (exit 2); --skip-invalid counts and skips such lines.
What the recording holds but a trace cannot replay (mtrace: frees of blocks
allocated before tracing began) is dropped and counted in the summary.

A PyTorch snapshot's recording starts mid-run: the allocations and segments
live when it started are rebuilt from its final state and written first,
between the marks "start state" and "recording starts". A pickle that asks
to run code (GLOBAL, REDUCE, BUILD, ...) is refused: a snapshot holds only
plain data. --device picks the device (default: the one with the most trace
entries). The snapshot is read in one pass, in memory that does not grow
with its trace: a large one spools its entries to a temporary file ($TMPDIR,
about 25 bytes an entry). See docs/recording.md.

A TensorFlow profiler capture holds the events of several allocators
(GPU_0_bfc, gpu_host_bfc, ...): --allocator picks one, and without it a
capture with more than one is refused with their list. It starts mid-run:
the chunks allocated before it and freed in it, and the rest of the bytes
then in use (one allocation without an address), make its start state.
Each allocation carries the chunk's size as block, for recorded_block_match;
addresses are kept, moved to the simulated device's base, only when the
capture starts from an empty pool.`,
		Example: `  bfcsim import mtrace mtrace.log -o prog.jsonl.zst
  bfcsim import malloclab short1.rep -o short1.jsonl
  bfcsim import pytorch snapshot.pickle --device 0 -o run.jsonl.zst
  bfcsim import tensorflow logs/plugins/profile/run/host.xplane.pb --allocator GPU_0_bfc -o gpu0.jsonl.zst
  zcat big.log.gz | bfcsim import mtrace - | bfcsim replay -`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return fmt.Errorf("import needs a format (%s) and an input file (see '%s --help')",
					strings.Join(importFormatNames(), ", "), cmd.CommandPath())
			case len(args) == 1:
				if _, err := findImportFormat(args[0]); err != nil {
					return err
				}
				return fmt.Errorf("import %s needs an input file, or - for standard input", args[0])
			case len(args) > 2:
				return fmt.Errorf("import takes a format and one input file, got %d arguments", len(args))
			}
			return nil
		},
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return importFormatNames(), cobra.ShellCompDirectiveNoFileComp
			}
			if len(args) == 1 {
				return nil, cobra.ShellCompDirectiveDefault
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runImport(cmd, e, o, args[0], args[1])
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.out, "out", "o", "", "output trace (.gz or .zst to compress; default standard output)")
	f.StringVar(&o.name, "name", "", "trace name for the header (default: the input's file name without extensions)")
	f.BoolVar(&o.skipInvalid, "skip-invalid", false, "count and skip input lines that cannot be converted instead of stopping")
	f.BoolVar(&o.noAddr, "no-addr", false, "mtrace: leave the recorded addresses out of the trace")
	f.IntVar(&o.device, "device", -1, "pytorch: the CUDA device whose allocations to import (-1: the one with the most trace entries, or the one with allocations when it has none)")
	f.StringVar(&o.allocator, "allocator", "", "tensorflow: the allocator whose events to import, e.g. GPU_0_bfc (needed when the capture has several)")
	f.StringVar(&o.frames, "frames", "", framesHelp)
	f.BoolVarP(&o.quiet, "quiet", "q", false, "no progress bar")
	for _, name := range importFlags {
		used := slices.ContainsFunc(importFormats, func(f importFormat) bool { return slices.Contains(f.flags, name) })
		if !used {
			_ = f.MarkHidden(name)
		}
	}
	return cmd
}

func runImport(cmd *cobra.Command, e *env, o *importOptions, format, path string) error {
	f, err := findImportFormat(format)
	if err != nil {
		return err
	}
	for _, name := range importFlags {
		if cmd.Flags().Changed(name) && !slices.Contains(f.flags, name) {
			return fmt.Errorf("--%s does not apply to the %s format", name, f.name)
		}
	}
	toStdout := o.out == "" || o.out == "-"
	if !toStdout {
		if err := checkOutputs([]string{path}, "", o.out); err != nil {
			return err
		}
	}
	raw, err := input.OpenRaw(path, e.stdin)
	if err != nil {
		return err
	}
	defer raw.Close()
	file := raw.Name
	count := &input.Counter{R: raw}
	in, err := input.Peek(count)
	if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	defer in.Close()
	if in.Unknown == nil && in.Format != f.format && in.Format != input.Trace {
		return fmt.Errorf("%s is %s, not %s (bfcsim import %s reads it; bfcsim replay takes it as it is)",
			file, in.Format, f.format, in.Format.Name())
	}
	name := o.name
	if name == "" {
		name = input.NameOf(path, f.name)
	}
	p := newProgress(e, path, raw.Size, count.N, o.quiet)
	var res importResult
	write := func(w io.Writer) error {
		st, err := input.Convert(cmd.Context(), f.format, in, file, trace.NewWriter(w), input.Options{
			Name:        name,
			SkipInvalid: o.skipInvalid,
			Device:      o.device,
			NoAddr:      o.noAddr,
			Allocator:   o.allocator,
			Frames:      trace.ParseFrameRule(o.frames),
		})
		if err != nil {
			return err
		}
		res = f.summarize(st)
		return nil
	}
	dest := o.out
	if toStdout {
		dest = "standard output"
		err = write(cmd.OutOrStdout())
	} else {
		err = writeFileAtomic(o.out, write)
	}
	if p != nil {
		p.finish() // before anything else is written to standard error
	}
	if err != nil {
		return err
	}
	printImportSummary(e.stderr, "imported", res, dest)
	return nil
}

// printImportSummary prints the warnings, then one line: "imported 428
// events (221 allocs, 207 frees; 3 frees ... dropped), peak live 16.9 KiB,
// to t.jsonl".
func printImportSummary(w io.Writer, verb string, res importResult, dest string) {
	for _, msg := range res.warnings {
		fmt.Fprintf(w, "bfcsim: warning: %s\n", msg)
	}
	fmt.Fprintf(w, "%s %s, to %s\n", verb, res.describe(), dest)
}

// describe says "428 events (221 allocs, 207 frees; ...), peak live 16.9 KiB".
func (res importResult) describe() string {
	detail := report.Plural(res.allocs, "alloc", "allocs") + ", " + report.Plural(res.frees, "free", "frees")
	if len(res.notes) > 0 {
		detail += "; " + strings.Join(res.notes, ", ")
	}
	return fmt.Sprintf("%s (%s), peak live %s", report.Plural(res.events, "event", "events"), detail, report.Bytes(res.peakLiveBytes))
}

// printConversionNote says, after a recording was replayed as it is, what
// its import made of it: the same summary as bfcsim import's, so that the
// device, the start state and what was dropped are known.
func printConversionNote(w io.Writer, t *input.File) {
	st := t.Stats()
	if st == nil {
		return
	}
	for _, f := range importFormats {
		if f.format == t.Format {
			res := f.summarize(st)
			for _, msg := range res.warnings {
				fmt.Fprintf(w, "bfcsim: warning: %s: %s\n", t.Path, msg)
			}
			fmt.Fprintf(w, "converted %s (%s) on the fly: %s\n", t.Path, t.Format, res.describe())
		}
	}
}

// countNote appends "N what" to notes, unless n is 0.
func countNote(notes []string, n int64, one, many string) []string {
	if n == 0 {
		return notes
	}
	return append(notes, report.Plural(n, one, many))
}

// skippedWarnings turns the errors skipped under --skip-invalid into
// warnings.
func skippedWarnings(errs []*trace.SyntaxError, skipped int64) []string {
	var ws []string
	for _, e := range errs {
		ws = append(ws, e.Error()+" (skipped)")
	}
	if rest := skipped - int64(len(errs)); rest > 0 {
		ws = append(ws, fmt.Sprintf("and %s more invalid lines skipped", report.Count(rest)))
	}
	return ws
}

// mtraceResult summarises an mtrace conversion.
func mtraceResult(st mtrace.Stats) importResult {
	res := importResult{events: st.Events, allocs: st.Allocs, frees: st.Frees, peakLiveBytes: st.PeakLiveBytes}
	res.notes = countNote(res.notes, st.DroppedFrees,
		"free of an address allocated before tracing dropped",
		"frees of addresses allocated before tracing dropped")
	res.notes = countNote(res.notes, st.DoubleAllocs,
		"malloc of a live address (its free was not logged)",
		"mallocs of live addresses (their frees were not logged)")
	res.notes = countNote(res.notes, st.FailedAllocs, "failed allocation", "failed allocations")
	res.notes = countNote(res.notes, st.Skipped, "invalid line skipped", "invalid lines skipped")
	if st.CutLastLine {
		res.notes = append(res.notes, "the last line, cut short, dropped")
	}
	res.warnings = skippedWarnings(st.SkippedErrors, st.Skipped)
	return res
}

// pytorchResult summarises a snapshot's conversion.
func pytorchResult(st pytorch.Stats) importResult {
	res := importResult{events: st.Events, allocs: st.Allocs, frees: st.Frees, peakLiveBytes: st.PeakLiveBytes}
	res.notes = append(res.notes, deviceNote(st))
	if c := st.DeviceChoice; len(c.Others) > 0 {
		res.warnings = append(res.warnings, fmt.Sprintf("the snapshot has allocations on other devices too (%s), left out: pick one with --device",
			joinInts(c.Others)))
	}
	if st.Allocs == 0 && st.StartAllocs == 0 {
		res.warnings = append(res.warnings, fmt.Sprintf("device %d has no allocations in the snapshot: a replay of this trace does nothing", st.Device))
	}
	res.notes = countNote(res.notes, int64(st.StartAllocs),
		"allocation live when the recording started", "allocations live when the recording started")
	res.notes = countNote(res.notes, int64(st.StartSegments), "segment held then", "segments held then")
	res.notes = countNote(res.notes, st.PendingFrees,
		"free requested but not completed (kept allocated)", "frees requested but not completed (kept allocated)")
	res.notes = countNote(res.notes, int64(st.SizesUnknown),
		"block of unknown size (freed during the recording; its requested size is used)",
		"blocks of unknown size (freed during the recording; their requested sizes are used)")
	res.notes = countNote(res.notes, st.OOMs, "allocation the program failed (out of memory)", "allocations the program failed (out of memory)")
	if st.CapacityBytes > 0 {
		res.notes = append(res.notes, "capacity "+report.Bytes(st.CapacityBytes)+" (held at the failure plus device_free)")
	}
	if st.Settings != nil {
		res.notes = append(res.notes, "allocator settings "+settingsText(*st.Settings))
	}
	res.notes = countNote(res.notes, st.Dropped, "entry dropped", "entries dropped")
	for _, u := range st.Unmodelled {
		res.warnings = append(res.warnings, "recorded setting the pytorch model does not have: "+u)
	}
	for _, r := range st.DroppedReasons {
		res.warnings = append(res.warnings, "dropped: "+r)
	}
	return res
}

// deviceNote says which device was converted, and why when the snapshot
// has several.
func deviceNote(st pytorch.Stats) string {
	c := st.DeviceChoice
	switch {
	case c.Asked || c.Devices <= 1:
		return fmt.Sprintf("device %d", st.Device)
	case c.Allocs == 0:
		return fmt.Sprintf("device %d of %d, none with allocations", st.Device, c.Devices)
	}
	return fmt.Sprintf("device %d of %d, the one with the most allocations (%s)", st.Device, c.Devices, report.Count(c.Allocs))
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// settingsText lists recorded settings that are options of their
// allocator, as --set would take them.
func settingsText(rs trace.RecordedSettings) string {
	var kv []string
	for _, k := range rs.Keys() {
		if k != "PYTORCH_CUDA_ALLOC_CONF" {
			kv = append(kv, k+"="+rs.Options[k])
		}
	}
	return strings.Join(kv, " ")
}

// malloclabResult summarises a malloc-lab conversion.
func malloclabResult(st malloclab.Stats) importResult {
	res := importResult{events: st.Events, allocs: st.Allocs, frees: st.Frees, peakLiveBytes: st.PeakLiveBytes}
	res.notes = countNote(res.notes, st.Reallocs, "realloc", "reallocs")
	res.notes = countNote(res.notes, st.Skipped, "invalid line skipped", "invalid lines skipped")
	res.warnings = append(st.Warnings, skippedWarnings(st.SkippedErrors, st.Skipped)...)
	return res
}

// tensorflowResult summarises a TensorFlow capture's conversion: the
// allocator, what of the start state was recorded and what inferred, the
// memory limit, and whether TensorBoard sampled the memory profile.
func tensorflowResult(st tensorflow.Stats) importResult {
	res := importResult{events: st.Events, allocs: st.Allocs, frees: st.Frees, peakLiveBytes: st.PeakLiveBytes}
	if st.JAXVersion != "" {
		res.notes = append(res.notes, "a JAX "+st.JAXVersion+" capture: XLA's BFC allocator")
	}
	res.notes = append(res.notes, "allocator "+st.Allocator)
	if len(st.Allocators) > 1 {
		n := fmt.Sprintf("%d allocators in the capture", len(st.Allocators))
		if st.AutoPicked {
			n += ", the only device allocator picked (--allocator for another)"
		}
		res.notes = append(res.notes, n)
	}
	if st.StartInUseBytes > 0 {
		res.notes = append(res.notes, fmt.Sprintf("%s in use when the capture started: %s in %d chunks freed in it (recorded), %s not (inferred, no address)",
			report.Bytes(st.StartInUseBytes), report.Bytes(st.StartChunkBytes), st.StartChunks, report.Bytes(st.StartInferredBytes)))
	} else {
		res.notes = append(res.notes, "the capture starts from an empty pool")
	}
	if st.CapacityBytes > 0 {
		res.notes = append(res.notes, "memory limit "+report.Bytes(st.CapacityBytes))
	}
	if st.Settings != nil {
		who, grow, whole := "TensorFlow's allocator", "TF_FORCE_GPU_ALLOW_GROWTH=true", "its memory limit"
		if st.JAXVersion != "" {
			who, grow, whole = "XLA's allocator", "XLA_PYTHON_CLIENT_PREALLOCATE=false", "XLA_PYTHON_CLIENT_MEM_FRACTION of the device"
		}
		var how string
		switch st.Layout {
		case tensorflow.LayoutGrowth:
			how = fmt.Sprintf("grew its pool by %d regions as it needed them (%s), at the addresses its chunks show", st.Regions, grow)
		case tensorflow.LayoutPreallocate:
			how = "reserved its whole pool at the start (" + whole + "), as its chunks' addresses show"
		case tensorflow.LayoutEither:
			how = "kept within the first region a growing pool reserves, so its addresses cannot tell whether it grew; taken as preallocated (" + whole + ")"
		default:
			how = "is taken as preallocated (" + whole + "), its default: the capture's addresses cannot show whether it grew"
		}
		res.notes = append(res.notes, who+" "+how+"; bfc starts from "+settingsText(*st.Settings))
	}
	if st.AddressesRebased {
		res.notes = append(res.notes, "addresses moved to the simulated device's base, to compare")
	} else {
		res.notes = append(res.notes, "addresses left out (the pool's layout at the start is unknown)")
	}
	res.notes = countNote(res.notes, st.Steps, "step", "steps")
	if st.Inconsistent > 0 {
		res.warnings = append(res.warnings, fmt.Sprintf("%d events whose bytes in use do not follow from the event before: the capture lost or reordered events", st.Inconsistent))
	}
	switch {
	case st.Sampled:
		res.warnings = append(res.warnings, fmt.Sprintf("TensorBoard sampled this memory profile: %d snapshots of a longer run, so events are missing; the *.xplane.pb beside it has them all", st.Snapshots))
	case st.Truncated:
		res.warnings = append(res.warnings, fmt.Sprintf("TensorBoard kept only the %d snapshots with the least free memory of this run, so events are missing; the *.xplane.pb beside it has them all", st.Snapshots))
	}
	return res
}
