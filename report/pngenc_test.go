package report

import (
	"bytes"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/vg"
	vgdraw "gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/bfcsim/bfcsim/sim"
)

// plotImages draws every kind of plot of a bundled trace as PNG and
// returns them decoded.
func plotImages(t testing.TB) map[string]*image.RGBA {
	t.Helper()
	tr := recordedTrace(t, "random.jsonl", sim.RecordConfig{Blocks: 1000}, "bfc")
	out := map[string]*image.RGBA{}
	for _, kind := range PlotKinds {
		var buf bytes.Buffer
		require.NoError(t, WritePlot(&buf, tr, PlotOptions{Kind: kind, Allocator: "bfc"}, "png"))
		out[kind] = decodeRGBA(t, buf.Bytes())
	}
	return out
}

func decodeRGBA(t testing.TB, b []byte) *image.RGBA {
	t.Helper()
	m, err := png.Decode(bytes.NewReader(b))
	require.NoError(t, err)
	r := image.NewRGBA(m.Bounds())
	draw.Draw(r, r.Bounds(), m, m.Bounds().Min, draw.Src)
	return r
}

// What encodePNG writes decodes to the pixels it was given: plots, noise
// that deflate cannot shorten, an image of one pixel, and a sub-image
// whose rows are not contiguous.
func TestEncodePNGPixels(t *testing.T) {
	imgs := plotImages(t)
	rng := rand.New(rand.NewPCG(1, 2))
	noise := image.NewRGBA(image.Rect(0, 0, 37, 23))
	for i := range noise.Pix {
		noise.Pix[i] = byte(rng.Uint32())
		if i%4 == 3 {
			noise.Pix[i] = 0xff
		}
	}
	imgs["noise"] = noise
	one := image.NewRGBA(image.Rect(0, 0, 1, 1))
	one.Set(0, 0, color.RGBA{R: 1, G: 2, B: 3, A: 0xff})
	imgs["one pixel"] = one
	imgs["sub-image"] = imgs["occupancy"].SubImage(image.Rect(101, 37, 403, 290)).(*image.RGBA)

	for name, m := range imgs {
		var buf bytes.Buffer
		require.NoError(t, encodePNG(&buf, m), name)
		b := buf.Bytes()
		require.Greater(t, len(b), 26, name)
		assert.Equal(t, byte(2), b[25], "%s: written as RGB", name) // IHDR's colour type
		got := decodeRGBA(t, b)
		want := image.NewRGBA(image.Rect(0, 0, m.Rect.Dx(), m.Rect.Dy()))
		draw.Draw(want, want.Bounds(), m, m.Rect.Min, draw.Src)
		assert.Equal(t, want.Rect, got.Rect, name)
		assert.True(t, bytes.Equal(want.Pix, got.Pix), "%s: the pixels differ", name)
	}
}

// An image that is not opaque keeps its alpha, through image/png.
func TestEncodePNGTranslucent(t *testing.T) {
	m := image.NewRGBA(image.Rect(0, 0, 3, 2))
	m.Set(0, 0, color.RGBA{R: 10, G: 20, B: 30, A: 0xff})
	m.Set(1, 0, color.RGBA{R: 5, G: 6, B: 7, A: 0x80})
	var buf bytes.Buffer
	require.NoError(t, encodePNG(&buf, m))
	got, err := png.Decode(&buf)
	require.NoError(t, err)
	for _, p := range []image.Point{{0, 0}, {1, 0}, {2, 1}} {
		assert.Equal(t, color.NRGBAModel.Convert(m.At(p.X, p.Y)), color.NRGBAModel.Convert(got.At(p.X, p.Y)), "pixel %v", p)
	}
}

// An empty image is refused, as image/png refuses it.
func TestEncodePNGEmpty(t *testing.T) {
	var buf bytes.Buffer
	assert.Error(t, encodePNG(&buf, image.NewRGBA(image.Rect(0, 0, 0, 5))))
}

// A failed write is reported, wherever it fails.
func TestEncodePNGWriteError(t *testing.T) {
	m := image.NewRGBA(image.Rect(0, 0, 4, 4))
	draw.Draw(m, m.Bounds(), image.White, image.Point{}, draw.Src)
	var whole bytes.Buffer
	require.NoError(t, encodePNG(&whole, m))
	for n := range whole.Len() + 1 {
		err := encodePNG(&failingWriter{left: n}, m)
		if n < whole.Len() {
			assert.ErrorIs(t, err, assert.AnError, "failing after %d bytes", n)
		} else {
			assert.NoError(t, err)
		}
	}
}

// failingWriter takes left bytes and then fails.
type failingWriter struct{ left int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left = 0
		return n, assert.AnError
	}
	w.left -= len(p)
	return len(p), nil
}

// BenchmarkEncodePNG writes the plots of a bundled trace with encodePNG
// and with image/png at its fastest level.
func BenchmarkEncodePNG(b *testing.B) {
	imgs := plotImages(b)
	encoders := []struct {
		name string
		fn   func(*bytes.Buffer, *image.RGBA) error
	}{
		{"encodePNG", func(w *bytes.Buffer, m *image.RGBA) error { return encodePNG(w, m) }},
		{"image-png", func(w *bytes.Buffer, m *image.RGBA) error {
			return (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(w, m)
		}},
	}
	for _, kind := range PlotKinds {
		for _, e := range encoders {
			b.Run(kind+"/"+e.name, func(b *testing.B) {
				var buf bytes.Buffer
				for b.Loop() {
					buf.Reset()
					if err := e.fn(&buf, imgs[kind]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(buf.Len()), "bytes")
			})
		}
	}
}

// fillRect paints exactly what gg paints for a rectangle's path:
// rectangles with edges between pixels, smaller than a pixel, overlapping,
// translucent, empty, and reaching past the canvas's left, bottom and right
// edges. (At the top edge freetype paints the part of a shape above the
// canvas into the first row, which a plot's data, drawn inside its axes,
// never reaches.)
func TestFillRectAsGG(t *testing.T) {
	const w, h = 3 * vg.Inch, 2 * vg.Inch
	viaPath, direct := newPNGCanvas(w, h), newPNGCanvas(w, h)
	dc := vgdraw.New(viaPath)
	rng := rand.New(rand.NewPCG(3, 4))
	colors := []color.Color{requestedFill, wastedFill, regionFill, color.NRGBA{R: 200, G: 10, B: 90, A: 0x80}, color.Black}
	pt := func() vg.Length { return vg.Length(2 + rng.Float64()*120) }
	for i := range 400 {
		a := vg.Point{X: pt(), Y: pt()}
		b := vg.Point{X: a.X + vg.Length(rng.ExpFloat64()*8), Y: a.Y + vg.Length(rng.ExpFloat64()*8)}
		switch i % 10 {
		case 0:
			b.X = a.X // empty
		case 1:
			b.X, b.Y = a.X+0.3, a.Y+0.2 // well under a pixel
		case 2:
			a.X, b.X = 10.5, 200.25 // exact points
		case 3:
			a.X, a.Y = -5, -3 // past the left and bottom edges
		case 4:
			b.X = w + 4 // past the right edge
		}
		col := colors[i%len(colors)]
		dc.FillPolygon(col, []vg.Point{a, {X: b.X, Y: a.Y}, b, {X: a.X, Y: b.Y}})
		direct.fillRect(a, b, col)
	}
	require.Equal(t, viaPath.img.Rect, direct.img.Rect)
	worst, differ := 0, 0
	for i := range viaPath.img.Pix {
		d := int(viaPath.img.Pix[i]) - int(direct.img.Pix[i])
		worst = max(worst, d, -d)
		if d != 0 {
			differ++
		}
	}
	assert.Zero(t, differ, "channels that differ, by %d at most", worst)
}

// The rectangles of a memory map find the PNG canvas under the canvases
// plot wraps around it, and draw on it directly; not on an SVG.
func TestPNGCanvasOf(t *testing.T) {
	png := newPNGCanvas(2*vg.Inch, vg.Inch)
	c := vgdraw.Crop(vgdraw.New(png), 3, -3, 2, -2)
	wrapped := vgdraw.Canvas{Canvas: c, Rectangle: c.Rectangle}
	got, ok := pngCanvasOf(wrapped.Canvas)
	require.True(t, ok)
	assert.Same(t, png.img, got.img)
	_, ok = pngCanvasOf(vgdraw.New(vgsvg.New(vg.Inch, vg.Inch)).Canvas)
	assert.False(t, ok)
}

// strokeRect paints what gg paints for the outline of a rectangle, but at
// its corners: outlines with edges between pixels and across them, drawn
// from each corner. gg rounds three corners and leaves a notch at the one
// its polyline starts and ends at, where strokeRect squares all four: the
// pixels around the corners are left out. It leaves outlines thinner than
// their line to gg.
func TestStrokeRectAsGG(t *testing.T) {
	const w, h = 3 * vg.Inch, 2 * vg.Inch
	rng := rand.New(rand.NewPCG(5, 6))
	pt := func() vg.Length { return vg.Length(4 + rng.Float64()*120) }
	left, compared := 0, 0
	for _, width := range []vg.Length{0.4, 1} {
		sty := vgdraw.LineStyle{Color: regionEdge, Width: width}
		for i := range 100 {
			a := vg.Point{X: pt(), Y: pt()}
			b := vg.Point{X: a.X + vg.Length(rng.ExpFloat64()*10), Y: a.Y + vg.Length(rng.ExpFloat64()*10)}
			switch i % 4 {
			case 1:
				a, b = b, a
			case 2:
				a.X, b.X = b.X, a.X
			case 3:
				a.Y, b.Y = b.Y, a.Y
			}
			viaPath, direct := newPNGCanvas(w, h), newPNGCanvas(w, h)
			dc := vgdraw.New(viaPath)
			dc.StrokeLines(sty, []vg.Point{a, {X: b.X, Y: a.Y}, b, {X: a.X, Y: b.Y}, a})
			if !direct.strokeRect(a, b, width, regionEdge) {
				assert.Less(t, min(abs(b.X-a.X), abs(b.Y-a.Y)), width*1.01, "only an outline thinner than its line is left to gg")
				left++
				continue
			}
			// The pixels within two of a corner are not compared.
			var corners []image.Point
			for _, p := range []vg.Point{a, b, {X: a.X, Y: b.Y}, {X: b.X, Y: a.Y}} {
				x, y := direct.ctx.TransformPoint(p.X.Dots(96), p.Y.Dots(96))
				corners = append(corners, image.Pt(int(x), int(y)))
			}
			nearCorner := func(x, y int) bool {
				for _, c := range corners {
					if x >= c.X-2 && x <= c.X+2 && y >= c.Y-2 && y <= c.Y+2 {
						return true
					}
				}
				return false
			}
			worst := 0
			for y := range viaPath.img.Rect.Dy() {
				for x := range viaPath.img.Rect.Dx() {
					if nearCorner(x, y) {
						continue
					}
					i := y*viaPath.img.Stride + 4*x
					for k := range 4 {
						d := int(viaPath.img.Pix[i+k]) - int(direct.img.Pix[i+k])
						worst = max(worst, d, -d)
					}
				}
			}
			assert.LessOrEqual(t, worst, 1, "width %v, rectangle %v–%v: the largest difference in a channel", width, a, b)
			compared++
		}
	}
	assert.Greater(t, compared, 150, "outlines compared")
	t.Logf("%d outlines compared, %d left to gg", compared, left)
}

func abs(l vg.Length) vg.Length { return max(l, -l) }

// Coordinates that are not finite draw nothing directly and do not panic:
// fillRect paints nothing, and strokeRect leaves the outline to gg. (An
// infinite coordinate becomes NaN in the canvas's transform.)
func TestRectsNotFinite(t *testing.T) {
	c := newPNGCanvas(vg.Inch, vg.Inch)
	before := slices.Clone(c.img.Pix)
	nan, inf := vg.Length(math.NaN()), vg.Length(math.Inf(1))
	for _, q := range [][2]vg.Point{
		{{X: nan, Y: 10}, {X: 20, Y: 20}},
		{{X: 10, Y: 10}, {X: 20, Y: nan}},
		{{X: -inf, Y: 10}, {X: inf, Y: 20}},
		{{X: 10, Y: -inf}, {X: 20, Y: 20}},
		{{X: -inf, Y: -inf}, {X: inf, Y: inf}},
	} {
		assert.False(t, c.strokeRect(q[0], q[1], 0.4, regionEdge), "%v", q)
		c.fillRect(q[0], q[1], requestedFill)
		assert.Equal(t, before, c.img.Pix, "%v: nothing painted", q)
	}
}
