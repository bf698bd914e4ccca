package allocators

// CudaSpace is a real GPU as the device (--space cuda[:N]): a reservation
// is a cuMemAlloc and a release a cuMemFree, and pages an allocator maps
// itself (MapAt: PyTorch's expandable segments) are cuMemCreate, cuMemMap
// and cuMemSetAccess in an address range the space reserved
// (cuMemAddressReserve), given back with cuMemUnmap and cuMemRelease. Every
// call is timed: SpaceStats.MeasuredTime is the device time the calls
// took, beside ModeledTime, what the cost model says they would.
//
// It is safe on a shared GPU: it never holds more than its capacity, the
// smaller of the one asked for and the device's free memory when it
// opened, and it asks the driver how much is free before each cuMemAlloc,
// so that a reservation another process's memory leaves no room for fails
// as an out-of-memory for the allocator, without a call. Close gives back
// everything still reserved; the replay closes its spaces however it ends
// (an error, Ctrl-C, a panic).
//
// The driver is loaded at run time (allocators/cudadrv, no cgo), so bfcsim
// builds and its tests run without a GPU.

import (
	"errors"
	"fmt"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/bfcsim/bfcsim/allocators/cudadrv"
	"github.com/bfcsim/bfcsim/allocators/internal/freetree"
)

// CudaGranule is the alignment and size unit of a CudaSpace's
// reservations: cuMemAlloc's guaranteed alignment.
const CudaGranule = 256

// cudaRangeHint is where the space asks for its mapping range, away from
// where the driver puts cuMemAlloc's memory, so that a recording's
// addresses seldom fall inside it.
const cudaRangeHint = 0x6000_0000_0000

// cudaPage is one MapAt: its bytes and the physical memory behind them.
type cudaPage struct {
	size   uint64
	handle cudadrv.Handle
}

// CudaSpace implements Space, and Placer for mapped pages, over a GPU.
type CudaSpace struct {
	drv      cudadrv.Driver
	capacity uint64
	gran     uint64 // the driver's mapping granularity

	// rangeBase and rangeSize are the address range pages are mapped in;
	// free its unmapped parts.
	rangeBase, rangeSize uint64
	free                 freetree.Tree

	segs  map[uint64]uint64   // cuMemAlloc'd: address → bytes
	pages map[uint64]cudaPage // mapped: address → page

	acct    accounting
	latency *hdrhistogram.Histogram // each call's time, in ns
	closed  bool
}

var (
	_ Space   = (*CudaSpace)(nil)
	_ Placer  = (*CudaSpace)(nil)
	_ Toucher = (*CudaSpace)(nil)
)

// NewCudaSpace opens GPU ordinal through open (cudadrv.Open when nil) as a
// space of at most capacity bytes, priced by cost for the model's figures.
func NewCudaSpace(ordinal int, capacity uint64, cost CostModel, open func(int) (cudadrv.Driver, error)) (*CudaSpace, error) {
	if open == nil {
		open = cudadrv.Open
	}
	drv, err := open(ordinal)
	if err != nil {
		return nil, fmt.Errorf("--space cuda:%d: %w", ordinal, err)
	}
	s := &CudaSpace{drv: drv, acct: accounting{cost: cost}, segs: map[uint64]uint64{}, pages: map[uint64]cudaPage{},
		latency: hdrhistogram.New(1, int64(time.Minute), 3)}
	s.acct.stats.Measured = true
	fail := func(err error) (*CudaSpace, error) {
		_ = drv.Close()
		return nil, fmt.Errorf("--space cuda:%d (%s): %w", ordinal, drv.Name(), err)
	}
	free, _, err := drv.MemGetInfo()
	if err != nil {
		return fail(err)
	}
	if s.gran, err = drv.Granularity(); err != nil {
		return fail(err)
	}
	if s.gran == 0 || s.gran&(s.gran-1) != 0 {
		return fail(fmt.Errorf("the driver's granularity, %d bytes, is not a power of two", s.gran))
	}
	s.capacity = min(capacity, free) &^ (CudaGranule - 1)
	if s.capacity == 0 {
		return fail(fmt.Errorf("%w: the device has no free memory", ErrOutOfMemory))
	}
	// Room for a few ranges of the whole capacity, as PyTorch reserves
	// one per expandable segment; addresses cost nothing until mapped.
	s.rangeSize = alignUp(4*(s.capacity+s.capacity/8+64<<20), s.gran)
	if s.rangeBase, err = drv.AddressReserve(s.rangeSize, s.gran, cudaRangeHint); err != nil {
		return fail(fmt.Errorf("reserving %d bytes of addresses to map pages in: %w", s.rangeSize, err))
	}
	if err := s.free.Add(s.rangeBase, s.rangeSize); err != nil {
		panic(err) // an empty tree accepts any range
	}
	return s, nil
}

// timed runs one driver call and counts its time.
func (s *CudaSpace) timed(call func() error) error {
	start := time.Now()
	err := call()
	d := time.Since(start)
	s.acct.stats.MeasuredTime += d
	_ = s.latency.RecordValue(max(d.Nanoseconds(), 1))
	return err
}

// oom says whether err is the driver's out-of-memory.
func oom(err error) bool { return errors.Is(err, cudadrv.ErrOutOfMemory) }

// Reserve is cuMemAlloc of n bytes, if they fit the capacity and the
// device has them free.
func (s *CudaSpace) Reserve(n uint64) (uint64, error) {
	if n == 0 {
		return 0, fmt.Errorf("reserving 0 bytes")
	}
	size := alignUp(n, CudaGranule)
	if s.closed || size < n || s.acct.stats.ReservedBytes+size > s.capacity || !s.deviceHas(size) {
		s.acct.failed()
		return 0, ErrOutOfMemory
	}
	var addr uint64
	err := s.timed(func() (err error) { addr, err = s.drv.MemAlloc(size); return })
	if err != nil {
		s.acct.failed()
		if oom(err) {
			return 0, ErrOutOfMemory
		}
		return 0, fmt.Errorf("%w: %v", ErrOutOfMemory, err)
	}
	s.segs[addr] = size
	s.acct.reserved(size)
	return addr, nil
}

// deviceHas says whether the device has n bytes free now, in whole pages
// (other processes share it): the space never asks for more.
func (s *CudaSpace) deviceHas(n uint64) bool {
	free, _, err := s.drv.MemGetInfo()
	return err == nil && alignUp(n, s.gran) <= free
}

// ReserveAt is refused, and no device call: cuMemAlloc cannot be asked for
// an address. An allocator that follows a recording's addresses places its
// segments where the device puts them instead.
func (s *CudaSpace) ReserveAt(addr, n uint64) error {
	return fmt.Errorf("%w: a GPU's cuMemAlloc cannot be asked for an address", ErrOutOfMemory)
}

// MapAt maps n bytes, whole pages of the driver's granularity (n a
// multiple of it), at addr in the space's range: cuMemCreate, cuMemMap,
// cuMemSetAccess. A part of a page is refused, as the driver refuses it.
func (s *CudaSpace) MapAt(addr, n uint64) error {
	size := n
	if s.closed || n == 0 || n%s.gran != 0 || addr%s.gran != 0 || s.acct.stats.ReservedBytes+size > s.capacity ||
		!s.deviceHas(size) || !s.free.Take(addr, size) {
		s.acct.failed()
		return ErrOutOfMemory
	}
	var h cudadrv.Handle
	err := s.timed(func() (err error) { h, err = s.drv.Create(size); return })
	if err == nil {
		if err = s.timed(func() error { return s.drv.Map(addr, size, h) }); err == nil {
			if err = s.timed(func() error { return s.drv.SetAccess(addr, size) }); err != nil {
				_ = s.timed(func() error { return s.drv.Unmap(addr, size) })
			}
		}
		if err != nil {
			_ = s.timed(func() error { return s.drv.Release(h) })
		}
	}
	if err != nil {
		if e := s.free.Add(addr, size); e != nil {
			panic(fmt.Sprintf("cuda space: giving back the range it just took: %v", e))
		}
		s.acct.failed()
		if oom(err) {
			return ErrOutOfMemory
		}
		return fmt.Errorf("%w: %v", ErrOutOfMemory, err)
	}
	s.pages[addr] = cudaPage{size: size, handle: h}
	s.acct.mapped(size)
	return nil
}

// FindFree returns where MapAt could map n bytes now, in the space's
// range, without mapping them.
func (s *CudaSpace) FindFree(n uint64) (uint64, bool) {
	size := alignUp(n, s.gran)
	if s.closed || n == 0 || size < n || s.acct.stats.ReservedBytes+size > s.capacity {
		return 0, false
	}
	addr, ok := s.free.FirstFit(size)
	if ok {
		if err := s.free.Add(addr, size); err != nil {
			panic(fmt.Sprintf("cuda space: giving back the range it just found: %v", err))
		}
	}
	return addr, ok
}

// Release gives back [addr, addr+n), a run of whole reservations: a
// cuMemFree per cuMemAlloc'd one, a cuMemUnmap and cuMemRelease per mapped
// one.
func (s *CudaSpace) Release(addr, n uint64) error {
	end := addr + alignUp(n, CudaGranule)
	cur := addr
	for n > 0 && cur < end {
		if size, ok := s.segs[cur]; ok {
			cur += size
		} else if p, ok := s.pages[cur]; ok {
			cur += p.size
		} else {
			break
		}
	}
	if s.closed || n == 0 || cur != end {
		return fmt.Errorf("%w: release of [%#x, +%d), which is not a run of whole reservations", ErrNotLive, addr, n)
	}
	var total, mapped uint64
	var handles int
	var errs []error
	for cur = addr; cur < end; {
		size, err := s.give(cur)
		if p, ok := s.pages[cur]; ok {
			mapped += p.size
			handles++
			delete(s.pages, cur)
		} else {
			delete(s.segs, cur)
		}
		errs = append(errs, err)
		total += size
		cur += size
	}
	s.acct.releasedMapped(total, mapped, handles)
	return errors.Join(errs...)
}

// give hands the reservation at addr back to the driver (without
// forgetting it) and returns its size.
func (s *CudaSpace) give(addr uint64) (uint64, error) {
	if size, ok := s.segs[addr]; ok {
		return size, s.timed(func() error { return s.drv.MemFree(addr) })
	}
	p := s.pages[addr]
	err := s.timed(func() error { return s.drv.Unmap(addr, p.size) })
	err = errors.Join(err, s.timed(func() error { return s.drv.Release(p.handle) }))
	if e := s.free.Add(addr, p.size); e != nil {
		panic(fmt.Sprintf("cuda space: mapped range [%#x, +%d) is also free: %v", addr, p.size, e))
	}
	return p.size, err
}

// Close gives back everything still reserved, the address range, and the
// device's context. It is safe to call more than once.
func (s *CudaSpace) Close() error {
	if s.closed {
		return nil
	}
	var errs []error
	for addr := range s.segs {
		_, err := s.give(addr)
		errs = append(errs, err)
	}
	for addr := range s.pages {
		_, err := s.give(addr)
		errs = append(errs, err)
	}
	clear(s.segs)
	clear(s.pages)
	s.acct.stats.ReservedBytes = 0
	errs = append(errs, s.drv.AddressFree(s.rangeBase, s.rangeSize), s.drv.Close())
	s.closed = true
	return errors.Join(errs...)
}

// Granule is 256 bytes, cuMemAlloc's alignment; mapped pages are whole
// pages of the driver's granularity.
func (s *CudaSpace) Granule() uint64 { return CudaGranule }

// Capacity returns the most bytes the space holds at once.
func (s *CudaSpace) Capacity() uint64 { return s.capacity }

// Bounds returns the range pages are mapped in; cuMemAlloc's memory lies
// wherever the driver puts it.
func (s *CudaSpace) Bounds() (uint64, uint64) { return s.rangeBase, s.rangeBase + s.rangeSize }

// Stats returns the space's counters, the measured device time among them.
func (s *CudaSpace) Stats() SpaceStats {
	st := s.acct.stats
	st.Device = s.drv.Name()
	if s.latency.TotalCount() > 0 {
		st.CallP50 = time.Duration(s.latency.ValueAtQuantile(50))
		st.CallP99 = time.Duration(s.latency.ValueAtQuantile(99))
		st.Calls = s.latency.TotalCount()
	}
	return st
}

// Device names the GPU.
func (s *CudaSpace) Device() string { return s.drv.Name() }

// Touch writes [addr, addr+n), inside memory the space reserved or mapped,
// on the device (cuMemsetD8), so that its pages are really there. Its time
// is the allocation's, not a device call's.
func (s *CudaSpace) Touch(addr, n uint64) {
	if n == 0 || s.closed {
		return
	}
	if err := s.drv.Memset(addr, n); err != nil {
		panic(fmt.Sprintf("cuda space: writing [%#x, +%d), which the allocator handed out: %v", addr, n, err))
	}
}
