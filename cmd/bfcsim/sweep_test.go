package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/report"
	"github.com/bfcsim/bfcsim/search"
)

// sweepArgs is a small sweep of two bundled traces: 2 × 2 grid points.
var sweepArgs = []string{
	"sweep", bundled + "cnn-infer.jsonl", bundled + "nodups.jsonl", "-a", "bfc,arena",
	"--grid", "bfc.allow_growth=true,false", "--grid", "bfc.fragmentation_fraction=0,0.01",
}

// sweepJSON runs a command that prints a sweep report as JSON and returns
// it, its timings zeroed, written again.
func sweepJSON(t *testing.T, args ...string) (report.Sweep, string) {
	t.Helper()
	code, out, stderr := cli(t, "", append(args, "-f", "json")...)
	require.Equal(t, 0, code, stderr)
	return readSweep(t, []byte(out))
}

func readSweep(t *testing.T, data []byte) (report.Sweep, string) {
	t.Helper()
	var s report.Sweep
	require.NoError(t, json.Unmarshal(data, &s))
	s = report.SweepWithoutTimings(s)
	var buf bytes.Buffer
	require.NoError(t, report.WriteSweepJSON(&buf, s))
	return s, buf.String()
}

func TestSweepOrderAndDeterminism(t *testing.T) {
	s, one := sweepJSON(t, append(sweepArgs, "-j", "1")...)
	_, four := sweepJSON(t, append(sweepArgs, "-j", "4")...)
	assert.Equal(t, one, four, "the report does not depend on the parallelism")

	info := s.Sweep
	assert.Equal(t, []string{bundled + "cnn-infer.jsonl", bundled + "nodups.jsonl"}, info.Paths)
	assert.Equal(t, []string{"bfc", "arena"}, info.Allocators)
	assert.Equal(t, 8, info.Jobs)
	assert.Nil(t, info.Shard)
	require.Len(t, s.Traces, 8)
	points := []map[string]string{
		{"bfc.allow_growth": "true", "bfc.fragmentation_fraction": "0"},
		{"bfc.allow_growth": "true", "bfc.fragmentation_fraction": "0.01"},
		{"bfc.allow_growth": "false", "bfc.fragmentation_fraction": "0"},
		{"bfc.allow_growth": "false", "bfc.fragmentation_fraction": "0.01"},
	}
	for k, tr := range s.Traces {
		assert.Equal(t, k, tr.Job)
		assert.Equal(t, []string{"cnn-infer", "nodups"}[k/4], tr.Name, "trace order, then point order")
		assert.Equal(t, points[k%4], tr.Point, "job %d", k)
		require.Len(t, tr.Results, 2)
		bfc := tr.Results[0]
		assert.Equal(t, "bfc", bfc.Allocator)
		assert.Equal(t, points[k%4]["bfc.allow_growth"] == "true", bfc.Options["allow_growth"], "job %d: the point's options reach bfc", k)
		assert.Equal(t, map[string]string{"0": "0", "0.01": "0.01"}[points[k%4]["bfc.fragmentation_fraction"]],
			fmt.Sprint(bfc.Options["fragmentation_fraction"]))
		assert.Equal(t, "arena", tr.Results[1].Allocator)
	}
	// allow_growth=false reserves the whole device up front.
	assert.Equal(t, uint64(80<<30), s.Traces[2].Results[0].PeakReservedBytes)
	assert.Less(t, s.Traces[0].Results[0].PeakReservedBytes, uint64(1<<30))
}

func TestSweepJSONKeys(t *testing.T) {
	code, out, stderr := cli(t, "", append(sweepArgs, "-f", "json", "-j", "2")...)
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr, "no progress bar outside a terminal")
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	assert.Equal(t, 1.0, m["bfcsim_report"])
	for _, k := range []string{"paths", "allocators", "axes", "sets", "space", "jobs"} {
		assert.Contains(t, m["sweep"], k)
	}
	for _, tr := range m["traces"].([]any) {
		tr := tr.(map[string]any)
		for _, k := range []string{"job", "point", "name", "path", "events", "allocs", "frees", "peak_live_bytes", "total_alloc_bytes", "results"} {
			assert.Contains(t, tr, k)
		}
		for _, r := range tr["results"].([]any) {
			for _, k := range specKeys {
				assert.Contains(t, r, k)
			}
		}
	}
}

func TestSweepShardsMerge(t *testing.T) {
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole")
	code, _, stderr := cli(t, "", append(sweepArgs, "-o", whole, "-q")...)
	require.Equal(t, 0, code, stderr)
	data, err := os.ReadFile(filepath.Join(whole, "report.json"))
	require.NoError(t, err)
	_, want := readSweep(t, data)

	var shards []string
	for i := 1; i <= 3; i++ {
		out := filepath.Join(dir, fmt.Sprintf("shard-%d", i))
		code, stdout, stderr := cli(t, "", append(sweepArgs, "--shard", fmt.Sprintf("%d/3", i), "-o", out, "-j", "2")...)
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, fmt.Sprintf("Shard %d/3: ", i))
		shards = append(shards, filepath.Join(out, "report.json"))
	}
	data, err = os.ReadFile(shards[1])
	require.NoError(t, err)
	s2, _ := readSweep(t, data)
	assert.Equal(t, &search.Shard{Index: 2, Count: 3, Jobs: []int{1, 4, 7}}, s2.Sweep.Shard)
	require.Len(t, s2.Traces, 3)
	for i, k := range []int{1, 4, 7} {
		assert.Equal(t, k, s2.Traces[i].Job)
	}

	merged := filepath.Join(dir, "merged", "report.json")
	mergedDir := filepath.Join(dir, "merged-dir")
	code, stdout, stderr := cli(t, "", append([]string{"merge", "-o", merged, "--dir", mergedDir, "-f", "markdown"}, shards...)...)
	require.Equal(t, 0, code, stderr)
	assert.True(t, strings.HasPrefix(stdout, "# bfcsim sweep\n"), stdout)
	data, err = os.ReadFile(merged)
	require.NoError(t, err)
	_, got := readSweep(t, data)
	assert.Equal(t, want, got, "3 shards merged are the whole sweep, apart from timings")
	data, err = os.ReadFile(filepath.Join(mergedDir, "report.json"))
	require.NoError(t, err)
	_, got = readSweep(t, data)
	assert.Equal(t, want, got)
	md1, err := os.ReadFile(filepath.Join(whole, "report.md"))
	require.NoError(t, err)
	md2, err := os.ReadFile(filepath.Join(mergedDir, "report.md"))
	require.NoError(t, err)
	assert.Equal(t, string(md1), string(md2), "no timings in the Markdown")

	// A shard missing: an error naming it, or with --allow-partial a report that lists its jobs.
	assertUsageError(t, []string{"merge", shards[0], shards[2]},
		"3 of the sweep's 8 jobs are missing: shard 2/3 not given (--allow-partial merges what there is)")
	assertUsageError(t, []string{"merge", shards[0], shards[1], shards[1]},
		"shard 2/3 is given twice: "+shards[1]+" and "+shards[1])
	partial, _ := sweepJSON(t, "merge", shards[0], shards[2], "--allow-partial")
	assert.Equal(t, []int{1, 4, 7}, partial.Sweep.Missing)
	assert.Len(t, partial.Traces, 5)
	code, stdout, stderr = cli(t, "", "merge", shards[0], shards[2], "--allow-partial")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "Partial: 3 jobs of 8 missing")
}

func TestSweepOutDir(t *testing.T) {
	out := filepath.Join(t.TempDir(), "nested", "out")
	code, stdout, stderr := cli(t, "", "sweep", bundled+"nodups.jsonl", "-a", "bfc", "--grid", "bfc.memory_limit=256KiB,1MiB,4MiB",
		"-o", out, "-f", "markdown", "--metric", "fragmentation")
	require.Equal(t, 0, code, stderr)
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"report.json", "report.md", "nodups.sweep.fragmentation.png", "nodups.sweep.fragmentation.svg"}, names,
		"every output, and no temporary files left behind")
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	require.NoError(t, err)
	assert.Equal(t, stdout, string(md))
	assert.Contains(t, stdout, "the lowest `fragmentation` without failed allocations")
	assert.Contains(t, stdout, "| **bfc** | **1MiB** |")
}

func TestSweepTable(t *testing.T) {
	code, out, stderr := cli(t, "", "sweep", bundled+"nodups.jsonl", "-a", "bfc,arena", "--grid", "bfc.memory_limit=256KiB,1MiB")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 9, out)
	assert.Equal(t, "sweep: 1 trace × 2 grid points = 2 jobs, each replaying bfc, arena; grid bfc.memory_limit = 256KiB, 1MiB", lines[0])
	assert.Regexp(t, `^\s+ALLOCATOR\s+bfc.memory_limit\s+PEAK RESERVED\s+×LB\s+FRAG\s+FAILED\s+DEVICE CALLS$`, lines[3])
	assert.Regexp(t, `^\s+bfc\s+256KiB\s+256.0 KiB\s+0.50×\s+31.9%\s+426\s+1$`, lines[4])
	assert.Regexp(t, `^\*\s+bfc\s+1MiB\s+1.00 MiB`, lines[5])
	assert.Equal(t, "* best (the lowest peak_reserved_bytes without failed allocations): bfc at bfc.memory_limit=1MiB: peak_reserved_bytes 1.00 MiB", lines[8])
}

// An allocator named by --grid joins the default allocators, as with --set;
// no --grid is one point.
func TestSweepAllocators(t *testing.T) {
	s, _ := sweepJSON(t, "sweep", bundled+"nodups.jsonl", "--grid", "pytorch.max_split_size_mb=64,unlimited")
	assert.Equal(t, []string{"bfc", "arena", "aligned", "naive", "pytorch"}, s.Sweep.Allocators)
	require.Len(t, s.Traces, 2)
	assert.Equal(t, "pytorch", s.Traces[1].Results[4].Allocator)

	s, _ = sweepJSON(t, "sweep", bundled+"nodups.jsonl", bundled+"cnn-infer.jsonl", "-a", "naive", "--set", "space.reserve_cost=1ms")
	assert.Empty(t, s.Sweep.Axes)
	assert.Equal(t, []string{"space.reserve_cost=1ms"}, s.Sweep.Sets)
	require.Len(t, s.Traces, 2)
	assert.Equal(t, map[string]string{}, s.Traces[0].Point)
	assert.Equal(t, "1ms", s.Traces[0].Results[0].SpaceOptions["reserve_cost"])

	s, _ = sweepJSON(t, "sweep", bundled+"nodups.jsonl", "-a", "naive", "--grid", "space.reserve_cost=1ms,2ms")
	require.Len(t, s.Traces, 2)
	assert.Equal(t, "2ms", s.Traces[1].Results[0].SpaceOptions["reserve_cost"], "a space axis reaches the space")
}

func TestSweepUsageErrors(t *testing.T) {
	tr := bundled + "nodups.jsonl"
	// A trace the replay would reject at line 3: an option error must come first.
	bad := writeTrace(t, `{"op":"alloc","id":1,"size":4096}`, `{"op":"alloc","id":2,"size":100}`, `{"op":"free","id":77}`)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"sweep"}, "sweep needs at least one trace file"},
		{[]string{"sweep", tr, "--grid", "bfc.allow_growth"}, `--grid "bfc.allow_growth": want NAME.KEY=V1,V2,..., e.g. bfc.allow_growth=true,false`},
		{[]string{"sweep", tr, "--grid", "bfc.allow_growth="}, `--grid "bfc.allow_growth=": no values after '='`},
		{[]string{"sweep", tr, "--grid", "bfc.allow_growth=true,,false"}, `--grid "bfc.allow_growth=true,,false": value 2 is empty`},
		{[]string{"sweep", tr, "--grid", "nope.x=1,2"}, `--grid nope.x=1,2: unknown allocator "nope"`},
		{[]string{"sweep", bad, "--grid", "bfc.nope=1,2"}, `grid point bfc.nope=1: bfc: bad option: bfc has no option "nope"`},
		{[]string{"sweep", bad, "--grid", "bfc.fragmentation_fraction=0,2"}, `grid point bfc.fragmentation_fraction=2: bfc: bad option: bfc.fragmentation_fraction="2": want a fraction between 0 and 1`},
		{[]string{"sweep", bad, "--grid", "space.reserve_cost=1ms,-1ms"}, `grid point space.reserve_cost=-1ms: bad option: space.reserve_cost="-1ms"`},
		{[]string{"sweep", tr, "-a", "bfc", "--grid", "arena.align=8,16"}, "--grid arena.align=8,16: arena is not being replayed (-a bfc)"},
		{[]string{"sweep", tr, "--grid", "bfc.allow_growth=true", "--grid", "bfc.allow_growth=false"}, "bfc.allow_growth has two axes; list its values in one --grid"},
		{[]string{"sweep", tr, "--set", "bfc.allow_growth=true", "--grid", "bfc.allow_growth=false,true"}, "bfc.allow_growth is also set by --set bfc.allow_growth=true"},
		{[]string{"sweep", tr, "--shard", "0/3"}, `--shard "0/3": want i/n with 1 ≤ i ≤ n`},
		{[]string{"sweep", tr, "--shard", "4/3"}, `--shard "4/3": want i/n with 1 ≤ i ≤ n`},
		{[]string{"sweep", tr, "--shard", "two"}, `--shard "two": want i/n`},
		{[]string{"sweep", tr, "-j", "0"}, "-j 0: want at least 1 job at a time"},
		{[]string{"sweep", "-", tr}, "- (standard input) can be read only once"},
		{[]string{"sweep", tr, "-f", "csv"}, `unknown format "csv" (want one of table, json, markdown)`},
		{[]string{"sweep", tr, "--metric", "speed"}, `--metric: unknown metric "speed"`},
		{[]string{"sweep", tr, "--bogus"}, "unknown flag: --bogus (see 'bfcsim sweep --help')"},
		{[]string{"sweep", tr, "--capacity", "0"}, "--capacity must be more than 0 bytes"},
		{[]string{"sweep", "missing.jsonl"}, "open missing.jsonl: no such file or directory"},
		{[]string{"sweep", bad}, bad + ":3: free of id 77 that is not live"},
		{[]string{"merge"}, "merge needs the report.json of at least one shard"},
		{[]string{"merge", "missing.json"}, "open missing.json: no such file or directory"},
		{[]string{"merge", tr}, "is not the report.json of a sweep"},
	} {
		assertUsageError(t, c.args, c.msg)
	}
}

func TestMergeMismatch(t *testing.T) {
	dir := t.TempDir()
	small := []string{"sweep", bundled + "nodups.jsonl", "-a", "bfc", "-q"}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"a", []string{"--grid", "bfc.memory_limit=1MiB,2MiB", "--shard", "1/2"}},
		{"b", []string{"--grid", "bfc.memory_limit=1MiB,4MiB", "--shard", "2/2"}},
		{"c", []string{"--grid", "bfc.memory_limit=1MiB,2MiB", "--shard", "2/3"}},
	} {
		code, _, stderr := cli(t, "", append(append(small, c.args...), "-o", filepath.Join(dir, c.name))...)
		require.Equal(t, 0, code, stderr)
	}
	a, b, c := filepath.Join(dir, "a", "report.json"), filepath.Join(dir, "b", "report.json"), filepath.Join(dir, "c", "report.json")
	assertUsageError(t, []string{"merge", a, b}, a+" and "+b+" are not parts of one sweep: the grids differ (bfc.memory_limit=1MiB,2MiB, and bfc.memory_limit=1MiB,4MiB)")
	assertUsageError(t, []string{"merge", a, c}, "is shard 1/2 and "+c+" shard 2/3: the shards of one sweep split it alike")

	// A replay's report is not a sweep's.
	rep := filepath.Join(dir, "replay")
	code, _, stderr := cli(t, "", "replay", bundled+"nodups.jsonl", "-a", "naive", "-o", rep)
	require.Equal(t, 0, code, stderr)
	assertUsageError(t, []string{"merge", a, filepath.Join(rep, "report.json")},
		`no "sweep" key: a report of 'bfcsim replay'?`)
	// Writing over an input is refused.
	assertUsageError(t, []string{"merge", a, "-o", a}, "refusing to overwrite the input "+a+" with an output")
}

// On a terminal a bar counts the jobs, on standard error, and is cleared.
func TestSweepProgress(t *testing.T) {
	var out, errOut bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, progress: true}
	code := run(context.Background(), e, append(sweepArgs, "-j", "3", "-f", "json"))
	require.Equal(t, 0, code, errOut.String())
	assert.Contains(t, errOut.String(), "sweep")
	assert.Contains(t, errOut.String(), "/8)", "jobs done of 8")
	_, got := readSweep(t, out.Bytes())
	_, want := sweepJSON(t, sweepArgs...)
	assert.Equal(t, want, got, "the bar does not touch the report")

	errOut.Reset()
	code = run(context.Background(), e, append(sweepArgs, "-q"))
	require.Equal(t, 0, code)
	assert.Empty(t, errOut.String(), "-q: no bar")
}

// A trace that fails fails the sweep with its own error, whichever job meets it first.
func TestSweepJobError(t *testing.T) {
	bad := writeTrace(t, `{"op":"alloc","id":1,"size":4096}`, `{"op":"free","id":77}`)
	assertUsageError(t, []string{"sweep", bundled + "nodups.jsonl", bad, "--grid", "bfc.allow_growth=true,false", "-j", "4"},
		bad+":2: free of id 77 that is not live")
	out := filepath.Join(t.TempDir(), "out")
	assertUsageError(t, []string{"sweep", bad, "--grid", "bfc.allow_growth=true,false", "-o", out}, "free of id 77")
	assert.NoDirExists(t, out, "a failed sweep writes no report")
}
