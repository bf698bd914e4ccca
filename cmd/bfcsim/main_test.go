package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/trace"
)

// cli runs one command line with a fresh root command and returns the exit
// code, standard output and standard error.
func cli(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut}
	code := run(context.Background(), e, args)
	return code, out.String(), errOut.String()
}

const bundled = "../../traces/"

func TestReplayTable(t *testing.T) {
	code, out, stderr := cli(t, "", "replay", bundled+"transformer-train.jsonl")
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr, "no progress bar outside a terminal")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.GreaterOrEqual(t, len(lines), 6)
	assert.True(t, strings.HasPrefix(lines[0], "transformer-train: 7,545 events"), lines[0])
	assert.Regexp(t, `^ALLOCATOR\s+PEAK RESERVED\s+×LB\s+PEAK IN USE\s+FRAG`, lines[1])
	for i, name := range []string{"bfc", "arena", "aligned", "naive"} {
		assert.Regexp(t, "^"+name+`\s+\d+\.\d\d [KMGT]iB\s`, lines[2+i])
	}
}

// specKeys are the result keys of report.json (docs/metrics.md).
var specKeys = []string{
	"allocator", "options", "ok_allocs", "failed_allocs", "first_oom_event",
	"peak_reserved_bytes", "peak_in_use_bytes", "peak_live_bytes", "final_reserved_bytes",
	"fragmentation", "utilization", "internal_waste_at_peak_bytes", "tf_fragmentation",
	"device_reserve_calls", "device_release_calls", "modeled_device_seconds", "latency_ns",
	"replay_seconds", "events_per_second", "allocator_stats",
}

// assertUsageError runs a command line that must fail with exit status 2,
// nothing on standard output and one line on standard error, naming msg.
func assertUsageError(t *testing.T, args []string, msg string) {
	t.Helper()
	code, stdout, stderr := cli(t, "", args...)
	assert.Equal(t, 2, code, "%v", args)
	assert.Empty(t, stdout, "%v", args)
	assert.True(t, strings.HasPrefix(stderr, "bfcsim: "), "%v: %q", args, stderr)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), "%v: one line: %q", args, stderr)
	assert.Contains(t, stderr, msg, "%v", args)
}

func replayJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, stderr := cli(t, "", append([]string{"replay", "-f", "json"}, args...)...)
	require.Equal(t, 0, code, stderr)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	return rep
}

func TestReplayJSONKeysAndConsistency(t *testing.T) {
	rep := replayJSON(t, bundled+"transformer-train.jsonl", bundled+"cnn-infer.jsonl")
	assert.Equal(t, 1.0, rep["bfcsim_report"])
	traces := rep["traces"].([]any)
	require.Len(t, traces, 2)
	for _, tr := range traces {
		tr := tr.(map[string]any)
		for _, k := range []string{"name", "path", "events", "allocs", "frees", "peak_live_bytes", "total_alloc_bytes", "results"} {
			assert.Contains(t, tr, k)
		}
		results := tr["results"].([]any)
		require.Len(t, results, 4)
		for _, r := range results {
			r := r.(map[string]any)
			name := r["allocator"].(string)
			for _, k := range specKeys {
				assert.Contains(t, r, k, "%s lacks %s", name, k)
			}
			assert.NotContains(t, r, "recorded_address_match", "the traces carry no addr")
			assert.NotContains(t, r, "recorded_block_match", "the traces carry no block")
			num := func(k string) float64 { return r[k].(float64) }
			live, reserved := num("peak_live_bytes"), num("peak_reserved_bytes")
			assert.InDelta(t, 1-live/reserved, num("fragmentation"), 1e-9, name)
			assert.InDelta(t, live/reserved, num("utilization"), 1e-9, name)
			assert.InDelta(t, 1, num("fragmentation")+num("utilization"), 1e-9, name)
			assert.Equal(t, tr["peak_live_bytes"], r["peak_live_bytes"], "%s: nothing failed, so live peaks agree", name)
			assert.GreaterOrEqual(t, num("peak_in_use_bytes"), live, name)
			assert.GreaterOrEqual(t, reserved, num("peak_in_use_bytes"), name)
			assert.Equal(t, tr["allocs"], num("ok_allocs")+num("failed_allocs"), name)
			assert.Nil(t, r["first_oom_event"], name)
			assert.InDelta(t, num("events")/num("replay_seconds"), num("events_per_second"), 1e-6*num("events_per_second"), name)
			for _, op := range []string{"alloc", "free"} {
				l := r["latency_ns"].(map[string]any)[op].(map[string]any)
				for _, k := range []string{"p50", "p90", "p99", "p999", "max", "mean"} {
					assert.Contains(t, l, k)
				}
				assert.LessOrEqual(t, l["p50"], l["p90"])
				assert.LessOrEqual(t, l["p90"], l["p99"])
				assert.LessOrEqual(t, l["p99"], l["p999"])
				// HDR percentiles are bucket upper bounds, within 0.1% of the exact max.
				assert.LessOrEqual(t, l["p999"].(float64), l["max"].(float64)*1.001+1)
			}
			tf := r["tf_fragmentation"].(map[string]any)
			assert.LessOrEqual(t, tf["mean"], tf["max"])
		}
	}
}

// The acceptance numbers of TensorFlow's NoDups test, through the CLI.
func TestReplayNoDups(t *testing.T) {
	rep := replayJSON(t, bundled+"nodups.jsonl", "-a", "bfc", "--capacity", "1GiB", "--set", "bfc.allow_growth=false")
	r := rep["traces"].([]any)[0].(map[string]any)["results"].([]any)[0].(map[string]any)
	st := r["allocator_stats"].(map[string]any)
	assert.Equal(t, 1023.0, st["num_allocs"])
	assert.Equal(t, 654336.0, st["peak_bytes_in_use"])
	assert.Equal(t, 1024.0, st["largest_alloc_size"])
	assert.Equal(t, 1.0, st["regions"])
	for _, k := range []string{"bytes_in_use", "bytes_limit", "pool_bytes", "peak_pool_bytes", "largest_free_block_bytes"} {
		assert.Contains(t, st, k)
	}
	assert.Equal(t, false, r["options"].(map[string]any)["allow_growth"])
}

func writeTrace(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	return path
}

// A trace that carries the recorded block sizes gets recorded_block_match:
// bfc rounds 300 bytes up to a 512-byte chunk and 1000 to 1024; a block
// smaller than its request is an error naming its line.
func TestReplayRecordedBlocks(t *testing.T) {
	path := writeTrace(t,
		`{"op":"alloc","id":1,"size":300,"block":512}`,
		`{"op":"alloc","id":2,"size":1000,"block":1000}`,
		`{"op":"alloc","id":3,"size":2000}`,
		`{"op":"free","id":1}`,
	)
	rep := replayJSON(t, path, "-a", "bfc")
	r := rep["traces"].([]any)[0].(map[string]any)["results"].([]any)[0].(map[string]any)
	assert.Equal(t, map[string]any{"checked": 2.0, "matched": 1.0}, r["recorded_block_match"])
	assert.NotContains(t, r, "recorded_address_match")

	bad := writeTrace(t, `{"op":"alloc","id":1,"size":300,"block":512}`, `{"op":"alloc","id":2,"size":1000,"block":512}`)
	code, stdout, stderr := cli(t, "", "replay", bad)
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "bfcsim: "+bad+":2: block 512 is smaller than size 1000\n", stderr)
}

func TestReplayInvalidTrace(t *testing.T) {
	path := writeTrace(t,
		`{"op":"alloc","id":1,"size":4096}`,
		`{"op":"alloc","id":2,"size":100}`,
		`{"op":"free","id":77}`,
		`{"op":"free","id":1}`,
	)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := cli(t, "", "replay", path, "-o", out)
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "bfcsim: "+path+":3: free of id 77 that is not live\n", stderr)
	assert.NoDirExists(t, out, "a failed run writes no report")

	code, stdout, stderr = cli(t, "", "replay", path, "--skip-invalid", "-f", "json", "-o", out)
	require.Equal(t, 0, code, stderr)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
	tr := rep["traces"].([]any)[0].(map[string]any)
	assert.Equal(t, 1.0, tr["skipped_events"])
	assert.Equal(t, []any{path + ":3: free of id 77 that is not live"}, tr["skipped_errors"])
	assert.Equal(t, 3.0, tr["events"])

	code, stdout, _ = cli(t, "", "replay", path, "--skip-invalid")
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "3 events (2 allocs, 1 free, 0 steps)")
	assert.Contains(t, stdout, "1 invalid event skipped")
}

func TestReplayOutDir(t *testing.T) {
	out := filepath.Join(t.TempDir(), "nested", "out")
	code, stdout, stderr := cli(t, "", "replay", bundled+"cnn-infer.jsonl", "-o", out, "-f", "markdown")
	require.Equal(t, 0, code, stderr)
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"cnn-infer.bfc.peak.memdump", "index.html", "report.json", "report.md", "timeline.csv"}
	for _, kind := range []string{"fragmentation", "latency", "timeline"} {
		want = append(want, "cnn-infer."+kind+".png", "cnn-infer."+kind+".svg")
	}
	for _, a := range []string{"aligned", "arena", "bfc", "naive"} {
		for _, kind := range []string{"memmap", "occupancy"} {
			want = append(want, "cnn-infer."+a+"."+kind+".png", "cnn-infer."+a+"."+kind+".svg")
		}
	}
	assert.ElementsMatch(t, want, names, "every output, and no temporary files left behind")
	for _, n := range names {
		st, err := os.Stat(filepath.Join(out, n))
		require.NoError(t, err)
		assert.Greater(t, st.Size(), int64(100), n)
	}
	csvData, err := os.ReadFile(filepath.Join(out, "timeline.csv"))
	require.NoError(t, err)
	rows := strings.Split(strings.TrimSpace(string(csvData)), "\n")
	assert.Equal(t, "trace,allocator,event,events,live_bytes,in_use_bytes,reserved_bytes,tf_fragmentation_max,tf_fragmentation_mean,failed_allocs", rows[0])
	// 2,955 events are more than the timeline's 2,048 points: two events a row.
	assert.Equal(t, 1+4*1478, len(rows), "one row per two events and allocator")
	assert.True(t, strings.HasPrefix(rows[1], "cnn-infer,bfc,0,2,"), rows[1])
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	require.NoError(t, err)
	assert.Equal(t, stdout, string(md), "report.md is the markdown rendering")
	var rep map[string]any
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &rep))
	assert.Len(t, rep["traces"], 1)
}

func TestReplayEventsOut(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"events.jsonl", "events.jsonl.zst"} {
		path := filepath.Join(dir, name)
		code, _, stderr := cli(t, "", "replay", bundled+"nodups.jsonl", "-a", "naive,bfc", "--events-out", path)
		require.Equal(t, 0, code, stderr)
		data := readDecompressed(t, path)
		lines := strings.Split(strings.TrimSpace(data), "\n")
		require.Len(t, lines, 2*2046, name)
		assert.Equal(t, `{"i":0,"allocator":"naive","op":"alloc","id":1,"addr":1099511627776,"size":1,"ok":true,"block":256,"line":2}`, lines[0])
		assert.True(t, strings.HasPrefix(lines[2046], `{"i":0,"allocator":"bfc",`), "allocators follow each other in -a order")
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &ev))
		assert.Equal(t, "free", ev["op"])
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*"))
	assert.Empty(t, leftovers, "temporary files are removed")

	code, _, stderr := cli(t, "", "replay", bundled+"nodups.jsonl", bundled+"random.jsonl", "--events-out", filepath.Join(dir, "x"))
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--events-out takes one trace")

	// A failed run leaves neither the file nor the directories made for it.
	bad := writeTrace(t, `{"op":"free","id":1}`)
	nested := filepath.Join(dir, "a", "b", "events.jsonl")
	code, _, stderr = cli(t, "", "replay", bad, "--events-out", nested)
	assert.Equal(t, 2, code, stderr)
	assert.NoDirExists(t, filepath.Join(dir, "a"))
}

// readDecompressed returns a file's text, decompressing .zst and .gz.
func readDecompressed(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	r, err := trace.NewDecompressReader(f)
	require.NoError(t, err)
	defer r.Close()
	data, err := io.ReadAll(r)
	require.NoError(t, err)
	return string(data)
}

func TestReplayStdinAndOptions(t *testing.T) {
	data, err := os.ReadFile(bundled + "nodups.jsonl")
	require.NoError(t, err)
	code, out, stderr := cli(t, string(data), "replay", "-", "-a", "aligned", "--set", "aligned.base=bfc",
		"--set", "aligned.base.allow_growth=false", "--set", "space.reserve_cost=1ms", "--check", "-f", "json")
	require.Equal(t, 0, code, stderr)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	tr := rep["traces"].([]any)[0].(map[string]any)
	assert.Equal(t, "-", tr["path"])
	r := tr["results"].([]any)[0].(map[string]any)
	assert.Equal(t, "bfc", r["options"].(map[string]any)["base"])
	assert.Equal(t, 1.0, r["device_reserve_calls"])
	assert.InDelta(t, 0.001+0.000130, r["modeled_device_seconds"], 1e-9, "1ms per call plus 130us per GiB")
}

func TestReplayHostSpace(t *testing.T) {
	code, out, stderr := cli(t, "", "replay", bundled+"nodups.jsonl", "--space", "host", "--touch", "--check", "-f", "csv")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 5, "a header and four rows")
	assert.True(t, strings.HasPrefix(lines[0], "trace,path,allocator,"))
}

func TestReplayUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"replay"}, "replay needs at least one trace file, or - for standard input"},
		{[]string{"replay", "--bogus", "x"}, "unknown flag: --bogus (see 'bfcsim replay --help')"},
		{[]string{"replay", "-a", "tlsf", "x"}, `unknown allocator "tlsf" (want one of bfc, arena, aligned, naive`},
		{[]string{"replay", "-a", "bfc,naive,bfc", "x"}, "-a lists bfc twice"},
		{[]string{"replay", "-f", "yaml", "x"}, `unknown format "yaml" (want one of table, json, markdown, csv)`},
		{[]string{"replay", "--set", "bfc.allow_growth", "x"}, `want NAME.KEY=VALUE`},
		{[]string{"replay", "-a", "naive", "--set", "bfc.allow_growth=false", "x"}, "bfc is not being replayed"},
		{[]string{"replay", "--set", "bfc.nope=1", bundled + "nodups.jsonl"}, `bfc has no option "nope"`},
		{[]string{"replay", "--capacity", "lots", "x"}, `--capacity: bad size "lots"`},
		{[]string{"replay", "--touch", "x"}, "--touch needs --space host"},
		{[]string{"replay", "--space", "cloud", bundled + "nodups.jsonl"}, `unknown space "cloud"`},
		{[]string{"replay", "missing.jsonl"}, "open missing.jsonl: no such file or directory"},
		{[]string{"gen"}, "gen needs a workload"},
		{[]string{"gen", "lstm"}, `unknown workload "lstm"`},
		{[]string{"gen", "random", "--events", "3"}, "events must be even"},
		{[]string{"validate"}, "validate needs at least one trace file"},
	}
	for _, tc := range cases {
		assertUsageError(t, tc.args, tc.msg)
	}
}

// Every bundled trace is exactly what the command in traces/README.md writes.
func TestBundledTracesAreReproducible(t *testing.T) {
	readme, err := os.ReadFile(bundled + "README.md")
	require.NoError(t, err)
	cmds := regexp.MustCompile("`bfcsim (gen [^`]+) -o traces/([a-z/-]+\\.jsonl)`").FindAllStringSubmatch(string(readme), -1)
	require.Len(t, cmds, 14)
	for _, m := range cmds {
		code, out, stderr := cli(t, "", strings.Fields(m[1])...)
		require.Equal(t, 0, code, stderr)
		want, err := os.ReadFile(bundled + m[2])
		require.NoError(t, err)
		assert.Equal(t, string(want), out, "traces/%s differs from `bfcsim %s`", m[2], m[1])
		assert.Less(t, len(want), 2<<20, "bundled traces stay under 2 MB")
	}
}

func TestGen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.jsonl.gz")
	code, _, stderr := cli(t, "", "gen", "random", "--events", "1000", "--max-size", "64KiB", "--seed", "9",
		"--name", "tiny", "--capacity", "16GiB", "-o", path)
	require.Equal(t, 0, code, stderr)
	code, out, stderr := cli(t, "", "validate", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, path+": valid\n")
	assert.Contains(t, out, `name="tiny"`)
	assert.Contains(t, out, "capacity=16.00 GiB")
	assert.Contains(t, out, "max_size=65536")
	assert.Contains(t, out, "1,000: 500 alloc")
}

func TestValidate(t *testing.T) {
	code, out, stderr := cli(t, "", "validate", bundled+"nodups.jsonl")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "nodups.jsonl: valid")
	assert.Contains(t, out, "2,046: 1,023 alloc (0 of size 0), 1,023 free")
	assert.Contains(t, out, "peak 511.5 KiB in 1,023 allocations")

	bad := writeTrace(t, `{"op":"alloc","id":1,"size":-1}`, `{"op":"free","id":1}`, `not json`)
	code, out, stderr = cli(t, "", "validate", bundled+"nodups.jsonl", bad)
	assert.Equal(t, 2, code)
	assert.Contains(t, out, bad+": invalid: 3 bad lines")
	assert.Contains(t, out, bad+":1: size -1 is negative")
	assert.Contains(t, out, bad+":2: free of id 1 that is not live")
	assert.Contains(t, out, bad+":3: malformed JSON")
	assert.Equal(t, "bfcsim: 1 of 2 traces invalid\n", stderr)
}

func TestVersion(t *testing.T) {
	code, out, _ := cli(t, "", "version")
	assert.Equal(t, 0, code)
	assert.Regexp(t, `^bfcsim \S+ \(go1\.\d+`, out)
	code, out2, _ := cli(t, "", "--version")
	assert.Equal(t, 0, code)
	assert.Equal(t, out, out2)
}

func TestHelpListsAllocatorOptions(t *testing.T) {
	code, out, _ := cli(t, "", "replay", "--help")
	assert.Equal(t, 0, code)
	for _, s := range []string{"bfc.allow_growth=true", "arena.reset=empty", "aligned.line=128", "space.reserve_cost=52us", "space.map_cost=66us", "--events-out"} {
		assert.Contains(t, out, s)
	}
	code, out, _ = cli(t, "", "completion", "bash")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "bash completion")
}

func TestReplayDeterministic(t *testing.T) {
	strip := regexp.MustCompile(`"(p50|p90|p99|p999|max|mean|replay_seconds|events_per_second)": [0-9.e+-]+`)
	_, a, _ := cli(t, "", "replay", "-f", "json", bundled+"fragmenter.jsonl")
	_, b, _ := cli(t, "", "replay", "-f", "json", bundled+"fragmenter.jsonl")
	require.NotEmpty(t, a)
	assert.Equal(t, strip.ReplaceAllString(a, ""), strip.ReplaceAllString(b, ""))
}

func TestOutputSafety(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	code, _, stderr := cli(t, "", "gen", "ramp", "--to", "10", "-o", in)
	require.Equal(t, 0, code, stderr)
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"replay", in, "--events-out", in}, "refusing to overwrite the input " + in},
		{[]string{"replay", in, "-o", file}, "-o " + file + ": not a directory"},
		{[]string{"replay", in, "--events-out", dir}, dir + " is a directory"},
		{[]string{"replay", in, "-o", dir, "--events-out", filepath.Join(dir, "report.json")}, "are the same file"},
		{[]string{"replay", "-", "-"}, "- (standard input) is given 2 times"},
		{[]string{"validate", "-", "-"}, "- (standard input) is given 2 times"},
		{[]string{"gen", "ramp", "-o", dir}, dir + " is a directory"},
		{[]string{"replay", in, "--capacity", "8EiB"}, "more than bfcsim can simulate"},
	} {
		code, stdout, stderr := cli(t, "", tc.args...)
		assert.Equal(t, 2, code, "%v", tc.args)
		assert.Empty(t, stdout, "%v", tc.args)
		assert.Contains(t, stderr, tc.msg, "%v", tc.args)
	}
	data, err := os.ReadFile(in)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"workload":"ramp"`, "the input is untouched")

	// A capacity in the header is checked like the flag's.
	huge := writeTrace(t, `{"bfcsim_trace":1,"capacity":18446744073709551615}`, `{"op":"alloc","id":1,"size":1}`)
	code, _, stderr = cli(t, "", "replay", huge)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "more than bfcsim can simulate")
}

// Writing to a FIFO (or a device) writes into it instead of renaming a
// regular file over it.
func TestWriteToFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	got := make(chan []byte)
	go func() {
		data, _ := os.ReadFile(fifo)
		got <- data
	}()
	code, _, stderr := cli(t, "", "gen", "ramp", "--to", "3", "-o", fifo)
	require.Equal(t, 0, code, stderr)
	data := <-got
	assert.Equal(t, 7, strings.Count(string(data), "\n"), "the header, 3 allocs and 3 frees")
	st, err := os.Lstat(fifo)
	require.NoError(t, err)
	assert.Equal(t, os.ModeNamedPipe, st.Mode().Type(), "still a FIFO")
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

func TestStdoutErrors(t *testing.T) {
	for _, args := range [][]string{
		{"validate", bundled + "nodups.jsonl"},
		{"replay", bundled + "nodups.jsonl"},
		{"gen", "ramp"},
		{"version"},
	} {
		var errOut bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: failingWriter{}, stderr: &errOut}
		code := run(context.Background(), e, args)
		assert.Equal(t, 2, code, "%v", args)
		assert.Contains(t, errOut.String(), "no space left on device", "%v", args)
	}
}

func TestInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := filepath.Join(t.TempDir(), "big.jsonl")
	for _, args := range [][]string{
		{"gen", "random", "--events", "1000000", "-o", out},
		{"validate", bundled + "random.jsonl"},
		{"replay", bundled + "random.jsonl"},
	} {
		var stdout, stderr bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}
		assert.Equal(t, 2, run(ctx, e, args), "%v", args)
		assert.Equal(t, "bfcsim: interrupted\n", stderr.String(), "%v", args)
	}
	assert.NoFileExists(t, out, "an interrupted gen leaves nothing behind")
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".*"))
	assert.Empty(t, leftovers)
}

// --cpuprofile writes a profile (a gzip'd protobuf, as pprof reads) of the
// run, and names a file it cannot create.
func TestCPUProfileFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	code, _, stderr := cli(t, "", "replay", "-q", "-a", "bfc", "--cpuprofile", path, bundled+"random.jsonl")
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(b), 2)
	assert.Equal(t, []byte{0x1f, 0x8b}, b[:2], "a gzip'd profile")

	code, _, stderr = cli(t, "", "validate", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "p"), bundled+"random.jsonl")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--cpuprofile")
}

// A run that fails still leaves a whole profile: the one worth reading.
func TestCPUProfileOfAFailingRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	code, _, _ := cli(t, "", "validate", "--cpuprofile", path, filepath.Join(t.TempDir(), "missing.jsonl"))
	require.Equal(t, 2, code)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(b), 2, "the profile was stopped and flushed")
	assert.Equal(t, []byte{0x1f, 0x8b}, b[:2], "a gzip'd profile")
}
