package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/internal/outfile"
	"github.com/bfcsim/bfcsim/internal/progress"
	"github.com/bfcsim/bfcsim/report"
	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/input"
)

// importFormat is one input format of `bfcsim import`. Adding a format is
// adding it to package input (which converts it, for import and for
// replaying it directly), the summary of what its importer reports to
// report.NewConversion, and an entry here: its help and the names of the
// format-specific flags it reads.
type importFormat struct {
	format input.Format
	name   string // the FORMAT argument
	help   string // one line for --help
	// flags names the format-specific flags (importFlags) this format
	// reads; giving one that it does not read is a usage error.
	flags []string
}

// importFormats is the table of formats, sorted by name.
var importFormats = []importFormat{
	{
		format: input.Malloclab,
		name:   input.Malloclab.Name(),
		help:   "a CMU malloc-lab trace file (.rep): a ID BYTES, r ID BYTES, f ID",
	},
	{
		format: input.Mtrace,
		name:   input.Mtrace.Name(),
		help:   "a glibc mtrace log (MALLOC_TRACE; see docs/recording.md, or use bfcsim record)",
		flags:  []string{"no-addr"},
	},
	{
		format: input.PyTorch,
		name:   input.PyTorch.Name(),
		help:   "a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot), pickle or JSON",
		flags:  []string{"device"},
	},
	{
		format: input.TensorFlow,
		name:   input.TensorFlow.Name(),
		help:   "a TensorFlow profiler capture: *.xplane.pb (tf.profiler, TensorBoard's profile_batch) or *.memory_profile.json.gz",
		flags:  []string{"allocator"},
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
	raw, err := input.OpenRaw(cmd.Context(), path, e.stdin)
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
	var p *progress.Bar
	if e.progress && !o.quiet {
		p = progress.NewBar(e.stderr, e.redraw, path, raw.Size, count.N)
	}
	var res report.Conversion
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
		res, _ = report.NewConversion(st)
		return nil
	}
	dest := o.out
	if toStdout {
		dest = "standard output"
		err = write(cmd.OutOrStdout())
	} else {
		err = outfile.Write(o.out, write)
	}
	if p != nil {
		p.Finish() // before anything else is written to standard error
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
func printImportSummary(w io.Writer, verb string, res report.Conversion, dest string) {
	for _, msg := range res.WarningsFor(false) {
		fmt.Fprintf(w, "bfcsim: warning: %s\n", msg)
	}
	fmt.Fprintf(w, "%s %s, to %s\n", verb, res.Describe(), dest)
}

// printConversionNote says, after a recording was replayed as it is, what
// its import made of it: the same summary as bfcsim import's, so that the
// device, the start state and what was dropped are known. everyDevice says
// that each of a recording's devices is replayed, none left out.
func printConversionNote(w io.Writer, t *input.File, everyDevice bool) {
	res, ok := report.NewConversion(t.Stats())
	if !ok {
		return
	}
	for _, msg := range res.WarningsFor(everyDevice) {
		fmt.Fprintf(w, "bfcsim: warning: %s: %s\n", t.Path, msg)
	}
	fmt.Fprintf(w, "converted %s (%s) on the fly: %s\n", t.Path, t.Format, res.Describe())
}
