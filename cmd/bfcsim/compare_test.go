package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// makeBaseline writes a baseline of the traces with compare
// --update-baseline, into a directory that does not exist yet.
func makeBaseline(t *testing.T, args ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ci", "baseline.json")
	code, stdout, stderr := cli(t, "", append([]string{"compare", "--baseline", path, "--update-baseline"}, args...)...)
	require.Equal(t, 0, code, stderr)
	assert.True(t, strings.HasPrefix(stdout, "# bfcsim report\n"), "without a baseline, the run's report: %q", stdout)
	assert.Contains(t, stderr, "bfcsim: baseline "+path+" does not exist; this run becomes the baseline\n")
	assert.Contains(t, stderr, "bfcsim: wrote the new baseline "+path+" (")
	return path
}

// editBaseline rewrites one allocator's result of the baseline's first trace.
func editBaseline(t *testing.T, path, allocator string, edit func(r map[string]any)) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var rep map[string]any
	require.NoError(t, json.Unmarshal(data, &rep))
	found := false
	for _, r := range rep["traces"].([]any)[0].(map[string]any)["results"].([]any) {
		if r := r.(map[string]any); r["allocator"] == allocator {
			edit(r)
			found = true
		}
	}
	require.True(t, found, allocator)
	out := filepath.Join(t.TempDir(), "edited.json")
	data, err = json.Marshal(rep)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(out, data, 0o644))
	return out
}

// scale multiplies a metric of a result, keeping whole numbers whole.
func scale(key string, by float64) func(r map[string]any) {
	return func(r map[string]any) {
		v := r[key].(float64)
		if v == math.Trunc(v) {
			r[key] = math.Round(v * by)
		} else {
			r[key] = v * by
		}
	}
}

func TestCompareWithOwnBaseline(t *testing.T) {
	base := makeBaseline(t, bundled+"cnn-infer.jsonl")
	data, err := os.ReadFile(base)
	require.NoError(t, err)
	var rep map[string]any
	require.NoError(t, json.Unmarshal(data, &rep))
	assert.Equal(t, 1.0, rep["bfcsim_report"])
	require.Len(t, rep["traces"], 1)

	code, stdout, stderr := cli(t, "", "compare", bundled+"cnn-infer.jsonl", "--baseline", base)
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr)
	assert.True(t, strings.HasPrefix(stdout, "# bfcsim compare\n\n0 regressions, 0 better, 52 ok, 24 not compared (tolerance 2%) against `"), stdout)
	assert.Contains(t, stdout, "\n## cnn-infer\n")
	assert.Contains(t, stdout, "| allocator | metric | baseline | now | change | verdict |\n")
	assert.Contains(t, stdout, "| bfc | `peak_reserved_bytes` | 126.00 MiB | 126.00 MiB | 0 | ok |\n")
	assert.Contains(t, stdout, "| naive | `device_reserve_calls` | 1,482 | 1,482 | 0 | ok |\n")
	assert.Regexp(t, "\\| arena \\| `events_per_second` \\| [0-9.]+[kM]/s \\| [0-9.]+[kM]/s \\| \\S+ \\| not compared \\|\n", stdout)
	assert.NotContains(t, stdout, "warning")

	// A baseline written by replay -o is as good.
	dir := filepath.Join(t.TempDir(), "out")
	code, _, stderr = cli(t, "", "replay", bundled+"cnn-infer.jsonl", "-o", dir)
	require.Equal(t, 0, code, stderr)
	code, stdout, stderr = cli(t, "", "compare", bundled+"cnn-infer.jsonl", "--baseline", filepath.Join(dir, "report.json"))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "0 regressions, 0 better, 52 ok")

	// A subset of the allocators: the others are noted, not failures.
	code, stdout, stderr = cli(t, "", "compare", bundled+"cnn-infer.jsonl", "--baseline", base, "-a", "bfc,naive")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "0 regressions, 0 better, 26 ok, 12 not compared (tolerance 2%)")
	assert.Contains(t, stdout, "- arena: not replayed (in the baseline, not in this run)\n")
	assert.Contains(t, stdout, "- aligned: not replayed")

	// A trace without a baseline is noted; a run with nothing in common is an error.
	code, stdout, stderr = cli(t, "", "compare", bundled+"cnn-infer.jsonl", bundled+"nodups.jsonl", "--baseline", base)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "4 results without a baseline")
	assert.Contains(t, stdout, "`../../traces/nodups.jsonl`: no baseline")
	code, stdout, stderr = cli(t, "", "compare", bundled+"nodups.jsonl", "--baseline", base)
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "bfcsim: nothing to compare: baseline "+base+" has none of this run's traces and allocators "+
		"(run: nodups; baseline: cnn-infer); make a new baseline with --update-baseline\n", stderr)
}

func TestCompareRegression(t *testing.T) {
	base := makeBaseline(t, bundled+"cnn-infer.jsonl")
	for _, tc := range []struct {
		metric, msg, row string
	}{
		{"fragmentation", "cnn-infer/bfc fragmentation +11.1%", "| bfc | `fragmentation` | 43.6% | 48.4% | **+11.1%** | **regression** |\n"},
		{"peak_reserved_bytes", "cnn-infer/bfc peak_reserved_bytes +11.1%", "| bfc | `peak_reserved_bytes` | 113.40 MiB | 126.00 MiB | **+11.1%** | **regression** |\n"},
	} {
		t.Run(tc.metric, func(t *testing.T) {
			// The baseline was 10% better.
			edited := editBaseline(t, base, "bfc", scale(tc.metric, 0.9))
			code, stdout, stderr := cli(t, "", "compare", bundled+"cnn-infer.jsonl", "--baseline", edited)
			assert.Equal(t, 1, code)
			assert.Equal(t, "bfcsim: 1 regression beyond 2%: "+tc.msg+"\n", stderr)
			assert.Contains(t, stdout, "**1 regression**, 0 better, 51 ok, 24 not compared (tolerance 2%)")
			assert.Contains(t, stdout, tc.row)

			// Within a wider tolerance it is ok.
			code, stdout, stderr = cli(t, "", "compare", bundled+"cnn-infer.jsonl", "--baseline", edited, "--tolerance", "12%")
			assert.Equal(t, 0, code, stderr)
			assert.Contains(t, stdout, "0 regressions, 0 better, 52 ok, 24 not compared (tolerance 12%)")
		})
	}

	// Better is not a failure.
	edited := editBaseline(t, base, "bfc", scale("internal_waste_at_peak_bytes", 1.5))
	code, stdout, stderr := cli(t, "", "compare", bundled+"cnn-infer.jsonl", "--baseline", edited)
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "0 regressions, 1 better, 51 ok")
	assert.Contains(t, stdout, "| bfc | `internal_waste_at_peak_bytes` | 19.26 MiB | 12.84 MiB | -33.3% | better |\n")

	// Several regressions, one higher-is-better, all named.
	edited = editBaseline(t, base, "naive", func(r map[string]any) {
		r["utilization"] = 1.5
		r["device_reserve_calls"] = 100.0
	})
	code, _, stderr = cli(t, "", "compare", bundled+"cnn-infer.jsonl", "--baseline", edited, "--tolerance", "0.02")
	assert.Equal(t, 1, code)
	assert.Regexp(t, `^bfcsim: 2 regressions beyond 2%: cnn-infer/naive utilization -33\.\d%, cnn-infer/naive device_reserve_calls \+1382\.0%\n$`, stderr)
}

func TestCompareUpdateBaseline(t *testing.T) {
	base := makeBaseline(t, bundled+"cnn-infer.jsonl")
	edited := editBaseline(t, base, "bfc", scale("fragmentation", 0.9))
	before, err := os.ReadFile(edited)
	require.NoError(t, err)

	// --update-baseline prints the comparison, accepts the regression and exits 0.
	code, stdout, stderr := cli(t, "", "compare", bundled+"cnn-infer.jsonl", "--baseline", edited, "--update-baseline")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "**1 regression**")
	assert.Equal(t, "bfcsim: wrote the new baseline "+edited+" (1 trace, 4 results), accepting 1 regression\n", stderr)
	after, err := os.ReadFile(edited)
	require.NoError(t, err)
	assert.NotEqual(t, string(before), string(after))

	code, stdout, stderr = cli(t, "", "compare", bundled+"cnn-infer.jsonl", "--baseline", edited)
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "0 regressions")

	// --report writes the run, and leaves the baseline alone.
	out := filepath.Join(t.TempDir(), "new", "report.json")
	code, _, stderr = cli(t, "", "compare", bundled+"cnn-infer.jsonl", "--baseline", edited, "--report", out)
	require.Equal(t, 0, code, stderr)
	var rep map[string]any
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &rep))
	assert.Equal(t, "cnn-infer", rep["traces"].([]any)[0].(map[string]any)["name"])
	again, err := os.ReadFile(edited)
	require.NoError(t, err)
	assert.Equal(t, string(after), string(again))
}

func TestCompareWarnsOnOptions(t *testing.T) {
	base := makeBaseline(t, bundled+"cnn-infer.jsonl", "-a", "bfc")
	edited := editBaseline(t, base, "bfc", func(r map[string]any) {
		r["options"].(map[string]any)["allow_growth"] = false
	})
	code, stdout, stderr := cli(t, "", "compare", bundled+"cnn-infer.jsonl", "--baseline", edited, "-a", "bfc")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "- **warning**: bfc: options differ from the baseline's: allow\\_growth true now, false in the baseline; "+
		"if that is intended, run with `--update-baseline`\n")
	assert.Contains(t, stdout, "0 regressions, 0 better, 13 ok", "the comparison is still made")
}

func TestCompareLatency(t *testing.T) {
	base := makeBaseline(t, bundled+"cnn-infer.jsonl", "-a", "bfc")
	edited := editBaseline(t, base, "bfc", func(r map[string]any) { r["events_per_second"] = 1e15 })
	code, stdout, stderr := cli(t, "", "compare", bundled+"cnn-infer.jsonl", "--baseline", edited, "-a", "bfc")
	assert.Equal(t, 0, code, stderr)
	assert.Regexp(t, "\\| bfc \\| `events_per_second` \\| 1000000000.00M/s \\| \\S+ \\| -100.0% \\| not compared \\|", stdout)

	code, stdout, stderr = cli(t, "", "compare", bundled+"cnn-infer.jsonl", "--baseline", edited, "-a", "bfc", "--compare-latency")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "cnn-infer/bfc events_per_second -100.0%")
	assert.NotContains(t, stdout, "not compared")
}

func TestCompareBadBaseline(t *testing.T) {
	dir := t.TempDir()
	trace := bundled + "nodups.jsonl"
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
		return path
	}
	missing := filepath.Join(dir, "ci", "baseline.json")
	notJSON := write("not.json", "hello")
	noKey := write("nokey.json", `{"traces":[]}`)
	v2 := write("v2.json", `{"bfcsim_report":2,"traces":"elsewhere"}`)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"compare", trace, "--baseline", missing},
			"baseline " + missing + " does not exist; create it from this run with --update-baseline"},
		{[]string{"compare", trace}, "compare needs --baseline FILE"},
		{[]string{"compare", "--baseline", missing}, "compare needs at least one trace file"},
		{[]string{"compare", trace, "--baseline", notJSON}, "baseline " + notJSON + " is not a bfcsim report.json (invalid character"},
		{[]string{"compare", trace, "--baseline", noKey}, "baseline " + noKey + ` is not a bfcsim report.json (no "bfcsim_report" key)`},
		{[]string{"compare", trace, "--baseline", v2}, "baseline " + v2 + ` is a version 2 report ("bfcsim_report": 2), and this bfcsim reads version 1`},
		{[]string{"compare", trace, "--baseline", dir}, "is a directory"},
		{[]string{"compare", trace, "--baseline", trace, "--update-baseline"}, "refusing to overwrite the input " + trace},
		{[]string{"compare", trace, "--baseline", noKey, "--report", noKey}, "refusing to overwrite the input " + noKey},
		{[]string{"compare", trace, "--baseline", notJSON, "--update-baseline"}, "is not a bfcsim report.json"},
		{[]string{"compare", trace, "--baseline", missing, "--tolerance", "abc"},
			`--tolerance: bad tolerance "abc": want a percentage such as 2% or 0.5%, or a fraction such as 0.02`},
		{[]string{"compare", trace, "--baseline", missing, "--tolerance", "2"},
			`--tolerance: bad tolerance "2": a number without % is a fraction (0.02 is 2%); write 2% for 2 percent`},
		{[]string{"compare", trace, "--baseline", missing, "--tolerance", "-1%"}, `--tolerance: bad tolerance "-1%": it cannot be negative`},
		{[]string{"compare", trace, "--baseline", missing, "--tolerance", ""}, `--tolerance: bad tolerance ""`},
		{[]string{"compare", trace, "--baseline", missing, "-a", "tlsf"}, `unknown allocator "tlsf"`},
	} {
		assertUsageError(t, tc.args, tc.msg)
	}
	assert.NoDirExists(t, filepath.Join(dir, "ci"), "a failed compare writes nothing")
	data, err := os.ReadFile(notJSON)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(data), "a file that is not a report is never replaced")

	// A report of another version is replaced by --update-baseline.
	code, _, stderr := cli(t, "", "compare", trace, "--baseline", v2, "--update-baseline")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "is a version 2 report")
	code, _, stderr = cli(t, "", "compare", trace, "--baseline", v2)
	assert.Equal(t, 0, code, stderr)
}

func TestCompareHelp(t *testing.T) {
	code, out, _ := cli(t, "", "compare", "--help")
	assert.Equal(t, 0, code)
	for _, s := range []string{"--baseline", "--tolerance", "--update-baseline", "--compare-latency", "--set",
		"GITHUB_STEP_SUMMARY", "Exit codes: 0 no regression, 1 a regression"} {
		assert.Contains(t, out, s)
	}
	code, out, _ = cli(t, "", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "bfcsim compare t.jsonl --baseline b.json   exit 1 on a memory regression")
}
