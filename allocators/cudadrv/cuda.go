//go:build linux && (amd64 || arm64)

// The real driver. libcuda.so.1 is loaded with purego, which calls C
// without cgo, so this file builds with CGO_ENABLED=0 and on machines with
// no CUDA toolkit.
//
// The driver keeps the current context per OS thread, and goroutines move
// between threads: every call locks its goroutine to the thread, makes the
// device's primary context current there, makes the call, and unlocks.
// cuCtxSetCurrent of the context already current costs little.
//
// Memory handed to C holds no Go pointers (plain structs and uint64s) and
// is kept alive past the call, since purego passes it as a bare address.

package cudadrv

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// CUresult values the errors branch on.
const (
	cudaSuccess            = 0
	cudaErrorOutOfMemory   = 2
	cudaErrorStubLibrary   = 34 // libcuda.so.1 is the toolkit's stub, not a driver
	cudaErrorNoDevice      = 100
	cudaErrorInvalidDevice = 101
)

// Constants of the virtual-memory calls, from cuda.h.
const (
	memAllocationTypePinned = 1 // CU_MEM_ALLOCATION_TYPE_PINNED
	memLocationTypeDevice   = 1 // CU_MEM_LOCATION_TYPE_DEVICE
	memAccessProtReadWrite  = 3 // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
	allocGranularityMinimum = 0 // CU_MEM_ALLOC_GRANULARITY_MINIMUM
)

// memLocation is CUmemLocation: 8 bytes.
type memLocation struct {
	typ int32 // CUmemLocationType
	id  int32 // the CUdevice, for CU_MEM_LOCATION_TYPE_DEVICE
}

// allocProp is CUmemAllocationProp on 64-bit platforms: 32 bytes, the
// pointer at offset 16. Fields not set here must be zero.
type allocProp struct {
	typ                  int32 // CUmemAllocationType
	requestedHandleTypes int32 // CUmemAllocationHandleType: none
	location             memLocation
	win32HandleMetaData  uint64 // void*, always NULL off Windows
	compressionType      uint8  // allocFlags from here on
	gpuDirectRDMACapable uint8
	usage                uint16
	reserved             [4]uint8
}

// accessDesc is CUmemAccessDesc: 12 bytes.
type accessDesc struct {
	location memLocation
	flags    int32 // CUmemAccess_flags
}

// api is libcuda's functions in Go types: size_t, CUdeviceptr and
// CUmemGenericAllocationHandle are uint64; CUdevice and CUresult int32.
type api struct {
	init                        func(flags uint32) int32
	deviceGetCount              func(n *int32) int32
	deviceGet                   func(dev *int32, ordinal int32) int32
	deviceGetName               func(name *byte, n int32, dev int32) int32
	devicePrimaryCtxRetain      func(ctx *uintptr, dev int32) int32
	devicePrimaryCtxRelease     func(dev int32) int32
	ctxSetCurrent               func(ctx uintptr) int32
	memGetInfo                  func(free, total *uint64) int32
	memAlloc                    func(ptr *uint64, size uint64) int32
	memFree                     func(ptr uint64) int32
	memGetAllocationGranularity func(g *uint64, prop *allocProp, option int32) int32
	memAddressReserve           func(ptr *uint64, size, align, addr, flags uint64) int32
	memAddressFree              func(ptr, size uint64) int32
	memCreate                   func(h *uint64, size uint64, prop *allocProp, flags uint64) int32
	memMap                      func(ptr, size, offset, h, flags uint64) int32
	memSetAccess                func(ptr, size uint64, desc *accessDesc, count uint64) int32
	memUnmap                    func(ptr, size uint64) int32
	memRelease                  func(h uint64) int32
	memsetD8                    func(ptr uint64, value uint8, n uint64) int32
	getErrorName                func(r int32, name **byte) int32
}

// loadAPI loads libcuda.so.1 once per process. It is never unloaded: the
// driver does not support being unloaded while contexts exist.
var loadAPI = sync.OnceValues(func() (*api, error) {
	lib, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoDriver, err)
	}
	a := new(api)
	// The _v2 names are the ones cuda.h's macros select; the bare
	// names are the old 32-bit-size ABI.
	syms := []struct {
		fn   any
		name string
	}{
		{&a.init, "cuInit"},
		{&a.deviceGetCount, "cuDeviceGetCount"},
		{&a.deviceGet, "cuDeviceGet"},
		{&a.deviceGetName, "cuDeviceGetName"},
		{&a.devicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
		{&a.devicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
		{&a.ctxSetCurrent, "cuCtxSetCurrent"},
		{&a.memGetInfo, "cuMemGetInfo_v2"},
		{&a.memAlloc, "cuMemAlloc_v2"},
		{&a.memFree, "cuMemFree_v2"},
		{&a.memGetAllocationGranularity, "cuMemGetAllocationGranularity"},
		{&a.memAddressReserve, "cuMemAddressReserve"},
		{&a.memAddressFree, "cuMemAddressFree"},
		{&a.memCreate, "cuMemCreate"},
		{&a.memMap, "cuMemMap"},
		{&a.memSetAccess, "cuMemSetAccess"},
		{&a.memUnmap, "cuMemUnmap"},
		{&a.memRelease, "cuMemRelease"},
		{&a.memsetD8, "cuMemsetD8_v2"},
		{&a.getErrorName, "cuGetErrorName"},
	}
	for _, s := range syms {
		// Dlsym and RegisterFunc rather than RegisterLibFunc, which
		// panics on a driver too old to have the call.
		sym, err := purego.Dlsym(lib, s.name)
		if err != nil {
			return nil, fmt.Errorf("%w: libcuda.so.1 has no %s (driver too old)", ErrNoDriver, s.name)
		}
		purego.RegisterFunc(s.fn, sym)
	}
	return a, nil
})

// err is the error of call name(args) that returned r.
func (a *api) err(r int32, name string, args ...uint64) error {
	e := &cuError{call: callString(name, args...), name: a.errorName(r)}
	switch r {
	case cudaErrorOutOfMemory:
		e.is = ErrOutOfMemory
	case cudaErrorNoDevice, cudaErrorInvalidDevice:
		e.is = ErrNoDevice
	case cudaErrorStubLibrary:
		e.is = ErrNoDriver
	}
	return e
}

// errorName is cuGetErrorName: "CUDA_ERROR_INVALID_VALUE".
func (a *api) errorName(r int32) string {
	var p *byte // a static string in libcuda
	if a.getErrorName(r, &p) != cudaSuccess || p == nil {
		return fmt.Sprintf("CUresult(%d)", r)
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// libcuda is the Driver for one GPU through libcuda.so.1.
type libcuda struct {
	api    *api
	dev    int32   // CUdevice
	ctx    uintptr // CUcontext: the device's primary context
	name   string
	closed bool
}

var _ Driver = (*libcuda)(nil)

// Open loads the NVIDIA driver and retains the primary context of the GPU
// numbered ordinal (0 is the first). Its errors wrap ErrNoDriver where
// there is no usable driver and ErrNoDevice where there is no such GPU.
// The caller closes the Driver.
func Open(ordinal int) (Driver, error) {
	a, err := loadAPI()
	if err != nil {
		return nil, err
	}
	if r := a.init(0); r != cudaSuccess {
		return nil, a.err(r, "cuInit", 0)
	}
	var n int32
	if r := a.deviceGetCount(&n); r != cudaSuccess {
		return nil, a.err(r, "cuDeviceGetCount")
	}
	if ordinal < 0 || ordinal >= int(n) {
		return nil, fmt.Errorf("CUDA device %d: %w (the driver has %d)", ordinal, ErrNoDevice, n)
	}
	d := &libcuda{api: a}
	if r := a.deviceGet(&d.dev, int32(ordinal)); r != cudaSuccess {
		return nil, a.err(r, "cuDeviceGet", uint64(ordinal))
	}
	var name [256]byte
	if r := a.deviceGetName(&name[0], int32(len(name)), d.dev); r != cudaSuccess {
		return nil, a.err(r, "cuDeviceGetName", uint64(d.dev))
	}
	if i := bytes.IndexByte(name[:], 0); i >= 0 {
		d.name = string(name[:i])
	}
	if r := a.devicePrimaryCtxRetain(&d.ctx, d.dev); r != cudaSuccess {
		return nil, a.err(r, "cuDevicePrimaryCtxRetain", uint64(d.dev))
	}
	return d, nil
}

// do runs call, the C call name(args), on this thread with d's context
// current.
func (d *libcuda) do(call func() int32, name string, args ...uint64) error {
	if d.closed {
		return &cuError{call: callString(name, args...), name: errInvalidContext, detail: "Driver used after Close"}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := d.api.ctxSetCurrent(d.ctx); r != cudaSuccess {
		return d.api.err(r, "cuCtxSetCurrent", uint64(d.ctx))
	}
	if r := call(); r != cudaSuccess {
		return d.api.err(r, name, args...)
	}
	return nil
}

// prop is the allocation d's virtual-memory calls ask for: pinned memory
// on the device, exported to no other process.
func (d *libcuda) prop() allocProp {
	return allocProp{
		typ:      memAllocationTypePinned,
		location: memLocation{typ: memLocationTypeDevice, id: d.dev},
	}
}

func (d *libcuda) Name() string { return d.name }

func (d *libcuda) MemGetInfo() (free, total uint64, err error) {
	err = d.do(func() int32 { return d.api.memGetInfo(&free, &total) }, "cuMemGetInfo")
	if err != nil {
		return 0, 0, err
	}
	return free, total, nil
}

func (d *libcuda) MemAlloc(n uint64) (uint64, error) {
	var p uint64
	if err := d.do(func() int32 { return d.api.memAlloc(&p, n) }, "cuMemAlloc", n); err != nil {
		return 0, err
	}
	return p, nil
}

func (d *libcuda) MemFree(ptr uint64) error {
	return d.do(func() int32 { return d.api.memFree(ptr) }, "cuMemFree", ptr)
}

func (d *libcuda) Memset(ptr, n uint64) error {
	return d.do(func() int32 { return d.api.memsetD8(ptr, 0, n) }, "cuMemsetD8", ptr, n)
}

func (d *libcuda) Granularity() (uint64, error) {
	prop := d.prop()
	var g uint64
	err := d.do(func() int32 {
		r := d.api.memGetAllocationGranularity(&g, &prop, allocGranularityMinimum)
		runtime.KeepAlive(&prop)
		return r
	}, "cuMemGetAllocationGranularity")
	if err != nil {
		return 0, err
	}
	return g, nil
}

func (d *libcuda) AddressReserve(size, align, hint uint64) (uint64, error) {
	var p uint64
	err := d.do(func() int32 { return d.api.memAddressReserve(&p, size, align, hint, 0) },
		"cuMemAddressReserve", size, align, hint)
	if err != nil {
		return 0, err
	}
	return p, nil
}

func (d *libcuda) AddressFree(ptr, size uint64) error {
	return d.do(func() int32 { return d.api.memAddressFree(ptr, size) }, "cuMemAddressFree", ptr, size)
}

func (d *libcuda) Create(size uint64) (Handle, error) {
	prop := d.prop()
	var h uint64
	err := d.do(func() int32 {
		r := d.api.memCreate(&h, size, &prop, 0)
		runtime.KeepAlive(&prop)
		return r
	}, "cuMemCreate", size)
	if err != nil {
		return 0, err
	}
	return Handle(h), nil
}

func (d *libcuda) Map(ptr, size uint64, h Handle) error {
	return d.do(func() int32 { return d.api.memMap(ptr, size, 0, uint64(h), 0) },
		"cuMemMap", ptr, size, uint64(h))
}

func (d *libcuda) SetAccess(ptr, size uint64) error {
	desc := accessDesc{
		location: memLocation{typ: memLocationTypeDevice, id: d.dev},
		flags:    memAccessProtReadWrite,
	}
	return d.do(func() int32 {
		r := d.api.memSetAccess(ptr, size, &desc, 1)
		runtime.KeepAlive(&desc)
		return r
	}, "cuMemSetAccess", ptr, size)
}

func (d *libcuda) Unmap(ptr, size uint64) error {
	return d.do(func() int32 { return d.api.memUnmap(ptr, size) }, "cuMemUnmap", ptr, size)
}

func (d *libcuda) Release(h Handle) error {
	return d.do(func() int32 { return d.api.memRelease(uint64(h)) }, "cuMemRelease", uint64(h))
}

// Close releases the primary context once; later calls return nil.
func (d *libcuda) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	if r := d.api.devicePrimaryCtxRelease(d.dev); r != cudaSuccess {
		return d.api.err(r, "cuDevicePrimaryCtxRelease", uint64(d.dev))
	}
	return nil
}
