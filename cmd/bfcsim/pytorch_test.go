package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const fixtures = "../../trace/pytorch/testdata/"

// addressMatch replays a trace against one allocator and returns its
// recorded_address_match.
func addressMatch(t *testing.T, path string, args ...string) (checked, matched int64) {
	t.Helper()
	rep := replayJSON(t, append([]string{path}, args...)...)
	r := rep["traces"].([]any)[0].(map[string]any)["results"].([]any)[0].(map[string]any)
	m, ok := r["recorded_address_match"].(map[string]any)
	require.True(t, ok, "the imported trace carries recorded addresses")
	return int64(m["checked"].(float64)), int64(m["matched"].(float64))
}

// Snapshots written by an independent Python model of PyTorch's caching
// allocator, imported and replayed with -a pytorch, reproduce every recorded
// address. (proto5-bigints needs the importer to infer the 24 KiB of slack
// PyTorch gave a block allocated before the recording, which the snapshot
// knows only by its requested size.)
func TestImportedSnapshotsReplayAtTheirAddresses(t *testing.T) {
	for _, tc := range []struct {
		file            string
		checked, missed int64
	}{
		{"small-large.pickle", 277, 0},
		{"small-large.json", 277, 0},
		{"streams.pickle", 219, 0},
		{"segments-only.pickle", 58, 0},
		{"proto5-bigints.pickle", 242, 0},
	} {
		out := filepath.Join(t.TempDir(), "t.jsonl")
		code, _, stderr := cli(t, "", "import", "pytorch", fixtures+tc.file, "-o", out)
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stderr, "imported ")
		checked, matched := addressMatch(t, out, "-a", "pytorch")
		assert.Equal(t, tc.checked, checked, tc.file)
		assert.Equal(t, tc.checked-tc.missed, matched, tc.file)
	}
}

func TestImportRefusesCode(t *testing.T) {
	out := filepath.Join(t.TempDir(), "t.jsonl")
	code, _, stderr := cli(t, "", "import", "pytorch", fixtures+"global.pickle", "-o", out)
	assert.Equal(t, 2, code)
	assert.Equal(t, "bfcsim: "+fixtures+"global.pickle: the pickle asks to run code (opcode GLOBAL at byte 20); a memory snapshot holds only plain data, so it is refused\n", stderr)
	assert.NoFileExists(t, out)
}

// traces/pytorch-train.jsonl is what its README commands make, and every
// recorded address of it replays in place; the what-if options run on it.
func TestBundledPyTorchTrace(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is needed to rebuild the bundled snapshot")
		}
		t.Skip("python3 not found: cannot rebuild the bundled snapshot")
	}
	dir := t.TempDir()
	snap := filepath.Join(dir, "train.pickle")
	cmd := exec.Command(python, fixtures+"make_snapshots.py", filepath.Join(dir, "fixtures"), snap)
	outb, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", outb)
	out := filepath.Join(dir, "t.jsonl")
	code, _, stderr := cli(t, "", "import", "pytorch", snap, "--name", "pytorch-train", "-o", out)
	require.Equal(t, 0, code, stderr)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	want, err := os.ReadFile(bundled + "pytorch-train.jsonl")
	require.NoError(t, err)
	assert.True(t, string(want) == string(got), "traces/pytorch-train.jsonl differs from its README commands")

	checked, matched := addressMatch(t, bundled+"pytorch-train.jsonl", "-a", "pytorch")
	assert.EqualValues(t, 5379, checked)
	assert.Equal(t, checked, matched)

	// Without -a, the recording's own allocator comes first, then the
	// default four; --set gives it options.
	rep := replayJSON(t, bundled+"pytorch-train.jsonl",
		"--set", "pytorch.max_split_size_mb=128", "--set", "pytorch.expandable_segments=true")
	results := rep["traces"].([]any)[0].(map[string]any)["results"].([]any)
	require.Len(t, results, 5)
	var names []string
	for _, r := range results {
		names = append(names, r.(map[string]any)["allocator"].(string))
	}
	assert.Equal(t, []string{"pytorch", "bfc", "arena", "aligned", "naive"}, names)
	r := results[0].(map[string]any)
	assert.Equal(t, "pytorch", r["allocator"])
	opts, _ := json.Marshal(r["options"])
	assert.Contains(t, string(opts), `"expandable_segments":true`)
	assert.Positive(t, r["peak_reserved_bytes"].(float64))
}

// Snapshots PyTorch itself recorded on GPUs, from public repositories
// whose licences cover them (trace/pytorch/testdata/real/README.md), replayed
// as they are, with no flag but -a pytorch: every recorded address is
// reproduced, the start state's included, and the settings the recording
// names are the ones replayed.
func TestRealSnapshots(t *testing.T) {
	for _, tc := range []struct {
		file     string
		checked  int64
		settings bool // the snapshot has allocator_settings
	}{
		{"assignment2-systems.pickle.gz", 2609, true},
		{"magma27-assignment2-systems.pickle.gz", 1950, true},
		{"nothanmin-assignment2-systems-forward.pickle.gz", 5883, true},
		{"decomfl.pickle.gz", 7946, true},
		{"octree-nca.pickle.gz", 1066, true},
		{"verl-segments-only.pickle.gz", 543, true},
		{"flexgen-torch2.0.pickle.gz", 460, false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			rep := replayJSON(t, fixtures+"real/"+tc.file, "-a", "pytorch")
			r := rep["traces"].([]any)[0].(map[string]any)["results"].([]any)[0].(map[string]any)
			m := r["recorded_address_match"].(map[string]any)
			assert.EqualValues(t, tc.checked, m["checked"])
			assert.Equal(t, m["checked"], m["matched"], "allocations at their recorded address")
			assert.Zero(t, r["failed_allocs"])
			from, _ := r["options_from_recording"].([]any)
			if tc.settings {
				assert.Contains(t, from, "expandable_segments")
				assert.Equal(t, false, r["options"].(map[string]any)["expandable_segments"])
			} else {
				assert.Empty(t, from)
			}
		})
	}

	real := fixtures + "real/assignment2-systems.pickle.gz"
	code, _, stderr := cli(t, "", "import", "pytorch", real, "-o", filepath.Join(t.TempDir(), "t.jsonl"))
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "imported 4,871 events (2,609 allocs, 2,162 frees; device 0, 447 allocations live when the recording started, "+
		"96 segments held then, 208 blocks of unknown size (freed during the recording; their requested sizes are used), "+
		"2 marks where phases the program named begin and end (external_annotations), allocator settings expandable_segments=false garbage_collection_threshold=0 max_split_size_mb=unlimited), peak live 3.59 GiB, to ",
		stderr[:strings.LastIndex(stderr, "to ")+3])
}

// The three-GPU snapshot of a run with expandable_segments:True that the
// pytorch model is checked against (public, but without a licence that
// would let it into the repository): each device replays at every recorded
// address with no flags, and device 1 runs out of memory where PyTorch did.
// Set BFCSIM_EXPANDABLE_SNAPSHOT to its path to run this; docs/allocators.md
// says where it comes from.
func TestExpandableSnapshot(t *testing.T) {
	path := os.Getenv("BFCSIM_EXPANDABLE_SNAPSHOT")
	if path == "" {
		t.Skip("BFCSIM_EXPANDABLE_SNAPSHOT is not set")
	}
	for dev, want := range []struct{ checked, ooms int64 }{{2434, 0}, {199, 1}, {392, 0}} {
		out := filepath.Join(t.TempDir(), "t.jsonl")
		code, _, stderr := cli(t, "", "import", "pytorch", path, "--device", fmt.Sprint(dev), "-o", out)
		require.Equal(t, 0, code, stderr)
		rep := replayJSON(t, out, "-a", "pytorch")
		r := rep["traces"].([]any)[0].(map[string]any)["results"].([]any)[0].(map[string]any)
		m := r["recorded_address_match"].(map[string]any)
		assert.EqualValues(t, want.checked, m["checked"], "device %d", dev)
		assert.Equal(t, m["checked"], m["matched"], "device %d: allocations at their recorded address", dev)
		assert.EqualValues(t, want.ooms, r["failed_allocs"], "device %d", dev)
		if want.ooms > 0 {
			o := r["recorded_oom_match"].(map[string]any)
			assert.Equal(t, o["checked"], o["matched"], "device %d: the recorded out-of-memory failure", dev)
		}
	}
}

// writeJobSnapshot writes a PyTorch snapshot (JSON) of a job on three
// devices, of which devices 0 and 2 allocate, all freed by the end: device
// 0 three blocks of 256 KiB in a 2 MiB segment (small pool), device 2 five
// of 4 MiB in a 20 MiB one (large pool); device 1 nothing.
func writeJobSnapshot(t *testing.T) string {
	t.Helper()
	traces := make([][]map[string]any, 3)
	for _, dev := range []struct {
		d, n           int
		block, segment uint64
	}{{0, 3, 256 << 10, 2 << 20}, {2, 5, 4 << 20, 20 << 20}} {
		base := uint64(0x7f0000000000) + uint64(dev.d)<<36
		ev := []map[string]any{{"action": "segment_alloc", "addr": base, "size": dev.segment, "stream": 0}}
		for i := range dev.n {
			ev = append(ev, map[string]any{"action": "alloc", "addr": base + uint64(i)*dev.block, "size": dev.block, "stream": 0})
		}
		for i := range dev.n {
			for _, a := range []string{"free_requested", "free_completed"} {
				ev = append(ev, map[string]any{"action": a, "addr": base + uint64(i)*dev.block, "size": dev.block, "stream": 0})
			}
		}
		traces[dev.d] = append(ev, map[string]any{"action": "segment_free", "addr": base, "size": dev.segment, "stream": 0})
	}
	data, err := json.Marshal(map[string]any{"segments": []any{}, "device_traces": traces})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "job.json")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// A snapshot of several devices replays each device with allocations as a
// trace of its own, with the recording's allocator first and at every
// recorded address; --device picks one.
func TestReplayEveryDeviceOfASnapshot(t *testing.T) {
	snap := writeJobSnapshot(t)
	code, out, stderr := cli(t, "", "replay", snap, "-f", "json")
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "left out", "no device is left out")
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	traces := rep["traces"].([]any)
	require.Len(t, traces, 2, "device 1 has no allocations")
	for i, want := range []struct {
		name    string
		device  float64
		checked float64
	}{{"job-device0", 0, 3}, {"job-device2", 2, 5}} {
		tr := traces[i].(map[string]any)
		assert.Equal(t, want.name, tr["name"])
		assert.Equal(t, want.device, tr["device"])
		r := tr["results"].([]any)[0].(map[string]any)
		assert.Equal(t, "pytorch", r["allocator"], "the recording's own allocator first")
		m := r["recorded_address_match"].(map[string]any)
		assert.Equal(t, want.checked, m["checked"])
		assert.Equal(t, m["checked"], m["matched"])
	}

	rep = replayJSON(t, snap, "--device", "2", "-a", "pytorch")
	traces = rep["traces"].([]any)
	require.Len(t, traces, 1)
	assert.Equal(t, "job", traces[0].(map[string]any)["name"])
	assert.Equal(t, 2.0, traces[0].(map[string]any)["device"])

	// import takes one device, and says which others it leaves out.
	code, _, stderr = cli(t, "", "import", "pytorch", snap, "-o", filepath.Join(t.TempDir(), "t.jsonl"))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "the snapshot has allocations on other devices too (0), left out: pick one with --device")
}

// A snapshot from before PyTorch wrote allocator_settings is still a
// PyTorch recording: replayed by pytorch first, and advised in PyTorch's
// settings.
func TestSnapshotWithoutSettingsIsPyTorchs(t *testing.T) {
	snap := fixtures + "real/flexgen-torch2.0.pickle.gz"
	rep := replayJSON(t, snap, "-q")
	r := rep["traces"].([]any)[0].(map[string]any)["results"].([]any)[0].(map[string]any)
	assert.Equal(t, "pytorch", r["allocator"])

	code, out, stderr := cli(t, "", "advise", snap, "-q", "-j", "2")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "pytorch settings for the smallest device")
	assert.Contains(t, out, "PYTORCH_CUDA_ALLOC_CONF")
	assert.NotContains(t, out, "TF_")
}
