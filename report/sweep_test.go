package report

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/search"
	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
)

// fakeSweep is a whole sweep of made-up results: 2 traces × 3 points, two
// allocators, values that differ by job and allocator.
func fakeSweep() Sweep {
	info := search.Grid{
		Paths:      []string{"traces/a.jsonl", "traces/b.jsonl"},
		Allocators: []string{"bfc", "naive"},
		Axes:       []search.Axis{{Name: "bfc.memory_limit", Values: []string{"128MiB", "64MiB", "1GiB"}}},
		Sets:       []string{},
		Space:      "virtual",
		Jobs:       6,
	}
	s := Sweep{Version: Version, Sweep: info}
	for k := range info.Jobs {
		t, _ := info.JobOf(k)
		name := []string{"a", "b"}[t]
		tr := cmpTrace(name)
		for a, alloc := range info.Allocators {
			r := cmpResult(alloc)
			r.PeakReservedBytes = uint64(100+10*k+a) << 20
			r.FootprintVsLowerBound = float64(r.PeakReservedBytes) / float64(80<<20)
			if k == 1 && a == 0 {
				r.FailedAllocs = 3
			}
			tr.Results = append(tr.Results, r)
		}
		s.Traces = append(s.Traces, NewSweepTrace(&info, k, tr))
	}
	return s
}

// shardOf cuts shard i of n out of a whole sweep, as sweep --shard i/n writes it.
func shardOf(s Sweep, i, n int) Sweep {
	out := s
	out.Sweep.Shard = &search.Shard{Index: i, Count: n, Jobs: search.ShardJobs(s.Sweep.Jobs, i, n)}
	out.Traces = nil
	for _, tr := range s.Traces {
		if tr.Job%n == i-1 {
			out.Traces = append(out.Traces, tr)
		}
	}
	return out
}

func sweepJSON(t *testing.T, s Sweep) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, WriteSweepJSON(&buf, s))
	return buf.String()
}

func TestSweepJSONShape(t *testing.T) {
	s := fakeSweep()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(sweepJSON(t, shardOf(s, 2, 4))), &m))
	assert.Equal(t, 1.0, m["bfcsim_report"])
	sw := m["sweep"].(map[string]any)
	assert.Equal(t, 6.0, sw["jobs"])
	assert.Equal(t, map[string]any{"index": 2.0, "count": 4.0, "jobs": []any{1.0, 5.0}}, sw["shard"])
	assert.Equal(t, []any{map[string]any{"name": "bfc.memory_limit", "values": []any{"128MiB", "64MiB", "1GiB"}}}, sw["axes"])
	traces := m["traces"].([]any)
	require.Len(t, traces, 2)
	tr := traces[1].(map[string]any)
	assert.Equal(t, 5.0, tr["job"])
	assert.Equal(t, map[string]any{"bfc.memory_limit": "1GiB"}, tr["point"])
	// The trace keys of report.json (docs/metrics.md), beside the sweep's.
	for _, k := range []string{"name", "path", "events", "allocs", "frees", "peak_live_bytes", "total_alloc_bytes", "results"} {
		assert.Contains(t, tr, k)
	}
	assert.Equal(t, "traces/b.jsonl", tr["path"])
	assert.NotContains(t, m["sweep"], "missing_jobs")

	var back Sweep
	require.NoError(t, json.Unmarshal([]byte(sweepJSON(t, s)), &back))
	assert.Equal(t, sweepJSON(t, s), sweepJSON(t, back), "report.json reads back as it was")
}

func TestSweepWithoutTimings(t *testing.T) {
	s := fakeSweep()
	z := SweepWithoutTimings(s)
	for i := range z.Traces {
		for _, r := range z.Traces[i].Results {
			assert.Zero(t, r.LatencyNs)
			assert.Zero(t, r.ReplaySeconds)
			assert.Zero(t, r.EventsPerSecond)
			assert.NotZero(t, r.PeakReservedBytes)
		}
		assert.Equal(t, s.Traces[i].Point, z.Traces[i].Point)
		assert.Equal(t, s.Traces[i].Job, z.Traces[i].Job)
	}
	assert.NotZero(t, s.Traces[0].Results[0].LatencyNs.Alloc.P50, "the original is left alone")
}

func TestMergeSweeps(t *testing.T) {
	whole := fakeSweep()
	want := sweepJSON(t, whole)
	names := []string{"s3.json", "s1.json", "s2.json"}
	merged, err := MergeSweeps([]Sweep{shardOf(whole, 3, 3), shardOf(whole, 1, 3), shardOf(whole, 2, 3)}, names, false)
	require.NoError(t, err)
	assert.Equal(t, want, sweepJSON(t, merged), "shards merged in any order are the whole sweep")

	// A whole sweep merges to itself; so do shards of 1.
	merged, err = MergeSweeps([]Sweep{whole}, []string{"all.json"}, false)
	require.NoError(t, err)
	assert.Equal(t, want, sweepJSON(t, merged))
	merged, err = MergeSweeps([]Sweep{shardOf(whole, 1, 1)}, []string{"all.json"}, false)
	require.NoError(t, err)
	assert.Equal(t, want, sweepJSON(t, merged))

	// Partial merges list what is missing, and merge again with the rest.
	partial, err := MergeSweeps([]Sweep{shardOf(whole, 1, 3), shardOf(whole, 3, 3)}, []string{"s1", "s3"}, true)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 4}, partial.Sweep.Missing)
	assert.Nil(t, partial.Sweep.Shard)
	assert.Len(t, partial.Traces, 4)
	merged, err = MergeSweeps([]Sweep{partial, shardOf(whole, 2, 3)}, []string{"partial", "s2"}, false)
	require.NoError(t, err)
	assert.Equal(t, want, sweepJSON(t, merged))
}

func TestMergeSweepsErrors(t *testing.T) {
	whole := fakeSweep()
	s1, s2, s3 := shardOf(whole, 1, 3), shardOf(whole, 2, 3), shardOf(whole, 3, 3)
	other := shardOf(whole, 2, 3)
	other.Sweep.Axes = []search.Axis{{Name: "bfc.memory_limit", Values: []string{"128MiB", "64MiB", "2GiB"}}}
	sets := shardOf(whole, 2, 3)
	sets.Sweep.Sets = []string{"bfc.allow_growth=false"}
	capacity := shardOf(whole, 2, 3)
	capacity.Sweep.Capacity = "16GiB"
	paths := shardOf(whole, 2, 3)
	paths.Sweep.Paths = []string{"traces/b.jsonl", "traces/a.jsonl"}
	split := shardOf(whole, 2, 4)
	lacking := shardOf(whole, 2, 3)
	lacking.Traces = lacking.Traces[:1]
	moved := shardOf(whole, 2, 3)
	moved.Traces = append([]SweepTrace(nil), moved.Traces...)
	moved.Traces[0].Point = map[string]string{"bfc.memory_limit": "1GiB"}
	version := shardOf(whole, 2, 3)
	version.Version = 2
	badCount := shardOf(whole, 2, 3)
	badCount.Sweep.Jobs = 7

	for _, c := range []struct {
		name         string
		parts        []Sweep
		allowPartial bool
		msg          string
	}{
		{"none", nil, false, "no reports to merge"},
		{"grid", []Sweep{s1, other, s3}, false, "a and b are not parts of one sweep: the grids differ (bfc.memory_limit=128MiB,64MiB,1GiB, and bfc.memory_limit=128MiB,64MiB,2GiB)"},
		{"sets", []Sweep{s1, sets, s3}, false, "the --set options differ (none, and bfc.allow_growth=false)"},
		{"capacity", []Sweep{s1, capacity, s3}, false, "the capacities differ (the traces', and 16GiB)"},
		{"paths", []Sweep{s1, paths, s3}, false, "the traces differ (traces/a.jsonl traces/b.jsonl, and traces/b.jsonl traces/a.jsonl)"},
		{"twice", []Sweep{s1, s2, s2}, false, "shard 2/3 is given twice: b and c"},
		{"split", []Sweep{s1, split, s3}, false, "a is shard 1/3 and b shard 2/4: the shards of one sweep split it alike"},
		{"missing", []Sweep{s1, s3}, false, "2 of the sweep's 6 jobs are missing: shard 2/3 not given (--allow-partial merges what there is)"},
		{"missing two", []Sweep{s3}, false, "4 of the sweep's 6 jobs are missing: shards 1/3 and 2/3 not given"},
		{"lacking", []Sweep{s1, lacking, s3}, false, "b holds 1 jobs, not the 2 it should (shard 2/3): an incomplete report?"},
		{"lacking partial", []Sweep{s1, lacking, s3}, true, "b holds 1 jobs, not the 2 it should"},
		{"moved", []Sweep{s1, moved, s3}, false, "b: job 1 is traces/a.jsonl at bfc.memory_limit=1GiB, not traces/a.jsonl at bfc.memory_limit=64MiB"},
		{"both", []Sweep{whole, s2}, false, "job 1 (traces/a.jsonl at bfc.memory_limit=64MiB) is in both a and b"},
		{"version", []Sweep{s1, version}, false, "b is a version 2 report, and this bfcsim reads version 1"},
		{"job count", []Sweep{badCount}, false, "a: 7 jobs, but 2 traces × 3 grid points"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := MergeSweeps(c.parts, []string{"a", "b", "c"}, c.allowPartial)
			if assert.Error(t, err) {
				assert.Contains(t, err.Error(), c.msg)
			}
		})
	}

	// Jobs missing from within shards are listed.
	half := shardOf(whole, 1, 2)
	_, err := MergeSweeps([]Sweep{half, shardOf(whole, 1, 3)}, []string{"a", "b"}, false)
	require.Error(t, err, "a shard of 2 and one of 3 do not mix")
	_, err = MergeSweeps([]Sweep{half}, []string{"a"}, false)
	assert.EqualError(t, err, "3 of the sweep's 6 jobs are missing: shard 2/2 not given (--allow-partial merges what there is)")
	part, err := MergeSweeps([]Sweep{half}, []string{"a"}, true)
	require.NoError(t, err)
	part.Traces = part.Traces[:2] // job 4 dropped, but still claimed
	_, err = MergeSweeps([]Sweep{part}, []string{"p"}, true)
	assert.EqualError(t, err, "p holds 2 jobs, not the 3 it should (6 jobs, 3 missing): an incomplete report?")
}

// goldenSweep replays a bundled trace at each point of a small grid, as
// bfcsim sweep does, and returns the report without timings.
func goldenSweep(t *testing.T) Sweep {
	t.Helper()
	info := search.Grid{
		Paths:      []string{"traces/nodups.jsonl"},
		Allocators: []string{"bfc", "arena"},
		Axes: []search.Axis{
			{Name: "bfc.allow_growth", Values: []string{"true", "false"}},
			{Name: "bfc.memory_limit", Values: []string{"256KiB", "1MiB"}},
		},
		Sets:  []string{},
		Space: "virtual",
	}
	info.Jobs = info.Points()
	s := Sweep{Version: Version, Sweep: info}
	for k := range info.Jobs {
		_, p := info.JobOf(k)
		f, err := os.Open("../traces/nodups.jsonl")
		require.NoError(t, err)
		r, err := trace.NewReader(f, "traces/nodups.jsonl")
		require.NoError(t, err)
		pt := info.Point(p)
		specs := []sim.AllocatorSpec{
			{Name: "bfc", Options: allocators.Options{"allow_growth": pt["bfc.allow_growth"], "memory_limit": pt["bfc.memory_limit"]}},
			{Name: "arena"},
		}
		res, err := sim.Replay(context.Background(), r, sim.Config{
			Allocators: specs,
			Space:      allocators.SpaceConfig{Kind: "virtual", Capacity: r.Header().CapacityBytes},
		})
		require.NoError(t, err)
		rep := Build([]TraceRun{{
			Name: r.Header().Name, Path: "traces/nodups.jsonl", Header: r.Header(), Summary: r.Summary(),
			CapacityBytes: r.Header().CapacityBytes, Space: "virtual", Results: res,
		}})
		f.Close()
		s.Traces = append(s.Traces, NewSweepTrace(&s.Sweep, k, rep.Traces[0]))
	}
	return SweepWithoutTimings(s)
}

func TestSweepGolden(t *testing.T) {
	s := goldenSweep(t)
	for _, c := range []struct{ format, metric, file string }{
		{"markdown", DefaultSweepMetric, "sweep.markdown"},
		{"table", DefaultSweepMetric, "sweep.table"},
		{"markdown", "utilization", "sweep-utilization.markdown"},
	} {
		t.Run(c.file, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, RenderSweep(&buf, s, c.format, c.metric))
			path := filepath.Join("testdata", c.file)
			if *rewrite {
				require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(want), buf.String(), "rerun with -rewrite and review the diff")
		})
	}
}

func TestSweepBestRow(t *testing.T) {
	s := fakeSweep()
	m, err := lookupSweepMetric("peak_reserved_bytes")
	require.NoError(t, err)
	g := SweepGroups(&s)[0]
	rows := sweepRows(&s, g)
	require.Len(t, rows, 6)
	// bfc at job 0 is lowest; naive at job 0 next.
	assert.Equal(t, 0, bestRow(rows, m))
	rows[0].r.FailedAllocs = 1
	assert.Equal(t, 3, bestRow(rows, m), "a row with failed allocations is never best: naive at job 0")
	u, err := lookupSweepMetric("utilization")
	require.NoError(t, err)
	rows[4].r.Utilization = 0.99
	assert.Equal(t, 4, bestRow(rows, u), "higher is better")
	for _, r := range rows {
		r.r.FailedAllocs = 1
	}
	assert.Equal(t, -1, bestRow(rows, m))
}

func TestSweepRenderErrors(t *testing.T) {
	s := fakeSweep()
	assert.EqualError(t, RenderSweep(&bytes.Buffer{}, s, "csv", DefaultSweepMetric),
		`unknown format "csv" (want one of table, json, markdown)`)
	err := RenderSweep(&bytes.Buffer{}, s, "table", "nope")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown metric "nope" (want one of footprint_vs_lower_bound, peak_reserved_bytes,`)
	assert.NoError(t, CheckSweepMetric("tf_fragmentation.max"))
}

func TestSweepPlotData(t *testing.T) {
	s := fakeSweep()
	m, err := lookupSweepMetric("peak_reserved_bytes")
	require.NoError(t, err)
	groups := SweepGroups(&s)
	require.Len(t, groups, 2)
	assert.Equal(t, SweepGroup{Trace: 1, Name: "b", Path: "traces/b.jsonl", Entries: []int{3, 4, 5}}, groups[1])

	// One axis of sizes: numeric, in bytes, sorted; a decade or more apart: log.
	sp := sweepPlotData(&s, groups[0], m)
	assert.True(t, sp.numeric)
	assert.True(t, sp.logX)
	assert.Equal(t, "bfc.memory_limit", sp.xLabel)
	assert.Equal(t, []plot.Tick{{Value: 64 << 20, Label: "64MiB"}, {Value: 128 << 20, Label: "128MiB"}, {Value: 1 << 30, Label: "1GiB"}}, sp.ticks)
	require.Len(t, sp.series, 2)
	assert.Equal(t, "bfc", sp.series[0].allocator)
	assert.Equal(t, plotter.XYs{{X: 64 << 20, Y: 110 << 20}, {X: 128 << 20, Y: 100 << 20}, {X: 1 << 30, Y: 120 << 20}}, sp.series[0].xys)
	assert.Equal(t, plotter.XYs{{X: 64 << 20, Y: 110 << 20}}, sp.series[0].failed)
	assert.Equal(t, plotter.XYs{{X: 64 << 20, Y: 111 << 20}, {X: 128 << 20, Y: 101 << 20}, {X: 1 << 30, Y: 121 << 20}}, sp.series[1].xys)
	assert.Empty(t, sp.series[1].failed)

	// Two axes: categories, the allocators side by side; a shard leaves points out.
	s.Sweep.Axes = []search.Axis{
		{Name: "bfc.allow_growth", Values: []string{"true"}},
		{Name: "bfc.memory_limit", Values: []string{"128MiB", "64MiB", "1GiB"}},
	}
	for i := range s.Traces {
		s.Traces[i].Point = s.Sweep.Point(i % 3)
	}
	shard := shardOf(s, 1, 2) // jobs 0, 2, 4
	groups = SweepGroups(&shard)
	require.Len(t, groups, 2)
	sp = sweepPlotData(&shard, groups[0], m)
	assert.False(t, sp.numeric)
	assert.Equal(t, "bfc.allow_growth, bfc.memory_limit", sp.xLabel)
	assert.Equal(t, []plot.Tick{{Value: 0, Label: "true, 128MiB"}, {Value: 1, Label: "true, 64MiB"}, {Value: 2, Label: "true, 1GiB"}}, sp.ticks)
	assert.Equal(t, plotter.XYs{{X: -0.3, Y: 100 << 20}, {X: 1.7, Y: 120 << 20}}, sp.series[0].xys)
	assert.Equal(t, plotter.XYs{{X: 0.3, Y: 101 << 20}, {X: 2.3, Y: 121 << 20}}, sp.series[1].xys)

	// Not numbers: categories.
	s.Sweep.Axes = []search.Axis{{Name: "pytorch.max_split_size_mb", Values: []string{"64", "128", "unlimited"}}}
	assert.False(t, sweepPlotData(&s, SweepGroups(&s)[0], m).numeric)
	s.Sweep.Axes = []search.Axis{{Name: "bfc.fragmentation_fraction", Values: []string{"0", "0.01", "0.1"}}}
	sp = sweepPlotData(&s, SweepGroups(&s)[0], m)
	assert.True(t, sp.numeric)
	assert.False(t, sp.logX, "0 is on the axis: linear")
}

func TestWriteSweepPlot(t *testing.T) {
	s := fakeSweep()
	for _, metric := range []string{"peak_reserved_bytes", "footprint_vs_lower_bound", "fragmentation", "failed_allocs", "latency_ns.alloc.p50", "modeled_device_seconds"} {
		for _, format := range PlotFormats {
			var buf bytes.Buffer
			require.NoError(t, WriteSweepPlot(&buf, &s, SweepGroups(&s)[0], metric, format), "%s %s", metric, format)
			if format == "png" {
				assert.True(t, bytes.HasPrefix(buf.Bytes(), []byte("\x89PNG")), metric)
			} else {
				assert.Contains(t, buf.String(), "<svg", metric)
			}
		}
	}
	err := WriteSweepPlot(&bytes.Buffer{}, &s, SweepGroups(&s)[0], "peak_reserved_bytes", "pdf")
	assert.EqualError(t, err, `unknown plot format "pdf" (want png or svg)`)
	assert.Equal(t, "cnn-infer.sweep.tf_fragmentation.max.svg", SweepPlotFileName("cnn-infer", "tf_fragmentation.max", "svg"))
}

func TestLogTicks(t *testing.T) {
	ticks := logTicks{format: UnitBytes.Format, bytes: true}.Ticks(100<<20, 80<<30)
	var labels []string
	for _, tk := range ticks {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	assert.Equal(t, []string{"64 MiB", "256 MiB", "1 GiB", "4 GiB", "16 GiB", "64 GiB"}, labels)
	ticks = logTicks{format: func(v float64) string { return Percent(v) }}.Ticks(0.01, 0.5)
	assert.Equal(t, plot.Tick{Value: 0.01, Label: "1.0%"}, ticks[0])
	assert.Equal(t, plot.Tick{Value: 0.02, Label: "2.0%"}, ticks[1])
}
