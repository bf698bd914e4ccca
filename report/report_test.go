package report

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata/")

// goldenReport replays a bundled trace and returns its report without timings.
func goldenReport(t *testing.T) Report {
	t.Helper()
	f, err := os.Open("../traces/fragmenter.jsonl")
	require.NoError(t, err)
	defer f.Close()
	r, err := trace.NewReader(f, "traces/fragmenter.jsonl", trace.TrackCallSites())
	require.NoError(t, err)
	var specs []sim.AllocatorSpec
	for _, n := range allocators.DefaultNames {
		specs = append(specs, sim.AllocatorSpec{Name: n})
	}
	const capacity = 32 << 20 // small enough that bfc and arena run out
	res, err := sim.Replay(context.Background(), r, sim.Config{
		Allocators: specs,
		Space:      allocators.SpaceConfig{Kind: "virtual", Capacity: capacity},
	})
	require.NoError(t, err)
	return WithoutTimings(Build([]TraceRun{{
		Name: r.Header().Name, Path: "traces/fragmenter.jsonl", Header: r.Header(), Summary: r.Summary(),
		CapacityBytes: capacity, Space: "virtual", Results: res,
		CallSites: r.PeakCallSites(), Stacks: r.Stacks(),
	}}))
}

func TestGolden(t *testing.T) {
	rep := goldenReport(t)
	for _, format := range Formats {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, Render(&buf, rep, format))
			path := filepath.Join("testdata", "fragmenter."+format)
			if *rewrite {
				require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(want), buf.String(), "rerun with -rewrite and review the diff")
		})
	}
}

func TestJSONShape(t *testing.T) {
	rep := goldenReport(t)
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, rep))
	var back Report
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	require.Len(t, back.Traces, 1)
	arena := back.Traces[0].Results[1]
	assert.Equal(t, "arena", arena.Allocator)
	require.NotNil(t, arena.FirstOOMEvent, "the fragmenter outgrows a 32 MiB arena")
	assert.Positive(t, arena.FailedAllocs)
	assert.Nil(t, back.Traces[0].Results[2].FirstOOMEvent, "aligned fits")
	assert.Nil(t, back.Traces[0].Results[3].FirstOOMEvent, "naive fits: the default device maps pages, so its own addresses cannot fragment")

	tr := back.Traces[0]
	var sum uint64
	for _, c := range tr.PeakCallSites {
		sum += c.Bytes
	}
	require.NotEmpty(t, tr.PeakCallSites)
	assert.Equal(t, tr.PeakLiveBytes, sum, "peak_call_sites add up to peak_live_bytes")
	require.NotNil(t, arena.OOMExplained)
	assert.Equal(t, VerdictPolicy, arena.OOMExplained.Verdict, "an arena reuses no freed range")
	for _, r := range tr.Results {
		h := r.ReservedAtPeak
		require.NotNil(t, h, r.Allocator)
		assert.Equal(t, r.PeakReservedBytes, h.ReservedBytes, r.Allocator)
		assert.Equal(t, h.ReservedBytes, h.InUseBytes+h.CachedFreeBytes, r.Allocator)
	}
}

func TestCallSitesTopAndRest(t *testing.T) {
	var sites []trace.SiteBytes
	for i := range 15 {
		sites = append(sites, trace.SiteBytes{Tag: fmt.Sprintf("site%02d", i), Bytes: uint64(100 + i), Count: 1})
	}
	sites = append(sites, trace.SiteBytes{Tag: "site00", Bytes: 1000, Count: 2}) // the same call site again: merged
	got := callSites(sites, nil, trace.FrameRule{}, 10)
	require.Len(t, got, 11)
	assert.Equal(t, CallSite{CallSite: "site00", Bytes: 1100, Count: 3}, got[0])
	assert.Equal(t, "site14", got[1].CallSite)
	assert.Equal(t, CallSite{CallSite: "(5 other call sites)", Bytes: 101 + 102 + 103 + 104 + 105, Count: 5}, got[10])
}

func TestRenderUnknownFormat(t *testing.T) {
	err := Render(&bytes.Buffer{}, Report{}, "yaml")
	assert.EqualError(t, err, `unknown format "yaml" (want one of table, json, markdown, csv)`)
}

func TestFormatting(t *testing.T) {
	// TensorFlow's HumanReadableNumBytes conventions, with a space.
	for n, want := range map[uint64]string{
		0: "0 B", 512: "512 B", 1023: "1023 B", 1024: "1.0 KiB", 24064: "23.5 KiB",
		802160640: "765.00 MiB", 2319282339: "2.16 GiB", 80 << 30: "80.00 GiB", 3 << 40: "3.00 TiB",
	} {
		assert.Equal(t, want, Bytes(n), "%d", n)
	}
	assert.Equal(t, "43.9%", Percent(0.4389))
	assert.Equal(t, "850ns", Nanos(850))
	assert.Equal(t, "1.5µs", Nanos(1500))
	assert.Equal(t, "2.1ms", Seconds(0.0021))
	assert.Equal(t, "75.16s", Seconds(75.16))
	assert.Equal(t, "3.44M/s", Rate(3_440_000))
	assert.Equal(t, "850k/s", Rate(850_000))
	assert.Equal(t, "12/s", Rate(12))
	assert.Equal(t, "1,234,567", Count(1234567))
	assert.Equal(t, "999", Count(999))
	assert.Equal(t, "-1,000", Count(-1000))
}

// Names and paths come from users: Markdown keeps them on one line, literal.
func TestMarkdownEscaping(t *testing.T) {
	rep := Report{Version: 1, Traces: []Trace{{
		Name: "bad | `x`\nnl *b* <i>", Path: "dir/we`ird.jsonl", SkippedEvents: 25,
		SkippedErrors: []string{"t.jsonl:1: size_x is negative"},
		Results:       []Result{{Allocator: "naive", Options: map[string]any{}, AllocatorStats: map[string]int64{}}},
	}}}
	var buf bytes.Buffer
	require.NoError(t, WriteMarkdown(&buf, rep))
	md := buf.String()
	assert.Contains(t, md, "\n## bad \\| \\`x\\` nl \\*b\\* &lt;i&gt;\n")
	assert.Contains(t, md, "``"+" dir/we`ird.jsonl "+"``")
	assert.Contains(t, md, "- skipped: t.jsonl:1: size\\_x is negative\n")
	assert.Contains(t, md, "- ... and 24 more invalid events skipped\n")
	assert.Contains(t, md, "25 invalid events skipped")
}

// A replay of a recording says which options it took from the recording and
// how much of the recording it reproduced, in every rendering.
func TestRecordingNotes(t *testing.T) {
	run := TraceRun{Name: "rec", Path: "rec.jsonl", CapacityBytes: 1 << 30, Space: "virtual", Results: []sim.Result{{
		Allocator: "pytorch", Options: map[string]any{"expandable_segments": true, "max_split_size_mb": "unlimited"},
		OptionsFromRecording: []string{"expandable_segments", "max_split_size_mb"},
		AddrChecked:          199, AddrMatched: 199, RecordedOOMs: 1, OOMsMatched: 1,
		BlockChecked: 199, BlockMatched: 190,
		FailedAllocs: 1, FirstOOMEvent: 7, FirstOOMLine: 9, OKAllocs: 199,
	}}}
	rep := WithoutTimings(Build([]TraceRun{run}))
	r := rep.Traces[0].Results[0]
	assert.Equal(t, []string{"expandable_segments", "max_split_size_mb"}, r.OptionsFromRecording)
	assert.Equal(t, &AddressMatch{Checked: 1, Matched: 1}, r.RecordedOOMMatch)
	assert.Equal(t, &AddressMatch{Checked: 199, Matched: 190}, r.RecordedBlockMatch)

	var table, md bytes.Buffer
	require.NoError(t, WriteTable(&table, rep))
	require.NoError(t, WriteMarkdown(&md, rep))
	assert.Contains(t, table.String(), "  pytorch: as recorded, expandable_segments=true max_split_size_mb=unlimited (--set pytorch.KEY=VALUE for a what-if)\n")
	assert.Contains(t, md.String(), "- pytorch: as recorded, expandable\\_segments=true max\\_split\\_size\\_mb=unlimited (--set pytorch.KEY=VALUE for a what-if)\n")
	for _, out := range []string{table.String(), md.String()} {
		assert.Contains(t, out, "pytorch: reproduced 199 of 199 recorded addresses, 190 of 199 recorded block sizes and 1 of 1 recorded out-of-memory failures\n")
	}
	var js bytes.Buffer
	require.NoError(t, WriteJSON(&js, rep))
	assert.Contains(t, js.String(), `"options_from_recording": [`)
	assert.Contains(t, js.String(), `"recorded_oom_match": {`)
	assert.Contains(t, js.String(), `"recorded_block_match": {
            "checked": 199,
            "matched": 190
          }`)

	// Without recorded addresses or block sizes, neither is counted nor
	// mentioned; two checks still read "A and B".
	run.Results[0].AddrChecked, run.Results[0].AddrMatched = 0, 0
	rep = WithoutTimings(Build([]TraceRun{run}))
	assert.Nil(t, rep.Traces[0].Results[0].RecordedAddressMatch)
	table.Reset()
	require.NoError(t, WriteTable(&table, rep))
	assert.Contains(t, table.String(), "pytorch: reproduced 190 of 199 recorded block sizes and 1 of 1 recorded out-of-memory failures\n")
	run.Results[0].BlockChecked, run.Results[0].BlockMatched = 0, 0
	rep = WithoutTimings(Build([]TraceRun{run}))
	assert.Nil(t, rep.Traces[0].Results[0].RecordedBlockMatch)
	js.Reset()
	require.NoError(t, WriteJSON(&js, rep))
	assert.NotContains(t, js.String(), "recorded_block_match")
}
