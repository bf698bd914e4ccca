package bfcdump

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func inspectText(t *testing.T, s *Snapshot, opt InspectOptions) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, WriteInspect(&b, s, opt))
	return b.String()
}

func inspectJSON(t *testing.T, s *Snapshot, withChunks bool) string {
	t.Helper()
	b, err := json.MarshalIndent(NewInspectReport(s, withChunks), "", "  ")
	require.NoError(t, err)
	return string(b) + "\n"
}

func TestInspectGolden(t *testing.T) {
	logSnap := parseFixture(t)
	dump, err := Marshal(fragSnapshot())
	require.NoError(t, err)
	dumpSnap, err := Unmarshal(dump)
	require.NoError(t, err)
	replay := wasteSnapshot()
	replay.Event, replay.Line = 41, 43

	for _, tc := range []struct {
		name string
		s    *Snapshot
	}{
		{"frag", fragSnapshot()},
		{"oom-log", logSnap},
		{"frag-memdump", dumpSnap},
		{"waste", replay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			golden(t, tc.name+".inspect.txt", inspectText(t, tc.s, InspectOptions{}))
			golden(t, tc.name+".inspect-chunks.txt", inspectText(t, tc.s, InspectOptions{Chunks: true}))
			golden(t, tc.name+".inspect.json", inspectJSON(t, tc.s, true))
		})
	}
}

func TestInspectText(t *testing.T) {
	out := inspectText(t, fragSnapshot(), InspectOptions{})
	lines := strings.Split(out, "\n")
	assert.Equal(t, "GPU_0_bfc: out of memory allocating 2.86MiB (rounded to 3000064)", lines[0])
	assert.Equal(t, "requested by op model/dense/MatMul", lines[1])
	assert.Contains(t, lines, "  pool                 14 MiB (14680064)")
	assert.Contains(t, lines, "  memory limit         16 MiB (16777216)")
	assert.Contains(t, lines, "  chunks               4 in use, 4 free")
	assert.Contains(t, lines, "  TF fragmentation     60.0%")
	assert.Contains(t, lines, "  |"+fragSnapshot().RenderOccupancy()+"|")
	assert.Contains(t, lines, "   * requested  x slack in in-use chunk  _ free")
	assert.Contains(t, lines, "explanation: fragmentation")
	for _, l := range lines[2:] {
		if !strings.HasPrefix(l, "  |") { // the strip is 104 columns
			assert.LessOrEqual(t, len(l), 78, "%q", l)
		}
	}
	assert.NotContains(t, out, "\nchunks\n")

	withChunks := inspectText(t, fragSnapshot(), InspectOptions{Chunks: true})
	assert.Contains(t, withChunks, "\nchunks\n")
	assert.Contains(t, withChunks, "  0x7f0000100000             524288              - free     11\n")
	assert.Contains(t, withChunks, "  0x7f0002000000            6291456        6291456 in use    -\n")
}

func TestInspectUnknowns(t *testing.T) {
	out := inspectText(t, parseFixture(t), InspectOptions{Chunks: true})
	assert.Contains(t, out, "  requested in use     unknown (not recorded)\n")
	assert.Contains(t, out, "   * in use  _ free (requested sizes not recorded)\n")
	assert.Contains(t, out, "  0x7f3a40000000               1280              ? in use    -\n")

	s := fragSnapshot()
	s.Regions, s.Stats.BytesLimit, s.Stats.PoolBytes, s.Request = nil, 0, 0, nil
	out = inspectText(t, s, InspectOptions{})
	assert.Contains(t, out, "GPU_0_bfc: BFC pool state\n")
	assert.Contains(t, out, "  memory limit         unknown\n")
	assert.Contains(t, out, "  unreserved           unknown\n")

	out = inspectText(t, &Snapshot{}, InspectOptions{})
	assert.Contains(t, out, "(unnamed allocator): BFC pool state\n")
	assert.Contains(t, out, "  <allocator contains no memory>\n")
	assert.NotContains(t, out, "bins (")
}

func TestInspectReportJSON(t *testing.T) {
	var back map[string]any
	require.NoError(t, json.Unmarshal([]byte(inspectJSON(t, fragSnapshot(), false)), &back))
	assert.Equal(t, "GPU_0_bfc", back["allocator"])
	assert.Equal(t, map[string]any{"bytes": 3000000.0, "rounded": 3000064.0, "op": "model/dense/MatMul"}, back["request"])
	assert.Equal(t, "fragmentation", back["explanation"].(map[string]any)["verdict"])
	assert.NotContains(t, back, "chunks", "chunks only when asked for")
	assert.NotContains(t, back, "event", "no replay position")
	summary := back["summary"].(map[string]any)
	for _, k := range []string{"pool_bytes", "bytes_in_use", "requested_in_use", "internal_waste", "free_in_pool",
		"largest_free_chunk", "unreserved", "memory_limit", "regions", "chunks", "chunks_in_use", "free_chunks", "tf_fragmentation"} {
		assert.Contains(t, summary, k)
	}
	bins := back["bins"].([]any)
	assert.Len(t, bins, 4, "only the non-empty bins")

	rep := NewInspectReport(&Snapshot{}, true)
	assert.NotNil(t, rep.Bins, "an empty list, not null")
	assert.Nil(t, rep.Request)
}

func TestInspectRejectsInvalid(t *testing.T) {
	s := fragSnapshot()
	s.Chunks[0].Size = 0
	assert.ErrorContains(t, WriteInspect(&strings.Builder{}, s, InspectOptions{}), "inspecting GPU_0_bfc: chunk 0")
}
