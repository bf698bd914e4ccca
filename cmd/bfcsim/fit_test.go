package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/search"
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
		gpus := r["gpus"].([]any)
		require.Len(t, gpus, len(search.GPUs), "every GPU of the table")
		for j, g := range gpus {
			g := g.(map[string]any)
			for _, k := range []string{"name", "total_memory_bytes", "usable_bytes", "fits", "headroom_bytes"} {
				assert.Contains(t, g, k)
			}
			assert.Equal(t, search.GPUs[j].Name, g["name"])
			assert.Equal(t, float64(search.GPUs[j].TotalBytes-search.DefaultContextReserveBytes), g["usable_bytes"])
			assert.Equal(t, g["usable_bytes"].(float64)-r["min_capacity_bytes"].(float64), g["headroom_bytes"])
		}
	}
	assert.Equal(t, float64(search.DefaultContextReserveBytes), rep["context_reserve_bytes"])
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
	for _, g := range search.GPUs {
		assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(g.Name)+`\s+[\d.]+ GiB\s+fits, \d`, out)
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
		{[]string{"fit"}, "fit needs at least one trace file"},
		{[]string{"fit", bundled + "random.jsonl", bundled + "pytorch-train.jsonl"}, "the recordings of one job must come from one allocator"},
		{[]string{"fit", bundled + "random.jsonl", "--gpu", "GTX 480"}, `--gpu: unknown GPU "GTX 480"`},
		{[]string{"fit", bundled + "random.jsonl", "--context-reserve", "lots"}, `--context-reserve "lots": want a size`},
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

// A snapshot of several devices is a job: fit answers for each device and
// for the job, which needs what its largest device needs; two recordings
// of one run, one file per rank, are a job the same way.
func TestFitJob(t *testing.T) {
	snap := writeJobSnapshot(t)
	type job struct {
		Job     string `json:"job"`
		Results []struct {
			Allocator      string  `json:"allocator"`
			Min            *uint64 `json:"min_capacity_bytes"`
			DecidingTrace  string  `json:"deciding_trace"`
			DecidingDevice *int    `json:"deciding_device"`
			GPUs           []struct {
				Name string `json:"name"`
				Fits bool   `json:"fits"`
			} `json:"gpus"`
		} `json:"results"`
		Devices []struct {
			Trace   string `json:"trace"`
			Device  *int   `json:"device"`
			Results []struct {
				Min uint64 `json:"min_capacity_bytes"`
			} `json:"results"`
		} `json:"devices"`
	}
	fitJob := func(args ...string) job {
		t.Helper()
		code, out, stderr := cli(t, "", append([]string{"fit", "-q", "-f", "json"}, args...)...)
		require.Equal(t, 0, code, stderr)
		var j job
		require.NoError(t, json.Unmarshal([]byte(out), &j))
		return j
	}
	j := fitJob(snap)
	assert.Equal(t, "job", j.Job)
	require.Len(t, j.Devices, 2)
	assert.Equal(t, "job-device0", j.Devices[0].Trace)
	assert.Equal(t, 0, *j.Devices[0].Device)
	assert.EqualValues(t, 2<<20, j.Devices[0].Results[0].Min, "three 256 KiB blocks: one 2 MiB segment")
	assert.Equal(t, 2, *j.Devices[1].Device)
	assert.EqualValues(t, 20<<20, j.Devices[1].Results[0].Min, "five 4 MiB blocks: one 20 MiB segment")
	require.Len(t, j.Results, 1)
	r := j.Results[0]
	assert.Equal(t, "pytorch", r.Allocator)
	assert.EqualValues(t, 20<<20, *r.Min, "the job needs what its largest device needs")
	assert.Equal(t, "job-device2", r.DecidingTrace)
	assert.Equal(t, 2, *r.DecidingDevice)
	require.NotEmpty(t, r.GPUs)
	assert.True(t, r.GPUs[0].Fits)

	// One file per rank: the devices imported apart.
	dir := t.TempDir()
	var ranks []string
	for _, d := range []string{"0", "2"} {
		p := filepath.Join(dir, "rank"+d+".jsonl")
		code, _, stderr := cli(t, "", "import", "pytorch", snap, "--device", d, "-o", p)
		require.Equal(t, 0, code, stderr)
		ranks = append(ranks, p)
	}
	j = fitJob(ranks...)
	assert.Equal(t, "job", j.Job, "both files are named after the snapshot")
	require.Len(t, j.Devices, 2)
	assert.Equal(t, "job-device0", j.Devices[0].Trace)
	assert.EqualValues(t, 20<<20, *j.Results[0].Min)
	assert.Equal(t, "job-device2", j.Results[0].DecidingTrace)

	// --device takes one device alone: the report of one trace.
	code, out, stderr := cli(t, "", "fit", "-q", snap, "--device", "2")
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, out, "a job of")

	// The table names the deciding device; --max checks the job.
	code, out, stderr = cli(t, "", "fit", "-q", snap, "--max", "8MiB")
	assert.Equal(t, exitFailed, code, stderr)
	assert.Contains(t, out, "job: a job of 2 devices; it fits a GPU when every one of them does")
	assert.Regexp(t, `pytorch\s+20\.00 MiB\s+20,971,520\s+job-device2`, out)
	assert.Contains(t, stderr, "pytorch does not fit in 8MiB (--max)")
}

// advise on a job weighs each candidate by the device it suits least, and
// says what each device needs with the best.
func TestAdviseJob(t *testing.T) {
	snap := writeJobSnapshot(t)
	code, out, stderr := cli(t, "", "advise", "-q", snap, "-f", "json", "-j", "2")
	require.Equal(t, 0, code, stderr)
	var a struct {
		Trace   string   `json:"trace"`
		Devices []string `json:"devices"`
		Best    struct {
			Env     string  `json:"env"`
			Min     *uint64 `json:"min_capacity_bytes"`
			Devices []struct {
				Trace string  `json:"trace"`
				Min   *uint64 `json:"min_capacity_bytes"`
			} `json:"devices"`
		} `json:"best"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &a))
	assert.Equal(t, "job", a.Trace)
	assert.Equal(t, []string{"job-device0", "job-device2"}, a.Devices)
	assert.Contains(t, a.Best.Env, "PYTORCH_CUDA_ALLOC_CONF")
	require.Len(t, a.Best.Devices, 2)
	most := uint64(0)
	for _, d := range a.Best.Devices {
		require.NotNil(t, d.Min)
		most = max(most, *d.Min)
	}
	assert.Equal(t, most, *a.Best.Min, "the job needs what its largest device needs")
}

// The H100 80GB row counts the bytes the driver reports, 85,017,493,504,
// less the context reserve; --gpu checks one GPU and exits 1 when the run
// does not fit it, and --context-reserve changes what it leaves out.
func TestFitGPUs(t *testing.T) {
	h, err := search.LookupGPU("h100")
	require.NoError(t, err)
	assert.EqualValues(t, 85_017_493_504, h.TotalBytes)

	code, out, stderr := cli(t, "", "fit", h100+"train-default.pickle.gz", "-q", "--gpu", "H100 80GB", "-f", "json", "--context-reserve", "1GiB")
	require.Equal(t, 0, code, stderr)
	var rep struct {
		Reserve uint64 `json:"context_reserve_bytes"`
		Results []struct {
			Min  uint64 `json:"min_capacity_bytes"`
			GPUs []struct {
				Name     string `json:"name"`
				Total    uint64 `json:"total_memory_bytes"`
				Usable   uint64 `json:"usable_bytes"`
				Fits     bool   `json:"fits"`
				Headroom int64  `json:"headroom_bytes"`
			} `json:"gpus"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.EqualValues(t, 1<<30, rep.Reserve)
	require.Len(t, rep.Results, 1)
	r := rep.Results[0]
	assert.EqualValues(t, 14_615_052_288, r.Min, "the H100's own smallest limit")
	require.Len(t, r.GPUs, 1, "--gpu weighs one GPU")
	g := r.GPUs[0]
	assert.Equal(t, "H100 80GB", g.Name)
	assert.EqualValues(t, 85_017_493_504, g.Total)
	assert.EqualValues(t, 85_017_493_504-(1<<30), g.Usable)
	assert.True(t, g.Fits)
	assert.Equal(t, int64(g.Usable)-int64(r.Min), g.Headroom)

	code, out, stderr = cli(t, "", "fit", h100+"train-default.pickle.gz", "-q", "--gpu", "h100", "--context-reserve", "70GiB")
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, out, "--gpu H100 80GB: pytorch does not fit")
	assert.Contains(t, stderr, "pytorch does not fit in the H100 80GB's 9.18 GiB (--gpu)")
}
