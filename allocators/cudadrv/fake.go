// Fake keeps what the driver keeps, in plain Go: MemAlloc pointers and
// Create handles in maps, reserved ranges and mappings in slices sorted by
// address. Each call checks its arguments against them before it changes
// anything, so a refused call leaves everything as it was.
//
// A call the driver would refuse because its caller got it wrong (MemFree
// of a pointer never allocated, Map over a mapping, any call after Close)
// is a misuse: it returns the CUDA error the driver would, with the reason,
// and the first is kept for Misuse. Running out of memory, real or made by
// FailAt, is no misuse: it is a failure the caller must handle.
//
// Addresses look like the driver's and never collide: MemAlloc hands out
// granules from allocBase upward, AddressReserve ranges below it. MemAlloc
// pointers and handles are never reused, so freeing one twice is always
// caught. AddressReserve takes the hint if it is aligned and free, else the
// first fit at or above the end of the last reservation, wrapping round to
// reserveBase, as the driver tends to hand out rising addresses.
//
// Where Fake may be stricter than the driver: Map maps a whole handle at
// offset 0, which is all Driver.Map can ask for, and inside one
// reservation.

package cudadrv

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// Where Fake's addresses come from: high in the 47-bit user address
// space, where real device pointers lie.
const (
	reserveBase  = 0x600000000000 // AddressReserve, up to allocBase
	allocBase    = 0x7f0000000000 // MemAlloc, upward
	reserveLimit = allocBase
)

// defaultGran is Fake's granularity unless set: what current NVIDIA GPUs
// report for pinned device memory.
const defaultGran = 2 << 20

// Fake is a Driver in memory for tests of code that calls a Driver. It
// refuses every call the driver would refuse, records every call in
// Calls, and keeps the first misuse for Misuse. Like any Driver it is used
// by one goroutine at a time. The zero Fake has no memory; NewFake gives
// it some.
type Fake struct {
	// DeviceName is what Name returns.
	DeviceName string
	// Total and Free are what MemGetInfo returns, in bytes. MemAlloc and
	// Create take from Free and fail with ErrOutOfMemory where it is
	// short; MemFree, and a handle both released and unmapped, give back.
	Total, Free uint64
	// Gran is what Granularity returns (0: 2 MiB): the unit of Create,
	// Map, SetAccess and AddressReserve, and what MemAlloc rounds sizes
	// up to.
	Gran uint64
	// FailAt, when positive, counts down on each MemAlloc,
	// AddressReserve, Create and Map whose arguments are right; the one
	// that takes it to 0 fails with ErrOutOfMemory and changes nothing.
	// FailAt = 1 fails the next such call, 3 the third from now.
	FailAt int
	// Calls is every call made, in order, Name excepted.
	Calls []Call

	closed      bool
	misuse      error               // the first misuse
	nextAlloc   uint64              // where the next MemAlloc goes
	allocs      map[uint64]uint64   // MemAlloc pointer → bytes taken from Free
	nextHandle  Handle              // the next Create's handle
	handles     map[Handle]*physMem // handles whose memory is not yet freed
	nextReserve uint64              // where AddressReserve looks first
	reserved    []reservation       // sorted by base, disjoint
	mappings    []mapping           // sorted by ptr, disjoint
}

var _ Driver = (*Fake)(nil)

// physMem is the memory behind a handle. It is freed once the handle is
// released and unmapped everywhere.
type physMem struct {
	size     uint64
	maps     int // mappings of it
	released bool
}

// reservation is a range AddressReserve returned.
type reservation struct {
	base, size uint64
	mapped     uint64 // bytes mapped inside it
}

func (r reservation) end() uint64 { return r.base + r.size }

// mapping is a handle mapped at [ptr, ptr+size).
type mapping struct {
	ptr, size uint64
	h         Handle
}

func (m mapping) end() uint64 { return m.ptr + m.size }

// Usage is what a Fake's caller still holds. A caller that gave
// everything back leaves it zero.
type Usage struct {
	Allocs        int    // MemAlloc pointers not freed
	Handles       int    // handles not released, or released but still mapped
	MappedBytes   uint64 // bytes mapped by Map and not unmapped
	ReservedBytes uint64 // bytes reserved by AddressReserve and not freed
}

// NewFake is a Fake named name with total bytes of memory, all free, and
// a granularity of 2 MiB.
func NewFake(name string, total uint64) *Fake {
	return &Fake{DeviceName: name, Total: total, Free: total, Gran: defaultGran}
}

// Live is what the caller still holds.
func (f *Fake) Live() Usage {
	u := Usage{Allocs: len(f.allocs), Handles: len(f.handles)}
	for _, m := range f.mappings {
		u.MappedBytes += m.size
	}
	for _, r := range f.reserved {
		u.ReservedBytes += r.size
	}
	return u
}

// Misuse is the error of the first call the caller got wrong, nil if
// none.
func (f *Fake) Misuse() error { return f.misuse }

func (f *Fake) gran() uint64 {
	if f.Gran == 0 {
		return defaultGran
	}
	return f.Gran
}

// begin records a call and refuses it if f is closed.
func (f *Fake) begin(name string, args ...uint64) (*Call, error) {
	if f.allocs == nil {
		f.nextAlloc = allocBase
		f.allocs = make(map[uint64]uint64)
		f.nextHandle = 1
		f.handles = make(map[Handle]*physMem)
		f.nextReserve = reserveBase
	}
	f.Calls = append(f.Calls, Call{Name: name, Args: args})
	c := &f.Calls[len(f.Calls)-1]
	if f.closed {
		return c, f.refuseAs(c, errInvalidContext, "Driver used after Close")
	}
	return c, nil
}

// refuse fails c as a misuse with CUDA_ERROR_INVALID_VALUE.
func (f *Fake) refuse(c *Call, format string, args ...any) error {
	return f.refuseAs(c, errInvalidValue, fmt.Sprintf(format, args...))
}

func (f *Fake) refuseAs(c *Call, name, why string) error {
	c.Err = &cuError{call: callString(c.Name, c.Args...), name: name, detail: why}
	if f.misuse == nil {
		f.misuse = c.Err
	}
	return c.Err
}

// outOfMemory fails c with CUDA_ERROR_OUT_OF_MEMORY, which is no misuse.
func (f *Fake) outOfMemory(c *Call, format string, args ...any) error {
	c.Err = &cuError{
		call:   callString(c.Name, c.Args...),
		name:   errOutOfMemory,
		is:     ErrOutOfMemory,
		detail: fmt.Sprintf(format, args...),
	}
	return c.Err
}

// injected fails c if FailAt says so.
func (f *Fake) injected(c *Call) error {
	if f.FailAt <= 0 {
		return nil
	}
	f.FailAt--
	if f.FailAt > 0 {
		return nil
	}
	return f.outOfMemory(c, "made to fail by FailAt")
}

// roundUp is n rounded up to a multiple of g; ok is false where that
// overflows.
func roundUp(n, g uint64) (r uint64, ok bool) {
	if n > math.MaxUint64-(g-1) {
		return 0, false
	}
	return (n + g - 1) / g * g, true
}

// badRange says what is wrong with [ptr, ptr+size) as a range of whole
// granules, "" if nothing.
func (f *Fake) badRange(ptr, size uint64) string {
	g := f.gran()
	switch {
	case size == 0:
		return "size 0"
	case ptr%g != 0:
		return fmt.Sprintf("address not a multiple of the granularity %d", g)
	case size%g != 0:
		return fmt.Sprintf("size not a multiple of the granularity %d", g)
	case size > math.MaxUint64-ptr:
		return "range wraps around"
	}
	return ""
}

// reservationAt is the index of the reservation holding ptr, -1 if none.
func (f *Fake) reservationAt(ptr uint64) int {
	i := sort.Search(len(f.reserved), func(i int) bool { return f.reserved[i].end() > ptr })
	if i < len(f.reserved) && f.reserved[i].base <= ptr {
		return i
	}
	return -1
}

// mappingAfter is the index of the first mapping ending above ptr.
func (f *Fake) mappingAfter(ptr uint64) int {
	return sort.Search(len(f.mappings), func(i int) bool { return f.mappings[i].end() > ptr })
}

// mapped is the mappings [i, j) that cover [ptr, ptr+size) with no gap;
// ok is false where some of it is not mapped.
func (f *Fake) mapped(ptr, size uint64) (i, j int, ok bool) {
	i = f.mappingAfter(ptr)
	at, end := ptr, ptr+size
	for j = i; at < end; j++ {
		if j == len(f.mappings) || f.mappings[j].ptr > at {
			return i, j, false
		}
		at = f.mappings[j].end()
	}
	return i, j, true
}

// fit is the lowest address at or above from, aligned to align, where
// size bytes fit below limit clear of every reservation.
func (f *Fake) fit(from, limit, size, align uint64) (uint64, bool) {
	p, _ := roundUp(from, align)
	i := sort.Search(len(f.reserved), func(i int) bool { return f.reserved[i].end() > p })
	for ; i < len(f.reserved) && p < limit; i++ {
		r := f.reserved[i]
		if r.base >= p && size <= r.base-p {
			break
		}
		p, _ = roundUp(r.end(), align)
	}
	return p, p <= limit && size <= limit-p
}

// vacant reports whether [base, base+size) lies in the reserve area and
// touches no reservation.
func (f *Fake) vacant(base, size uint64) bool {
	if base < reserveBase || base > reserveLimit || size > reserveLimit-base {
		return false
	}
	i := sort.Search(len(f.reserved), func(i int) bool { return f.reserved[i].end() > base })
	return i == len(f.reserved) || f.reserved[i].base >= base+size
}

// Name is DeviceName.
func (f *Fake) Name() string { return f.DeviceName }

// MemGetInfo is Free and Total.
func (f *Fake) MemGetInfo() (free, total uint64, err error) {
	c, err := f.begin("cuMemGetInfo")
	if err != nil {
		return 0, 0, err
	}
	c.Ret = f.Free
	return f.Free, f.Total, nil
}

// MemAlloc takes n rounded up to the granularity from Free.
func (f *Fake) MemAlloc(n uint64) (uint64, error) {
	c, err := f.begin("cuMemAlloc", n)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, f.refuse(c, "size 0")
	}
	if err := f.injected(c); err != nil {
		return 0, err
	}
	size, ok := roundUp(n, f.gran())
	if !ok || size > f.Free {
		return 0, f.outOfMemory(c, "%d bytes asked, %d free", n, f.Free)
	}
	ptr := f.nextAlloc
	f.nextAlloc += size
	f.allocs[ptr] = size
	f.Free -= size
	c.Ret = ptr
	return ptr, nil
}

// MemFree gives a MemAlloc pointer's memory back to Free.
func (f *Fake) MemFree(ptr uint64) error {
	c, err := f.begin("cuMemFree", ptr)
	if err != nil {
		return err
	}
	size, ok := f.allocs[ptr]
	if !ok {
		return f.refuse(c, "not a pointer MemAlloc returned, or freed already")
	}
	delete(f.allocs, ptr)
	f.Free += size
	return nil
}

// Memset writes nothing, but checks that [ptr, ptr+n) lies inside one
// MemAlloc'd block or mapped memory.
func (f *Fake) Memset(ptr, n uint64) error {
	c, err := f.begin("cuMemsetD8", ptr, n)
	if err != nil {
		return err
	}
	if n == 0 || ptr+n < ptr {
		return f.refuse(c, "an empty or wrapping range")
	}
	for base, size := range f.allocs {
		if ptr >= base && ptr+n <= base+size {
			return nil
		}
	}
	if _, _, ok := f.mapped(ptr, n); ok {
		return nil
	}
	return f.refuse(c, "not inside memory allocated or mapped")
}

// Granularity is Gran.
func (f *Fake) Granularity() (uint64, error) {
	c, err := f.begin("cuMemGetAllocationGranularity")
	if err != nil {
		return 0, err
	}
	c.Ret = f.gran()
	return c.Ret, nil
}

// AddressReserve reserves size bytes aligned to align (0: the
// granularity), at hint if that is aligned and free.
func (f *Fake) AddressReserve(size, align, hint uint64) (uint64, error) {
	c, err := f.begin("cuMemAddressReserve", size, align, hint)
	if err != nil {
		return 0, err
	}
	g := f.gran()
	switch {
	case size == 0:
		return 0, f.refuse(c, "size 0")
	case size%g != 0:
		return 0, f.refuse(c, "size not a multiple of the granularity %d", g)
	case align%g != 0:
		return 0, f.refuse(c, "alignment not a multiple of the granularity %d", g)
	}
	if err := f.injected(c); err != nil {
		return 0, err
	}
	align = max(align, g)
	base := hint
	if hint == 0 || hint%align != 0 || !f.vacant(hint, size) {
		var ok bool
		base, ok = f.fit(f.nextReserve, reserveLimit, size, align)
		if !ok {
			base, ok = f.fit(reserveBase, reserveLimit, size, align)
		}
		if !ok {
			return 0, f.outOfMemory(c, "no %d bytes of addresses free", size)
		}
	}
	i := sort.Search(len(f.reserved), func(i int) bool { return f.reserved[i].base > base })
	f.reserved = slices.Insert(f.reserved, i, reservation{base: base, size: size})
	f.nextReserve = base + size
	c.Ret = base
	return base, nil
}

// AddressFree frees a whole reserved range with nothing mapped in it.
func (f *Fake) AddressFree(ptr, size uint64) error {
	c, err := f.begin("cuMemAddressFree", ptr, size)
	if err != nil {
		return err
	}
	i := f.reservationAt(ptr)
	if i < 0 || f.reserved[i].base != ptr || f.reserved[i].size != size {
		return f.refuse(c, "not a range AddressReserve returned")
	}
	if m := f.reserved[i].mapped; m > 0 {
		return f.refuse(c, "%d bytes still mapped in it", m)
	}
	f.reserved = slices.Delete(f.reserved, i, i+1)
	return nil
}

// Create takes size bytes from Free behind a new handle.
func (f *Fake) Create(size uint64) (Handle, error) {
	c, err := f.begin("cuMemCreate", size)
	if err != nil {
		return 0, err
	}
	g := f.gran()
	switch {
	case size == 0:
		return 0, f.refuse(c, "size 0")
	case size%g != 0:
		return 0, f.refuse(c, "size not a multiple of the granularity %d", g)
	}
	if err := f.injected(c); err != nil {
		return 0, err
	}
	if size > f.Free {
		return 0, f.outOfMemory(c, "%d bytes asked, %d free", size, f.Free)
	}
	h := f.nextHandle
	f.nextHandle++
	f.handles[h] = &physMem{size: size}
	f.Free -= size
	c.Ret = uint64(h)
	return h, nil
}

// Map maps all of h at ptr, inside one reservation and over no mapping.
func (f *Fake) Map(ptr, size uint64, h Handle) error {
	c, err := f.begin("cuMemMap", ptr, size, uint64(h))
	if err != nil {
		return err
	}
	if why := f.badRange(ptr, size); why != "" {
		return f.refuse(c, "%s", why)
	}
	p, ok := f.handles[h]
	switch {
	case !ok || p.released:
		return f.refuse(c, "handle unknown or released")
	case size != p.size:
		return f.refuse(c, "size is not the handle's %d", p.size)
	}
	r := f.reservationAt(ptr)
	if r < 0 || size > f.reserved[r].end()-ptr {
		return f.refuse(c, "not inside one reserved range")
	}
	i := f.mappingAfter(ptr)
	if i < len(f.mappings) && f.mappings[i].ptr < ptr+size {
		return f.refuse(c, "overlaps the mapping at %#x", f.mappings[i].ptr)
	}
	if err := f.injected(c); err != nil {
		return err
	}
	f.mappings = slices.Insert(f.mappings, i, mapping{ptr: ptr, size: size, h: h})
	f.reserved[r].mapped += size
	p.maps++
	return nil
}

// SetAccess checks that the range is all mapped; access is not modelled.
func (f *Fake) SetAccess(ptr, size uint64) error {
	c, err := f.begin("cuMemSetAccess", ptr, size)
	if err != nil {
		return err
	}
	if why := f.badRange(ptr, size); why != "" {
		return f.refuse(c, "%s", why)
	}
	if _, _, ok := f.mapped(ptr, size); !ok {
		return f.refuse(c, "not all mapped")
	}
	return nil
}

// Unmap unmaps whole mappings that together make up the range exactly, and
// frees the memory of released handles left unmapped.
func (f *Fake) Unmap(ptr, size uint64) error {
	c, err := f.begin("cuMemUnmap", ptr, size)
	if err != nil {
		return err
	}
	if why := f.badRange(ptr, size); why != "" {
		return f.refuse(c, "%s", why)
	}
	i, j, ok := f.mapped(ptr, size)
	switch {
	case !ok:
		return f.refuse(c, "not all mapped")
	case f.mappings[i].ptr != ptr || f.mappings[j-1].end() != ptr+size:
		return f.refuse(c, "cuts a mapping: unmap whole mappings")
	}
	for _, m := range f.mappings[i:j] {
		f.reserved[f.reservationAt(m.ptr)].mapped -= m.size
		p := f.handles[m.h]
		p.maps--
		f.freeIfDone(m.h, p)
	}
	f.mappings = slices.Delete(f.mappings, i, j)
	return nil
}

// Release releases h; its memory is freed now if it is not mapped, else
// at its last Unmap.
func (f *Fake) Release(h Handle) error {
	c, err := f.begin("cuMemRelease", uint64(h))
	if err != nil {
		return err
	}
	p, ok := f.handles[h]
	if !ok || p.released {
		return f.refuse(c, "handle unknown or released already")
	}
	p.released = true
	f.freeIfDone(h, p)
	return nil
}

func (f *Fake) freeIfDone(h Handle, p *physMem) {
	if p.released && p.maps == 0 {
		delete(f.handles, h)
		f.Free += p.size
	}
}

// Close marks f closed: any call but Name and Close after it is a misuse.
// Like the real driver's, a second Close does nothing. What the caller
// still holds stays in Live, to be asserted on.
func (f *Fake) Close() error {
	f.Calls = append(f.Calls, Call{Name: "cuDevicePrimaryCtxRelease"})
	f.closed = true
	return nil
}
