package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/internal/outfile"
	"github.com/bfcsim/bfcsim/report"
	"github.com/bfcsim/bfcsim/search"
)

// adviseOptions are one advise invocation's flags.
type adviseOptions struct{ searchFlags }

func newAdviseCmd(e *env) *cobra.Command {
	o := &adviseOptions{}
	cmd := &cobra.Command{
		Use:   "advise TRACE [-a NAME] [flags]",
		Short: "Find the allocator settings that need the smallest device",
		Long: `Search an allocator's settings for the smallest device the trace runs on
(as 'bfcsim fit' finds it), and among equals the smallest peak without a
limit, and print the line that sets them:

  pytorch  expandable_segments, max_split_size_mb, roundup_power2_divisions,
           garbage_collection_threshold, max_non_split_rounding_mb
           (export PYTORCH_CUDA_ALLOC_CONF=...)
  bfc      allow_growth, garbage_collection
           (export TF_FORCE_GPU_ALLOW_GROWTH=... TF_ENABLE_GPU_GARBAGE_COLLECTION=...)
  bfc, a JAX capture: allow_growth, with the smallest memory limit
           (export XLA_PYTHON_CLIENT_PREALLOCATE=false
           XLA_PYTHON_CLIENT_MEM_FRACTION=..., the fraction of the GPU given
           with --device-memory)

It starts from the recorded settings (a PyTorch snapshot's own; --set fixes
a setting so that it is not searched) and changes one setting at a time,
keeping the best change, until no change helps. It says what each changed
setting does on its own, and lists every combination tried.

Every candidate is a what-if: the model decides its segments from the start
(see 'bfcsim replay --help'). The saving is measured against the recorded
settings decided the same way, and the report gives both figures for them.
It advises only settings that bfcsim models as PyTorch 2.11 and TensorFlow
do (docs/allocators.md).`,
		Example: `  bfcsim advise snapshot.pickle
  bfcsim advise snapshot.pickle --set pytorch.expandable_segments=false   # keep it off
  bfcsim advise traces/transformer-train.jsonl -a bfc -f json
  bfcsim advise jax.xplane.pb --device-memory 85017493504   # JAX on an H100 80GB`,
		Args: traceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.replay.allocatorsGiven = cmd.Flags().Changed("allocators")
			return runAdvise(cmd, e, o, args)
		},
	}
	o.add(cmd)
	cmd.Flags().Lookup("allocators").Usage = "the allocator to advise on (one; default: the recording's, else bfc)"
	return cmd
}

func runAdvise(cmd *cobra.Command, e *env, o *adviseOptions, paths []string) error {
	if err := o.check("advise", paths); err != nil {
		return err
	}
	if o.replay.allocatorsGiven && len(o.replay.allocators) != 1 {
		return fmt.Errorf("advise takes one allocator (-a pytorch, -a bfc), got %d", len(o.replay.allocators))
	}
	if !o.replay.allocatorsGiven {
		o.replay.allocators = []string{"bfc"} // unless the trace is a recording: openSearch
	}
	for _, name := range o.replay.allocators {
		if _, ok := search.AdvisedSettings[name]; !ok && o.replay.allocatorsGiven {
			return fmt.Errorf("advise has no settings to try for %s; it advises pytorch and bfc", name)
		}
	}
	s, err := openSearch(cmd, e, &o.replay, paths, searchHow{tolerate: !o.strict, jobs: o.jobs, gpu: o.gpuBytes})
	if err != nil {
		return err
	}
	defer s.close()
	spec := s.specs[0]
	if _, ok := search.AdvisedSettings[spec.Name]; !ok {
		s.finish()
		return fmt.Errorf("advise has no settings to try for %s; it advises pytorch and bfc", spec.Name)
	}
	adv, err := search.Traces(s.members).Advise(cmd.Context(), spec)
	s.finish()
	if err != nil {
		return err
	}
	first := s.members[0]
	name, path, devices := first.Name, first.Path, []string(nil)
	if len(s.members) > 1 {
		for _, m := range s.members {
			devices = append(devices, m.Name)
		}
		name, path = report.JobName(devices), strings.Join(paths, " ")
	}
	rep := report.NewAdvise(name, path, first.Capacity(), adv, o.gpuBytes, devices)
	if o.out != "" {
		if err := outfile.Write(o.out, func(w io.Writer) error { return report.RenderAdvise(w, rep, "json") }); err != nil {
			return err
		}
	}
	return report.RenderAdvise(cmd.OutOrStdout(), rep, o.format)
}
