package report

import (
	"bytes"
	"fmt"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	gdraw "gonum.org/v1/plot/vg/draw"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
)

// recordedTrace replays a bundled trace with recording on and builds its report.
func recordedTrace(t testing.TB, name string, rc sim.RecordConfig, names ...string) *Trace {
	t.Helper()
	f, err := os.Open("../traces/" + name)
	require.NoError(t, err)
	defer f.Close()
	r, err := trace.NewReader(f, name)
	require.NoError(t, err)
	var specs []sim.AllocatorSpec
	for _, n := range names {
		specs = append(specs, sim.AllocatorSpec{Name: n})
	}
	res, err := sim.Replay(t.Context(), r, sim.Config{
		Allocators: specs,
		Space:      allocators.SpaceConfig{Kind: "virtual", Capacity: 8 << 30},
		Record:     &rc,
	})
	require.NoError(t, err)
	rep := Build([]TraceRun{{Name: strings.TrimSuffix(name, ".jsonl"), Path: name, Summary: r.Summary(), Results: res}})
	return &rep.Traces[0]
}

func TestTimelineXYs(t *testing.T) {
	tl := &sim.Timeline{Width: 2, Events: 5, Points: []sim.TimelinePoint{
		{Event: 0, Events: 2, Live: 10, InUse: 16, Reserved: 32},
		{Event: 2, Events: 2, Live: 30, InUse: 48, Reserved: 64, Failed: 2},
		{Event: 4, Events: 1, Live: 5, InUse: 8, Reserved: 64},
	}}
	live, inUse, reserved := timelineXYs(tl)
	assert.Equal(t, plotter.XYs{{X: 0, Y: 10}, {X: 2, Y: 30}, {X: 4, Y: 5}, {X: 5, Y: 5}}, live)
	assert.Equal(t, plotter.XYs{{X: 0, Y: 16}, {X: 2, Y: 48}, {X: 4, Y: 8}, {X: 5, Y: 8}}, inUse)
	assert.Equal(t, plotter.XYs{{X: 0, Y: 32}, {X: 2, Y: 64}, {X: 4, Y: 64}, {X: 5, Y: 64}}, reserved)
	fails, n := failureXYs(tl)
	assert.Equal(t, plotter.XYs{{X: 2, Y: 64}}, fails)
	assert.EqualValues(t, 2, n)

	live, _, _ = timelineXYs(&sim.Timeline{Width: 1})
	assert.Empty(t, live)
}

func TestFragmentationXYs(t *testing.T) {
	tl := &sim.Timeline{Width: 1, Events: 3, Points: []sim.TimelinePoint{
		{Event: 0, Events: 1, Live: 0, Reserved: 64, TFFragMax: 0},
		{Event: 1, Events: 1, Live: 16, Reserved: 64, TFFragMax: 0.25},
		{Event: 2, Events: 1, Live: 32, Reserved: 64, TFFragMax: 0.5},
	}}
	tf, ratio := fragmentationXYs(tl)
	assert.Equal(t, plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 0.25}, {X: 2, Y: 0.5}}, tf)
	assert.Equal(t, plotter.XYs{{X: 1, Y: 4}, {X: 2, Y: 2}}, ratio, "no ratio where nothing is live")
}

func TestLatencyXYs(t *testing.T) {
	curve := make([]int64, len(sim.CurveQuantiles))
	for i := range curve {
		curve[i] = int64(10 * (i + 1))
	}
	curve[0] = 0
	xys := latencyXYs(curve)
	require.Len(t, xys, len(curve))
	assert.Equal(t, plotter.XY{X: 0, Y: 1}, xys[0], "0 ns sits at the bottom of the log axis")
	assert.InDelta(t, 1, xys[10].X, 1e-9, "90%")
	assert.InDelta(t, 2, xys[20].X, 1e-9, "99%")
	assert.InDelta(t, 5, xys[50].X, 1e-9, "99.999%")
	assert.InDelta(t, 5.5, xys[51].X, 1e-9, "the maximum")
	assert.Equal(t, float64(curve[51]), xys[51].Y)
}

func TestMemmapRects(t *testing.T) {
	mm := &sim.Memmap{
		Events: 10, Lo: 1000, Hi: 5096, Exact: true,
		Regions: []sim.MemRegion{{Addr: 1000, Size: 4096, Start: 0, End: 10}},
		Blocks: []sim.MemBlock{
			{Addr: 1000, Size: 256, Requested: 200, Start: 1, End: 4, Tag: "a.x"},
			{Addr: 1256, Size: 2048, Requested: 2048, Start: 2, End: 10, Tag: "b"},
			{Addr: 3304, Size: 512, Requested: 512, Start: 3, End: 5},
		},
	}
	regions, blocks, legend := memmapRects(mm, "size")
	assert.Equal(t, []rect{{x0: 0, x1: 10, y0: 0, y1: 4096, fill: regionFill}}, regions)
	require.Len(t, blocks, 3)
	for i, b := range blocks {
		want := mm.Blocks[i]
		assert.Equal(t, [4]float64{float64(want.Start), float64(want.End), float64(want.Addr - 1000), float64(want.Addr + want.Size - 1000)},
			[4]float64{b.x0, b.x1, b.y0, b.y1})
	}
	assert.Equal(t, "256 B", legend[0].label)
	assert.Equal(t, "2.0 KiB", legend[len(legend)-1].label)
	assert.Equal(t, legend[0].fill, blocks[0].fill, "the smallest block has the first colour")
	assert.Equal(t, legend[len(legend)-1].fill, blocks[1].fill, "the largest the last")

	_, blocks, legend = memmapRects(mm, "tag")
	assert.Equal(t, []legendEntry{{allocatorColors[0], "b"}, {allocatorColors[1], "a.x"}, {untaggedFill, "untagged"}}, legend,
		"tags by bytes × events, most first")
	assert.Equal(t, []color.Color{allocatorColors[1], allocatorColors[0], untaggedFill},
		[]color.Color{blocks[0].fill, blocks[1].fill, blocks[2].fill})
}

func TestTagsGroupedWhenTooMany(t *testing.T) {
	var blocks []sim.MemBlock
	for i := range 30 {
		blocks = append(blocks, sim.MemBlock{Size: 256, Start: 0, End: int64(1 + i%3),
			Tag: []string{"layer0", "layer1", "embed"}[i%3] + "." + string(rune('a'+i))})
	}
	fill, legend := tagColors(blocks)
	assert.Equal(t, []string{"embed", "layer1", "layer0"}, []string{legend[0].label, legend[1].label, legend[2].label})
	assert.Len(t, legend, 3)
	assert.Equal(t, legend[2].fill, fill(&blocks[0]))
	assert.False(t, fewTags(&sim.Memmap{Blocks: blocks}))

	for i := range 12 {
		blocks = append(blocks, sim.MemBlock{Size: 1, Start: 0, End: 1, Tag: string(rune('A' + i))})
	}
	_, legend = tagColors(blocks)
	require.Len(t, legend, maxTagColors+1)
	assert.Equal(t, "5 other tags", legend[maxTagColors].label)
}

func TestOccupancyMap(t *testing.T) {
	l := &sim.Layout{
		Regions: []sim.LayoutRegion{{Addr: 4096, Size: 8192}, {Addr: 12288, Size: 4096}},
		Blocks: []sim.LayoutBlock{
			{Addr: 4096, Size: 1024, Requested: 1000},
			{Addr: 8192, Size: 4096, Requested: 4096},
			{Addr: 12288 + 512, Size: 256, Requested: 1},
		},
		LiveBytes: 5097, InUseBytes: 5376, ReservedBytes: 12288,
	}
	m := buildOccupancy(l, 4, 16)
	assert.EqualValues(t, 4096, m.lo)
	assert.EqualValues(t, 4096, m.rowBytes, "12 KiB in at most 4 rows: 4 KiB, a power of two")
	assert.EqualValues(t, 256, m.pixelBytes)
	assert.Equal(t, 3, m.rows)
	sum := func(layer []float64) float64 {
		s := 0.0
		for _, v := range layer {
			s += v
		}
		return s * float64(m.pixelBytes)
	}
	assert.InDelta(t, float64(l.LiveBytes), sum(m.requested), 1e-6)
	assert.InDelta(t, float64(l.InUseBytes), sum(m.block), 1e-6)
	assert.InDelta(t, float64(l.ReservedBytes), sum(m.region), 1e-6)
	assert.Equal(t, []float64{1, 1, 1, 1000.0/256 - 3}, m.requested[:4], "1000 requested bytes: 3 whole pixels and a part")
	assert.Equal(t, 1.0/256, m.requested[2*16+2], "one byte at the start of the third region's pixel 2")
	for i, v := range m.region {
		assert.InDelta(t, 1, v, 1e-12, "every pixel reserved (%d)", i)
	}

	empty := buildOccupancy(&sim.Layout{}, 4, 16)
	assert.Equal(t, 0, empty.rows)
}

func TestByteAndCountTicks(t *testing.T) {
	labels := func(ts []string) string { return strings.Join(ts, " ") }
	var got []string
	for _, tk := range (byteTicks{}).Ticks(0, 4<<30) {
		got = append(got, tk.Label)
	}
	assert.Equal(t, "0 1 GiB 2 GiB 3 GiB 4 GiB", labels(got))
	got = nil
	for _, tk := range (countTicks{}).Ticks(0, 7545) {
		got = append(got, tk.Label)
	}
	assert.Equal(t, "0 2k 4k 6k", labels(got))
	got = nil
	for _, tk := range (percentTicks{}).Ticks(0, 1.3) {
		got = append(got, tk.Label)
	}
	assert.Equal(t, "0% 20% 40% 60% 80% 100%", labels(got), "no tick past 100%")
	assert.Equal(t, "1.5M", shortCount(1.5e6))
	assert.Equal(t, "512 MiB", shortBytes(512<<20))
}

// Every kind renders as PNG and SVG, the same bytes every time (latency
// aside, which is measured), and the PNG is the figure's size.
func TestWritePlotEveryKind(t *testing.T) {
	tr := recordedTrace(t, "transformer-train.jsonl", sim.RecordConfig{}, "bfc", "naive")
	for _, kind := range PlotKinds {
		for _, format := range PlotFormats {
			opt := PlotOptions{Kind: kind}
			if PerAllocator(kind) {
				opt.Allocator = "bfc"
			}
			var a, b bytes.Buffer
			require.NoError(t, WritePlot(&a, tr, opt, format), "%s %s", kind, format)
			require.NoError(t, WritePlot(&b, tr, opt, format))
			if kind != "latency" {
				assert.Equal(t, a.Bytes(), b.Bytes(), "%s %s is deterministic", kind, format)
			}
			if format == "png" {
				img, err := png.Decode(&a)
				require.NoError(t, err)
				assert.Equal(t, 960, img.Bounds().Dx(), "%s: 10 inches at 96 dpi", kind)
			} else {
				assert.Contains(t, a.String(), "<svg")
			}
		}
	}
}

// BenchmarkWritePlot draws each plot of a bundled trace whose memory map
// is a raster, as -o draws them after a large replay.
func BenchmarkWritePlot(b *testing.B) {
	tr := recordedTrace(b, "random.jsonl", sim.RecordConfig{Blocks: 1000}, "bfc")
	require.False(b, tr.Results[0].Series.Memmap.Exact)
	for _, kind := range PlotKinds {
		for _, format := range PlotFormats {
			b.Run(kind+"/"+format, func(b *testing.B) {
				opt := PlotOptions{Kind: kind, Allocator: "bfc"}
				var buf bytes.Buffer
				for b.Loop() {
					buf.Reset()
					if err := WritePlot(&buf, tr, opt, format); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(buf.Len()), "bytes")
			})
		}
	}
	// A memory map of every block, drawn as rectangles.
	exact := recordedTrace(b, "transformer-train.jsonl", sim.RecordConfig{}, "naive")
	require.True(b, exact.Results[0].Series.Memmap.Exact)
	for _, format := range PlotFormats {
		b.Run("memmap-exact/"+format, func(b *testing.B) {
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				if err := WritePlot(&buf, exact, PlotOptions{Kind: "memmap", Allocator: "naive"}, format); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len()), "bytes")
		})
	}
}

// A memory map past its rectangle budget draws the raster and says so.
func TestWritePlotRasterMemmap(t *testing.T) {
	tr := recordedTrace(t, "random.jsonl", sim.RecordConfig{Blocks: 100, Rows: 64, Columns: 128}, "bfc")
	require.False(t, tr.Results[0].Series.Memmap.Exact)
	fig, err := memmapFigure(tr, &tr.Results[0], "")
	require.NoError(t, err)
	assert.Contains(t, fig.note, "Summarised:")
	ra := tr.Results[0].Series.Memmap.Raster
	assert.LessOrEqual(t, ra.Rows, 64)
	assert.LessOrEqual(t, ra.Cols, 128)
	assert.Contains(t, fig.note, fmt.Sprintf("%d × %d raster", ra.Rows, ra.Cols))
	var buf bytes.Buffer
	require.NoError(t, fig.write(&buf, "png"))
	_, err = png.Decode(&buf)
	require.NoError(t, err)
}

func TestWritePlotErrors(t *testing.T) {
	tr := recordedTrace(t, "cnn-infer.jsonl", sim.RecordConfig{AtEvent: true, LayoutEvent: 1 << 40}, "bfc", "arena")
	var buf bytes.Buffer
	assert.ErrorContains(t, WritePlot(&buf, tr, PlotOptions{Kind: "memmap"}, "png"), "shows one allocator")
	assert.ErrorContains(t, WritePlot(&buf, tr, PlotOptions{Kind: "pie"}, "png"), "unknown plot kind")
	assert.ErrorContains(t, WritePlot(&buf, tr, PlotOptions{Kind: "timeline"}, "gif"), "unknown plot format")
	assert.ErrorContains(t, WritePlot(&buf, tr, PlotOptions{Kind: "timeline", Allocator: "naive"}, "png"), "no results for allocator naive")
	assert.ErrorContains(t, WritePlot(&buf, tr, PlotOptions{Kind: "occupancy", Allocator: "bfc"}, "png"), "no layout")
	assert.ErrorContains(t, WritePlot(&buf, tr, PlotOptions{Kind: "memmap", Allocator: "bfc", ColorBy: "age"}, "png"), "size or tag")
	tr.Results[0].Series = nil
	assert.ErrorContains(t, WritePlot(&buf, tr, PlotOptions{Kind: "timeline"}, "png"), "bfc on cnn-infer: no series")
	_, err := PlotFormat("x.jpeg")
	assert.ErrorContains(t, err, ".png or .svg")
	f, err := PlotFormat("dir/X.SVG")
	require.NoError(t, err)
	assert.Equal(t, "svg", f)
}

// line's few glyph boxes pad a plot exactly as gonum's one per point: the
// same plots, drawn with either, are the same bytes, whether the points
// fit the axes or some fall outside them, and with NaNs, steps, a log
// axis, a line of no width and lines of one point or none.
func TestLineGlyphBoxesPadAsGonums(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	points := func(n int) plotter.XYs {
		xys := make(plotter.XYs, n)
		for i := range xys {
			xys[i] = plotter.XY{X: rng.Float64()*200 - 50, Y: rng.Float64()*2000 + 1}
		}
		return xys
	}
	withNaN := points(50)
	withNaN[7].X, withNaN[20].Y = math.NaN(), math.NaN()
	cases := []struct {
		name   string
		lines  []plotter.XYs
		width  vg.Length
		step   bool
		log    bool
		ranges bool // axes narrower than the points
	}{
		{name: "fit", lines: []plotter.XYs{points(300), points(40)}, width: 1.6},
		{name: "outside", lines: []plotter.XYs{points(300), points(5)}, width: 8, ranges: true},
		{name: "nan", lines: []plotter.XYs{withNaN}, width: 3, ranges: true},
		{name: "steps", lines: []plotter.XYs{points(100)}, width: 1.1, step: true},
		{name: "log", lines: []plotter.XYs{points(100), points(3)}, width: 1.2, log: true},
		{name: "no width", lines: []plotter.XYs{points(50)}, width: 0},
		{name: "one point", lines: []plotter.XYs{{{X: 3, Y: 4}}}, width: 5},
		{name: "none", lines: []plotter.XYs{{}}, width: 5},
	}
	for _, tc := range cases {
		draw := func(wrap bool) []byte {
			p := newPanel(tc.name, "x", "y")
			if tc.log {
				p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
			}
			for i, xys := range tc.lines {
				l := &plotter.Line{XYs: xys, LineStyle: gdraw.LineStyle{Color: allocatorColor(i), Width: tc.width}}
				if tc.step {
					l.StepStyle = plotter.PostStep
				}
				if wrap {
					p.Add(line{l})
				} else {
					p.Add(l)
				}
			}
			if tc.ranges { // after Add, which widens the axes to the points
				p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 100, 100, 1500
			}
			w, err := p.WriterTo(4*vg.Inch, 3*vg.Inch, "svg")
			require.NoError(t, err, tc.name)
			var buf bytes.Buffer
			_, err = w.WriteTo(&buf)
			require.NoError(t, err, tc.name)
			return buf.Bytes()
		}
		assert.True(t, bytes.Equal(draw(false), draw(true)), "%s: the plots differ", tc.name)
	}
}
