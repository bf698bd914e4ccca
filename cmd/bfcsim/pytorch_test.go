package main

import (
	"encoding/json"
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

	// Without -a, the allocator --set names joins the default four.
	rep := replayJSON(t, bundled+"pytorch-train.jsonl",
		"--set", "pytorch.max_split_size_mb=128", "--set", "pytorch.expandable_segments=true")
	results := rep["traces"].([]any)[0].(map[string]any)["results"].([]any)
	require.Len(t, results, 5)
	r := results[4].(map[string]any)
	assert.Equal(t, "pytorch", r["allocator"])
	opts, _ := json.Marshal(r["options"])
	assert.Contains(t, string(opts), `"expandable_segments":true`)
	assert.Positive(t, r["peak_reserved_bytes"].(float64))
}

// A snapshot PyTorch itself recorded on a GPU (trace/pytorch/testdata/real,
// gzip'd as it is kept), replayed as it is against the pytorch model:
// every recorded address is reproduced, the start state's included, and
// importing it says what it holds.
func TestRealSnapshot(t *testing.T) {
	const real = fixtures + "real/assignment2-systems.pickle.gz"
	checked, matched := addressMatch(t, real, "-a", "pytorch")
	assert.EqualValues(t, 2609, checked, "2,162 allocations in the trace, 447 live when it started")
	assert.Equal(t, checked, matched)

	code, _, stderr := cli(t, "", "import", "pytorch", real, "-o", filepath.Join(t.TempDir(), "t.jsonl"))
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "imported 4,869 events (2,609 allocs, 2,162 frees; device 0, 447 allocations live when the recording started, "+
		"96 segments held then, 208 blocks of unknown size (freed during the recording; their requested sizes are used)), peak live 3.59 GiB, to ", stderr[:strings.LastIndex(stderr, "to ")+3])
}
