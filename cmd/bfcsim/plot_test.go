package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPlot(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		file string
	}{
		{[]string{"--kind", "memmap", "-a", "bfc"}, "m.png"},
		{[]string{"--kind", "memmap", "--color", "size"}, "m.svg"},
		{[]string{"--kind", "timeline"}, "t.png"},
		{[]string{"--kind", "occupancy", "-a", "naive", "--at", "100"}, "o.png"},
		{[]string{"-k", "fragmentation", "-a", "bfc,arena"}, "f.svg"},
		{[]string{"--kind", "latency"}, "l.png"},
	} {
		out := filepath.Join(dir, tc.file)
		args := append([]string{"plot", bundled + "cnn-infer.jsonl", "-o", out}, tc.args...)
		code, stdout, stderr := cli(t, "", args...)
		require.Equal(t, 0, code, "%v: %s", tc.args, stderr)
		assert.Empty(t, stdout)
		f, err := os.Open(out)
		require.NoError(t, err)
		if strings.HasSuffix(out, ".png") {
			img, err := png.Decode(f)
			require.NoError(t, err, tc.file)
			assert.Equal(t, 960, img.Bounds().Dx())
		} else {
			data, err := os.ReadFile(out)
			require.NoError(t, err)
			assert.Contains(t, string(data), "<svg")
		}
		f.Close()
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 6, "no temporary files left behind")
}

func TestPlotErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.png")
	tr := bundled + "cnn-infer.jsonl"
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"plot", tr, "--kind", "pie", "-o", out}, `unknown --kind "pie"`},
		{[]string{"plot", tr, "--kind", "memmap", "-o", "x.jpg"}, ".png or .svg"},
		{[]string{"plot", tr, "--kind", "memmap", "-a", "bfc,naive", "-o", out}, "shows one allocator"},
		{[]string{"plot", tr, "--kind", "occupancy", "--at", "99999", "-o", out}, "has 2955 events (0 to 2954)"},
		{[]string{"plot", tr, "--kind", "occupancy", "--at", "soon", "-o", out}, "want peak or an event index"},
		{[]string{"plot", tr, "--kind", "memmap", "--color", "age", "-o", out}, "want size or tag"},
		{[]string{"plot", tr, "--kind", "memmap"}, `"out" not set`},
		{[]string{"plot", tr, tr, "--kind", "memmap", "-o", out}, "plot takes one trace, got 2"},
	} {
		assertUsageError(t, tc.args, tc.msg)
	}
	_, err := os.Stat(out)
	assert.True(t, os.IsNotExist(err), "nothing written by a failed run")
}
