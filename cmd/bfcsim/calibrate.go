package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/internal/outfile"
	"github.com/bfcsim/bfcsim/report"
)

// calibrateOptions are one calibrate invocation's flags.
type calibrateOptions struct {
	space  string
	sizes  []string
	repeat int
	pages  int
	out    string
}

func newCalibrateCmd(e *env) *cobra.Command {
	o := &calibrateOptions{}
	cmd := &cobra.Command{
		Use:   "calibrate --space cuda[:N] [flags]",
		Short: "Measure a GPU's device calls and print the cost model's settings for it",
		Long: `Time a GPU's memory calls and fit the virtual device's cost model to them:
cuMemAlloc and cuMemFree (what cudaMalloc and cudaFree call) of each size,
--repeat times, and the calls that map pages (cuMemCreate, cuMemMap,
cuMemSetAccess; cuMemUnmap, cuMemRelease) for --pages handles of one page
of the driver's granularity and an eighth as many of 16 pages. It prints what it measured, the model's figure for
each size, and the --set space.KEY=VALUE options, and writes them to -o FILE
(JSON), which 'bfcsim replay --costs FILE' reads.

The model is a fixed cost per call, the median of the smallest size, plus a
cost per GiB, the slope over the sizes of 1 GiB and more (over all sizes if
none is that large); mapping a handle, the same from the two handle
sizes.

It is safe on a shared GPU: a size more than half the memory free when it
starts is skipped, and everything it takes is given back, whatever happens.
The defaults of the virtual device are an NVIDIA H100's, measured this way
(docs/allocators.md#device-cost-model).`,
		Example: `  bfcsim calibrate --space cuda
  bfcsim calibrate --space cuda:1 --sizes 2MiB,64MiB,1GiB,8GiB --repeat 20 -o h200.json
  bfcsim replay trace.jsonl --costs h200.json         # the virtual device priced as that GPU`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCalibrate(cmd, e, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.space, "space", "", "the GPU to measure: cuda or cuda:N")
	f.StringSliceVar(&o.sizes, "sizes", []string{"2MiB", "20MiB", "200MiB", "1GiB", "4GiB", "16GiB"}, "segment sizes to time cuMemAlloc and cuMemFree at")
	f.IntVar(&o.repeat, "repeat", 10, "calls timed per size (the median is kept)")
	f.IntVar(&o.pages, "pages", 64, "handles of one page mapped and unmapped to time the virtual-memory calls (and an eighth as many of 16 pages)")
	f.StringVarP(&o.out, "out", "o", "bfcsim-costs.json", "write the settings, and what was measured, to this JSON `FILE` ('-' for none)")
	return cmd
}

func runCalibrate(cmd *cobra.Command, e *env, o *calibrateOptions) error {
	if o.space == "" {
		return fmt.Errorf("calibrate measures a GPU: give --space cuda (or cuda:N)")
	}
	kind, device, err := allocators.ParseSpace(o.space)
	if err != nil {
		return err
	}
	if kind != "cuda" {
		return fmt.Errorf("--space %s: calibrate measures a GPU's calls (cuda or cuda:N); the %s space's costs are the model's", o.space, kind)
	}
	if o.repeat < 1 || o.pages < 1 {
		return fmt.Errorf("--repeat and --pages want at least 1 (got %d and %d)", o.repeat, o.pages)
	}
	var sizes []uint64
	for _, s := range o.sizes {
		n, err := allocators.ParseSize(s)
		if err != nil || n == 0 {
			return fmt.Errorf("--sizes %q: want sizes such as 2MiB,1GiB", s)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	if o.out != "-" {
		if err := checkOutputs(nil, "", o.out); err != nil {
			return err
		}
	}
	drv, err := openCUDA(device)
	if err != nil {
		return fmt.Errorf("--space %s: %w", o.space, err)
	}
	c, err := allocators.Calibrate(cmd.Context(), drv, sizes, o.repeat, o.pages)
	if cerr := drv.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--space %s: %w", o.space, err)
	}
	if err := report.WriteCalibration(cmd.OutOrStdout(), c); err != nil {
		return err
	}
	if o.out == "-" {
		return nil
	}
	if err := outfile.Write(o.out, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(c)
	}); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "wrote %s: bfcsim replay --costs %s prices the virtual device as this GPU\n", o.out, o.out)
	return nil
}

// readCosts reads a calibration's space options (replay --costs).
func readCosts(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--costs: %w", err)
	}
	costs, err := allocators.ParseCalibration(data)
	if err != nil {
		return nil, fmt.Errorf("--costs %s: %w", path, err)
	}
	return costs, nil
}
