package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/report"
)

// compareOptions are one compare invocation's flags.
type compareOptions struct {
	replay         replayOptions
	baseline       string
	tolerance      string
	update         bool
	compareLatency bool
	reportOut      string
}

func newCompareCmd(e *env) *cobra.Command {
	o := &compareOptions{}
	cmd := &cobra.Command{
		Use:   "compare TRACE... --baseline FILE [flags]",
		Short: "Replay traces and compare with a baseline report: exit 1 on a regression",
		Long: `Replay the traces as 'bfcsim replay' does, compare every metric of every
allocator with a baseline (a report.json, as 'bfcsim replay -f json' or -o DIR
writes it, or --update-baseline), and print the comparison as Markdown fit for
a CI summary ($GITHUB_STEP_SUMMARY).

Traces are matched with the baseline's by name, allocators by name. A metric
is a regression when it is worse than the baseline by more than the tolerance
(a relative change: with 2%, a peak of 100 MiB may grow to 102 MiB), better
when it improved by more, ok otherwise. From a zero baseline any worsening is
a regression. Lower is better for every metric but utilization, ok_allocs,
recorded_address_match.matched, recorded_block_match.matched and
events_per_second.

Compared: peak_reserved_bytes, peak_in_use_bytes, final_reserved_bytes,
fragmentation, utilization, internal_waste_at_peak_bytes, tf_fragmentation.max
and .mean, ok_allocs, failed_allocs, device_reserve_calls,
device_release_calls, modeled_device_seconds, recorded_address_match.matched,
recorded_block_match.matched.
Shown but compared only with --compare-latency, as wall-clock times vary from
machine to machine: latency_ns.alloc and .free p50 and p99,
events_per_second, replay_seconds.

A trace or allocator the baseline lacks, or one the run lacks, is noted, not
a failure. When an allocator's options differ from the baseline's, the
comparison is made and a warning printed.

--update-baseline writes this run as the new baseline (after printing the
comparison, if there was a baseline) and exits 0 whatever changed.

Exit codes: 0 no regression, 1 a regression beyond the tolerance, 2 bad usage
or input (a missing or unreadable baseline, nothing in common with it).`,
		Example: `  # in CI: fail on a memory regression, keep the table in the job summary
  set -o pipefail
  bfcsim compare traces/*.jsonl --baseline ci/baseline.json | tee -a "$GITHUB_STEP_SUMMARY"

  # make, or accept the current numbers as, the baseline
  bfcsim compare traces/*.jsonl --baseline ci/baseline.json --update-baseline

  # stricter, and only two allocators (options as for replay)
  bfcsim compare t.jsonl --baseline base.json --tolerance 0.5% -a bfc,naive --set bfc.allow_growth=false`,
		Args: traceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCompare(cmd, e, o, args)
		},
	}
	o.replay.addFlags(cmd, true)
	o.replay.addFramesFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&o.baseline, "baseline", "", "the report.json `FILE` to compare with (required)")
	f.StringVar(&o.tolerance, "tolerance", "2%", "the largest relative change that is still ok: a percentage (2%, 0.5%) or a fraction (0.02)")
	f.BoolVar(&o.update, "update-baseline", false, "write this run as the new baseline (creating the file and its directory) and exit 0")
	f.BoolVar(&o.compareLatency, "compare-latency", false, "also compare wall-clock metrics (latency, events per second, replay time)")
	f.StringVar(&o.reportOut, "report", "", "also write this run's report.json to `FILE` (e.g. a CI artefact, a candidate baseline)")
	_ = cmd.MarkFlagFilename("baseline", "json", "gz", "zst")
	_ = cmd.MarkFlagFilename("report", "json")
	return cmd
}

func runCompare(cmd *cobra.Command, e *env, o *compareOptions, paths []string) error {
	if o.baseline == "" {
		return fmt.Errorf("compare needs --baseline FILE, the report.json to compare with (create one with --update-baseline)")
	}
	tol, err := report.ParseTolerance(o.tolerance)
	if err != nil {
		return fmt.Errorf("--tolerance: %w", err)
	}
	o.replay.allocatorsGiven = cmd.Flags().Changed("allocators")
	p, err := o.replay.plan(paths)
	if err != nil {
		return err
	}
	// The baseline is an input, or an output with --update-baseline: never
	// a trace, a directory, or the same file as --report.
	inputs, outputs := paths, []string{o.reportOut}
	if o.update {
		outputs = append(outputs, o.baseline)
	} else {
		inputs = append(append([]string(nil), paths...), o.baseline)
	}
	if err := checkOutputs(inputs, "", outputs...); err != nil {
		return err
	}

	// Read the baseline before the replay, which may take minutes.
	base, err := report.ReadBaseline(o.baseline)
	var unusable *report.BaselineUnusableError
	switch {
	case errors.As(err, &unusable) && o.update:
		fmt.Fprintf(e.stderr, "bfcsim: baseline %s %s; this run becomes the baseline\n", o.baseline, unusable.Why)
		base = nil
	case err != nil:
		return err
	}

	runs, err := o.replay.replayAll(cmd, e, p, paths)
	if err != nil {
		return err
	}
	rep := report.Build(runs)
	if o.reportOut != "" {
		if err := report.WriteJSONFile(o.reportOut, rep); err != nil {
			return err
		}
	}

	out := cmd.OutOrStdout()
	var cmp report.Comparison
	if base != nil {
		cmp = report.Compare(*base, rep, report.CompareOptions{
			Tolerance: tol, Timings: o.compareLatency, BaselineName: o.baseline,
		})
		if cmp.Matched() == 0 && !o.update {
			return report.NothingToCompare(o.baseline, *base, rep)
		}
		if err := report.WriteComparisonMarkdown(out, cmp); err != nil {
			return err
		}
	} else if err := report.WriteMarkdown(out, rep); err != nil {
		return err
	}

	if o.update {
		if err := report.WriteJSONFile(o.baseline, rep); err != nil {
			return err
		}
		msg := fmt.Sprintf("bfcsim: wrote the new baseline %s (%s)", o.baseline, report.Describe(rep))
		if n := cmp.Count(report.Regression); n > 0 {
			msg += fmt.Sprintf(", accepting %s", report.Plural(int64(n), "regression", "regressions"))
		}
		fmt.Fprintln(e.stderr, msg)
		return nil
	}
	if err := cmp.Failure(tol); err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	return nil
}
