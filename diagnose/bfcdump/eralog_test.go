package bfcdump

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// This file writes a snapshot as each TensorFlow release's BFC allocator
// printed it on an out-of-memory, from the format strings of
// DumpMemoryLog, AllocateRaw and AllocatorStats::DebugString in each era's
// source (the eras and the releases that printed them are in
// docs/allocators/bfc.md). The fixtures in testdata/logs are its output, so
// that a change here shows up as a diff of what TensorFlow printed.

// logEra is one era of TensorFlow's OOM output.
type logEra struct {
	name string // fixture name, e.g. "tf1.12"
	// tf is the releases that printed it, for the fixture's test names.
	tf string
	// file is the source path glog names in the prefix.
	file string
	// stamp: TF ≥ 1.0 prefixes lines with a timestamp.
	stamp bool
	// headline: "old" (after the dump, "See logs for memory state"),
	// "summary" ("Current allocation summary follows."), "rounded1" ("(rounded
	// to N).  Current ..."), "op" (TF 2.5: "(rounded to N)requested by op"),
	// "xla" ("from the lower end requested by op").
	headline string
	// oldPeriod: the old headline ends with a period (TF ≥ 0.8).
	oldPeriod bool
	// binsAll: the bin lines count every chunk (TF ≥ 1.4); else only free
	// chunks, in the older line format.
	binsAll bool
	// chunks: "all" ("Chunk at" for every chunk, hash order, TF 0.6–0.7),
	// "passes" ("Chunk at" in-use pass, then "Free at" pass, TF 0.8–1.7),
	// "interleaved" ("Chunk"/"Free " in address order, TF 1.8–1.13), "mid"
	// ("InUse at 0x… next H of size N", TF 1.14–2.0), "new" ("InUse at hex of
	// size N next H", TF ≥ 2.1), "xla" (with " tag lower").
	chunks string
	// windows prints pointers as MSVC does: 16 upper-case digits, no 0x.
	windows bool
	// binNum: Chunk::DebugString has " | bin_num: B" (TF ≥ 1.15).
	binNum bool
	// dumpFor: "BFCAllocator dump for NAME" (TF ≥ 2.1).
	dumpFor bool
	// pool: "" (none), "region" (total_region_allocated_bytes_, TF
	// 1.14–2.13), "pool" (Total bytes in pool, TF 2.14–2.17), "xla"
	// (Allocator memory summary).
	pool string
	// stats: 0 (none, TF ≤ 0.7), 5 or 8 fields; statsHuman prints sizes
	// human-readable (newest XLA).
	stats      int
	statsHuman bool
	// bar: RenderOccupancy is logged (TF ≥ 0.8).
	bar bool
}

var logEras = []logEra{
	{name: "tf0.6", tf: "0.6–0.7", file: "tensorflow/core/common_runtime/gpu/gpu_bfc_allocator.cc", headline: "old", chunks: "all"},
	{name: "tf0.9", tf: "0.8–0.12", file: "tensorflow/core/common_runtime/bfc_allocator.cc", headline: "old", oldPeriod: true, chunks: "passes", stats: 5, bar: true},
	{name: "tf1.2", tf: "1.0–1.3", file: "tensorflow/core/common_runtime/bfc_allocator.cc", stamp: true, headline: "summary", chunks: "passes", stats: 5, bar: true},
	{name: "tf1.5", tf: "1.4–1.7", file: "tensorflow/core/common_runtime/bfc_allocator.cc", stamp: true, headline: "summary", binsAll: true, chunks: "passes", stats: 5, bar: true},
	{name: "tf1.12", tf: "1.8–1.13", file: "tensorflow/core/common_runtime/bfc_allocator.cc", stamp: true, headline: "summary", binsAll: true, chunks: "interleaved", stats: 5, bar: true},
	{name: "tf1.15", tf: "1.14–2.0", file: "tensorflow/core/common_runtime/bfc_allocator.cc", stamp: true, headline: "rounded1", binsAll: true, chunks: "mid", binNum: true, pool: "region", stats: 5, bar: true},
	{name: "tf1.15-windows", tf: "1.14–2.0 on Windows", file: `C:\tf_jenkins\home\workspace\rel-win\M\windows-gpu\PY\36\tensorflow\core\common_runtime\bfc_allocator.cc`, stamp: true, headline: "rounded1", binsAll: true, chunks: "mid", windows: true, binNum: true, pool: "region", stats: 5, bar: true},
	{name: "tf2.4", tf: "2.1–2.4", file: "tensorflow/core/common_runtime/bfc_allocator.cc", stamp: true, headline: "rounded1", binsAll: true, chunks: "new", binNum: true, dumpFor: true, pool: "region", stats: 8, bar: true},
	{name: "tf2.11", tf: "2.5–2.13", file: "tensorflow/tsl/framework/bfc_allocator.cc", stamp: true, headline: "op", binsAll: true, chunks: "new", binNum: true, dumpFor: true, pool: "region", stats: 8, bar: true},
	{name: "tf2.16", tf: "2.14–2.17", file: "external/local_tsl/tsl/framework/bfc_allocator.cc", stamp: true, headline: "op", binsAll: true, chunks: "new", binNum: true, dumpFor: true, pool: "pool", stats: 8, bar: true},
	{name: "xla2025", tf: "XLA 2025+", file: "external/local_xla/xla/tsl/framework/bfc_allocator.cc", stamp: true, headline: "xla", binsAll: true, chunks: "xla", binNum: true, dumpFor: true, pool: "xla", stats: 8, statsHuman: true, bar: true},
}

// eraWriter writes log lines with the era's prefix.
type eraWriter struct {
	era  logEra
	b    strings.Builder
	tick int
}

// line writes one glog line at the given level and source line.
func (w *eraWriter) line(level byte, src int, format string, args ...any) {
	w.tick++
	if w.era.stamp {
		fmt.Fprintf(&w.b, "2026-01-02 10:11:12.%06d: ", 100000+w.tick)
	}
	fmt.Fprintf(&w.b, "%c %s:%d] ", level, w.era.file, src)
	fmt.Fprintf(&w.b, format, args...)
	w.b.WriteByte('\n')
}

// raw writes text without a prefix: the continuation lines of a log record
// that holds newlines.
func (w *eraWriter) raw(text string) { w.b.WriteString(text) }

func (w *eraWriter) ptr(addr uint64) string {
	switch {
	case w.era.windows:
		return fmt.Sprintf("%016X", addr)
	case w.era.chunks == "new" || w.era.chunks == "xla":
		return fmt.Sprintf("%x", addr) // strings::Hex / absl::Hex
	}
	return fmt.Sprintf("0x%x", addr) // ostream << void*
}

// renderEraLog writes s as era e printed it on a failed allocation.
func renderEraLog(s *Snapshot, e logEra) string {
	w := &eraWriter{era: e}
	req := requestSizes(s.Request)
	chunks, spans := s.layout()
	switch e.headline {
	case "summary":
		w.line('W', 273, "Allocator (%s) ran out of memory trying to allocate %s.  Current allocation summary follows.", s.AllocatorName, humanU(req.Bytes))
	case "rounded1":
		w.line('W', 424, "Allocator (%s) ran out of memory trying to allocate %s (rounded to %d).  Current allocation summary follows.", s.AllocatorName, humanU(req.Bytes), req.Rounded)
	case "op":
		w.line('W', 485, "Allocator (%s) ran out of memory trying to allocate %s (rounded to %d)requested by op %s", s.AllocatorName, humanU(req.Bytes), req.Rounded, req.Op)
		w.raw("If the cause is memory fragmentation maybe the environment variable 'TF_GPU_ALLOCATOR=cuda_malloc_async' will improve the situation. \nCurrent allocation summary follows.\nCurrent allocation summary follows.\n")
	case "xla":
		w.line('W', 512, "Allocator (%s) ran out of memory trying to allocate %s (rounded to %d) from the lower end requested by op %s", s.AllocatorName, humanU(req.Bytes), req.Rounded, req.Op)
		w.raw("If this is caused by memory fragmentation, the environment variable 'TF_GPU_ALLOCATOR=cuda_malloc_async' may improve the situation.\nCurrent allocation summary follows.\n")
	}
	if e.dumpFor {
		w.line('I', 1039, "BFCAllocator dump for %s", s.AllocatorName)
	}
	// Bin lines.
	bins := s.Bins()
	for b := range NumBins {
		if e.binsAll {
			bs := bins[b]
			w.line('I', 1046, "Bin (%d): \tTotal Chunks: %d, Chunks in use: %d. %s allocated for chunks. %s in use in bin. %s client-requested in use in bin.",
				bs.BinSize, bs.TotalChunks, bs.ChunksInUse, humanU(bs.BytesInBin), humanU(bs.BytesInUse), humanU(bs.RequestedInUse))
			continue
		}
		var n int64
		var bytes, requested uint64
		for _, c := range chunks {
			if !c.InUse && BinNumForSize(c.Size) == b {
				n++
				bytes += c.Size
				requested += c.Requested
			}
		}
		w.line('I', 643, "Bin (%d): \tTotal Chunks: %d, Chunks in use: 0 %s allocated for chunks. %s client-requested for chunks. 0B in use in bin. 0B client-requested in use in bin.",
			BinSize(b), n, humanU(bytes), humanU(requested))
	}
	// Bin for X was Y, and the free chunks of that bin.
	rb := BinNumForSize(req.Rounded)
	w.line('I', 1062, "Bin for %s was %s, Chunk State: ", humanU(req.Rounded), humanU(BinSize(rb)))
	debug := func(c Chunk) string {
		d := fmt.Sprintf("  Size: %s | Requested Size: %s | in_use: %d", humanU(c.Size), humanU(c.Requested), b2i(c.InUse))
		if e.binNum {
			bin := BinNumForSize(c.Size)
			if c.InUse {
				bin = -1
			}
			d += fmt.Sprintf(" | bin_num: %d", bin)
		}
		return d
	}
	type ref struct{ i, first, end int }
	var inBin []ref
	for _, sp := range spans {
		for i := sp.first; i < sp.end; i++ {
			if !chunks[i].InUse && BinNumForSize(chunks[i].Size) == rb {
				inBin = append(inBin, ref{i, sp.first, sp.end})
			}
		}
	}
	slices.SortStableFunc(inBin, func(a, b ref) int {
		if d := int64(chunks[a.i].Size) - int64(chunks[b.i].Size); d != 0 {
			return int(d / max(d, -d))
		}
		return byAddr(chunks[a.i], chunks[b.i])
	})
	for _, f := range inBin {
		d := debug(chunks[f.i])
		if f.i > f.first {
			d += ", prev: " + debug(chunks[f.i-1])
		}
		if f.i+1 < f.end {
			d += ", next: " + debug(chunks[f.i+1])
		}
		w.line('I', 1068, "%s", d)
	}
	// Chunk lines.
	inUseBySize := map[uint64]int64{}
	switch e.chunks {
	case "all":
		order := rand.New(rand.NewPCG(1, 2)).Perm(len(chunks)) // an unordered_map's order
		for _, i := range order {
			c := chunks[i]
			inUseBySize[c.Size]++ // TF 0.6 counts free chunks as in use too
			w.line('I', 400, "Chunk at %s of size %d", w.ptr(c.Addr), c.Size)
		}
	case "passes":
		for _, free := range []bool{false, true} {
			for _, c := range chunks {
				switch {
				case c.InUse && !free:
					inUseBySize[c.Size]++
					w.line('I', 678, "Chunk at %s of size %d", w.ptr(c.Addr), c.Size)
				case !c.InUse && free:
					w.line('I', 687, "Free at %s of size %d", w.ptr(c.Addr), c.Size)
				}
			}
		}
	default:
		handle := 0
		for _, sp := range spans {
			if e.chunks != "interleaved" {
				w.line('I', 1075, "Next region of size %d", sp.Size)
			}
			for i := sp.first; i < sp.end; i++ {
				c := chunks[i]
				handle++
				next := fmt.Sprint(handle)
				if i+1 == sp.end {
					next = fmt.Sprint(invalidChunkHandle)
				}
				if c.InUse {
					inUseBySize[c.Size]++
				}
				switch e.chunks {
				case "interleaved":
					state := "Free "
					if c.InUse {
						state = "Chunk"
					}
					w.line('I', 645, "%s at %s of size %d", state, w.ptr(c.Addr), c.Size)
				case "mid":
					state := "Free "
					if c.InUse {
						state = "InUse"
					}
					w.line('I', 905, "%s at %s next %s of size %d", state, w.ptr(c.Addr), next, c.Size)
				case "new":
					state := "Free "
					if c.InUse {
						state = "InUse"
					}
					w.line('I', 1095, "%s at %s of size %d next %s", state, w.ptr(c.Addr), c.Size, next)
				case "xla":
					state := "Free "
					if c.InUse {
						state = "InUse"
					}
					w.line('I', 1090, "%s at %s of size %d tag lower next %s", state, w.ptr(c.Addr), c.Size, next)
				}
			}
		}
	}
	// The in-use summary.
	w.line('I', 1100, "     Summary of in-use Chunks by size: ")
	sizes := make([]uint64, 0, len(inUseBySize))
	for size := range inUseBySize {
		sizes = append(sizes, size)
	}
	slices.Sort(sizes)
	var total uint64
	for _, size := range sizes {
		n := inUseBySize[size]
		w.line('I', 1103, "%d Chunks of size %d totalling %s", n, size, humanU(size*uint64(n)))
		total += size * uint64(n)
	}
	w.line('I', 1107, "Sum Total of in-use chunks: %s", humanU(total))
	sum := s.Summarize()
	switch e.pool {
	case "region":
		w.line('I', 1109, "total_region_allocated_bytes_: %d memory_limit_: %d available bytes: %d curr_region_allocation_bytes_: %d",
			sum.PoolBytes, sum.MemoryLimit, sum.MemoryLimit-sum.PoolBytes, s.Stats.CurrRegionAllocationBytes)
	case "pool":
		w.line('I', 1109, "Total bytes in pool: %d memory_limit_: %d available bytes: %d curr_region_allocation_bytes_: %d",
			sum.PoolBytes, sum.MemoryLimit, sum.MemoryLimit-sum.PoolBytes, s.Stats.CurrRegionAllocationBytes)
	case "xla":
		w.line('I', 1120, "Allocator memory summary: rounded request %s, total free in pool %s, largest free chunk usable by lower end %s, unallocated bytes %s, pool size %s, pool limit %s",
			humanU(req.Rounded), humanU(sum.FreeInPool), humanU(sum.LargestFreeChunk), humanU(sum.Unreserved), humanU(sum.PoolBytes), humanU(sum.MemoryLimit))
		w.line('I', 1135, "Allocator region growth hint: next region allocation target %s (growth enabled).", humanU(uint64(s.Stats.CurrRegionAllocationBytes)))
	}
	if e.stats > 0 {
		st := s.Stats
		w.line('I', 1114, "Stats: ")
		fields := []struct {
			k string
			v int64
		}{
			{"Limit", st.BytesLimit}, {"InUse", st.BytesInUse}, {"MaxInUse", st.PeakBytesInUse},
			{"NumAllocs", st.NumAllocs}, {"MaxAllocSize", st.LargestAllocSize},
			{"Reserved", 0}, {"PeakReserved", 0}, {"LargestFreeBlock", int64(sum.LargestFreeChunk)},
		}[:e.stats]
		width := 14
		if e.stats == 8 {
			width = 18
		}
		for _, f := range fields {
			v := fmt.Sprintf("%20d", f.v)
			if e.statsHuman && f.k != "NumAllocs" {
				v = fmt.Sprintf("%20s", HumanBytes(f.v))
			}
			if e.stats == 8 && f.k == "LargestFreeBlock" && !e.statsHuman {
				v = fmt.Sprintf("%20d", 0) // TF 2.x prints stats_, whose largest free block it never fills
			}
			w.raw(fmt.Sprintf("%-*s%s\n", width, f.k+":", v))
		}
		w.raw("\n")
	}
	if e.bar {
		w.line('W', 497, "%s", s.RenderOccupancy())
	}
	if e.headline == "old" {
		end := ""
		if e.oldPeriod {
			end = "."
		}
		w.line('W', 271, "Ran out of memory trying to allocate %s.  See logs for memory state%s", humanU(req.Bytes), end)
	}
	return w.b.String()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
