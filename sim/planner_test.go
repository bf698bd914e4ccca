package sim

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/gen"
)

// plannerConfig is config with Reread giving evs again.
func plannerConfig(t testing.TB, evs []trace.Event, capacity uint64, names ...string) Config {
	cfg := config(capacity, names...)
	cfg.Reread = func() (Source, error) { return reader(t, evs), nil }
	return cfg
}

// An inference chain whose lifetimes are known: x0 [0,2) 1 KiB, x1 [1,4)
// 512 B, x2 [3,6) 1 KiB, x3 [5,7) 256 B. At most 1.5 KiB are live (x0+x1
// and x1+x2), and greedy by size reaches it: x0 and x2 (which do not meet)
// at 0, x1 and x3 at 1 KiB.
func TestPlannerReachesLowerBound(t *testing.T) {
	evs := []trace.Event{alloc(0, 1024), alloc(1, 512), free(0), alloc(2, 1024), free(1), alloc(3, 256), free(2), free(3)}
	res := replay(t, evs, plannerConfig(t, evs, 1<<20, "planner", "bfc"))
	p := res[0]
	assert.Equal(t, uint64(1536), p.PeakLiveBytes)
	assert.Equal(t, uint64(1536), p.PeakReservedBytes, "the footprint is the lower bound")
	assert.Equal(t, uint64(1536), p.PeakInUseBytes)
	assert.Equal(t, int64(1), p.Space.ReserveCalls, "one reservation for the whole plan")
	assert.Equal(t, int64(1536), p.AllocatorStats["footprint_bytes"])
	assert.Equal(t, int64(1536), p.AllocatorStats["lower_bound_bytes"])
	assert.Equal(t, int64(4), p.AllocatorStats["planned_allocs"])
	assert.Greater(t, res[1].PeakReservedBytes, p.PeakReservedBytes, "bfc takes a 2 MiB region")
}

// Lifetimes greedy by size cannot pack: a [0,4) 256 B, b [1,2) 512 B,
// c [3,6) 256 B, d [5,7) 512 B. At most 768 bytes are live, and b at 0,
// a at 512, c at 0, d at 256 would fit in 768; largest first puts b and d
// at 0, a above b at 512 and c above a and d at 768: 1 KiB.
func TestPlannerAboveLowerBound(t *testing.T) {
	evs := []trace.Event{alloc(0, 256), alloc(1, 512), free(1), alloc(2, 256), free(0), alloc(3, 512), free(2), free(3)}
	p := replay(t, evs, plannerConfig(t, evs, 1<<20, "planner"))[0]
	assert.Equal(t, uint64(768), p.PeakLiveBytes)
	assert.Equal(t, uint64(1024), p.PeakReservedBytes)
	assert.Equal(t, int64(0), p.FailedAllocs)
}

func TestPlannerNeedsReread(t *testing.T) {
	evs := []trace.Event{alloc(1, 100), free(1)}
	_, err := Replay(context.Background(), reader(t, evs), config(1<<20, "bfc", "planner"))
	require.EqualError(t, err, "planner plans offline and needs to read the trace twice; give a trace file, not standard input or a pipe")

	cfg := config(1<<20, "planner")
	cfg.Reread = func() (Source, error) { return nil, errors.New("gone") }
	_, err = Replay(context.Background(), reader(t, evs), cfg)
	require.EqualError(t, err, "reading the trace again for planner: gone")

	// Without a planner the trace is read once, Reread or not.
	cfg = config(1<<20, "bfc")
	cfg.Reread = func() (Source, error) { t.Fatal("read again"); return nil, nil }
	replay(t, evs, cfg)
}

// A plan larger than the device fails every allocation, and the replay
// goes on; with StopOnOOM it stops at the first.
func TestPlannerOutOfMemory(t *testing.T) {
	evs := []trace.Event{alloc(0, 1024), alloc(1, 512), free(0), alloc(2, 1024), free(1), alloc(3, 256), free(2), free(3)}
	p := replay(t, evs, plannerConfig(t, evs, 1024, "planner"))[0]
	assert.Equal(t, int64(4), p.FailedAllocs)
	assert.Equal(t, int64(0), p.FirstOOMEvent)
	assert.Equal(t, int64(1), p.Space.FailedReserves, "one attempt")
	assert.Zero(t, p.PeakReservedBytes)

	cfg := plannerConfig(t, evs, 1024, "planner")
	cfg.StopOnOOM = true
	p = replay(t, evs, cfg)[0]
	assert.True(t, p.Stopped)
	assert.Equal(t, int64(1), p.Events)
}

func TestLifetimes(t *testing.T) {
	evs := []trace.Event{
		alloc(1, 100),      // 0: never freed
		{Op: trace.OpStep}, // 1
		alloc(2, 0),        // 2: size 0, left out
		{Op: trace.OpAlloc, ID: 3, Size: 300, Align: 4096}, // 3
		free(2),                       // 4
		free(3),                       // 5
		{Op: trace.OpMark, Name: "m"}, // 6
		alloc(3, 50),                  // 7: the id again
		free(3),                       // 8
	}
	got, err := Lifetimes(context.Background(), reader(t, evs))
	require.NoError(t, err)
	assert.Equal(t, []allocators.Lifetime{
		{Size: 100, Start: 0, End: 9},
		{Size: 300, Align: 4096, Start: 3, End: 5},
		{Size: 50, Start: 7, End: 8},
	}, got)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	long := make([]trace.Event, 0, 2*prepassCheckEvery)
	for i := range uint64(prepassCheckEvery) {
		long = append(long, alloc(i, 1), free(i))
	}
	_, err = Lifetimes(ctx, reader(t, long))
	require.ErrorIs(t, err, context.Canceled)
}

// openBundled opens a bundled trace.
func openBundled(t testing.TB, path string) *trace.Reader {
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	r, err := trace.NewReader(f, path)
	require.NoError(t, err)
	return r
}

// Every bundled trace replays through the planner with the checker on; the
// footprint is never below the lower bound, and on the inference traces it
// is within a few percent of it.
func TestPlannerBundledTraces(t *testing.T) {
	paths, err := filepath.Glob("../traces/*.jsonl")
	require.NoError(t, err)
	tf, err := filepath.Glob("../traces/tf/*.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	near := map[string]float64{"cnn-infer.jsonl": 1.03, "transformer-infer.jsonl": 1.03, "transformer-train.jsonl": 1.03}
	for _, path := range append(paths, tf...) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			r := openBundled(t, path)
			capacity := r.Header().CapacityBytes
			if capacity == 0 {
				capacity = DefaultCapacity
			}
			cfg := config(capacity, "planner")
			cfg.Reread = func() (Source, error) { return openBundled(t, path), nil }
			res, err := Replay(context.Background(), r, cfg)
			require.NoError(t, err)
			p, lb := res[0], r.Summary().PeakLiveBytes
			assert.Equal(t, int64(lb), p.AllocatorStats["lower_bound_bytes"])
			if p.FailedAllocs > 0 {
				assert.Greater(t, uint64(p.AllocatorStats["footprint_bytes"]), capacity, "only a plan too large fails")
				assert.Equal(t, r.Summary().Allocs-r.Summary().ZeroSizeAllocs, p.FailedAllocs, "all or nothing")
				t.Logf("footprint %d bytes does not fit %d", p.AllocatorStats["footprint_bytes"], capacity)
				return
			}
			assert.Equal(t, lb, p.PeakLiveBytes)
			assert.GreaterOrEqual(t, p.PeakReservedBytes, lb)
			ratio := float64(p.PeakReservedBytes) / float64(lb)
			if limit, ok := near[filepath.Base(path)]; ok {
				assert.LessOrEqual(t, ratio, limit)
			}
			t.Logf("peak reserved %d, lower bound %d: %.4f×", p.PeakReservedBytes, lb, ratio)
		})
	}
}

// FuzzPlannerReplay: on any trace the planner's blocks pass the checker, and
// its footprint is at least the most bytes live.
func FuzzPlannerReplay(f *testing.F) {
	f.Add([]byte{0, 10, 0, 0, 200, 1, 0, 3, 0, 1, 4, 0})
	f.Add([]byte{1, 0xff, 0xff, 0, 1, 0xff, 0xff, 1, 2, 0, 0, 0, 3, 0, 0, 2})
	f.Add([]byte{0, 1, 2, 0x85, 0, 9, 1, 0x8c, 3, 0, 0, 0, 0, 5, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		evs := fuzzEvents(data)
		for _, opts := range []allocators.Options{nil, {"align": "1"}, {"align": "4KiB"}} {
			cfg := plannerConfig(t, evs, 16<<20, "planner")
			cfg.Allocators[0].Options = opts
			p := replay(t, evs, cfg)[0]
			if p.FailedAllocs == 0 {
				assert.GreaterOrEqual(t, p.PeakReservedBytes, p.PeakLiveBytes)
			}
		}
	})
}

// plannerLifetimes reads a trace into lifetimes.
func plannerLifetimes(b *testing.B, src Source) []allocators.Lifetime {
	lts, err := Lifetimes(context.Background(), src)
	if err != nil {
		b.Fatal(err)
	}
	return lts
}

// generated writes a synthetic trace and reads it back, Slots assigned.
func generated(b *testing.B, g gen.Generator) *trace.Reader {
	var buf bytes.Buffer
	w := trace.NewWriter(&buf)
	if err := g.Generate(w.Write); err != nil {
		b.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	r, err := trace.NewReader(&buf, "generated")
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkPlannerPlan times the offline planning alone, Plan on a trace's
// lifetimes: the bundled traces, and two of about 100,000 allocations.
func BenchmarkPlannerPlan(b *testing.B) {
	big := gen.DefaultTransformerTrain()
	big.Layers, big.Steps = 24, 40
	rnd := gen.DefaultRandom()
	rnd.Events = 200_000
	cases := []struct {
		name string
		src  func() Source
	}{
		{"transformer-train", func() Source { return openBundled(b, "../traces/transformer-train.jsonl") }},
		{"transformer-infer", func() Source { return openBundled(b, "../traces/transformer-infer.jsonl") }},
		{"cnn-infer", func() Source { return openBundled(b, "../traces/cnn-infer.jsonl") }},
		{"random", func() Source { return openBundled(b, "../traces/random.jsonl") }},
		{"transformer-train-24x40", func() Source { return generated(b, big) }},
		{"random-200k", func() Source { return generated(b, rnd) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			lts := plannerLifetimes(b, c.src())
			b.ReportAllocs()
			for b.Loop() {
				p, err := allocators.NewGreedyBySize(allocators.NewVirtualSpace(DefaultCapacity, allocators.CostModel{}, allocators.FirstFit), allocators.DefaultPlannerAlign)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Plan(context.Background(), lts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(lts)), "allocs")
		})
	}
}
