package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bfcsim scale writes the program at other values as a trace that replay
// and fit read, and answers in the spec's JSON.
func TestScaleWritesAndAnswers(t *testing.T) {
	rec := bundled + "h100/resnet-default.pickle.gz"
	out := filepath.Join(t.TempDir(), "p.jsonl.gz")
	code, stdout, stderr := cli(t, "", "scale", rec, "--steps", "64,32,_,48,64,80", "--to", "64,32,96,48,64,80", "-o", out, "-f", "json")
	require.Equal(t, 0, code, stderr)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
	assert.Equal(t, 1.0, rep["bfcsim_scale"])
	steps := rep["steps"].([]any)
	require.Len(t, steps, 6)
	for i, s := range steps {
		st := s.(map[string]any)
		for _, k := range []string{"value", "first_line", "allocs", "peak_live_bytes"} {
			assert.Contains(t, st, k)
		}
		if i == 2 {
			assert.Nil(t, st["value"], "the step left out")
		}
	}
	model := rep["model"].(map[string]any)
	for _, k := range []string{"allocs_per_step", "constant", "affine", "quadratic", "unexplained"} {
		assert.Contains(t, model, k)
	}
	held := rep["held_out"].([]any)
	require.Len(t, held, 1)
	h := held[0].(map[string]any)
	assert.GreaterOrEqual(t, h["same_size"].(float64), 0.93*h["allocs"].(float64))
	assert.Nil(t, rep["largest"])

	code, stdout, stderr = cli(t, "", "fit", out)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "4,771,020,800", "the H100's smallest limit for the recording")

	code, stdout, stderr = cli(t, "", "scale", rec, "--steps", "64,32,96,48,64,80", "--fit-in", "6GiB", "-f", "json", "-j", "2")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
	largest := rep["largest"].(map[string]any)
	for _, k := range []string{"value", "min_capacity_bytes", "settings", "env"} {
		assert.Contains(t, largest, k)
	}
	assert.LessOrEqual(t, largest["min_capacity_bytes"].(float64), float64(6<<30))
	assert.NotNil(t, rep["largest_advised"])
}

func TestScaleRefusals(t *testing.T) {
	rec := bundled + "h100/resnet-default.pickle.gz"
	assertUsageError(t, []string{"scale", rec, "--steps", "64,32", "--to", "96"}, "--to and -o go together")
	assertUsageError(t, []string{"scale", rec, "--steps", "64,x"}, "--steps: value 2")
	assertUsageError(t, []string{"scale", rec, "--steps", "64,32,96"}, "allocates exactly 3 times")
	assertUsageError(t, []string{"scale", rec, "--steps", "64,32", "--gpu", "Z80"}, "unknown GPU")
}
