package allocators

// VirtualSpace is a simulated device with nothing behind its addresses, so
// that an 80 GiB GPU can be modelled on a laptop.
//
// Strategy: reservations are placed first fit by lowest address, aligned to
// and rounded up to 256 bytes (cudaMalloc's guaranteed alignment). Released
// ranges return to a free set and merge with free neighbours, so a release
// next to free space makes one larger hole.
//
// Two placements (--set space.placement=...):
//
//   - paged (the default): the device maps physical pages into a virtual
//     range far larger than its memory, as CUDA does, so a reservation fails
//     only when the bytes reserved would exceed the capacity. Addresses are
//     still placed first fit in the virtual range
//     [1<<40, 1<<40+max(capacity, 128 TiB)), so they stay compact and
//     deterministic.
//   - first-fit: the device is one contiguous range
//     [1<<40, 1<<40+capacity). A reservation fails when no single hole is
//     large enough, even if enough bytes are free in total: the device's own
//     address space fragments.
//
// Data structure: the free ranges in an address-ordered treap that keeps each
// subtree's largest range (internal/freetree), and the size of each
// reservation by its start (reservationTable), so that a release must cover
// whole reservations, as cudaFree and munmap of whole mappings do. The table
// is an array of sizes by granule, in pages of 32 granules found through a
// map, rather than one map from start to size: first fit keeps the
// reservations made and released close in time close in the space, so the
// table keeps them close in memory, where a hash map would scatter them and
// miss the cache on nearly every call of a large trace (a third of naive's
// replay time on an 8 M-event recording). Reserve and Release are O(log n)
// in the number of holes, plus O(1) per reservation a release covers.
//
// Departure from a real GPU: CUDA maps physical memory in 2 MiB pages and a
// real cudaMalloc may round small requests up to a page or serve them from a
// driver sub-allocator; the model rounds only to 256 bytes. The calls' cost
// comes from the documented CostModel rather than from a device.

import (
	"fmt"

	"github.com/bfcsim/bfcsim/allocators/internal/freetree"
)

// VirtualBase is where a virtual space starts: 1<<40, the base TensorFlow's
// own BFC tests use for their fake sub-allocator, so addresses can be compared.
const VirtualBase = 1 << 40

// VirtualGranule is the alignment and size unit of virtual reservations.
const VirtualGranule = 256

// pagedVirtualBytes is the virtual range of a paged space: 128 TiB, the
// user half of a 48-bit address space, larger than any device's memory.
const pagedVirtualBytes = 1 << 47

// Placement says how a VirtualSpace places reservations.
type Placement int

// The placements of a VirtualSpace.
const (
	FirstFit Placement = iota // one contiguous device range; it can fragment
	Paged                     // a large virtual range; only the capacity limits
)

// VirtualSpace implements Space over simulated addresses.
type VirtualSpace struct {
	base, capacity uint64
	span           uint64 // size of the address range placed in
	paged          bool
	free           freetree.Tree
	reservations   reservationTable
	acct           accounting
}

var (
	_ Space  = (*VirtualSpace)(nil)
	_ Placer = (*VirtualSpace)(nil)
)

// NewVirtualSpace returns an empty virtual space of capacity bytes (rounded
// down to the granule) priced by cost.
func NewVirtualSpace(capacity uint64, cost CostModel, placement Placement) *VirtualSpace {
	capacity &^= VirtualGranule - 1
	s := &VirtualSpace{base: VirtualBase, capacity: capacity, span: capacity,
		acct: accounting{cost: cost}}
	if placement == Paged {
		s.paged = true
		s.span = max(capacity, pagedVirtualBytes)
	}
	if s.span > 0 {
		if err := s.free.Add(s.base, s.span); err != nil {
			panic(err) // an empty tree accepts any range
		}
	}
	return s
}

// Reserve places n bytes (rounded up to 256) at the lowest address that has room.
func (s *VirtualSpace) Reserve(n uint64) (uint64, error) {
	if n == 0 {
		return 0, fmt.Errorf("reserving 0 bytes")
	}
	size := alignUp(n, VirtualGranule)
	if size < n || (s.paged && s.acct.stats.ReservedBytes+size > s.capacity) {
		s.acct.failed()
		return 0, ErrOutOfMemory
	}
	addr, ok := s.free.FirstFit(size)
	if !ok {
		s.acct.failed()
		return 0, ErrOutOfMemory
	}
	s.reservations.put(addr-s.base, size)
	s.acct.reserved(size)
	return addr, nil
}

// FindFree returns where Reserve(n) would place n bytes now, without
// reserving them or counting a call: an allocator that reserves a range in
// pieces (PyTorch's expandable segments, a page at a time) asks it first.
func (s *VirtualSpace) FindFree(n uint64) (uint64, bool) {
	size := alignUp(n, VirtualGranule)
	if n == 0 || size < n || (s.paged && s.acct.stats.ReservedBytes+size > s.capacity) {
		return 0, false
	}
	addr, ok := s.free.FirstFit(size)
	if ok {
		if err := s.free.Add(addr, size); err != nil {
			panic(fmt.Sprintf("virtual space: giving back the range it just found: %v", err))
		}
	}
	return addr, ok
}

// ReserveAt reserves [addr, addr+n rounded up to 256) if all of it is free.
func (s *VirtualSpace) ReserveAt(addr, n uint64) error {
	return s.reserveAt(addr, n, false)
}

// MapAt is ReserveAt for a handle of mapped pages, priced as a mapping.
func (s *VirtualSpace) MapAt(addr, n uint64) error {
	return s.reserveAt(addr, n, true)
}

// reservationMapped marks, in the reservation table, a reservation made
// by MapAt (sizes are multiples of 256, so the low bit is free).
const reservationMapped = 1

func (s *VirtualSpace) reserveAt(addr, n uint64, mapped bool) error {
	size := alignUp(n, VirtualGranule)
	if n == 0 || size < n || addr%VirtualGranule != 0 ||
		(s.paged && s.acct.stats.ReservedBytes+size > s.capacity) || !s.free.Take(addr, size) {
		s.acct.failed()
		return ErrOutOfMemory
	}
	if mapped {
		s.reservations.put(addr-s.base, size|reservationMapped)
		s.acct.mapped(size)
	} else {
		s.reservations.put(addr-s.base, size)
		s.acct.reserved(size)
	}
	return nil
}

// Release frees [addr, addr+n rounded up to 256), which must be a run of
// whole, adjacent reservations.
func (s *VirtualSpace) Release(addr, n uint64) error {
	size := alignUp(n, VirtualGranule)
	end := addr + size
	cur := addr
	for n > 0 && cur < end && addr >= s.base {
		sz := s.reservations.get(cur - s.base)
		if sz == 0 {
			break
		}
		cur += sz &^ reservationMapped
	}
	if n == 0 || cur != end {
		return fmt.Errorf("%w: release of [%#x, +%d), which is not a run of whole reservations", ErrNotLive, addr, n)
	}
	var mapped uint64
	var handles int
	for cur = addr; cur < end; {
		sz := s.reservations.remove(cur - s.base)
		if sz&reservationMapped != 0 {
			sz &^= reservationMapped
			mapped += sz
			handles++
		}
		cur += sz
	}
	if err := s.free.Add(addr, size); err != nil {
		panic(fmt.Sprintf("virtual space: reserved range [%#x, +%d) is also free: %v", addr, size, err))
	}
	s.acct.releasedMapped(size, mapped, handles)
	return nil
}

// Granule is 256 bytes.
func (s *VirtualSpace) Granule() uint64 { return VirtualGranule }

// Capacity returns the space's size in bytes.
func (s *VirtualSpace) Capacity() uint64 { return s.capacity }

// Bounds returns the range addresses are placed in: [1<<40, 1<<40+capacity)
// for first fit, a far larger range when paged.
func (s *VirtualSpace) Bounds() (uint64, uint64) { return s.base, s.base + s.span }

// Stats returns the space's counters.
func (s *VirtualSpace) Stats() SpaceStats { return s.acct.stats }

// LargestFreeBytes returns the largest range that can still be reserved.
func (s *VirtualSpace) LargestFreeBytes() uint64 {
	if s.paged {
		return min(s.free.Largest(), s.capacity-s.acct.stats.ReservedBytes)
	}
	return s.free.Largest()
}

// reservationTable maps the offset of each reservation's start from the
// space's base to its size. A hash map from start to size scatters
// reservations that are neighbours in the space across memory, so that on
// a large trace nearly every lookup misses the cache; first-fit placement
// puts the reservations made and released close in time close in the space,
// so the table keeps them close in memory too: the sizes of
// reservationPageGranules consecutive granules share a page, and pages are
// found through a map (few entries, and the last page used is remembered).
//
// A page whose last reservation is released stays in the map, since first
// fit soon places another there, until the empty pages outnumber
// reservationSlackPages and half the map: then they are all dropped, at a
// cost the releases since the last sweep have paid for, and kept on a list
// for reuse. The table so holds at most about two pages per live
// reservation, and a replay allocates its pages once.
type reservationTable struct {
	pages    map[uint64]*reservationPage // by offset / (granule * page granules)
	empty    int                         // pages in the map that hold no reservation
	lastKey  uint64
	lastPage *reservationPage   // the page of lastKey, or nil
	spare    []*reservationPage // dropped pages, for new ones
}

// reservationPageGranules is the granules a reservation page covers: 32
// sizes of 8 bytes, 256 bytes, for 8 KiB of the space. Larger pages serve a
// dense trace of small reservations a little better; smaller ones cost less
// memory, and so less time, where every reservation has a page to itself.
const reservationPageGranules = 32

// reservationSlabPages is how many pages are allocated at once: about 8 KiB.
const reservationSlabPages = 32

// reservationSlackPages is how many empty pages the map keeps whatever its
// size: about 16 KiB.
const reservationSlackPages = 64

type reservationPage struct {
	n    int                             // reservations that start in the page
	size [reservationPageGranules]uint64 // 0: no reservation starts here
}

func (t *reservationTable) page(off uint64) (*reservationPage, uint64) {
	g := off / VirtualGranule
	key := g / reservationPageGranules
	if t.lastPage == nil || t.lastKey != key {
		p := t.pages[key]
		if p == nil {
			return nil, g % reservationPageGranules
		}
		t.lastKey, t.lastPage = key, p
	}
	return t.lastPage, g % reservationPageGranules
}

// get returns the size of the reservation that starts at off, or 0.
func (t *reservationTable) get(off uint64) uint64 {
	if off%VirtualGranule != 0 {
		return 0
	}
	p, i := t.page(off)
	if p == nil {
		return 0
	}
	return p.size[i]
}

// put records a reservation of size bytes (> 0) at off, where none starts.
func (t *reservationTable) put(off, size uint64) {
	p, i := t.page(off)
	switch {
	case p == nil:
		key := off / VirtualGranule / reservationPageGranules
		if len(t.spare) == 0 {
			// Pages come in slabs: one allocation for many pages, which
			// a trace of large reservations uses one each.
			slab := make([]reservationPage, reservationSlabPages)
			for j := range slab {
				t.spare = append(t.spare, &slab[len(slab)-1-j])
			}
		}
		k := len(t.spare)
		p, t.spare = t.spare[k-1], t.spare[:k-1]
		if t.pages == nil {
			t.pages = map[uint64]*reservationPage{}
		}
		t.pages[key] = p
		t.lastKey, t.lastPage = key, p
	case p.n == 0:
		t.empty--
	}
	p.size[i] = size
	p.n++
}

// remove forgets the reservation at off, which must be recorded, and
// returns its size.
func (t *reservationTable) remove(off uint64) uint64 {
	p, i := t.page(off)
	size := p.size[i]
	p.size[i] = 0
	if p.n--; p.n == 0 {
		if t.empty++; t.empty > reservationSlackPages+len(t.pages)/2 {
			t.sweep()
		}
	}
	return size
}

// sweep drops the empty pages from the map, onto the spare list.
func (t *reservationTable) sweep() {
	for key, p := range t.pages {
		if p.n == 0 {
			delete(t.pages, key)
			t.spare = append(t.spare, p)
		}
	}
	t.empty, t.lastPage = 0, nil
}
