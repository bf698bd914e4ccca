// Package allocators owns the Allocator and Space interfaces and every
// allocation strategy bfcsim models.
//
// Vocabulary:
//
//   - A Space is a device address space (cudaMalloc/cudaFree, or mmap/munmap):
//     allocators Reserve large ranges from it and Release them. VirtualSpace
//     simulates a device at [1<<40, 1<<40+capacity); HostSpace maps real
//     memory. Every Space counts its calls and prices them with a CostModel.
//   - An Allocator serves the trace's requests from memory it reserves:
//     Allocate(size, align) returns a Block, Free(Block) gives it back.
//   - A Block's Size is what the request costs in use (request + rounding +
//     padding); Addr is the first usable byte; Handle is the allocator's own.
//   - Reserved bytes are what an allocator holds from its Space, whether in
//     use or not: its footprint.
//
// Extra abilities are small interfaces found by type assertion: Stepper (acts
// on step events), LargestFreeReporter (feeds TensorFlow's fragmentation
// metric), StatsReporter (the reference's own counters), AlignmentLimiter,
// ChunkWalker and Snapshotter (describe the pool), Extenter (where a block's
// bytes really lie), StreamAllocator (per-stream pools), SegmentObserver and
// Replayer (take over a recorded program's segments and start state), and
// Planner (sees every allocation before the first). A Space may be a Placer
// (reserves where it is asked) or a Toucher (real memory).
//
// Allocators are built by name from one table (Factories, New) with their
// options given as text (--set NAME.KEY=VALUE). The strategies:
//
//	bfc      TensorFlow's best-fit with coalescing (bfc.go)
//	arena    bump-pointer arena (arena.go)
//	aligned  TBB cache-aligned allocation over a base allocator (aligned.go)
//	naive    one device reservation per allocation (naive.go)
//	pytorch  PyTorch's CUDA caching allocator (pytorch.go)
//	planner  offline greedy-by-size placement, the near-optimal yardstick (planner.go)
//
// Each file opens with its design: strategy, data structures, the allocate
// and free paths, costs, and where it departs from its reference.
//
// Beside the strategies: the spaces (virtual.go, host.go, cuda.go over the
// driver binding in cudadrv), Calibrate, which fits the virtual device's
// cost model to a real GPU's calls (calibrate.go), bfcstate, the BFC pool's
// state that bfc describes itself as, and internal/, the trees the
// strategies search.
package allocators
