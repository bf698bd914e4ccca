package allocators

// Calibration: fitting the virtual device's cost model to a real GPU.
//
// The cost model (CostModel, the space.* options) prices a device call as a
// fixed cost plus a cost per GiB. Calibrate measures a GPU's own calls
// through the CUDA driver and fits that line to them:
//
//  1. For each size (skipping those over half the free memory), time
//     cuMemAlloc and cuMemFree repeat times, after one untimed pair, and
//     keep the medians.
//  2. In a range it reserves, map handles one at a time as PyTorch's
//     expandable segments do (cuMemCreate, cuMemMap, cuMemSetAccess; then
//     cuMemUnmap, cuMemRelease): pages handles of one page of the driver's
//     granularity, and an eighth as many of 16 pages, each call timed.
//  3. Fit: the fixed cost is the smallest size's median; the cost per GiB
//     the least-squares slope through it over the sizes of 1 GiB and more
//     (all sizes when none is that large); for mapped handles, the line
//     through the two handle sizes.
//
// Everything Calibrate takes from the GPU is given back before it returns,
// an error or a cancellation included.

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bfcsim/bfcsim/allocators/cudadrv"
)

// Calibration is what Calibrate measured and the cost model fitted to it:
// the JSON `bfcsim calibrate` writes and `bfcsim replay --costs` reads.
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

// Calibrate times drv's calls and fits the model: cuMemAlloc and cuMemFree
// of each of sizes (ascending), repeat times each, and pages handles of
// mapped pages. Everything it takes from the GPU it gives back before it
// returns, an error or a cancellation included.
func Calibrate(ctx interface{ Err() error }, drv cudadrv.Driver, sizes []uint64, repeat, pages int) (c Calibration, err error) {
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
		return c, fmt.Errorf("%w: every size is more than half the %s free", ErrOutOfMemory, iecBytes(c.FreeBytes))
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
				return fmt.Errorf("%w: not one page of %s free", ErrOutOfMemory, iecBytes(gran))
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

// CostKeys are the space options a calibration sets, in the order shown.
var CostKeys = []string{"reserve_cost", "reserve_cost_per_gib", "release_cost", "release_cost_per_gib", "map_cost", "map_cost_per_gib", "unmap_cost", "unmap_cost_per_gib"}

// ParseCalibration reads the JSON a calibration was written as and
// returns its space options, checked: each is one of CostKeys.
func ParseCalibration(data []byte) (map[string]string, error) {
	var c Calibration
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, err
	}
	if c.Version != 1 || len(c.Space) == 0 {
		return nil, fmt.Errorf("not a file bfcsim calibrate wrote (no \"bfcsim_costs\": 1 and space settings)")
	}
	for k := range c.Space {
		if !slices.Contains(CostKeys, k) {
			return nil, fmt.Errorf("%q is not a cost setting (want %s)", k, strings.Join(CostKeys, ", "))
		}
	}
	return c.Space, nil
}
