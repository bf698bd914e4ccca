package allocators

// Naive is per-request device allocation: every Allocate is its own device
// reservation (cudaMalloc) and every Free a device release (cudaFree). It is
// the baseline a caching allocator exists to beat, and the mode TensorFlow
// users ask for to tell fragmentation OOMs from real ones
// (tensorflow/tensorflow#38120): TF_GPU_ALLOCATOR=cuda_malloc selects
// GPUcudaMallocAllocator (useCudaMallocAllocator in
// tensorflow/core/common_runtime/gpu/gpu_process_state.cc, as at
// tensorflow/tensorflow@7f6e216e92), whose AllocateRaw is one cuMemAlloc and
// DeallocateRaw one cuMemFree (gpu_cudamalloc_allocator.cc beside it, as at
// tensorflow/tensorflow@1f35abe650). With naive, only the device's own
// address-space fragmentation remains.
//
// Allocate: reserve the request rounded up to the space's granule (256 bytes
// on the virtual device, cudaMalloc's alignment; a page on the host). A
// request aligned beyond the granule reserves align-granule extra bytes and
// hands out the first aligned address inside; the offset is kept in the
// block's Handle.
//
// Free: release the whole reservation.
//
// Cost: O(log holes) per call in the virtual space, but every call pays the
// modeled device cost, which is what the report's device time shows.
// Nothing is cached, so the pool never holds free memory: TensorFlow's
// fragmentation metric is always 0 for naive.

// Naive implements Allocator by reserving every block from the space.
type Naive struct {
	space   Space
	granule uint64 // space.Granule(), asked once: it never changes
	tfCounters
}

var (
	_ Allocator           = (*Naive)(nil)
	_ LargestFreeReporter = (*Naive)(nil)
	_ StatsReporter       = (*Naive)(nil)
	_ Extenter            = (*Naive)(nil)
)

// NewNaive returns a Naive allocator over sp.
func NewNaive(sp Space) *Naive { return &Naive{space: sp, granule: sp.Granule()} }

// Allocate reserves one block for this request.
func (a *Naive) Allocate(size, align uint64) (Block, error) {
	g := a.granule
	n := alignUp(size, g)
	if align > g {
		n += align - g
	}
	if n < size {
		return Block{}, ErrOutOfMemory
	}
	base, err := a.space.Reserve(n)
	if err != nil {
		return Block{}, err
	}
	addr := base
	if align > g {
		addr = alignUp(base, align)
	}
	a.allocated(n)
	return Block{Addr: addr, Size: n, Handle: addr - base}, nil
}

// ExtentIsRegion says each block is a reservation of its own.
func (a *Naive) ExtentIsRegion() bool { return true }

// Extent returns the block's reservation: an aligned block starts inside it.
func (a *Naive) Extent(b Block) (addr, size uint64) { return b.Addr - b.Handle, b.Size }

// Free releases the block's reservation.
func (a *Naive) Free(b Block) error {
	if err := a.space.Release(b.Addr-b.Handle, b.Size); err != nil {
		return err
	}
	a.freed(b.Size)
	return nil
}

// Stats returns counters named like TensorFlow's AllocatorStats: every
// allocation is a device reservation, so bytes in use are bytes reserved.
func (a *Naive) Stats() map[string]int64 { return a.stats() }

// LargestFreeBytes is 0: naive holds no free memory.
func (a *Naive) LargestFreeBytes() uint64 { return 0 }
