package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bfcsim/bfcsim/allocators"
)

// WriteCalibration writes what a calibration measured, the cost model's
// figure beside each, and the --set options that price the virtual device
// as that GPU.
func WriteCalibration(w io.Writer, c allocators.Calibration) error {
	fmt.Fprintf(w, "%s: %s total, %s free\n", c.Device, Bytes(c.TotalBytes), Bytes(c.FreeBytes))
	cost, err := (allocators.SpaceConfig{Kind: "virtual", Capacity: 1, Options: allocators.Options(c.Space)}).Validate()
	if err != nil {
		return err
	}
	dur := func(k string) time.Duration { d, _ := time.ParseDuration(fmt.Sprint(cost[k])); return d }
	model := func(fixed, perGiB string, n uint64) time.Duration {
		return dur(fixed) + time.Duration(float64(dur(perGiB))*float64(n)/(1<<30))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SIZE\tCUMEMALLOC\tMODEL\tCUMEMFREE\tMODEL\tCALLS")
	for _, s := range c.Segments {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", Bytes(s.Bytes),
			time.Duration(s.AllocNs).Round(100*time.Nanosecond), model("reserve_cost", "reserve_cost_per_gib", s.Bytes).Round(100*time.Nanosecond),
			time.Duration(s.FreeNs).Round(100*time.Nanosecond), model("release_cost", "release_cost_per_gib", s.Bytes).Round(100*time.Nanosecond), s.Calls)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range c.Skipped {
		fmt.Fprintf(w, "  %s skipped: more than half the memory free\n", Bytes(n))
	}
	for _, m := range c.Mapped {
		var calls []string
		for _, k := range []string{"cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease"} {
			calls = append(calls, fmt.Sprintf("%s %s", k, time.Duration(m.Calls[k]).Round(100*time.Nanosecond)))
		}
		fmt.Fprintf(w, "a handle of %s (%d timed): %s; the model: %s to map, %s to unmap\n", Bytes(m.Bytes), m.Handles,
			strings.Join(calls, ", "),
			model("map_cost", "map_cost_per_gib", m.Bytes).Round(100*time.Nanosecond),
			model("unmap_cost", "unmap_cost_per_gib", m.Bytes).Round(100*time.Nanosecond))
	}
	fmt.Fprintln(w)
	var sets []string
	for _, k := range allocators.CostKeys {
		sets = append(sets, "--set space."+k+"="+c.Space[k])
	}
	fmt.Fprintf(w, "  %s\n", strings.Join(sets, " "))
	return nil
}
