package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/allocators/cudadrv"
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

// Calibration is what calibrate measured and the cost model fitted to it:
// the JSON -o writes and replay --costs reads.
type Calibration struct {
	Version int    `json:"bfcsim_costs"`
	Device  string `json:"device"`
	// TotalBytes and FreeBytes are the GPU's memory when it was measured.
	TotalBytes uint64 `json:"total_bytes"`
	FreeBytes  uint64 `json:"free_bytes"`
	// Space holds the space.* options that price calls as this GPU
	// does, as --set space.KEY=VALUE takes them.
	Space map[string]string `json:"space"`
	// Segments are the medians measured per size; Mapped the medians of
	// the virtual-memory calls per handle size.
	Segments []CalibratedSize `json:"segments"`
	Mapped   []CalibratedMap  `json:"mapped"`
	// Skipped lists the sizes not measured (more than half the free
	// memory).
	Skipped []uint64 `json:"skipped_bytes,omitempty"`
}

// CalibratedMap is one handle size's median virtual-memory call times, in
// ns: cuMemCreate, cuMemMap, cuMemSetAccess; cuMemUnmap, cuMemRelease.
type CalibratedMap struct {
	Bytes   uint64           `json:"bytes"`
	Handles int              `json:"handles"`
	Calls   map[string]int64 `json:"calls_ns"`
}

// mapNs and unmapNs are what mapping and unmapping one handle took.
func (m CalibratedMap) mapNs() int64 {
	return m.Calls["cuMemCreate"] + m.Calls["cuMemMap"] + m.Calls["cuMemSetAccess"]
}
func (m CalibratedMap) unmapNs() int64 { return m.Calls["cuMemUnmap"] + m.Calls["cuMemRelease"] }

// CalibratedSize is one size's median call times.
type CalibratedSize struct {
	Bytes   uint64 `json:"bytes"`
	Calls   int    `json:"calls"`
	AllocNs int64  `json:"alloc_ns"`
	FreeNs  int64  `json:"free_ns"`
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
	c, err := calibrate(cmd.Context(), drv, sizes, o.repeat, o.pages)
	if cerr := drv.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--space %s: %w", o.space, err)
	}
	if err := writeCalibration(cmd.OutOrStdout(), c); err != nil {
		return err
	}
	if o.out == "-" {
		return nil
	}
	if err := writeFileAtomic(o.out, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(c)
	}); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "wrote %s: bfcsim replay --costs %s prices the virtual device as this GPU\n", o.out, o.out)
	return nil
}

// calibrate times the calls and fits the model. Everything it takes from
// the GPU it gives back before it returns, an error or a cancellation
// included.
func calibrate(ctx interface{ Err() error }, drv cudadrv.Driver, sizes []uint64, repeat, pages int) (c Calibration, err error) {
	c = Calibration{Version: 1, Device: drv.Name()}
	if c.FreeBytes, c.TotalBytes, err = drv.MemGetInfo(); err != nil {
		return c, err
	}
	timed := func(call func() error) (time.Duration, error) {
		start := time.Now()
		err := call()
		return time.Since(start), err
	}
	for _, size := range sizes {
		if size > c.FreeBytes/2 {
			c.Skipped = append(c.Skipped, size)
			continue
		}
		var allocs, frees []time.Duration
		for i := 0; i <= repeat; i++ { // the first pair warms up, untimed
			if err := ctx.Err(); err != nil {
				return c, err
			}
			var ptr uint64
			da, err := timed(func() (err error) { ptr, err = drv.MemAlloc(size); return })
			if err != nil {
				return c, err
			}
			df, err := timed(func() error { return drv.MemFree(ptr) })
			if err != nil {
				return c, err
			}
			if i > 0 {
				allocs, frees = append(allocs, da), append(frees, df)
			}
		}
		c.Segments = append(c.Segments, CalibratedSize{Bytes: size, Calls: repeat, AllocNs: median(allocs).Nanoseconds(), FreeNs: median(frees).Nanoseconds()})
	}
	if len(c.Segments) == 0 {
		return c, fmt.Errorf("%w: every size is more than half the %s free", allocators.ErrOutOfMemory, report.Bytes(c.FreeBytes))
	}
	if err := calibratePages(ctx, drv, &c, pages); err != nil {
		return c, err
	}
	c.Space = fitCosts(c)
	return c, nil
}

// calibratePages times mapping and unmapping handles one at a time in a
// range reserved for them, as PyTorch's expandable segments map theirs:
// pages handles of one page (the driver's granularity), then an eighth as
// many (at least 2) of 16 pages, for the cost per GiB.
func calibratePages(ctx interface{ Err() error }, drv cudadrv.Driver, c *Calibration, pages int) error {
	gran, err := drv.Granularity()
	if err != nil {
		return err
	}
	if gran == 0 || gran&(gran-1) != 0 {
		return fmt.Errorf("the driver's granularity, %d bytes, is not a power of two", gran)
	}
	for _, h := range []struct {
		size  uint64
		count int
	}{{gran, pages}, {16 * gran, max(pages/8, 2)}} {
		n := int(min(uint64(h.count), c.FreeBytes/2/h.size))
		if n == 0 {
			if h.size == gran {
				return fmt.Errorf("%w: not one page of %s free", allocators.ErrOutOfMemory, report.Bytes(gran))
			}
			continue
		}
		m, err := timeHandles(ctx, drv, h.size, n)
		if err != nil {
			return err
		}
		c.Mapped = append(c.Mapped, m)
	}
	return nil
}

// timeHandles maps n handles of size bytes one after another in a range
// reserved for them, then unmaps them, timing each call. Whatever happens,
// every handle and the range are given back.
func timeHandles(ctx interface{ Err() error }, drv cudadrv.Driver, size uint64, n int) (m CalibratedMap, err error) {
	span := uint64(n) * size
	base, err := drv.AddressReserve(span, size, 0)
	if err != nil {
		return m, err
	}
	type handle struct {
		addr   uint64
		h      cudadrv.Handle
		mapped bool
	}
	var held []handle
	defer func() {
		for _, h := range held {
			if h.mapped {
				err = errors.Join(err, drv.Unmap(h.addr, size))
			}
			err = errors.Join(err, drv.Release(h.h))
		}
		err = errors.Join(err, drv.AddressFree(base, span))
	}()
	times := map[string][]time.Duration{}
	timed := func(name string, call func() error) error {
		start := time.Now()
		err := call()
		times[name] = append(times[name], time.Since(start))
		return err
	}
	for i := range n {
		if err := ctx.Err(); err != nil {
			return m, err
		}
		h := handle{addr: base + uint64(i)*size}
		if err := timed("cuMemCreate", func() (err error) { h.h, err = drv.Create(size); return }); err != nil {
			return m, err
		}
		held = append(held, h)
		if err := timed("cuMemMap", func() error { return drv.Map(h.addr, size, h.h) }); err != nil {
			return m, err
		}
		held[len(held)-1].mapped = true
		if err := timed("cuMemSetAccess", func() error { return drv.SetAccess(h.addr, size) }); err != nil {
			return m, err
		}
	}
	for len(held) > 0 {
		h := held[len(held)-1]
		if err := timed("cuMemUnmap", func() error { return drv.Unmap(h.addr, size) }); err != nil {
			return m, err
		}
		held[len(held)-1].mapped = false
		if err := timed("cuMemRelease", func() error { return drv.Release(h.h) }); err != nil {
			return m, err
		}
		held = held[:len(held)-1]
	}
	m = CalibratedMap{Bytes: size, Handles: n, Calls: map[string]int64{}}
	for name, ts := range times {
		m.Calls[name] = median(ts).Nanoseconds()
	}
	return m, nil
}

// median of ds (not empty).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// fitCosts fits the cost model: a fixed cost, the smallest size's median,
// and a cost per GiB, the least-squares slope through it over the sizes
// of 1 GiB and more (all sizes when none is); per page, the sums of the
// page calls' medians.
func fitCosts(c Calibration) map[string]string {
	segs := c.Segments
	large := slices.DeleteFunc(slices.Clone(segs), func(s CalibratedSize) bool { return s.Bytes < 1<<30 })
	if len(large) == 0 {
		large = segs[1:]
	}
	slope := func(fixed int64, y func(CalibratedSize) int64) time.Duration {
		var num, den float64
		for _, s := range large {
			x := float64(s.Bytes) / (1 << 30)
			num += x * float64(y(s)-fixed)
			den += x * x
		}
		if den == 0 || num <= 0 {
			return 0
		}
		return time.Duration(num / den)
	}
	fa, ff := segs[0].AllocNs, segs[0].FreeNs
	d := func(ns int64) string { return time.Duration(ns).Round(100 * time.Nanosecond).String() }
	return map[string]string{
		"reserve_cost":         d(fa),
		"reserve_cost_per_gib": d(int64(slope(fa, func(s CalibratedSize) int64 { return s.AllocNs }))),
		"release_cost":         d(ff),
		"release_cost_per_gib": d(int64(slope(ff, func(s CalibratedSize) int64 { return s.FreeNs }))),
		"map_cost":             d(c.Mapped[0].mapNs()),
		"map_cost_per_gib":     d(mapSlope(c.Mapped, CalibratedMap.mapNs)),
		"unmap_cost":           d(c.Mapped[0].unmapNs()),
		"unmap_cost_per_gib":   d(mapSlope(c.Mapped, CalibratedMap.unmapNs)),
	}
}

// mapSlope is the cost per GiB of a handle between the smallest and the
// largest size timed (0 with one size, or when larger is not dearer).
func mapSlope(ms []CalibratedMap, ns func(CalibratedMap) int64) int64 {
	if len(ms) < 2 {
		return 0
	}
	lo, hi := ms[0], ms[len(ms)-1]
	d := ns(hi) - ns(lo)
	if d <= 0 || hi.Bytes <= lo.Bytes {
		return 0
	}
	return int64(float64(d) / (float64(hi.Bytes-lo.Bytes) / (1 << 30)))
}

// costKeys are the space options a calibration sets, in the order shown.
var costKeys = []string{"reserve_cost", "reserve_cost_per_gib", "release_cost", "release_cost_per_gib", "map_cost", "map_cost_per_gib", "unmap_cost", "unmap_cost_per_gib"}

// writeCalibration prints what was measured, the model's figure beside it,
// and the options.
func writeCalibration(w io.Writer, c Calibration) error {
	fmt.Fprintf(w, "%s: %s total, %s free\n", c.Device, report.Bytes(c.TotalBytes), report.Bytes(c.FreeBytes))
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", report.Bytes(s.Bytes),
			time.Duration(s.AllocNs).Round(100*time.Nanosecond), model("reserve_cost", "reserve_cost_per_gib", s.Bytes).Round(100*time.Nanosecond),
			time.Duration(s.FreeNs).Round(100*time.Nanosecond), model("release_cost", "release_cost_per_gib", s.Bytes).Round(100*time.Nanosecond), s.Calls)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range c.Skipped {
		fmt.Fprintf(w, "  %s skipped: more than half the memory free\n", report.Bytes(n))
	}
	for _, m := range c.Mapped {
		var calls []string
		for _, k := range []string{"cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease"} {
			calls = append(calls, fmt.Sprintf("%s %s", k, time.Duration(m.Calls[k]).Round(100*time.Nanosecond)))
		}
		fmt.Fprintf(w, "a handle of %s (%d timed): %s; the model: %s to map, %s to unmap\n", report.Bytes(m.Bytes), m.Handles,
			strings.Join(calls, ", "),
			model("map_cost", "map_cost_per_gib", m.Bytes).Round(100*time.Nanosecond),
			model("unmap_cost", "unmap_cost_per_gib", m.Bytes).Round(100*time.Nanosecond))
	}
	fmt.Fprintln(w)
	var sets []string
	for _, k := range costKeys {
		sets = append(sets, "--set space."+k+"="+c.Space[k])
	}
	fmt.Fprintf(w, "  %s\n", strings.Join(sets, " "))
	return nil
}

// readCosts reads a calibration's space options (replay --costs).
func readCosts(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--costs: %w", err)
	}
	var c Calibration
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("--costs %s: %w", path, err)
	}
	if c.Version != 1 || len(c.Space) == 0 {
		return nil, fmt.Errorf("--costs %s: not a file bfcsim calibrate wrote (no \"bfcsim_costs\": 1 and space settings)", path)
	}
	for k := range c.Space {
		if !slices.Contains(costKeys, k) {
			return nil, fmt.Errorf("--costs %s: %q is not a cost setting (want %s)", path, k, strings.Join(costKeys, ", "))
		}
	}
	return c.Space, nil
}
