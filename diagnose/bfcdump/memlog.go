package bfcdump

import (
	"fmt"
	"io"
	"slices"

	"github.com/bfcsim/bfcsim/internal/sticky"
)

// WriteMemoryLog writes s as TensorFlow's classic BFCAllocator::DumpMemoryLog
// logs it, without glog's line prefixes: the text users paste from stderr,
// and what ParseLog reads back. In order:
//
//  1. For a snapshot taken at a failed allocation (s.Request set), TF's OOM
//     headline, "Allocator (NAME) ran out of memory trying to allocate 1.2KiB
//     (rounded to 1280)requested by op OP", with the missing space before
//     "requested" and, when no op is known, "requested by op " and nothing
//     after, both as TF prints them; then TF's hint about
//     TF_GPU_ALLOCATOR=cuda_malloc_async, and "Current allocation summary
//     follows." twice, as TF 2.x prints it.
//  2. "BFCAllocator dump for NAME" and the 21 bin lines (Bins).
//  3. With a request, "Bin for X was Y, Chunk State: " and one
//     Chunk::DebugString line for each free chunk in the request's bin, in
//     the bin's (size, address) order, with its neighbours in the region.
//  4. Per region, "Next region of size N", then each chunk "InUse at ADDR of
//     size N next H" or "Free  at ..." (with " by op ..." and
//     " freed_at_count N" when s carries them). TF prints a chunk's handle,
//     an index into its chunk table; bfcsim numbers chunks by address order
//     instead, and the last chunk of a region has TF's kInvalidChunkHandle,
//     18446744073709551615.
//  5. The in-use chunks counted by size, their sum, the pool line ("Total
//     bytes in pool: P memory_limit_: L available bytes: A
//     curr_region_allocation_bytes_: C"; 0 where unknown), and "Stats: "
//     followed by AllocatorStats::DebugString: eight right-aligned integers,
//     Reserved, PeakReserved and LargestFreeBlock being 0 as classic BFC
//     leaves them.
//  6. With a request, the RenderOccupancy strip TF logs after the dump.
//
// WriteMemoryLog fails on a snapshot that does not Validate, and on a write
// error.
func WriteMemoryLog(w io.Writer, s *Snapshot) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("writing a memory log: %w", err)
	}
	ew := &sticky.Writer{W: w}
	if s.Request != nil {
		writeOOMHeadline(ew, s)
	}
	ew.Printf("BFCAllocator dump for %s\n", s.AllocatorName)
	for _, b := range s.Bins() {
		ew.Printf("Bin (%d): \tTotal Chunks: %d, Chunks in use: %d. %s allocated for chunks. %s in use in bin. %s client-requested in use in bin.\n",
			b.BinSize, b.TotalChunks, b.ChunksInUse,
			humanU(b.BytesInBin), humanU(b.BytesInUse), humanU(b.RequestedInUse))
	}
	chunks, spans := s.layout()
	if s.Request != nil {
		writeBinState(ew, s.Request, chunks, spans)
	}
	inUseBySize := map[uint64]int64{}
	for _, sp := range spans {
		ew.Printf("Next region of size %d\n", sp.Size)
		for i := sp.first; i < sp.end; i++ {
			c := chunks[i]
			state := "Free "
			if c.InUse {
				state = "InUse"
				inUseBySize[c.Size]++
			}
			ew.Printf("%s at %x of size %d", state, c.Addr, c.Size)
			if c.OpName != "" {
				ew.Printf(" by op %s action_count %d step %d", c.OpName, c.ActionCount, c.StepID)
			}
			next := invalidChunkHandle
			if i+1 < sp.end {
				next = uint64(i + 1)
			}
			ew.Printf(" next %d", next)
			if c.FreedAtCount > 0 {
				ew.Printf(" freed_at_count %d", c.FreedAtCount)
			}
			ew.Printf("\n")
		}
	}
	ew.Printf("     Summary of in-use Chunks by size: \n")
	sizes := make([]uint64, 0, len(inUseBySize))
	for size := range inUseBySize {
		sizes = append(sizes, size)
	}
	slices.Sort(sizes)
	var total uint64
	for _, size := range sizes {
		n := inUseBySize[size]
		ew.Printf("%d Chunks of size %d totalling %s\n", n, size, humanU(size*uint64(n)))
		total += size * uint64(n)
	}
	ew.Printf("Sum Total of in-use chunks: %s\n", humanU(total))
	pool := s.Summarize().PoolBytes
	limit := uint64(max(s.Stats.BytesLimit, 0))
	var avail uint64
	if limit > pool {
		avail = limit - pool
	}
	ew.Printf("Total bytes in pool: %d memory_limit_: %d available bytes: %d curr_region_allocation_bytes_: %d\n",
		pool, limit, avail, max(s.Stats.CurrRegionAllocationBytes, 0))
	ew.Printf("Stats: \n")
	writeStatsDebugString(ew, s.Stats)
	ew.Printf("\n")
	if s.Request != nil {
		ew.Printf("%s\n", s.RenderOccupancy())
	}
	return ew.Err
}

// writeOOMHeadline writes the three lines TF logs before the dump of a
// failed allocation.
func writeOOMHeadline(ew *sticky.Writer, s *Snapshot) {
	r := requestSizes(s.Request)
	ew.Printf("Allocator (%s) ran out of memory trying to allocate %s (rounded to %d)requested by op %s\n",
		s.AllocatorName, humanU(r.Bytes), r.Rounded, s.Request.Op)
	ew.Printf("If the cause is memory fragmentation maybe the environment variable 'TF_GPU_ALLOCATOR=cuda_malloc_async' will improve the situation. \n")
	ew.Printf("Current allocation summary follows.\n")
	ew.Printf("Current allocation summary follows.\n")
}

// requestSizes fills in whichever of a request's sizes is missing: Rounded
// from Bytes, or Bytes from Rounded.
func requestSizes(r *Request) Request {
	out := *r
	if out.Rounded == 0 {
		out.Rounded = roundedBytes(out.Bytes)
	}
	if out.Bytes == 0 {
		out.Bytes = out.Rounded
	}
	return out
}

// writeBinState writes DumpMemoryLog's "Bin for X was Y, Chunk State:" block:
// the free chunks of the bin the rounded request maps to, in the bin's
// (size, address) order, each with Chunk::DebugString(recurse=true).
func writeBinState(ew *sticky.Writer, req *Request, chunks []Chunk, spans []span) {
	rounded := requestSizes(req).Rounded
	bin := BinNumForSize(rounded)
	ew.Printf("Bin for %s was %s, Chunk State: \n", humanU(rounded), humanU(BinSize(bin)))
	type ref struct{ i, first, end int }
	var free []ref
	for _, sp := range spans {
		for i := sp.first; i < sp.end; i++ {
			if c := chunks[i]; !c.InUse && BinNumForSize(c.Size) == bin {
				free = append(free, ref{i, sp.first, sp.end})
			}
		}
	}
	slices.SortStableFunc(free, func(a, b ref) int {
		ca, cb := chunks[a.i], chunks[b.i]
		if ca.Size != cb.Size {
			if ca.Size < cb.Size {
				return -1
			}
			return 1
		}
		return byAddr(ca, cb)
	})
	for _, f := range free {
		ew.Printf("%s", chunkDebugString(chunks[f.i]))
		if f.i > f.first {
			ew.Printf(", prev: %s", chunkDebugString(chunks[f.i-1]))
		}
		if f.i+1 < f.end {
			ew.Printf(", next: %s", chunkDebugString(chunks[f.i+1]))
		}
		ew.Printf("\n")
	}
}

// chunkDebugString is TF's Chunk::DebugString(recurse=false).
func chunkDebugString(c Chunk) string {
	inUse, bin := 0, BinNumForSize(c.Size)
	if c.InUse {
		inUse, bin = 1, -1
	}
	return fmt.Sprintf("  Size: %s | Requested Size: %s | in_use: %d | bin_num: %d",
		humanU(c.Size), humanU(c.Requested), inUse, bin)
}

// writeStatsDebugString writes AllocatorStats::DebugString for st.
func writeStatsDebugString(ew *sticky.Writer, st Stats) {
	for _, kv := range []struct {
		k string
		v int64
	}{
		{"Limit", st.BytesLimit},
		{"InUse", st.BytesInUse},
		{"MaxInUse", st.PeakBytesInUse},
		{"NumAllocs", st.NumAllocs},
		{"MaxAllocSize", st.LargestAllocSize},
		{"Reserved", 0},
		{"PeakReserved", 0},
		{"LargestFreeBlock", 0},
	} {
		ew.Printf("%-18s%20d\n", kv.k+":", kv.v)
	}
}

// humanU is HumanBytes for an unsigned count, saturating at 2^63−1.
func humanU(n uint64) string { return HumanBytes(int64(min(n, 1<<63-1))) }
