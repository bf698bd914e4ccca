package report

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"git.sr.ht/~sbinet/gg"
	xdraw "golang.org/x/image/draw"
	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Plots are drawn with gonum/plot from the series a replay recorded
// (sim.RecordConfig): each kind has a function that turns the series into
// plain data, tested exactly, and a drawing around it.

// PlotKinds are the kinds of plot WritePlot draws (docs/plots.md).
var PlotKinds = []string{"timeline", "memmap", "occupancy", "fragmentation", "latency"}

// PlotFormats are the image formats WritePlot writes.
var PlotFormats = []string{"png", "svg"}

// PerAllocator says whether a kind of plot shows one allocator (memmap,
// occupancy) rather than every allocator of a trace.
func PerAllocator(kind string) bool { return kind == "memmap" || kind == "occupancy" }

// PlotOptions say what to plot.
type PlotOptions struct {
	// Kind is one of PlotKinds.
	Kind string
	// Allocator names the result a per-allocator kind draws; for the other
	// kinds, "" draws every result of the trace and a name draws only it.
	Allocator string
	// ColorBy colours a memmap's blocks by "size" or by "tag"; "" picks tag
	// when the trace's blocks carry tags, size otherwise.
	ColorBy string
}

// PlotFormat returns the format a file name asks for, by its extension.
func PlotFormat(path string) (string, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if !slices.Contains(PlotFormats, ext) {
		return "", fmt.Errorf("%s: a plot is written as .png or .svg, by the file's extension", path)
	}
	return ext, nil
}

// WritePlot draws one plot of tr in format ("png" or "svg") to w.
func WritePlot(w io.Writer, tr *Trace, opt PlotOptions, format string) error {
	if !slices.Contains(PlotFormats, format) {
		return fmt.Errorf("unknown plot format %q (want png or svg)", format)
	}
	var results []*Result
	for i := range tr.Results {
		r := &tr.Results[i]
		if opt.Allocator == "" || r.Allocator == opt.Allocator {
			results = append(results, r)
		}
	}
	if len(results) == 0 {
		if opt.Allocator != "" {
			return fmt.Errorf("no results for allocator %s in trace %s", opt.Allocator, tr.Name)
		}
		return fmt.Errorf("trace %s has no results to plot", tr.Name)
	}
	if PerAllocator(opt.Kind) && len(results) != 1 {
		return fmt.Errorf("a %s plot shows one allocator; name it", opt.Kind)
	}
	for _, r := range results {
		if err := Plottable(r, opt.Kind); err != nil {
			return fmt.Errorf("%s on %s: %w", r.Allocator, tr.Name, err)
		}
	}
	var fig *figure
	var err error
	switch opt.Kind {
	case "timeline":
		fig, err = timelineFigure(tr, results)
	case "fragmentation":
		fig, err = fragmentationFigure(tr, results)
	case "latency":
		fig, err = latencyFigure(tr, results)
	case "memmap":
		fig, err = memmapFigure(tr, results[0], opt.ColorBy)
	case "occupancy":
		fig, err = occupancyFigure(tr, results[0])
	default:
		return fmt.Errorf("unknown plot kind %q (want one of %s)", opt.Kind, strings.Join(PlotKinds, ", "))
	}
	if err != nil {
		return err
	}
	return fig.write(w, format)
}

// Plottable says why r cannot be drawn as a kind of plot, or nil if it can:
// the replay did not record what the plot is drawn from.
func Plottable(r *Result, kind string) error {
	s := r.Series
	switch {
	case s == nil:
		return errors.New("no series to plot")
	case (kind == "timeline" || kind == "fragmentation") && s.Timeline == nil,
		kind == "memmap" && s.Memmap == nil:
		return fmt.Errorf("no %s was recorded", kind)
	case kind == "occupancy" && s.Layout == nil:
		return errors.New("no layout was recorded (the trace ended before the event asked for)")
	}
	return nil
}

// figure is one or more panels, stacked, under a title, a note and a
// legend of swatches.
type figure struct {
	title, note string
	legend      []legendEntry
	panels      []*plot.Plot
	width, body vg.Length // the figure's width, and the panels' height
}

// Sizes: a figure is 10 inches wide, panels 2.6 inches high.
const (
	figureWidth = 10 * vg.Inch
	panelHeight = 2.6 * vg.Inch
	// The header: the title's line, the note's, a legend line's.
	titleLine  = 20
	noteLine   = 15
	legendLine = 14
)

func newFigure(title, note string, panels ...*plot.Plot) *figure {
	return &figure{title: title, note: note, panels: panels, width: figureWidth, body: vg.Length(len(panels)) * panelHeight}
}

// write renders the figure as PNG (96 dots per inch) or SVG.
func (f *figure) write(w io.Writer, format string) error {
	lines := f.legendLines()
	head := vg.Length(6 + titleLine + legendLine*len(lines))
	if f.note != "" {
		head += noteLine
	}
	height := head + f.body
	var c interface {
		vg.CanvasSizer
		io.WriterTo
	}
	if format == "png" {
		c = newPNGCanvas(f.width, height)
	} else {
		c = vgsvg.New(f.width, height)
	}
	dc := draw.New(c)
	y := dc.Max.Y - 4
	dc.FillText(titleStyle(), vg.Point{X: dc.Center().X, Y: y}, f.title)
	y -= titleLine
	if f.note != "" {
		dc.FillText(noteStyle(), vg.Point{X: dc.Center().X, Y: y}, f.note)
		y -= noteLine
	}
	f.drawLegend(dc, lines, y)
	body := draw.Crop(dc, 0, 0, 0, -head)
	tiles := draw.Tiles{Rows: len(f.panels), Cols: 1, PadY: 6, PadLeft: 4, PadRight: 10, PadBottom: 4}
	grid := make([][]*plot.Plot, len(f.panels))
	for i, p := range f.panels {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, tiles, body)
	for i, p := range f.panels {
		p.Draw(canvases[i][0])
	}
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("writing the %s image: %w", format, err)
	}
	return nil
}

// pngCanvas is a 96-dpi image canvas that draws images and glyphs onto
// it with the approximate bilinear filter, and writes itself with
// encodePNG. vgimg.PngCanvas's exact bilinear filter took about half the
// time of a memory map or occupancy plot, for plots that are mostly flat
// colour; the two filters' pixels differ only at the edges of shapes and
// in the anti-aliasing of glyphs. The plots of a replay with -o are drawn
// after the replay, and are part of its wait.
type pngCanvas struct {
	*vgimg.Canvas
	img *image.RGBA
	ctx *gg.Context
}

func newPNGCanvas(w, h vg.Length) pngCanvas {
	const dpi = 96
	px := func(l vg.Length) int { return int(l/vg.Inch*dpi + 0.5) } // as vgimg sizes its image
	img := image.NewRGBA(image.Rect(0, 0, px(w), px(h)))
	ctx := gg.NewContextForRGBA(img)
	ctx.SetLineCapButt()
	ctx.SetInterpolator(xdraw.ApproxBiLinear)
	ctx.InvertY()
	return pngCanvas{vgimg.NewWith(vgimg.UseImageWithContext(img, ctx), vgimg.UseDPI(dpi)), img, ctx}
}

// fillRect fills the axis-aligned rectangle with corners a and b, in the
// canvas's coordinates, with col, as gg fills the rectangle's path: each
// pixel blended over by the fraction of it the rectangle covers, found as
// freetype's rasterizer finds it (corners at 1/64 of a pixel, coverage in
// 12 bits). A memory map is thousands of rectangles, and rasterising each
// as a path was most of its time.
func (c pngCanvas) fillRect(a, b vg.Point, col color.Color) {
	x0, y0 := c.pixel(a)
	x1, y1 := c.pixel(b)
	if x0 > x1 {
		x0, x1 = x1, x0
	}
	if y0 > y1 {
		y0, y1 = y1, y0
	}
	bounds := c.img.Rect
	x0, x1 = max(x0, float64(bounds.Min.X)), min(x1, float64(bounds.Max.X))
	y0, y1 = max(y0, float64(bounds.Min.Y)), min(y1, float64(bounds.Max.Y))
	if !(x0 < x1 && y0 < y1) { // empty, off the canvas, or NaN
		return
	}
	p := c.painter(col)
	const m = 1<<16 - 1
	solid := [4]byte{uint8(p.cr >> 8), uint8(p.cg >> 8), uint8(p.cb >> 8), uint8(p.ca >> 8)} // blended at full alpha
	box := pixelBox{x0, y0, x1, y1}
	xa, xb := int(math.Floor(x0)), int(math.Ceil(x1))
	for y := int(math.Floor(y0)); y < int(math.Ceil(y1)); y++ {
		// The first and last pixels of the row; those between are
		// covered as far as the row is.
		p.blend(xa, y, p.alpha(box.cover(xa, y)))
		if xb-xa == 1 {
			continue
		}
		p.blend(xb-1, y, p.alpha(box.cover(xb-1, y)))
		ma := p.alpha(box.cover(xa+1, y))
		i := (y-p.bounds.Min.Y)*p.img.Stride + (xa+1-p.bounds.Min.X)*4
		inner := p.img.Pix[i : i+(xb-xa-2)*4]
		switch {
		case ma == m && p.ca == m:
			for k := 0; k < len(inner); k += 4 {
				copy(inner[k:k+4], solid[:])
			}
		case ma != 0:
			for x := xa + 1; x < xb-1; x++ {
				p.blend(x, y, ma)
			}
		}
	}
}

// strokeRect outlines the rectangle with corners a and b as gg strokes the
// closed polyline of its corners with width and col, each side a band
// width wide, and reports whether it did. The pixels are gg's but at the
// corners, which this squares where gg rounds them (a round join) or, where
// its polyline starts and ends, leaves a notch (TestStrokeRectAsGG): a
// sliver of a pixel at a thin line's corners. A rectangle narrower than
// the line, whose bands overlap, it leaves to gg: freetype counts their
// overlap twice where it covers part of a pixel, and this would draw such
// an outline lighter.
func (c pngCanvas) strokeRect(a, b vg.Point, width vg.Length, col color.Color) bool {
	ax, ay := c.pixel(a)
	bx, by := c.pixel(b)
	hw := float64(int(math.Round(width.Dots(c.DPI())*64))/2) / 64 // freetype's half width, in 26.6
	xl, xh, yl, yh := min(ax, bx), max(ax, bx), min(ay, by), max(ay, by)
	if !(xh-xl >= 2*hw && yh-yl >= 2*hw) || math.IsInf(xh-xl, 0) || math.IsInf(yh-yl, 0) { // thin, NaN or infinite
		return false
	}
	outer := pixelBox{xl - hw, yl - hw, xh + hw, yh + hw}
	inner := pixelBox{xl + hw, yl + hw, xh - hw, yh - hw}
	p := c.painter(col)
	// The pixels inside the inner box, [ix0, ix1) × [iy0, iy1), are not
	// painted.
	ix0, ix1 := int(math.Ceil(inner.x0)), int(math.Floor(inner.x1))
	iy0, iy1 := int(math.Ceil(inner.y0)), int(math.Floor(inner.y1))
	xa, xb := max(int(math.Floor(outer.x0)), p.bounds.Min.X), min(int(math.Ceil(outer.x1)), p.bounds.Max.X)
	for y := max(int(math.Floor(outer.y0)), p.bounds.Min.Y); y < min(int(math.Ceil(outer.y1)), p.bounds.Max.Y); y++ {
		for x := xa; x < xb; x++ {
			if y >= iy0 && y < iy1 && x >= ix0 && x < ix1 {
				x = ix1 - 1
				continue
			}
			if cov := outer.cover(x, y) - inner.cover(x, y); cov > 0 {
				p.blend(x, y, p.alpha(cov))
			}
		}
	}
	return true
}

// pixel returns p's pixel coordinates, rounded as gg rounds them to
// freetype's 26.6 fixed point.
func (c pngCanvas) pixel(p vg.Point) (x, y float64) {
	dpi := c.DPI()
	x, y = c.ctx.TransformPoint(p.X.Dots(dpi), p.Y.Dots(dpi))
	return math.Round(x*64) / 64, math.Round(y*64) / 64
}

// pixelBox is an axis-aligned box in pixel coordinates.
type pixelBox struct{ x0, y0, x1, y1 float64 }

// cover returns the area of pixel (x, y) that b covers.
func (b pixelBox) cover(x, y int) float64 {
	w := min(b.x1, float64(x+1)) - max(b.x0, float64(x))
	h := min(b.y1, float64(y+1)) - max(b.y0, float64(y))
	if w <= 0 || h <= 0 {
		return 0
	}
	return w * h
}

// rgbaPainter blends a colour into an image as freetype's RGBAPainter does.
type rgbaPainter struct {
	img            *image.RGBA
	bounds         image.Rectangle
	cr, cg, cb, ca uint32
}

func (c pngCanvas) painter(col color.Color) rgbaPainter {
	cr, cg, cb, ca := col.RGBA()
	return rgbaPainter{img: c.img, bounds: c.img.Rect, cr: cr, cg: cg, cb: cb, ca: ca}
}

// alpha is the 16-bit alpha of a pixel cov of which is covered, in
// freetype's 12 bits.
func (rgbaPainter) alpha(cov float64) uint32 {
	a := min(uint32(math.Round(cov*0x1000)), 0x0fff)
	return a<<4 | a>>8
}

// blend paints pixel (x, y) over at alpha ma.
func (p rgbaPainter) blend(x, y int, ma uint32) {
	const m = 1<<16 - 1
	i := (y-p.bounds.Min.Y)*p.img.Stride + (x-p.bounds.Min.X)*4
	px := p.img.Pix[i : i+4 : i+4]
	a := (m - (p.ca * ma / m)) * 0x101
	px[0] = uint8((uint32(px[0])*a + p.cr*ma) / m >> 8)
	px[1] = uint8((uint32(px[1])*a + p.cg*ma) / m >> 8)
	px[2] = uint8((uint32(px[2])*a + p.cb*ma) / m >> 8)
	px[3] = uint8((uint32(px[3])*a + p.ca*ma) / m >> 8)
}

// pngCanvasOf returns the pngCanvas c draws on, if it does: plot lays its
// canvases out by wrapping one in another.
func pngCanvasOf(c vg.Canvas) (pngCanvas, bool) {
	for {
		switch cc := c.(type) {
		case pngCanvas:
			return cc, true
		case draw.Canvas:
			c = cc.Canvas
		case *draw.Canvas:
			c = cc.Canvas
		default:
			return pngCanvas{}, false
		}
	}
}

func (c pngCanvas) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	err := encodePNG(cw, c.img)
	return cw.n, err
}

// countingWriter counts what it passes on.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Legend geometry: swatch size, the gap after it, the space after a label,
// and the least margin left and right of a legend line.
const (
	swatchBox  = 9
	swatchGap  = 4
	swatchPad  = 16
	legendEdge = 40
)

func legendStyle() draw.TextStyle {
	sty := noteStyle()
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
	return sty
}

func entryWidth(sty draw.TextStyle, e legendEntry) vg.Length {
	return swatchBox + swatchGap + sty.Width(e.label) + swatchPad
}

// legendLines splits the legend into lines that fit the figure's width.
func (f *figure) legendLines() [][]legendEntry {
	sty := legendStyle()
	var lines [][]legendEntry
	var w vg.Length
	for _, e := range f.legend {
		ew := entryWidth(sty, e)
		if len(lines) == 0 || w+ew > f.width-2*legendEdge {
			lines = append(lines, nil)
			w = 0
		}
		lines[len(lines)-1] = append(lines[len(lines)-1], e)
		w += ew
	}
	return lines
}

// drawLegend draws the legend's lines, centred, from y down.
func (f *figure) drawLegend(dc draw.Canvas, lines [][]legendEntry, y vg.Length) {
	sty := legendStyle()
	for i, line := range lines {
		var width vg.Length
		for _, e := range line {
			width += entryWidth(sty, e)
		}
		x := dc.Center().X - (width-swatchPad)/2
		yc := y - vg.Length(i)*legendLine - swatchBox/2
		for _, e := range line {
			sw := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
				Min: vg.Point{X: x, Y: yc - swatchBox/2}, Max: vg.Point{X: x + swatchBox, Y: yc + swatchBox/2},
			}}
			swatch{e.fill}.Thumbnail(&sw)
			dc.FillText(sty, vg.Point{X: x + swatchBox + swatchGap, Y: yc}, e.label)
			x += entryWidth(sty, e)
		}
	}
}

func titleStyle() draw.TextStyle {
	s := plot.New().Title.TextStyle
	s.Font.Size = 14
	s.Font.Weight = xfont.WeightBold
	s.XAlign, s.YAlign = draw.XCenter, draw.YTop
	return s
}

func noteStyle() draw.TextStyle {
	s := plot.New().Title.TextStyle
	s.Font.Size = 10
	s.Color = color.Gray{Y: 0x55}
	s.XAlign, s.YAlign = draw.XCenter, draw.YTop
	return s
}

// newPanel returns a plot with the house look: a title, axis labels, a
// light grid, and the legend at the top left.
func newPanel(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = 11
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.X.Label.TextStyle.Font.Size = 10
	p.Y.Label.TextStyle.Font.Size = 10
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = 9
	p.Legend.ThumbnailWidth = 14
	p.Add(gridLines{})
	return p
}

// allocatorColors are Okabe and Ito's colour-blind-safe palette, one per
// allocator in the order of a trace's results.
var allocatorColors = []color.Color{
	color.RGBA{0x00, 0x72, 0xB2, 0xff}, // blue
	color.RGBA{0xE6, 0x9F, 0x00, 0xff}, // orange
	color.RGBA{0x00, 0x9E, 0x73, 0xff}, // bluish green
	color.RGBA{0xD5, 0x5E, 0x00, 0xff}, // vermilion
	color.RGBA{0xCC, 0x79, 0xA7, 0xff}, // reddish purple
	color.RGBA{0x56, 0xB4, 0xE9, 0xff}, // sky blue
	color.RGBA{0xF0, 0xE4, 0x42, 0xff}, // yellow
	color.RGBA{0x00, 0x00, 0x00, 0xff}, // black
}

func allocatorColor(i int) color.Color { return allocatorColors[i%len(allocatorColors)] }

// gridLines draws a light grid at the major ticks, under everything else.
type gridLines struct{}

func (gridLines) Plot(c draw.Canvas, p *plot.Plot) {
	sty := draw.LineStyle{Color: color.Gray{Y: 0xe4}, Width: vg.Points(0.5)}
	trX, trY := p.Transforms(&c)
	for _, t := range p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max) {
		if t.Label != "" && t.Value >= p.X.Min && t.Value <= p.X.Max {
			x := trX(t.Value)
			c.StrokeLine2(sty, x, c.Min.Y, x, c.Max.Y)
		}
	}
	for _, t := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
		if t.Label != "" && t.Value >= p.Y.Min && t.Value <= p.Y.Max {
			y := trY(t.Value)
			c.StrokeLine2(sty, c.Min.X, y, c.Max.X, y)
		}
	}
}

// niceStep is a round step (1, 2 or 5 × 10^k) that cuts span into about n pieces.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsInf(span, 0) || math.IsNaN(span) {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// linearTicks are about five round ticks over [lo, hi], labelled by label.
func linearTicks(lo, hi, unit float64, label func(v float64) string) []plot.Tick {
	step := niceStep((hi-lo)/unit, 5) * unit
	var ticks []plot.Tick
	for k := math.Ceil(lo / step); k*step <= hi+step*1e-9; k++ {
		// k·step, not a running sum, so that 0.6 is 0.6 and not 0.6000000000000001.
		v, err := strconv.ParseFloat(strconv.FormatFloat(k*step, 'g', 12, 64), 64)
		if err != nil {
			v = k * step
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label(v)})
	}
	return ticks
}

// byteTicks label an axis of bytes in binary units: "0", "512 MiB", "1.5 GiB".
type byteTicks struct{}

func (byteTicks) Ticks(lo, hi float64) []plot.Tick {
	unit, name := byteUnit(math.Max(math.Abs(lo), math.Abs(hi)))
	return linearTicks(lo, hi, unit, func(v float64) string {
		if v == 0 {
			return "0"
		}
		return strconv.FormatFloat(v/unit, 'f', -1, 64) + " " + name
	})
}

// shortBytes formats a byte count in its own binary unit, with no more
// decimals than it needs: "0", "512 MiB", "1.5 GiB".
func shortBytes(v float64) string {
	if v == 0 {
		return "0"
	}
	unit, name := byteUnit(v)
	return strconv.FormatFloat(math.Round(v/unit*100)/100, 'f', -1, 64) + " " + name
}

// byteUnit is the binary unit in which v reads as 1 to 1023.
func byteUnit(v float64) (float64, string) {
	unit, name := 1.0, "B"
	for _, n := range []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"} {
		if v < 1024*unit {
			break
		}
		unit *= 1024
		name = n
	}
	return unit, name
}

// countTicks label an axis of counts: "0", "500", "2k", "1.5M".
type countTicks struct{}

func (countTicks) Ticks(lo, hi float64) []plot.Tick {
	return linearTicks(lo, hi, 1, shortCount)
}

func shortCount(v float64) string {
	for _, u := range []struct {
		div  float64
		name string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if math.Abs(v) >= u.div {
			return strconv.FormatFloat(v/u.div, 'f', -1, 64) + u.name
		}
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// percentTicks label an axis of fractions as percentages.
type percentTicks struct{}

func (percentTicks) Ticks(lo, hi float64) []plot.Tick {
	return linearTicks(lo, math.Min(hi, 1), 0.01, func(v float64) string {
		return strconv.FormatFloat(math.Round(100*v*1e9)/1e9, 'f', -1, 64) + "%"
	})
}

// legendRoom is how much higher than the data a panel with its legend at
// the top reaches, so that the legend does not hide the highest values.
func legendRoom(entries int) float64 { return 1 + 0.09*float64(entries+1) }

// summaryNote says how many events each point of a summarised series stands for.
func summaryNote(width int64, what string) string {
	if width <= 1 {
		return ""
	}
	return fmt.Sprintf("Summarised: each point is the %s over %s events.", what, Count(width))
}
