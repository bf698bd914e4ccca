package tensorflow

import (
	"slices"
	"sort"

	"github.com/bfcsim/bfcsim/allocators"
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
// When both explain every chunk (regions one after another, as the device
// may place them, or allocations that happen to tile the growth sizes),
// the one that puts more allocations at their recorded addresses when
// bfcsim's BFC replays the capture each way decides; a tie is either.
func inferLayout(evs []memEvent, limit uint64) (poolLayout, []region) {
	regs, growth := growthRegions(evs, limit)
	prealloc := preallocFits(evs, limit)
	switch {
	case growth && len(regs) >= 2 && prealloc:
		lowest := regs[0].base
		for _, r := range regs {
			lowest = min(lowest, r.base)
		}
		first := evs[slices.IndexFunc(evs, func(e memEvent) bool { return e.alloc })].addr
		grown, whole := replayMatches(evs, limit, true, regs, lowest), replayMatches(evs, limit, false, nil, first)
		switch {
		case grown > whole:
			return layoutGrowth, regs
		case whole > grown:
			return layoutPreallocate, nil
		}
		return layoutEither, regs
	case growth && len(regs) >= 2:
		return layoutGrowth, regs
	case growth && prealloc:
		return layoutEither, regs
	case prealloc:
		return layoutPreallocate, nil
	}
	return layoutUnknown, nil
}

// replayMatches replays the capture's allocations and frees through
// bfcsim's BFC, growing (its regions reserved where regs has them) or
// preallocated, and counts the allocations it puts at their recorded
// address, with base moved to the simulated device's.
func replayMatches(evs []memEvent, limit uint64, growth bool, regs []region, base uint64) int {
	sp := allocators.NewVirtualSpace(limit, allocators.CostModel{}, allocators.Paged)
	b := allocators.NewBFC(sp, allocators.BFCConfig{AllowGrowth: growth, MemoryLimit: limit})
	shift := allocators.VirtualBase - base
	live := map[uint64]allocators.Block{} // by recorded address
	matched := 0
	for i, e := range evs {
		if len(regs) > 0 && regs[0].event == i {
			b.RecordedReserve(regs[0].base+shift, regs[0].size, 0)
			regs = regs[1:]
		}
		if !e.alloc {
			if blk, ok := live[e.addr]; ok {
				_ = b.Free(blk)
				delete(live, e.addr)
			}
			continue
		}
		size := uint64(max(e.requested, 0))
		if size == 0 {
			size = uint64(max(e.chunk, 0))
		}
		if _, dup := live[e.addr]; dup || size == 0 {
			continue
		}
		blk, err := b.Allocate(size, 0)
		if err != nil {
			continue
		}
		if blk.Addr == e.addr+shift {
			matched++
		}
		live[e.addr] = blk
	}
	return matched
}

// preallocFits says whether every chunk lies within the limit above the
// first allocation, as in a pool reserved whole at it.
func preallocFits(evs []memEvent, limit uint64) bool {
	first, base := true, uint64(0)
	for _, e := range evs {
		if !e.alloc {
			continue
		}
		if first {
			base, first = e.addr, false
		}
		end := e.addr + uint64(max(e.chunk, 0))
		if e.addr < base || end < e.addr || end-base > limit {
			return false
		}
	}
	return !first
}
