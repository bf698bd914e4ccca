package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/bfcsim/bfcsim/internal/sticky"
)

// DiffTopCallSites is how many call sites the text and Markdown of a diff
// name; the rest are summed in one row, so that the column adds up to the
// peaks' difference.
const DiffTopCallSites = 15

// RenderDiff writes d in the named format.
func RenderDiff(w io.Writer, d Diff, format string) error {
	switch format {
	case "json":
		return writeIndentedJSON(w, d)
	case "table":
		return writeDiffTable(w, d)
	case "markdown":
		return WriteDiffMarkdown(w, d)
	}
	return fmt.Errorf("unknown format %q (want one of %s)", format, strings.Join(DiffFormats, ", "))
}

// sideName names a run for a report: its file, with its trace's name
// when the file's does not say it.
func sideName(s DiffSide) string {
	if s.Path == "" || strings.Contains(s.Path, strings.TrimSuffix(s.Trace, "-scaled")) {
		return s.Path
	}
	return s.Trace + " (" + s.Path + ")"
}

// optBytes writes a figure one run may lack.
func optBytes(v *uint64) string {
	if v == nil {
		return "-"
	}
	return Bytes(*v)
}

// optChange writes the change between two figures either run may lack.
func optChange(b, a *uint64) string {
	if b == nil || a == nil {
		return "-"
	}
	return change(*b, *a)
}

// allocatorCells are an allocator's row in every rendering: its peak of
// reserved bytes before → after and the change, fit's answer before →
// after and the change.
func allocatorCells(a DiffAllocator) [4]string {
	return [4]string{
		optBytes(a.PeakReservedBytes[0]) + " → " + optBytes(a.PeakReservedBytes[1]),
		optChange(a.PeakReservedBytes[0], a.PeakReservedBytes[1]),
		fitText(a, 0) + " → " + fitText(a, 1),
		optChange(a.MinCapacityBytes[0], a.MinCapacityBytes[1]),
	}
}

// writeCallSiteTable writes call sites as a Markdown table, the runs'
// columns headed before and after, growth in bold, and a last row, total,
// with their change in all.
func writeCallSiteTable(b *strings.Builder, rows []DiffCallSite, before, after, total string, sum int64) {
	fmt.Fprintf(b, "| call site | %s | %s | change | allocations |\n|---|--:|--:|--:|--:|\n", before, after)
	for _, c := range rows {
		delta := SignedBytes(c.DeltaBytes)
		if c.DeltaBytes > 0 {
			delta = "**" + delta + "**"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", mdCode(c.CallSite), Bytes(c.BeforeBytes), Bytes(c.AfterBytes), delta, mdEscape(counts(c)))
	}
	fmt.Fprintf(b, "| %s | | | %s | |\n", total, SignedBytes(sum))
}

// shownCallSites are the rows a text report shows: the call sites that
// changed, the largest growth first, at most DiffTopCallSites, with the
// rest summed in a last row; and how many did not change.
func shownCallSites(d Diff) (rows []DiffCallSite, unchanged int) {
	var changed []DiffCallSite
	for _, c := range d.CallSites {
		if c.DeltaBytes != 0 || c.BeforeCount != c.AfterCount {
			changed = append(changed, c)
		} else {
			unchanged++
		}
	}
	if len(changed) <= DiffTopCallSites {
		return changed, unchanged
	}
	// The largest growths and the largest shrinks, the rest between.
	head := changed[:DiffTopCallSites-DiffTopCallSites/3]
	tail := changed[len(changed)-DiffTopCallSites/3:]
	rest := DiffCallSite{CallSite: fmt.Sprintf("(%d other call sites)", len(changed)-len(head)-len(tail))}
	for _, c := range changed[len(head) : len(changed)-len(tail)] {
		rest.BeforeBytes += c.BeforeBytes
		rest.AfterBytes += c.AfterBytes
		rest.DeltaBytes += c.DeltaBytes
		rest.BeforeCount += c.BeforeCount
		rest.AfterCount += c.AfterCount
	}
	rows = append(append(append(rows, head...), rest), tail...)
	return rows, unchanged
}

func counts(c DiffCallSite) string {
	s := Count(c.BeforeCount) + " → " + Count(c.AfterCount)
	if c.Status != "" {
		s += " (" + c.Status + ")"
	}
	return s
}

func writeDiffTable(w io.Writer, d Diff) error {
	ew := &sticky.Writer{W: w}
	ew.Printf("bfcsim diff: %s → %s\n", sideName(d.Before), sideName(d.After))
	ew.Printf("peak live: %s → %s, %s\n", Bytes(d.Before.PeakLiveBytes), Bytes(d.After.PeakLiveBytes),
		change(d.Before.PeakLiveBytes, d.After.PeakLiveBytes))
	if b, a := d.Before.Phase(), d.After.Phase(); b != "" || a != "" {
		ew.Printf("peaks in: %s → %s\n", orDash(b), orDash(a))
	}
	tw := tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "\nALLOCATOR\tPEAK RESERVED\tCHANGE\tFIT\tCHANGE\n")
	for _, a := range d.Allocators {
		c := allocatorCells(a)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Allocator, c[0], c[1], c[2], c[3])
	}
	rows, unchanged := shownCallSites(d)
	if len(rows) > 0 {
		fmt.Fprintf(tw, "\nCALL SITE (LIVE AT THE PEAK)\tBEFORE\tAFTER\tCHANGE\tALLOCATIONS\n")
		for _, c := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.CallSite, Bytes(c.BeforeBytes), Bytes(c.AfterBytes), SignedBytes(c.DeltaBytes), counts(c))
		}
		fmt.Fprintf(tw, "(the peaks' difference)\t\t\t%s\t\n", SignedBytes(d.PeakDeltaBytes))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case len(d.CallSites) == 0:
	case len(rows) == 0:
		ew.Printf("\nno call site holds more or less at the peak (%s compared)\n", Plural(int64(unchanged), "call site", "call sites"))
	case unchanged > 0:
		ew.Printf("%s held the same at both peaks\n", Plural(int64(unchanged), "other call site", "other call sites"))
	}
	for _, n := range d.Notes {
		ew.Printf("note: %s\n", n)
	}
	if d.MaxGrowth != "" {
		if len(d.Exceeded) == 0 {
			ew.Printf("\nnothing grew beyond --max-growth %s\n", d.MaxGrowth)
		} else {
			ew.Printf("\ngrew beyond --max-growth %s: %s\n", d.MaxGrowth, strings.Join(d.Exceeded, "; "))
		}
	}
	return ew.Err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// fitText writes fit's answer for one run: its smallest device, "no
// device" when none fits, "-" when the run did not replay the allocator.
func fitText(a DiffAllocator, side int) string {
	switch {
	case a.PeakReservedBytes[side] == nil:
		return "-"
	case !a.Fits[side]:
		return "no device"
	}
	return Bytes(*a.MinCapacityBytes[side])
}

// WriteDiffMarkdown writes d as Markdown fit for a CI job summary
// ($GITHUB_STEP_SUMMARY): what grew beyond --max-growth first, then the
// peaks, the allocators and the call sites that changed.
func WriteDiffMarkdown(w io.Writer, d Diff) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "# bfcsim diff\n\n%s → %s: peak live %s → %s, **%s**.\n", mdCode(sideName(d.Before)), mdCode(sideName(d.After)),
		Bytes(d.Before.PeakLiveBytes), Bytes(d.After.PeakLiveBytes), change(d.Before.PeakLiveBytes, d.After.PeakLiveBytes))
	if bp, ap := d.Before.Phase(), d.After.Phase(); bp != "" || ap != "" {
		fmt.Fprintf(b, "The peak falls in %s before, %s after.\n", mdEscape(orDash(bp)), mdEscape(orDash(ap)))
	}
	if d.MaxGrowth != "" {
		if len(d.Exceeded) == 0 {
			fmt.Fprintf(b, "\nNothing grew beyond `--max-growth %s`.\n", d.MaxGrowth)
		} else {
			fmt.Fprintf(b, "\n**Grew beyond `--max-growth %s`:**\n\n", d.MaxGrowth)
			for _, e := range d.Exceeded {
				fmt.Fprintf(b, "- %s\n", mdEscape(e))
			}
		}
	}
	b.WriteString("\n| allocator | peak reserved | change | fit | change |\n|---|--:|--:|--:|--:|\n")
	for _, a := range d.Allocators {
		c := allocatorCells(a)
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", mdEscape(a.Allocator), c[0], c[1], c[2], c[3])
	}
	rows, unchanged := shownCallSites(d)
	if len(rows) > 0 {
		b.WriteString("\nLive at the peak, by call site, the largest growth first:\n\n")
		writeCallSiteTable(b, rows, "before", "after", "the peaks' difference", d.PeakDeltaBytes)
		if unchanged > 0 {
			fmt.Fprintf(b, "\n%s held the same at both peaks.\n", Plural(int64(unchanged), "other call site", "other call sites"))
		}
	} else if len(d.CallSites) > 0 {
		fmt.Fprintf(b, "\nNo call site holds more or less at the peak (%s compared).\n", Plural(int64(unchanged), "call site", "call sites"))
	}
	for _, n := range d.Notes {
		fmt.Fprintf(b, "\nNote: %s.\n", mdEscape(n))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
