package allocators

import (
	"context"
	"errors"

	"github.com/bfcsim/bfcsim/allocators/bfcstate"
	"github.com/bfcsim/bfcsim/trace"
)

// Errors callers branch on.
var (
	// ErrOutOfMemory: the request cannot be served within the space's capacity.
	ErrOutOfMemory = errors.New("out of memory")
	// ErrNotLive: a Free or Release named a block or range that is not held.
	ErrNotLive = errors.New("not a live block")
	// ErrBadOption: an option key or value given with --set is not valid.
	ErrBadOption = errors.New("bad option")
)

// Block is one allocation as an allocator handed it out.
type Block struct {
	// Addr is the first byte the caller may use.
	Addr uint64
	// Size is the bytes the allocator set aside for this request, counted as
	// in use: the request plus rounding and padding. Size >= the request.
	Size uint64
	// Handle is the allocator's private bookkeeping (a chunk index, a table
	// slot); the caller passes it back to Free unchanged.
	Handle uint64
}

// Allocator is an allocation strategy over a Space.
//
// An allocator is driven by one goroutine at a time; it need not be safe for
// concurrent use.
type Allocator interface {
	// Allocate returns a block of at least size bytes whose Addr is a
	// multiple of align, or of the allocator's default alignment when align
	// is 0. size is > 0; align is 0 or a power of two. The caller may use
	// [Addr, Addr+size) until it frees the block.
	//
	// On failure it returns ErrOutOfMemory (possibly wrapped). The allocator
	// stays usable after a failure, but may have changed its pool while
	// trying (grown, shrunk, or garbage-collected it), as real allocators do.
	Allocate(size, align uint64) (Block, error)

	// Free releases b, which must have been returned by this allocator's
	// Allocate and not freed since. Freeing anything else is the caller's
	// error: an allocator that can tell returns ErrNotLive and changes
	// nothing (bfc and aligned always can). Like cudaFree and real arenas,
	// naive and arena cannot tell a stale block from a live one placed at
	// the same address; sim's checker catches such frees before they reach
	// an allocator.
	Free(b Block) error
}

// The optional abilities below are found by type assertion.

// Stepper is an allocator that acts on the trace's step events (the end of a
// training step or an inference run), e.g. an arena that resets.
type Stepper interface {
	// Step is called at every step event, between allocations.
	Step()
}

// LargestFreeReporter is an allocator that knows the largest block it could
// hand out from memory it already holds, without reserving more. It feeds
// TensorFlow's fragmentation metric,
// (free_in_pool - largest_free_block) / free_in_pool.
type LargestFreeReporter interface {
	LargestFreeBytes() uint64
}

// StatsReporter is an allocator with its own counters, named as in its
// reference implementation (for bfc, TensorFlow's AllocatorStats names).
type StatsReporter interface {
	// Stats returns a fresh map the caller owns.
	Stats() map[string]int64
}

// AlignmentLimiter is an allocator that, like its reference, ignores
// requested alignments above a limit: its blocks are aligned to
// min(align, MaxAlign()).
type AlignmentLimiter interface {
	MaxAlign() uint64
}

// Chunk describes one piece of an allocator's pool, for layouts and maps.
type Chunk struct {
	Addr, Size uint64
	Requested  uint64 // bytes the client asked for (in-use chunks)
	InUse      bool
	Bin        int // the free-list bin holding a free chunk, or -1
	Region     int // index of the region (reservation) holding the chunk
}

// Checkpointer is a Snapshotter that can save its pool cheaply, again and
// again, and describe the last saved state later: the replay saves it at
// every rise of the peak and describes it once, at the end.
type Checkpointer interface {
	Snapshotter
	Checkpoint()
	CheckpointSnapshot() *bfcstate.Snapshot
}

// ChunkWalker is an allocator that can list its pool chunk by chunk.
type ChunkWalker interface {
	// WalkChunks calls fn for every chunk in address order. fn must not
	// call back into the allocator.
	WalkChunks(fn func(Chunk))
}

// StreamAllocator is an allocator whose pools are per CUDA stream, as
// PyTorch's caching allocator's are: a block freed on one stream is reused
// only by requests on the same stream.
type StreamAllocator interface {
	// AllocateOnStream is Allocate for a request made on stream. The
	// engine calls it instead of Allocate for every alloc event; events
	// without a stream come with stream 0.
	AllocateOnStream(size, align uint64, stream int64) (Block, error)
}

// SegmentObserver is an allocator that can take over the device segments a
// recorded program held: the engine shows it every reserve and release
// event of the trace (docs/trace-format.md), in order, before the events after them.
// What it does with them is its own (PyTorch's caching allocator adopts
// them as its segments); the events change nothing for other allocators.
type SegmentObserver interface {
	RecordedReserve(addr, size uint64, stream int64)
	// RecordedRelease is a release of [addr, addr+size), or of the whole
	// reservation at addr when size is 0.
	RecordedRelease(addr, size uint64)
}

// Replayer is an allocator that can be put into the state a recorded
// program was in when its recording started. A trace imported from such a
// recording opens with that state: the segments the program held
// (reserve events) and the allocations live in them (alloc events with the
// recorded address), between a mark named StartStateMark and one named
// RecordingStartsMark. The engine shows the allocator every mark, and
// gives it each alloc event's recorded address.
type Replayer interface {
	// Mark is called for every mark event, with its name.
	Mark(name string)
	// AllocateAt is AllocateOnStream for an alloc event that carries the
	// address the recorded program received. Inside the start state the
	// allocator may place the block there; outside it, addr must not
	// steer the allocator (it is what the replay is compared with).
	AllocateAt(size, align uint64, stream int64, addr uint64) (Block, error)
}

// The marks that delimit a recorded program's start state (see Replayer),
// as the importers write them.
const (
	StartStateMark      = trace.StartStateMark
	RecordingStartsMark = trace.RecordingStartsMark
)

// RecordedOOMMark begins the name of a mark that says the recorded program
// failed the allocation that follows (trace.RecordedOOMMark: the trace
// package and this one do not import each other). A Replayer sees it
// through Mark.
const RecordedOOMMark = "oom:"

// DecisionFollower is an allocator that can follow the segment decisions a
// recording carries (SegmentObserver) while they are the ones it would
// make itself, and decide alone from the first that is not.
type DecisionFollower interface {
	// Following reports whether it still follows them. It is cheap: the
	// replay asks after every event, to note where it stopped.
	Following() bool
	// Decisions says what it did with them, and why it stopped.
	Decisions() Decisions
}

// RangeObserver is an allocator that can take a recording's expandable
// address ranges (header expandable_ranges): the range of each pool and
// stream starts at addr.
type RangeObserver interface {
	RecordedRange(addr uint64, small bool, stream int64)
}

// Extenter is an allocator whose blocks do not begin at the bytes set aside
// for them: padding or a header comes before Block.Addr.
type Extenter interface {
	// Extent returns the bytes set aside for the live block b,
	// [addr, addr+size); size is b.Size.
	Extent(b Block) (addr, size uint64)
}

// RegionJoiner is an allocator that takes reservations that touch as one
// range of memory, whose free bytes run across them: PyTorch's expandable
// segments (one segment mapped page by page), BFC with coalescing_regions.
// Reports of what an allocator's reservations hold (sim.PeakHeld) ask it.
type RegionJoiner interface {
	JoinsRegions() bool
}

// ExtentIsRegion is an allocator each of whose live blocks is a
// reservation of its own, its extent (Extenter) exactly: naive, and
// aligned over naive. What its reservations hold follows from its blocks,
// with no need to follow the space's calls (sim.PeakHeld).
type ExtentIsRegion interface {
	ExtentIsRegion() bool
}

// Snapshotter is an allocator that can describe its whole state the way
// TensorFlow's BFC dumps it (DumpMemoryLog, MemoryDump), for OOM
// diagnostics and memory dumps.
type Snapshotter interface {
	// Snapshot returns a fresh description the caller owns. When the
	// latest Allocate failed, its Request names the failed request.
	Snapshot() *bfcstate.Snapshot
}

// tfCounters are the core of TensorFlow's AllocatorStats, which bfc and naive
// keep under the same names: allocations served, bytes in use (block sizes,
// not requests), their peak, and the largest block.
type tfCounters struct {
	numAllocs, bytesInUse, peakBytesInUse, largestAlloc int64
}

func (c *tfCounters) allocated(size uint64) {
	c.numAllocs++
	c.bytesInUse += int64(size)
	c.peakBytesInUse = max(c.peakBytesInUse, c.bytesInUse)
	c.largestAlloc = max(c.largestAlloc, int64(size))
}

func (c *tfCounters) freed(size uint64) { c.bytesInUse -= int64(size) }

// stats returns the counters as a map, under TensorFlow's names.
func (c *tfCounters) stats() map[string]int64 {
	return map[string]int64{
		"num_allocs":         c.numAllocs,
		"bytes_in_use":       c.bytesInUse,
		"peak_bytes_in_use":  c.peakBytesInUse,
		"largest_alloc_size": c.largestAlloc,
	}
}

// Lifetime is one allocation of a trace as an offline planner sees it: its
// size and the events between which it is live, [Start, End).
type Lifetime struct {
	// Size is the requested size in bytes, > 0.
	Size uint64
	// Align is the requested alignment, a power of two, or 0 for the
	// allocator's default.
	Align uint64
	// Start is the 0-based index, among the trace's events, of the alloc;
	// End is the index of its free, or the trace's event count if it is
	// never freed. Start < End.
	Start, End int64
}

// Planner is an allocator that plans offline: it sees every allocation of
// the trace, with its lifetime, before the first one is made.
type Planner interface {
	// Plan is called once, before any Allocate, with every allocation of
	// the trace that has a size > 0, in trace order (sorted by Start). The
	// Allocate calls then arrive in the same order, one per element, each
	// asking for its Size and Align; an allocation that fails gets no
	// Free. Fewer calls may come (a replay that stops at an out-of-memory
	// failure), never others. allocs stays the caller's: Plan copies what
	// it needs. An error means the lifetimes are inconsistent (a size of 0,
	// End <= Start, not sorted by Start) or cannot be planned; the
	// allocator is then unusable. Planning may be long (quadratic in the
	// worst case); it stops with ctx's error soon after ctx is done.
	Plan(ctx context.Context, allocs []Lifetime) error
}
