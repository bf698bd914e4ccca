package bfcstate

// Snapshot is the state of a BFC pool at one moment: what TensorFlow's
// DumpMemoryLog prints and RecordMemoryMap records. bfcsim's bfc allocator
// produces one on demand (allocators.Snapshotter); the diagnosis layer
// (diagnose/bfcdump) rebuilds one from a TensorFlow MemoryDump or OOM log,
// with what the log printed beside it.
//
// Fields a source does not carry are zero: a MemoryDump has no regions, no
// memory limit and no pool size; a log has no requested size per chunk.
type Snapshot struct {
	// AllocatorName is TF's allocator name ("GPU_0_bfc") or bfcsim's ("bfc").
	AllocatorName string

	// Regions are the pool's reservations in address order. Empty when the
	// source does not say (a MemoryDump): bfcdump then infers them from
	// gaps between chunks.
	Regions []Region

	// Chunks are every chunk of every region, in address order.
	Chunks []Chunk

	Stats Stats

	// Request is the allocation that failed, for a snapshot taken at an
	// out-of-memory; nil otherwise.
	Request *Request

	// Event and Line locate the snapshot in a replayed trace: the event's
	// index (0-based) and its line in the trace file. Both 0 when unknown.
	Event int64
	Line  int64
}

// Region is one reservation from the device, [Addr, Addr+Size).
type Region struct {
	Addr, Size uint64
}

// Chunk is one piece of a region. In-use chunks were handed out whole;
// free chunks sit in a bin.
type Chunk struct {
	Addr uint64
	Size uint64
	// Requested is the bytes the client asked for. TF leaves it stale once
	// the chunk is free; 0 when unknown (a log does not print it).
	Requested uint64
	InUse     bool
	// Bin is the bin holding a free chunk, or -1 for an in-use chunk (as
	// MemChunk.bin in a MemoryDump).
	Bin int
	// Debug fields TensorFlow fills only under TENSORFLOW_MEM_DEBUG or with
	// a timing counter; kept so that a dump round-trips.
	OpName       string
	StepID       uint64
	ActionCount  uint64
	FreedAtCount uint64
}

// Stats are TensorFlow's AllocatorStats as a snapshot carries them, plus the
// pool figures DumpMemoryLog prints. A zero field is unknown unless the
// source carries it.
type Stats struct {
	NumAllocs        int64
	BytesInUse       int64
	PeakBytesInUse   int64
	LargestAllocSize int64
	// Fragmentation is TF's metric, (free in pool − largest free chunk) /
	// free in pool, as recorded (MemAllocatorStats.fragmentation_metric).
	Fragmentation float64

	// BytesLimit is the memory limit (TF's memory_limit_); 0 when unknown.
	BytesLimit int64
	// PoolBytes is the bytes reserved from the device; 0 when unknown,
	// in which case the regions' or chunks' total stands in.
	PoolBytes int64
	// CurrRegionAllocationBytes is the next region's target size; 0 when
	// unknown.
	CurrRegionAllocationBytes int64
}

// Request is an allocation the allocator could not serve.
type Request struct {
	Bytes   uint64 // as asked
	Rounded uint64 // rounded up to 256 bytes
	Op      string // the op that asked, when known
}
