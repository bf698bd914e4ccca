package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/internal/browsertest"
	"github.com/bfcsim/bfcsim/report"
)

// The acceptance check of `replay -o`: index.html, opened in headless
// Chromium, shows every plot of every allocator and renders its tables.
// The screenshot is kept in $BFCSIM_ARTIFACTS when it is set.
func TestReplayOutIndexInBrowser(t *testing.T) {
	out := t.TempDir()
	code, _, stderr := cli(t, "", "replay", bundled+"transformer-train.jsonl", bundled+"fragmenter.jsonl",
		"--capacity", "8GiB", "-o", out)
	require.Equal(t, 0, code, stderr)
	index := filepath.Join(out, "index.html")
	html, err := os.ReadFile(index)
	require.NoError(t, err)

	shot := filepath.Join(t.TempDir(), "replay-index.png")
	if dir := os.Getenv("BFCSIM_ARTIFACTS"); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		shot = filepath.Join(dir, "replay-index.png")
	}
	page := browsertest.Open(t, index, shot)
	t.Logf("screenshot of %s: %s", index, shot)

	// Per trace: timeline, fragmentation and latency, and a memmap and an
	// occupancy map for each of the four allocators.
	const perTrace = 3 + 2*4
	assert.Equal(t, 2*perTrace, page.Images)
	assert.Equal(t, page.Images, page.LoadedImages, "broken images: %v", page.BrokenImages)
	assert.Equal(t, strings.Count(string(html), "<table"), page.Tables)
	assert.Greater(t, page.TableRows, 2*40, "the metric tables of both traces")
	st, err := os.Stat(shot)
	require.NoError(t, err)
	assert.Greater(t, st.Size(), int64(10_000))
}

// The interactive memory view of index.html, worked in headless Chromium:
// hovering a block shows its allocation (checked against the trace file's
// own line), the wheel zooms and a double click resets, clicking the
// timeline shows every allocator's blocks live at that event, and a link in
// the comparison table moves the cursor to the peak. The screenshot is kept
// in $BFCSIM_ARTIFACTS when it is set.
func TestIndexExploreInBrowser(t *testing.T) {
	out := t.TempDir()
	const traceFile = bundled + "cnn-infer.jsonl"
	code, _, stderr := cli(t, "", "replay", traceFile, "-a", "bfc,naive", "-o", out)
	require.Equal(t, 0, code, stderr)
	index := filepath.Join(out, "index.html")
	html, err := os.ReadFile(index)
	require.NoError(t, err)
	data := exploreDataOf(t, string(html))
	require.Len(t, data.Traces, 1)
	bfc := data.Traces[0].Allocators[0]
	require.Equal(t, "bfc", bfc.Name)
	require.True(t, bfc.Exact)

	// The block to hover: the largest in bytes × events, so that it is
	// wide enough to hit.
	b := bfc.Blocks
	k := 0
	for i := range b.S {
		if b.S[i]*uint64(b.E[i]-b.B[i]) > b.S[k]*uint64(b.E[k]-b.B[k]) {
			k = i
		}
	}
	// The trace itself says that line LA allocates id I.
	lines := strings.Split(readTraceText(t, traceFile), "\n")
	var alloc struct {
		Op string `json:"op"`
		ID uint64 `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[b.LA[k]-1]), &alloc))
	require.Equal(t, "alloc", alloc.Op)
	require.Equal(t, b.I[k], alloc.ID)

	shot := filepath.Join(t.TempDir(), "explore.png")
	if dir := os.Getenv("BFCSIM_ARTIFACTS"); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		shot = filepath.Join(dir, "explore.png")
	}
	type point struct{ X, Y float64 }
	type view struct{ E0, E1, A0, A1 float64 }
	const js = `bfcsimView.find("trace-1")`
	browsertest.Drive(t, index, func(ctx context.Context) error {
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("trace-1-explore").scrollIntoView(); true`)); err != nil {
			return err
		}
		// Hover the block: the tooltip names it.
		p, err := chromedp.Run(ctx, chromedp.Evaluate[point](fmt.Sprintf(`(() => { const c = %s.blockCenter(%d); return {X: c.x, Y: c.y}; })()`, js, b.I[k])))
		if err != nil {
			return err
		}
		if err := chromedp.Do(ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, p.X, p.Y)); err != nil {
			return err
		}
		tip, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const t = document.querySelector("#trace-1-explore .x-tip"); return t.hidden ? "" : t.textContent; })()`))
		if err != nil {
			return err
		}
		assert.Contains(t, tip, fmt.Sprintf("id %d", b.I[k]))
		assert.Contains(t, tip, "allocated at event "+report.Count(b.B[k])+" (line "+report.Count(b.LA[k])+")")
		assert.Contains(t, tip, "block "+jsBytes(b.S[k]))

		// The wheel zooms in around the pointer; a double click resets.
		before, err := chromedp.Run(ctx, chromedp.Evaluate[view](`(() => { const v = `+js+`.range(); return {E0: v.e0, E1: v.e1, A0: v.a0, A1: v.a1}; })()`))
		if err != nil {
			return err
		}
		// The protocol wants deltaX too, and leaves out a zero: a hair of it.
		wheel := func(p *input.DispatchMouseEventParams) { p.DeltaX, p.DeltaY = 0.001, -120 }
		if err := chromedp.Do(ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseWheel, p.X, p.Y, wheel)); err != nil {
			return err
		}
		zoomed, err := chromedp.Run(ctx, chromedp.Evaluate[view](`(() => { const v = `+js+`.range(); return {E0: v.e0, E1: v.e1, A0: v.a0, A1: v.a1}; })()`))
		if err != nil {
			return err
		}
		assert.InDelta(t, 0.8*(before.E1-before.E0), zoomed.E1-zoomed.E0, 1e-6*(before.E1-before.E0), "the wheel zooms the events by 0.8")
		assert.Less(t, zoomed.A1-zoomed.A0, before.A1-before.A0)
		if err := chromedp.Do(ctx, chromedp.MouseClickXY(p.X, p.Y, chromedp.ClickCount(2))); err != nil {
			return err
		}
		reset, err := chromedp.Run(ctx, chromedp.Evaluate[view](`(() => { const v = `+js+`.range(); return {E0: v.e0, E1: v.e1, A0: v.a0, A1: v.a1}; })()`))
		if err != nil {
			return err
		}
		assert.Equal(t, before, reset, "a double click resets the view")

		// Clicking the middle of the timeline sets the cursor there; every
		// allocator's row says what is live then.
		tl, err := chromedp.Run(ctx, chromedp.Evaluate[point](`(() => { const r = document.querySelector("#trace-1-explore .x-timeline").getBoundingClientRect(); return {X: r.left + r.width / 2, Y: r.top + r.height / 2}; })()`))
		if err != nil {
			return err
		}
		if err := chromedp.Do(ctx, chromedp.MouseClickXY(tl.X, tl.Y)); err != nil {
			return err
		}
		cursor, err := chromedp.Run(ctx, chromedp.Evaluate[int64](js+`.cursor`))
		if err != nil {
			return err
		}
		assert.InDelta(t, data.Traces[0].Events/2, cursor, float64(data.Traces[0].Events)/100)
		labels, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#trace-1-explore .x-occ-label")).map(l => l.textContent)`))
		if err != nil {
			return err
		}
		require.Len(t, labels, 2)
		for j, a := range data.Traces[0].Allocators {
			live := 0
			for i := range a.Blocks.B {
				if a.Blocks.B[i] <= cursor && cursor < a.Blocks.E[i] {
					live++
				}
			}
			assert.Contains(t, labels[j], fmt.Sprintf("%s after event %s: %s blocks", a.Name, report.Count(cursor), report.Count(int64(live))))
		}

		// In the side-by-side view, the pointer on a live block of naive's
		// names it.
		naive := data.Traces[0].Allocators[1]
		found := false
		for i := range naive.Blocks.B {
			if naive.Blocks.B[i] > cursor || cursor >= naive.Blocks.E[i] || naive.Blocks.S[i] < (naive.Hi-naive.Lo)/50 {
				continue
			}
			x := (float64(naive.Blocks.A[i]) + float64(naive.Blocks.S[i])/2) / float64(naive.Hi-naive.Lo)
			bar, err := chromedp.Run(ctx, chromedp.Evaluate[point](fmt.Sprintf(`(() => { const r = document.querySelectorAll("#trace-1-explore canvas.x-occ-bar")[1].getBoundingClientRect(); return {X: r.left + r.width * %g, Y: r.top + r.height / 2}; })()`, x)))
			if err != nil {
				return err
			}
			if err := chromedp.Do(ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, bar.X, bar.Y)); err != nil {
				return err
			}
			title, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelectorAll("#trace-1-explore canvas.x-occ-bar")[1].title`))
			if err != nil {
				return err
			}
			assert.Contains(t, title, fmt.Sprintf("naive: id %d", naive.Blocks.I[i]))
			found = true
			break
		}
		assert.True(t, found, "a block of naive wide enough to point at, live at the cursor")

		// The peak in the comparison table leads to its moment.
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('a.x-jump[data-alloc="1"]').click(); true`)); err != nil {
			return err
		}
		cursor, err = chromedp.Run(ctx, chromedp.Evaluate[int64](js+`.cursor`))
		if err != nil {
			return err
		}
		assert.Equal(t, data.Traces[0].Allocators[1].Peak, cursor)
		png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS("#trace-1-explore")))
		if err != nil {
			return err
		}
		return os.WriteFile(shot, png, 0o644)
	})
	t.Logf("screenshot: %s", shot)
}

// exploreData is the part of index.html's embedded data the browser test
// reads.
type exploreData struct {
	Traces []struct {
		Events     int64 `json:"events"`
		Allocators []struct {
			Name   string `json:"name"`
			Peak   int64  `json:"peak"`
			Exact  bool   `json:"exact"`
			Lo     uint64 `json:"lo"`
			Hi     uint64 `json:"hi"`
			Blocks struct {
				A, S, I []uint64
				B, E    []int64
				LA, LF  []int64
			} `json:"blocks"`
			Raster *struct {
				Rows, Cols int
				U          []json.Number
			} `json:"raster"`
		} `json:"allocators"`
	} `json:"traces"`
}

func exploreDataOf(t *testing.T, html string) exploreData {
	t.Helper()
	const open = `<script type="application/json" id="bfcsim-data">`
	i := strings.Index(html, open)
	require.GreaterOrEqual(t, i, 0, "index.html embeds the view's data")
	rest := html[i+len(open):]
	var d exploreData
	require.NoError(t, json.Unmarshal([]byte(rest[:strings.Index(rest, "</script>")]), &d))
	return d
}

func readTraceText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// jsBytes formats n as the page's script does: three significant digits.
func jsBytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n), 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	switch {
	case f < 10:
		return fmt.Sprintf("%.2f %s", f, units[u])
	case f < 100:
		return fmt.Sprintf("%.1f %s", f, units[u])
	}
	return fmt.Sprintf("%.0f %s", f, units[u])
}

// A trace with more blocks than the replay keeps one by one: the page draws
// the allocators' rasters, says so, and stays small.
func TestIndexExploreSummarised(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "many.jsonl")
	code, _, stderr := cli(t, "", "gen", "random", "--events", "60000", "-o", tr)
	require.Equal(t, 0, code, stderr)
	out := filepath.Join(dir, "out")
	code, _, stderr = cli(t, "", "replay", tr, "-a", "bfc,naive", "-o", out)
	require.Equal(t, 0, code, stderr)
	html, err := os.ReadFile(filepath.Join(out, "index.html"))
	require.NoError(t, err)
	assert.Contains(t, string(html), "bfc and naive made more blocks than a replay keeps one by one (20,000): their largest 20,000 blocks (")
	data := exploreDataOf(t, string(html))
	for _, a := range data.Traces[0].Allocators {
		assert.False(t, a.Exact, a.Name)
		assert.Len(t, a.Blocks.S, 20000, "%s: the largest blocks, drawn over the raster", a.Name)
		// The raster: each cell's percentage in use, a whole number.
		require.NotNil(t, a.Raster, a.Name)
		require.Len(t, a.Raster.U, a.Raster.Rows*a.Raster.Cols, a.Name)
		most := int64(0)
		for _, u := range a.Raster.U {
			n, err := u.Int64()
			require.NoError(t, err, "%s: %s", a.Name, u)
			require.True(t, n >= 0 && n <= 100, "%s: %d%%", a.Name, n)
			most = max(most, n)
		}
		assert.Equal(t, int64(100), most, "%s: some cell is all in use", a.Name)
	}
	assert.Less(t, len(html), 8<<20, "the page stays a few megabytes")
}
