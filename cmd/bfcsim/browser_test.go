package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/internal/browsertest"
)

// The acceptance check of `replay -o`: index.html, opened in headless
// Chromium, shows every plot of every allocator and renders its tables.
// The screenshot is kept in $BFCSIM_ARTIFACTS when it is set.
func TestReplayOutIndexInBrowser(t *testing.T) {
	out := t.TempDir()
	code, _, stderr := cli(t, "", "replay", bundled+"transformer-train.jsonl", bundled+"fragmenter.jsonl",
		"--capacity", "8GiB", "-o", out)
	require.Equal(t, 0, code, stderr)
	index := filepath.Join(out, "index.html")
	html, err := os.ReadFile(index)
	require.NoError(t, err)

	shot := filepath.Join(t.TempDir(), "replay-index.png")
	if dir := os.Getenv("BFCSIM_ARTIFACTS"); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		shot = filepath.Join(dir, "replay-index.png")
	}
	page := browsertest.Open(t, index, shot)
	t.Logf("screenshot of %s: %s", index, shot)

	// Per trace: timeline, fragmentation and latency, and a memmap and an
	// occupancy map for each of the four allocators.
	const perTrace = 3 + 2*4
	assert.Equal(t, 2*perTrace, page.Images)
	assert.Equal(t, page.Images, page.LoadedImages, "broken images: %v", page.BrokenImages)
	assert.Equal(t, strings.Count(string(html), "<table"), page.Tables)
	assert.Greater(t, page.TableRows, 2*40, "the metric tables of both traces")
	st, err := os.Stat(shot)
	require.NoError(t, err)
	assert.Greater(t, st.Size(), int64(10_000))
}
