package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/internal/tfcapture"
	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/tensorflow"
)

// writeCapture makes a profiler capture of a bundled trace with bfcsim's
// bfc (internal/tfcapture) and writes it as an *.xplane.pb.
func writeCapture(t *testing.T, traceFile string, o tfcapture.Options) string {
	t.Helper()
	f, err := os.Open(bundled + traceFile)
	require.NoError(t, err)
	defer f.Close()
	r, err := trace.NewReader(f, traceFile)
	require.NoError(t, err)
	var evs []trace.Event
	for r.Next() {
		evs = append(evs, r.Event())
	}
	require.NoError(t, r.Err())
	c, err := tfcapture.FromTrace(evs, o)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "host.xplane.pb")
	out, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, tensorflow.WriteCapture(out, c))
	require.NoError(t, out.Close())
	return path
}

// A capture from the start of a run, replayed as it is against bfc: every
// allocation lands at its recorded address with its recorded chunk size.
// Replayed against pytorch and naive it is the what-if: their blocks differ.
func TestReplayTensorFlowCapture(t *testing.T) {
	path := writeCapture(t, "transformer-infer.jsonl", tfcapture.Options{Allocator: "GPU_0_bfc", Capacity: 16 << 30})
	rep := replayJSON(t, path, "-a", "bfc,pytorch")
	tr := rep["traces"].([]any)[0].(map[string]any)
	assert.Equal(t, float64(16<<30), tr["capacity_bytes"], "the memory limit, from the capture")
	results := tr["results"].([]any)
	bfc := results[0].(map[string]any)
	addr := bfc["recorded_address_match"].(map[string]any)
	block := bfc["recorded_block_match"].(map[string]any)
	assert.Positive(t, addr["checked"])
	assert.Equal(t, addr["checked"], addr["matched"], "every allocation at its recorded address")
	assert.Equal(t, block["checked"], block["matched"], "every chunk of its recorded size")
	assert.Equal(t, addr["checked"], block["checked"])
	py := results[1].(map[string]any)["recorded_block_match"].(map[string]any)
	assert.Less(t, py["matched"], py["checked"], "pytorch rounds otherwise")

	code, _, stderr := cli(t, "", "import", "tensorflow", path, "--allocator", "GPU_9_bfc")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--allocator GPU_9_bfc: the capture has no events of it (it has GPU_0_bfc)")
}

// A capture with several allocators: replay and import exit 2 listing them,
// and --allocator picks one.
func TestTensorFlowCaptureSeveralAllocators(t *testing.T) {
	code, _, stderr := cli(t, "", "replay", "../../trace/tensorflow/testdata/real/gpu-multi-worker.xplane.pb.zst")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "GPU_4_bfc (969 events), GPU_6_bfc (969 events), gpu_host_bfc (536 events), GPU_1_bfc (19 events); pick one with --allocator NAME")

	out := filepath.Join(t.TempDir(), "g4.jsonl")
	code, _, stderr = cli(t, "", "import", "tensorflow", "../../trace/tensorflow/testdata/real/gpu-multi-worker.xplane.pb.zst", "--allocator", "GPU_4_bfc", "-o", out)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "allocator GPU_4_bfc")
	assert.Contains(t, stderr, "3.74 GiB in use when the capture started")
	assert.Contains(t, stderr, "TensorFlow's allocator is taken as preallocated (its memory limit), its default")

	// With no flags bfc starts with TensorFlow's GPU allocator's defaults,
	// as the capture's device pool ran: every chunk is sized as
	// TensorFlow sized it, and the bytes in use end as TensorFlow's did.
	rep := replayJSON(t, out, "-a", "bfc")
	res := rep["traces"].([]any)[0].(map[string]any)["results"].([]any)[0].(map[string]any)
	assert.Zero(t, res["failed_allocs"])
	assert.Equal(t, []any{"preset"}, res["options_from_recording"])
	assert.Equal(t, map[string]any{"checked": 761.0, "matched": 761.0}, res["recorded_block_match"])
	assert.Equal(t, 6208853504.0, res["allocator_stats"].(map[string]any)["bytes_in_use"], "recorded_end_in_use_bytes: TensorFlow's bytes_allocated after its last event")
	assert.NotContains(t, res, "recorded_address_match", "a capture that starts mid-run has no addresses to compare")

	code, text, stderr := cli(t, "", "replay", "-q", out, "-a", "bfc")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, text, "bfc: reproduced 761 of 761 recorded block sizes")
	assert.Contains(t, text, "where the recording had 5.78 GiB and 5.78 GiB")

	// tsl's own defaults (growth on) are a what-if: 4 chunks sized otherwise.
	rep = replayJSON(t, out, "-a", "bfc", "--set", "bfc.preset=tsl")
	res = rep["traces"].([]any)[0].(map[string]any)["results"].([]any)[0].(map[string]any)
	assert.Equal(t, map[string]any{"checked": 761.0, "matched": 757.0}, res["recorded_block_match"])
}

// validate takes a capture too, and --allocator picks its allocator.
func TestValidateTensorFlowCapture(t *testing.T) {
	code, out, stderr := cli(t, "", "validate", "../../trace/tensorflow/testdata/real/gpu-multi-worker.xplane.pb.zst", "--allocator", "GPU_1_bfc")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "events   22: 20 alloc")
	assert.Contains(t, out, `tf_allocator="GPU_1_bfc"`)
}

// A capture of a pool that grew, its regions wherever the device put them
// (each below the one before, with gaps), replays with no flags at every
// recorded address: the importer finds the regions from the addresses,
// writes them as reserve events, and bfc, started growing as the capture
// shows, puts each region where the recording had it. The same capture as
// JAX's is named XLA's and started with XLA's options; a preallocated
// TensorFlow pool is started with TensorFlow's GPU defaults.
func TestCaptureLayoutsReplayWithNoFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       tfcapture.Options
		note    string
		options []string
	}{
		{"tensorflow growth", tfcapture.Options{BFC: map[string]string{"preset": "tf-gpu", "allow_growth": "true"}, Scatter: true},
			"TensorFlow's allocator grew its pool by ", []string{"preset", "allow_growth"}},
		{"jax growth", tfcapture.Options{BFC: map[string]string{"allow_growth": "true"}, Scatter: true, JAXVersion: "0.11.2"},
			"XLA's allocator grew its pool by ", []string{"allow_growth"}},
		// Regions one after another from the device's base: every chunk
		// also lies within the limit of the first, and the replay each
		// way decides.
		{"jax growth, regions one after another", tfcapture.Options{BFC: map[string]string{"allow_growth": "true"}, JAXVersion: "0.11.2"},
			"XLA's allocator grew its pool by ", []string{"allow_growth"}},
		{"tensorflow preallocated", tfcapture.Options{BFC: map[string]string{"preset": "tf-gpu"}},
			"TensorFlow's allocator reserved its whole pool at the start (its memory limit)", []string{"preset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Allocator, tc.o.Capacity = "GPU_0_bfc", 16<<30
			path := writeCapture(t, "transformer-train.jsonl", tc.o)
			code, out, stderr := cli(t, "", "replay", path, "-a", "bfc", "-f", "json")
			require.Equal(t, 0, code, stderr)
			assert.Contains(t, stderr, tc.note)
			var rep struct {
				Traces []struct {
					Results []struct {
						OptionsFromRecording []string                       `json:"options_from_recording"`
						AddressMatch         struct{ Checked, Matched int } `json:"recorded_address_match"`
						BlockMatch           struct{ Checked, Matched int } `json:"recorded_block_match"`
					} `json:"results"`
				} `json:"traces"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &rep))
			r := rep.Traces[0].Results[0]
			assert.ElementsMatch(t, tc.options, r.OptionsFromRecording)
			assert.Greater(t, r.AddressMatch.Checked, 1000)
			assert.Equal(t, r.AddressMatch.Checked, r.AddressMatch.Matched, "every recorded address")
			assert.Equal(t, r.BlockMatch.Checked, r.BlockMatch.Matched, "every recorded block size")
		})
	}
}
