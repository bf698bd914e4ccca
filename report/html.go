package report

// The HTML report: index.html, one self-contained page.
//
// WriteHTML renders the same Report the other renderers read, plus the plots
// the caller made of it, as one page that needs nothing else: the stylesheet
// is inline, every image is a data: URI, and there are no fonts, scripts or
// links to the network, so the page can be mailed, attached to a CI run or
// opened from a file system with no network. The SVG and PNG files beside
// index.html are linked by their bare names, for a better look at a plot.
//
//  1. A view model is built first (htmlPage): every number already formatted
//     with format.go's helpers, every map sorted by key, every figure placed
//     with its trace or allocator. Errors (a figure naming a trace or an
//     allocator the report does not have) come out of this step.
//  2. html/template renders the view model. It escapes every string, which
//     matters because trace names, paths, header metadata and allocator
//     options come from users. Only the <img> tags WriteHTML builds itself,
//     of the PNG bytes in base64 and their escaped alt text, are marked as
//     safe HTML: the template's escaping would otherwise pass over every
//     byte of every image, a third of the page's time.
//  3. The page is written to w only once it is complete.
//
// The page, per trace: a heading and the trace's one-line summary, a table of
// facts, the trace-wide figures (timeline, fragmentation, latency), a
// comparison table with every report.json metric (docs/metrics.md) (rows) for every allocator
// (columns), and a section per allocator with its options, its own counters,
// its OOM diagnostics and its own figures (memmap, occupancy). Wall-clock
// timings are shaded and tagged: they are the only numbers that vary from run
// to run, so a reader comparing two reports knows which differences matter.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// HTMLFigure is one plot shown in the HTML report.
type HTMLFigure struct {
	Trace     int    // index into Report.Traces
	Allocator string // "" for a figure of the whole trace (timeline, fragmentation, latency); else the allocator's own (memmap, occupancy)
	Kind      string // timeline, memmap, occupancy, fragmentation, latency
	Title     string // caption
	PNG       []byte // the image, embedded in the page as a data: URI (base64)
	SVGFile   string // file name of the SVG beside index.html, linked as "SVG"; may be ""
	PNGFile   string // file name of the PNG beside index.html, linked as "PNG"; may be ""
}

// figureOrder is the order figures appear in within their section: the trace's
// own (timeline, fragmentation, latency), then each allocator's (memmap,
// occupancy). Kinds not listed follow, in the order they were given.
var figureOrder = map[string]int{"timeline": 0, "fragmentation": 1, "latency": 2, "memmap": 3, "occupancy": 4}

// WriteHTML writes index.html: one self-contained page (no network: inline CSS, images as data URIs, no external fonts/scripts).
//
// A figure whose Trace is out of range, or whose Allocator is not among that
// trace's results, is an error and nothing is written. Where a trace holds
// the same allocator twice, its figures go with the first.
func WriteHTML(w io.Writer, rep Report, figs []HTMLFigure) error {
	page, err := newHTMLPage(rep, figs)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := htmlPageTemplate.Execute(&buf, page); err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// htmlPage is the view model of the page: everything already formatted.
type htmlPage struct {
	Title  string
	Intro  string
	Traces []*htmlTrace
	// ExploreJSON is the interactive view's data and ExploreScript its
	// code; both empty when no trace has a recorded memory map.
	ExploreJSON   template.JS
	ExploreScript template.JS
}

type htmlTrace struct {
	ID, Name, Path, Summary string
	// Verdict is the trace's result in one line: the allocator that
	// reserves least, its ×LB, and who failed allocations.
	Verdict string
	// Explore says the page draws the trace's interactive memory view;
	// ExploreNote what it draws of it.
	Explore     bool
	ExploreNote string
	Facts       []htmlKV
	Skipped     []string
	Figures     []htmlFig
	Span        int // columns of the comparison table
	Rows        []htmlRow
	HasTimings  bool
	Notes       []string
	Allocators  []*htmlAllocator
	// CallSites are the bytes live at the peak by call site.
	CallSitesHeading string
	CallSites        []htmlCallSite
}

// htmlCallSite is one row of a call-site table, with the stack of its
// largest allocations when the trace carries stacks.
type htmlCallSite struct {
	Bytes, Share, Count, Site string
	Stack                     []string
}

// htmlHeld is what an allocator's reserved bytes held at one moment.
type htmlHeld struct {
	Title, Line          string
	Verdict, Explanation string
	Sites                []htmlCallSite
	Ranges               []htmlKV
}

func newHTMLHeld(title string, h *Held) *htmlHeld {
	if h == nil {
		return nil
	}
	out := &htmlHeld{Title: title, Line: heldLine(h), Verdict: h.Verdict, Explanation: h.Explanation}
	out.Sites = htmlCallSites(h.CallSites, h.LiveBytes)
	for _, r := range h.FreeRanges {
		out.Ranges = append(out.Ranges, htmlKV{Key: Bytes(r.Bytes), Value: pinnedBy(r), Title: fmt.Sprintf("%d bytes at %#x", r.Bytes, r.Addr)})
	}
	return out
}

func htmlCallSites(sites []CallSite, whole uint64) []htmlCallSite {
	var out []htmlCallSite
	for _, c := range sites {
		out = append(out, htmlCallSite{Bytes: Bytes(c.Bytes), Share: share(c.Bytes, whole), Count: Count(c.Count), Site: c.CallSite, Stack: c.Stack})
	}
	return out
}

// htmlKV is one row of a two-column table.
type htmlKV struct {
	Key, Value string
	Title      string // exact value on hover, when Value is rounded
	Num        bool   // right-aligned
}

// htmlRow is one metric of the comparison table; a row whose Group is set
// starts a new group of metrics under a sub-heading.
type htmlRow struct {
	Group      string
	Label, Key string
	Timing     bool
	Cells      []htmlCell
}

type htmlCell struct {
	Text, Title string
	Class       string // "best", "bad" or ""
	// Jump, when set, makes the value a link to the moment it happened in
	// the interactive view (the peak, the first failed allocation).
	Jump *htmlJump
}

// htmlJump is a link into a trace's interactive view: its allocator (by
// index) and an event.
type htmlJump struct {
	Trace string
	Alloc int
	Event int64
}

type htmlAllocator struct {
	ID, Name     string
	Options      []htmlKV
	SpaceOptions []htmlKV
	Stats        []htmlKV
	FirstOOM     string
	OOM          *htmlOOM
	Held         *htmlHeld // at the peak of reserved bytes
	OOMHeld      *htmlHeld // at the first failed allocation
	Figures      []htmlFig
}

type htmlOOM struct {
	Headline, Verdict, Explanation string
	Occupancy, MemoryLog           string
	Bins                           [][]string
}

type htmlFig struct {
	Kind, Caption    string
	Img              template.HTML // the PNG as an <img> of a data: URI; "" when the figure has no PNG
	SVGFile, PNGFile string
}

// htmlMetric is one row of the comparison table: a report.json metric.
type htmlMetric struct {
	group  string // starts a group of rows when set
	label  string
	key    string // the metric's key in report.json
	timing bool   // a wall-clock measurement, which varies from run to run
	// better is -1 when lower is better, +1 when higher is better, 0 when
	// neither; the best values of a row are shaded when they differ.
	better int
	// bad shades a cell that means trouble (a failed allocation).
	bad func(*Result) bool
	// value formats the metric; ok is false where the result has none.
	value func(*Result) (text, title string, v float64, ok bool)
	// only, when set, keeps the row only if it holds for some result.
	only func(*Result) bool
}

func byteCell(n uint64) (string, string, float64, bool) {
	return Bytes(n), Count(int64(n)) + " bytes", float64(n), true
}

func countCell(n int64) (string, string, float64, bool) { return Count(n), "", float64(n), true }

func fracCell(x float64) (string, string, float64, bool) {
	return Percent(x), strconv.FormatFloat(x, 'g', 6, 64), x, true
}

func nanosCell(ns float64) (string, string, float64, bool) { return Nanos(ns), "", ns, true }

// latencyMetrics are the rows of one call's latency distribution.
func latencyMetrics(call string, l func(*Result) *Latency) []htmlMetric {
	ns := func(f func(*Latency) float64) func(*Result) (string, string, float64, bool) {
		return func(r *Result) (string, string, float64, bool) { return nanosCell(f(l(r))) }
	}
	group := call + " latency"
	group = strings.ToUpper(group[:1]) + group[1:]
	return []htmlMetric{
		{group: group, label: call + " p50", key: "latency_ns." + call + ".p50", timing: true, value: ns(func(l *Latency) float64 { return float64(l.P50) })},
		{label: call + " p90", key: "latency_ns." + call + ".p90", timing: true, value: ns(func(l *Latency) float64 { return float64(l.P90) })},
		{label: call + " p99", key: "latency_ns." + call + ".p99", timing: true, value: ns(func(l *Latency) float64 { return float64(l.P99) })},
		{label: call + " p99.9", key: "latency_ns." + call + ".p999", timing: true, value: ns(func(l *Latency) float64 { return float64(l.P999) })},
		{label: call + " max", key: "latency_ns." + call + ".max", timing: true, value: ns(func(l *Latency) float64 { return float64(l.Max) })},
		{label: call + " mean", key: "latency_ns." + call + ".mean", timing: true, value: ns(func(l *Latency) float64 { return l.Mean })},
	}
}

// htmlMetrics are the comparison table's rows, in order: every report.json metric (docs/metrics.md).
var htmlMetrics = slices.Concat([]htmlMetric{
	{group: "Allocations", label: "OK allocations", key: "ok_allocs", better: +1,
		value: func(r *Result) (string, string, float64, bool) { return countCell(r.OKAllocs) }},
	{label: "Failed allocations", key: "failed_allocs", better: -1,
		bad:   func(r *Result) bool { return r.FailedAllocs > 0 },
		value: func(r *Result) (string, string, float64, bool) { return countCell(r.FailedAllocs) }},
	{label: "First OOM event", key: "first_oom_event",
		bad: func(r *Result) bool { return r.FirstOOMEvent != nil },
		value: func(r *Result) (string, string, float64, bool) {
			if r.FirstOOMEvent == nil {
				return "none", "", 0, false
			}
			s := strconv.FormatInt(*r.FirstOOMEvent, 10)
			if r.FirstOOMLine != nil {
				s += " (line " + strconv.FormatInt(*r.FirstOOMLine, 10) + ")"
			}
			title := ""
			if r.Stopped {
				s += ", stopped"
				title = "the replay stopped at this event (--stop-on-oom)"
			}
			return s, title, float64(*r.FirstOOMEvent), true
		}},
	{label: "Events replayed", key: "events",
		value: func(r *Result) (string, string, float64, bool) { return countCell(r.Events) }},

	{group: "Footprint", label: "Peak live", key: "peak_live_bytes",
		value: func(r *Result) (string, string, float64, bool) { return byteCell(r.PeakLiveBytes) }},
	{label: "Peak in use", key: "peak_in_use_bytes", better: -1,
		value: func(r *Result) (string, string, float64, bool) { return byteCell(r.PeakInUseBytes) }},
	{label: "Peak reserved", key: "peak_reserved_bytes", better: -1,
		value: func(r *Result) (string, string, float64, bool) { return byteCell(r.PeakReservedBytes) }},
	{label: "Peak reserved ÷ lower bound", key: "footprint_vs_lower_bound", better: -1,
		value: func(r *Result) (string, string, float64, bool) {
			x := r.FootprintVsLowerBound
			return Times(x), "peak reserved over the trace's peak live bytes: " + strconv.FormatFloat(x, 'g', 6, 64),
				x, x > 0
		}},
	{label: "Final reserved", key: "final_reserved_bytes", better: -1,
		value: func(r *Result) (string, string, float64, bool) { return byteCell(r.FinalReservedBytes) }},
	{label: "Internal waste at peak", key: "internal_waste_at_peak_bytes", better: -1,
		value: func(r *Result) (string, string, float64, bool) { return byteCell(r.InternalWasteAtPeakBytes) }},

	{group: "Fragmentation", label: "Fragmentation", key: "fragmentation", better: -1,
		value: func(r *Result) (string, string, float64, bool) { return fracCell(r.Fragmentation) }},
	{label: "Utilization", key: "utilization", better: +1,
		value: func(r *Result) (string, string, float64, bool) { return fracCell(r.Utilization) }},
	{label: "TF fragmentation max", key: "tf_fragmentation.max", better: -1,
		value: func(r *Result) (string, string, float64, bool) { return fracCell(r.TFFragmentation.Max) }},
	{label: "TF fragmentation mean", key: "tf_fragmentation.mean", better: -1,
		value: func(r *Result) (string, string, float64, bool) { return fracCell(r.TFFragmentation.Mean) }},

	{group: "Device", label: "Device reserve calls", key: "device_reserve_calls", better: -1,
		value: func(r *Result) (string, string, float64, bool) { return countCell(r.DeviceReserveCalls) }},
	{label: "Device release calls", key: "device_release_calls", better: -1,
		value: func(r *Result) (string, string, float64, bool) { return countCell(r.DeviceReleaseCalls) }},
	{label: "Failed device reserves", key: "failed_device_reserves", better: -1,
		bad:   func(r *Result) bool { return r.FailedDeviceReserves > 0 },
		value: func(r *Result) (string, string, float64, bool) { return countCell(r.FailedDeviceReserves) }},
	{label: "Modeled device time", key: "modeled_device_seconds", better: -1,
		value: func(r *Result) (string, string, float64, bool) {
			return Seconds(r.ModeledDeviceSeconds), strconv.FormatFloat(r.ModeledDeviceSeconds, 'g', -1, 64) + " s",
				r.ModeledDeviceSeconds, true
		}},
	{label: "Measured device time", key: "measured_device.seconds", better: -1,
		only: func(r *Result) bool { return r.MeasuredDevice != nil },
		value: func(r *Result) (string, string, float64, bool) {
			m := r.MeasuredDevice
			if m == nil {
				return "n/a", "", 0, false
			}
			return Seconds(m.Seconds), fmt.Sprintf("%s device calls on %s; one: median %s, 99th percentile %s",
				Count(m.Calls), m.Device, Seconds(float64(m.CallP50Ns)/1e9), Seconds(float64(m.CallP99Ns)/1e9)), m.Seconds, true
		}},
	{label: "Recorded addresses matched", key: "recorded_address_match", better: +1,
		only: func(r *Result) bool { return r.RecordedAddressMatch != nil },
		value: func(r *Result) (string, string, float64, bool) {
			m := r.RecordedAddressMatch
			if m == nil {
				return "n/a", "", 0, false
			}
			frac := 0.0
			if m.Checked > 0 {
				frac = float64(m.Matched) / float64(m.Checked)
			}
			return fmt.Sprintf("%s / %s (%s)", Count(m.Matched), Count(m.Checked), Percent(frac)), "", frac, true
		}},
	{label: "Recorded blocks matched", key: "recorded_block_match", better: +1,
		only: func(r *Result) bool { return r.RecordedBlockMatch != nil },
		value: func(r *Result) (string, string, float64, bool) {
			m := r.RecordedBlockMatch
			if m == nil {
				return "n/a", "", 0, false
			}
			frac := 0.0
			if m.Checked > 0 {
				frac = float64(m.Matched) / float64(m.Checked)
			}
			return fmt.Sprintf("%s / %s (%s)", Count(m.Matched), Count(m.Checked), Percent(frac)), "", frac, true
		}},
	{label: "Recorded out-of-memory failures reproduced", key: "recorded_oom_match", better: +1,
		only: func(r *Result) bool { return r.RecordedOOMMatch != nil },
		value: func(r *Result) (string, string, float64, bool) {
			m := r.RecordedOOMMatch
			if m == nil {
				return "n/a", "", 0, false
			}
			frac := float64(m.Matched) / float64(m.Checked)
			return fmt.Sprintf("%s / %s", Count(m.Matched), Count(m.Checked)), "", frac, true
		}},
},
	latencyMetrics("alloc", func(r *Result) *Latency { return &r.LatencyNs.Alloc }),
	latencyMetrics("free", func(r *Result) *Latency { return &r.LatencyNs.Free }),
	[]htmlMetric{{label: "Calls timed: one in", key: "latency_sample_every", timing: true,
		value: func(r *Result) (string, string, float64, bool) { return countCell(int64(r.LatencySampleEvery)) }}},
	[]htmlMetric{
		{group: "Replay", label: "Replay time", key: "replay_seconds", timing: true,
			value: func(r *Result) (string, string, float64, bool) {
				return Seconds(r.ReplaySeconds), strconv.FormatFloat(r.ReplaySeconds, 'g', -1, 64) + " s", r.ReplaySeconds, true
			}},
		{label: "Events per second", key: "events_per_second", timing: true,
			value: func(r *Result) (string, string, float64, bool) {
				return Rate(r.EventsPerSecond), "", r.EventsPerSecond, true
			}},
	},
)

// newHTMLPage builds the view model.
func newHTMLPage(rep Report, figs []HTMLFigure) (*htmlPage, error) {
	page := &htmlPage{Title: "bfcsim report"}
	var names []string
	var explore exploreData
	for i := range rep.Traces {
		tr := &rep.Traces[i]
		names = append(names, tr.Name)
		ht := newHTMLTrace(i, tr)
		page.Traces = append(page.Traces, ht)
		if et := newExploreTrace(ht.ID, tr); et != nil {
			explore.Traces = append(explore.Traces, *et)
			ht.Explore, ht.ExploreNote = true, exploreNote(et)
			ht.addJumps(et)
		}
	}
	if len(explore.Traces) > 0 {
		js, err := json.Marshal(explore) // escapes <, > and &: safe inside <script>
		if err != nil {
			return nil, err
		}
		page.ExploreJSON, page.ExploreScript = template.JS(js), template.JS(exploreScript)
	}
	switch {
	case len(names) == 0:
		page.Intro = "No traces were replayed."
	case len(names) <= 3:
		page.Title += ": " + strings.Join(names, ", ")
		fallthrough
	default:
		page.Intro = plural(int64(len(names)), "trace") + " replayed."
	}

	// Place the figures, stably in figureOrder.
	ordered := slices.Clone(figs)
	slices.SortStableFunc(ordered, func(a, b HTMLFigure) int {
		return figureRank(a.Kind) - figureRank(b.Kind)
	})
	for _, f := range ordered {
		if f.Trace < 0 || f.Trace >= len(rep.Traces) {
			return nil, fmt.Errorf("html report: %s figure %q: trace %d out of range (the report has %s)",
				f.Kind, f.Title, f.Trace, plural(int64(len(rep.Traces)), "trace"))
		}
		tr := &rep.Traces[f.Trace]
		ht := page.Traces[f.Trace]
		if f.Allocator == "" {
			ht.Figures = append(ht.Figures, newHTMLFig(f, tr.Name))
			continue
		}
		j := slices.IndexFunc(tr.Results, func(r Result) bool { return r.Allocator == f.Allocator })
		if j < 0 {
			return nil, fmt.Errorf("html report: %s figure %q: trace %q has no allocator %q",
				f.Kind, f.Title, tr.Name, f.Allocator)
		}
		a := ht.Allocators[j]
		a.Figures = append(a.Figures, newHTMLFig(f, tr.Name))
	}
	return page, nil
}

// addJumps links the comparison table's peaks and first failed allocations
// to the moment they happened in the interactive view.
func (ht *htmlTrace) addJumps(et *exploreTrace) {
	for _, row := range ht.Rows {
		for j := range row.Cells {
			if j >= len(et.Allocators) {
				break
			}
			a := et.Allocators[j]
			ev := int64(-1)
			switch row.Key {
			case "peak_in_use_bytes":
				ev = a.Peak
			case "failed_allocs", "first_oom_event":
				ev = a.OOM
			}
			if ev >= 0 {
				row.Cells[j].Jump = &htmlJump{Trace: ht.ID, Alloc: j, Event: ev}
			}
		}
	}
}

func figureRank(kind string) int {
	if r, ok := figureOrder[kind]; ok {
		return r
	}
	return len(figureOrder)
}

func newHTMLFig(f HTMLFigure, traceName string) htmlFig {
	what := f.Kind + " of " + traceName
	if f.Allocator != "" {
		what = f.Kind + " of " + f.Allocator + " on " + traceName
	}
	hf := htmlFig{Kind: f.Kind, Caption: f.Title, SVGFile: f.SVGFile, PNGFile: f.PNGFile}
	alt := what
	if hf.Caption == "" {
		hf.Caption = what
	} else {
		alt = f.Title + " (" + what + ")"
	}
	if len(f.PNG) > 0 {
		// Safe: base64 has no character that needs escaping in an
		// attribute, and the alt text is escaped.
		hf.Img = template.HTML(`<img src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(f.PNG) +
			`" alt="` + template.HTMLEscapeString(alt) + `">`)
	}
	return hf
}

// traceVerdict says in one line how a trace came out: the allocator with
// the smallest peak reserved among those that failed nothing (else among
// all), its ×LB, and which allocators failed allocations.
func traceVerdict(tr *Trace) string {
	if len(tr.Results) == 0 {
		return ""
	}
	best := -1
	for pass := 0; pass < 2 && best < 0; pass++ {
		for i := range tr.Results {
			r := &tr.Results[i]
			if pass == 0 && r.FailedAllocs > 0 {
				continue
			}
			if best < 0 || r.PeakReservedBytes < tr.Results[best].PeakReservedBytes {
				best = i
			}
		}
	}
	b := &tr.Results[best]
	v := fmt.Sprintf("%s reserves least: %s at its peak, %.2f× the lower bound", b.Allocator, Bytes(b.PeakReservedBytes), b.FootprintVsLowerBound)
	if b.FailedAllocs > 0 {
		v += " (every allocator failed allocations)"
	}
	var failed []string
	for i := range tr.Results {
		if r := &tr.Results[i]; r.FailedAllocs > 0 {
			failed = append(failed, fmt.Sprintf("%s %s", r.Allocator, plural(r.FailedAllocs, "failed allocation")))
		}
	}
	if len(failed) > 0 {
		v += "; " + strings.Join(failed, ", ")
	} else {
		v += "; no allocator failed an allocation"
	}
	return v + "."
}

func newHTMLTrace(i int, tr *Trace) *htmlTrace {
	ht := &htmlTrace{
		ID:   "trace-" + strconv.Itoa(i+1),
		Name: tr.Name, Path: tr.Path, Summary: traceSummary(tr),
		Span:    len(tr.Results) + 1,
		Notes:   append(recordingNotes(tr), oomNotes(tr)...),
		Verdict: traceVerdict(tr),
	}
	bytesKV := func(k string, n uint64) htmlKV {
		return htmlKV{Key: k, Value: Bytes(n), Title: Count(int64(n)) + " bytes", Num: true}
	}
	countKV := func(k string, n int64) htmlKV { return htmlKV{Key: k, Value: Count(n), Num: true} }
	ht.Facts = []htmlKV{
		countKV("Events", tr.Events),
		countKV("Allocs", tr.Allocs),
		countKV("Frees", tr.Frees),
		countKV("Steps", tr.Steps),
		bytesKV("Peak live", tr.PeakLiveBytes),
		bytesKV("Total allocated", tr.TotalAllocBytes),
		bytesKV("Capacity", tr.CapacityBytes),
		{Key: "Space", Value: tr.Space},
		countKV("Skipped events", tr.SkippedEvents),
	}
	if h := tr.Header; h == nil {
		ht.Facts = append(ht.Facts, htmlKV{Key: "Header source", Value: "(no header)"})
	} else {
		src := h.Source
		if src == "" {
			src = "(not given)"
		}
		ht.Facts = append(ht.Facts, htmlKV{Key: "Header source", Value: src})
		if h.TimeUnit != "" {
			ht.Facts = append(ht.Facts, htmlKV{Key: "Header time unit", Value: h.TimeUnit})
		}
		if h.CapacityBytes != 0 {
			ht.Facts = append(ht.Facts, bytesKV("Header capacity", h.CapacityBytes))
		}
		for _, k := range slices.Sorted(maps.Keys(h.Meta)) {
			ht.Facts = append(ht.Facts, htmlKV{Key: "Header " + k, Value: string(h.Meta[k])})
		}
	}
	ht.Skipped = slices.Clone(tr.SkippedErrors)
	if n := tr.SkippedEvents - int64(len(tr.SkippedErrors)); n > 0 && len(tr.SkippedErrors) > 0 {
		ht.Skipped = append(ht.Skipped, "... and "+plural(n, "more invalid event")+" skipped")
	}

	used := map[string]bool{}
	for j := range tr.Results {
		r := &tr.Results[j]
		a := &htmlAllocator{
			ID:           uniqueID(used, ht.ID+"-"+htmlSlug(r.Allocator)),
			Name:         r.Allocator,
			Options:      anyKVs(r.Options),
			SpaceOptions: anyKVs(r.SpaceOptions),
		}
		for _, k := range slices.Sorted(maps.Keys(r.AllocatorStats)) {
			n := r.AllocatorStats[k]
			kv := htmlKV{Key: k, Value: Count(n), Num: true}
			if n >= 0 && (strings.Contains(k, "bytes") || strings.HasSuffix(k, "_size")) {
				kv.Value += " (" + Bytes(uint64(n)) + ")"
			}
			a.Stats = append(a.Stats, kv)
		}
		if r.FirstOOMEvent != nil {
			a.FirstOOM = fmt.Sprintf("%s failed, the first at event %d", plural(r.FailedAllocs, "allocation"), *r.FirstOOMEvent)
			if r.FirstOOMLine != nil {
				a.FirstOOM += fmt.Sprintf(" (line %d)", *r.FirstOOMLine)
			}
			if r.Stopped {
				a.FirstOOM += "; the replay stopped there (--stop-on-oom)"
			}
			a.FirstOOM += "."
		}
		if d := r.OOM; d != nil {
			o := &htmlOOM{
				Headline: oomHeadline(r.Allocator, d), Verdict: d.Verdict, Explanation: d.Explanation,
				Occupancy: "|" + d.Occupancy + "|", MemoryLog: d.MemoryLog,
			}
			for _, b := range d.Bins {
				o.Bins = append(o.Bins, []string{Bytes(b.BinSizeBytes), Count(b.Chunks), Count(b.ChunksInUse),
					Bytes(b.Bytes), Bytes(b.BytesInUse), Bytes(b.RequestedInUse)})
			}
			a.OOM = o
		}
		if h := r.OOMExplained; h != nil {
			a.OOMHeld = newHTMLHeld(oomExplainedHeadline(r.Allocator, h), h)
		}
		if h := r.ReservedAtPeak; h != nil {
			a.Held = newHTMLHeld(fmt.Sprintf("Reserved at its peak (event %s, line %s)", Count(h.Event), Count(h.Line)), h)
		}
		ht.Allocators = append(ht.Allocators, a)
	}
	if tr.PeakLiveBytes > 0 {
		ht.CallSitesHeading = callSitesHeading(tr)
		ht.CallSites = htmlCallSites(tr.PeakCallSites, tr.PeakLiveBytes)
	}

	group, shown := "", ""
	for _, m := range htmlMetrics {
		if m.group != "" {
			group = m.group
		}
		if m.only != nil && !slices.ContainsFunc(tr.Results, func(r Result) bool { return m.only(&r) }) {
			continue
		}
		row := htmlRow{Label: m.label, Key: m.key, Timing: m.timing}
		if group != shown {
			row.Group, shown = group, group
		}
		vals := make([]float64, len(tr.Results))
		oks := make([]bool, len(tr.Results))
		for j := range tr.Results {
			r := &tr.Results[j]
			text, title, v, ok := m.value(r)
			row.Cells = append(row.Cells, htmlCell{Text: text, Title: title})
			vals[j], oks[j] = v, ok
			if m.bad != nil && m.bad(r) {
				row.Cells[j].Class = "bad"
			}
		}
		markBest(row.Cells, vals, oks, m.better)
		if m.timing {
			ht.HasTimings = true
		}
		ht.Rows = append(ht.Rows, row)
	}
	return ht
}

// markBest shades the best values of a row, when they are not all equal; a
// cell already marked bad stays bad.
func markBest(cells []htmlCell, vals []float64, oks []bool, better int) {
	if better == 0 {
		return
	}
	best, n, distinct := 0.0, 0, false
	for j, v := range vals {
		if !oks[j] {
			continue
		}
		if n > 0 && v != best {
			distinct = true
		}
		if n == 0 || float64(better)*(v-best) > 0 {
			best = v
		}
		n++
	}
	if n < 2 || !distinct {
		return
	}
	for j, v := range vals {
		if oks[j] && v == best && cells[j].Class == "" {
			cells[j].Class = "best"
		}
	}
}

// anyKVs lists an options map in key order.
func anyKVs(m map[string]any) []htmlKV {
	var kvs []htmlKV
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kvs = append(kvs, htmlKV{Key: k, Value: optionValue(m[k])})
	}
	return kvs
}

// optionValue writes an option's value as a user would type it with --set;
// a whole number read back from JSON (a float64) is written without an
// exponent.
func optionValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e18 {
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// htmlSlug makes s fit in an id and a URL fragment.
func htmlSlug(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, s)
}

// uniqueID returns id, or id with a number added if it is already used.
func uniqueID(used map[string]bool, id string) string {
	out := id
	for n := 2; used[out]; n++ {
		out = id + "-" + strconv.Itoa(n)
	}
	used[out] = true
	return out
}

var htmlPageTemplate = template.Must(template.New("index.html").Parse(htmlPageSource))

// htmlPageSource is the page. Colours: a quiet blue-grey for structure, green
// for the best value of a row, red for failures, pale yellow for wall-clock
// timings.
const htmlPageSource = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="bfcsim">
<title>{{.Title}}</title>
<style>
:root { --fg: #1f2933; --muted: #52606d; --line: #d9e2ec; --head: #f0f4f8; --accent: #2f6f9f;
  --best: #dcf5e3; --bad: #fde2e2; --timing: #fffbea; --code: #f5f7fa; }
* { box-sizing: border-box; }
html { background: #eef2f6; }
body { margin: 0; color: var(--fg); font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 36px 56px; background: #fff; min-height: 100vh; }
h1 { font-size: 28px; margin: 0 0 4px; }
h2 { font-size: 23px; margin: 40px 0 6px; padding-top: 18px; border-top: 3px solid var(--accent); }
h3 { font-size: 18px; margin: 28px 0 8px; color: var(--accent); }
h4 { font-size: 15px; margin: 18px 0 6px; }
a { color: var(--accent); }
p { margin: 6px 0 10px; }
.muted, .summary { color: var(--muted); }
code, pre, .key { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; }
code { background: var(--code); padding: 0 4px; border-radius: 3px; font-size: 13px; }
nav.toc { background: var(--head); border: 1px solid var(--line); border-radius: 6px; padding: 10px 18px; margin: 16px 0 8px; }
nav.toc ol { margin: 4px 0; padding-left: 22px; }
nav.toc ul { display: inline; margin: 0; padding: 0; }
nav.toc ul li { display: inline; margin-left: 10px; font-size: 14px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 14px; margin: 6px 0 14px; }
th, td { padding: 4px 12px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
thead th { background: var(--head); border-bottom: 2px solid #bcccdc; white-space: nowrap; }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:hover td { background-color: #f7fafc; }
table.facts th { font-weight: 500; color: var(--muted); }
table.facts.compact { font-size: 13px; }
table.facts.compact th, table.facts.compact td { padding: 1px 10px; }
.verdict-line { font-size: 16px; margin: 4px 0 12px; }
table.metrics th.metric { font-weight: 500; white-space: nowrap; }
table.metrics td { vertical-align: middle; min-width: 7em; }
table.metrics .key { display: block; font-size: 11px; color: var(--muted); font-weight: 400; }
tr.group th { background: #fafbfc; color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .05em; padding-top: 10px; }
tr.timing th, tr.timing td { background: var(--timing); }
td.best, tr.timing td.best { background: var(--best); }
td.bad, tr.timing td.bad { background: var(--bad); }
.wall { display: inline-block; font-size: 11px; font-weight: 600; color: #8d6708; background: #fcefc7; border-radius: 3px; padding: 0 5px; margin-left: 6px; }
.legend span { display: inline-block; padding: 0 6px; border-radius: 3px; margin-right: 4px; }
.legend .l-best { background: var(--best); } .legend .l-bad { background: var(--bad); } .legend .l-timing { background: var(--timing); }
section.allocator { border-left: 4px solid var(--line); padding: 2px 0 2px 18px; margin: 26px 0; }
.kvs { display: flex; flex-wrap: wrap; gap: 0 36px; }
figure { margin: 14px 0 22px; }
figure img { display: block; width: 100%; max-width: 960px; height: auto; border: 1px solid var(--line); border-radius: 4px; }
figcaption { font-size: 13px; color: var(--muted); margin-top: 4px; }
.figs { display: grid; grid-template-columns: repeat(auto-fit, minmax(440px, 1fr)); gap: 0 24px; }
.oom { background: #fff8f8; border: 1px solid #f5c2c2; border-radius: 6px; padding: 4px 16px 10px; margin: 14px 0; }
.verdict { display: inline-block; background: var(--bad); color: #8a1c1c; font-weight: 600; border-radius: 10px; padding: 0 10px; }
pre { background: var(--code); border: 1px solid var(--line); border-radius: 4px; padding: 8px 12px; overflow-x: auto; font-size: 12px; line-height: 1.35; }
pre.strip { white-space: pre; }
details summary { cursor: pointer; color: var(--accent); }
section.explore { margin: 18px 0 26px; }
.x-bar { margin: 6px 0; font-size: 14px; }
.x-wrap { position: relative; max-width: 960px; }
canvas.x-map, canvas.x-timeline, canvas.x-occ-bar { display: block; width: 100%; max-width: 960px; border: 1px solid var(--line); border-radius: 4px; }
canvas.x-map { cursor: crosshair; }
canvas.x-timeline { margin-top: 6px; cursor: pointer; }
.x-legend { font-size: 12px; margin: 4px 0; }
.x-key { display: inline-block; margin-right: 12px; }
.x-swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: middle; }
pre.stack { font-size: 11px; max-height: 24em; overflow: auto; margin: 4px 0; }
.x-tip { position: absolute; z-index: 2; background: #fff; border: 1px solid #bcccdc; border-radius: 4px; padding: 4px 8px; font-size: 12px; white-space: pre; pointer-events: none; box-shadow: 0 2px 6px rgba(0,0,0,.12); }
.x-occ { margin-top: 8px; }
.x-occ-label { font-size: 12px; color: var(--muted); margin-top: 4px; }
footer { margin-top: 40px; font-size: 13px; color: var(--muted); border-top: 1px solid var(--line); padding-top: 10px; }
</style>
</head>
<body>
<main>
<header>
<h1>bfcsim report</h1>
<p class="muted">{{.Intro}}</p>
</header>
{{- if .Traces}}
<nav class="toc" aria-label="Contents">
<strong>Contents</strong>
<ol>
{{- range .Traces}}
<li><a href="#{{.ID}}">{{.Name}}</a>
<ul><li><a href="#{{.ID}}-comparison">comparison</a></li>
{{- range .Allocators}}<li><a href="#{{.ID}}">{{.Name}}</a></li>{{end}}</ul></li>
{{- end}}
</ol>
</nav>
{{- end}}
{{range .Traces}}{{$t := .}}
<section class="trace" id="{{.ID}}">
<h2>{{.Name}}</h2>
<p class="summary">{{if .Path}}<code>{{.Path}}</code>: {{end}}{{.Summary}}.</p>
{{- if .Verdict}}
<p class="verdict-line"><strong>{{.Verdict}}</strong></p>
{{- end}}

<h3 id="{{.ID}}-comparison">Comparison</h3>
<p class="legend muted"><span class="l-best">green</span>best in the row
 · <span class="l-bad">red</span>failures
{{- if .HasTimings}} · <span class="l-timing">yellow</span>wall-clock timings, measured in this process: they vary from run to run and machine to machine; every other number is deterministic{{end}}.
Hover a size for its exact bytes.</p>
<div class="scroll">
<table class="metrics">
<thead><tr><th scope="col">metric</th>{{range .Allocators}}<th scope="col" class="num"><a href="#{{.ID}}">{{.Name}}</a></th>{{end}}</tr></thead>
<tbody>
{{- range .Rows}}
{{- if .Group}}
<tr class="group"><th colspan="{{$t.Span}}" scope="colgroup">{{.Group}}</th></tr>
{{- end}}
<tr{{if .Timing}} class="timing"{{end}}><th scope="row" class="metric">{{.Label}}{{if .Timing}}<span class="wall" title="wall-clock: not deterministic">wall-clock</span>{{end}}<span class="key">{{.Key}}</span></th>
{{- range .Cells}}<td class="num{{if .Class}} {{.Class}}{{end}}"{{if .Title}} title="{{.Title}}"{{end}}>{{with .Jump}}<a href="#{{.Trace}}-explore" class="x-jump" data-trace="{{.Trace}}" data-alloc="{{.Alloc}}" data-event="{{.Event}}" title="show it in the memory view">{{end}}{{.Text}}{{if .Jump}}</a>{{end}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
</div>
{{- if .Notes}}
<ul>{{range .Notes}}<li>{{.}}</li>{{end}}</ul>
{{- end}}
{{- if .CallSites}}
<h3 id="{{.ID}}-callsites">{{.CallSitesHeading}}</h3>
{{template "callsites" .CallSites}}
{{- end}}
{{- if .Explore}}
<section class="explore" id="{{.ID}}-explore">
<h3>Explore</h3>
<p class="muted">{{.ExploreNote}} Wheel to zoom, drag to pan, double-click to reset; click the timeline to see every allocator's address space at that moment. The peak and first failure in the table above lead here too.</p>
<div class="x-bar">Memory map (address × event) of <select class="x-alloc" aria-label="allocator">{{range $i, $a := .Allocators}}<option value="{{$i}}">{{$a.Name}}</option>{{end}}</select>, coloured by <select class="x-colour" aria-label="colour"><option value="site">call site</option><option value="size">block size</option></select> <span class="x-status muted"></span></div>
<div class="x-legend muted"></div>
<div class="x-wrap"><canvas class="x-map" width="960" height="360"></canvas><div class="x-tip" hidden></div></div>
<canvas class="x-timeline" width="960" height="110" title="bytes reserved (grey), in use (blue) and live (green); click to set the cursor"></canvas>
<div class="x-occ"></div>
</section>
{{- end}}
{{- range .Figures}}
{{template "figure" .}}
{{- end}}
<h3>Trace</h3>
<table class="facts compact">
<tbody>
{{- range .Facts}}
<tr><th scope="row">{{.Key}}</th><td{{if .Num}} class="num"{{end}}{{if .Title}} title="{{.Title}}"{{end}}>{{.Value}}</td></tr>
{{- end}}
</tbody>
</table>
{{- if .Skipped}}
<p>Invalid events skipped:</p>
<ul>{{range .Skipped}}<li><code>{{.}}</code></li>{{end}}</ul>
{{- end}}

{{range .Allocators}}
<section class="allocator" id="{{.ID}}">
<h3>{{.Name}} <span class="muted">on {{$t.Name}}</span></h3>
{{- if .FirstOOM}}
<p>{{.FirstOOM}}</p>
{{- end}}
<div class="kvs">
<div>
<h4>Options</h4>
{{template "kvs" .Options}}
</div>
{{- if .SpaceOptions}}
<div>
<h4>Space options</h4>
{{template "kvs" .SpaceOptions}}
</div>
{{- end}}
<div>
<h4>Allocator stats</h4>
{{template "kvs" .Stats}}
</div>
</div>
{{- with .OOMHeld}}
<div class="oom">
<h4>Why the first allocation failed <span class="verdict">{{.Verdict}}</span></h4>
{{template "held" .}}
</div>
{{- end}}
{{- with .Held}}
<div class="held">
<h4>{{.Title}}</h4>
{{template "held" .}}
</div>
{{- end}}
{{- with .OOM}}
<div class="oom">
<h4>Out of memory <span class="verdict">{{.Verdict}}</span></h4>
<p><strong>{{.Headline}}.</strong></p>
<p>{{.Explanation}}</p>
<p class="muted">The pool at the failure (<code>*</code> requested, <code>x</code> slack in in-use chunks, <code>_</code> free):</p>
<pre class="strip">{{.Occupancy}}</pre>
{{- if .Bins}}
<table>
<thead><tr><th class="num">bin</th><th class="num">chunks</th><th class="num">in use</th><th class="num">bytes</th><th class="num">bytes in use</th><th class="num">requested in use</th></tr></thead>
<tbody>
{{- range .Bins}}
<tr>{{range .}}<td class="num">{{.}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
{{- end}}
<details><summary>TensorFlow's memory log</summary>
<pre>{{.MemoryLog}}</pre>
</details>
</div>
{{- end}}
{{- if .Figures}}
<div class="figs">
{{- range .Figures}}
{{template "figure" .}}
{{- end}}
</div>
{{- end}}
</section>
{{- end}}
</section>
{{- end}}
{{- if .ExploreJSON}}
<script type="application/json" id="bfcsim-data">{{.ExploreJSON}}</script>
<script>{{.ExploreScript}}</script>
{{- end}}
<footer>Made by bfcsim. Sizes are in binary units (1 KiB = 1024 bytes). This page is self-contained: it loads nothing from the network.</footer>
</main>
</body>
</html>
{{define "kvs"}}{{if .}}<table>
<tbody>
{{- range .}}
<tr><th scope="row"><code>{{.Key}}</code></th><td{{if .Num}} class="num"{{end}}>{{.Value}}</td></tr>
{{- end}}
</tbody>
</table>{{else}}<p class="muted">(none)</p>{{end}}{{end}}
{{define "callsites"}}<table class="callsites">
<thead><tr><th class="num">bytes</th><th class="num">share</th><th class="num">allocations</th><th>call site</th></tr></thead>
<tbody>
{{- range .}}
<tr><td class="num">{{.Bytes}}</td><td class="num">{{.Share}}</td><td class="num">{{.Count}}</td><td>{{if .Stack}}<details><summary><code>{{.Site}}</code></summary><pre class="stack">{{range .Stack}}{{.}}
{{end}}</pre></details>{{else}}<code>{{.Site}}</code>{{end}}</td></tr>
{{- end}}
</tbody>
</table>{{end}}
{{define "held"}}
{{- if .Explanation}}<p><strong>{{.Title}}.</strong> {{.Explanation}}.</p>{{end}}
<p>{{.Line}}.</p>
{{- if .Sites}}
<p class="muted">Live then, by call site:</p>
{{template "callsites" .Sites}}
{{- end}}
{{- if .Ranges}}
<p class="muted">The largest free ranges, and the live blocks that keep each apart:</p>
<table class="ranges">
<tbody>
{{- range .Ranges}}
<tr><td class="num" title="{{.Title}}">{{.Key}}</td><td>{{.Value}}</td></tr>
{{- end}}
</tbody>
</table>
{{- end}}
{{- end}}
{{define "figure"}}<figure>
{{- if .Img}}
{{.Img}}
{{- else}}
<p class="muted">(no preview of this {{.Kind}} plot)</p>
{{- end}}
<figcaption>{{.Caption}}
{{- if or .SVGFile .PNGFile}} — {{if .SVGFile}}<a href="{{.SVGFile}}">SVG</a>{{end}}{{if and .SVGFile .PNGFile}} · {{end}}{{if .PNGFile}}<a href="{{.PNGFile}}">PNG</a>{{end}}{{end}}</figcaption>
</figure>{{end}}
`
