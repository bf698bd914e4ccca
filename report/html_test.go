package report

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/internal/browsertest"
	"github.com/bfcsim/bfcsim/sim"
)

// htmlReport is the fragmenter golden report (four allocators, three of which
// run out of memory, bfc with TensorFlow's diagnostics) with made-up
// timings and an address check added, so that every metric has a value.
func htmlReport(t *testing.T) Report {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "fragmenter.json"))
	require.NoError(t, err)
	var rep Report
	require.NoError(t, json.Unmarshal(data, &rep))
	require.Len(t, rep.Traces, 1)
	require.Len(t, rep.Traces[0].Results, 4)
	require.NotNil(t, rep.Traces[0].Results[0].OOM, "bfc's OOM diagnostics")
	for j := range rep.Traces[0].Results {
		r := &rep.Traces[0].Results[j]
		k := int64(j + 1)
		r.LatencyNs = Latencies{
			Alloc: Latency{P50: 100 * k, P90: 200 * k, P99: 900 * k, P999: 4000 * k, Max: 52000 * k, Mean: 150.5 * float64(k)},
			Free:  Latency{P50: 60 * k, P90: 90 * k, P99: 700 * k, P999: 3000 * k, Max: 41000 * k, Mean: 80.25 * float64(k)},
		}
		r.ReplaySeconds = 0.0123 * float64(k)
		r.EventsPerSecond = float64(r.Events) / r.ReplaySeconds
	}
	rep.Traces[0].Results[0].RecordedAddressMatch = &AddressMatch{Checked: 2040, Matched: 1998}
	rep.Traces[0].Results[0].RecordedBlockMatch = &AddressMatch{Checked: 2040, Matched: 2030}
	return rep
}

// chartPNG draws a small chart-like PNG: a white background, axes and a
// filled step curve in the colour c. Different sizes and colours give
// different bytes.
func chartPNG(t *testing.T, w, h int, c color.RGBA) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.White)
		}
	}
	top := func(x int) int { return h/5 + (x*7/w)*h/12 } // a staircase
	for x := 30; x < w-10; x++ {
		for y := top(x); y < h-30; y++ {
			img.Set(x, y, c)
		}
		img.Set(x, h-30, color.Black)
	}
	for y := 10; y <= h-30; y++ {
		img.Set(30, y, color.Black)
	}
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	return buf.Bytes()
}

// htmlFigures makes the figures -o DIR would: the trace's three, given out
// of order, and a memmap and an occupancy per allocator.
func htmlFigures(t *testing.T, rep Report) []HTMLFigure {
	t.Helper()
	colors := []color.RGBA{{47, 111, 159, 255}, {216, 120, 40, 255}, {60, 150, 90, 255}, {150, 70, 160, 255}, {190, 60, 60, 255}}
	tr := rep.Traces[0]
	fig := func(allocator, kind string, n int) HTMLFigure {
		base := tr.Name + "." + kind
		if allocator != "" {
			base = tr.Name + "." + allocator + "." + kind
		}
		title := kind + " of " + tr.Name
		if allocator != "" {
			title = allocator + " " + kind + " on " + tr.Name
		}
		return HTMLFigure{
			Trace: 0, Allocator: allocator, Kind: kind, Title: title,
			PNG:     chartPNG(t, 640+8*n, 260, colors[n%len(colors)]),
			SVGFile: base + ".svg", PNGFile: base + ".png",
		}
	}
	figs := []HTMLFigure{fig("", "latency", 0), fig("", "timeline", 1), fig("", "fragmentation", 2)}
	for j, r := range tr.Results {
		figs = append(figs, fig(r.Allocator, "occupancy", 3+2*j), fig(r.Allocator, "memmap", 4+2*j))
	}
	return figs
}

func renderHTML(t *testing.T, rep Report, figs []HTMLFigure) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteHTML(&buf, rep, figs))
	return buf.String()
}

// specKeys are the metrics of report.json (docs/metrics.md): the comparison table has a row for each.
var specKeys = []string{
	"ok_allocs", "failed_allocs", "first_oom_event",
	"peak_reserved_bytes", "peak_in_use_bytes", "peak_live_bytes", "final_reserved_bytes",
	"fragmentation", "utilization", "internal_waste_at_peak_bytes",
	"tf_fragmentation.max", "tf_fragmentation.mean",
	"device_reserve_calls", "device_release_calls", "failed_device_reserves", "modeled_device_seconds",
	"latency_ns.alloc.p50", "latency_ns.alloc.p90", "latency_ns.alloc.p99", "latency_ns.alloc.p999",
	"latency_ns.alloc.max", "latency_ns.alloc.mean",
	"latency_ns.free.p50", "latency_ns.free.p90", "latency_ns.free.p99", "latency_ns.free.p999",
	"latency_ns.free.max", "latency_ns.free.mean",
	"replay_seconds", "events_per_second", "recorded_address_match", "recorded_block_match",
}

// metricRow returns the comparison table's row for the report.json key.
func metricRow(t *testing.T, page, key string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr[^>]*><th scope="row" class="metric">[^\n]*?<span class="key">` +
		regexp.QuoteMeta(key) + `</span></th>.*?</tr>`).FindString(page)
	require.NotEmpty(t, m, "no row for %s", key)
	return m
}

func TestHTMLMetrics(t *testing.T) {
	rep := htmlReport(t)
	page := renderHTML(t, rep, nil)
	for _, key := range specKeys {
		row := metricRow(t, page, key)
		assert.Equal(t, len(rep.Traces[0].Results), strings.Count(row, "<td"), "%s: a cell per allocator", key)
	}
	for _, label := range []string{"OK allocations", "Failed allocations", "First OOM event", "Peak reserved",
		"Peak in use", "Peak live", "Final reserved", "Internal waste at peak", "Fragmentation", "Utilization",
		"TF fragmentation max", "TF fragmentation mean", "Device reserve calls", "Device release calls",
		"Failed device reserves", "Modeled device time", "alloc p50", "alloc p99.9", "free max", "free mean",
		"Replay time", "Events per second", "Recorded addresses matched", "Recorded blocks matched"} {
		assert.Contains(t, page, `class="metric">`+label+`<`, label)
	}

	// Columns are allocators, in the report's order, linked to their sections.
	head := regexp.MustCompile(`(?s)<table class="metrics">\s*<thead>(.*?)</thead>`).FindStringSubmatch(page)
	require.NotNil(t, head)
	assert.Equal(t, `<tr><th scope="col">metric</th>`+
		`<th scope="col" class="num"><a href="#trace-1-bfc">bfc</a></th>`+
		`<th scope="col" class="num"><a href="#trace-1-arena">arena</a></th>`+
		`<th scope="col" class="num"><a href="#trace-1-aligned">aligned</a></th>`+
		`<th scope="col" class="num"><a href="#trace-1-naive">naive</a></th></tr>`, head[1])

	// Values, formatted with format.go's helpers; exact bytes on hover.
	bfc := rep.Traces[0].Results[0]
	assert.Equal(t, `<tr><th scope="row" class="metric">Peak reserved<span class="key">peak_reserved_bytes</span></th>`+
		`<td class="num" title="33,554,432 bytes">32.00 MiB</td>`+
		`<td class="num" title="33,554,432 bytes">32.00 MiB</td>`+
		`<td class="num" title="8,372,224 bytes">7.98 MiB</td>`+
		`<td class="num best" title="8,355,840 bytes">7.97 MiB</td></tr>`,
		metricRow(t, page, "peak_reserved_bytes"), "the lowest footprint, naive's, is shaded")
	assert.Contains(t, metricRow(t, page, "fragmentation"), ">"+Percent(bfc.Fragmentation)+"<")
	assert.Contains(t, metricRow(t, page, "failed_allocs"), `<td class="num bad">1</td>`)
	assert.Contains(t, metricRow(t, page, "failed_allocs"), `<td class="num best">0</td>`)
	assert.Contains(t, metricRow(t, page, "first_oom_event"), ">4056 (line 4058)<")
	assert.Contains(t, metricRow(t, page, "first_oom_event"), ">none<")
	assert.Contains(t, metricRow(t, page, "modeled_device_seconds"), ">"+Seconds(bfc.ModeledDeviceSeconds)+"<")
	assert.Contains(t, metricRow(t, page, "recorded_address_match"), ">1,998 / 2,040 (97.9%)<")
	assert.Contains(t, metricRow(t, page, "recorded_address_match"), ">n/a<")
	assert.Contains(t, metricRow(t, page, "recorded_block_match"), ">2,030 / 2,040 (99.5%)<")
	assert.Contains(t, metricRow(t, page, "recorded_block_match"), ">n/a<")
	assert.Contains(t, metricRow(t, page, "latency_ns.alloc.p99"), ">900ns<")
	assert.Contains(t, metricRow(t, page, "latency_ns.free.max"), ">41.0µs<")
	assert.Contains(t, metricRow(t, page, "events_per_second"), ">"+Rate(bfc.EventsPerSecond)+"<")

	// Wall-clock rows, and only they, are marked as such.
	for _, key := range specKeys {
		timing := strings.HasPrefix(key, "latency_ns.") || key == "replay_seconds" || key == "events_per_second"
		row := metricRow(t, page, key)
		assert.Equal(t, timing, strings.HasPrefix(row, `<tr class="timing">`), key)
		assert.Equal(t, timing, strings.Contains(row, ">wall-clock<"), key)
	}
	assert.Contains(t, page, "wall-clock timings, measured in this process: they vary from run to run")

	// The address check is a row only when the trace carries addresses.
	rep.Traces[0].Results[0].RecordedAddressMatch = nil
	assert.NotContains(t, renderHTML(t, rep, nil), "recorded_address_match")

	// So is the block check, when the trace carries block sizes.
	rep.Traces[0].Results[0].RecordedBlockMatch = nil
	assert.NotContains(t, renderHTML(t, rep, nil), "recorded_block_match")

	// So is the check of the recording's failed allocations, with the
	// options taken from the recording noted under the table.
	assert.NotContains(t, page, "recorded_oom_match")
	rep.Traces[0].Results[0].RecordedOOMMatch = &AddressMatch{Checked: 2, Matched: 1}
	rep.Traces[0].Results[0].OptionsFromRecording = []string{"allow_growth"}
	page = renderHTML(t, rep, nil)
	assert.Contains(t, metricRow(t, page, "recorded_oom_match"), ">1 / 2<")
	assert.Contains(t, page, "<li>"+rep.Traces[0].Results[0].Allocator+": as recorded, allow_growth=")
}

func TestHTMLTraceAndAllocators(t *testing.T) {
	rep := htmlReport(t)
	page := renderHTML(t, rep, nil)
	tr := &rep.Traces[0]

	assert.Contains(t, page, "<title>bfcsim report: fragmenter</title>")
	assert.Contains(t, page, `<h2>fragmenter</h2>`)
	assert.Contains(t, page, `<code>traces/fragmenter.jsonl</code>: `+html.EscapeString(traceSummary(tr))+".")
	for _, fact := range []string{
		`<th scope="row">Events</th><td class="num">4,090</td>`,
		`<th scope="row">Allocs</th><td class="num">2,041</td>`,
		`<th scope="row">Frees</th><td class="num">2,041</td>`,
		`<th scope="row">Steps</th><td class="num">8</td>`,
		`<th scope="row">Peak live</th><td class="num" title="8,355,840 bytes">7.97 MiB</td>`,
		`<th scope="row">Total allocated</th><td class="num" title="34,603,008 bytes">33.00 MiB</td>`,
		`<th scope="row">Capacity</th><td class="num" title="33,554,432 bytes">32.00 MiB</td>`,
		`<th scope="row">Space</th><td>virtual</td>`,
		`<th scope="row">Skipped events</th><td class="num">0</td>`,
		`<th scope="row">Header source</th><td>gen</td>`,
		`<th scope="row">Header workload</th><td>&#34;fragmenter&#34;</td>`,
	} {
		assert.Contains(t, page, fact)
	}

	// The contents link every trace and allocator section.
	for _, id := range []string{"trace-1", "trace-1-comparison", "trace-1-bfc", "trace-1-arena", "trace-1-aligned", "trace-1-naive"} {
		assert.Contains(t, page, `<a href="#`+id+`">`, id)
		assert.Equal(t, 1, strings.Count(page, `id="`+id+`"`), id)
	}

	// Options and stats in key order; whole numbers from JSON without exponents.
	bfc := section(t, page, "trace-1-bfc")
	assert.Regexp(t, `(?s)allow_growth</code></th><td>true</td>.*coalescing_regions.*fragmentation_fraction.*garbage_collection.*`+
		`memory_limit</code></th><td>33554432</td>.*preset</code></th><td>tsl</td>`, bfc)
	assert.Regexp(t, `(?s)<h4>Allocator stats</h4>.*bytes_in_use.*bytes_limit</code></th><td class="num">33,554,432 \(32.00 MiB\)</td>.*`+
		`num_allocs</code></th><td class="num">2,040</td>.*regions</code></th><td class="num">5</td>`, bfc)
	assert.Regexp(t, `(?s)<h4>Space options</h4>.*placement</code></th><td>paged</td>.*reserve_cost_per_gib`, bfc)
	assert.Contains(t, section(t, page, "trace-1-naive"), `<h4>Options</h4>
<p class="muted">(none)</p>`)

	// OOM diagnostics: the verdict, the explanation, the strip, the log folded.
	d := tr.Results[0].OOM
	assert.Contains(t, bfc, `<span class="verdict">fragmentation</span>`)
	assert.Contains(t, bfc, html.EscapeString(oomHeadline("bfc", d)))
	assert.Contains(t, bfc, "<p>"+html.EscapeString(d.Explanation)+"</p>")
	assert.Contains(t, bfc, `<pre class="strip">|`+d.Occupancy+`|</pre>`)
	assert.True(t, strings.Contains(bfc, "<details><summary>TensorFlow's memory log</summary>\n<pre>"+html.EscapeString(d.MemoryLog)+"</pre>\n</details>"),
		"the memory log, escaped, in a <details>")
	assert.Contains(t, bfc, `<td class="num">512.0 KiB</td><td class="num">36</td><td class="num">4</td><td class="num">30.02 MiB</td>`)
	assert.Contains(t, bfc, "<p>1 allocation failed, the first at event 4056 (line 4058).</p>")
	arena := section(t, page, "trace-1-arena")
	assert.Contains(t, arena, "<p>1 allocation failed, the first at event 4056 (line 4058).</p>")
	assert.NotContains(t, arena, "Out of memory", "arena has no pool dump")
	assert.NotContains(t, section(t, page, "trace-1-aligned"), "failed")
}

// section returns the allocator section with the id.
func section(t *testing.T, page, id string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<section class="allocator" id="` + regexp.QuoteMeta(id) + `">.*?</section>`).FindString(page)
	require.NotEmpty(t, m, "no section %s", id)
	return m
}

var imgRE = regexp.MustCompile(`<img src="([^"]*)" alt="([^"]*)">`)

func TestHTMLFigures(t *testing.T) {
	rep := htmlReport(t)
	figs := htmlFigures(t, rep)
	page := renderHTML(t, rep, figs)

	imgs := imgRE.FindAllStringSubmatch(page, -1)
	require.Len(t, imgs, len(figs), "an <img> per figure")
	byAlt := map[string][]byte{}
	for _, m := range imgs {
		src := html.UnescapeString(m[1])
		require.True(t, strings.HasPrefix(src, "data:image/png;base64,"), "a data URI: %.40s", src)
		png, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(src, "data:image/png;base64,"))
		require.NoError(t, err)
		byAlt[html.UnescapeString(m[2])] = png
	}
	for _, f := range figs {
		what := f.Kind + " of " + rep.Traces[0].Name
		if f.Allocator != "" {
			what = f.Kind + " of " + f.Allocator + " on " + rep.Traces[0].Name
		}
		alt := f.Title + " (" + what + ")"
		require.Contains(t, byAlt, alt)
		assert.Equal(t, f.PNG, byAlt[alt], "%s: the page holds the same bytes", alt)
		assert.Contains(t, page, `<a href="`+f.SVGFile+`">SVG</a> · <a href="`+f.PNGFile+`">PNG</a>`)
	}

	// Summary first: the verdict and the comparison, then the trace's
	// figures in the order timeline, fragmentation, latency, then the
	// trace's facts; each allocator's figures are in its own section.
	verdict := strings.Index(page, `class="verdict-line"`)
	comparison := strings.Index(page, `id="trace-1-comparison"`)
	timeline := strings.Index(page, "timeline of fragmenter (")
	fragmentation := strings.Index(page, "fragmentation of fragmenter (")
	latency := strings.Index(page, "latency of fragmenter (")
	facts := strings.Index(page, `<h3>Trace</h3>`)
	assert.True(t, 0 < verdict && verdict < comparison && comparison < timeline && timeline < fragmentation && fragmentation < latency && latency < facts,
		"verdict %d, comparison %d, timeline %d, fragmentation %d, latency %d, facts %d", verdict, comparison, timeline, fragmentation, latency, facts)
	for _, r := range rep.Traces[0].Results {
		s := section(t, page, "trace-1-"+r.Allocator)
		assert.Equal(t, 2, strings.Count(s, "<img "), r.Allocator)
		memmap := strings.Index(s, r.Allocator+" memmap on fragmenter")
		occupancy := strings.Index(s, r.Allocator+" occupancy on fragmenter")
		assert.True(t, 0 < memmap && memmap < occupancy, "%s: memmap, then occupancy", r.Allocator)
	}

	// A figure without a PNG or files is still listed, with its caption.
	page = renderHTML(t, rep, []HTMLFigure{{Trace: 0, Allocator: "arena", Kind: "memmap"}})
	assert.NotContains(t, page, "<img")
	assert.Contains(t, section(t, page, "trace-1-arena"),
		"<p class=\"muted\">(no preview of this memmap plot)</p>\n<figcaption>memmap of arena on fragmenter</figcaption>")
}

func TestHTMLFigureErrors(t *testing.T) {
	rep := htmlReport(t)
	var buf bytes.Buffer
	err := WriteHTML(&buf, rep, []HTMLFigure{{Trace: 1, Kind: "timeline", Title: "t"}})
	assert.EqualError(t, err, `html report: timeline figure "t": trace 1 out of range (the report has 1 trace)`)
	err = WriteHTML(&buf, rep, []HTMLFigure{{Trace: 0, Allocator: "pytorch", Kind: "memmap", Title: "m"}})
	assert.EqualError(t, err, `html report: memmap figure "m": trace "fragmenter" has no allocator "pytorch"`)
	assert.Zero(t, buf.Len(), "nothing is written on error")
}

// Names, paths, options and metadata come from users: the page shows them
// as text and never runs them.
func TestHTMLEscaping(t *testing.T) {
	evil := `<script>alert("x")</script>`
	rep := Report{Version: 1, Traces: []Trace{{
		Name: evil, Path: `dir/"quoted" & <b>.jsonl`, Events: 2, Allocs: 1, Frees: 1,
		SkippedEvents: 1, SkippedErrors: []string{`t.jsonl:3: bad <img src=x onerror=alert(1)>`},
		Header: &Header{Source: "</td><script>", Meta: map[string]json.RawMessage{"note": json.RawMessage(`"</pre><script>"`)}},
		Results: []Result{{
			Allocator:      `a"><script>`,
			Options:        map[string]any{"k<script>": "</code><script>"},
			AllocatorStats: map[string]int64{"<script>": 1},
		}},
	}}}
	page := renderHTML(t, rep, []HTMLFigure{{Trace: 0, Allocator: `a"><script>`, Kind: "memmap",
		Title: evil, PNG: chartPNG(t, 4, 4, color.RGBA{A: 255}), SVGFile: `javascript:alert(1)`, PNGFile: `x" onclick="alert(1)`}})

	assert.NotContains(t, page, "<script")
	assert.NotContains(t, page, "<img src=x")
	assert.NotContains(t, page, "javascript:")
	assert.NotContains(t, page, `" onclick`)
	assert.Contains(t, page, "<h2>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;</h2>")
	assert.Contains(t, page, "<title>bfcsim report: &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;</title>")
	assert.Contains(t, page, "<code>dir/&#34;quoted&#34; &amp; &lt;b&gt;.jsonl</code>")
	assert.Contains(t, page, `id="trace-1-a___script_"`)
}

func TestHTMLDeterministic(t *testing.T) {
	rep := htmlReport(t)
	opts := map[string]any{}
	stats := map[string]int64{}
	for i := range 50 {
		opts[fmt.Sprintf("opt%02d", i)] = i
		stats[fmt.Sprintf("stat%02d", i)] = int64(i)
	}
	rep.Traces[0].Results[1].Options, rep.Traces[0].Results[1].AllocatorStats = opts, stats
	figs := htmlFigures(t, rep)
	first := renderHTML(t, rep, figs)
	for range 5 {
		require.Equal(t, first, renderHTML(t, rep, figs))
	}
	assert.Regexp(t, `(?s)opt00.*opt01.*opt02.*opt49`, first)
	assert.Regexp(t, `(?s)stat00.*stat01.*stat02.*stat49`, first)
}

// The page loads nothing: every src is a data: URI, every href a fragment or
// a file beside the page.
func TestHTMLSelfContained(t *testing.T) {
	rep := htmlReport(t)
	page := renderHTML(t, rep, htmlFigures(t, rep))
	assert.NotContains(t, page, "http://")
	assert.NotContains(t, page, "https://")
	assert.NotContains(t, page, "@import")
	assert.NotContains(t, page, "url(")
	assert.NotContains(t, page, "<link")
	assert.NotContains(t, page, "<script")
	refs := regexp.MustCompile(`\b(src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1)
	require.NotEmpty(t, refs)
	for _, m := range refs {
		attr, v := m[1], html.UnescapeString(m[2])
		switch attr {
		case "src":
			assert.True(t, strings.HasPrefix(v, "data:image/png;base64,"), "src=%.60s", v)
		case "href":
			assert.Regexp(t, `^(#[-\w]+|[-\w.]+\.(svg|png))$`, v)
		}
	}
}

func TestHTMLEmpty(t *testing.T) {
	page := renderHTML(t, Report{Version: 1}, nil)
	assert.Contains(t, page, "<title>bfcsim report</title>")
	assert.Contains(t, page, "No traces were replayed.")
	assert.NotContains(t, page, "<nav")
}

// TestHTMLInBrowser opens the page in headless Chromium: every image loads,
// the tables render, and a screenshot is kept for a person to look at, in
// $BFCSIM_ARTIFACTS when it is set.
func TestHTMLInBrowser(t *testing.T) {
	rep := htmlReport(t)
	figs := htmlFigures(t, rep)
	var buf bytes.Buffer
	require.NoError(t, WriteHTML(&buf, rep, figs))
	file := filepath.Join(t.TempDir(), "index.html")
	require.NoError(t, os.WriteFile(file, buf.Bytes(), 0o644))

	dir := os.Getenv("BFCSIM_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	shot := filepath.Join(dir, "report-index.png")

	page := browsertest.Open(t, file, shot)
	t.Logf("screenshot of the HTML report: %s", shot)
	if os.Getenv("BFCSIM_ARTIFACTS") != "" {
		kept := filepath.Join(dir, "report-index.html")
		require.NoError(t, os.WriteFile(kept, buf.Bytes(), 0o644))
		t.Logf("the page itself: %s", kept)
	}

	assert.Equal(t, "bfcsim report: fragmenter", page.Title)
	assert.Equal(t, len(figs), page.Images)
	assert.Equal(t, page.Images, page.LoadedImages, "broken images: %v", page.BrokenImages)
	assert.Empty(t, page.BrokenImages)
	// The trace's facts, the comparison, and per allocator options, space
	// options and stats, bfc's OOM bins: each a table in the DOM.
	assert.Equal(t, strings.Count(buf.String(), "<table"), page.Tables)
	assert.Greater(t, page.Tables, 2*len(rep.Traces[0].Results))
	rows := len(regexp.MustCompile(`<tr[ >]`).FindAllString(buf.String(), -1))
	assert.Equal(t, rows, page.TableRows, "every <tr> in the page is a table row in the DOM")
	assert.Greater(t, page.TableRows, len(specKeys)+40)
}

// Each trace opens with its result in one line: the allocator that reserves
// least among those that failed nothing, and who failed.
func TestHTMLVerdictLine(t *testing.T) {
	rep := goldenReport(t)
	page := renderHTML(t, rep, nil)
	assert.Contains(t, page, `<p class="verdict-line"><strong>naive reserves least: 7.97 MiB at its peak, 1.00× the lower bound; bfc 1 failed allocation, arena 1 failed allocation.</strong></p>`)
	tr := rep.Traces[0]
	for i := range tr.Results {
		tr.Results[i].FailedAllocs = 1
	}
	assert.Contains(t, traceVerdict(&tr), "(every allocator failed allocations)")
}

// BenchmarkWriteHTML writes index.html for a bundled trace replayed with
// every series recorded and its memory map summarised into the default
// raster, with its plots' PNGs embedded, as -o writes it.
func BenchmarkWriteHTML(b *testing.B) {
	tr := recordedTrace(b, "random.jsonl", sim.RecordConfig{Blocks: 1000}, "bfc")
	rep := Report{Traces: []Trace{*tr}}
	var figs []HTMLFigure
	for _, kind := range PlotKinds {
		var buf bytes.Buffer
		require.NoError(b, WritePlot(&buf, tr, PlotOptions{Kind: kind, Allocator: "bfc"}, "png"))
		figs = append(figs, HTMLFigure{Allocator: "bfc", Kind: kind, Title: kind, PNG: buf.Bytes(), PNGFile: kind + ".png", SVGFile: kind + ".svg"})
	}
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := WriteHTML(&buf, rep, figs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "bytes")
}
