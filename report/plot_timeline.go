package report

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/bfcsim/bfcsim/sim"
)

// Series colours of the timeline: live bytes dark, in use blue, reserved orange.
var (
	liveColor     = color.RGBA{0x33, 0x33, 0x33, 0xff}
	inUseColor    = color.RGBA{0x00, 0x72, 0xB2, 0xff}
	reservedColor = color.RGBA{0xE6, 0x9F, 0x00, 0xff}
	failColor     = color.RGBA{0xD0, 0x10, 0x10, 0xff}
)

// maxStepLines is the most steps drawn as lines; more would only grey the plot.
const maxStepLines = 200

// maxMarkLabels is the most marks labelled by name.
const maxMarkLabels = 30

// timelineXYs returns bytes live, in use and reserved over the trace: a
// point at the first event of each timeline point, holding the most bytes
// over its events, and a last point at the end of the trace. Drawn as steps,
// each value holds until the next point.
func timelineXYs(tl *sim.Timeline) (live, inUse, reserved plotter.XYs) {
	n := len(tl.Points)
	live, inUse, reserved = make(plotter.XYs, n+1), make(plotter.XYs, n+1), make(plotter.XYs, n+1)
	for i, p := range tl.Points {
		x := float64(p.Event)
		live[i] = plotter.XY{X: x, Y: float64(p.Live)}
		inUse[i] = plotter.XY{X: x, Y: float64(p.InUse)}
		reserved[i] = plotter.XY{X: x, Y: float64(p.Reserved)}
	}
	if n > 0 {
		end := float64(tl.Events)
		live[n] = plotter.XY{X: end, Y: live[n-1].Y}
		inUse[n] = plotter.XY{X: end, Y: inUse[n-1].Y}
		reserved[n] = plotter.XY{X: end, Y: reserved[n-1].Y}
	} else {
		live, inUse, reserved = live[:0], inUse[:0], reserved[:0]
	}
	return live, inUse, reserved
}

// failureXYs marks each timeline point with failed allocations, at its
// reserved bytes, and counts the failures.
func failureXYs(tl *sim.Timeline) (plotter.XYs, int64) {
	var xys plotter.XYs
	var n int64
	for _, p := range tl.Points {
		if p.Failed > 0 {
			xys = append(xys, plotter.XY{X: float64(p.Event), Y: float64(p.Reserved)})
			n += p.Failed
		}
	}
	return xys, n
}

func stepLine(xys plotter.XYs, c color.Color, width vg.Length) *plotter.Line {
	l := &plotter.Line{XYs: xys, StepStyle: plotter.PostStep}
	l.LineStyle = draw.LineStyle{Color: c, Width: width}
	return l
}

func timelineFigure(tr *Trace, results []*Result) (*figure, error) {
	var panels []*plot.Plot
	var width int64
	var notes []string
	for _, r := range results {
		tl := r.Series.Timeline
		width = max(width, tl.Width)
		p := newPanel(fmt.Sprintf("%s: peak reserved %s, peak in use %s, peak live %s",
			r.Allocator, Bytes(r.PeakReservedBytes), Bytes(r.PeakInUseBytes), Bytes(r.PeakLiveBytes)),
			"event", "bytes")
		p.X.Tick.Marker, p.Y.Tick.Marker = countTicks{}, byteTicks{}
		p.X.Min, p.Y.Min = 0, 0
		live, inUse, reserved := timelineXYs(tl)
		p.Y.Max = float64(max(r.PeakReservedBytes, r.PeakInUseBytes, r.PeakLiveBytes, 1)) * legendRoom(4)
		marks := &eventLines{timeline: tl}
		p.Add(marks)
		lr, li, ll := stepLine(reserved, reservedColor, 1.6), stepLine(inUse, inUseColor, 1.1), stepLine(live, liveColor, 0.8)
		p.Add(line{lr}, line{li}, line{ll})
		p.Legend.Add("reserved", lr)
		p.Legend.Add("in use", li)
		p.Legend.Add("live (requested)", ll)
		if fails, n := failureXYs(tl); n > 0 {
			s, err := plotter.NewScatter(fails)
			if err != nil {
				return nil, err
			}
			s.GlyphStyle = draw.GlyphStyle{Color: failColor, Radius: 3.5, Shape: draw.CrossGlyph{}}
			p.Add(s)
			p.Legend.Add(fmt.Sprintf("failed allocation (%s)", Count(n)), s)
		}
		if note := marks.note(); note != "" && len(notes) == 0 {
			notes = append(notes, note)
		}
		panels = append(panels, p)
	}
	if s := summaryNote(width, "most bytes"); s != "" {
		notes = append([]string{s}, notes...)
	}
	return newFigure(tr.Name+": bytes live, in use and reserved over the trace", joinNotes(notes), panels...), nil
}

func joinNotes(notes []string) string {
	s := ""
	for _, n := range notes {
		if s != "" {
			s += " "
		}
		s += n
	}
	return s
}

// eventLines draws the trace's steps (up to maxStepLines) as faint lines and
// its marks as labelled dashed lines.
type eventLines struct{ timeline *sim.Timeline }

func (e *eventLines) drawSteps() bool {
	return e.timeline.Steps <= maxStepLines && e.timeline.Steps <= int64(len(e.timeline.Marks))
}

func (e *eventLines) note() string {
	tl := e.timeline
	switch {
	case tl.Steps > 0 && !e.drawSteps():
		return fmt.Sprintf("%s steps, not drawn.", Count(tl.Steps))
	case tl.MarkEvents > int64(len(tl.Marks)):
		return fmt.Sprintf("The first %d of %s marks are drawn.", len(tl.Marks), Count(tl.MarkEvents))
	}
	return ""
}

func (e *eventLines) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	stepSty := draw.LineStyle{Color: color.Gray{Y: 0xc8}, Width: 0.5, Dashes: []vg.Length{2, 2}}
	markSty := draw.LineStyle{Color: color.Gray{Y: 0x60}, Width: 0.7, Dashes: []vg.Length{4, 2}}
	txt := p.Legend.TextStyle
	txt.Font.Size = 7
	txt.Color = color.Gray{Y: 0x40}
	txt.Rotation = math.Pi / 2
	txt.XAlign, txt.YAlign = draw.XRight, draw.YTop
	labels := 0
	for _, m := range e.timeline.Marks {
		x := trX(float64(m.Event))
		if !c.ContainsX(x) {
			continue
		}
		if m.Step {
			if e.drawSteps() {
				c.StrokeLine2(stepSty, x, c.Min.Y, x, c.Max.Y)
			}
			continue
		}
		c.StrokeLine2(markSty, x, c.Min.Y, x, c.Max.Y)
		if labels < maxMarkLabels && m.Name != "" {
			c.FillText(txt, vg.Point{X: x + 1, Y: c.Max.Y - 2}, m.Name)
			labels++
		}
	}
}

// fragmentationXYs returns, per timeline point, TensorFlow's fragmentation
// metric (its largest value over the point's events) and reserved ÷ live
// bytes (of the point's maxima; points with nothing live are left out).
func fragmentationXYs(tl *sim.Timeline) (tf, ratio plotter.XYs) {
	for _, p := range tl.Points {
		x := float64(p.Event)
		tf = append(tf, plotter.XY{X: x, Y: p.TFFragMax})
		if p.Live > 0 {
			ratio = append(ratio, plotter.XY{X: x, Y: float64(p.Reserved) / float64(p.Live)})
		}
	}
	return tf, ratio
}

func fragmentationFigure(tr *Trace, results []*Result) (*figure, error) {
	tfPanel := newPanel("TensorFlow's fragmentation: (free − largest free block) ÷ free, in the pool", "event", "fragmentation")
	tfPanel.X.Tick.Marker, tfPanel.Y.Tick.Marker = countTicks{}, percentTicks{}
	tfPanel.X.Min, tfPanel.Y.Min, tfPanel.Y.Max = 0, 0, legendRoom(len(results))
	ratioPanel := newPanel("Footprint: reserved ÷ live bytes (1× is no waste)", "event", "reserved ÷ live")
	ratioPanel.X.Tick.Marker, ratioPanel.X.Min = countTicks{}, 0
	var width int64
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, r := range results {
		tl := r.Series.Timeline
		width = max(width, tl.Width)
		tf, ratio := fragmentationXYs(tl)
		col := allocatorColor(i)
		l1 := &plotter.Line{XYs: tf, LineStyle: draw.LineStyle{Color: col, Width: 1}}
		tfPanel.Add(line{l1})
		tfPanel.Legend.Add(fmt.Sprintf("%s (max %s, mean %s)", r.Allocator,
			Percent(r.TFFragmentation.Max), Percent(r.TFFragmentation.Mean)), l1)
		if len(ratio) > 0 {
			l2 := &plotter.Line{XYs: ratio, LineStyle: draw.LineStyle{Color: col, Width: 1}}
			ratioPanel.Add(line{l2})
			ratioPanel.Legend.Add(fmt.Sprintf("%s (fragmentation %s)", r.Allocator, Percent(r.Fragmentation)), l2)
			for _, xy := range ratio {
				lo, hi = math.Min(lo, xy.Y), math.Max(hi, xy.Y)
			}
		}
	}
	switch {
	case math.IsInf(hi, -1): // nothing was ever live
		ratioPanel.Y.Tick.Marker = ratioTicks{}
		ratioPanel.Y.Min, ratioPanel.Y.Max = 1, 2
	case hi > 20*lo:
		ratioPanel.Y.Scale = plot.LogScale{}
		ratioPanel.Y.Tick.Marker = ratioLogTicks{}
		ratioPanel.Y.Min = lo
		ratioPanel.Y.Max = lo * math.Pow(hi/lo, legendRoom(len(results)))
	default:
		ratioPanel.Y.Tick.Marker = ratioTicks{}
		ratioPanel.Y.Min = math.Min(1, lo)
		ratioPanel.Y.Max = ratioPanel.Y.Min + (hi-ratioPanel.Y.Min)*legendRoom(len(results))
	}
	note := summaryNote(width, "largest value (bytes: the most reserved and the most live)")
	return newFigure(tr.Name+": fragmentation over the trace", note, tfPanel, ratioPanel), nil
}

// ratioTicks label a linear axis of ratios: "1×", "1.5×".
type ratioTicks struct{}

func (ratioTicks) Ticks(lo, hi float64) []plot.Tick {
	return linearTicks(lo, hi, 1, func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + "×" })
}

// ratioLogTicks label a log axis of ratios at 1, 2, 5 × 10^k.
type ratioLogTicks struct{}

func (ratioLogTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= lo*0.999 && v <= hi*1.001 {
				ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64) + "×"})
			}
		}
	}
	return ticks
}

// latencyX places a quantile on the latency plot's x axis: -log10(1-q), so
// that 90%, 99%, 99.9% … are evenly spaced; the maximum (q = 1) goes half a
// decade past the last quantile.
func latencyX(q float64) float64 {
	if q >= 1 {
		return -math.Log10(1-sim.CurveQuantiles[len(sim.CurveQuantiles)-2]) + 0.5
	}
	return -math.Log10(1 - q)
}

// latencyXYs returns a latency curve against latencyX of its quantiles.
// Times below 1 ns are drawn at 1 ns, the bottom of the log axis.
func latencyXYs(curve []int64) plotter.XYs {
	xys := make(plotter.XYs, 0, len(curve))
	for i, ns := range curve {
		xys = append(xys, plotter.XY{X: latencyX(sim.CurveQuantiles[i]), Y: math.Max(float64(ns), 1)})
	}
	return xys
}

// quantileTicks label the latency plot's x axis.
type quantileTicks struct{}

func (quantileTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := []plot.Tick{{Value: 0, Label: "0%"}}
	for k, label := range []string{"90%", "99%", "99.9%", "99.99%", "99.999%"} {
		ticks = append(ticks, plot.Tick{Value: float64(k + 1), Label: label})
	}
	return append(ticks, plot.Tick{Value: latencyX(1), Label: "max"})
}

// nanoLogTicks label a log axis of nanoseconds at 1, 10, 100 … with units.
type nanoLogTicks struct{}

func (nanoLogTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		v := math.Pow(10, e)
		ticks = append(ticks, plot.Tick{Value: v, Label: Nanos(v)})
		for m := 2.0; m < 10; m++ {
			ticks = append(ticks, plot.Tick{Value: m * v}) // minor
		}
	}
	return ticks
}

func latencyFigure(tr *Trace, results []*Result) (*figure, error) {
	var panels []*plot.Plot
	for _, call := range []string{"Allocate", "Free"} {
		p := newPanel(call+" latency by percentile (wall clock, this machine)", "percentile", "latency")
		p.X.Tick.Marker, p.Y.Tick.Marker = quantileTicks{}, nanoLogTicks{}
		p.Y.Scale = plot.LogScale{}
		p.X.Min, p.X.Max = 0, latencyX(1)
		drawn := false
		for i, r := range results {
			curve := r.Series.AllocLatency
			if call == "Free" {
				curve = r.Series.FreeLatency
			}
			if len(curve) == 0 {
				continue
			}
			l := &plotter.Line{XYs: latencyXYs(curve), LineStyle: draw.LineStyle{Color: allocatorColor(i), Width: 1.2}}
			p.Add(line{l})
			p.Legend.Add(r.Allocator, l)
			drawn = true
		}
		if !drawn {
			p.Y.Min, p.Y.Max = 1, 1000
		}
		panels = append(panels, p)
	}
	return newFigure(tr.Name+": latency of each call, measured in-process",
		"Timings vary from run to run and machine to machine; the byte counts of the other plots do not.", panels...), nil
}

// line draws a plotter.Line, and gives the plot only the glyph boxes that
// can decide its padding. A line's glyph boxes pad the plot by half its
// width around every point, so that no stroke is clipped; gonum makes one
// per point, and looks for the outermost ones twice a drawing (padX,
// padY). Every box of a line is the same size, so the outermost are those
// of the points furthest left, right, down and up among the points the
// plot keeps boxes of (those in its axes' ranges): four boxes, not one per
// point of a line of thousands, for the same padding.
type line struct{ *plotter.Line }

func (l line) GlyphBoxes(p *plot.Plot) []plot.GlyphBox {
	r := 0.5 * l.LineStyle.Width
	if r <= 0 {
		return nil // plot ignores boxes of no size
	}
	at := [4]int{-1} // the points furthest left, right, down and up
	var loX, hiX, loY, hiY float64
	for i := range l.XYs.Len() {
		x, y := l.XY(i)
		nx, ny := p.X.Norm(x), p.Y.Norm(y)
		if !(nx >= 0 && nx <= 1 && ny >= 0 && ny <= 1) {
			continue // a box plot drops, or (NaN) one never outermost
		}
		if at[0] < 0 {
			at, loX, hiX, loY, hiY = [4]int{i, i, i, i}, nx, nx, ny, ny
			continue
		}
		if nx < loX {
			at[0], loX = i, nx
		}
		if nx > hiX {
			at[1], hiX = i, nx
		}
		if ny < loY {
			at[2], loY = i, ny
		}
		if ny > hiY {
			at[3], hiY = i, ny
		}
	}
	if at[0] < 0 {
		return nil
	}
	rect := vg.Rectangle{Min: vg.Point{X: -r, Y: -r}, Max: vg.Point{X: r, Y: r}}
	boxes := make([]plot.GlyphBox, 0, len(at))
	for k, i := range at {
		if slices.Contains(at[:k], i) {
			continue
		}
		x, y := l.XY(i)
		boxes = append(boxes, plot.GlyphBox{X: p.X.Norm(x), Y: p.Y.Norm(y), Rectangle: rect})
	}
	return boxes
}
