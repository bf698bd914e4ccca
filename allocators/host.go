//go:build unix

package allocators

// HostSpace is a real address space: every reservation is a fresh anonymous
// mmap of host memory and every release an munmap, so allocators hand out
// real pointers and, with touch, pay for real page faults.
//
// Strategy: the kernel chooses addresses; the space only enforces the
// capacity, rounds reservations up to the page size, and remembers each
// mapping so that it can be touched and unmapped. Mappings are made with
// MAP_NORESERVE, so reserving more than the machine's memory succeeds until
// the pages are touched, like a GPU's virtual address space.
//
// Departure from the virtual space: addresses differ from run to run and are
// not 1<<40-based, and adjacent reservations are adjacent only when the
// kernel happens to place them so.

import (
	"fmt"
	"os"

	"github.com/google/btree"
	"golang.org/x/sys/unix"
)

type mapping struct {
	addr uint64
	mem  []byte
}

// HostSpace implements Space over mmap'd host memory.
type HostSpace struct {
	capacity uint64
	page     uint64
	maps     *btree.BTreeG[mapping]
	acct     accounting
}

var (
	_ Space   = (*HostSpace)(nil)
	_ Toucher = (*HostSpace)(nil)
)

// NewHostSpace returns a host space that lets at most capacity bytes
// (rounded down to the page size) be mapped at once. It never writes to
// memory unless Touch is called.
func NewHostSpace(capacity uint64, cost CostModel) (*HostSpace, error) {
	page := uint64(os.Getpagesize())
	return &HostSpace{
		capacity: capacity &^ (page - 1),
		page:     page,
		maps:     btree.NewG(16, func(a, b mapping) bool { return a.addr < b.addr }),
		acct:     accounting{cost: cost},
	}, nil
}

// Reserve maps n bytes rounded up to the page size.
func (s *HostSpace) Reserve(n uint64) (uint64, error) {
	if n == 0 {
		return 0, fmt.Errorf("reserving 0 bytes")
	}
	size := alignUp(n, s.page)
	if size < n || s.acct.stats.ReservedBytes+size > s.capacity || size > 1<<62 {
		s.acct.failed()
		return 0, ErrOutOfMemory
	}
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		s.acct.failed()
		return 0, fmt.Errorf("%w: mmap of %d bytes: %v", ErrOutOfMemory, size, err)
	}
	addr := sliceAddr(mem)
	s.maps.ReplaceOrInsert(mapping{addr: addr, mem: mem})
	s.acct.reserved(size)
	return addr, nil
}

// Release unmaps [addr, addr+n), which must consist of whole mappings.
func (s *HostSpace) Release(addr, n uint64) error {
	end := addr + alignUp(n, s.page)
	var covered []mapping
	next := addr
	s.maps.AscendGreaterOrEqual(mapping{addr: addr}, func(m mapping) bool {
		if m.addr != next || m.addr >= end {
			return false
		}
		covered = append(covered, m)
		next = m.addr + uint64(len(m.mem))
		return next < end
	})
	if n == 0 || next != end {
		return fmt.Errorf("%w: release of [%#x, +%d), which is not a run of whole mappings", ErrNotLive, addr, n)
	}
	for _, m := range covered {
		if err := unix.Munmap(m.mem); err != nil {
			return fmt.Errorf("munmap at %#x: %w", m.addr, err)
		}
		s.maps.Delete(m)
	}
	s.acct.released(end - addr)
	return nil
}

// Touch writes a zero byte in every page of [addr, addr+n).
func (s *HostSpace) Touch(addr, n uint64) {
	for n > 0 {
		var m mapping
		found := false
		s.maps.DescendLessOrEqual(mapping{addr: addr}, func(x mapping) bool {
			m, found = x, true
			return false
		})
		if !found || addr >= m.addr+uint64(len(m.mem)) {
			panic(fmt.Sprintf("allocators: touching %#x, which is not mapped", addr))
		}
		off := addr - m.addr
		stop := min(uint64(len(m.mem)), off+n)
		for p := off; p < stop; p = (p + s.page) &^ (s.page - 1) {
			m.mem[p] = 0
		}
		n -= stop - off
		addr = m.addr + stop
	}
}

// Granule is the page size.
func (s *HostSpace) Granule() uint64 { return s.page }

// Capacity returns the most bytes that may be mapped at once.
func (s *HostSpace) Capacity() uint64 { return s.capacity }

// Bounds returns the whole address range; the kernel picks addresses.
func (s *HostSpace) Bounds() (uint64, uint64) { return 0, ^uint64(0) }

// Stats returns the space's counters.
func (s *HostSpace) Stats() SpaceStats { return s.acct.stats }

// Close unmaps everything still mapped.
func (s *HostSpace) Close() error {
	var first error
	s.maps.Ascend(func(m mapping) bool {
		if err := unix.Munmap(m.mem); err != nil && first == nil {
			first = err
		}
		return true
	})
	s.maps.Clear(false)
	return first
}
