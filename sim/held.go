package sim

import (
	"cmp"
	"math"
	"slices"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/internal/paged"
)

// PeakHeld is what an allocator's reserved bytes held at its peak of
// reserved bytes: the live allocations, the cached free bytes around them,
// and the largest free ranges with the blocks on either side that keep
// each from joining its neighbours or going back to the device.
type PeakHeld struct {
	// Event and Line are where the peak was first reached.
	Event, Line int64
	// ReservedBytes sums the reservations; InUseBytes the live blocks;
	// LiveBytes the requests they serve. CachedFreeBytes is reserved but
	// in no live block: ReservedBytes − InUseBytes.
	ReservedBytes, InUseBytes, LiveBytes, CachedFreeBytes uint64
	// LargestFreeBytes is the largest free range inside one reserved range
	// (reservations that touch taken together).
	LargestFreeBytes uint64
	// FreeRanges are the largest free ranges, largest first (at most
	// maxHeldRanges).
	FreeRanges []FreeRange
	// EmptyRegions counts the reserved ranges (reservations that touch
	// taken together) that held no live block, and EmptyRegionBytes their
	// bytes: cache that nothing pins, which the allocator could give back
	// (torch.cuda.empty_cache).
	EmptyRegions     int
	EmptyRegionBytes uint64
	// Sites are the live blocks summed by call site (tag and stack), in
	// the order of their first block by address.
	Sites []HeldSite
}

// HeldSite is what the live blocks of one call site held.
type HeldSite struct {
	Tag              string
	Stack            uint32
	Requested, Bytes uint64
	Count            int64
}

// FreeRange is a free range of a reservation and the live blocks that
// bound it; Below or Above is nil where the range meets the reservation's
// edge.
type FreeRange struct {
	Addr, Size   uint64
	Below, Above *HeldBlock
}

// HeldBlock is a live block at the peak, with the call site of the
// allocation it serves: the trace's tag and stack.
type HeldBlock struct {
	Addr, Size, Requested uint64
	Tag                   string
	Stack                 uint32
}

// maxHeldRanges is how many of the largest free ranges PeakHeld names.
const maxHeldRanges = 5

// heldTracker keeps what PeakHeld needs, lazily as the recorder keeps its
// layout (record.go): the blocks and reservations live now, the moment of
// the peak, and those that were live then and have gone since. At the end,
// the peak's layout is the live ones that began by the peak plus the gone
// ones; each block is noted once or twice, so the cost is linear in the
// trace however often the peak rises.
type heldTracker struct {
	granule uint64
	now     int64
	// joins: the allocator takes reservations that touch as one range
	// (allocators.RegionJoiner). regionPerBlock: each block's extent is a
	// reservation of its own (allocators.ExtentIsRegion), so the regions
	// follow from the blocks and the space's calls are not followed.
	joins, regionPerBlock bool

	blocks  paged.Table[heldSlot]
	regions map[uint64]heldRegion

	hasPeak             bool
	peakEvent, peakLine int64
	goneBlocks          paged.List[HeldBlock]
	goneRegions         []LayoutRegion
}

type heldSlot struct {
	HeldBlock
	start int64
}

type heldRegion struct {
	size  uint64
	start int64
}

func newHeldTracker(granule uint64) *heldTracker {
	return &heldTracker{granule: granule, regions: map[uint64]heldRegion{}}
}

func (h *heldTracker) alloc(slot uint32, b allocators.Block, requested uint64, tag string, stack uint32) {
	h.blocks.Grow(slot)
	*h.blocks.At(slot) = heldSlot{HeldBlock{Addr: b.Addr, Size: b.Size, Requested: requested, Tag: tag, Stack: stack}, h.now}
}

func (h *heldTracker) free(slot uint32) {
	s := h.blocks.At(slot)
	if h.hasPeak && s.start <= h.peakEvent {
		h.goneBlocks.Add(s.HeldBlock)
	}
	*s = heldSlot{}
}

func (h *heldTracker) reserve(addr, n uint64) {
	if h.regionPerBlock {
		return
	}
	h.regions[addr] = heldRegion{size: roundUp(n, h.granule), start: h.now}
}

func (h *heldTracker) release(addr, n uint64) {
	if h.regionPerBlock {
		return
	}
	for end := addr + n; addr < end; {
		g, ok := h.regions[addr]
		if !ok {
			return // the space refused the release; the checker reports it
		}
		delete(h.regions, addr)
		if h.hasPeak && g.start <= h.peakEvent {
			h.goneRegions = append(h.goneRegions, LayoutRegion{Addr: addr, Size: g.size})
		}
		addr += g.size
	}
}

// peak notes a new peak of reserved bytes after event.
func (h *heldTracker) peak(event, line int64) {
	h.hasPeak, h.peakEvent, h.peakLine = true, event, line
	h.goneBlocks.Reset()
	h.goneRegions = h.goneRegions[:0]
}

// finish describes the peak; nil if reserved bytes never rose above 0.
func (h *heldTracker) finish() *PeakHeld {
	if !h.hasPeak {
		return nil
	}
	p := h.describe(h.goneBlocks.AppendTo(nil), h.goneRegions, h.peakEvent)
	p.Event, p.Line = h.peakEvent, h.peakLine
	*h = heldTracker{}
	return p
}

// current describes what is held now, after event (on line): at an
// allocator's first failed allocation.
func (h *heldTracker) current(event, line int64) *PeakHeld {
	p := h.describe(nil, nil, math.MaxInt64)
	p.Event, p.Line = event, line
	return p
}

// describe describes the blocks and regions live now that began by the
// event upTo, with those given (gone since).
func (h *heldTracker) describe(blocks []HeldBlock, regions []LayoutRegion, upTo int64) *PeakHeld {
	for _, s := range h.blocks.All() {
		if s.Size != 0 && s.start <= upTo {
			blocks = append(blocks, s.HeldBlock)
		}
	}
	if h.regionPerBlock {
		regions = h.blockRegions(blocks)
	} else {
		for a, g := range h.regions {
			if g.start <= upTo {
				regions = append(regions, LayoutRegion{Addr: a, Size: g.size})
			}
		}
	}
	sortByAddr(blocks, func(b *HeldBlock) uint64 { return b.Addr })
	sortByAddr(regions, func(g *LayoutRegion) uint64 { return g.Addr })
	return describeHeld(blocks, regions, h.joins)
}

// blockRegions are the reservations of blocks that are each their own.
func (h *heldTracker) blockRegions(blocks []HeldBlock) []LayoutRegion {
	regions := make([]LayoutRegion, len(blocks))
	for i, b := range blocks {
		regions[i] = LayoutRegion{Addr: b.Addr, Size: roundUp(b.Size, h.granule)}
	}
	return regions
}

// describeHeld sums blocks and regions, both in address order, and finds
// the free ranges between the blocks of each region; with joins, regions
// that touch are taken as one.
func describeHeld(blocks []HeldBlock, regions []LayoutRegion, joins bool) *PeakHeld {
	p := &PeakHeld{}
	type siteKey struct {
		tag   string
		stack uint32
	}
	site := map[siteKey]int{}
	for _, b := range blocks {
		p.InUseBytes += b.Size
		p.LiveBytes += b.Requested
		k := siteKey{b.Tag, b.Stack}
		i, ok := site[k]
		if !ok {
			i = len(p.Sites)
			site[k] = i
			p.Sites = append(p.Sites, HeldSite{Tag: b.Tag, Stack: b.Stack})
		}
		hs := &p.Sites[i]
		hs.Requested += b.Requested
		hs.Bytes += b.Size
		hs.Count++
	}
	var ranges []FreeRange
	bi := 0
	var covered uint64 // the end of the blocks seen so far
	for k := 0; k < len(regions); {
		// With joins, reservations that touch are one range of memory (an
		// expandable segment maps its pages one by one): free bytes run
		// across them. Otherwise a block may still run past its region's
		// end, and what it covers of the next is not free.
		g := regions[k]
		end := g.Addr + g.Size
		p.ReservedBytes += g.Size
		for k++; joins && k < len(regions) && regions[k].Addr == end; k++ {
			end += regions[k].Size
			p.ReservedBytes += regions[k].Size
		}
		for bi < len(blocks) && blocks[bi].Addr+blocks[bi].Size <= g.Addr {
			bi++ // a block outside every region: an allocator's own bookkeeping
		}
		at := max(g.Addr, covered)
		var below *HeldBlock
		inside := 0
		for ; bi < len(blocks) && blocks[bi].Addr < end; bi++ {
			b := &blocks[bi]
			if b.Addr > at {
				ranges = append(ranges, FreeRange{Addr: at, Size: b.Addr - at, Below: below, Above: b})
			}
			at = max(at, b.Addr+b.Size)
			covered = max(covered, at)
			below = b
			inside++
		}
		if inside == 0 && covered <= g.Addr {
			p.EmptyRegions++
			p.EmptyRegionBytes += end - g.Addr
		}
		if at < end {
			ranges = append(ranges, FreeRange{Addr: at, Size: end - at, Below: below})
		}
	}
	if p.ReservedBytes > p.InUseBytes {
		p.CachedFreeBytes = p.ReservedBytes - p.InUseBytes
	}
	slices.SortStableFunc(ranges, func(a, b FreeRange) int { return cmp.Compare(b.Size, a.Size) })
	if len(ranges) > 0 {
		p.LargestFreeBytes = ranges[0].Size
	}
	ranges = ranges[:min(len(ranges), maxHeldRanges)]
	for i := range ranges {
		// Copies: the blocks slice goes with the tracker.
		if b := ranges[i].Below; b != nil {
			c := *b
			ranges[i].Below = &c
		}
		if b := ranges[i].Above; b != nil {
			c := *b
			ranges[i].Above = &c
		}
	}
	p.FreeRanges = slices.Clip(ranges)
	return p
}
