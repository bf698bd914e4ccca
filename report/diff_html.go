package report

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/bfcsim/bfcsim/internal/outfile"
	"github.com/bfcsim/bfcsim/sim"
)

// WriteDiffDir writes d to dir, whole or not at all: report.json,
// report.md, and index.html with both runs' bytes over time on one plot
// (also timeline.svg and timeline.png) and the call sites, each with its
// stack on hover.
func WriteDiffDir(ctx context.Context, dir string, d Diff, before, after DiffRun) error {
	return outfile.WithDir(ctx, dir, func(out *outfile.Dir) error {
		fig, err := diffFigure(d, before, after)
		if err != nil {
			return err
		}
		var svg bytes.Buffer
		if fig != nil {
			if err := fig.write(&svg, "svg"); err != nil {
				return err
			}
			if err := out.Write("timeline.svg", func(w io.Writer) error { _, err := w.Write(svg.Bytes()); return err }); err != nil {
				return err
			}
			if err := out.Write("timeline.png", func(w io.Writer) error { return fig.write(w, "png") }); err != nil {
				return err
			}
		}
		for _, f := range []struct {
			name string
			fn   func(io.Writer) error
		}{
			{"report.json", func(w io.Writer) error { return writeIndentedJSON(w, d) }},
			{"report.md", func(w io.Writer) error { return WriteDiffMarkdown(w, d) }},
			{"index.html", func(w io.Writer) error { return writeDiffHTML(w, d, svg.Bytes()) }},
		} {
			if err := out.Write(f.name, f.fn); err != nil {
				return err
			}
		}
		return nil
	})
}

// stepAxis maps a run's events to steps: step k (from 1) begins at x = k,
// the events before the first at [0, 1), each step's events spread evenly
// to the next. ok is false when the timeline does not hold every step's
// start (none, or more than it keeps).
func stepAxis(tl *sim.Timeline) (func(event float64) float64, bool) {
	if tl.Steps == 0 || tl.Steps > int64(len(tl.Marks)) {
		return nil, false
	}
	at := []float64{0} // the event each x from 0 begins at
	for _, m := range tl.Marks {
		if m.Step {
			at = append(at, float64(m.Event))
		}
	}
	at = append(at, float64(tl.Events))
	return func(e float64) float64 {
		// k: the first start after e, the end standing for the last.
		k := min(max(sort.SearchFloat64s(at, math.Nextafter(e, math.Inf(1))), 1), len(at)-1)
		span := at[k] - at[k-1]
		if span <= 0 {
			return float64(k - 1)
		}
		return float64(k-1) + min(1, (e-at[k-1])/span)
	}, true
}

// diffFigure draws both runs' bytes live, in use and reserved (by their
// first allocator) on one panel: by step when both traces mark their
// steps, else by event. Nil when neither replay kept a timeline.
func diffFigure(d Diff, before, after DiffRun) (*figure, error) {
	tb, ab := timelineOf(before)
	ta, aa := timelineOf(after)
	if tb == nil || ta == nil {
		return nil, nil
	}
	xb, okb := stepAxis(tb)
	xa, oka := stepAxis(ta)
	xLabel := "step"
	if !okb || !oka {
		xb, xa = func(e float64) float64 { return e }, func(e float64) float64 { return e }
		xLabel = "event"
	}
	alloc := ab
	if aa != ab {
		alloc = ab + " before, " + aa + " after"
	}
	p := newPanel(fmt.Sprintf("%s: peak live %s → %s", alloc, Bytes(d.Before.PeakLiveBytes), Bytes(d.After.PeakLiveBytes)), xLabel, "bytes")
	p.Y.Tick.Marker = byteTicks{}
	if xLabel == "event" {
		p.X.Tick.Marker = countTicks{}
	}
	p.X.Min, p.Y.Min = 0, 0
	top := uint64(1)
	for _, run := range []struct {
		tl    *sim.Timeline
		x     func(float64) float64
		label string
		dash  []vg.Length
	}{{tb, xb, "before", []vg.Length{4, 2}}, {ta, xa, "after", nil}} {
		live, inUse, reserved := timelineXYs(run.tl)
		for _, xys := range []plotter.XYs{live, inUse, reserved} {
			for i := range xys {
				xys[i].X = run.x(xys[i].X)
				top = max(top, uint64(xys[i].Y))
			}
		}
		for _, s := range []struct {
			xys   plotter.XYs
			c     color.Color
			width vg.Length
			what  string
		}{{reserved, reservedColor, 1.6, "reserved"}, {inUse, inUseColor, 1.1, "in use"}, {live, liveColor, 0.8, "live"}} {
			c := s.c
			if run.dash != nil { // before: fainter, under after's
				r, g, b, _ := c.RGBA()
				c = color.NRGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 0x99}
			}
			l := stepLine(s.xys, c, s.width)
			l.LineStyle.Dashes = run.dash
			p.Add(line{l})
			p.Legend.Add(run.label+" "+s.what, l)
		}
	}
	p.Y.Max = float64(top) * legendRoom(6)
	note := "Before dashed and faint, after solid."
	if xLabel == "step" {
		note += " Aligned by step: step k begins at k, its events spread evenly to the next."
	}
	if s := summaryNote(max(tb.Width, ta.Width), "most bytes"); s != "" {
		note += " " + s
	}
	return newFigure("Bytes live, in use and reserved: "+d.Before.Trace+" → "+d.After.Trace, note, p), nil
}

var diffPage = template.Must(template.New("diff").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>bfcsim diff: {{.Before}} → {{.After}}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{padding:.25em .7em;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left}td.site{font-family:ui-monospace,monospace;cursor:help}
.grew{color:#b00020;font-weight:600}.shrank{color:#006d2c}.tag{font-size:12px;color:#666}
.exceeded{border-left:4px solid #b00020;padding:.2em 1em;background:#fff4f4}
img{max-width:100%}
</style></head><body>
<h1>bfcsim diff</h1>
<p><code>{{.Before}}</code> → <code>{{.After}}</code>: peak live {{.PeakBefore}} → {{.PeakAfter}}, <b>{{.PeakChange}}</b>.{{if .Phases}} The peak falls in {{.Phases}}.{{end}}</p>
{{if .MaxGrowth}}{{if .Exceeded}}<div class="exceeded"><p><b>Grew beyond --max-growth {{.MaxGrowth}}:</b></p><ul>{{range .Exceeded}}<li>{{.}}</li>{{end}}</ul></div>{{else}}<p>Nothing grew beyond --max-growth {{.MaxGrowth}}.</p>{{end}}{{end}}
{{if .Plot}}<p><img alt="bytes live, in use and reserved over both runs" src="data:image/svg+xml;base64,{{.Plot}}"></p>{{end}}
<h2>Allocators</h2>
<table><tr><th>allocator</th><th>peak reserved</th><th>change</th><th>fit</th><th>change</th></tr>
{{range .Allocators}}<tr><td>{{.Name}}</td><td>{{.Reserved}}</td><td>{{.ReservedChange}}</td><td>{{.Fit}}</td><td>{{.FitChange}}</td></tr>
{{end}}</table>
<h2>Live at the peak, by call site</h2>
{{if .Sites}}<p>The largest growth first; hover over a call site for its stack.</p>
<table><tr><th>call site</th><th>before</th><th>after</th><th>change</th><th>allocations</th></tr>
{{range .Sites}}<tr><td class="site" title="{{.Stack}}">{{.Name}}{{if .Status}} <span class="tag">{{.Status}}</span>{{end}}</td><td>{{.Before}}</td><td>{{.After}}</td><td class="{{.Class}}">{{.Change}}</td><td>{{.Counts}}</td></tr>
{{end}}<tr><td>the peaks' difference</td><td></td><td></td><td><b>{{.PeakDelta}}</b></td><td></td></tr></table>
{{else}}<p>No call site is named at either peak.</p>{{end}}
{{range .Notes}}<p>Note: {{.}}.</p>{{end}}
</body></html>
`))

func writeDiffHTML(w io.Writer, d Diff, svg []byte) error {
	type alloc struct{ Name, Reserved, ReservedChange, Fit, FitChange string }
	type site struct{ Name, Status, Stack, Before, After, Change, Class, Counts string }
	page := struct {
		Before, After, PeakBefore, PeakAfter, PeakChange, Phases, MaxGrowth, Plot, PeakDelta string
		Exceeded, Notes                                                                      []string
		Allocators                                                                           []alloc
		Sites                                                                                []site
	}{
		Before: sideName(d.Before), After: sideName(d.After), PeakBefore: Bytes(d.Before.PeakLiveBytes), PeakAfter: Bytes(d.After.PeakLiveBytes),
		PeakChange: change(d.Before.PeakLiveBytes, d.After.PeakLiveBytes), MaxGrowth: d.MaxGrowth, Exceeded: d.Exceeded, Notes: d.Notes,
		PeakDelta: SignedBytes(d.PeakDeltaBytes),
	}
	if bp, ap := d.Before.Phase(), d.After.Phase(); bp != "" || ap != "" {
		page.Phases = orDash(bp) + " before, " + orDash(ap) + " after"
	}
	if len(svg) > 0 {
		page.Plot = base64.StdEncoding.EncodeToString(svg)
	}
	for _, a := range d.Allocators {
		c := allocatorCells(a)
		page.Allocators = append(page.Allocators, alloc{a.Allocator, c[0], c[1], c[2], c[3]})
	}
	for _, c := range d.CallSites {
		s := site{Name: c.CallSite, Status: c.Status, Stack: strings.Join(c.Stack, "\n"), Before: Bytes(c.BeforeBytes),
			After: Bytes(c.AfterBytes), Change: SignedBytes(c.DeltaBytes), Counts: Count(c.BeforeCount) + " → " + Count(c.AfterCount)}
		if s.Stack == "" {
			s.Stack = "no stack recorded"
		}
		switch {
		case c.DeltaBytes > 0:
			s.Class = "grew"
		case c.DeltaBytes < 0:
			s.Class = "shrank"
		}
		page.Sites = append(page.Sites, s)
	}
	return diffPage.Execute(w, page)
}
