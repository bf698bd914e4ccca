package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/bfcsim/bfcsim/internal/textwrap"
)

// share formats part of whole as a percentage, "66.3%".
func share(part, whole uint64) string {
	if whole == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

// callSitesHeading introduces a trace's peak table.
func callSitesHeading(tr *Trace) string {
	return fmt.Sprintf("Live at the peak (%s), by call site", Bytes(tr.PeakLiveBytes))
}

// writeCallSitesText writes the peak table under a trace's table.
func writeCallSitesText(w io.Writer, tr *Trace) error {
	if len(tr.PeakCallSites) == 0 || tr.PeakLiveBytes == 0 {
		return nil
	}
	fmt.Fprintf(w, "\n%s:\n", callSitesHeading(tr))
	rows := [][3]string{{"BYTES", "SHARE", "ALLOCS"}}
	for _, c := range tr.PeakCallSites {
		rows = append(rows, [3]string{Bytes(c.Bytes), share(c.Bytes, tr.PeakLiveBytes), Count(c.Count)})
	}
	var width [3]int
	for _, r := range rows {
		for k, cell := range r {
			width[k] = max(width[k], utf8.RuneCountInString(cell))
		}
	}
	for i, r := range rows {
		site := "CALL SITE"
		if i > 0 {
			site = tr.PeakCallSites[i-1].CallSite
		}
		if _, err := fmt.Fprintf(w, "  %*s  %*s  %*s  %s\n", width[0], r[0], width[1], r[1], width[2], r[2], site); err != nil {
			return err
		}
	}
	return nil
}

// heldLine says in one line what an allocator's reserved bytes held.
func heldLine(h *Held) string {
	s := fmt.Sprintf("%s reserved: %s live (%s in blocks), %s cached free, the largest free range %s",
		Bytes(h.ReservedBytes), Bytes(h.LiveBytes), Bytes(h.InUseBytes), Bytes(h.CachedFreeBytes), Bytes(h.LargestFreeBytes))
	if h.EmptyRegions > 0 {
		s += fmt.Sprintf("; %s in %s holding nothing live", Bytes(h.EmptyRegionBytes), plural(int64(h.EmptyRegions), "reservation"))
	}
	return s
}

// pinnedBy names the live blocks that bound a free range.
func pinnedBy(r HeldRange) string {
	var sides []string
	if r.Below != nil {
		sides = append(sides, "below it "+r.Below.CallSite+" ("+Bytes(r.Below.Bytes)+")")
	}
	if r.Above != nil {
		sides = append(sides, "above it "+r.Above.CallSite+" ("+Bytes(r.Above.Bytes)+")")
	}
	if len(sides) == 0 {
		return "nothing live in its reservation"
	}
	return strings.Join(sides, ", ")
}

// heldNotes describe, for each allocator, its reserved bytes at their peak.
func heldNotes(tr *Trace) []string {
	var notes []string
	for i := range tr.Results {
		r := &tr.Results[i]
		h := r.ReservedAtPeak
		if h == nil || h.CachedFreeBytes == 0 {
			continue // all of it live: the table says so
		}
		n := fmt.Sprintf("%s at its peak (line %d): %s", r.Allocator, h.Line, heldLine(h))
		if len(h.FreeRanges) > 0 && h.CachedFreeBytes > 0 {
			n += "; the largest kept apart by " + pinnedBy(h.FreeRanges[0])
		}
		notes = append(notes, n)
	}
	return notes
}

// oomExplainedHeadline says in one line why an allocator failed first.
func oomExplainedHeadline(allocator string, h *Held) string {
	return fmt.Sprintf("%s could not allocate %s at line %d: %s", allocator, Bytes(h.RequestBytes), h.Line, h.Verdict)
}

// writeOOMExplainedText explains an allocator's first failed allocation.
func writeOOMExplainedText(w io.Writer, allocator string, h *Held) {
	fmt.Fprintf(w, "\n%s\n", oomExplainedHeadline(allocator, h))
	for _, l := range textwrap.Lines(h.Explanation+".", 76) {
		fmt.Fprintln(w, "  "+l)
	}
	for _, l := range textwrap.Lines("then: "+heldLine(h), 76) {
		fmt.Fprintln(w, "  "+l)
	}
	for i, c := range h.CallSites {
		if i == 3 {
			break
		}
		fmt.Fprintf(w, "  live: %s %s (%s)\n", Bytes(c.Bytes), c.CallSite, plural(c.Count, "allocation"))
	}
	for i, r := range h.FreeRanges {
		if i == 2 || h.Verdict == VerdictNoRoom {
			break
		}
		fmt.Fprintf(w, "  free: %s, %s\n", Bytes(r.Bytes), pinnedBy(r))
	}
}

// writeCallSitesMarkdown writes the peak table as a section.
func writeCallSitesMarkdown(b *strings.Builder, tr *Trace) {
	if len(tr.PeakCallSites) == 0 || tr.PeakLiveBytes == 0 {
		return
	}
	fmt.Fprintf(b, "\n### %s\n\n| bytes | share | allocations | call site |\n|--:|--:|--:|---|\n", mdEscape(callSitesHeading(tr)))
	for _, c := range tr.PeakCallSites {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", Bytes(c.Bytes), share(c.Bytes, tr.PeakLiveBytes), Count(c.Count), mdCode(c.CallSite))
	}
}

// writeHeldMarkdown writes, for each allocator, what its reserved bytes
// held at their peak and, after a failed allocation, why it failed.
func writeHeldMarkdown(b *strings.Builder, tr *Trace) {
	for i := range tr.Results {
		r := &tr.Results[i]
		if h := r.OOMExplained; h != nil {
			fmt.Fprintf(b, "\n### %s: why the first allocation failed\n\n%s.\n\n%s.\n\n", mdEscape(r.Allocator),
				mdEscape(oomExplainedHeadline(r.Allocator, h)), mdEscape(h.Explanation))
			writeHeldTableMarkdown(b, h)
		}
	}
	notes := heldNotes(tr)
	if len(notes) == 0 {
		return
	}
	b.WriteString("\n### Reserved at the peak\n\n")
	for _, n := range notes {
		fmt.Fprintf(b, "- %s\n", mdEscape(n))
	}
}

func writeHeldTableMarkdown(b *strings.Builder, h *Held) {
	fmt.Fprintf(b, "Then: %s.\n\n", mdEscape(heldLine(h)))
	if len(h.CallSites) > 0 {
		b.WriteString("| live bytes | allocations | call site |\n|--:|--:|---|\n")
		for _, c := range h.CallSites {
			fmt.Fprintf(b, "| %s | %s | %s |\n", Bytes(c.Bytes), Count(c.Count), mdCode(c.CallSite))
		}
		b.WriteString("\n")
	}
	if len(h.FreeRanges) > 0 {
		b.WriteString("| free range | kept apart by |\n|--:|---|\n")
		for _, r := range h.FreeRanges {
			fmt.Fprintf(b, "| %s | %s |\n", Bytes(r.Bytes), mdEscape(pinnedBy(r)))
		}
	}
}
