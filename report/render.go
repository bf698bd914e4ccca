package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/bfcsim/bfcsim/internal/textwrap"
)

// Formats are the names Render accepts.
var Formats = []string{"table", "json", "markdown", "csv"}

// Render writes rep to w in the named format.
func Render(w io.Writer, rep Report, format string) error {
	switch format {
	case "table":
		return WriteTable(w, rep)
	case "json":
		return WriteJSON(w, rep)
	case "markdown":
		return WriteMarkdown(w, rep)
	case "csv":
		return WriteCSV(w, rep)
	}
	return fmt.Errorf("unknown format %q (want one of %s)", format, strings.Join(Formats, ", "))
}

// WriteJSON writes report.json: the keys docs/metrics.md lists, indented.
func WriteJSON(w io.Writer, rep Report) error { return writeIndentedJSON(w, rep) }

// writeIndentedJSON writes v as the reports' JSON is written: indented by
// two spaces, one trailing newline.
func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// column is one column of the table and Markdown renderings.
type column struct {
	head  string
	value func(*Result) string
	// md is the Markdown heading, when it is not head in lower case.
	md string
}

var columns = []column{
	{"ALLOCATOR", func(r *Result) string { return r.Allocator }, ""},
	{"PEAK RESERVED", func(r *Result) string { return Bytes(r.PeakReservedBytes) }, ""},
	{"×LB", func(r *Result) string { return Times(r.FootprintVsLowerBound) }, "×LB"},
	{"PEAK IN USE", func(r *Result) string { return Bytes(r.PeakInUseBytes) }, ""},
	{"FRAG", func(r *Result) string { return Percent(r.Fragmentation) }, ""},
	{"WASTE@PEAK", func(r *Result) string { return Bytes(r.InternalWasteAtPeakBytes) }, ""},
	{"TF FRAG MAX", func(r *Result) string { return Percent(r.TFFragmentation.Max) }, ""},
	{"FAILED", func(r *Result) string { return strconv.FormatInt(r.FailedAllocs, 10) }, ""},
	{"DEVICE CALLS", func(r *Result) string {
		return strconv.FormatInt(r.DeviceReserveCalls+r.DeviceReleaseCalls, 10)
	}, ""},
	{"DEVICE TIME", deviceTime, ""},
	{"ALLOC P50", func(r *Result) string { return Nanos(float64(r.LatencyNs.Alloc.P50)) }, ""},
	{"ALLOC P99", func(r *Result) string { return Nanos(float64(r.LatencyNs.Alloc.P99)) }, ""},
	{"EVENTS/S", func(r *Result) string { return Rate(r.EventsPerSecond) }, ""},
}

// Times formats a footprint over the lower bound, "1.78×"; "-" for 0, a
// trace with nothing live.
func Times(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", x)
}

// traceSummary is the one-line description of a trace above its table.
func traceSummary(tr *Trace) string {
	s := fmt.Sprintf("%s (%s, %s, %s), peak live %s (the lower bound, LB), %s on a %s %s device",
		plural(tr.Events, "event"), plural(tr.Allocs, "alloc"), plural(tr.Frees, "free"), plural(tr.Steps, "step"),
		Bytes(tr.PeakLiveBytes), Bytes(tr.TotalAllocBytes)+" allocated in total",
		Bytes(tr.CapacityBytes), tr.Space)
	if tr.SkippedEvents > 0 {
		s += "; " + plural(tr.SkippedEvents, "invalid event") + " skipped"
	}
	return s
}

// oomNotes lists the allocators that failed allocations, and what a real
// GPU's calls took.
func oomNotes(tr *Trace) []string {
	var notes []string
	for i := range tr.Results {
		r := &tr.Results[i]
		if m := r.MeasuredDevice; m != nil && m.Calls > 0 {
			notes = append(notes, fmt.Sprintf("%s: on %s, %s took %s (one: median %s, 99th percentile %s); the cost model says %s",
				r.Allocator, m.Device, plural(m.Calls, "device call"), Seconds(m.Seconds),
				Seconds(float64(m.CallP50Ns)/1e9), Seconds(float64(m.CallP99Ns)/1e9), Seconds(r.ModeledDeviceSeconds)))
		}
	}
	for i := range tr.Results {
		r := &tr.Results[i]
		if r.FirstOOMEvent == nil {
			continue
		}
		n := fmt.Sprintf("%s: %s failed, the first at event %d (line %d)",
			r.Allocator, plural(r.FailedAllocs, "allocation"), *r.FirstOOMEvent, *r.FirstOOMLine)
		if r.Stopped {
			n += "; replay stopped there (--stop-on-oom)"
		}
		notes = append(notes, n)
	}
	return notes
}

// recordedFramework names, for bfc replaying a JAX or TensorFlow capture,
// the allocator it stands in for: " (XLA's BFC allocator, JAX 0.11.2)".
func recordedFramework(tr *Trace, allocator string) string {
	if tr.Header == nil || allocator != "bfc" {
		return ""
	}
	switch tr.Header.Source {
	case "jax-profiler":
		var v string
		if json.Unmarshal(tr.Header.Meta["jax_version"], &v) == nil && v != "" {
			return " (XLA's BFC allocator, JAX " + v + ")"
		}
		return " (XLA's BFC allocator, JAX)"
	case "tensorflow-profiler":
		return " (TensorFlow's BFC allocator)"
	}
	return ""
}

// recordingNotes say, for a trace recorded from a real program, which
// options each allocator took from the recording and how much of the
// recording the allocator that models the recorded one reproduced:
// addresses, block sizes, and allocations the program failed. (report.json
// has these counts for every allocator.)
func recordingNotes(tr *Trace) []string {
	var notes []string
	for i := range tr.Results {
		r := &tr.Results[i]
		if len(r.OptionsFromRecording) > 0 {
			kv := make([]string, len(r.OptionsFromRecording))
			for k, key := range r.OptionsFromRecording {
				kv[k] = fmt.Sprintf("%s=%v", key, r.Options[key])
			}
			notes = append(notes, fmt.Sprintf("%s: as recorded%s, %s (--set %s.KEY=VALUE for a what-if)",
				r.Allocator, recordedFramework(tr, r.Allocator), strings.Join(kv, " "), r.Allocator))
		}
		if len(r.OptionsFromRecording) == 0 && r.Allocator != recordedAllocator(tr) {
			continue // not the recorded allocator: its addresses are its own
		}
		var parts []string
		whatIf := r.RecordedDecisions != nil && r.RecordedDecisions.Outcome == "model"
		if m := r.RecordedAddressMatch; m != nil && !whatIf {
			// (A what-if puts its segments where the device model does:
			// its addresses are its own.)
			parts = append(parts, fmt.Sprintf("%s of %s recorded addresses", Count(m.Matched), Count(m.Checked)))
		}
		if m := r.RecordedBlockMatch; m != nil {
			parts = append(parts, fmt.Sprintf("%s of %s recorded block sizes", Count(m.Matched), Count(m.Checked)))
		}
		if m := r.RecordedOOMMatch; m != nil {
			parts = append(parts, fmt.Sprintf("%s of %s recorded out-of-memory failures", Count(m.Matched), Count(m.Checked)))
		}
		if len(parts) > 0 {
			list := parts[len(parts)-1]
			if len(parts) > 1 {
				list = strings.Join(parts[:len(parts)-1], ", ") + " and " + list
			}
			notes = append(notes, fmt.Sprintf("%s: reproduced %s", r.Allocator, list))
		}
		if n := notesOfDecisions(r.Allocator, r.RecordedDecisions); n != "" {
			notes = append(notes, n)
		}
		if peak, end, ok := recordedInUse(tr); ok && r.Allocator == recordedAllocator(tr) {
			notes = append(notes, fmt.Sprintf("%s: %s in use at the peak and %s at the end, where the recording had %s and %s",
				r.Allocator, Bytes(r.PeakInUseBytes), Bytes(uint64(max(r.AllocatorStats["bytes_in_use"], 0))), Bytes(peak), Bytes(end)))
		}
	}
	return notes
}

// recordedAllocator is the allocator that models the one a trace was
// recorded with: bfc for a TensorFlow profiler capture, else pytorch (the
// only other recorded allocator bfcsim models).
func recordedAllocator(tr *Trace) string {
	if tr.Header != nil && (tr.Header.Source == "tensorflow-profiler" || tr.Header.Source == "jax-profiler") {
		return "bfc"
	}
	return "pytorch"
}

// recordedInUse returns the bytes in use a TensorFlow capture recorded at
// its peak and at its end (header keys recorded_peak_in_use_bytes and
// recorded_end_in_use_bytes).
func recordedInUse(tr *Trace) (peak, end uint64, ok bool) {
	if tr.Header == nil {
		return 0, 0, false
	}
	p, okP := tr.Header.Meta["recorded_peak_in_use_bytes"]
	e, okE := tr.Header.Meta["recorded_end_in_use_bytes"]
	if !okP || !okE {
		return 0, 0, false
	}
	if json.Unmarshal(p, &peak) != nil || json.Unmarshal(e, &end) != nil {
		return 0, 0, false
	}
	return peak, end, true
}

// WriteTable writes an aligned terminal table per trace, one row per allocator.
func WriteTable(w io.Writer, rep Report) error {
	for i := range rep.Traces {
		tr := &rep.Traces[i]
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s: %s\n", tr.Name, traceSummary(tr))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		heads := make([]string, len(columns))
		for c, col := range columns {
			heads[c] = col.head
		}
		fmt.Fprintln(tw, strings.Join(heads, "\t"))
		for j := range tr.Results {
			cells := make([]string, len(columns))
			for c, col := range columns {
				cells[c] = col.value(&tr.Results[j])
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, n := range append(recordingNotes(tr), oomNotes(tr)...) {
			fmt.Fprintln(w, "  "+n)
		}
		for _, n := range heldNotes(tr) {
			for k, l := range textwrap.Lines(n, 100) {
				if k > 0 {
					l = "  " + l
				}
				fmt.Fprintln(w, "  "+l)
			}
		}
		if err := writeCallSitesText(w, tr); err != nil {
			return err
		}
		for j := range tr.Results {
			if d := tr.Results[j].OOM; d != nil {
				writeOOMText(w, tr.Name, tr.Results[j].Allocator, d)
			}
			if h := tr.Results[j].OOMExplained; h != nil {
				writeOOMExplainedText(w, tr.Results[j].Allocator, h)
			}
		}
	}
	return nil
}

// oomHeadline says which allocation failed and why, in one line.
func oomHeadline(allocator string, d *OOMDiagnostics) string {
	return fmt.Sprintf("%s ran out of memory allocating %s (rounded to %d) at line %d: %s",
		allocator, Bytes(d.RequestBytes), d.RoundedBytes, d.Line, d.Verdict)
}

// writeOOMText writes the diagnostics under the table: the cause, the
// occupancy strip, and where to find the full memory log.
func writeOOMText(w io.Writer, traceName, allocator string, d *OOMDiagnostics) {
	fmt.Fprintf(w, "\n%s\n", oomHeadline(allocator, d))
	for _, l := range textwrap.Lines(d.Explanation, 76) {
		fmt.Fprintln(w, "  "+l)
	}
	fmt.Fprintf(w, "  pool at the failure (* requested, x slack in in-use chunks, _ free):\n  |%s|\n", d.Occupancy)
	fmt.Fprintf(w, "  TensorFlow's full memory log: oom_diagnostics.memory_log in -f json, or %s with -o DIR\n",
		DumpFileName(traceName, allocator, "oom.log"))
}

// WriteMarkdown writes the report for a CI summary or a README.
func WriteMarkdown(w io.Writer, rep Report) error {
	b := &strings.Builder{}
	b.WriteString("# bfcsim report\n")
	for i := range rep.Traces {
		tr := &rep.Traces[i]
		fmt.Fprintf(b, "\n## %s\n\n", mdEscape(tr.Name))
		fmt.Fprintf(b, "%s: %s.\n\n", mdCode(tr.Path), mdEscape(traceSummary(tr)))
		b.WriteString("|")
		for _, col := range columns {
			head := col.md
			if head == "" {
				head = strings.ToLower(col.head)
			}
			fmt.Fprintf(b, " %s |", head)
		}
		b.WriteString("\n|")
		for c := range columns {
			if c == 0 {
				b.WriteString("---|")
			} else {
				b.WriteString("--:|")
			}
		}
		b.WriteString("\n")
		for j := range tr.Results {
			b.WriteString("|")
			for _, col := range columns {
				fmt.Fprintf(b, " %s |", mdEscape(col.value(&tr.Results[j])))
			}
			b.WriteString("\n")
		}
		notes := append(recordingNotes(tr), oomNotes(tr)...)
		for _, e := range tr.SkippedErrors {
			notes = append(notes, "skipped: "+e)
		}
		if n := tr.SkippedEvents - int64(len(tr.SkippedErrors)); n > 0 {
			notes = append(notes, "... and "+plural(n, "more invalid event")+" skipped")
		}
		if len(notes) > 0 {
			b.WriteString("\n")
			for _, n := range notes {
				fmt.Fprintf(b, "- %s\n", mdEscape(n))
			}
		}
		writeCallSitesMarkdown(b, tr)
		writeHeldMarkdown(b, tr)
		for j := range tr.Results {
			if d := tr.Results[j].OOM; d != nil {
				writeOOMMarkdown(b, tr.Results[j].Allocator, d)
			}
		}
		b.WriteString("\n### Allocators\n\n")
		for j := range tr.Results {
			r := &tr.Results[j]
			fmt.Fprintf(b, "- **%s**: options %s; stats %s\n", r.Allocator,
				mdCode(formatKV(r.Options)), mdCode(formatKV(r.AllocatorStats)))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeOOMMarkdown writes the diagnostics as a section: the cause, the
// occupancy strip, the non-empty bins, and the full memory log folded away.
func writeOOMMarkdown(b *strings.Builder, allocator string, d *OOMDiagnostics) {
	fmt.Fprintf(b, "\n### %s out of memory\n\n", mdEscape(allocator))
	fmt.Fprintf(b, "%s.\n\n%s\n\n", mdEscape(oomHeadline(allocator, d)), mdEscape(d.Explanation))
	fmt.Fprintf(b, "Pool at the failure (`*` requested, `x` slack in in-use chunks, `_` free):\n\n```\n|%s|\n```\n\n", d.Occupancy)
	b.WriteString("| bin | chunks | in use | bytes | bytes in use | requested in use |\n|--:|--:|--:|--:|--:|--:|\n")
	for _, bin := range d.Bins {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", Bytes(bin.BinSizeBytes), Count(bin.Chunks),
			Count(bin.ChunksInUse), Bytes(bin.Bytes), Bytes(bin.BytesInUse), Bytes(bin.RequestedInUse))
	}
	fence := "```"
	for strings.Contains(d.MemoryLog, fence) {
		fence += "`"
	}
	fmt.Fprintf(b, "\n<details><summary>TensorFlow's memory log</summary>\n\n%s\n%s%s\n\n</details>\n",
		fence, d.MemoryLog, fence)
}

// mdCode writes s as a Markdown code span on one line; a span holding
// backticks is fenced with two.
func mdCode(s string) string {
	s = oneLine(s)
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// oneLine replaces line breaks, which would end a heading or a table row.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}

// plural writes "1 allocation", "2 allocations", "1,200 allocations".
func plural(n int64, noun string) string { return Plural(n, noun, noun+"s") }

// mdEscape makes s literal text on one Markdown line.
func mdEscape(s string) string {
	return strings.NewReplacer("\\", `\\`, "|", `\|`, "*", `\*`, "_", `\_`, "`", "\\`",
		"<", "&lt;", ">", "&gt;").Replace(oneLine(s))
}

// formatKV writes a map as key=value pairs in key order, or "(none)".
func formatKV[V any](m map[string]V) string {
	if len(m) == 0 {
		return "(none)"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// csvHeader names the CSV columns: one row per trace and allocator, raw numbers.
var csvHeader = []string{
	"trace", "path", "allocator", "events", "ok_allocs", "failed_allocs", "first_oom_event",
	"peak_live_bytes", "peak_in_use_bytes", "peak_reserved_bytes", "final_reserved_bytes",
	"fragmentation", "utilization", "footprint_vs_lower_bound", "internal_waste_at_peak_bytes",
	"tf_fragmentation_max", "tf_fragmentation_mean",
	"device_reserve_calls", "device_release_calls", "modeled_device_seconds",
	"alloc_p50_ns", "alloc_p90_ns", "alloc_p99_ns", "alloc_p999_ns", "alloc_max_ns", "alloc_mean_ns",
	"free_p50_ns", "free_p90_ns", "free_p99_ns", "free_p999_ns", "free_max_ns", "free_mean_ns",
	"replay_seconds", "events_per_second",
}

// WriteCSV writes one row per trace and allocator.
func WriteCSV(w io.Writer, rep Report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	u := func(n uint64) string { return strconv.FormatUint(n, 10) }
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	for t := range rep.Traces {
		tr := &rep.Traces[t]
		for j := range tr.Results {
			r := &tr.Results[j]
			oom := ""
			if r.FirstOOMEvent != nil {
				oom = i(*r.FirstOOMEvent)
			}
			a, fr := r.LatencyNs.Alloc, r.LatencyNs.Free
			row := []string{
				tr.Name, tr.Path, r.Allocator, i(r.Events), i(r.OKAllocs), i(r.FailedAllocs), oom,
				u(r.PeakLiveBytes), u(r.PeakInUseBytes), u(r.PeakReservedBytes), u(r.FinalReservedBytes),
				f(r.Fragmentation), f(r.Utilization), f(r.FootprintVsLowerBound), u(r.InternalWasteAtPeakBytes),
				f(r.TFFragmentation.Max), f(r.TFFragmentation.Mean),
				i(r.DeviceReserveCalls), i(r.DeviceReleaseCalls), f(r.ModeledDeviceSeconds),
				i(a.P50), i(a.P90), i(a.P99), i(a.P999), i(a.Max), f(a.Mean),
				i(fr.P50), i(fr.P90), i(fr.P99), i(fr.P999), i(fr.Max), f(fr.Mean),
				f(r.ReplaySeconds), f(r.EventsPerSecond),
			}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// deviceTime is the device time of a result: the model's, or on a real GPU
// what its calls took, with the model's beside it.
func deviceTime(r *Result) string {
	if m := r.MeasuredDevice; m != nil {
		return Seconds(m.Seconds) + " (model " + Seconds(r.ModeledDeviceSeconds) + ")"
	}
	return Seconds(r.ModeledDeviceSeconds)
}
