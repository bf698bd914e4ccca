package allocators

// PyTorch's expandable segments (expandable_segments:True), and the
// recorded segments the allocator adopts.
//
// An expandable segment (ExpandableSegment in CUDACachingAllocator.cpp) is a
// range of virtual addresses reserved once for a pool and a stream, 9/8 of
// the device's memory, in which physical pages are mapped (cuMemCreate and
// cuMemMap, one 2 MiB page at a time for the small pool, 20 MiB for the
// large) and unmapped. PyTorch keeps its blocks in one list per segment,
// mapped ones (free or allocated) and unmapped ones; a mapped block never
// merges with an unmapped one, so each run of mapped pages behaves as a
// segment of its own. The model keeps each such run as a ptSegment (es
// names its expandable segment) and the addresses between runs as the
// unmapped blocks. Every page is its own reservation in the space, as every
// page is its own CUDA allocation, so pages inside a run can go back alone.
//
// Allocation on a miss (try_allocate_expandable_block, find_expandable_block):
// the unmapped ranges of the pool's expandable segments on the stream are
// tried in address order; a range qualifies when it, the free block before
// it and the free blocks and unmapped ranges after it add up to the
// request. Pages are mapped from the start of the range until the free run
// they join is large enough, and that run is handed out (its front, after
// the split). A mapping the device refuses ends the attempt. With no range
// that qualifies, a new expandable segment is started.
//
// Release (release_cached_blocks → release_blocks → unmap_block): every free
// block of an expandable segment gives back the pages it wholly covers; the
// run it was in splits around them. Best fit counts a free block followed
// by unmapped addresses as large as both (get_free_block's expandable_size),
// so that the block that can grow is chosen last.
//
// Cost: runs split and join without visiting their blocks (a block of an
// expandable segment names the segment, and finds its run by address in
// the segment tree), and the free blocks get an index by address the first
// time a recorded reserve or release needs one, so that a trace that
// unmaps and maps pages in a run of many blocks over and over costs
// O(log n) per event (BenchmarkPyTorchUnmapRemap).
//
// With segments=recorded, the trace's reserve and release events are the
// program's segment_map and segment_unmap: a reserve maps those pages (in
// the expandable segment of the pool and stream whose range holds them, or
// a new one), and a release with a size unmaps those pages from the free
// block that holds them.

import "fmt"

// ptES is one expandable segment: the pool and stream it serves and the
// virtual addresses it may map pages at.
type ptES struct {
	key       ptESKey
	base, end uint64
	gone      bool // wholly unmapped, and given back
}

// ptMaxPagesPerMap bounds the pages one mapping reserves one by one: 2^20
// large pages are 20 TiB.
const ptMaxPagesPerMap = 1 << 20

// freeFinder is a space that can say where a reservation of n bytes would
// go without making it (VirtualSpace).
type freeFinder interface {
	FindFree(n uint64) (uint64, bool)
}

// segAt returns the segment that holds addr, or -1.
func (p *PyTorch) segAt(addr uint64) int32 {
	si := int32(-1)
	p.segTree.DescendLessOrEqual(ptSegKey{addr: addr}, func(k ptSegKey) bool {
		if s := &p.segs[k.idx]; addr < s.addr+s.size {
			si = k.idx
		}
		return false
	})
	return si
}

// segFrom returns the first segment that starts at or after addr, or -1.
func (p *PyTorch) segFrom(addr uint64) int32 {
	si := int32(-1)
	p.segTree.AscendGreaterOrEqual(ptSegKey{addr: addr}, func(k ptSegKey) bool {
		si = k.idx
		return false
	})
	return si
}

// runEndingAt returns the run of expandable segment ei that ends at addr,
// or -1.
func (p *PyTorch) runEndingAt(ei int32, addr uint64) int32 {
	if addr == 0 {
		return -1
	}
	si := p.segAt(addr - 1)
	if si >= 0 && p.segs[si].es == ei && p.segs[si].addr+p.segs[si].size == addr {
		return si
	}
	return -1
}

// runStartingAt returns the run of expandable segment ei that starts at
// addr, or -1.
func (p *PyTorch) runStartingAt(ei int32, addr uint64) int32 {
	si := p.segFrom(addr)
	if si >= 0 && p.segs[si].addr == addr && p.segs[si].es == ei {
		return si
	}
	return -1
}

// unmappedEnd is where the unmapped addresses of expandable segment ei that
// start at addr end: at the next segment or at the end of its range.
func (p *PyTorch) unmappedEnd(ei int32, addr uint64) uint64 {
	end := p.ess[ei].end
	if si := p.segFrom(addr); si >= 0 && p.segs[si].addr < end {
		end = p.segs[si].addr
	}
	return max(end, addr)
}

// pageUp and pageDown round addr to a page boundary of expandable segment
// ei: its pages start at its base.
func (p *PyTorch) pageUp(ei int32, addr uint64) uint64 {
	e := &p.ess[ei]
	return e.base + ptRoundUp(addr-e.base, p.page(e.key.small))
}

func (p *PyTorch) pageDown(ei int32, addr uint64) uint64 {
	e := &p.ess[ei]
	page := p.page(e.key.small)
	return e.base + (addr-e.base)/page*page
}

// expandableSize is a free block's size, plus, when unmapped addresses
// follow it, their size: get_free_block's expandable_size.
func (p *PyTorch) expandableSize(h int32) uint64 {
	b := &p.blocks[h]
	if !p.inES(h) || b.next != noChunk {
		return b.size
	}
	end := b.addr + b.size // the last block ends its run
	return b.size + p.unmappedEnd(p.esOf(h), end) - end
}

// freeBlockAt returns the free block of an expandable segment that holds
// addr, or noChunk.
func (p *PyTorch) freeBlockAt(addr uint64) int32 {
	if !p.indexFree {
		// Built on first use: replays without recorded segments never
		// pay for it.
		p.indexFree = true
		for i := range p.pools {
			p.pools[i].tree.Ascend(func(k ptKey) bool {
				if p.inES(k.h) {
					p.esFree.ReplaceOrInsert(ptSegKey{addr: k.addr, idx: k.h})
				}
				return true
			})
		}
	}
	h := int32(noChunk)
	p.esFree.DescendLessOrEqual(ptSegKey{addr: addr}, func(k ptSegKey) bool {
		if b := &p.blocks[k.idx]; addr < b.addr+b.size {
			h = k.idx
		}
		return false
	})
	return h
}

// esFor returns the expandable segment of key whose range holds addr, or
// -1.
func (p *PyTorch) esFor(key ptESKey, addr uint64) int32 {
	for _, ei := range p.esByKey[key] {
		if e := &p.ess[ei]; e.base <= addr && addr < e.end {
			return ei
		}
	}
	return -1
}

// esReaching returns the expandable segment of key that begins above addr,
// a whole number of pages away, with no other expandable segment between,
// after moving its base down to addr; or -1. The base of an adopted
// segment is where the first recorded reserve of it was, and a start
// state lists pages from the middle of a segment: the pages the program
// maps below them later are the same segment's, and its blocks run across
// both (PyTorch keeps one segment per pool and stream, its virtual range
// reserved once).
func (p *PyTorch) esReaching(key ptESKey, addr uint64) int32 {
	best := int32(-1)
	for i := range p.ess {
		e := &p.ess[i]
		if e.gone || e.end <= addr {
			continue
		}
		if e.base <= addr {
			return -1 // addr lies in another pool's or stream's range
		}
		if best < 0 || e.base < p.ess[best].base {
			best = int32(i)
		}
	}
	if best < 0 {
		return -1
	}
	e := &p.ess[best]
	if e.key != key || (e.base-addr)%p.page(key.small) != 0 || e.end-addr > 2*p.esReserve {
		return -1
	}
	e.base = addr
	return best
}

// newES starts an expandable segment for key at base, with the virtual
// size PyTorch reserves (9/8 of the device), cut short where another
// expandable segment's range begins; one that began before base is cut
// short at base.
func (p *PyTorch) newES(key ptESKey, base uint64) int32 {
	end := p.limit
	if p.limit-base > p.esReserve {
		end = base + p.esReserve
	}
	for i := range p.ess {
		e := &p.ess[i]
		if e.gone {
			continue
		}
		if e.base > base {
			end = min(end, e.base)
		} else if e.end > base {
			e.end = base
		}
	}
	var ei int32
	if k := len(p.freeES); k > 0 {
		ei = p.freeES[k-1]
		p.freeES = p.freeES[:k-1]
		p.ess[ei] = ptES{key: key, base: base, end: end}
	} else {
		p.ess = append(p.ess, ptES{key: key, base: base, end: end})
		ei = int32(len(p.ess) - 1)
	}
	l := p.esByKey[key]
	i := len(l)
	for i > 0 && p.ess[l[i-1]].base > base {
		i--
	}
	p.esByKey[key] = append(l[:i], append([]int32{ei}, l[i:]...)...)
	return ei
}

// reservePages reserves [addr, addr+n) from the space one page at a time,
// as PyTorch creates one CUDA allocation per page. If the space refuses a
// page, the pages reserved so far go back and it reports false; a refusal
// with room left under the capacity means the space holds something the
// model does not know of, and the model stops placing in it.
func (p *PyTorch) reservePages(addr, n, page uint64) bool {
	if n/page > ptMaxPagesPerMap {
		// More pages than any device holds: one reservation, not a loop
		// that a crafted trace could make last for hours.
		if err := p.placer.MapAt(addr, n); err != nil {
			if !p.overCapacity(n) {
				p.placerBroken = true
			}
			return false
		}
		p.esPages[addr] = n
		return true
	}
	for off := uint64(0); off < n; off += page {
		size := min(page, n-off)
		if err := p.placer.MapAt(addr+off, size); err != nil {
			if !p.overCapacity(size) {
				p.placerBroken = true
			}
			if off > 0 {
				if err := p.space.Release(addr, off); err != nil {
					panic(fmt.Sprintf("pytorch: giving back pages [%#x, +%d): %v", addr, off, err))
				}
				for a := addr; a < addr+off; a += page {
					delete(p.esPages, a)
				}
			}
			return false
		}
		p.esPages[addr+off] = size
	}
	return true
}

// mapRange records [lo, lo+n), just reserved, as mapped in expandable
// segment ei (map_block): the run that ends at lo grows, or a new run
// starts, and a run that starts at lo+n joins it. It returns the free block
// that holds lo, merged with its free neighbours and back in its pool.
func (p *PyTorch) mapRange(ei int32, lo, n uint64) int32 {
	key := p.ess[ei].key
	si := p.runEndingAt(ei, lo)
	var h int32
	if si < 0 {
		si = p.newSegment(lo, n, key.stream, key.small, ei)
		h = p.segs[si].first
	} else {
		t := p.segs[si].last
		if !p.blocks[t].allocated {
			p.remove(t)
			p.blocks[t].size += n
			h = t
		} else {
			h = p.newBlock()
			b := &p.blocks[h]
			b.addr, b.size, b.stream, b.seg, b.prev = lo, n, key.stream, esSeg(ei), t
			p.blocks[t].next = h
			p.segs[si].last = h
		}
		p.segs[si].size += n
		p.reserved(key.small, n)
	}
	if ti := p.runStartingAt(ei, lo+n); ti >= 0 {
		p.join(si, ti, h)
	}
	p.insert(h)
	return h
}

// join appends run ti to run si, whose last block h, free and outside its
// pool, absorbs ti's first block if that is free. The blocks of ti are not
// visited: they find their run by address.
func (p *PyTorch) join(si, ti int32, h int32) {
	t := p.segs[ti]
	s := &p.segs[si]
	s.size += t.size
	s.last = t.last
	p.blocks[h].next, p.blocks[t.first].prev = t.first, h
	if f := t.first; !p.blocks[f].allocated {
		p.remove(f)
		fb := p.blocks[f]
		p.blocks[h].size += fb.size
		p.blocks[h].next = fb.next
		if fb.next != noChunk {
			p.blocks[fb.next].prev = h
		} else {
			s.last = h
		}
		p.deleteBlock(f)
	}
	p.deleteSegment(ti)
}

// unmapRange gives back the pages [lo, hi) of free block h (unmap_block):
// what is left of h on either side stays free, and the run splits around
// the unmapped addresses. It reports false, changing nothing, if the space
// will not release the range.
func (p *PyTorch) unmapRange(h int32, lo, hi uint64) bool {
	b := p.blocks[h]
	si := p.segOf(h)
	seg := p.segs[si]
	// Only whole reservations go back: pages, or a range reserved at once.
	for a := lo; a < hi; {
		n, ok := p.esPages[a]
		if !ok || n > hi-a {
			return false
		}
		a += n
	}
	p.expectRelease(lo, hi-lo, false)
	if err := p.space.Release(lo, hi-lo); err != nil {
		return false
	}
	for a := lo; a < hi; {
		n := p.esPages[a]
		delete(p.esPages, a)
		a += n
	}
	p.remove(h)
	left, right := b.prev, b.next // the blocks that end the run's two parts
	if lo > b.addr {
		p.blocks[h].size = lo - b.addr
		left = h
	}
	if end := b.addr + b.size; hi < end {
		a := p.newBlock()
		ab := &p.blocks[a]
		ab.addr, ab.size, ab.stream, ab.seg, ab.next = hi, end-hi, b.stream, b.seg, b.next
		if b.next != noChunk {
			p.blocks[b.next].prev = a
		}
		right = a
		if seg.last == h {
			seg.last = a
		}
	}
	if left != h {
		p.deleteBlock(h)
	}
	if left != noChunk {
		p.blocks[left].next = noChunk
	}
	if right != noChunk {
		p.blocks[right].prev = noChunk
	}
	end := seg.addr + seg.size
	switch {
	case left != noChunk && right != noChunk:
		p.segs[si].size, p.segs[si].last = lo-seg.addr, left
		p.addSegment(ptSegment{addr: hi, size: end - hi, first: right, last: seg.last,
			stream: seg.stream, small: seg.small, es: seg.es})
	case left != noChunk:
		p.segs[si].size, p.segs[si].last = lo-seg.addr, left
	case right != noChunk:
		p.segTree.Delete(ptSegKey{addr: seg.addr})
		p.segs[si].addr, p.segs[si].size, p.segs[si].first, p.segs[si].last = hi, end-hi, right, seg.last
		p.segTree.ReplaceOrInsert(ptSegKey{addr: hi, idx: si})
	default:
		p.deleteSegment(si)
		p.dropIfUnmapped(seg.es)
	}
	if left == h {
		p.insert(h)
	}
	if right != noChunk && right != b.next {
		p.insert(right)
	}
	n := hi - lo
	p.totalAllocated -= n
	p.ds.reservedBytes.add(seg.small, -int64(n))
	p.ds.numDeviceFree++
	return true
}

// dropIfUnmapped gives expandable segment ei back when none of it is
// mapped any more (release_expandable_segment).
func (p *PyTorch) dropIfUnmapped(ei int32) {
	e := &p.ess[ei]
	for si := p.segFrom(e.base); si >= 0 && p.segs[si].addr < e.end; si = p.segFrom(p.segs[si].addr + p.segs[si].size) {
		if p.segs[si].es == ei {
			return
		}
	}
	e.gone = true
	p.freeES = append(p.freeES, ei)
	l := p.esByKey[e.key]
	for i, x := range l {
		if x == ei {
			l = append(l[:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(p.esByKey, e.key)
	} else {
		p.esByKey[e.key] = l
	}
}

// liveES counts the expandable segments not given back.
func (p *PyTorch) liveES() int {
	n := 0
	for _, l := range p.esByKey {
		n += len(l)
	}
	return n
}

// unmapFreePages gives back the pages free block h wholly covers, and
// reports whether there were any.
func (p *PyTorch) unmapFreePages(h int32) bool {
	b := &p.blocks[h]
	ei := p.esOf(h)
	lo, hi := p.pageUp(ei, b.addr), p.pageDown(ei, b.addr+b.size)
	return hi > lo && p.unmapRange(h, lo, hi)
}

// allocExpandable is try_allocate_expandable_block: map pages for a free
// run of size bytes and return it, out of its pool.
func (p *PyTorch) allocExpandable(small bool, size uint64, stream int64) (int32, bool) {
	key := ptESKey{small: small, stream: stream}
	if p.placer != nil && !p.placerBroken {
		for _, ei := range p.esByKey[key] {
			for lo := p.ess[ei].base; lo < p.ess[ei].end; {
				if si := p.segAt(lo); si >= 0 {
					lo = p.segs[si].addr + p.segs[si].size
					continue
				}
				hi := p.unmappedEnd(ei, lo)
				if a, b := p.pageUp(ei, lo), p.pageDown(ei, hi); b > a && p.room(ei, a, b) >= size {
					return p.mapFor(ei, a, size)
				}
				lo = hi
			}
		}
	}
	// No room in any: a new expandable segment.
	n := ptRoundUp(size, p.page(small))
	addr, lump, ok, recorded := p.placeExpandable(n, p.page(small))
	if !ok {
		return noChunk, false
	}
	if !recorded {
		p.rec.modelSegments++
	}
	ei := p.newES(key, addr)
	if lump {
		p.esPages[addr] = n
	}
	if p.placer == nil || p.placerBroken {
		p.ess[ei].end = addr + n // it cannot grow
	}
	h := p.mapRange(ei, addr, n)
	p.remove(h)
	return h, true
}

// room is how much a free run starting at unmapped addresses [lo, hi) of
// expandable segment ei could hold: the free block before them, them, and
// what follows while it is free or unmapped (has_available_address_space).
func (p *PyTorch) room(ei int32, lo, hi uint64) uint64 {
	var have uint64
	if si := p.runEndingAt(ei, lo); si >= 0 && !p.blocks[p.segs[si].last].allocated {
		have = p.blocks[p.segs[si].last].size
	}
	have += hi - lo
	for {
		ti := p.runStartingAt(ei, hi)
		if ti < 0 {
			return have
		}
		f := p.segs[ti].first
		if p.blocks[f].allocated {
			return have
		}
		have += p.blocks[f].size
		if f != p.segs[ti].last {
			return have
		}
		lo = hi + p.segs[ti].size
		hi = p.pageDown(ei, p.unmappedEnd(ei, lo))
		if hi <= lo {
			return have
		}
		have += hi - lo
	}
}

// mapFor maps pages of expandable segment ei from lo on until the free run
// there holds size bytes, and returns that run out of its pool.
func (p *PyTorch) mapFor(ei int32, lo, size uint64) (int32, bool) {
	page := p.page(p.ess[ei].key.small)
	h := int32(noChunk)
	var have uint64
	if si := p.runEndingAt(ei, lo); si >= 0 && !p.blocks[p.segs[si].last].allocated {
		h = p.segs[si].last
		have = p.blocks[h].size
	}
	for have < size {
		if h != noChunk {
			s := &p.segs[p.segOf(h)]
			if s.last != h {
				return noChunk, false // an allocated block ends the run: room said otherwise
			}
			lo = s.addr + s.size
		}
		hi := p.pageDown(ei, p.unmappedEnd(ei, lo))
		n := min(ptRoundUp(size-have, page), hi-min(hi, lo))
		recorded := n > 0 && p.expectMap(lo, n)
		if n == 0 || !p.reservePages(lo, n, page) {
			if !recorded {
				return noChunk, false
			}
			p.diverge("the device, %s, cannot map the program's next pages (%s at %#x; %s reserved)",
				iecBytes(p.space.Capacity()), iecBytes(n), lo, iecBytes(p.space.Stats().ReservedBytes))
			return noChunk, false
		}
		if !recorded {
			p.rec.modelSegments++
		}
		h = p.mapRange(ei, lo, n)
		have = p.blocks[h].size
	}
	p.remove(h)
	return h, true
}

// placeExpandable reserves the first pages of a new expandable segment: in
// the first free slot when the space is large enough to give each segment
// its own (as PyTorch reserves virtual address space for it), else where
// the space would put them; while following a recording, where the
// program had them (recorded). lump says they were reserved as one range.
func (p *PyTorch) placeExpandable(n, page uint64) (addr uint64, lump, ok, recorded bool) {
	if p.placer != nil && !p.placerBroken {
		if addr, ok := p.expectNewES(n); ok {
			if p.reservePages(addr, n, page) {
				p.followed++
				return addr, false, true, true
			}
			p.diverge("the device, %s, cannot map the program's new expandable segment (%s at %#x)",
				iecBytes(p.space.Capacity()), iecBytes(n), addr)
			if p.overCapacity(n) {
				return 0, false, false, false
			}
		}
		if p.esStride > 0 {
			for slot := p.base; slot <= p.limit-p.esStride; slot += p.esStride {
				if p.rangeFree(slot, p.esStride) {
					return slot, false, p.reservePages(slot, n, page), false
				}
			}
		}
		if p.finder != nil {
			if addr, ok := p.finder.FindFree(n); ok {
				return addr, false, p.reservePages(addr, n, page), false
			}
		}
	}
	addr, err := p.space.Reserve(n)
	return addr, true, err == nil, false
}

// releaseCachedBlocks is release_cached_blocks: give every whole free
// fixed segment back, and unmap the pages free blocks of expandable
// segments wholly cover, large pool first, each pool in its order.
func (p *PyTorch) releaseCachedBlocks() {
	p.ds.numSyncAllStreams++
	for _, pi := range [2]int{ptLarge, ptSmall} {
		var whole, unmap []int32
		p.pools[pi].tree.Ascend(func(k ptKey) bool {
			if p.inES(k.h) {
				unmap = append(unmap, k.h)
			} else if p.whole(k.h) {
				whole = append(whole, k.h)
			}
			return true
		})
		for _, h := range whole {
			p.releaseSegment(p.blocks[h].seg)
		}
		for _, h := range unmap {
			p.unmapFreePages(h)
		}
	}
}

// takeRecorded hands out the segment a recorded reserve just brought, as
// alloc_block hands out the segment it reserves: in the recording the
// program reserved it because get_free_block missed, so the oversize rules
// that made the search miss must not turn it down either. For an
// expandable segment, the free run that holds the pages mapped.
func (p *PyTorch) takeRecorded(small bool, size uint64, stream int64) (int32, bool) {
	if p.pendingRecorded < 0 {
		return noChunk, false
	}
	si := p.pendingRecorded
	if p.pendingES {
		if si = p.segAt(p.pendingAddr); si < 0 {
			return noChunk, false
		}
	}
	s := &p.segs[si]
	h := s.last // a fixed segment's only block
	if s.expandable() {
		if h = p.freeBlockAt(p.pendingAddr); h == noChunk {
			return noChunk, false
		}
	}
	b := &p.blocks[h]
	if s.small != small || s.stream != stream || b.allocated || b.size < size ||
		(!s.expandable() && !p.whole(h)) {
		return noChunk, false
	}
	p.remove(h)
	return h, true
}

// RecordedReserve adopts a segment the recorded program reserved (a
// segment_alloc), or pages it mapped (a segment_map), unless
// segments=model. A reserve of 2 MiB is the small pool's: a small fixed
// segment is 2 MiB, and the small pool maps one 2 MiB page at a time (a
// request of at most 1 MiB never needs two), while the large pool maps
// 20 MiB pages. A start state lists a small expandable segment's mapped
// mapped pages one by one for that reason.
func (p *PyTorch) RecordedReserve(addr, size uint64, stream int64) {
	if p.scripted(ptAction{addr: addr, size: size, stream: stream}) {
		return
	}
	if p.placer == nil || p.placerBroken || size == 0 || size%ptMinBlockSize != 0 {
		p.rec.refused++
		return
	}
	small := size == ptSmallBuffer
	if !p.cfg.ExpandableSegments {
		if p.placer.ReserveAt(addr, size) != nil {
			p.rec.refused++
			return
		}
		p.rec.adopted++
		si := p.newSegment(addr, size, stream, small, -1)
		p.insert(p.segs[si].first)
		p.adopted(si, addr, false)
		return
	}
	key := ptESKey{small: small, stream: stream}
	if !p.rangeFree(addr, size) || !p.reservePages(addr, size, p.page(small)) {
		p.rec.refused++
		return
	}
	p.rec.adopted++
	ei := p.esFor(key, addr)
	if ei < 0 {
		ei = p.esReaching(key, addr)
	}
	if ei < 0 {
		ei = p.newES(key, addr)
	}
	h := p.mapRange(ei, addr, size)
	p.adopted(p.segOf(h), addr, true)
}

// adopted notes that the allocation that made the program reserve segment
// si (at addr) comes next, unless this is the start state.
func (p *PyTorch) adopted(si int32, addr uint64, es bool) {
	if !p.startState {
		p.pendingRecorded, p.pendingAddr, p.pendingES = si, addr, es
	}
}

// RecordedRelease frees what the recorded program released, unless
// segments=model: a fixed segment (segment_free) if it is entirely free, or
// pages of an expandable segment (segment_unmap; size 0: from addr to the
// end of its run) if one free block holds them.
func (p *PyTorch) RecordedRelease(addr, size uint64) {
	if p.scripted(ptAction{release: true, addr: addr, size: size}) {
		return
	}
	p.rec.releases++
	if !p.releaseRecorded(addr, size) {
		p.rec.releasesIgnored++
	}
}

// releaseRecorded makes a release the recording made: a fixed segment
// (size 0) if it is entirely free, or pages of an expandable segment (size
// 0: from addr to the end of its run) if one free block holds them. It
// reports whether it could.
func (p *PyTorch) releaseRecorded(addr, size uint64) bool {
	if si := p.segAt(addr); si >= 0 {
		s := &p.segs[si]
		switch {
		case s.expandable():
			if size == 0 {
				size = s.addr + s.size - addr
			}
			if h := p.freeBlockAt(addr); h != noChunk {
				if b := &p.blocks[h]; size <= b.addr+b.size-addr && p.unmapRange(h, addr, addr+size) {
					return true
				}
			}
		case s.addr == addr && p.whole(s.first) && !p.blocks[s.first].allocated:
			p.releaseSegment(si)
			return true
		}
	}
	return false
}

// RecordedRange declares an expandable segment of the recording, for the
// pool and stream given, whose range starts at addr: the allocator's own
// segment for them begins there, so that pages mapped below the start
// state's are in it (unless segments=model).
func (p *PyTorch) RecordedRange(addr uint64, small bool, stream int64) {
	if p.cfg.Segments == PyTorchSegmentsModel || !p.cfg.ExpandableSegments || addr < p.base || addr >= p.limit {
		return
	}
	key := ptESKey{small: small, stream: stream}
	if p.esFor(key, addr) >= 0 || p.segAt(addr) >= 0 {
		return // inside one already declared, or mapped
	}
	p.newES(key, addr) // another pool's range ends where it begins
}
