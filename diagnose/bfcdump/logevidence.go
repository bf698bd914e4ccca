package bfcdump

// LogEvidence is what a TensorFlow OOM log printed about the pool besides
// its chunk lines: the headline, the bin lines, the "Bin for" block, the
// in-use summary, the pool line and the Stats block, each figure with the
// line it was read from. ParseLog fills it in Snapshot.Log; a snapshot from
// a MemoryDump or from bfcsim's own allocator has none.
//
// TensorFlow computes these figures over the whole pool, so they stay right
// when a paste loses chunk lines; the chunk list does not. Reconcile ranks
// them above the chunk list and says where the two disagree.
type LogEvidence struct {
	// Lines is the number of lines read.
	Lines int
	// Formats are the line formats recognised, in the order first seen.
	Formats []FormatSeen

	// HeadlineLine is the line of the out-of-memory headline; 0 when the
	// paste has none. HeadlineRounded says whether it carried TF's exact
	// "(rounded to N)"; otherwise the request is TF's human-readable size.
	HeadlineLine    int
	HeadlineRounded bool
	// DumpForLine is the line of "BFCAllocator dump for NAME"; 0 if none.
	DumpForLine int

	// Bins are the bin lines, by line order. BinsFreeOnly says that they
	// are of the older form, which counts only the free chunks in each bin
	// (so "Chunks in use" is always 0); the newer form counts every chunk
	// of the bin's sizes, in use or free.
	Bins         []PrintedBin
	BinsFreeOnly bool

	// BinFor is the "Bin for X was Y, Chunk State:" block; nil if absent.
	BinFor *BinFor

	// BySize are the "N Chunks of size S totalling X" lines, and SumTotal
	// the "Sum Total of in-use chunks: X" line.
	BySize   []SizeCount
	SumTotal Fig

	// From the pool line "Total bytes in pool: P memory_limit_: L available
	// bytes: A curr_region_allocation_bytes_: C" (or newer XLA's "Allocator
	// memory summary" and "next region allocation target", approximately).
	Pool, PoolLimit, NextRegion Fig
	// LargestUsable is newer XLA's "largest free chunk usable by lower end".
	LargestUsable Fig

	// The Stats block (AllocatorStats::DebugString), one line or several.
	StatsLine                                       int
	Limit, InUse, MaxInUse, NumAllocs, MaxAllocSize Fig
	LargestFreeBlock                                Fig

	// RegionHeaders counts "Next region of size N" lines; ChunkLines the
	// chunk lines; RegionEnds the chunk lines whose next handle is TF's
	// kInvalidChunkHandle (the last chunk of a region).
	RegionHeaders, ChunkLines, RegionEnds int
	// InUseChunkLines and FreeChunkLines split ChunkLines.
	InUseChunkLines, FreeChunkLines int
	// FirstChunkLine and LastChunkLine bound the chunk lines; 0 if none.
	FirstChunkLine, LastChunkLine int
	// ChunkAtAll says the chunk lines are TF 0.6–0.7's, which print every
	// chunk, free ones too, as "Chunk at": ParseLog marks them all in use,
	// as TF's own in-use summary counts them.
	ChunkAtAll bool
	// Damage says where the paste mixes dumps or lost a region header, as
	// ParseLog found and worked around it.
	Damage []string
	// Skipped says which lines looked like chunk lines but could not be
	// read, and why.
	Skipped []string
}

// Fig is one figure a log printed. Exact is false for TensorFlow's
// human-readable sizes ("1.50MiB"), which keep three significant digits.
// Line is where it was read; 0 means the paste does not print it.
type Fig struct {
	V     uint64
	Exact bool
	Line  int
	// tol is how far V may be from the exact figure when it sums several
	// of TF's rounded figures; 0 means one figure's rounding.
	tol uint64
}

// Known reports whether the log printed the figure.
func (f Fig) Known() bool { return f.Line > 0 }

// set keeps the better of f and g: a printed figure over none, an exact
// one over an approximate one.
func (f *Fig) set(g Fig) {
	if !f.Known() || (g.Exact && !f.Exact) {
		*f = g
	}
}

// PrintedBin is one bin line: "Bin (256): \tTotal Chunks: 1, Chunks in
// use: 1. 256B allocated for chunks. 256B in use in bin. 156B
// client-requested in use in bin." Byte figures are human-readable, so
// approximate; the counts are exact. TensorFlow counts the bin over the
// whole pool, so a bin line outranks the chunk lines of that bin's sizes,
// which a partial paste may lack.
type PrintedBin struct {
	Bin            int
	Total, InUse   int64
	BytesInBin     Fig
	BytesInUse     Fig
	RequestedInUse Fig
	Line           int
}

// BinFor is DumpMemoryLog's "Bin for X was Y, Chunk State:" block: the
// (rounded) request X, the bin size Y it maps to, and one line per free
// chunk TensorFlow held in that bin.
type BinFor struct {
	Request Fig
	BinSize Fig
	Line    int
	Chunks  []StateChunk
}

// StateChunk is one chunk under "Chunk State:", as Chunk::DebugString
// prints it: "  Size: 1.00MiB | Requested Size: 0B | in_use: 0 | bin_num:
// 12, prev: ..., next: ...", on the lines after "Bin for" or on that line
// itself. Only the chunk itself is kept, not its neighbours. TensorFlow
// lists the free chunks of the request's bin, so a free one bounds the
// largest free chunk from below.
type StateChunk struct {
	Size, Requested Fig
	InUse           bool
	Line            int
}

// SizeCount is one "N Chunks of size S totalling X" line.
type SizeCount struct {
	Count int64
	Size  uint64
	Line  int
}

// FormatSeen names one line format recognised in a log: what the lines
// are (Kind), the form (Form, one line of it in TensorFlow's words), the
// TensorFlow versions that printed it, and the first line of it.
type FormatSeen struct {
	Kind     string `json:"kind"`
	Form     string `json:"form"`
	Versions string `json:"tf_versions"`
	Line     int    `json:"line"`
}

// The line formats ParseLog knows, as DumpMemoryLog and BFCAllocator's
// AllocateRaw printed them over TensorFlow's history, with the releases that
// printed each (bracketed by the TensorFlow sources of each era; a boundary
// may be off by a release). docs/allocators/bfc.md lists them with an
// example of each.
var (
	formatHeadlineOld = FormatSeen{Kind: "headline", Versions: "0.5–0.12",
		Form: "Ran out of memory trying to allocate X.  See logs for memory state. (after the dump)"}
	formatHeadlineSummary = FormatSeen{Kind: "headline", Versions: "1.0–1.13",
		Form: "Allocator (A) ran out of memory trying to allocate X.  Current allocation summary follows."}
	formatHeadlineRounded = FormatSeen{Kind: "headline", Versions: "1.14+",
		Form: "Allocator (A) ran out of memory trying to allocate X (rounded to N)requested by op OP"}
	formatBinsFree = FormatSeen{Kind: "bin lines", Versions: "0.5–1.3",
		Form: "Bin (256): \tTotal Chunks: N, Chunks in use: 0 XB allocated for chunks. YB client-requested for chunks. ... (free chunks only)"}
	formatBinsAll = FormatSeen{Kind: "bin lines", Versions: "1.4+",
		Form: "Bin (256): \tTotal Chunks: N, Chunks in use: M. XB allocated for chunks. YB in use in bin. ZB client-requested in use in bin. (every chunk)"}
	formatChunksAll = FormatSeen{Kind: "chunk lines", Versions: "0.6–0.7",
		Form: "Chunk at ADDR of size N (every chunk, free ones too)"}
	formatChunksOld = FormatSeen{Kind: "chunk lines", Versions: "0.8–1.13",
		Form: "Chunk at ADDR of size N / Free  at ADDR of size N"}
	formatChunksMid = FormatSeen{Kind: "chunk lines", Versions: "1.14–2.0",
		Form: "InUse at ADDR next H of size N / Free  at ADDR next H of size N"}
	formatChunksNew = FormatSeen{Kind: "chunk lines", Versions: "2.1+",
		Form: "InUse at ADDR of size N next H / Free  at ADDR of size N next H"}
	formatBinFor = FormatSeen{Kind: "bin for request", Versions: "0.5+",
		Form: "Bin for X was Y, Chunk State:"}
	formatSummary = FormatSeen{Kind: "in-use summary", Versions: "0.6+",
		Form: "N Chunks of size S totalling X / Sum Total of in-use chunks: X"}
	formatPoolLine = FormatSeen{Kind: "pool line", Versions: "1.14+",
		Form: "total_region_allocated_bytes_: P memory_limit_: L available bytes: A curr_region_allocation_bytes_: C (from 2.14: Total bytes in pool: P ...)"}
	formatPoolXLA = FormatSeen{Kind: "pool line", Versions: "XLA 2025+",
		Form: "Allocator memory summary: ... pool size X, pool limit Y"}
	formatStats = FormatSeen{Kind: "stats", Versions: "0.8+",
		Form: "Stats: Limit: L InUse: U MaxInUse: M NumAllocs: N MaxAllocSize: S"}
)

// BinsWhole reports whether the bin lines are all there: one per bin size
// from 256 bytes up, without a gap, to at least bin 20 (TF 0.5–0.6 printed
// more bins, up to twice the memory; later releases exactly 21).
func (ev *LogEvidence) BinsWhole() bool {
	if len(ev.Bins) < NumBins {
		return false
	}
	for i, b := range ev.Bins {
		if b.Bin != i {
			return false
		}
	}
	return true
}

// withLine is f first seen at line.
func (f FormatSeen) withLine(line int) FormatSeen {
	f.Line = line
	return f
}
