package report

import (
	"cmp"
	"fmt"
	"image"
	"image/color"
	"math"
	"math/bits"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/bfcsim/bfcsim/sim"
)

// Colours of the memory map and the occupancy map.
var (
	regionFill    = color.RGBA{0xe3, 0xe8, 0xee, 0xff}
	regionEdge    = color.RGBA{0x7a, 0x86, 0x94, 0xff}
	requestedFill = color.RGBA{0x00, 0x72, 0xB2, 0xff}
	wastedFill    = color.RGBA{0xD5, 0x5E, 0x00, 0xff}
	freeFill      = color.RGBA{0xb8, 0xe0, 0xb8, 0xff}
	unreserved    = color.RGBA{0xf7, 0xf7, 0xf7, 0xff}
	otherTagFill  = color.RGBA{0x99, 0x99, 0x99, 0xff}
	untaggedFill  = color.RGBA{0xc8, 0xc8, 0xc8, 0xff}
	white         = color.RGBA{0xff, 0xff, 0xff, 0xff}
)

// maxTagColors is how many tags get a colour of their own; the rest share grey.
const maxTagColors = 10

// minBlockHeight is the least height a block is drawn with, so that a small
// block in a large address range is still seen.
const minBlockHeight = 0.6 // points

// rect is one rectangle of a memory map, in event × address-offset units.
type rect struct {
	x0, x1, y0, y1 float64
	fill           color.Color
}

// legendEntry is one swatch of a figure's legend.
type legendEntry struct {
	fill  color.Color
	label string
}

// memmapRects turns an exact memory map into rectangles: regions first
// (drawn underneath), then blocks, with addresses as offsets from mm.Lo.
// Blocks are coloured by size (on a log scale) or by tag, and the legend
// says how.
func memmapRects(mm *sim.Memmap, colorBy string) (regions, blocks []rect, legend []legendEntry) {
	lo := float64(mm.Lo)
	for _, g := range mm.Regions {
		regions = append(regions, rect{
			x0: float64(g.Start), x1: float64(g.End),
			y0: float64(g.Addr) - lo, y1: float64(g.Addr+g.Size) - lo, fill: regionFill,
		})
	}
	var fill func(b *sim.MemBlock) color.Color
	if colorBy == "tag" {
		fill, legend = tagColors(mm.Blocks)
	} else {
		fill, legend = sizeColors(mm.Blocks)
	}
	for i := range mm.Blocks {
		b := &mm.Blocks[i]
		blocks = append(blocks, rect{
			x0: float64(b.Start), x1: float64(b.End),
			y0: float64(b.Addr) - lo, y1: float64(b.Addr+b.Size) - lo, fill: fill(b),
		})
	}
	return regions, blocks, legend
}

// sizeColors colours blocks from blue (the smallest) to red (the largest)
// by the logarithm of their size.
func sizeColors(blocks []sim.MemBlock) (func(*sim.MemBlock) color.Color, []legendEntry) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, b := range blocks {
		v := math.Log2(float64(b.Size))
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	cm := moreland.SmoothBlueRed()
	if len(blocks) == 0 {
		lo, hi = 0, 1
	}
	cm.SetMin(lo)
	cm.SetMax(math.Max(hi, lo+1e-9))
	at := func(v float64) color.Color {
		c, err := cm.At(math.Min(math.Max(v, cm.Min()), cm.Max()))
		if err != nil {
			return otherTagFill
		}
		return c
	}
	var legend []legendEntry
	for k := range 5 {
		v := lo + (hi-lo)*float64(k)/4
		label := Bytes(uint64(math.Round(math.Exp2(v))))
		if k > 0 && label == legend[len(legend)-1].label {
			continue
		}
		legend = append(legend, legendEntry{at(v), label})
	}
	return func(b *sim.MemBlock) color.Color { return at(math.Log2(float64(b.Size))) }, legend
}

// tagKey is how tagColors groups tags: whole, or by their first part.
func tagKey(blocks []sim.MemBlock) func(string) string {
	whole := func(t string) string { return t }
	distinct := map[string]bool{}
	for _, b := range blocks {
		if b.Tag != "" {
			distinct[b.Tag] = true
			if len(distinct) > maxTagColors {
				return tagGroup
			}
		}
	}
	return whole
}

// tagGroup is a tag's first part: "layer3" of "layer3.attn.qkv".
func tagGroup(t string) string {
	if i := strings.IndexAny(t, "./:"); i > 0 {
		return t[:i]
	}
	return t
}

// tagColors gives the tags holding the most bytes × events a colour each.
// When there are more tags than colours, tags are grouped by their first
// part (tagGroup).
func tagColors(blocks []sim.MemBlock) (func(*sim.MemBlock) color.Color, []legendEntry) {
	key := tagKey(blocks)
	weight := map[string]float64{}
	for _, b := range blocks {
		if b.Tag != "" {
			weight[key(b.Tag)] += float64(b.Size) * float64(b.End-b.Start)
		}
	}
	tags := make([]string, 0, len(weight))
	for t := range weight {
		tags = append(tags, t)
	}
	slices.SortFunc(tags, func(a, b string) int { return cmp.Or(cmp.Compare(weight[b], weight[a]), cmp.Compare(a, b)) })
	colors := map[string]color.Color{}
	var legend []legendEntry
	palette := append(slices.Clone(allocatorColors[:7]), color.RGBA{0x8c, 0x56, 0x4b, 0xff}, color.RGBA{0x17, 0xbe, 0xcf, 0xff}, color.RGBA{0x7f, 0x7f, 0x00, 0xff})
	for i, t := range tags {
		if i == maxTagColors {
			legend = append(legend, legendEntry{otherTagFill, fmt.Sprintf("%d other tags", len(tags)-maxTagColors)})
			break
		}
		colors[t] = palette[i]
		legend = append(legend, legendEntry{palette[i], shorten(t, 28)})
	}
	untagged := false
	for _, b := range blocks {
		if b.Tag == "" {
			untagged = true
			break
		}
	}
	if untagged {
		legend = append(legend, legendEntry{untaggedFill, "untagged"})
	}
	return func(b *sim.MemBlock) color.Color {
		if b.Tag == "" {
			return untaggedFill
		}
		if c, ok := colors[key(b.Tag)]; ok {
			return c
		}
		return otherTagFill
	}, legend
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// fewTags says whether the blocks of an exact memory map carry tags, and
// few enough that each can have a colour.
func fewTags(mm *sim.Memmap) bool {
	distinct := map[string]bool{}
	for _, b := range mm.Blocks {
		if b.Tag != "" {
			distinct[b.Tag] = true
		}
	}
	return len(distinct) > 0 && len(distinct) <= maxTagColors
}

// rects draws rectangles, optionally outlined, at least minBlockHeight high.
// On a PNG canvas it fills and outlines them itself (pngCanvas.fillRect,
// strokeRect), much faster than as paths.
type rects struct {
	rs      []rect
	outline *draw.LineStyle
	xmax    float64
	ymax    float64
}

func (r *rects) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	png, direct := pngCanvasOf(c.Canvas)
	for _, q := range r.rs {
		x0, x1, y0, y1 := trX(q.x0), trX(q.x1), trY(q.y0), trY(q.y1)
		if y1-y0 < minBlockHeight {
			mid := (y0 + y1) / 2
			y0, y1 = mid-minBlockHeight/2, mid+minBlockHeight/2
		}
		pts := []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
		if direct {
			png.fillRect(pts[0], pts[2], q.fill)
		} else {
			c.FillPolygon(q.fill, pts)
		}
		if r.outline == nil || direct && png.strokeRect(pts[0], pts[2], r.outline.Width, r.outline.Color) {
			continue
		}
		c.StrokeLines(*r.outline, append(pts, pts[0]))
	}
}

func (r *rects) DataRange() (xmin, xmax, ymin, ymax float64) { return 0, r.xmax, 0, r.ymax }

// rasterImage paints a memory map's raster: each cell white, shaded grey by
// the fraction reserved and blue by the fraction in use. Row 0 of the image
// is the raster's last row, the highest addresses.
func rasterImage(r *sim.Raster) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, r.Cols, r.Rows))
	for row := range r.Rows {
		for col := range r.Cols {
			u, v := r.At(row, col)
			v = math.Min(math.Max(v, u), 1)
			img.SetRGBA(col, r.Rows-1-row, mix(
				weighted{white, 1 - v},
				weighted{regionFill, v - u},
				weighted{requestedFill, u},
			))
		}
	}
	return img
}

type weighted struct {
	c color.RGBA // opaque
	w float64
}

// mix blends colours by weight (the weights sum to 1).
func mix(parts ...weighted) color.RGBA {
	var r, g, b float64
	for _, p := range parts {
		if p.w <= 0 {
			continue
		}
		r += p.w * float64(p.c.R)
		g += p.w * float64(p.c.G)
		b += p.w * float64(p.c.B)
	}
	clamp := func(v float64) uint8 { return uint8(math.Min(math.Max(math.Round(v), 0), 255)) }
	return color.RGBA{clamp(r), clamp(g), clamp(b), 0xff}
}

func memmapFigure(tr *Trace, r *Result, colorBy string) (*figure, error) {
	mm := r.Series.Memmap
	if colorBy == "" {
		colorBy = "size"
		if mm.Exact && fewTags(mm) {
			colorBy = "tag"
		}
	}
	if colorBy != "size" && colorBy != "tag" {
		return nil, fmt.Errorf("memmap colours blocks by size or tag, not %q", colorBy)
	}
	p := newPanel("", "event", fmt.Sprintf("address − %#x", mm.Lo))
	p.X.Tick.Marker, p.Y.Tick.Marker = countTicks{}, byteTicks{}
	p.X.Min, p.X.Max = 0, float64(max(mm.Events, 1))
	p.Y.Min, p.Y.Max = 0, float64(max(mm.Hi-mm.Lo, 1))
	fig := newFigure(fmt.Sprintf("%s · %s: every block in address × time", tr.Name, r.Allocator), "", p)
	fig.body = 6 * vg.Inch
	switch {
	case mm.Exact:
		regions, blocks, legend := memmapRects(mm, colorBy)
		edge := draw.LineStyle{Color: regionEdge, Width: 0.4}
		p.Add(&rects{rs: regions, outline: &edge, xmax: p.X.Max, ymax: p.Y.Max})
		p.Add(&rects{rs: blocks, xmax: p.X.Max, ymax: p.Y.Max})
		by := colorBy
		if colorBy == "tag" && !fewTags(mm) {
			by = "the first part of their tags"
		}
		fig.note = fmt.Sprintf("%s blocks over %s regions (grey); blocks coloured by %s.",
			Count(mm.BlockCount), Count(mm.RegionCount), by)
		if colorBy == "size" {
			fig.note += " Sizes:"
		}
		fig.legend = legend
	case mm.Raster != nil && mm.Raster.Rows > 0:
		ra := mm.Raster
		y0 := float64(ra.Lo) - float64(mm.Lo)
		p.Add(&imagePlot{img: rasterImage(ra), xmin: 0, ymin: y0,
			xmax: float64(int64(ra.Cols) * ra.Width), ymax: y0 + float64(uint64(ra.Rows)*ra.RowBytes)})
		fig.note = fmt.Sprintf("Summarised: %s blocks and %s regions in a %d × %d raster (%s events × %s per cell), shaded by the fraction in use.",
			Count(mm.BlockCount), Count(mm.RegionCount), ra.Rows, ra.Cols, Count(ra.Width), Bytes(ra.RowBytes))
		if colorBy == "tag" {
			fig.note += " Tags are not shown in a summary."
		}
		fig.legend = []legendEntry{{requestedFill, "in use"}, {regionFill, "reserved, free"}, {color.White, "not reserved"}}
	default:
		fig.note = "Nothing was allocated."
	}
	return fig, nil
}

// occupancyMap is the address space at one moment, wrapped into rows like a
// page of text: row i covers [lo + i·rowBytes, lo + (i+1)·rowBytes), cut
// into cols pixels of pixelBytes each. Each layer holds, per pixel, the
// fraction of its bytes that are requested, in blocks, and reserved.
type occupancyMap struct {
	lo, rowBytes, pixelBytes uint64
	rows, cols               int
	requested, block, region []float64
}

// occupancyRows and occupancyCols size the occupancy map: at most 64 rows of
// 1024 pixels.
const (
	occupancyRows = 64
	occupancyCols = 1024
)

// buildOccupancy lays out l: rowBytes is the least power of two that fits
// the layout's address range into maxRows rows (and at least a byte per
// pixel). A block's requested bytes are drawn at its start.
func buildOccupancy(l *sim.Layout, maxRows, cols int) *occupancyMap {
	m := &occupancyMap{cols: cols}
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for _, g := range l.Regions {
		lo, hi = min(lo, g.Addr), max(hi, g.Addr+g.Size)
	}
	for _, b := range l.Blocks {
		lo, hi = min(lo, b.Addr), max(hi, b.Addr+b.Size)
	}
	if hi <= lo {
		return m
	}
	span := hi - lo
	need := max((span+uint64(maxRows)-1)/uint64(maxRows), uint64(cols))
	m.lo, m.rowBytes = lo, uint64(1)<<bits.Len64(need-1)
	m.pixelBytes = m.rowBytes / uint64(cols)
	m.rows = int((span + m.rowBytes - 1) / m.rowBytes)
	n := m.rows * cols
	m.requested, m.block, m.region = make([]float64, n), make([]float64, n), make([]float64, n)
	for _, g := range l.Regions {
		m.cover(m.region, g.Addr, g.Addr+g.Size)
	}
	for _, b := range l.Blocks {
		m.cover(m.block, b.Addr, b.Addr+b.Size)
		m.cover(m.requested, b.Addr, b.Addr+min(b.Requested, b.Size))
	}
	return m
}

// cover adds [a, e) to a layer, pixel by pixel.
func (m *occupancyMap) cover(layer []float64, a, e uint64) {
	pb := m.pixelBytes
	for a < e {
		px := (a - m.lo) / pb
		end := min(e, m.lo+(px+1)*pb)
		layer[px] += float64(end-a) / float64(pb)
		a = end
	}
}

// image paints the map, rowPx pixels per row with the last one white to
// part the rows: requested blue, rounding and padding vermilion, free
// reserved bytes green, unreserved light grey.
func (m *occupancyMap) image(rowPx int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, m.cols, m.rows*rowPx))
	for row := range m.rows {
		for col := range m.cols {
			i := row*m.cols + col
			q := m.requested[i]
			b := math.Max(m.block[i], q)
			v := math.Min(math.Max(m.region[i], b), 1)
			c := mix(weighted{requestedFill, q}, weighted{wastedFill, b - q}, weighted{freeFill, v - b}, weighted{unreserved, 1 - v})
			for y := range rowPx - 1 {
				img.SetRGBA(col, row*rowPx+y, c)
			}
			img.SetRGBA(col, row*rowPx+rowPx-1, white)
		}
	}
	return img
}

// maxRegionOutlines is the most regions outlined on an occupancy map.
const maxRegionOutlines = 500

// regionOutlines marks where each region begins and ends on the wrapped
// map: a bar across the row at each end, and a line under the first and
// over the last part of the region.
type regionOutlines struct {
	m       *occupancyMap
	regions []sim.LayoutRegion
}

func (o *regionOutlines) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	bar := draw.LineStyle{Color: color.Black, Width: 1.6}
	edge := draw.LineStyle{Color: color.Black, Width: 0.7}
	m := o.m
	// at places an address on the map: its x, and the top and bottom of its row.
	at := func(a uint64, end bool) (x, top, bottom vg.Length) {
		off := a - m.lo
		row := off / m.rowBytes
		if end && off%m.rowBytes == 0 && row > 0 {
			row-- // an end on a row boundary closes the row before
		}
		x = trX(float64(off - row*m.rowBytes))
		top = trY(float64(m.rows) - float64(row))
		return x, top, top + (trY(0) - trY(1))
	}
	for _, g := range o.regions {
		x0, top0, bottom0 := at(g.Addr, false)
		x1, top1, bottom1 := at(g.Addr+g.Size, true)
		c.StrokeLine2(bar, x0, bottom0, x0, top0)
		c.StrokeLine2(bar, x1, bottom1, x1, top1)
		c.StrokeLine2(edge, x0, top0, c.Max.X, top0)
		c.StrokeLine2(edge, c.Min.X, bottom1, x1, bottom1)
		if top0 == top1 {
			c.StrokeLine2(edge, x0, bottom0, x1, bottom0)
			c.StrokeLine2(edge, x0, top1, x1, top1)
		}
	}
}

// rowTicks label the occupancy map's rows by their first address's offset.
type rowTicks struct{ m *occupancyMap }

func (t rowTicks) Ticks(lo, hi float64) []plot.Tick {
	every := max(1, (t.m.rows+7)/8)
	var ticks []plot.Tick
	for row := 0; row < t.m.rows; row += every {
		ticks = append(ticks, plot.Tick{Value: float64(t.m.rows-row) - 0.5, Label: "+" + shortBytes(float64(uint64(row)*t.m.rowBytes))})
	}
	return ticks
}

func occupancyFigure(tr *Trace, r *Result) (*figure, error) {
	l := r.Series.Layout
	m := buildOccupancy(l, occupancyRows, occupancyCols)
	moment := fmt.Sprintf("after event %s", Count(l.Event))
	if l.Line > 0 {
		moment += fmt.Sprintf(" (line %d)", l.Line)
	}
	if l.AtPeak {
		moment += ", the peak of bytes in use"
	}
	p := newPanel("", "offset in row", "row")
	p.X.Tick.Marker = byteTicks{}
	p.Y.Tick.Marker = rowTicks{m}
	fig := newFigure(fmt.Sprintf("%s · %s: the address space %s", tr.Name, r.Allocator, moment), "", p)
	fig.body = 6 * vg.Inch
	free := l.ReservedBytes - min(l.ReservedBytes, l.InUseBytes)
	fig.legend = []legendEntry{
		{requestedFill, "requested " + Bytes(l.LiveBytes)},
		{wastedFill, "rounding and padding " + Bytes(l.InUseBytes-min(l.InUseBytes, l.LiveBytes))},
		{freeFill, "free in reserved regions " + Bytes(free)},
		{unreserved, "not reserved"},
	}
	if m.rows == 0 {
		fig.note = "Nothing was reserved or allocated at this moment."
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
		return fig, nil
	}
	p.X.Min, p.X.Max = 0, float64(m.rowBytes)
	p.Y.Min, p.Y.Max = 0, float64(m.rows)
	p.Add(&imagePlot{img: m.image(8), xmax: float64(m.rowBytes), ymax: float64(m.rows)})
	fig.note = fmt.Sprintf("%s blocks in %s regions (outlined), from %#x; each row is %s, read left to right, top to bottom.",
		Count(int64(len(l.Blocks))), Count(int64(len(l.Regions))), m.lo, Bytes(m.rowBytes))
	if len(l.Regions) <= maxRegionOutlines {
		p.Add(&regionOutlines{m: m, regions: l.Regions})
	} else {
		fig.note = fmt.Sprintf("%s blocks in %s regions (too many to outline), from %#x; each row is %s, read left to right, top to bottom.",
			Count(int64(len(l.Blocks))), Count(int64(len(l.Regions))), m.lo, Bytes(m.rowBytes))
	}
	return fig, nil
}

// imagePlot draws an image over the data rectangle [xmin, xmax] × [ymin, ymax].
type imagePlot struct {
	img                    image.Image
	xmin, ymin, xmax, ymax float64
}

func (ip *imagePlot) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	c.DrawImage(vg.Rectangle{Min: vg.Point{X: trX(ip.xmin), Y: trY(ip.ymin)}, Max: vg.Point{X: trX(ip.xmax), Y: trY(ip.ymax)}}, ip.img)
}

func (ip *imagePlot) DataRange() (xmin, xmax, ymin, ymax float64) {
	return ip.xmin, ip.xmax, ip.ymin, ip.ymax
}

// swatch is a legend thumbnail: a filled, outlined square.
type swatch struct{ fill color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{c.Min, {X: c.Max.X, Y: c.Min.Y}, c.Max, {X: c.Min.X, Y: c.Max.Y}}
	c.FillPolygon(s.fill, pts)
	c.StrokeLines(draw.LineStyle{Color: color.Gray{Y: 0x80}, Width: 0.4}, append(pts, pts[0]))
}
