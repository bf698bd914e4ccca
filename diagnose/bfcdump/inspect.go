package bfcdump

import (
	"fmt"
	"io"

	"github.com/bfcsim/bfcsim/internal/sticky"
	"github.com/bfcsim/bfcsim/internal/textwrap"
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
// (Summarize), the non-empty bins (each with where it comes from when a
// pasted log's bin lines cover only some of them), TF's occupancy strip
// framed in '|' with a legend, and the explanation (Explain) wrapped at 78
// columns; with opt.Chunks, every chunk. Sizes are binary units as go-humanize prints them,
// except the request, which is shown as TF logs it. WriteInspect fails on a
// snapshot that does not Validate, and on a write error.
func WriteInspect(w io.Writer, s *Snapshot, opt InspectOptions) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("inspecting %s: %w", s.AllocatorName, err)
	}
	rep := NewInspectReport(s, opt.Chunks)
	ew := &sticky.Writer{W: w}
	name := rep.Allocator
	if name == "" {
		name = "(unnamed allocator)"
	}
	if r := rep.Request; r != nil {
		switch {
		case r.Approximate:
			ew.Printf("%s: out of memory allocating %s (rounded to about %d; TF printed the size only to three digits)\n", name, humanU(r.Bytes), r.Rounded)
		default:
			ew.Printf("%s: out of memory allocating %s (rounded to %d)\n", name, humanU(r.Bytes), r.Rounded)
		}
		if r.Op != "" {
			ew.Printf("requested by op %s\n", r.Op)
		}
		if r.From != "" {
			ew.Printf("from the %s\n", r.From)
		}
	} else {
		ew.Printf("%s: BFC pool state\n", name)
	}
	if s.Line > 0 || s.Event > 0 {
		ew.Printf("at trace line %d (event %d)\n", s.Line, s.Event)
	}

	sum := rep.Summary
	requestedKnown := s.Log == nil && (sum.ChunksInUse == 0 || sum.RequestedInUse > 0)
	ew.Printf("\n")
	kv := func(k, v string) { ew.Printf("  %-20s %s\n", k, v) }
	// fig prints a figure with where it comes from, for a pasted log.
	fig := func(k, key, v string) {
		p, ok := rep.Provenance[key]
		if !ok {
			kv(k, v)
			return
		}
		switch {
		case p.Source == SourceUnknown:
			kv(k, "unknown")
			return
		case p.Source == SourceAtLeast:
			v = "at least " + v
		case !p.Exact:
			v = "about " + v
		}
		kv(k, fmt.Sprintf("%-28s %s", v, provenanceText(p)))
	}
	size := func(n uint64, key string) string {
		if p, ok := rep.Provenance[key]; ok && (!p.Exact || p.Source == SourceAtLeast) {
			return ib(n)
		}
		return sizeWithBytes(n)
	}
	fig("pool", "pool_bytes", size(sum.PoolBytes, "pool_bytes"))
	if sum.MemoryLimit > 0 {
		fig("memory limit", "memory_limit", size(sum.MemoryLimit, "memory_limit"))
	} else {
		kv("memory limit", "unknown")
	}
	fig("in use", "bytes_in_use", size(sum.BytesInUse, "bytes_in_use"))
	if requestedKnown {
		kv("requested in use", sizeWithBytes(sum.RequestedInUse))
		kv("internal waste", sizeWithBytes(sum.InternalWaste))
	} else {
		kv("requested in use", "unknown (not recorded)")
		kv("internal waste", "unknown (not recorded)")
	}
	fig("free in pool", "free_in_pool", size(sum.FreeInPool, "free_in_pool"))
	fig("largest free chunk", "largest_free_chunk", size(sum.LargestFreeChunk, "largest_free_chunk"))
	if sum.MemoryLimit > 0 {
		fig("unreserved", "unreserved", size(sum.Unreserved, "unreserved"))
	} else {
		kv("unreserved", "unknown")
	}
	fig("regions", "regions", fmt.Sprint(sum.Regions))
	fig("chunks", "chunks", fmt.Sprintf("%d in use, %d free", sum.ChunksInUse, sum.FreeChunks))
	fig("TF fragmentation", "tf_fragmentation", fmt.Sprintf("%.1f%%", 100*sum.TFFragmentation))

	if src := rep.Source; src != nil {
		ew.Printf("\nread from a TensorFlow log of %d lines, in the forms of these TensorFlow releases:\n", src.Lines)
		for _, f := range src.Formats {
			ew.Printf("  %-16s TF %-12s from line %d\n", f.Kind, f.Versions, f.Line)
		}
		if src.Partial {
			ew.Printf("\nthe paste is partial: figures are TensorFlow's own where it printed them\n")
			bullets(ew, src.Notes)
		}
		if len(src.Missing) > 0 {
			ew.Printf("\nnot in the paste\n")
			bullets(ew, src.Missing)
		}
	}

	if len(rep.Bins) > 0 {
		switch rep.BinsFrom {
		case "bin lines":
			ew.Printf("\nbins (TF's bin lines: every chunk counted by size; bytes as TF rounds them)\n")
		case "bin lines (free chunks only)":
			ew.Printf("\nbins (TF's bin lines: before TF 1.4 they count only free chunks; bytes as TF rounds them)\n")
		case "chunks":
			if rep.Source != nil {
				ew.Printf("\nbins (counted over the pasted chunk lines, as TF's bin lines count)\n")
			} else {
				ew.Printf("\nbins (every chunk counted by size, as TF's bin lines)\n")
			}
		case binsMixed:
			ew.Printf("\nbins (TF's bin lines where pasted, every chunk counted by size, bytes as TF rounds them;\n")
			ew.Printf("  the bins without a pasted line counted over the pasted chunk lines)\n")
		case binsMixedFreeOnly:
			ew.Printf("\nbins (TF's bin lines where pasted, which before TF 1.4 count only free chunks, bytes as\n")
			ew.Printf("  TF rounds them; the bins without a pasted line counted over the pasted free chunk lines)\n")
		}
		// A table of both sources says which each bin comes from.
		mixed := rep.BinsFrom == binsMixed || rep.BinsFrom == binsMixedFreeOnly
		from := func(b InspectBin) string {
			switch p := b.Provenance; {
			case !mixed || p == nil:
				return ""
			case p.Source == SourcePrinted:
				return "   bin line " + p.Lines
			default:
				return "   " + p.From
			}
		}
		head := ""
		if mixed {
			head = "   from"
		}
		ew.Printf("  %3s %10s %8s %8s %14s %14s%s\n", "bin", "bin size", "chunks", "in use", "bytes in bin", "bytes in use", head)
		for _, b := range rep.Bins {
			ew.Printf("  %3d %10s %8d %8d %14s %14s%s\n", b.Bin, ib(b.BinSize), b.TotalChunks, b.ChunksInUse, ib(b.BytesInBin), ib(b.BytesInUse), from(b))
		}
	}

	switch {
	case s.Log != nil && s.Log.ChunkAtAll:
		ew.Printf("\noccupancy (TF's RenderOccupancy; TF 0.6–0.7 do not say which chunks are free, so all are drawn in use)\n")
	case rep.Source != nil && rep.Source.Partial:
		ew.Printf("\noccupancy (TF's RenderOccupancy over the pasted chunk lines only: the paste is partial)\n")
	default:
		ew.Printf("\noccupancy (TF's RenderOccupancy: 100 cells over the regions end to end)\n")
	}
	if rep.Occupancy == noMemory {
		ew.Printf("  %s\n", rep.Occupancy)
	} else {
		ew.Printf("  |%s|\n", rep.Occupancy)
		legend := "   * requested  x slack in in-use chunk  _ free"
		if !requestedKnown {
			legend = "   * in use  _ free (requested sizes not recorded)"
		}
		ew.Printf("%s\n", legend)
	}

	ew.Printf("\nexplanation: %s\n", rep.Explanation.Verdict)
	for _, l := range textwrap.Lines(rep.Explanation.Text, inspectWidth-2) {
		ew.Printf("  %s\n", l)
	}
	if len(rep.Explanation.RestsOn) > 0 {
		ew.Printf("  rests on:\n")
		for _, r := range rep.Explanation.RestsOn {
			ew.Printf("    %s\n", r)
		}
	}
	if len(rep.Explanation.CannotKnow) > 0 {
		ew.Printf("  cannot know from this paste:\n")
		for _, c := range rep.Explanation.CannotKnow {
			for i, l := range textwrap.Lines(c, inspectWidth-6) {
				lead := "  - "
				if i > 0 {
					lead = "    "
				}
				ew.Printf("  %s%s\n", lead, l)
			}
		}
	}

	if opt.Chunks {
		ew.Printf("\nchunks\n")
		ew.Printf("  %-18s %14s %14s %-6s %4s\n", "address", "size", "requested", "state", "bin")
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
			ew.Printf("  %-18s %14d %14s %-6s %4s\n", c.Addr, c.Size, req, state, bin)
		}
	}
	return ew.Err
}

// provenanceText is where a figure comes from, for the text report:
// "Stats InUse, line 57".
func provenanceText(p Provenance) string {
	if p.Lines == "" {
		return p.From
	}
	return fmt.Sprintf("%s, line%s %s", p.From, plural(p.Lines), p.Lines)
}

// bullets writes items as a wrapped list.
func bullets(ew *sticky.Writer, items []string) {
	for _, it := range items {
		for i, l := range textwrap.Lines(it, inspectWidth-4) {
			lead := "- "
			if i > 0 {
				lead = "  "
			}
			ew.Printf("  %s%s\n", lead, l)
		}
	}
}

// sizeWithBytes is "2.0 GiB (2147483648)", or "0 B" for zero.
func sizeWithBytes(n uint64) string {
	if n < 1024 {
		return ib(n)
	}
	return fmt.Sprintf("%s (%d)", ib(n), n)
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
	// Provenance says where each figure of Summary comes from, keyed by
	// its JSON name; for a pasted log only.
	Provenance map[string]Provenance `json:"provenance,omitempty"`
	// Source describes a pasted log: its formats and what it lacks.
	Source *InspectSource `json:"source,omitempty"`
	// Bins are the non-empty bins; BinsFrom says whether they are TF's
	// printed bin lines ("bin lines", or "bin lines (free chunks only)" for
	// TF ≤ 1.3), counted over the chunks ("chunks"), or, for a paste with
	// only some of the bin lines, each bin from its line where pasted and
	// counted over the chunk lines elsewhere ("bin lines and chunks", or
	// "bin lines (free chunks only) and chunks").
	Bins        []InspectBin `json:"bins"`
	BinsFrom    string       `json:"bins_from"`
	Occupancy   string       `json:"occupancy"`
	Explanation Explanation  `json:"explanation"`
	// Chunks are every chunk in address order, when asked for.
	Chunks []InspectChunk `json:"chunks,omitempty"`
}

// InspectBin is one bin of the report: its figures, and for a pasted log
// where they come from. Provenance.Source is "printed" for a bin whose bin
// line is in the paste (Lines is that line; TensorFlow counted the bin over
// the whole pool, and its bytes are rounded to three digits), "chunks" for
// a bin counted over the chunk lines, or "at-least" when those are a partial
// paste's. A bin's line wins over its chunk lines for every figure it
// prints. Counted from a log, RequestedInUse is 0: chunk lines do not
// print requested sizes.
type InspectBin struct {
	BinSummary
	Provenance *Provenance `json:"provenance,omitempty"`
}

// Mixed bin tables (InspectReport.BinsFrom).
const (
	binsMixed         = "bin lines and chunks"
	binsMixedFreeOnly = "bin lines (free chunks only) and chunks"
)

// InspectRequest is the failed allocation.
type InspectRequest struct {
	Bytes   uint64 `json:"bytes"`
	Rounded uint64 `json:"rounded"`
	Op      string `json:"op,omitempty"`
	// Approximate: the log gives the size only in TF's human-readable
	// form (three significant digits), so Bytes and Rounded are estimates.
	Approximate bool `json:"approximate,omitempty"`
	// From says which line of a pasted log names the request.
	From string `json:"from,omitempty"`
}

// InspectSource describes a pasted log: what was read, and how much of
// TensorFlow's dump the paste holds.
type InspectSource struct {
	Lines int `json:"lines"`
	// Formats are the line formats recognised, with the TensorFlow
	// versions that print each.
	Formats []FormatSeen `json:"formats"`
	// Partial is true when the paste lacks lines of the dump: Notes say how
	// that shows (chunk lines against bin lines, Stats, pool).
	Partial bool     `json:"partial"`
	Notes   []string `json:"notes,omitempty"`
	// Missing lists the parts of TensorFlow's output the paste does not
	// hold.
	Missing []string `json:"missing,omitempty"`
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
	r := s.read()
	rep := InspectReport{
		Allocator:   s.AllocatorName,
		Event:       s.Event,
		Line:        s.Line,
		Summary:     r.sum,
		Provenance:  r.prov,
		Bins:        r.bins,
		BinsFrom:    r.binsFrom,
		Occupancy:   s.RenderOccupancy(),
		Explanation: Explain(s),
	}
	if rep.Bins == nil {
		rep.Bins = []InspectBin{}
	}
	if s.Request != nil {
		q := requestSizes(s.Request)
		rep.Request = &InspectRequest{Bytes: q.Bytes, Rounded: q.Rounded, Op: q.Op}
	}
	if ev := s.Log; ev != nil {
		rep.Source = &InspectSource{Lines: ev.Lines, Formats: ev.Formats, Partial: len(r.partial) > 0, Notes: r.partial, Missing: r.missing}
		if rep.Source.Formats == nil {
			rep.Source.Formats = []FormatSeen{}
		}
		if q := rep.Request; q != nil {
			q.Approximate = !ev.HeadlineRounded
			switch {
			case ev.HeadlineLine > 0:
				q.From = fmt.Sprintf("headline, line %d", ev.HeadlineLine)
			case ev.BinFor != nil:
				q.From = fmt.Sprintf("\"Bin for\" line, line %d", ev.BinFor.Line)
			}
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
