package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// plannerResults replays a trace with bfc and the planner and returns the
// trace's report and the two results.
func plannerResults(t *testing.T, args ...string) (tr, bfc, planner map[string]any) {
	t.Helper()
	rep := replayJSON(t, append(args, "-a", "bfc,planner")...)
	tr = rep["traces"].([]any)[0].(map[string]any)
	results := tr["results"].([]any)
	require.Len(t, results, 2)
	return tr, results[0].(map[string]any), results[1].(map[string]any)
}

// The planner reads the trace file twice and lands within a few percent of
// the lower bound on the inference traces; the lower bound and every
// allocator's footprint over it are in the report.
func TestReplayPlanner(t *testing.T) {
	for _, name := range []string{"cnn-infer", "transformer-infer"} {
		t.Run(name, func(t *testing.T) {
			tr, bfc, planner := plannerResults(t, bundled+name+".jsonl", "--check")
			lb := tr["lower_bound_bytes"].(float64)
			assert.Equal(t, tr["peak_live_bytes"], lb)
			reserved := planner["peak_reserved_bytes"].(float64)
			assert.GreaterOrEqual(t, reserved, lb)
			assert.LessOrEqual(t, reserved, 1.03*lb, "greedy by size lands near the bound on inference graphs")
			assert.InDelta(t, reserved/lb, planner["footprint_vs_lower_bound"], 1e-12)
			assert.InDelta(t, bfc["peak_reserved_bytes"].(float64)/lb, bfc["footprint_vs_lower_bound"], 1e-12)
			assert.Equal(t, 0.0, planner["failed_allocs"])
			assert.Equal(t, 1.0, planner["device_reserve_calls"], "the plan is one reservation")
			st := planner["allocator_stats"].(map[string]any)
			assert.Equal(t, lb, st["lower_bound_bytes"])
			assert.Equal(t, 256.0, planner["options"].(map[string]any)["align"])
			t.Logf("%s: planner %.0f bytes, bfc %.0f, lower bound %.0f: %.4f× and %.4f×", name,
				reserved, bfc["peak_reserved_bytes"], lb, planner["footprint_vs_lower_bound"], bfc["footprint_vs_lower_bound"])
		})
	}
}

func TestReplayPlannerTable(t *testing.T) {
	code, out, stderr := cli(t, "", "replay", bundled+"transformer-infer.jsonl", "-a", "planner,naive")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(out, "\n")
	assert.Contains(t, lines[0], "peak live 82.39 MiB (the lower bound, LB)")
	assert.Regexp(t, `^planner\s+82\.39 MiB\s+1\.00×\s`, lines[2])
}

// Standard input cannot be read twice.
func TestReplayPlannerStdin(t *testing.T) {
	data, err := os.ReadFile(bundled + "nodups.jsonl")
	require.NoError(t, err)
	code, stdout, stderr := cli(t, string(data), "replay", "-", "-a", "bfc,planner")
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "bfcsim: planner plans offline and needs to read the trace twice; give a trace file, not standard input or a pipe\n", stderr)

	// Without the planner standard input is fine.
	code, _, stderr = cli(t, string(data), "replay", "-", "-a", "bfc")
	assert.Equal(t, 0, code, stderr)
}

// The second reading skips the same invalid lines as the first, so the
// allocations line up; a compressed trace is read twice too.
func TestReplayPlannerSkipInvalidAndCompressed(t *testing.T) {
	path := writeTrace(t,
		`{"op":"alloc","id":1,"size":1000}`,
		`{"op":"free","id":9}`,
		`{"op":"alloc","id":2,"size":3000}`,
		`{"op":"alloc","id":3,"size":-1}`,
		`{"op":"free","id":1}`,
		`{"op":"alloc","id":3,"size":500}`,
		`{"op":"free","id":2}`,
		`{"op":"free","id":3}`,
	)
	tr, _, planner := plannerResults(t, path, "--skip-invalid", "--check")
	assert.Equal(t, 2.0, tr["skipped_events"])
	assert.Equal(t, 4000.0, tr["lower_bound_bytes"])
	// 3000 rounds to 3072 at 0; 1000 (1024) and 500 (512) do not meet,
	// both above it.
	assert.Equal(t, 4096.0, planner["peak_reserved_bytes"])
	assert.Equal(t, 3.0, planner["ok_allocs"])

	gz := filepath.Join(t.TempDir(), "t.jsonl.gz")
	code, _, stderr := cli(t, "", "gen", "cnn-infer", "-o", gz)
	require.Equal(t, 0, code, stderr)
	_, _, planner = plannerResults(t, gz)
	assert.Equal(t, 0.0, planner["failed_allocs"])
}
