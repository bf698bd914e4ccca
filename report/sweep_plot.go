package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"

	"github.com/bfcsim/bfcsim/allocators"
)

// A sweep's plot shows one metric of one trace against the grid points.
// With one axis whose values are all numbers or sizes, the x axis is that
// option, numeric (logarithmic when the values span a decade or more), and
// each allocator is a line through its points. Otherwise each grid point is
// a labelled category and each allocator a marker, side by side. A red ring
// marks a point with failed allocations.

// sweepPlot is the data of a sweep's plot, tested exactly.
type sweepPlot struct {
	// numeric says the x axis is the one axis's values; else categories.
	numeric, logX bool
	xLabel        string
	// ticks label the x axis: each value, or each point.
	ticks  []plot.Tick
	series []sweepSeries
}

// sweepSeries is one allocator's values, in x order; a point the report
// lacks (a shard, a partial merge) or without a value is left out.
type sweepSeries struct {
	allocator string
	xys       plotter.XYs
	failed    plotter.XYs // the points with failed allocations
}

// numericValue reads an axis value as a number: a plain number, or a size
// such as 128MiB (in bytes).
func numericValue(v string) (float64, bool) {
	if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return f, true
	}
	if n, err := allocators.ParseSize(v); err == nil {
		return float64(n), true
	}
	return 0, false
}

// sweepPlotData gathers the plot of metric m for trace group g.
func sweepPlotData(s *Sweep, g SweepGroup, m *sweepMetric) sweepPlot {
	info := &s.Sweep
	points := info.Points()
	var sp sweepPlot
	xs := make([]float64, points) // x of each point
	if len(info.Axes) == 1 {
		ax := info.Axes[0]
		sp.numeric = true
		for i, v := range ax.Values {
			x, ok := numericValue(v)
			if !ok {
				sp.numeric = false
				break
			}
			xs[i] = x
		}
		if sp.numeric {
			sp.xLabel = ax.Name
			lo, hi := slices.Min(xs), slices.Max(xs)
			sp.logX = lo > 0 && hi >= 10*lo
			for i, v := range ax.Values {
				sp.ticks = append(sp.ticks, plot.Tick{Value: xs[i], Label: v})
			}
			slices.SortFunc(sp.ticks, func(a, b plot.Tick) int { return compareFloat(a.Value, b.Value) })
		}
	}
	if !sp.numeric {
		names := make([]string, len(info.Axes))
		for i, ax := range info.Axes {
			names[i] = ax.Name
		}
		sp.xLabel = strings.Join(names, ", ")
		if sp.xLabel == "" {
			sp.xLabel = "grid point"
		}
		for p := range points {
			xs[p] = float64(p)
			label := strings.Join(info.PointValues(p), ", ")
			if label == "" {
				label = "(no grid)"
			}
			sp.ticks = append(sp.ticks, plot.Tick{Value: float64(p), Label: label})
		}
	}
	// Allocators in the sweep's order; their markers side by side in a category.
	for a, name := range info.Allocators {
		se := sweepSeries{allocator: name}
		offset := 0.0
		if !sp.numeric && len(info.Allocators) > 1 {
			offset = 0.6 * (float64(a)/float64(len(info.Allocators)-1) - 0.5)
		}
		for _, i := range g.Entries {
			e := &s.Traces[i]
			_, p := info.JobOf(e.Job)
			j := slices.IndexFunc(e.Results, func(r Result) bool { return r.Allocator == name })
			if j < 0 {
				continue
			}
			v, ok := m.value(&e.Results[j])
			if !ok {
				continue
			}
			xy := plotter.XY{X: xs[p] + offset, Y: v}
			se.xys = append(se.xys, xy)
			if e.Results[j].FailedAllocs > 0 {
				se.failed = append(se.failed, xy)
			}
		}
		if sp.numeric {
			slices.SortStableFunc(se.xys, func(a, b plotter.XY) int { return compareFloat(a.X, b.X) })
			slices.SortStableFunc(se.failed, func(a, b plotter.XY) int { return compareFloat(a.X, b.X) })
		}
		sp.series = append(sp.series, se)
	}
	return sp
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// fixedTicks are an axis's ticks whatever its range.
type fixedTicks []plot.Tick

func (t fixedTicks) Ticks(float64, float64) []plot.Tick { return t }

// unitTicks label a linear axis with a metric's own format.
type unitTicks struct{ format func(float64) string }

func (u unitTicks) Ticks(lo, hi float64) []plot.Tick { return linearTicks(lo, hi, 1, u.format) }

// logTicks label a logarithmic axis: bytes at powers of two, other values
// at 1, 2 and 5 × 10^k, with at most about eight labels.
type logTicks struct {
	format func(float64) string
	bytes  bool
}

func (t logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	if t.bytes {
		e0, e1 := math.Floor(math.Log2(lo)), math.Ceil(math.Log2(hi))
		step := math.Ceil((e1 - e0 + 1) / 8)
		for e := e0; e <= e1; e++ {
			v := math.Pow(2, e)
			tick := plot.Tick{Value: v}
			if math.Mod(e, step) == 0 {
				tick.Label = shortBytes(v)
			}
			ticks = append(ticks, tick)
		}
		return ticks
	}
	e0, e1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	mults := []float64{1, 2, 5}
	if e1-e0 > 3 {
		mults = mults[:1]
	}
	for e := e0; e <= e1; e++ {
		for _, k := range mults {
			v := k * math.Pow(10, e)
			ticks = append(ticks, plot.Tick{Value: v, Label: t.format(v)})
		}
	}
	return ticks
}

// sweepGlyphs tell allocators apart without colour.
var sweepGlyphs = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{},
	draw.BoxGlyph{}, draw.RingGlyph{}, draw.PlusGlyph{}, draw.CrossGlyph{},
}

// SweepPlotFileName names the plot of a metric of a trace that sweep -o DIR
// writes: "cnn-infer.sweep.peak_reserved_bytes.png".
func SweepPlotFileName(traceName, metric, format string) string {
	return traceFilePrefix(traceName) + ".sweep." + cleanFileName(metric) + "." + format
}

// WriteSweepPlot draws metric against the grid points for the trace group
// g of s, in format ("png" or "svg"), to w.
func WriteSweepPlot(w io.Writer, s *Sweep, g SweepGroup, metric, format string) error {
	if !slices.Contains(PlotFormats, format) {
		return fmt.Errorf("unknown plot format %q (want png or svg)", format)
	}
	m, err := lookupSweepMetric(metric)
	if err != nil {
		return err
	}
	sp := sweepPlotData(s, g, m)
	way := "lower"
	if m.HigherBetter {
		way = "higher"
	}
	p := newPanel(fmt.Sprintf("%s (%s is better)", m.Name, way), sp.xLabel, m.Name)
	p.X.Tick.Marker = fixedTicks(sp.ticks)
	switch {
	case m.Unit == UnitBytes:
		p.Y.Tick.Marker = byteTicks{}
	case m.Unit == UnitFraction:
		p.Y.Tick.Marker = percentTicks{}
	case m.Name == "footprint_vs_lower_bound":
		p.Y.Tick.Marker = ratioTicks{}
	case m.Unit == UnitCount:
		p.Y.Tick.Marker = countTicks{}
	default:
		p.Y.Tick.Marker = unitTicks{m.format}
	}
	if sp.numeric && sp.logX {
		p.X.Scale = plot.LogScale{}
	}
	if !sp.numeric && len(sp.ticks) > 6 {
		p.X.Tick.Label.Rotation = math.Pi / 6
		p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	var failed *plotter.Scatter // the first, for the legend
	for a, se := range sp.series {
		if len(se.xys) == 0 {
			continue
		}
		col := allocatorColor(a)
		sc := &plotter.Scatter{XYs: se.xys, GlyphStyle: draw.GlyphStyle{
			Color: col, Radius: 3.5, Shape: sweepGlyphs[a%len(sweepGlyphs)]}}
		if sp.numeric {
			l := &plotter.Line{XYs: se.xys, LineStyle: draw.LineStyle{Color: col, Width: 1.2}}
			p.Add(line{l}, sc)
			p.Legend.Add(se.allocator, l, sc)
		} else {
			p.Add(sc)
			p.Legend.Add(se.allocator, sc)
		}
		if len(se.failed) > 0 {
			fs := &plotter.Scatter{XYs: se.failed, GlyphStyle: draw.GlyphStyle{
				Color: failColor, Radius: 6, Shape: draw.RingGlyph{}}}
			p.Add(fs)
			if failed == nil {
				failed = fs
			}
		}
		for _, xy := range se.xys {
			lo, hi = math.Min(lo, xy.Y), math.Max(hi, xy.Y)
		}
	}
	entries := len(sp.series)
	if failed != nil {
		p.Legend.Add("failed allocations", failed)
		entries++
	}
	// The y axis spans the values: from 0 when they are not far from it,
	// logarithmic when they span more than a factor of logSpan.
	const logSpan = 50
	if math.IsInf(lo, 1) {
		lo, hi = 0, 1
	}
	if lo > 0 && hi >= logSpan*lo {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{format: m.format, bytes: m.Unit == UnitBytes}
		p.Y.Min = lo / 1.5
		p.Y.Max = p.Y.Min * math.Pow(hi*1.5/p.Y.Min, legendRoom(entries))
	} else {
		span := hi - lo
		ymin := lo - 0.1*span
		switch {
		case span == 0 && lo >= 0: // one value: from 0 up to it
			span, ymin = math.Max(hi, 1), 0
		case span == 0:
			span = math.Abs(hi) * 0.1
			ymin = lo - span
		case lo >= 0 && (ymin < 0 || lo < span):
			ymin = 0
		}
		p.Y.Min, p.Y.Max = ymin, ymin+(hi+0.1*span-ymin)*legendRoom(entries)
	}
	// The x axis spans the ticks, with a margin.
	xlo, xhi := sp.ticks[0].Value, sp.ticks[len(sp.ticks)-1].Value
	switch {
	case sp.logX:
		p.X.Min, p.X.Max = xlo/1.2, xhi*1.2
	case sp.numeric && xhi > xlo:
		p.X.Min, p.X.Max = xlo-0.06*(xhi-xlo), xhi+0.06*(xhi-xlo)
	default:
		p.X.Min, p.X.Max = xlo-0.5, xhi+0.5
	}
	note := "Each point is one replay of the trace at one grid point."
	if failed != nil {
		note += " A red ring marks failed allocations."
	}
	return newFigure(g.Name+": "+m.Name+" by grid point", note, p).write(w, format)
}
