package report

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cmpResult is a hand-built result with every compared metric non-zero
// except failed_allocs and device_release_calls.
func cmpResult(allocator string) Result {
	return Result{
		Allocator:                allocator,
		Options:                  map[string]any{"allow_growth": true, "memory_limit": 1 << 30},
		OKAllocs:                 1000,
		PeakReservedBytes:        100 << 20,
		PeakInUseBytes:           90 << 20,
		PeakLiveBytes:            80 << 20,
		FinalReservedBytes:       50 << 20,
		Fragmentation:            0.2,
		Utilization:              0.8,
		InternalWasteAtPeakBytes: 1 << 20,
		TFFragmentation:          MaxMean{Max: 0.5, Mean: 0.25},
		DeviceReserveCalls:       10,
		ModeledDeviceSeconds:     0.001,
		LatencyNs: Latencies{
			Alloc: Latency{P50: 100, P99: 1000},
			Free:  Latency{P50: 50, P99: 500},
		},
		ReplaySeconds:   0.01,
		EventsPerSecond: 1e6,
		SpaceOptions:    map[string]any{"reserve_cost": "10us"},
	}
}

func cmpTrace(name string, results ...Result) Trace {
	return Trace{Name: name, Path: "traces/" + name + ".jsonl", Events: 2000, PeakLiveBytes: 80 << 20,
		CapacityBytes: 1 << 30, Space: "virtual", Results: results}
}

func cmpReport(traces ...Trace) Report { return Report{Version: Version, Traces: traces} }

// row finds one row of a comparison.
func row(t *testing.T, c Comparison, traceName, allocator, metric string) MetricChange {
	t.Helper()
	for _, tc := range c.Traces {
		if tc.Name != traceName {
			continue
		}
		for _, r := range tc.Rows {
			if r.Allocator == allocator && r.Metric == metric {
				return r
			}
		}
	}
	require.Failf(t, "no row", "%s/%s %s", traceName, allocator, metric)
	return MetricChange{}
}

func TestCompareEqual(t *testing.T) {
	rep := cmpReport(cmpTrace("t", cmpResult("bfc"), cmpResult("naive")))
	c := Compare(rep, rep, CompareOptions{Tolerance: DefaultTolerance, BaselineName: "base.json"})
	require.Len(t, c.Traces, 1)
	tc := c.Traces[0]
	assert.True(t, tc.HasBaseline)
	assert.Empty(t, tc.Warnings)
	assert.Empty(t, tc.NoBaseline)
	assert.Empty(t, tc.NotReplayed)
	assert.Empty(t, c.NotReplayed)

	// Every allocator has every metric but recorded_address_match and
	// recorded_block_match (the trace has no addresses nor block sizes), in
	// the fixed order.
	var want []string
	timing := map[string]bool{}
	for _, m := range CompareMetrics() {
		if m.Name != "recorded_address_match.matched" && m.Name != "recorded_block_match.matched" {
			want = append(want, m.Name)
		}
		timing[m.Name] = m.Timing
	}
	require.Len(t, tc.Rows, 2*len(want))
	for i, r := range tc.Rows {
		alloc := "bfc"
		if i >= len(want) {
			alloc = "naive"
		}
		assert.Equal(t, alloc, r.Allocator)
		assert.Equal(t, want[i%len(want)], r.Metric)
		assert.Zero(t, r.Change, r.Metric)
		assert.Equal(t, r.Baseline, r.Now, r.Metric)
		if timing[r.Metric] {
			assert.Equal(t, NotCompared, r.Verdict, r.Metric)
		} else {
			assert.Equal(t, OK, r.Verdict, r.Metric)
		}
	}
	assert.Equal(t, 26, c.Count(OK))
	assert.Equal(t, 12, c.Count(NotCompared))
	assert.Equal(t, 2, c.Matched())
	assert.Empty(t, c.Regressions())
	assert.Equal(t, "0 regressions, 0 better, 26 ok, 12 not compared (tolerance 2%)", c.Summary())
}

func TestCompareVerdicts(t *testing.T) {
	cases := []struct {
		name    string
		metric  string
		edit    func(r *Result)
		tol     float64
		verdict Verdict
		change  float64
	}{
		{"bigger peak", "peak_reserved_bytes", func(r *Result) { r.PeakReservedBytes = 110 << 20 }, 0.02, Regression, 0.1},
		{"smaller peak", "peak_reserved_bytes", func(r *Result) { r.PeakReservedBytes = 90 << 20 }, 0.02, Better, -0.1},
		{"within tolerance", "peak_in_use_bytes", func(r *Result) { r.PeakInUseBytes = 91 << 20 }, 0.02, OK, 1.0 / 90},
		{"exactly the tolerance is ok", "fragmentation", func(r *Result) { r.Fragmentation = 0.204 }, 0.02, OK, 0.02},
		{"exactly the tolerance is ok, better", "fragmentation", func(r *Result) { r.Fragmentation = 0.196 }, 0.02, OK, -0.02},
		{"just past the tolerance", "fragmentation", func(r *Result) { r.Fragmentation = 0.2042 }, 0.02, Regression, 0.021},
		{"zero tolerance", "internal_waste_at_peak_bytes", func(r *Result) { r.InternalWasteAtPeakBytes++ }, 0, Regression, 1.0 / (1 << 20)},
		{"lower utilization is worse", "utilization", func(r *Result) { r.Utilization = 0.7 }, 0.02, Regression, -0.125},
		{"higher utilization is better", "utilization", func(r *Result) { r.Utilization = 0.9 }, 0.02, Better, 0.125},
		{"fewer ok allocs", "ok_allocs", func(r *Result) { r.OKAllocs = 900 }, 0.02, Regression, -0.1},
		{"tf max", "tf_fragmentation.max", func(r *Result) { r.TFFragmentation.Max = 0.6 }, 0.02, Regression, 0.2},
		{"tf mean", "tf_fragmentation.mean", func(r *Result) { r.TFFragmentation.Mean = 0.2 }, 0.02, Better, -0.2},
		{"more device calls", "device_reserve_calls", func(r *Result) { r.DeviceReserveCalls = 20 }, 0.02, Regression, 1},
		{"device time", "modeled_device_seconds", func(r *Result) { r.ModeledDeviceSeconds = 0.0005 }, 0.02, Better, -0.5},
		{"final reserved", "final_reserved_bytes", func(r *Result) { r.FinalReservedBytes = 0 }, 0.02, Better, -1},
		// From a zero baseline.
		{"failures from none", "failed_allocs", func(r *Result) { r.FailedAllocs = 3 }, 0.02, Regression, math.Inf(1)},
		{"releases from none", "device_release_calls", func(r *Result) { r.DeviceReleaseCalls = 1 }, 0.5, Regression, math.Inf(1)},
		{"none and none", "failed_allocs", func(*Result) {}, 0, OK, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := cmpReport(cmpTrace("t", cmpResult("bfc")))
			now := cmpReport(cmpTrace("t", cmpResult("bfc")))
			tc.edit(&now.Traces[0].Results[0])
			c := Compare(base, now, CompareOptions{Tolerance: tc.tol})
			r := row(t, c, "t", "bfc", tc.metric)
			assert.Equal(t, tc.verdict, r.Verdict)
			if math.IsInf(tc.change, 0) {
				assert.Equal(t, tc.change, r.Change)
			} else {
				assert.InDelta(t, tc.change, r.Change, 1e-9)
			}
			// Only the edited metric has a verdict.
			assert.Equal(t, 13, c.Count(OK)+c.Count(Regression)+c.Count(Better))
			if tc.verdict != OK {
				assert.Equal(t, 1, c.Count(tc.verdict))
				assert.Equal(t, 12, c.Count(OK))
			}
		})
	}
}

// A higher-is-better metric from a zero baseline: any improvement is better.
func TestCompareZeroBaselineBetter(t *testing.T) {
	base := cmpReport(cmpTrace("t", cmpResult("bfc")))
	base.Traces[0].Results[0].OKAllocs = 0
	now := cmpReport(cmpTrace("t", cmpResult("bfc")))
	c := Compare(base, now, CompareOptions{Tolerance: 0.02})
	r := row(t, c, "t", "bfc", "ok_allocs")
	assert.Equal(t, Better, r.Verdict)
	assert.True(t, math.IsInf(r.Change, 1))
	assert.Equal(t, "+inf", FormatChange(r.Change))
}

func TestCompareTimings(t *testing.T) {
	base := cmpReport(cmpTrace("t", cmpResult("bfc")))
	now := cmpReport(cmpTrace("t", cmpResult("bfc")))
	r := &now.Traces[0].Results[0]
	r.LatencyNs.Alloc.P99 = 2000 // twice as slow
	r.EventsPerSecond = 2e6      // twice as fast
	r.ReplaySeconds = 0.005

	c := Compare(base, now, CompareOptions{Tolerance: 0.02})
	assert.Equal(t, NotCompared, row(t, c, "t", "bfc", "latency_ns.alloc.p99").Verdict)
	assert.InDelta(t, 1.0, row(t, c, "t", "bfc", "latency_ns.alloc.p99").Change, 1e-9, "the change is still shown")
	assert.Equal(t, NotCompared, row(t, c, "t", "bfc", "events_per_second").Verdict)
	assert.Zero(t, c.Count(Regression))

	c = Compare(base, now, CompareOptions{Tolerance: 0.02, Timings: true})
	assert.Equal(t, Regression, row(t, c, "t", "bfc", "latency_ns.alloc.p99").Verdict)
	assert.Equal(t, Better, row(t, c, "t", "bfc", "events_per_second").Verdict, "higher is better")
	assert.Equal(t, Better, row(t, c, "t", "bfc", "replay_seconds").Verdict)
	assert.Equal(t, OK, row(t, c, "t", "bfc", "latency_ns.free.p50").Verdict)
	assert.Zero(t, c.Count(NotCompared))
	assert.Equal(t, []string{"t/bfc latency_ns.alloc.p99 +100.0%"}, c.Regressions())
	assert.Equal(t, "1 regression, 2 better, 16 ok (tolerance 2%)", c.Summary())
}

func TestCompareMissing(t *testing.T) {
	base := cmpReport(
		cmpTrace("a", cmpResult("bfc"), cmpResult("arena")),
		cmpTrace("gone", cmpResult("bfc")),
	)
	now := cmpReport(
		cmpTrace("a", cmpResult("bfc"), cmpResult("naive")),
		cmpTrace("new", cmpResult("bfc"), cmpResult("naive")),
	)
	c := Compare(base, now, CompareOptions{Tolerance: 0.02, BaselineName: "ci/baseline.json"})
	require.Len(t, c.Traces, 2, "the run's traces, in its order")

	a := c.Traces[0]
	assert.True(t, a.HasBaseline)
	assert.Equal(t, []string{"naive"}, a.NoBaseline)
	assert.Equal(t, []string{"arena"}, a.NotReplayed)
	for _, r := range a.Rows {
		assert.Equal(t, "bfc", r.Allocator, "rows only for allocators in both")
	}

	n := c.Traces[1]
	assert.Equal(t, "new", n.Name)
	assert.False(t, n.HasBaseline)
	assert.Empty(t, n.Rows)
	assert.Equal(t, []string{"bfc", "naive"}, n.NoBaseline)

	assert.Equal(t, []string{"gone"}, c.NotReplayed)
	assert.Equal(t, 1, c.Matched())
	assert.Equal(t, 3, c.NoBaseline())
	assert.Zero(t, c.Count(Regression), "nothing missing is a failure")
	assert.Equal(t, "0 regressions, 0 better, 13 ok, 6 not compared, 3 results without a baseline, "+
		"1 baseline trace not replayed (tolerance 2%)", c.Summary())

	// Nothing in common.
	c = Compare(cmpReport(cmpTrace("x", cmpResult("bfc"))), now, CompareOptions{})
	assert.Zero(t, c.Matched())
	c = Compare(cmpReport(cmpTrace("a", cmpResult("arena"))), now, CompareOptions{})
	assert.Zero(t, c.Matched(), "the trace matches but no allocator does")
}

// Traces are matched by name; where names repeat, by path too.
func TestCompareRepeatedNames(t *testing.T) {
	trace := func(path string, peak uint64) Trace {
		tr := cmpTrace("same", cmpResult("bfc"))
		tr.Path = path
		tr.Results[0].PeakReservedBytes = peak
		return tr
	}
	base := cmpReport(trace("x/t.jsonl", 100), trace("y/t.jsonl", 200))
	now := cmpReport(trace("y/t.jsonl", 200), trace("x/t.jsonl", 100))
	c := Compare(base, now, CompareOptions{Tolerance: 0.02})
	require.Len(t, c.Traces, 2)
	for _, tc := range c.Traces {
		assert.Equal(t, tc.Path, tc.BaselinePath)
	}
	assert.Zero(t, c.Count(Regression)+c.Count(Better), "each matched with the one of its path")

	// Paths that moved: matched in order.
	now = cmpReport(trace("z/t.jsonl", 100), trace("w/t.jsonl", 200))
	c = Compare(base, now, CompareOptions{Tolerance: 0.02})
	assert.Equal(t, "x/t.jsonl", c.Traces[0].BaselinePath)
	assert.Equal(t, "y/t.jsonl", c.Traces[1].BaselinePath)
	assert.Zero(t, c.Count(Regression)+c.Count(Better))
}

func TestCompareWarnings(t *testing.T) {
	base := cmpReport(cmpTrace("t", cmpResult("bfc"), cmpResult("naive")))
	// Read from JSON, the baseline's numbers are float64s.
	base.Traces[0].Results[0].Options = map[string]any{"allow_growth": true, "memory_limit": float64(1 << 30)}
	now := cmpReport(cmpTrace("t", cmpResult("bfc"), cmpResult("naive")))
	c := Compare(base, now, CompareOptions{Tolerance: 0.02})
	assert.Empty(t, c.Traces[0].Warnings, "1<<30 and 1073741824.0 are the same option")

	now.Traces[0].Results[0].Options = map[string]any{"allow_growth": false, "memory_limit": 1 << 30, "gc": true}
	now.Traces[0].Results[0].PeakReservedBytes *= 2
	for i := range now.Traces[0].Results {
		now.Traces[0].Results[i].SpaceOptions = map[string]any{"reserve_cost": "1ms"}
	}
	now.Traces[0].Events++
	now.Traces[0].CapacityBytes *= 2
	c = Compare(base, now, CompareOptions{Tolerance: 0.02})
	assert.Equal(t, []string{
		"the trace differs from the baseline's: 2,001 events with a peak live of 80.00 MiB now, 2,000 events with 80.00 MiB in the baseline",
		"the device differs from the baseline's: a 2.00 GiB virtual device now, a 1.00 GiB virtual device in the baseline",
		`space options differ from the baseline's: reserve_cost "1ms" now, "10us" in the baseline`,
		"bfc: options differ from the baseline's: allow_growth false now, true in the baseline; gc true now, unset in the baseline",
	}, c.Traces[0].Warnings)
	assert.Equal(t, Regression, row(t, c, "t", "bfc", "peak_reserved_bytes").Verdict, "the comparison is still made")
}

func TestCompareRecordedAddresses(t *testing.T) {
	base := cmpReport(cmpTrace("t", cmpResult("bfc")))
	now := cmpReport(cmpTrace("t", cmpResult("bfc")))
	now.Traces[0].Results[0].RecordedAddressMatch = &AddressMatch{Checked: 10, Matched: 8}
	c := Compare(base, now, CompareOptions{Tolerance: 0.02})
	r := row(t, c, "t", "bfc", "recorded_address_match.matched")
	assert.Equal(t, NoBaseline, r.Verdict)
	assert.Equal(t, 8.0, r.Now)

	base.Traces[0].Results[0].RecordedAddressMatch = &AddressMatch{Checked: 10, Matched: 10}
	c = Compare(base, now, CompareOptions{Tolerance: 0.02})
	r = row(t, c, "t", "bfc", "recorded_address_match.matched")
	assert.Equal(t, Regression, r.Verdict, "fewer matches is worse")
	assert.InDelta(t, -0.2, r.Change, 1e-9)
}

func TestCompareRecordedBlocks(t *testing.T) {
	base := cmpReport(cmpTrace("t", cmpResult("bfc")))
	now := cmpReport(cmpTrace("t", cmpResult("bfc")))
	now.Traces[0].Results[0].RecordedBlockMatch = &AddressMatch{Checked: 10, Matched: 8}
	c := Compare(base, now, CompareOptions{Tolerance: 0.02})
	r := row(t, c, "t", "bfc", "recorded_block_match.matched")
	assert.Equal(t, NoBaseline, r.Verdict)
	assert.Equal(t, 8.0, r.Now)

	base.Traces[0].Results[0].RecordedBlockMatch = &AddressMatch{Checked: 10, Matched: 10}
	c = Compare(base, now, CompareOptions{Tolerance: 0.02})
	r = row(t, c, "t", "bfc", "recorded_block_match.matched")
	assert.Equal(t, Regression, r.Verdict, "fewer matches is worse")
	assert.InDelta(t, -0.2, r.Change, 1e-9)

	now.Traces[0].Results[0].RecordedBlockMatch = &AddressMatch{Checked: 10, Matched: 10}
	c = Compare(base, now, CompareOptions{Tolerance: 0.02})
	assert.Equal(t, OK, row(t, c, "t", "bfc", "recorded_block_match.matched").Verdict)
}

// A report compared with itself read back from report.json: all ok, no
// warnings, whatever JSON did to the numbers' types.
func TestCompareJSONRoundTrip(t *testing.T) {
	rep := goldenReport(t)
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, rep))
	var base Report
	require.NoError(t, json.Unmarshal(buf.Bytes(), &base))
	c := Compare(base, rep, CompareOptions{Tolerance: 0})
	require.Len(t, c.Traces, 1)
	assert.Empty(t, c.Traces[0].Warnings)
	assert.Equal(t, 4, c.Matched())
	assert.Zero(t, c.Count(Regression))
	assert.Zero(t, c.Count(Better))
	assert.Equal(t, 4*13, c.Count(OK))
}

func TestParseTolerance(t *testing.T) {
	for in, want := range map[string]float64{
		"2%": 0.02, "0.5%": 0.005, "0.02": 0.02, "0": 0, "0%": 0, " 5 % ": 0.05, "150%": 1.5, ".1": 0.1,
	} {
		got, err := ParseTolerance(in)
		require.NoError(t, err, in)
		assert.InDelta(t, want, got, 1e-12, in)
	}
	for in, msg := range map[string]string{
		"":     `bad tolerance "": want a percentage such as 2% or 0.5%, or a fraction such as 0.02`,
		"%":    `bad tolerance "%": want a percentage`,
		"two%": `bad tolerance "two%": want a percentage`,
		"NaN":  `bad tolerance "NaN": want a percentage`,
		"-1%":  `bad tolerance "-1%": it cannot be negative`,
		"2":    `bad tolerance "2": a number without % is a fraction (0.02 is 2%); write 2% for 2 percent`,
		"1":    `a number without % is a fraction`,
	} {
		_, err := ParseTolerance(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), msg, in)
	}
}

func TestFormatChangeAndTolerance(t *testing.T) {
	for in, want := range map[float64]string{
		0: "0", 0.103: "+10.3%", -0.02: "-2.0%", 0.0001: "+<0.1%", -0.0004: "-<0.1%", 1.5: "+150.0%",
		math.Inf(1): "+inf", math.Inf(-1): "-inf",
	} {
		assert.Equal(t, want, FormatChange(in), "%v", in)
	}
	for in, want := range map[float64]string{0.02: "2%", 0.005: "0.5%", 0: "0%", 0.001: "0.1%", 1.5: "150%"} {
		assert.Equal(t, want, FormatTolerance(in), "%v", in)
	}
}

// The Markdown rendering, as a golden file: rerun with -rewrite and review
// the diff.
func TestComparisonMarkdownGolden(t *testing.T) {
	bfc := cmpResult("bfc")
	bfc.Options = map[string]any{"allow_growth": false, "memory_limit": 1 << 30}
	base := cmpReport(
		cmpTrace("train", bfc, cmpResult("arena")),
		cmpTrace("old | trace", cmpResult("bfc")),
	)
	now := cmpReport(
		cmpTrace("train", cmpResult("bfc"), cmpResult("naive")),
		cmpTrace("infer", cmpResult("bfc")),
	)
	r := &now.Traces[0].Results[0]
	r.Fragmentation = 0.25
	r.FailedAllocs = 2
	r.PeakInUseBytes = 80 << 20
	r.LatencyNs.Alloc.P50 = 120

	c := Compare(base, now, CompareOptions{Tolerance: 0.02, BaselineName: "ci/baseline.json"})
	var buf bytes.Buffer
	require.NoError(t, WriteComparisonMarkdown(&buf, c))
	md := buf.String()
	assert.Contains(t, md, "**2 regressions**, 1 better, 10 ok, 6 not compared, 2 results without a baseline, 1 baseline trace not replayed (tolerance 2%) against `ci/baseline.json`.")
	assert.Contains(t, md, "| bfc | `fragmentation` | 20.0% | 25.0% | **+25.0%** | **regression** |")
	assert.Contains(t, md, "| bfc | `failed_allocs` | 0 | 2 | **+inf** | **regression** |")
	assert.Contains(t, md, "| bfc | `peak_in_use_bytes` | 90.00 MiB | 80.00 MiB | -11.1% | better |")
	assert.Contains(t, md, "| bfc | `latency_ns.alloc.p50` | 100ns | 120ns | +20.0% | not compared |")
	assert.Contains(t, md, "- **warning**: bfc: options differ from the baseline's: allow\\_growth true now, false in the baseline")
	assert.Contains(t, md, "- naive: no baseline")
	assert.Contains(t, md, "- arena: not replayed")
	assert.Contains(t, md, "`traces/infer.jsonl`: no baseline")
	assert.Contains(t, md, "- old \\| trace\n")
	assert.Equal(t, []string{"train/bfc fragmentation +25.0%", "train/bfc failed_allocs +inf"}, c.Regressions())

	path := filepath.Join("testdata", "compare.markdown")
	if *rewrite {
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), md, "rerun with -rewrite and review the diff")
}
