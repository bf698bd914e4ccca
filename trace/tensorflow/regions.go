package tensorflow

import (
	"slices"
	"sort"
)

// A region is a range of device memory the recorded BFC allocator reserved
// (one cudaMalloc of its sub-allocator), and the event whose allocation
// made it reserve the range.
type region struct {
	base, size uint64
	event      int // index in the allocator's events
}

// BFC's sizes, as tsl's BFCAllocator has them.
const (
	bfcRound       = 256     // kMinAllocationSize: chunks and regions are multiples of it
	bfcGrowthStart = 2 << 20 // the first region of a growing pool
)

// maxRegions bounds what growthRegions infers: a growing pool doubles its
// regions until they reach the limit, so a real one has a few dozen; a
// capture that would need more is not a growing pool's.
const maxRegions = 4096

// growthRegions infers the regions of a BFC pool that grew (allow_growth:
// XLA_PYTHON_CLIENT_PREALLOCATE=false, TF_FORCE_GPU_ALLOW_GROWTH=true) as
// it served evs, from an empty pool under limit. BFC reserves a region
// only when no free chunk can hold a request, and the request is then
// served from the start of the new region, the only free chunk that can
// hold it: so an allocation at an address no region holds starts one. Its
// size is Extend's: the next region size, doubled until the request fits
// (and doubled once more after a region that needed no doubling), at most
// the limit's remainder.
//
// ok is false when the events contradict a growing pool: a chunk that
// crosses the end of its region, a region that overlaps another or would
// take the pool past its limit. A pool that released regions (garbage
// collection) and reserved others is not followed either: its regions
// would seem to exceed the limit.
func growthRegions(evs []memEvent, limit uint64) (regs []region, ok bool) {
	curr := roundUp(min(limit, bfcGrowthStart))
	var pool uint64
	var byBase []region // sorted by base
	for i, e := range evs {
		if !e.alloc {
			continue
		}
		chunk := uint64(max(e.chunk, 0))
		j := sort.Search(len(byBase), func(k int) bool { return byBase[k].base > e.addr }) - 1
		if j >= 0 && e.addr < byBase[j].base+byBase[j].size {
			if e.addr+chunk > byBase[j].base+byBase[j].size {
				return nil, false
			}
			continue
		}
		if len(regs) == maxRegions {
			return nil, false
		}
		rounded := roundUp(uint64(max(e.requested, 0)))
		if rounded == 0 {
			rounded = chunk
		}
		available := (limit - pool) &^ (bfcRound - 1)
		if rounded > available {
			return nil, false
		}
		increased := false
		for rounded > curr {
			curr *= 2
			increased = true
		}
		size := min(curr, available)
		if !increased {
			curr *= 2
		}
		r := region{base: e.addr, size: size, event: i}
		if chunk > size || (j+1 < len(byBase) && r.base+r.size > byBase[j+1].base) {
			return nil, false
		}
		pool += size
		regs = append(regs, r)
		byBase = slices.Insert(byBase, j+1, r)
	}
	return regs, true
}

// roundUp rounds n up to a multiple of 256 (BFC's RoundedBytes).
func roundUp(n uint64) uint64 { return (n + bfcRound - 1) &^ (bfcRound - 1) }

// poolLayout is how the recorded BFC pool was laid out, as the capture's
// addresses show it.
type poolLayout int

const (
	layoutUnknown     poolLayout = iota // neither a whole pool nor a growing one fits the addresses
	layoutPreallocate                   // one region of the whole limit, from the first allocation
	layoutGrowth                        // regions reserved as the pool grew (regions)
	layoutEither                        // everything fits the first region a growing pool makes: both fit
)

// inferLayout decides how a capture from an empty pool was laid out: a
// growing pool when its regions explain every chunk and there are at least
// two of them; a preallocated pool when every chunk lies within the limit
// of the first; either when a growing pool never needed a second region.
func inferLayout(evs []memEvent, limit uint64) (poolLayout, []region) {
	regs, growth := growthRegions(evs, limit)
	// A preallocated pool is one region from the first allocation's
	// address: every chunk lies within the limit above it.
	prealloc, first, base := true, true, uint64(0)
	for _, e := range evs {
		if !e.alloc {
			continue
		}
		if first {
			base, first = e.addr, false
		}
		end := e.addr + uint64(max(e.chunk, 0))
		if e.addr < base || end < e.addr || end-base > limit {
			prealloc = false
			break
		}
	}
	prealloc = prealloc && !first
	switch {
	case growth && len(regs) >= 2:
		return layoutGrowth, regs
	case growth && prealloc:
		return layoutEither, regs
	case prealloc:
		return layoutPreallocate, nil
	}
	return layoutUnknown, nil
}
