package bfcdump

import (
	"fmt"
	"io"
	"strings"
)

// InspectOptions tune WriteInspect.
type InspectOptions struct {
	// Chunks lists every chunk after the report.
	Chunks bool
}

// inspectWidth is the column WriteInspect wraps the explanation at.
const inspectWidth = 78

// WriteInspect writes the report of `bfcsim inspect`: a headline (the
// allocator, and the failed request when there is one), the pool in figures
// (Summarize), the non-empty bins, TF's occupancy strip framed in '|' with a
// legend, and the explanation (Explain) wrapped at 78 columns; with
// opt.Chunks, every chunk. Sizes are binary units as go-humanize prints them,
// except the request, which is shown as TF logs it. WriteInspect fails on a
// snapshot that does not Validate, and on a write error.
func WriteInspect(w io.Writer, s *Snapshot, opt InspectOptions) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("inspecting %s: %w", s.AllocatorName, err)
	}
	rep := NewInspectReport(s, opt.Chunks)
	ew := &errWriter{w: w}
	name := rep.Allocator
	if name == "" {
		name = "(unnamed allocator)"
	}
	if r := rep.Request; r != nil {
		ew.printf("%s: out of memory allocating %s (rounded to %d)", name, humanU(r.Bytes), r.Rounded)
		ew.printf("\n")
		if r.Op != "" {
			ew.printf("requested by op %s\n", r.Op)
		}
	} else {
		ew.printf("%s: BFC pool state\n", name)
	}
	if s.Line > 0 || s.Event > 0 {
		ew.printf("at trace line %d (event %d)\n", s.Line, s.Event)
	}

	sum := rep.Summary
	requestedKnown := sum.ChunksInUse == 0 || sum.RequestedInUse > 0
	ew.printf("\n")
	kv := func(k, v string) { ew.printf("  %-20s %s\n", k, v) }
	kv("pool", sizeWithBytes(sum.PoolBytes))
	if sum.MemoryLimit > 0 {
		kv("memory limit", sizeWithBytes(sum.MemoryLimit))
	} else {
		kv("memory limit", "unknown")
	}
	kv("in use", sizeWithBytes(sum.BytesInUse))
	if requestedKnown {
		kv("requested in use", sizeWithBytes(sum.RequestedInUse))
		kv("internal waste", sizeWithBytes(sum.InternalWaste))
	} else {
		kv("requested in use", "unknown (not recorded)")
		kv("internal waste", "unknown (not recorded)")
	}
	kv("free in pool", sizeWithBytes(sum.FreeInPool))
	kv("largest free chunk", sizeWithBytes(sum.LargestFreeChunk))
	if sum.MemoryLimit > 0 {
		kv("unreserved", sizeWithBytes(sum.Unreserved))
	} else {
		kv("unreserved", "unknown")
	}
	kv("regions", fmt.Sprint(sum.Regions))
	kv("chunks", fmt.Sprintf("%d in use, %d free", sum.ChunksInUse, sum.FreeChunks))
	kv("TF fragmentation", fmt.Sprintf("%.1f%%", 100*sum.TFFragmentation))

	if len(rep.Bins) > 0 {
		ew.printf("\nbins (every chunk counted by size, as TF's bin lines)\n")
		ew.printf("  %3s %10s %8s %8s %14s %14s\n", "bin", "bin size", "chunks", "in use", "bytes in bin", "bytes in use")
		for _, b := range rep.Bins {
			ew.printf("  %3d %10s %8d %8d %14s %14s\n", b.Bin, ib(b.BinSize), b.TotalChunks, b.ChunksInUse, ib(b.BytesInBin), ib(b.BytesInUse))
		}
	}

	ew.printf("\noccupancy (TF's RenderOccupancy: 100 cells over the regions end to end)\n")
	if rep.Occupancy == noMemory {
		ew.printf("  %s\n", rep.Occupancy)
	} else {
		ew.printf("  |%s|\n", rep.Occupancy)
		legend := "   * requested  x slack in in-use chunk  _ free"
		if !requestedKnown {
			legend = "   * in use  _ free (requested sizes not recorded)"
		}
		ew.printf("%s\n", legend)
	}

	ew.printf("\nexplanation: %s\n", rep.Explanation.Verdict)
	for _, l := range wrap(rep.Explanation.Text, inspectWidth-2) {
		ew.printf("  %s\n", l)
	}

	if opt.Chunks {
		ew.printf("\nchunks\n")
		ew.printf("  %-18s %14s %14s %-6s %4s\n", "address", "size", "requested", "state", "bin")
		for _, c := range rep.Chunks {
			state, bin := "free", fmt.Sprint(c.Bin)
			if c.InUse {
				state, bin = "in use", "-"
			}
			req := fmt.Sprint(c.Requested)
			switch {
			case !c.InUse:
				req = "-" // TF leaves a free chunk's requested size stale
			case c.Requested == 0:
				req = "?"
			}
			ew.printf("  %-18s %14d %14s %-6s %4s\n", c.Addr, c.Size, req, state, bin)
		}
	}
	return ew.err
}

// sizeWithBytes is "2.0 GiB (2147483648)", or "0 B" for zero.
func sizeWithBytes(n uint64) string {
	if n < 1024 {
		return ib(n)
	}
	return fmt.Sprintf("%s (%d)", ib(n), n)
}

// wrap breaks text into lines of at most width columns at spaces, keeping a
// size's number and unit ("128 MiB") together; a word longer than width gets
// a line of its own.
func wrap(text string, width int) []string {
	var words []string
	for _, w := range strings.Fields(text) {
		if n := len(words); n > 0 && isUnit(w) && strings.IndexAny(words[n-1][len(words[n-1])-1:], "0123456789") == 0 {
			words[n-1] += " " + w
			continue
		}
		words = append(words, w)
	}
	var lines []string
	var cur strings.Builder
	for _, word := range words {
		if cur.Len() > 0 && cur.Len()+1+len(word) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(word)
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}

// InspectReport is WriteInspect's report as data, for `bfcsim inspect -f
// json`.
type InspectReport struct {
	Allocator string          `json:"allocator"`
	Request   *InspectRequest `json:"request,omitempty"`
	// Event and Line locate a snapshot taken during a replay; omitted when
	// unknown.
	Event   int64   `json:"event,omitempty"`
	Line    int64   `json:"line,omitempty"`
	Summary Summary `json:"summary"`
	// Bins are the non-empty bins.
	Bins        []BinSummary `json:"bins"`
	Occupancy   string       `json:"occupancy"`
	Explanation Explanation  `json:"explanation"`
	// Chunks are every chunk in address order, when asked for.
	Chunks []InspectChunk `json:"chunks,omitempty"`
}

// InspectRequest is the failed allocation.
type InspectRequest struct {
	Bytes   uint64 `json:"bytes"`
	Rounded uint64 `json:"rounded"`
	Op      string `json:"op,omitempty"`
}

// InspectChunk is one chunk. The address is a hex string ("0x7f12ab000000"):
// JSON numbers lose precision beyond 2^53 in most readers.
type InspectChunk struct {
	Addr      string `json:"addr"`
	Size      uint64 `json:"size"`
	Requested uint64 `json:"requested"`
	InUse     bool   `json:"in_use"`
	// Bin is the free chunk's bin, -1 for an in-use chunk.
	Bin int `json:"bin"`
}

// NewInspectReport builds the report of s; withChunks adds every chunk.
func NewInspectReport(s *Snapshot, withChunks bool) InspectReport {
	rep := InspectReport{
		Allocator:   s.AllocatorName,
		Event:       s.Event,
		Line:        s.Line,
		Summary:     s.Summarize(),
		Bins:        []BinSummary{},
		Occupancy:   s.RenderOccupancy(),
		Explanation: Explain(s),
	}
	if s.Request != nil {
		r := requestSizes(s.Request)
		rep.Request = &InspectRequest{Bytes: r.Bytes, Rounded: r.Rounded, Op: r.Op}
	}
	for _, b := range s.Bins() {
		if b.TotalChunks > 0 {
			rep.Bins = append(rep.Bins, b)
		}
	}
	if withChunks {
		chunks, _ := s.layout()
		rep.Chunks = make([]InspectChunk, len(chunks))
		for i, c := range chunks {
			bin := -1
			if !c.InUse {
				bin = BinNumForSize(c.Size)
			}
			rep.Chunks[i] = InspectChunk{
				Addr: fmt.Sprintf("%#x", c.Addr), Size: c.Size, Requested: c.Requested, InUse: c.InUse, Bin: bin,
			}
		}
	}
	return rep
}

// isUnit reports whether w is a size unit as go-humanize prints them,
// possibly followed by punctuation.
func isUnit(w string) bool {
	switch strings.TrimRight(w, ".,;:)") {
	case "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB":
		return true
	}
	return false
}
