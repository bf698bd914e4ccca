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
//   - first-fit (the default): the device is one contiguous range
//     [1<<40, 1<<40+capacity). A reservation fails when no single hole is
//     large enough, even if enough bytes are free in total: the device's own
//     address space fragments.
//   - paged: the device maps physical pages into a virtual range far larger
//     than its memory, as CUDA does, so a reservation fails only when the
//     bytes reserved would exceed the capacity. Addresses are still placed
//     first fit in the virtual range [1<<40, 1<<40+max(capacity, 128 TiB)),
//     so they stay compact and deterministic.
//
// Data structure: the free ranges in an address-ordered treap that keeps each
// subtree's largest range (internal/freetree), and the reservations in a map
// from start to size, so that a release must cover whole reservations, as
// cudaFree and munmap of whole mappings do. Reserve and Release are O(log n)
// in the number of holes.
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
	reservations   map[uint64]uint64 // start → rounded size
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
		reservations: map[uint64]uint64{}, acct: accounting{cost: cost}}
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
	s.reservations[addr] = size
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
	size := alignUp(n, VirtualGranule)
	if n == 0 || size < n || addr%VirtualGranule != 0 ||
		(s.paged && s.acct.stats.ReservedBytes+size > s.capacity) || !s.free.Take(addr, size) {
		s.acct.failed()
		return ErrOutOfMemory
	}
	s.reservations[addr] = size
	s.acct.reserved(size)
	return nil
}

// Release frees [addr, addr+n rounded up to 256), which must be a run of
// whole, adjacent reservations.
func (s *VirtualSpace) Release(addr, n uint64) error {
	size := alignUp(n, VirtualGranule)
	end := addr + size
	cur := addr
	for n > 0 && cur < end {
		sz, ok := s.reservations[cur]
		if !ok {
			break
		}
		cur += sz
	}
	if n == 0 || cur != end {
		return fmt.Errorf("%w: release of [%#x, +%d), which is not a run of whole reservations", ErrNotLive, addr, n)
	}
	for cur = addr; cur < end; {
		sz := s.reservations[cur]
		delete(s.reservations, cur)
		cur += sz
	}
	if err := s.free.Add(addr, size); err != nil {
		panic(fmt.Sprintf("virtual space: reserved range [%#x, +%d) is also free: %v", addr, size, err))
	}
	s.acct.released(size)
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
