package sim

import (
	"fmt"
	"math"

	"github.com/bfcsim/bfcsim/allocators"
)

// checker verifies an allocator from the outside, trusting nothing it says:
//
//   - every reservation lies inside the space's bounds, on its granule, and
//     overlaps no other; every release covers whole reservations;
//   - the space's reserved-bytes counter equals the sum the checker saw;
//   - every block lies inside reserved memory, overlaps no live block, is at
//     least as large as the request, and honours the requested alignment
//     (up to the allocator's documented limit);
//   - a block is freed at most once;
//   - in-use bytes never exceed reserved bytes, and equal the allocator's
//     own bytes_in_use counter where it keeps one.
//
// The first violation is kept; the engine stops the replay on it.
type checker struct {
	name       string
	base, lim  uint64
	granule    uint64
	capacity   uint64
	reserved   *intervalSet // every reservation the space has handed out
	live       *intervalSet // [Addr, Addr+request) of every live block
	maxAlign   uint64       // 0: alignment is honoured without limit
	violations []string
}

func newChecker(name string, sp allocators.Space) *checker {
	base, lim := sp.Bounds()
	if _, ok := sp.(*allocators.CudaSpace); ok {
		// A GPU's cuMemAlloc puts segments wherever the driver does; only
		// mapped pages lie in the space's range.
		base, lim = 0, math.MaxUint64
	}
	return &checker{
		name: name, base: base, lim: lim, granule: sp.Granule(), capacity: sp.Capacity(),
		reserved: newIntervalSet(), live: newIntervalSet(),
	}
}

func (c *checker) failf(format string, args ...any) {
	if len(c.violations) < 10 {
		c.violations = append(c.violations, fmt.Sprintf(format, args...))
	}
}

// err returns the first violation as an error, or nil.
func (c *checker) err() error {
	if len(c.violations) == 0 {
		return nil
	}
	return fmt.Errorf("invariant violated by %s: %s", c.name, c.violations[0])
}

func (c *checker) reservedRange(addr, n uint64) span {
	return span{addr, addr + (n+c.granule-1)/c.granule*c.granule}
}

func (c *checker) onReserve(addr, n uint64) {
	r := c.reservedRange(addr, n)
	switch {
	case addr%c.granule != 0:
		c.failf("reservation at %#x is not aligned to the %d-byte granule", addr, c.granule)
	case r.start < c.base || r.end > c.lim || r.end < r.start:
		c.failf("reservation %v lies outside the space [%#x, %#x)", r, c.base, c.lim)
	}
	if err := c.reserved.add(r); err != nil {
		c.failf("reservation: %v", err)
	}
	if c.reserved.total > c.capacity {
		c.failf("%d bytes reserved, more than the capacity %d", c.reserved.total, c.capacity)
	}
}

func (c *checker) beforeRelease(addr, n uint64) {
	r := c.reservedRange(addr, n)
	if !c.reserved.coversWhole(r) {
		c.failf("release of %v, which is not a run of whole reservations", r)
		return
	}
	if o, ok := c.live.overlapping(r); ok {
		c.failf("release of %v while live block %v lies in it", r, o)
	}
}

func (c *checker) onRelease(addr, n uint64) {
	if err := c.reserved.remove(c.reservedRange(addr, n)); err != nil {
		c.failf("release: %v", err)
	}
}

func (c *checker) onAlloc(size, align uint64, b allocators.Block) {
	r := span{b.Addr, b.Addr + size}
	if b.Size < size {
		c.failf("block %v for a %d-byte request counts only %d bytes in use", r, size, b.Size)
	}
	if align > 0 {
		want := align
		if c.maxAlign > 0 {
			want = min(want, c.maxAlign)
		}
		if b.Addr%want != 0 {
			c.failf("block at %#x is not aligned to %d", b.Addr, want)
		}
	}
	if r.end < r.start || !c.reserved.covers(r) {
		c.failf("block %v is not inside reserved memory", r)
	}
	if err := c.live.add(r); err != nil {
		c.failf("block %v", err)
	}
}

func (c *checker) onFree(size uint64, b allocators.Block) {
	if err := c.live.remove(span{b.Addr, b.Addr + size}); err != nil {
		c.failf("free of block: %v", err)
	}
}

// accounting compares the engine's in-use bytes with the space and, when
// given, the allocator's own counter.
func (c *checker) accounting(inUse uint64, st allocators.SpaceStats, stats map[string]int64) {
	if st.ReservedBytes != c.reserved.total {
		c.failf("space reports %d bytes reserved, the checker counted %d", st.ReservedBytes, c.reserved.total)
	}
	if inUse > st.ReservedBytes {
		c.failf("%d bytes in use but only %d reserved", inUse, st.ReservedBytes)
	}
	if n, ok := stats["bytes_in_use"]; ok && uint64(n) != inUse {
		c.failf("allocator reports bytes_in_use %d, its blocks add up to %d", n, inUse)
	}
}

// checkedSpace passes every call to the real space and shows it to the checker.
type checkedSpace struct {
	allocators.Space
	c *checker
}

func (s checkedSpace) Reserve(n uint64) (uint64, error) {
	addr, err := s.Space.Reserve(n)
	if err == nil {
		s.c.onReserve(addr, n)
	}
	return addr, err
}

// ReserveAt places a reservation where the allocator asks, if the real
// space can (allocators.Placer).
func (s checkedSpace) ReserveAt(addr, n uint64) error {
	return s.place(addr, n, allocators.Placer.ReserveAt)
}

// MapAt maps pages where the allocator asks, if the real space can.
func (s checkedSpace) MapAt(addr, n uint64) error {
	return s.place(addr, n, allocators.Placer.MapAt)
}

func (s checkedSpace) place(addr, n uint64, how placeFunc) error {
	if err := placeIn(s.Space, addr, n, how); err != nil {
		return err
	}
	s.c.onReserve(addr, n)
	return nil
}

// FindFree says where the space under it would place n bytes, if it can
// (PyTorch's expandable segments ask before reserving page by page).
func (s checkedSpace) FindFree(n uint64) (uint64, bool) {
	if f, ok := s.Space.(interface{ FindFree(uint64) (uint64, bool) }); ok {
		return f.FindFree(n)
	}
	return 0, false
}

func (s checkedSpace) Release(addr, n uint64) error {
	s.c.beforeRelease(addr, n)
	err := s.Space.Release(addr, n)
	if err == nil {
		s.c.onRelease(addr, n)
	}
	return err
}
