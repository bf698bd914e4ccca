package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/internal/progress"
	"github.com/bfcsim/bfcsim/report"
	"github.com/bfcsim/bfcsim/search"
	scaling "github.com/bfcsim/bfcsim/search/scale"
)

func newScaleCmd(e *env) *cobra.Command {
	var steps, to, fitIn, start, alloc, format, out, gpu, reserve string
	var sets []string
	var jobs int
	cmd := &cobra.Command{
		Use:   "scale TRACE --steps V1,V2,... [--to V|V1,V2,... -o OUT | --fit-in SIZE]",
		Short: "The recording at another batch or sequence length, or the largest that fits",
		Long: `scale models a recording of a step run at several sizes (a batch, a sequence length: one value per
step, in order, _ to leave one out of the model) and writes the program at other values (--to, -o), or
finds the largest value whose program fits (--fit-in, --gpu); with neither it prints the steps and the model.`,
		Example: "  bfcsim scale train.pickle --steps 512,_,256,768 --to 512,1024,256,768 -o t.jsonl\n  bfcsim scale train.pickle --steps 512,1024,256,768 --gpu \"A100 40GB\"",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := scaling.ParseRequest(steps, to, out, fitIn, gpu, reserve)
			if err != nil {
				return err
			}
			req.StepStart, req.Advise, req.Spec.Name = start, true, alloc
			req.Search = search.Options{Workers: jobs, TolerateScratch: true}
			rec, err := scaling.ReadFile(cmd.Context(), args[0], e.stdin)
			if err != nil {
				return err
			}
			per, _, err := allocators.ParseSets(sets, []string{alloc})
			if err != nil {
				return err
			}
			req.Spec.Options = per[alloc]
			finish := func() {}
			if e.progress {
				bar := progress.Spinner(e.stderr, "scale "+args[0])
				finish = func() { _ = bar.Finish() }
				req.Checked = func(v int64, ok bool) { bar.Describe(fmt.Sprintf("value %d fits: %v", v, ok)); _ = bar.Add(1) }
			}
			res, err := scaling.Run(cmd.Context(), rec, req)
			finish() // the spinner is cleared before the answer
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			return report.RenderScale(e.stdout, report.NewScale(res, req.FitIn, out), format)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&steps, "steps", "", "the recorded steps' values, in order, _ to leave one out (required)")
	fl.StringVar(&to, "to", "", "write the program with its steps at these values: one per step, or one for all")
	fl.StringVarP(&out, "out", "o", "", "the trace file to write the program to (with --to)")
	fl.StringVar(&fitIn, "fit-in", "", "find the largest value whose program fits this `SIZE`")
	fl.StringVar(&gpu, "gpu", "", "find the largest value that fits this GPU's usable memory (fit --gpu's names)")
	fl.StringVar(&reserve, "context-reserve", "768MiB", "with --gpu: the memory the CUDA context and libraries take")
	fl.StringVar(&start, "step-start", "", "the call site a step's first allocation comes from, where the steps are ambiguous")
	fl.StringVarP(&alloc, "allocator", "a", "", "the allocator --fit-in replays (default: the recording's; --set needs it named)")
	fl.StringArrayVar(&sets, "set", nil, "an allocator setting for --fit-in, NAME.KEY=VALUE")
	fl.IntVarP(&jobs, "jobs", "j", 0, "replays to run at once (default: the number of CPUs)")
	fl.StringVarP(&format, "format", "f", "table", "output format: table, markdown, json")
	_ = cmd.MarkFlagRequired("steps")
	return cmd
}
