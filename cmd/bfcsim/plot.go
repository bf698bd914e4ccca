package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/internal/outfile"
	"github.com/bfcsim/bfcsim/report"
	"github.com/bfcsim/bfcsim/sim"
)

type plotOptions struct {
	replayOptions
	kind    string
	out     string
	at      string
	colorBy string
}

func newPlotCmd(e *env) *cobra.Command {
	o := &plotOptions{}
	cmd := &cobra.Command{
		Use:   "plot TRACE -a NAME --kind KIND -o FILE",
		Short: "Replay a trace and draw one plot (PNG or SVG)",
		Long: `Replay a trace and draw one plot of what happened, as PNG or SVG by the
extension of -o. Kinds:

  timeline       bytes live, in use and reserved over the trace, one panel per
                 allocator; failed allocations marked, steps and marks drawn
  memmap         address × time: every block a rectangle over the regions it
                 lies in, coloured by size or tag (--color); one allocator
  occupancy      the address space at one moment (--at peak, the default, or
                 after event N): requested, rounding and padding, free,
                 regions outlined; one allocator
  fragmentation  TensorFlow's fragmentation metric and reserved ÷ live over
                 the trace
  latency        each allocator's Allocate and Free latency by percentile

Large traces are summarised to a bounded number of points or cells, and the
plot says so; a trace of any length plots in bounded memory. The x axis is
the event index. memmap and occupancy draw one allocator (-a; default: a
recording's own, else bfc); the others draw every allocator named
(default: replay's).`,
		Example: `  bfcsim plot traces/transformer-train.jsonl -a bfc --kind memmap -o memmap.png
  bfcsim plot traces/random.jsonl --kind timeline -o timeline.svg
  bfcsim plot t.jsonl -a naive --kind occupancy --at 5000 -o occ.png
  bfcsim plot t.jsonl -a bfc,pytorch --kind fragmentation -o frag.png`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("plot takes one trace, got %d (see '%s --help')", len(args), cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPlot(cmd, e, o, args[0])
		},
	}
	o.addFlags(cmd, true)
	f := cmd.Flags()
	f.StringVarP(&o.kind, "kind", "k", "", "what to draw: "+strings.Join(report.PlotKinds, ", "))
	f.StringVarP(&o.out, "out", "o", "", "the image to write, .png or .svg")
	f.StringVar(&o.at, "at", "peak", "occupancy: the moment to draw, peak (of bytes in use) or an event index N (after event N, 0-based)")
	f.StringVar(&o.colorBy, "color", "", "memmap: colour blocks by size or tag (default: tag when the trace has tags)")
	_ = cmd.MarkFlagRequired("kind")
	_ = cmd.MarkFlagRequired("out")
	_ = cmd.RegisterFlagCompletionFunc("kind", fixedCompletion(report.PlotKinds...))
	_ = cmd.RegisterFlagCompletionFunc("color", fixedCompletion("size", "tag"))
	return cmd
}

func runPlot(cmd *cobra.Command, e *env, o *plotOptions, path string) error {
	if !slices.Contains(report.PlotKinds, o.kind) {
		return fmt.Errorf("unknown --kind %q (want one of %s)", o.kind, strings.Join(report.PlotKinds, ", "))
	}
	format, err := report.PlotFormat(o.out)
	if err != nil {
		return err
	}
	if o.colorBy != "" && o.colorBy != "size" && o.colorBy != "tag" {
		return fmt.Errorf("--color %q: want size or tag", o.colorBy)
	}
	rc := &sim.RecordConfig{}
	if o.at != "peak" {
		n, err := strconv.ParseInt(o.at, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("--at %q: want peak or an event index (0, 1, …)", o.at)
		}
		rc.AtEvent, rc.LayoutEvent = true, n
	}
	if report.PerAllocator(o.kind) {
		if !cmd.Flags().Changed("allocators") {
			// The recording's own allocator, else bfc.
			o.allocators, o.recordedOnly = []string{"bfc"}, true
		}
		if len(o.allocators) != 1 {
			return fmt.Errorf("a %s plot shows one allocator; -a names %d", o.kind, len(o.allocators))
		}
	}
	o.record = rc
	// A per-allocator plot draws the one allocator named: --set does not add another.
	o.allocatorsGiven = cmd.Flags().Changed("allocators") || report.PerAllocator(o.kind)
	p, err := o.plan([]string{path})
	if err != nil {
		return err
	}
	if err := checkOutputs([]string{path}, "", o.out); err != nil {
		return err
	}
	runs, err := o.replayAll(cmd, e, p, []string{path})
	if err != nil {
		return err
	}
	rep := report.Build(runs)
	tr := &rep.Traces[0]
	if o.kind == "occupancy" && rc.AtEvent && rc.LayoutEvent >= tr.Events {
		return fmt.Errorf("--at %d: %s has %d events (0 to %d)", rc.LayoutEvent, path, tr.Events, tr.Events-1)
	}
	opt := report.PlotOptions{Kind: o.kind, ColorBy: o.colorBy}
	if report.PerAllocator(o.kind) {
		opt.Allocator = tr.Results[0].Allocator
	}
	return outfile.Write(o.out, func(w io.Writer) error {
		return report.WritePlot(w, tr, opt, format)
	})
}
