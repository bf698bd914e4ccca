package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/internal/outfile"
	"github.com/bfcsim/bfcsim/report"
)

// mergeOptions are one merge invocation's flags.
type mergeOptions struct {
	out          string
	dir          string
	format       string
	metric       string
	allowPartial bool
}

func newMergeCmd(e *env) *cobra.Command {
	o := &mergeOptions{}
	cmd := &cobra.Command{
		Use:   "merge REPORT... [-o FILE] [flags]",
		Short: "Combine the report.json files of the shards of a sweep",
		Long: `Combine the report.json files that the shards of one sweep
('bfcsim sweep --shard i/n') wrote into one report: the report the whole
sweep, run on one machine, would have written, apart from wall-clock timings.

The reports must come from one sweep: the same traces, allocators, grid,
--set options, capacity, space and flags. Each shard may be given once, and
every job of the sweep must be in exactly one report; a missing shard or job
is an error, unless --allow-partial, which merges what there is and lists
the missing jobs in the report ("missing_jobs"). A merged report may itself
be merged again. Reports may be gzip or zstd compressed.

The merged report is printed in the -f format, written as report.json to
-o FILE, and with --dir DIR written as 'bfcsim sweep -o DIR' writes it:
report.json, report.md and the plots.`,
		Example: `  bfcsim merge shard-*/report.json -o report.json
  bfcsim merge shards/*.json --dir out/ -f markdown >> "$GITHUB_STEP_SUMMARY"
  bfcsim merge shard-1/report.json shard-3/report.json --allow-partial -f json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("merge needs the report.json of at least one shard (see '%s --help')", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMerge(cmd, o, args)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.out, "out", "o", "", "write the merged report.json to this `FILE` (.gz or .zst compressed by its extension)")
	f.StringVar(&o.dir, "dir", "", "write report.json, report.md and a plot per trace (PNG and SVG) into this `DIR`, as sweep -o does")
	f.StringVarP(&o.format, "format", "f", "table", "output format: "+strings.Join(report.SweepFormats, ", "))
	f.StringVar(&o.metric, "metric", report.DefaultSweepMetric, "the metric that picks the best row and is plotted")
	f.BoolVar(&o.allowPartial, "allow-partial", false, "merge even when jobs are missing, and list them in the report")
	_ = cmd.RegisterFlagCompletionFunc("format", fixedCompletion(report.SweepFormats...))
	_ = cmd.RegisterFlagCompletionFunc("metric", fixedCompletion(report.SweepMetrics()...))
	_ = cmd.MarkFlagFilename("out", "json", "gz", "zst")
	return cmd
}

func runMerge(cmd *cobra.Command, o *mergeOptions, paths []string) error {
	if !slices.Contains(report.SweepFormats, o.format) {
		return fmt.Errorf("unknown format %q (want one of %s)", o.format, strings.Join(report.SweepFormats, ", "))
	}
	if err := report.CheckSweepMetric(o.metric); err != nil {
		return fmt.Errorf("--metric: %w", err)
	}
	if err := checkOutputs(paths, o.dir, o.out); err != nil {
		return err
	}
	parts := make([]report.Sweep, len(paths))
	for i, path := range paths {
		s, err := report.ReadSweep(path)
		if err != nil {
			return err
		}
		parts[i] = *s
	}
	sw, err := report.MergeSweeps(parts, paths, o.allowPartial)
	if err != nil {
		return err
	}
	if o.out != "" {
		if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
			return err
		}
		if err := outfile.Write(o.out, func(w io.Writer) error { return report.WriteSweepJSON(w, sw) }); err != nil {
			return err
		}
	}
	if o.dir != "" {
		if err := report.WriteSweepDir(cmd.Context(), o.dir, sw, o.metric); err != nil {
			return err
		}
	}
	return report.RenderSweep(cmd.OutOrStdout(), sw, o.format, o.metric)
}
