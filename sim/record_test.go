package sim

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/trace"
)

// record replays evs against one allocator with recording on.
func record(t *testing.T, evs []trace.Event, name string, opts allocators.Options, rc RecordConfig) Result {
	t.Helper()
	cfg := Config{
		Allocators: []AllocatorSpec{{Name: name, Options: opts}},
		Space:      allocators.SpaceConfig{Kind: "virtual", Capacity: 8 << 30},
		Record:     &rc,
		Check:      true,
	}
	res, err := Replay(t.Context(), &sliceSource{events: evs}, cfg)
	require.NoError(t, err)
	return res[0]
}

var recordCases = []struct {
	trace, allocator string
	opts             allocators.Options
}{
	{"transformer-train.jsonl", "bfc", nil},
	{"transformer-train.jsonl", "naive", nil},
	{"random.jsonl", "bfc", allocators.Options{"garbage_collection": "true", "allow_growth": "true"}},
	{"random.jsonl", "aligned", nil},
	{"cnn-infer.jsonl", "arena", nil},
	{"fragmenter.jsonl", "bfc", allocators.Options{"coalescing_regions": "true"}},
}

// An unsummarised timeline has one point per event, whose live bytes are
// the trace's own; a summarised one holds the maxima of the unsummarised
// points it covers.
func TestTimeline(t *testing.T) {
	for _, tc := range recordCases {
		t.Run(tc.trace+"/"+tc.allocator, func(t *testing.T) {
			evs := loadTrace(t, tc.trace)
			full := record(t, evs, tc.allocator, tc.opts, RecordConfig{Points: 1 << 20})
			tl := full.Timeline
			require.EqualValues(t, 1, tl.Width)
			require.Len(t, tl.Points, len(evs))
			var live, peakReserved uint64
			var failed, steps int64
			for i, ev := range evs {
				switch ev.Op {
				case trace.OpAlloc:
					live += ev.Size
				case trace.OpFree:
					live -= ev.Size
				case trace.OpStep:
					steps++
				}
				p := tl.Points[i]
				require.EqualValues(t, i, p.Event)
				require.EqualValues(t, 1, p.Events)
				failed += p.Failed
				peakReserved = max(peakReserved, p.Reserved)
				if failed == 0 { // a failed alloc adds nothing live
					require.Equal(t, live, p.Live, "event %d", i)
				}
				require.LessOrEqual(t, p.InUse, p.Reserved, "event %d", i)
			}
			assert.Equal(t, full.FailedAllocs, failed)
			assert.Equal(t, full.PeakReservedBytes, peakReserved)
			assert.Equal(t, steps, tl.Steps)

			for _, points := range []int{2, 3, 16, 100, 1000} {
				small := record(t, evs, tc.allocator, tc.opts, RecordConfig{Points: points}).Timeline
				require.LessOrEqual(t, len(small.Points), points)
				assert.Greater(t, 2*len(small.Points), points-1, "points=%d: no more merging than needed", points)
				var covered int64
				for _, p := range small.Points {
					require.Equal(t, covered, p.Event)
					want := TimelinePoint{Event: p.Event}
					for _, q := range tl.Points[p.Event : p.Event+p.Events] {
						want.merge(&q)
					}
					want.TFFragSum = p.TFFragSum // summed in another order
					assert.Equal(t, want, p, "points=%d", points)
					assert.InDelta(t, sumFrag(tl.Points[p.Event:p.Event+p.Events]), p.TFFragSum, 1e-9)
					covered += p.Events
				}
				assert.EqualValues(t, len(evs), covered)
			}
		})
	}
}

func sumFrag(ps []TimelinePoint) float64 {
	var s float64
	for _, p := range ps {
		s += p.TFFragSum
	}
	return s
}

// stateAfter is the blocks and regions a memory map says were live right
// after event n.
func stateAfter(mm *Memmap, n int64) *Layout {
	l := &Layout{}
	for _, b := range mm.Blocks {
		if b.Start <= n && n < b.End {
			l.Blocks = append(l.Blocks, LayoutBlock{Addr: b.Addr, Size: b.Size, Requested: b.Requested, Tag: b.Tag})
			l.LiveBytes += b.Requested
			l.InUseBytes += b.Size
		}
	}
	for _, g := range mm.Regions {
		if g.Start <= n && n < g.End {
			l.Regions = append(l.Regions, LayoutRegion{Addr: g.Addr, Size: g.Size})
			l.ReservedBytes += g.Size
		}
	}
	sortLayout(l)
	return l
}

// The exact memory map agrees with the timeline at every event, and the
// layout at an event, or at the peak, is the memory map's state there.
func TestMemmapAndLayout(t *testing.T) {
	for _, tc := range recordCases {
		t.Run(tc.trace+"/"+tc.allocator, func(t *testing.T) {
			evs := loadTrace(t, tc.trace)
			res := record(t, evs, tc.allocator, tc.opts, RecordConfig{Points: 1 << 20, Blocks: 1 << 20})
			mm := res.Memmap
			require.True(t, mm.Exact)
			require.EqualValues(t, len(evs), mm.Events)
			assert.EqualValues(t, len(mm.Blocks), mm.BlockCount)
			assert.EqualValues(t, len(mm.Regions), mm.RegionCount)

			// Bytes in use and reserved after each event, from the rectangles.
			inUse := make([]int64, len(evs)+1)
			reserved := make([]int64, len(evs)+1)
			for _, b := range mm.Blocks {
				inUse[b.Start] += int64(b.Size)
				inUse[b.End] -= int64(b.Size)
			}
			for _, g := range mm.Regions {
				reserved[g.Start] += int64(g.Size)
				reserved[g.End] -= int64(g.Size)
			}
			var u, v int64
			for i, p := range res.Timeline.Points {
				u += inUse[i]
				v += reserved[i]
				require.EqualValues(t, p.InUse, u, "in use after event %d", i)
				require.EqualValues(t, p.Reserved, v, "reserved after event %d", i)
			}

			peak := res.Layout
			require.NotNil(t, peak)
			assert.True(t, peak.AtPeak)
			assert.Equal(t, res.PeakInUseBytes, peak.InUseBytes)
			assert.Equal(t, stateAfter(mm, peak.Event), withoutMeta(peak))
			for _, p := range res.Timeline.Points[:peak.Event] {
				require.Less(t, p.InUse, res.PeakInUseBytes, "the layout is at the first peak")
			}
			assert.Equal(t, evs[peak.Event].Line, peak.Line)
			summarised := record(t, evs, tc.allocator, tc.opts, RecordConfig{Blocks: 10})
			require.False(t, summarised.Memmap.Exact)
			assert.Equal(t, peak, summarised.Layout, "the layout does not depend on how the memory map is kept")

			for _, n := range []int64{0, int64(len(evs)) / 3, int64(len(evs)) - 1} {
				at := record(t, evs, tc.allocator, tc.opts, RecordConfig{AtEvent: true, LayoutEvent: n}).Layout
				require.NotNil(t, at)
				assert.Equal(t, n, at.Event)
				assert.False(t, at.AtPeak)
				assert.Equal(t, stateAfter(mm, n), withoutMeta(at), "after event %d", n)
			}
			assert.Nil(t, record(t, evs, tc.allocator, tc.opts, RecordConfig{AtEvent: true, LayoutEvent: int64(len(evs))}).Layout,
				"no layout past the end of the trace")
		})
	}
}

func withoutMeta(l *Layout) *Layout {
	c := *l
	c.Event, c.Line, c.AtPeak = 0, 0, false
	return &c
}

// The raster holds, cell by cell, the fraction of bytes × events that the
// exact rectangles cover, whatever merging of rows and columns it took.
func TestRasterMatchesRectangles(t *testing.T) {
	for _, tc := range recordCases {
		for _, geom := range [][2]int{{2, 2}, {16, 7}, {64, 256}} {
			t.Run(fmt.Sprintf("%s/%s/%dx%d", tc.trace, tc.allocator, geom[0], geom[1]), func(t *testing.T) {
				evs := loadTrace(t, tc.trace)
				exact := record(t, evs, tc.allocator, tc.opts, RecordConfig{Blocks: 1 << 20}).Memmap
				mm := record(t, evs, tc.allocator, tc.opts, RecordConfig{Blocks: 100, Rows: geom[0], Columns: geom[1]}).Memmap
				require.False(t, mm.Exact)
				assert.Empty(t, mm.Blocks)
				assert.Equal(t, exact.BlockCount, mm.BlockCount)
				assert.Equal(t, [2]uint64{exact.Lo, exact.Hi}, [2]uint64{mm.Lo, mm.Hi})
				r := mm.Raster
				require.NotNil(t, r)
				assert.LessOrEqual(t, r.Rows, geom[0])
				assert.LessOrEqual(t, r.Cols, geom[1])
				assert.LessOrEqual(t, r.Lo, mm.Lo)
				assert.GreaterOrEqual(t, r.Lo+uint64(r.Rows)*r.RowBytes, mm.Hi)
				assert.GreaterOrEqual(t, int64(r.Cols)*r.Width, mm.Events)

				want := [2][]float64{make([]float64, r.Rows*r.Cols), make([]float64, r.Rows*r.Cols)}
				paint := func(layer int, addr, size uint64, t0, t1 int64) {
					for row := range r.Rows {
						lo := r.Lo + uint64(row)*r.RowBytes
						b := float64(overlap(addr, addr+size, lo, lo+r.RowBytes))
						for c := range r.Cols {
							e := float64(overlap(uint64(t0), uint64(t1), uint64(int64(c)*r.Width), uint64(int64(c+1)*r.Width)))
							want[layer][row*r.Cols+c] += b * e
						}
					}
				}
				for _, b := range exact.Blocks {
					paint(0, b.Addr, b.Size, b.Start, b.End)
				}
				for _, g := range exact.Regions {
					paint(1, g.Addr, g.Size, g.Start, g.End)
				}
				for row := range r.Rows {
					for c := range r.Cols {
						cell := float64(r.RowBytes) * float64(min(r.Width, mm.Events-int64(c)*r.Width))
						u, v := r.At(row, c)
						require.InDelta(t, want[0][row*r.Cols+c]/cell, u, 1e-9, "in use, cell %d,%d", row, c)
						require.InDelta(t, want[1][row*r.Cols+c]/cell, v, 1e-9, "reserved, cell %d,%d", row, c)
						require.LessOrEqual(t, u, v+1e-9, "blocks lie inside regions")
						require.LessOrEqual(t, v, 1+1e-9)
					}
				}
			})
		}
	}
}

func overlap(a0, a1, b0, b1 uint64) uint64 {
	lo, hi := max(a0, b0), min(a1, b1)
	if hi <= lo {
		return 0
	}
	return hi - lo
}

func TestLatencyCurve(t *testing.T) {
	evs := loadTrace(t, "random.jsonl")
	res := record(t, evs, "bfc", nil, RecordConfig{})
	for _, l := range []Latency{res.AllocLatency, res.FreeLatency} {
		require.Len(t, l.Curve, len(CurveQuantiles))
		for i := 1; i < len(l.Curve); i++ {
			assert.LessOrEqual(t, l.Curve[i-1], l.Curve[i])
		}
		assert.Equal(t, l.Max, l.Curve[len(l.Curve)-1])
	}
	assert.Equal(t, 0.0, CurveQuantiles[0])
	assert.InDelta(t, 0.99999, CurveQuantiles[len(CurveQuantiles)-2], 1e-12)
	assert.Equal(t, 1.0, CurveQuantiles[len(CurveQuantiles)-1])
	assert.False(t, math.IsNaN(CurveQuantiles[10]))
}

func TestRecordConfigErrors(t *testing.T) {
	for _, rc := range []RecordConfig{{Points: 1}, {Rows: 3}, {Columns: 1}, {Blocks: -1}, {AtEvent: true, LayoutEvent: -1}} {
		_, err := Replay(t.Context(), &sliceSource{}, Config{
			Allocators: []AllocatorSpec{{Name: "bfc"}},
			Space:      allocators.SpaceConfig{Kind: "virtual", Capacity: 1 << 30},
			Record:     &rc,
		})
		assert.Error(t, err, "%+v", rc)
	}
}

// FuzzRecording: on any trace and allocator, the recorded series agree with
// each other: the layout at the peak is the exact memory map's state at
// that event, a tiny summarised timeline covers every event, and a tiny
// raster's cells hold fractions between 0 and 1 with blocks inside regions.
func FuzzRecording(f *testing.F) {
	f.Add([]byte{0, 10, 0, 0, 200, 1, 0, 3, 0, 1, 4, 0, 3, 0, 0, 0}, uint8(0))
	f.Add([]byte{1, 0xff, 0xff, 6, 1, 0xff, 0xff, 1, 2, 0, 0, 0, 3, 0, 0, 2, 0, 9, 9, 5}, uint8(5))
	// naive, with a 4096-aligned block drawn past its reservation before
	// naive reported its extent.
	f.Add([]byte("0001000\x81"), uint8(191))
	f.Fuzz(func(t *testing.T, data []byte, pick uint8) {
		evs := fuzzEvents(data)
		var specs []AllocatorSpec
		for _, name := range allocators.Names() {
			for _, opts := range fuzzOptions[name] {
				specs = append(specs, AllocatorSpec{Name: name, Options: opts})
			}
		}
		spec := specs[int(pick)%len(specs)]
		run := func(rc RecordConfig) Result {
			cfg := config(16<<20, spec.Name)
			cfg.Allocators[0].Options = spec.Options
			cfg.Record = &rc
			res, err := Replay(context.Background(), reader(t, evs), cfg)
			require.NoError(t, err)
			return res[0]
		}
		exact := run(RecordConfig{Points: 1 << 20, Blocks: 1 << 20})
		if l := exact.Layout; l != nil {
			assert.Equal(t, stateAfter(exact.Memmap, l.Event), withoutMeta(l))
			assert.Equal(t, exact.PeakInUseBytes, l.InUseBytes)
		} else {
			assert.Zero(t, exact.PeakInUseBytes)
		}
		small := run(RecordConfig{Points: 3, Blocks: 1, Rows: 2, Columns: 3})
		assert.Equal(t, exact.Layout, small.Layout)
		var covered int64
		for _, p := range small.Timeline.Points {
			assert.Equal(t, covered, p.Event)
			covered += p.Events
		}
		assert.EqualValues(t, len(evs), covered)
		if r := small.Memmap.Raster; r != nil {
			for row := range r.Rows {
				for col := range r.Cols {
					u, v := r.At(row, col)
					assert.GreaterOrEqual(t, u, -1e-9)
					assert.LessOrEqual(t, u, v+1e-9)
					assert.LessOrEqual(t, v, 1+1e-9)
				}
			}
		}
	})
}

// Each block of the memory map names its allocation: the trace's id, and
// the lines of its alloc and its free (0 for a block never freed), which
// the interactive page shows on hover.
func TestMemmapBlocksNameTheirEvents(t *testing.T) {
	evs := []trace.Event{
		{Op: trace.OpAlloc, ID: 7, Size: 100, Line: 2, Tag: "a", Slot: 0},
		{Op: trace.OpAlloc, ID: 9, Size: 300, Line: 3, Slot: 1},
		{Op: trace.OpFree, ID: 7, Size: 100, Line: 4, Slot: 0},
	}
	res := record(t, evs, "bfc", nil, RecordConfig{})
	require.Len(t, res.Memmap.Blocks, 2)
	freed, live := res.Memmap.Blocks[0], res.Memmap.Blocks[1]
	assert.Equal(t, MemBlock{Addr: freed.Addr, Size: 256, Requested: 100, Start: 0, End: 2, Tag: "a", ID: 7, StartLine: 2, EndLine: 4}, freed)
	assert.Equal(t, uint64(9), live.ID)
	assert.Equal(t, int64(3), live.StartLine)
	assert.Zero(t, live.EndLine, "never freed")
}

// A memory map too large to keep block by block keeps its largest blocks
// beside the raster: the ones a reader points at.
func TestMemmapKeepsLargestBlocks(t *testing.T) {
	evs := loadTrace(t, "random.jsonl")
	exact := record(t, evs, "bfc", nil, RecordConfig{Blocks: 1 << 20}).Memmap
	require.True(t, exact.Exact)
	const keep = 50
	mm := record(t, evs, "bfc", nil, RecordConfig{Blocks: keep}).Memmap
	require.False(t, mm.Exact)
	require.Len(t, mm.Large, keep)
	sizes := make([]uint64, len(exact.Blocks))
	for i, b := range exact.Blocks {
		sizes[i] = b.Size
	}
	slices.Sort(sizes)
	threshold := sizes[len(sizes)-keep]
	byKey := map[[2]int64]MemBlock{}
	for _, b := range exact.Blocks {
		byKey[[2]int64{b.Start, int64(b.Addr)}] = b
	}
	for i, b := range mm.Large {
		assert.GreaterOrEqual(t, b.Size, threshold, "only the largest are kept")
		assert.Equal(t, byKey[[2]int64{b.Start, int64(b.Addr)}], b, "kept whole, as the exact map has it")
		if i > 0 {
			assert.LessOrEqual(t, mm.Large[i-1].Start, b.Start, "by start event")
		}
	}
}

// sortByAddr orders as a comparison sort does, on keys that differ in any
// of their bytes or share most of them, long and short.
func TestSortByAddr(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 5, 63, 64, 65, 1000, 100000} {
		for _, mask := range []uint64{math.MaxUint64, 0xff_ffff_ff00, 1 << 40, 0} {
			keys := make([]LayoutRegion, n)
			for i := range keys {
				keys[i] = LayoutRegion{Addr: 1<<40 | rng.Uint64()&mask, Size: uint64(i)}
			}
			want := slices.Clone(keys)
			slices.SortStableFunc(want, func(a, b LayoutRegion) int { return cmp.Compare(a.Addr, b.Addr) })
			sortByAddr(keys, func(g *LayoutRegion) uint64 { return g.Addr })
			require.Equal(t, want, keys, "n=%d mask=%#x", n, mask)
		}
	}
}

// A recorded block is one cache line: recording it, and painting it when
// it is freed, touch one line each.
func TestRecBlockIsOneLine(t *testing.T) {
	assert.Equal(t, uintptr(64), unsafe.Sizeof(recBlock{}))
}
