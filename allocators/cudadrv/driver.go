// Package cudadrv calls the CUDA driver API, the calls a GPU memory
// allocator makes: cuMemAlloc and cuMemFree for whole segments, and the
// virtual-memory calls (address reserve, create, map, set access, unmap,
// release) for an allocator that maps pages into a range it reserved.
//
// The driver library (libcuda.so.1) is loaded at run time, without cgo, so
// that bfcsim builds and tests on machines with no GPU and no CUDA
// toolkit: Open says in one error that there is no driver or no device.
// Fake is a driver in memory that checks every call's arguments and their
// order, for tests.
package cudadrv

import "errors"

// Driver is one GPU's memory calls. A Driver is used by one goroutine at a
// time.
type Driver interface {
	// Name is the device's name ("NVIDIA H100 80GB HBM3").
	Name() string
	// MemGetInfo is cuMemGetInfo: the device's free and total memory.
	MemGetInfo() (free, total uint64, err error)
	// MemAlloc is cuMemAlloc: n bytes of device memory (n > 0).
	MemAlloc(n uint64) (ptr uint64, err error)
	// MemFree is cuMemFree of a pointer MemAlloc returned.
	MemFree(ptr uint64) error
	// Granularity is cuMemGetAllocationGranularity (minimum) for pinned
	// device memory on the device: the unit of Create, Map and
	// AddressReserve sizes and addresses (2 MiB on current GPUs).
	Granularity() (uint64, error)
	// AddressReserve is cuMemAddressReserve: a range of size bytes of
	// virtual addresses, aligned to align, near hint if the driver can
	// (0: anywhere).
	AddressReserve(size, align, hint uint64) (ptr uint64, err error)
	// AddressFree is cuMemAddressFree of a whole range AddressReserve
	// returned, with nothing mapped in it.
	AddressFree(ptr, size uint64) error
	// Create is cuMemCreate: size bytes of physical memory on the device.
	Create(size uint64) (Handle, error)
	// Map is cuMemMap of all of h at ptr, inside a reserved range.
	Map(ptr, size uint64, h Handle) error
	// SetAccess is cuMemSetAccess: read and write for the device, on a
	// mapped range.
	SetAccess(ptr, size uint64) error
	// Unmap is cuMemUnmap of a mapped range.
	Unmap(ptr, size uint64) error
	// Release is cuMemRelease of a handle (its memory is freed once it is
	// unmapped everywhere).
	Release(h Handle) error
	// Memset is cuMemsetD8 of n bytes at ptr to zero: memory allocated
	// or mapped, written so that its pages are really there.
	Memset(ptr, n uint64) error
	// Close releases the device's context. Memory still held is freed
	// with it by the driver; callers give it back first.
	Close() error
}

// Handle is a CUmemGenericAllocationHandle.
type Handle uint64

// The errors of a Driver, to test with errors.Is.
var (
	// ErrNoDriver: libcuda.so.1 could not be loaded (no NVIDIA driver).
	ErrNoDriver = errors.New("no CUDA driver (libcuda.so.1) on this machine")
	// ErrNoDevice: the driver has no such GPU.
	ErrNoDevice = errors.New("no such CUDA device")
	// ErrOutOfMemory: CUDA_ERROR_OUT_OF_MEMORY.
	ErrOutOfMemory = errors.New("CUDA_ERROR_OUT_OF_MEMORY")
)
