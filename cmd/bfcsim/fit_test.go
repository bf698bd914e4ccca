package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fit -f json has the keys SPEC names, and one result per allocator.
func TestFitJSON(t *testing.T) {
	code, out, stderr := cli(t, "", "fit", bundled+"transformer-train.jsonl", "-a", "bfc,naive", "-f", "json")
	require.Equal(t, 0, code, stderr)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, 1.0, rep["bfcsim_fit"])
	res := rep["results"].([]any)
	require.Len(t, res, 2)
	for i, name := range []string{"bfc", "naive"} {
		r := res[i].(map[string]any)
		for _, k := range []string{"allocator", "options", "min_capacity_bytes", "granularity_bytes", "probes"} {
			assert.Contains(t, r, k)
		}
		assert.Equal(t, name, r["allocator"])
		assert.Positive(t, r["min_capacity_bytes"])
		assert.Equal(t, "capacity", r["limit"])
		assert.Len(t, r["gpus"], 8)
	}
	assert.Equal(t, float64(1<<20), res[0].(map[string]any)["granularity_bytes"], "bfc: MiB, as TensorFlow takes a limit")
	assert.Equal(t, 256.0, res[1].(map[string]any)["granularity_bytes"])
}

// The table gives the answer, the settings, and a line per GPU size;
// --max exits 1 when an allocator needs more, 0 otherwise.
func TestFitTableAndMax(t *testing.T) {
	code, out, stderr := cli(t, "", "fit", bundled+"transformer-train.jsonl", "-a", "naive", "--max", "80GiB")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "the smallest device on which every allocation is served")
	assert.Regexp(t, `(?m)^naive\s+2\.2\d GiB\s+[\d,]+\s+256 B\s`, out)
	assert.Contains(t, out, "naive: the device's capacity; the default settings")
	for _, g := range []string{"16 GiB", "24 GiB", "141 GiB"} {
		assert.Regexp(t, `(?m)^`+g+`\s+fits, \d`, out)
	}
	assert.Contains(t, out, "--max 80.00 GiB: every allocator fits")

	code, out, stderr = cli(t, "", "fit", bundled+"transformer-train.jsonl", "-a", "naive", "--max", "1GiB")
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, out, "--max 1.00 GiB: naive does not fit")
	assert.Equal(t, "bfcsim: naive does not fit in 1GiB (--max)\n", stderr)
}

// A PyTorch recording is searched with pytorch, as recorded, unless -a
// says otherwise; -o writes the JSON report too.
func TestFitRecordingDefaults(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "fit.json")
	code, out, stderr := cli(t, "", "fit", h100+"resnet-default.pickle.gz", "-q", "-o", js)
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `(?m)^pytorch\s+4\.44 GiB\s+4,771,020,800\s+2\.00 MiB`, out)
	assert.Contains(t, out, "a memory limit (set_per_process_memory_fraction)")
	assert.Contains(t, out, "as recorded expandable_segments=false")
	raw, err := os.ReadFile(js)
	require.NoError(t, err)
	var rep map[string]any
	require.NoError(t, json.Unmarshal(raw, &rep))
	r := rep["results"].([]any)[0].(map[string]any)
	assert.Equal(t, 4771020800.0, r["min_capacity_bytes"])
	assert.Equal(t, "memory_limit", r["limit"])
}

func TestFitErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"fit"}, "fit takes one trace file"},
		{[]string{"fit", "a.jsonl", "b.jsonl"}, "fit takes one trace file"},
		{[]string{"fit", "-"}, "give a file, or save standard input to one"},
		{[]string{"fit", bundled + "random.jsonl", "--max", "lots"}, `--max "lots": want a size such as 24GiB`},
		{[]string{"fit", bundled + "random.jsonl", "-f", "csv"}, `unknown format "csv"`},
		{[]string{"fit", bundled + "no-such.jsonl"}, "no such file"},
		{[]string{"advise", bundled + "random.jsonl", "-a", "naive"}, "advise has no settings to try for naive"},
		{[]string{"advise", bundled + "random.jsonl", "-a", "bfc,pytorch"}, "advise takes one allocator"},
	} {
		code, _, stderr := cli(t, "", tc.args...)
		assert.Equal(t, exitBadInput, code, "%v", tc.args)
		assert.Contains(t, stderr, tc.msg, "%v", tc.args)
		assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
	}
}

// advise -f json has the keys SPEC names; the best candidate needs no more
// than any other, and its line sets what differs from the defaults.
func TestAdviseJSON(t *testing.T) {
	code, out, stderr := cli(t, "", "advise", h100+"resnet-default.pickle.gz", "-q", "-f", "json")
	require.Equal(t, 0, code, stderr)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, 1.0, rep["bfcsim_advise"])
	assert.Equal(t, "pytorch", rep["allocator"])
	rec := rep["recorded"].(map[string]any)
	for _, k := range []string{"settings", "min_capacity_bytes", "peak_reserved_bytes"} {
		assert.Contains(t, rec, k)
	}
	assert.Equal(t, 4771020800.0, rec["min_capacity_bytes"], "the recorded settings, as the GPU ran them")
	best := rep["best"].(map[string]any)
	for _, k := range []string{"env", "settings", "min_capacity_bytes", "peak_reserved_bytes"} {
		assert.Contains(t, best, k)
	}
	assert.True(t, strings.HasPrefix(best["env"].(string), "export PYTORCH_CUDA_ALLOC_CONF="), best["env"])
	assert.Contains(t, best["env"], "expandable_segments:True")
	cands := rep["candidates"].([]any)
	require.NotEmpty(t, cands)
	for _, c := range cands {
		if v, ok := c.(map[string]any)["min_capacity_bytes"].(float64); ok {
			assert.LessOrEqual(t, best["min_capacity_bytes"].(float64), v)
		}
	}
	assert.Positive(t, rep["saved_bytes"])
}

// advise gives no advice for a recording made with settings the model does
// not have (a snapshot's backend:cudaMallocAsync, say).
func TestAdviseRefusesUnmodelledSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"bfcsim_trace":1,"allocator_settings":{"allocator":"pytorch","PYTORCH_CUDA_ALLOC_CONF":"backend:cudaMallocAsync","unmodelled":"backend:cudaMallocAsync (the model is the native caching allocator)"}}
{"op":"alloc","id":1,"size":4096}
{"op":"free","id":1}
`), 0o644))
	code, _, stderr := cli(t, "", "advise", path, "-q")
	assert.Equal(t, exitBadInput, code)
	assert.Equal(t, "bfcsim: the recording's allocator ran with settings bfcsim does not model (backend:cudaMallocAsync (the model is the native caching allocator)): advice from the model would not hold for it\n", stderr)
}
