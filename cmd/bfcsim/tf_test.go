package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TensorFlow's BFC tests, reproduced from the bundled traces through the
// command line: each row is a replay of traces/tf/ (or traces/nodups.jsonl)
// with the options the test used, and the numbers TensorFlow asserts, read
// back from report.json. traces/README.md lists the same commands.
func TestTFConformanceThroughCLI(t *testing.T) {
	cases := []struct {
		name  string
		trace string
		sets  []string
		stats map[string]float64 // allocator_stats
		res   map[string]float64 // other result keys
	}{
		{"NoDups", "nodups.jsonl", []string{"bfc.allow_growth=false"},
			map[string]float64{"num_allocs": 1023, "bytes_in_use": 0, "peak_bytes_in_use": 654336, "largest_alloc_size": 1024, "regions": 1},
			nil},
		{"ExerciseCoalescing", "tf/exercise-coalescing.jsonl", []string{"bfc.allow_growth=false"},
			map[string]float64{"num_allocs": 4097, "bytes_in_use": 0, "peak_bytes_in_use": 50352128, "largest_alloc_size": 41943040},
			nil},
		{"ExerciseCoalescing/tf-gpu", "tf/exercise-coalescing.jsonl", []string{"bfc.preset=tf-gpu"},
			map[string]float64{"num_allocs": 4097, "bytes_in_use": 0, "peak_bytes_in_use": 50352128, "largest_alloc_size": 41943040, "pool_bytes": 1 << 30},
			nil},
		{"AllocatedVsRequested", "tf/allocated-vs-requested.jsonl", []string{"bfc.allow_growth=false"},
			map[string]float64{"num_allocs": 1, "peak_bytes_in_use": 256},
			nil},
		{"CustomMemoryLimit", "tf/custom-limit.jsonl", []string{"bfc.allow_growth=false"},
			map[string]float64{"num_allocs": 1, "bytes_limit": 2 << 20},
			map[string]float64{"ok_allocs": 1, "failed_allocs": 1}},
		{"BinDebugInfo", "tf/bin-debug-info.jsonl", []string{"bfc.allow_growth=false"},
			map[string]float64{"num_allocs": 10, "peak_bytes_in_use": 15872, "bytes_in_use": 7936},
			nil},
		{"RegionGrowth", "tf/region-growth.jsonl", nil,
			map[string]float64{"regions": 8, "pool_bytes": 512 << 20, "curr_region_allocation_bytes": 512 << 20},
			nil},
		{"RegionDeallocation/no-gc", "tf/region-deallocation.jsonl", nil,
			map[string]float64{"regions": 8, "pool_bytes": 512 << 20},
			map[string]float64{"failed_allocs": 1, "device_release_calls": 0}},
		// TF ran this on a GPU, where a region can go anywhere, as on the
		// default (paged) device: with the default flags it succeeds.
		{"RegionDeallocation/gc", "tf/region-deallocation.jsonl", []string{"bfc.garbage_collection=true"},
			map[string]float64{"regions": 2, "pool_bytes": 2 << 30, "peak_pool_bytes": 2 << 30},
			map[string]float64{"failed_allocs": 0, "device_release_calls": 7}},
		// On a contiguous heap the region kept splits the device's own free
		// space, and the new region does not fit.
		{"RegionDeallocation/gc/first-fit", "tf/region-deallocation.jsonl", []string{"bfc.garbage_collection=true", "space.placement=first-fit"},
			nil,
			map[string]float64{"failed_allocs": 1, "device_release_calls": 7}},
		{"PhysicalAllocatorOomsFragmentation", "tf/fragmentation-oom.jsonl", nil,
			map[string]float64{"regions": 8, "pool_bytes": 512 << 20},
			map[string]float64{"failed_allocs": 1}},
		{"VirtualAllocatorPromotesReuse", "tf/fragmentation-oom.jsonl", []string{"bfc.coalescing_regions=true"},
			map[string]float64{"regions": 1, "pool_bytes": 512 << 20},
			map[string]float64{"failed_allocs": 0}},
		{"GrowthStart/growth", "tf/growth-start.jsonl", []string{"bfc.allow_growth=true"},
			map[string]float64{"pool_bytes": 2097152},
			nil},
		{"GrowthStart/no-growth", "tf/growth-start.jsonl", []string{"bfc.allow_growth=false"},
			map[string]float64{"pool_bytes": 2147483648},
			nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{bundled + tc.trace, "-a", "bfc"}
			for _, s := range tc.sets {
				args = append(args, "--set", s)
			}
			rep := replayJSON(t, args...)
			r := rep["traces"].([]any)[0].(map[string]any)["results"].([]any)[0].(map[string]any)
			st := r["allocator_stats"].(map[string]any)
			for k, want := range tc.stats {
				assert.Equal(t, want, st[k], "allocator_stats.%s", k)
			}
			for k, want := range tc.res {
				assert.Equal(t, want, r[k], k)
			}
		})
	}
}

// A bfc OOM carries TensorFlow's diagnostics and the cause in plain words;
// -o DIR holds the pool as MemoryDumps and TF's log text.
func TestOOMDiagnostics(t *testing.T) {
	rep := replayJSON(t, bundled+"tf/fragmentation-oom.jsonl", "-a", "bfc")
	r := rep["traces"].([]any)[0].(map[string]any)["results"].([]any)[0].(map[string]any)
	d, ok := r["oom_diagnostics"].(map[string]any)
	require.True(t, ok, "oom_diagnostics present")
	assert.Equal(t, "fragmentation", d["verdict"])
	assert.Equal(t, float64(508<<20), d["request_bytes"])
	assert.Equal(t, r["first_oom_line"], d["line"])
	assert.Len(t, d["occupancy"], 100)
	log := d["memory_log"].(string)
	assert.Contains(t, log, "Bin (256): \tTotal Chunks: ")
	assert.Equal(t, 8, strings.Count(log, "Next region of size "), "eight regions that cannot merge")
	assert.Contains(t, log, "Summary of in-use Chunks by size:")

	code, out, stderr := cli(t, "", "replay", bundled+"tf/fragmentation-oom.jsonl", "-a", "bfc")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "bfc ran out of memory allocating 508.00 MiB (rounded to 532676608)")
	assert.Contains(t, out, "fragmentation")

	// No OOM, no diagnostics.
	rep = replayJSON(t, bundled+"tf/fragmentation-oom.jsonl", "-a", "bfc", "--set", "bfc.coalescing_regions=true")
	r = rep["traces"].([]any)[0].(map[string]any)["results"].([]any)[0].(map[string]any)
	assert.NotContains(t, r, "oom_diagnostics")
}

// The dumps replay -o writes read back with inspect: the same chunks, and
// TensorFlow's BinDebugInfo layout at the peak (11 chunks, bins 0..4 with
// two chunks in use each, the free rest of the 1 GiB region in bin 20).
func TestInspectRoundTrip(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := cli(t, "", "replay", bundled+"tf/bin-debug-info.jsonl", "-a", "bfc",
		"--set", "bfc.allow_growth=false", "-o", dir, "-q")
	require.Equal(t, 0, code, stderr)
	dump := filepath.Join(dir, "tf-bin-debug-info.bfc.peak.memdump")
	require.FileExists(t, dump)

	code, out, stderr := cli(t, "", "inspect", dump, "-f", "json", "--chunks")
	require.Equal(t, 0, code, stderr)
	var ins struct {
		Summary struct {
			Chunks      int `json:"chunks"`
			ChunksInUse int `json:"chunks_in_use"`
			FreeChunks  int `json:"free_chunks"`
		} `json:"summary"`
		Chunks []struct {
			Addr  string `json:"addr"`
			Size  uint64 `json:"size"`
			InUse bool   `json:"in_use"`
		} `json:"chunks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &ins), out)
	assert.Equal(t, 11, ins.Summary.Chunks)
	assert.Equal(t, 10, ins.Summary.ChunksInUse)
	require.Len(t, ins.Chunks, 11)
	last := ins.Chunks[10]
	assert.False(t, last.InUse)
	assert.Equal(t, uint64(1073725952), last.Size)
	assert.Equal(t, "0x10000000000", ins.Chunks[0].Addr, "the virtual device starts at 1<<40")

	// The text report names the allocator and draws the strip.
	code, out, stderr = cli(t, "", "inspect", dump)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "bfc")
	assert.Regexp(t, `\|[*x_]{100}\|`, out)

	// --export writes a MemoryDump that reads back the same.
	again := filepath.Join(dir, "again.memdump")
	code, _, stderr = cli(t, "", "inspect", dump, "--export", again)
	require.Equal(t, 0, code, stderr)
	a, err := os.ReadFile(dump)
	require.NoError(t, err)
	b, err := os.ReadFile(again)
	require.NoError(t, err)
	assert.Equal(t, a, b, "export of an imported dump is byte-identical")
}

// A pasted TensorFlow OOM log, with its glog prefixes, is read and explained.
func TestInspectTFLog(t *testing.T) {
	code, out, stderr := cli(t, "", "inspect", "testdata/tf-oom.log")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "GPU_0_bfc")
	assert.Regexp(t, `\|[*x_]{100}\|`, out)
	assert.Contains(t, out, "fragmentation")

	code, _, stderr = cli(t, "", "inspect", "testdata/tf-oom.log", "-f", "yaml")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `unknown format "yaml"`)

	code, _, stderr = cli(t, "", "inspect", bundled+"README.md")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "README.md")
}

// Pasted logs of any TensorFlow release, damaged as pastes are, read from
// standard input: TF 1.12's "Chunk at" lines quoted with "> " and CRLF line
// ends get the verdict and figures of the log itself, and the tail of a
// TF 2.x dump (no headline, no chunk lines) is read, not refused.
func TestInspectPastedLogs(t *testing.T) {
	raw, err := os.ReadFile("../../diagnose/bfcdump/testdata/logs/tf1.12.log")
	require.NoError(t, err)
	pasted := "> " + strings.ReplaceAll(strings.TrimSuffix(string(raw), "\n"), "\n", "\r\n> ") + "\r\n"
	code, out, stderr := cli(t, pasted, "inspect", "-", "-f", "json")
	require.Equal(t, 0, code, stderr)
	var rep struct {
		Request struct {
			Rounded     uint64 `json:"rounded"`
			Approximate bool   `json:"approximate"`
		} `json:"request"`
		Summary struct {
			BytesInUse  uint64 `json:"bytes_in_use"`
			MemoryLimit uint64 `json:"memory_limit"`
		} `json:"summary"`
		Source struct {
			Partial bool `json:"partial"`
			Formats []struct {
				Kind       string `json:"kind"`
				TFVersions string `json:"tf_versions"`
			} `json:"formats"`
		} `json:"source"`
		Explanation struct {
			Verdict string `json:"verdict"`
		} `json:"explanation"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, "fragmentation", rep.Explanation.Verdict)
	assert.True(t, rep.Request.Approximate, "TF 1.12 prints the request only as 2.86MiB")
	assert.Equal(t, uint64(9<<20), rep.Summary.BytesInUse)
	assert.Equal(t, uint64(16<<20), rep.Summary.MemoryLimit)
	assert.False(t, rep.Source.Partial)
	assert.Contains(t, rep.Source.Formats, struct {
		Kind       string `json:"kind"`
		TFVersions string `json:"tf_versions"`
	}{"chunk lines", "0.8–1.13"})

	tail, err := os.ReadFile("../../diagnose/bfcdump/testdata/logs/partial-tail-only.log")
	require.NoError(t, err)
	code, out, stderr = cli(t, string(tail), "inspect", "-")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "The failed request is not in the pasted text")
	assert.Contains(t, out, "in use               9.0 MiB (9437184)            Stats InUse")
}

// TestJAXCaptureWithNoFlags replays a real JAX capture (JAX 0.11.2 on an
// H100, XLA_PYTHON_CLIENT_MEM_FRACTION=0.25) with no flags: the device
// allocator is picked past the pinned-host one, the capture is named as
// JAX's, and bfc, started as XLA configured its allocator (the pool
// reserved whole), puts every chunk where XLA did.
func TestJAXCaptureWithNoFlags(t *testing.T) {
	const capture = bundled + "h100/jax-prealloc.xplane.pb.gz"
	code, out, stderr := cli(t, "", "replay", capture, "-a", "bfc", "-f", "json")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "a JAX 0.11.2 capture: XLA's BFC allocator")
	assert.Contains(t, stderr, "the only device allocator picked")
	assert.Contains(t, stderr, "reserved its whole pool at the start")
	var rep struct {
		Traces []struct {
			Header struct {
				Source string `json:"source"`
			} `json:"header"`
			Results []struct {
				OptionsFromRecording []string                       `json:"options_from_recording"`
				AddressMatch         struct{ Checked, Matched int } `json:"recorded_address_match"`
				BlockMatch           struct{ Checked, Matched int } `json:"recorded_block_match"`
				PeakInUse            uint64                         `json:"peak_in_use_bytes"`
			} `json:"results"`
		} `json:"traces"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	tr := rep.Traces[0]
	assert.Equal(t, "jax-profiler", tr.Header.Source)
	r := tr.Results[0]
	assert.Equal(t, []string{"allow_growth"}, r.OptionsFromRecording, "XLA's: tsl's defaults, allow_growth = !preallocate")
	assert.Equal(t, 3378, r.AddressMatch.Checked)
	assert.Equal(t, r.AddressMatch.Checked, r.AddressMatch.Matched, "every recorded address")
	assert.Equal(t, 3378, r.BlockMatch.Checked)
	assert.Equal(t, r.BlockMatch.Checked, r.BlockMatch.Matched, "every recorded block size")
	var truth struct {
		Stats struct {
			Peak uint64 `json:"peak_bytes_in_use"`
		} `json:"memory_stats_at_end"`
	}
	data, err := os.ReadFile(bundled + "h100/jax-prealloc.truth.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &truth))
	assert.Equal(t, truth.Stats.Peak, r.PeakInUse, "JAX's own peak_bytes_in_use, as the device reported it")
}

// The prealloc capture replayed as if XLA_PYTHON_CLIENT_PREALLOCATE=false
// gives what JAX's memory_stats() reported on the same H100 for the same
// program run that way: peak_bytes_in_use 708,957,952 and peak_pool_bytes
// 1,109,393,408. The preallocated run's peak in use, 742,396,416, is
// 33,438,464 bytes more with the same requests: in one large region BFC
// hands out more chunks whole (it splits a free chunk only when at least
// twice the request, or 128 MiB more), and in use counts chunk sizes.
func TestJAXGrowthWhatIfMatchesTheDevice(t *testing.T) {
	code, out, stderr := cli(t, "", "replay", bundled+"h100/jax-prealloc.xplane.pb.gz", "-a", "bfc", "-q",
		"--set", "bfc.allow_growth=true", "-f", "json")
	require.Equal(t, 0, code, stderr)
	var rep struct {
		Traces []struct {
			Results []struct {
				PeakInUse    uint64 `json:"peak_in_use_bytes"`
				PeakReserved uint64 `json:"peak_reserved_bytes"`
			} `json:"results"`
		} `json:"traces"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	r := rep.Traces[0].Results[0]
	assert.Equal(t, uint64(708_957_952), r.PeakInUse)
	assert.Equal(t, uint64(1_109_393_408), r.PeakReserved)
}

// fit and advise on a JAX capture answer in XLA's terms: the memory limit
// as XLA_PYTHON_CLIENT_MEM_FRACTION of the GPU given, preallocating or
// not; every failed allocation counts (XLA has no fallback for one).
func TestJAXFitAndAdvise(t *testing.T) {
	const capture = bundled + "h100/jax-prealloc.xplane.pb.gz"
	const h100 = "85017493504"
	code, out, stderr := cli(t, "", "fit", capture, "-q", "--device-memory", h100, "-f", "json")
	require.Equal(t, 0, code, stderr)
	var fit struct {
		Source  string `json:"source"`
		Results []struct {
			Allocator       string `json:"allocator"`
			Min             uint64 `json:"min_capacity_bytes"`
			Env             string `json:"env"`
			ScratchFailures int64  `json:"scratch_failures"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &fit))
	assert.Equal(t, "jax-profiler", fit.Source)
	require.Len(t, fit.Results, 1)
	r := fit.Results[0]
	assert.Equal(t, "bfc", r.Allocator)
	assert.Zero(t, r.ScratchFailures)
	frac, ok := strings.CutPrefix(r.Env, "export XLA_PYTHON_CLIENT_MEM_FRACTION=")
	require.True(t, ok, r.Env)
	v, err := strconv.ParseFloat(frac, 64)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, uint64(v*85017493504), r.Min, "the fraction gives XLA the limit")

	code, out, stderr = cli(t, "", "fit", capture, "-q")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "bfc: XLA's memory limit (XLA_PYTHON_CLIENT_MEM_FRACTION of the GPU's memory); as recorded allow_growth=false")
	assert.Contains(t, out, "bytes ÷ the GPU's total memory: --device-memory SIZE writes it")

	code, out, stderr = cli(t, "", "fit", capture, "-q", "--device-memory", "500MiB")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "bfc: needs more than the GPU's 500.00 MiB (--device-memory)")
	assert.NotContains(t, out, "export XLA_PYTHON_CLIENT")

	code, out, stderr = cli(t, "", "advise", capture, "-q", "--device-memory", h100, "-f", "json")
	require.Equal(t, 0, code, stderr)
	var adv struct {
		Best struct {
			Env      string            `json:"env"`
			Settings map[string]string `json:"settings"`
		} `json:"best"`
		Candidates []struct {
			Env      string            `json:"env"`
			Settings map[string]string `json:"settings"`
		} `json:"candidates"`
		Notes []string `json:"notes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &adv))
	assert.Contains(t, adv.Best.Env, "XLA_PYTHON_CLIENT_MEM_FRACTION=")
	require.Len(t, adv.Candidates, 2, "XLA's one switch, preallocation, both ways")
	for _, c := range adv.Candidates {
		assert.Equal(t, []string{"allow_growth"}, slices.Collect(maps.Keys(c.Settings)))
		assert.Equal(t, c.Settings["allow_growth"] == "true", strings.Contains(c.Env, "XLA_PYTHON_CLIENT_PREALLOCATE=false"), c.Env)
	}
	assert.True(t, slices.ContainsFunc(adv.Notes, func(n string) bool {
		return strings.HasPrefix(n, "growing it needs") || strings.HasPrefix(n, "preallocating (JAX's default) it needs")
	}), "%q", adv.Notes)
}
