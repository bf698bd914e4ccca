package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/allocators/cudadrv"
)

// fakeGPUs opens a fresh fake GPU of total bytes for every --space cuda
// open of the test, as the driver gives a fresh context each time, and
// keeps them all.
type fakeGPUs struct {
	name  string
	total uint64
	all   []*cudadrv.Fake
}

func withFakeGPU(t *testing.T, name string, total uint64) *fakeGPUs {
	t.Helper()
	g := &fakeGPUs{name: name, total: total}
	old := openCUDA
	openCUDA = func(int) (cudadrv.Driver, error) {
		f := cudadrv.NewFake(g.name, g.total)
		g.all = append(g.all, f)
		return f, nil
	}
	t.Cleanup(func() { openCUDA = old })
	return g
}

// clean checks that every GPU opened was called rightly and given back all
// it lent.
func (g *fakeGPUs) clean(t *testing.T) {
	t.Helper()
	for _, f := range g.all {
		assert.NoError(t, f.Misuse())
		assert.Equal(t, cudadrv.Usage{}, f.Live())
		assert.Equal(t, f.Total, f.Free)
	}
}

// calls counts the calls made to every GPU opened, by name.
func (g *fakeGPUs) calls() map[string]int {
	n := map[string]int{}
	for _, f := range g.all {
		for _, c := range f.Calls {
			n[c.Name]++
		}
	}
	return n
}

// Without a GPU, --space cuda says so in one line and exits 2, before
// reading anything.
func TestSpaceCudaWithoutGPU(t *testing.T) {
	if d, err := cudadrv.Open(0); err == nil {
		_ = d.Close()
		t.Skip("this machine has a GPU")
	} else if !errors.Is(err, cudadrv.ErrNoDriver) && !errors.Is(err, cudadrv.ErrNoDevice) {
		t.Skipf("the driver is there but failed otherwise: %v", err)
	}
	for _, args := range [][]string{
		{"replay", bundled + "random.jsonl", "--space", "cuda", "-a", "bfc"},
		{"calibrate", "--space", "cuda:1"},
	} {
		code, out, stderr := cli(t, "", args...)
		assert.Equal(t, exitBadInput, code, "%v", args)
		assert.Empty(t, out)
		assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
		assert.Contains(t, stderr, "bfcsim: --space cuda")
	}
}

// Mistakes with --space cuda are refused before any device is opened.
func TestSpaceCudaRefusals(t *testing.T) {
	g := withFakeGPU(t, "Fake GPU", 80<<30)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"replay", bundled + "random.jsonl", "--space", "cuda"}, "--space cuda replays one allocator at a time"},
		{[]string{"replay", bundled + "random.jsonl", "--space", "cuda:x", "-a", "bfc"}, "want cuda:N"},
		{[]string{"fit", bundled + "random.jsonl", "--space", "cuda", "-a", "bfc"}, "fit runs many replays at once"},
		{[]string{"sweep", bundled + "random.jsonl", "--space", "cuda", "--grid", "bfc.allow_growth=true,false"}, "sweep runs many replays at once"},
		{[]string{"calibrate", "--space", "host"}, "calibrate measures a GPU's calls"},
	} {
		code, _, stderr := cli(t, "", tc.args...)
		assert.Equal(t, exitBadInput, code, "%v", tc.args)
		assert.Contains(t, stderr, tc.msg, "%v", tc.args)
	}
	g.clean(t)
}

// A replay on a (fake) GPU reports the device time its calls took beside
// the model's, and gives the GPU back all it took.
func TestReplayOnFakeGPU(t *testing.T) {
	g := withFakeGPU(t, "Fake H100", 80<<30)
	code, out, stderr := cli(t, "", "replay", bundled+"transformer-train.jsonl", "--space", "cuda", "-a", "pytorch",
		"--set", "pytorch.expandable_segments=true", "-f", "json")
	require.Equal(t, 0, code, stderr)
	var rep struct {
		Traces []struct {
			Results []struct {
				Modeled  float64 `json:"modeled_device_seconds"`
				Measured *struct {
					Device  string  `json:"device"`
					Seconds float64 `json:"seconds"`
					Calls   int64   `json:"calls"`
				} `json:"measured_device"`
			} `json:"results"`
		} `json:"traces"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	r := rep.Traces[0].Results[0]
	require.NotNil(t, r.Measured)
	assert.Equal(t, "Fake H100", r.Measured.Device)
	assert.Positive(t, r.Measured.Calls)
	assert.Positive(t, r.Modeled)
	assert.Positive(t, g.calls()["cuMemMap"], "expandable segments map pages")
	g.clean(t)

	code, out, stderr = cli(t, "", "replay", bundled+"transformer-train.jsonl", "--space", "cuda", "-a", "bfc")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "(model ")
	assert.Contains(t, out, "bfc: on Fake H100, ")
	assert.Contains(t, out, "device calls took")

	dir := t.TempDir()
	code, _, stderr = cli(t, "", "replay", bundled+"transformer-train.jsonl", "--space", "cuda", "-a", "naive", "-q", "-o", dir)
	require.Equal(t, 0, code, stderr)
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	require.NoError(t, err)
	assert.Contains(t, string(page), "Measured device time")
	g.clean(t)
}

// calibrate times every call kind on the GPU, skips sizes it has no room
// for, prints the options and writes them where replay --costs reads them.
func TestCalibrateOnFakeGPU(t *testing.T) {
	g := withFakeGPU(t, "Fake GPU", 64<<30)
	path := filepath.Join(t.TempDir(), "costs.json")
	code, out, stderr := cli(t, "", "calibrate", "--space", "cuda", "--sizes", "2MiB,1GiB,4GiB,40GiB",
		"--repeat", "3", "--pages", "4", "-o", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "Fake GPU: 64.00 GiB total, 64.00 GiB free")
	assert.Contains(t, out, "40.00 GiB skipped: more than half the memory free")
	assert.Contains(t, out, "--set space.reserve_cost=")
	assert.Contains(t, out, "--set space.unmap_cost_per_gib=")
	assert.Contains(t, out, "a handle of 32.00 MiB (2 timed)")
	assert.Contains(t, stderr, "bfcsim replay --costs "+path)
	g.clean(t)
	calls := g.calls()
	assert.Equal(t, 3*4, calls["cuMemAlloc"], "a warm-up and 3 timed per size measured")
	assert.Equal(t, 4+2, calls["cuMemMap"], "4 handles of a page, 2 of 16")

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var c allocators.Calibration
	require.NoError(t, json.Unmarshal(data, &c))
	assert.Len(t, c.Segments, 3)
	assert.Len(t, c.Space, 8)

	c.Space["reserve_cost"] = "123us" // as if measured so
	data, err = json.Marshal(c)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
	code, out, stderr = cli(t, "", "replay", bundled+"random.jsonl", "-a", "naive", "--costs", path, "-f", "json")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"reserve_cost": "123µs"`)
	code, out, stderr = cli(t, "", "replay", bundled+"random.jsonl", "-a", "naive", "--costs", path,
		"--set", "space.reserve_cost=7us", "-f", "json")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"reserve_cost": "7µs"`, "--set wins over --costs")

	require.NoError(t, os.WriteFile(path, []byte(`{"bfcsim_costs":1,"space":{"placement":"paged"}}`), 0o644))
	code, _, stderr = cli(t, "", "replay", bundled+"random.jsonl", "-a", "naive", "--costs", path)
	assert.Equal(t, exitBadInput, code)
	assert.Contains(t, stderr, `"placement" is not a cost setting`)
}
