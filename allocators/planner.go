package allocators

// GreedyBySize is the offline planner, `planner`: it sees every allocation
// of the trace, with its lifetime, before the first one is made, and gives
// each a fixed offset in one buffer such that allocations live at the same
// time never overlap. It is the near-optimal reference the online allocators
// are measured against.
//
// Strategy: greedy by size, as TensorFlow Lite's GPU delegate plans its
// tensors (GreedyBySizeAssignment in
// tensorflow/lite/delegates/gpu/common/memory_management/greedy_by_size_assignment.cc,
// as at tensorflow/tensorflow@bff4d71358; Pisarchyk & Lee 2020, "Efficient
// Memory Management for Deep Neural Net Inference", arXiv:2001.03288):
//
//  1. Sort the allocations by size, largest first; equal sizes in trace
//     order (GreedyBySizeAssignment's std::stable_sort by CompareBySize).
//  2. Place each in turn among the allocations already placed whose
//     lifetimes intersect its own. Walked by offset, they leave gaps: from
//     the highest end among those below to the offset of the next. The
//     allocation takes the smallest gap that holds it, the lowest of the
//     smallest on a tie; if no gap holds it, it goes just above the highest
//     of them (at offset 0 if it meets none).
//  3. The footprint is the largest offset + block size.
//
// No allocator can hold less than the most bytes live at once
// (lower_bound_bytes, the trace's peak_live_bytes). Greedy by size is a
// heuristic, not an optimum (the problem is NP-hard): on the bundled
// inference traces it lands on the bound or within 2% (docs/allocators.md
// lists the measurements), but an unlucky order of sizes can leave a gap no
// later allocation fits (planner_test.go shows one).
//
// Data structures of Plan. Lifetimes become half-open ranges of allocation
// indexes: allocation i covers [i, e_i), where e_i counts the allocations
// that start before i ends, and two allocations are live at the same time
// exactly when their ranges intersect. The placed allocations that meet i
// are (a) those whose range covers i and (b) those that start inside
// (i, e_i). Two segment trees over the indexes find them: one holds each
// placed range at its O(log n) canonical nodes, so (a) lies on the path
// from leaf i to the root; the other holds each placed allocation at its
// leaf and every ancestor, so (b) lies in the O(log n) canonical nodes of
// (i, e_i). A node keeps only the union of its allocations' bytes, as
// sorted spans (the gap walk needs nothing else), and the allocations of a
// stretch of the trace tile the buffer densely, so a node holds far fewer
// spans than allocations. The gap walk of step 2 merges the O(log n) nodes'
// spans by offset with a heap, and stops early at a gap of exactly the
// size, which nothing can beat.
//
// Cost of Plan: O(n log n) to sort and index, plus for each allocation
// O(s log log n) for the s spans of the nodes it consults, and O(log n)
// span insertions. s is small for short-lived allocations, which are most
// of a real trace: on a generated 24-layer, 40-step transformer-train
// trace (70,000 allocations) Plan takes about 0.2 s; on a random trace of
// 100,000 allocations with 500 live at once about 2.5 s. The worst case,
// long-lived allocations scattered over the whole buffer, is
// O(n² log log n). The reference walks every placed allocation for every
// allocation: O(n²) always.
//
// Replay. The first Allocate reserves the whole footprint from the space in
// one reservation, held to the end. Each Allocate then hands out base + the
// offset of the next planned allocation (the calls come in plan order,
// Planner's contract) after checking that the request is the planned one; a
// different size is an error, not an out-of-memory. Free is bookkeeping.
// Both are O(log n): a free-range tree (internal/freetree) over the buffer
// gives the largest free range, for TensorFlow's fragmentation metric, and
// checks that no byte is handed out twice. If the footprint does not fit on
// the device, that one reservation fails and every Allocate returns
// ErrOutOfMemory: a plan is all or nothing.
//
// Alignment: offsets and block sizes are multiples of planner.align (256,
// cudaMalloc's alignment, by default), so a block's in-use size is its
// request rounded up to it. A request with a larger alignment gets an offset
// aligned to it, and the reservation is padded so its base is aligned to the
// largest alignment asked for.
//
// Memory: the planner is the one allocator that does not stream. sim reads
// the trace twice, once to gather every lifetime (32 bytes an allocation),
// then to replay; so the trace must be a file, not standard input. After
// Plan the planner keeps 17 bytes an allocation; during Plan its trees
// hold O(n log n) spans in the worst case.
//
// Departures from GreedyBySizeAssignment: its lifetimes are closed ranges of
// operator indexes [first_task, last_task]; here they are half-open ranges
// of trace events. Its sizes are exact and only the offsets are aligned, all
// to the one base_addr_align_bytes the caller passes; here blocks are
// rounded to planner.align and a request may ask for more alignment. TFLite's
// buffer is allocated by the runtime; here it is one device reservation,
// made at the first allocation, never released.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/bfcsim/bfcsim/allocators/internal/freetree"
)

var plannerOptions = []Option{
	{Key: "align", Default: "256", Help: "offsets and block sizes are multiples of this (a power of two; 256 is cudaMalloc's alignment)"},
}

// DefaultPlannerAlign is planner.align's default: cudaMalloc's alignment, so
// that every block is aligned as a device allocation would be.
const DefaultPlannerAlign = 256

// GreedyBySize implements Allocator and Planner: an offline greedy-by-size
// placement of the whole trace.
type GreedyBySize struct {
	space Space
	align uint64

	planned bool
	size    []uint64 // requested size, by allocation index (trace order)
	offset  []uint64 // planned offset from base
	live    []uint8  // 1 while the allocation is live
	// footprint is the planned buffer, lowerBound the most bytes live at
	// once, maxAlign the largest alignment an offset honours.
	footprint, lowerBound, maxAlign uint64

	next                int // index of the next allocation Allocate serves
	reserveTried        bool
	reserveErr          error
	base, reservedBytes uint64
	free                freetree.Tree // free ranges of the buffer, as offsets from base
	tfCounters
}

var (
	_ Allocator           = (*GreedyBySize)(nil)
	_ Planner             = (*GreedyBySize)(nil)
	_ LargestFreeReporter = (*GreedyBySize)(nil)
	_ StatsReporter       = (*GreedyBySize)(nil)
)

// NewGreedyBySize returns a planner over sp whose offsets and block sizes
// are multiples of align, a power of two. It must be given a Plan before
// its first Allocate.
func NewGreedyBySize(sp Space, align uint64) (*GreedyBySize, error) {
	if align == 0 || align&(align-1) != 0 {
		return nil, fmt.Errorf("%w: planner alignment %d is not a power of two", ErrBadOption, align)
	}
	return &GreedyBySize{space: sp, align: align}, nil
}

func newGreedyBySizeFromOptions(sp Space, o Options) (Allocator, map[string]any, error) {
	s, err := newSettings("planner", plannerOptions, o)
	if err != nil {
		return nil, nil, err
	}
	align := s.PowerOfTwo("align")
	if err := s.Err(); err != nil {
		return nil, nil, err
	}
	p, err := NewGreedyBySize(sp, align)
	if err != nil {
		return nil, nil, err
	}
	return p, s.Effective(), nil
}

// span is a range of the buffer's bytes, [off, end), during Plan.
type span struct{ off, end uint64 }

// offsetSet is a union of spans, kept as sorted, disjoint spans that do
// not touch. Only the union matters to the gap walk, and the placed
// allocations of a stretch of the trace tile the buffer densely, so a set
// holds far fewer spans than it was given.
type offsetSet []span

// add puts x into the set, merging it with the spans it overlaps or touches.
func (s *offsetSet) add(x span) {
	v := *s
	lo := sort.Search(len(v), func(k int) bool { return v[k].end >= x.off })
	hi := lo
	for ; hi < len(v) && v[hi].off <= x.end; hi++ {
		x.off, x.end = min(x.off, v[hi].off), max(x.end, v[hi].end)
	}
	*s = slices.Replace(v, lo, hi, x)
}

// Plan places every allocation; see the type's description.
// planCheckEvery is how many placements pass between checks for a
// cancelled context: one placement can cost a walk over many spans.
// planSetupCheckEvery is the same for the steps before placement, which
// cost O(log n) an allocation.
const (
	planCheckEvery      = 64
	planSetupCheckEvery = 1 << 16
)

// sortStopping sorts x by cmp, a total order, stopping with ctx's error
// soon after ctx is done: runs of planSetupCheckEvery are sorted, then
// merged pairwise. Sorting millions of allocations takes seconds, too long
// to wait for after an interrupt.
func sortStopping(ctx context.Context, x []int32, cmp func(a, b int32) int) error {
	const run = planSetupCheckEvery
	for lo := 0; lo < len(x); lo += run {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		slices.SortFunc(x[lo:min(lo+run, len(x))], cmp)
	}
	tmp := make([]int32, len(x))
	src, dst := x, tmp
	for width := run; width < len(x); width *= 2 {
		for lo := 0; lo < len(x); lo += 2 * width {
			mid, hi := min(lo+width, len(x)), min(lo+2*width, len(x))
			i, j, k := lo, mid, lo
			for ; i < mid && j < hi; k++ {
				if k%run == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
				if cmp(src[j], src[i]) < 0 {
					dst[k] = src[j]
					j++
				} else {
					dst[k] = src[i]
					i++
				}
			}
			k += copy(dst[k:], src[i:mid])
			copy(dst[k:], src[j:hi])
		}
		src, dst = dst, src
	}
	if len(x) > 0 && &src[0] != &x[0] {
		copy(x, src)
	}
	return nil
}

func (p *GreedyBySize) Plan(ctx context.Context, allocs []Lifetime) error {
	if p.planned {
		return errors.New("planner: Plan called twice")
	}
	n := len(allocs)
	if n >= math.MaxInt32 {
		return fmt.Errorf("planner: %d allocations are more than it can plan", n)
	}
	p.maxAlign = p.align
	for i, l := range allocs {
		switch {
		case l.Size == 0:
			return fmt.Errorf("planner: allocation %d (event %d) has size 0", i, l.Start)
		case l.End <= l.Start:
			return fmt.Errorf("planner: allocation %d ends (event %d) before it starts (event %d)", i, l.End, l.Start)
		case i > 0 && l.Start < allocs[i-1].Start:
			return fmt.Errorf("planner: allocation %d starts (event %d) before allocation %d (event %d): not in trace order", i, l.Start, i-1, allocs[i-1].Start)
		case l.Align&(l.Align-1) != 0:
			return fmt.Errorf("planner: allocation %d asks for alignment %d, not a power of two", i, l.Align)
		case l.Size > math.MaxUint64-(p.align-1):
			return fmt.Errorf("planner: allocation %d of %d bytes is too large to align", i, l.Size)
		}
		p.maxAlign = max(p.maxAlign, l.Align)
	}

	// Ranges of indexes: allocation i covers [i, ends[i]).
	ends := make([]int32, n)
	for i, l := range allocs {
		if i%planSetupCheckEvery == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		rest := allocs[i+1:]
		ends[i] = int32(i + 1 + sort.Search(len(rest), func(k int) bool { return rest[k].Start >= l.End }))
	}
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	if err := sortStopping(ctx, order, func(a, b int32) int {
		if c := cmp.Compare(allocs[b].Size, allocs[a].Size); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	}); err != nil {
		return err
	}

	p.size = make([]uint64, n)
	p.offset = make([]uint64, n)
	for i, l := range allocs {
		p.size[i] = l.Size
	}
	leaves := 1
	for leaves < n {
		leaves <<= 1
	}
	// Two segment trees over the indexes, node v's set in cover[v] and
	// starts[v] (the root is node 1, leaf i is node leaves+i).
	// cover: each placed range [j, ends[j]) at its canonical nodes, so the
	// ranges covering i lie on the path from leaf i to the root.
	// starts: each placed j at leaf j and every ancestor, so the ones that
	// start in a range lie in the range's canonical nodes.
	cover := make([]offsetSet, 2*leaves)
	starts := make([]offsetSet, 2*leaves)
	var meets []offsetSet
	var walk gapWalker
	for k, i := range order {
		if k%planCheckEvery == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		meets = meets[:0]
		for v := int(i) + leaves; v >= 1; v >>= 1 {
			meets = append(meets, cover[v])
		}
		for l, r := int(i)+1+leaves, int(ends[i])+leaves; l < r; l, r = l>>1, r>>1 {
			if l&1 == 1 {
				meets = append(meets, starts[l])
				l++
			}
			if r&1 == 1 {
				r--
				meets = append(meets, starts[r])
			}
		}
		size := p.blockSize(int(i))
		off, ok := walk.lowestSmallestGap(meets, size, max(p.align, allocs[i].Align))
		if !ok {
			return fmt.Errorf("planner: the plan needs more than 2^64 bytes")
		}
		p.offset[i] = off
		p.footprint = max(p.footprint, off+size)
		block := span{off, off + size}
		for l, r := int(i)+leaves, int(ends[i])+leaves; l < r; l, r = l>>1, r>>1 {
			if l&1 == 1 {
				cover[l].add(block)
				l++
			}
			if r&1 == 1 {
				r--
				cover[r].add(block)
			}
		}
		for v := int(i) + leaves; v >= 1; v >>= 1 {
			starts[v].add(block)
		}
	}
	p.lowerBound = peakLive(allocs)
	p.live = make([]uint8, n)
	p.planned = true
	return nil
}

// lowestSmallestGap walks the bytes of the placed allocations that meet
// the one being placed, the union of the sets meets, by offset, and returns
// the offset, aligned to align, of the smallest gap among them that holds
// size bytes (the lowest such gap on a tie), or else of the first aligned
// byte above them all. ok is false if that would pass 2^64.
//
// The sets are sorted, so a heap of them, keyed by their lowest span,
// yields every span in offset order: O(s log k) for s spans in k sets. A gap
// of exactly size bytes cannot be beaten, so the walk stops at the first.
func (w *gapWalker) lowestSmallestGap(meets []offsetSet, size, align uint64) (off uint64, ok bool) {
	h := w.heap[:0]
	defer func() { w.heap = h }()
	for _, m := range meets {
		if len(m) > 0 {
			h = append(h, cursor{m[0].off, m})
		}
	}
	for k := len(h)/2 - 1; k >= 0; k-- {
		siftDown(h, k)
	}
	var prev, bestGap uint64
	found := false
	for len(h) > 0 {
		m := h[0].set[0]
		if h[0].set = h[0].set[1:]; len(h[0].set) > 0 {
			h[0].off = h[0].set[0].off
		} else {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		siftDown(h, 0)
		if m.off >= prev {
			at := alignUp(prev, align)
			if at >= prev && at <= m.off && m.off-at >= size && (!found || m.off-prev < bestGap) {
				off, bestGap, found = at, m.off-prev, true
				if bestGap == size {
					break
				}
			}
		}
		prev = max(prev, m.end)
	}
	if found {
		return off, true
	}
	off = alignUp(prev, align)
	return off, off >= prev && off+size >= off
}

// gapWalker keeps the heap lowestSmallestGap uses from one call to the next.
type gapWalker struct{ heap []cursor }

// cursor is what is left of one set during the walk, and its lowest offset.
type cursor struct {
	off uint64
	set offsetSet
}

// siftDown restores the heap order of h, by lowest offset, below k.
func siftDown(h []cursor, k int) {
	for {
		c := 2*k + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1].off < h[c].off {
			c++
		}
		if h[k].off <= h[c].off {
			return
		}
		h[k], h[c] = h[c], h[k]
		k = c
	}
}

// peakLive is the most bytes live at once: the lower bound on any
// footprint. An allocation ending at the event another starts at is gone
// by then (lifetimes are half-open).
func peakLive(allocs []Lifetime) uint64 {
	type end struct {
		at   int64
		size uint64
	}
	ends := make([]end, len(allocs))
	for i, l := range allocs {
		ends[i] = end{l.End, l.Size}
	}
	slices.SortFunc(ends, func(a, b end) int { return cmp.Compare(a.at, b.at) })
	var live, peak uint64
	k := 0
	for _, l := range allocs {
		for ; k < len(ends) && ends[k].at <= l.Start; k++ {
			live -= ends[k].size
		}
		live += l.Size
		peak = max(peak, live)
	}
	return peak
}

// blockSize is the bytes planned for allocation i: its request rounded up
// to the alignment.
func (p *GreedyBySize) blockSize(i int) uint64 { return alignUp(p.size[i], p.align) }

// Allocate hands out the next planned allocation, reserving the whole
// buffer the first time. A request that is not the planned one (another
// size, an alignment the plan did not give) is an error that changes
// nothing; once the buffer could not be reserved, every call fails with
// ErrOutOfMemory.
func (p *GreedyBySize) Allocate(size, align uint64) (Block, error) {
	if !p.planned {
		return Block{}, errors.New("planner: Allocate before Plan: the planner must see the whole trace first")
	}
	i := p.next
	if i >= len(p.size) {
		return Block{}, fmt.Errorf("planner: allocation %d of %d bytes was not in the plan, which has %d", i, size, len(p.size))
	}
	off, n := p.offset[i], p.blockSize(i)
	if size != p.size[i] {
		return Block{}, fmt.Errorf("planner: allocation %d asks for %d bytes, but the plan has %d bytes there: the replay is not the trace that was planned", i, size, p.size[i])
	}
	// The base is aligned to maxAlign, so the offset tells.
	if align != 0 && (align > p.maxAlign || off&(align-1) != 0) {
		return Block{}, fmt.Errorf("planner: allocation %d asks for alignment %d, which the plan did not give it: the replay is not the trace that was planned", i, align)
	}
	p.next++
	if !p.reserveTried {
		p.reserve()
	}
	if p.reserveErr != nil {
		return Block{}, p.reserveErr
	}
	addr := p.base + off
	if !p.free.Take(off, n) {
		panic(fmt.Sprintf("planner: allocation %d at offset %d, %d bytes, overlaps a live block: the plan is wrong", i, off, n))
	}
	p.live[i] = 1
	p.allocated(n)
	return Block{Addr: addr, Size: n, Handle: uint64(i)}, nil
}

// reserve takes the planned buffer from the space, padded so that its base
// honours the largest alignment planned.
func (p *GreedyBySize) reserve() {
	p.reserveTried = true
	g := p.space.Granule()
	n := p.footprint
	if p.maxAlign > g {
		n += p.maxAlign - g
	}
	if n < p.footprint {
		p.reserveErr = fmt.Errorf("%w: the planned footprint of %d bytes is too large", ErrOutOfMemory, p.footprint)
		return
	}
	addr, err := p.space.Reserve(n)
	if err != nil {
		p.reserveErr = fmt.Errorf("planner: reserving the planned footprint of %d bytes: %w", n, err)
		return
	}
	p.base = alignUp(addr, p.maxAlign)
	p.reservedBytes = alignUp(n, g)
	if err := p.free.Add(0, addr+p.reservedBytes-p.base); err != nil {
		panic(fmt.Sprintf("planner: an empty buffer: %v", err))
	}
}

// Free returns a block to the plan's free ranges; no device call is made.
func (p *GreedyBySize) Free(b Block) error {
	i := b.Handle
	if i >= uint64(p.next) || p.live[i] == 0 || p.base+p.offset[i] != b.Addr {
		return fmt.Errorf("%w: planner has no live block at %#x", ErrNotLive, b.Addr)
	}
	n := p.blockSize(int(i))
	if err := p.free.Add(p.offset[i], n); err != nil {
		panic(fmt.Sprintf("planner: freeing allocation %d: %v", i, err))
	}
	p.live[i] = 0
	p.freed(n)
	return nil
}

// LargestFreeBytes is the largest range of the buffer no live block holds
// now; 0 before the buffer is reserved.
func (p *GreedyBySize) LargestFreeBytes() uint64 { return p.free.Largest() }

// Stats returns TensorFlow's counters, with the plan's numbers.
func (p *GreedyBySize) Stats() map[string]int64 {
	st := p.stats()
	st["planned_allocs"] = int64(len(p.size))
	st["footprint_bytes"] = int64(p.footprint)
	st["lower_bound_bytes"] = int64(p.lowerBound)
	st["pool_bytes"] = int64(p.reservedBytes)
	return st
}
