package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/report"
	"github.com/bfcsim/bfcsim/sim"
)

// diffOptions are one diff invocation's flags.
type diffOptions struct {
	replay    replayOptions
	format    string
	out       string
	maxGrowth string
	jobs      int
}

func newDiffCmd(e *env) *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff BEFORE AFTER [flags]",
		Short: "What changed between two runs: the peak, each allocator's fit, and the call sites that grew",
		Long: `Replay two recordings or traces (any format replay reads) with the same flags,
each by its own allocator first as replay does, and report, before and after:
the peak of live bytes and the step or annotation it falls in; each
allocator's peak of reserved bytes and fit's smallest device; and what each
call site held live at the peak (named as replay's peak_call_sites are, and
--frames), the largest growth first, new and vanished sites marked. The
call sites' differences add up to the difference of the peaks.

With --max-growth (a percentage, a fraction or a size), diff exits 1 when
the peak of live bytes or an allocator's fit grows beyond it, and -f
markdown names what grew, fit for a CI job summary. -o DIR writes
report.json, report.md and index.html: both runs' bytes live, in use and
reserved on one plot (by step when both traces mark their steps), and the
call sites with their stacks on hover.

A recording of several devices is compared on the device with the most
live at its peak (--device N for another).

Exit codes: 0 nothing grew beyond --max-growth, 1 something did, 2 bad
usage or input.`,
		Example: `  bfcsim diff before.pickle after.pickle
  bfcsim diff before.pickle after.pickle --max-growth 2% -f markdown >> "$GITHUB_STEP_SUMMARY"
  bfcsim diff old.jsonl new.jsonl -a bfc --max-growth 256MiB -o diff/`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.replay.allocatorsGiven = cmd.Flags().Changed("allocators")
			return runDiff(cmd, e, o, args)
		},
	}
	o.replay.addFlags(cmd, true)
	o.replay.addFramesFlag(cmd)
	hideFlags(cmd, "touch", "check", "latency-sample", "stop-on-oom")
	f := cmd.Flags()
	f.StringVarP(&o.format, "format", "f", "table", "output format: "+strings.Join(report.DiffFormats, ", "))
	f.StringVarP(&o.out, "out", "o", "", "also write report.json, report.md and index.html into this `DIR`")
	f.StringVar(&o.maxGrowth, "max-growth", "", "exit 1 when the peak or a fit grows by more than this: 2%, 0.02 or 256MiB")
	f.IntVarP(&o.jobs, "jobs", "j", 0, "replays to run at once (default: the number of CPUs)")
	_ = cmd.RegisterFlagCompletionFunc("format", fixedCompletion(report.DiffFormats...))
	return cmd
}

func runDiff(cmd *cobra.Command, e *env, o *diffOptions, paths []string) error {
	if !slices.Contains(report.DiffFormats, o.format) {
		return fmt.Errorf("unknown format %q (want one of %s)", o.format, strings.Join(report.DiffFormats, ", "))
	}
	var growth *report.Growth
	if o.maxGrowth != "" {
		g, err := report.ParseGrowth(o.maxGrowth)
		if err != nil {
			return fmt.Errorf("--max-growth %w", err)
		}
		growth = &g
	}
	if slices.Contains(paths, "-") {
		return fmt.Errorf("diff reads each trace onto a temporary tape and replays it many times: give files, or save standard input to one")
	}
	if err := checkOutputs(paths, o.out); err != nil {
		return err
	}
	how := searchHow{tolerate: true, every: true, callSites: true, jobs: o.jobs}
	if o.out != "" {
		how.record = &sim.RecordConfig{}
	}
	var runs [2]report.DiffRun
	var notes []string
	for i, path := range paths {
		s, err := openSearch(cmd, e, &o.replay, []string{path}, how)
		if err != nil {
			return err
		}
		k, note := report.DiffDevice(s.members, []string{"before", "after"}[i]+", "+path+",")
		if note != "" {
			notes = append(notes, note)
		}
		fits, err := s.members[k].Fit(cmd.Context())
		s.finish()
		s.close() // its tapes: what the diff needs of them is kept
		if err != nil {
			return err
		}
		runs[i] = report.DiffRun{Rec: s.members[k], Fits: fits, Frames: o.replay.frameRule()}
	}
	d := report.NewDiff(runs[0], runs[1], growth)
	d.Notes = append(notes, d.Notes...)
	if o.out != "" {
		if err := report.WriteDiffDir(cmd.Context(), o.out, d, runs[0], runs[1]); err != nil {
			return err
		}
	}
	if err := report.RenderDiff(cmd.OutOrStdout(), d, o.format); err != nil {
		return err
	}
	if len(d.Exceeded) > 0 {
		return &exitError{code: exitFailed, err: fmt.Errorf("grew beyond --max-growth %s: %s", o.maxGrowth, strings.Join(d.Exceeded, "; "))}
	}
	return nil
}
