package bfcdump

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fixture testdata/logs/tf1.10-partial.log is a TF 1.10 paste as users
// post them: the headline, 6 of the 21 bin lines, the "Bin for" block with
// the one free chunk (6.09 GiB) of the request's bin, 10 chunk lines of the
// pool's many, "..." and the Stats block. Its bin lines count more chunks
// than the chunk lines list (bin 4: 6 chunks, 2 in use, where 3 chunk lines
// are pasted), and its free chunk lines are all far smaller than the chunk
// under "Bin for".
const tf110Partial = "tf1.10-partial.log"

// gib609 is TF's "6.09GiB" as ParseLog reads it, 6.09 × 2^30 rounded: the
// chunk under "Bin for".
const gib609 = 6539087708

// reportBin is the report's row for bin b, or fails.
func reportBin(t *testing.T, rep InspectReport, b int) InspectBin {
	t.Helper()
	for _, r := range rep.Bins {
		if r.Bin == b {
			require.NotNil(t, r.Provenance, "bin %d: a log's bins say where they come from", b)
			return r
		}
	}
	require.Failf(t, "no such bin", "bin %d is not in the report: %+v", b, rep.Bins)
	return InspectBin{}
}

// TestTF110PartialPaste checks the report of a partial TF 1.10 paste: each
// pasted bin line's figures as TensorFlow printed them, the other bins
// counted over the chunk lines and said to be, and the free chunk under
// "Bin for" as a lower bound of the largest free chunk, which the verdict
// uses.
func TestTF110PartialPaste(t *testing.T) {
	s := readFixture(t, tf110Partial)
	inspectGolden(t, s, "tf1.10-partial.inspect.txt")
	golden(t, filepath.Join("logs", "tf1.10-partial.inspect.json"), inspectJSON(t, s, false))
	rep := NewInspectReport(s, false)

	// 1. The bin lines win over the chunk lines, column by column.
	assert.Equal(t, "bin lines and chunks", rep.BinsFrom)
	b4 := reportBin(t, rep, 4)
	assert.Equal(t, BinSummary{Bin: 4, BinSize: 4096, TotalChunks: 6, ChunksInUse: 2, BytesInBin: 24 * kib, BytesInUse: 8 * kib, RequestedInUse: 4 * kib},
		b4.BinSummary, "TF's line, not the 3 chunk lines (2 in use) pasted")
	assert.Equal(t, Provenance{Source: SourcePrinted, Exact: false, From: "bin line", Lines: "5"}, *b4.Provenance, "24.0KiB: rounded")
	b0 := reportBin(t, rep, 0)
	assert.Equal(t, int64(41), b0.TotalChunks, "not the 3 chunk lines")
	assert.Equal(t, int64(40), b0.ChunksInUse)
	assert.Equal(t, SourcePrinted, b0.Provenance.Source)
	b12 := reportBin(t, rep, 12)
	assert.Equal(t, int64(5), b12.TotalChunks, "not the 1 chunk line")
	assert.Equal(t, int64(5), b12.ChunksInUse)
	assert.InDelta(t, 6.25*mib, float64(b12.BytesInBin), float64(humanTolerance(6.25*mib)))
	assert.False(t, b12.Provenance.Exact, "TF rounds 6.25MiB to three digits")
	// Bins 3 and 9 have no bin line: counted over the chunk lines, a lower
	// bound of a partial paste.
	b3 := reportBin(t, rep, 3)
	assert.Equal(t, BinSummary{Bin: 3, BinSize: 2048, TotalChunks: 2, ChunksInUse: 2, BytesInBin: 4096, BytesInUse: 4096}, b3.BinSummary)
	assert.Equal(t, Provenance{Source: SourceAtLeast, From: "chunk lines (partial)", Lines: "10–19"}, *b3.Provenance)
	b9 := reportBin(t, rep, 9)
	assert.Equal(t, int64(1), b9.TotalChunks)
	assert.Equal(t, SourceAtLeast, b9.Provenance.Source)
	assert.Len(t, rep.Bins, 8, "bins 0–5 and 12 from their lines, 3 and 9 from chunk lines; none from nothing")
	// The bins bound the chunk counts better than the 10 chunk lines.
	assert.Equal(t, 54, rep.Summary.ChunksInUse)
	assert.Equal(t, 7, rep.Summary.FreeChunks)
	assert.Equal(t, SourceAtLeast, rep.Provenance["chunks"].Source)

	// 2. The free chunk under "Bin for" bounds the largest free chunk.
	assert.Equal(t, uint64(gib609), rep.Summary.LargestFreeChunk)
	assert.Equal(t, Provenance{Source: SourceAtLeast, From: `a free chunk under "Bin for"`, Lines: "9"}, rep.Provenance["largest_free_chunk"])
	assert.GreaterOrEqual(t, rep.Summary.FreeInPool, rep.Summary.LargestFreeChunk, "a free chunk is free memory")
	assert.Greater(t, rep.Summary.PoolBytes, uint64(1107296256+6*1<<30), "the pool holds the bytes in use and the free chunk")
	assert.Equal(t, SourceUnknown, rep.Provenance["tf_fragmentation"].Source, "a lower bound of the largest chunk does not give TF's metric")
	// The verdict: 1.0 GiB in use of 10.5 GiB leaves room for 8.49 GiB,
	// and the pool, at least 7.1 GiB, cannot grow by that much.
	assert.Equal(t, VerdictFragmentation, rep.Explanation.Verdict, rep.Explanation.Text)
	assert.Contains(t, rep.Explanation.Text, "so it can grow by at most 3.4 GiB")
	assert.Contains(t, rep.Explanation.Text, `the largest free chunk is at least 6.1 GiB, by a free chunk under "Bin for", line 9`)
	assert.Contains(t, rep.Explanation.RestsOn, `largest free chunk: a free chunk under "Bin for" (line 9)`)
	assert.NotContains(t, strings.Join(rep.Explanation.CannotKnow, " "), "the pool's size", "the verdict does not need it")

	// The text report says the same, with each bin's source.
	text := inspectText(t, s, InspectOptions{})
	lines := strings.Split(text, "\n")
	assert.Contains(t, lines, `  largest free chunk   at least 6.1 GiB             a free chunk under "Bin for", line 9`)
	assert.Contains(t, lines, "  bin   bin size   chunks   in use   bytes in bin   bytes in use   from")
	assert.Contains(t, lines, "    4    4.0 KiB        6        2         24 KiB        8.0 KiB   bin line 5")
	assert.Contains(t, lines, "    3    2.0 KiB        2        2        4.0 KiB        4.0 KiB   chunk lines (partial)")

	// And the JSON, as scripts read it.
	var js struct {
		Bins []struct {
			Bin            int    `json:"bin"`
			TotalChunks    int64  `json:"total_chunks"`
			ChunksInUse    int64  `json:"chunks_in_use"`
			BytesInBin     uint64 `json:"bytes_in_bin"`
			BytesInUse     uint64 `json:"bytes_in_use"`
			RequestedInUse uint64 `json:"requested_in_use"`
			Provenance     struct {
				Source string `json:"source"`
				From   string `json:"from"`
				Lines  string `json:"lines"`
			} `json:"provenance"`
		} `json:"bins"`
		BinsFrom string `json:"bins_from"`
		Summary  struct {
			LargestFreeChunk uint64 `json:"largest_free_chunk"`
		} `json:"summary"`
		Provenance map[string]Provenance `json:"provenance"`
	}
	require.NoError(t, json.Unmarshal([]byte(inspectJSON(t, s, false)), &js))
	assert.Equal(t, "bin lines and chunks", js.BinsFrom)
	require.Len(t, js.Bins, 8)
	assert.Equal(t, 4, js.Bins[4].Bin)
	assert.Equal(t, int64(6), js.Bins[4].TotalChunks)
	assert.Equal(t, int64(2), js.Bins[4].ChunksInUse)
	assert.Equal(t, uint64(24*kib), js.Bins[4].BytesInBin)
	assert.Equal(t, uint64(8*kib), js.Bins[4].BytesInUse)
	assert.Equal(t, uint64(4*kib), js.Bins[4].RequestedInUse)
	assert.Equal(t, "printed", js.Bins[4].Provenance.Source)
	assert.Equal(t, "5", js.Bins[4].Provenance.Lines)
	assert.Equal(t, 3, js.Bins[3].Bin)
	assert.Equal(t, "at-least", js.Bins[3].Provenance.Source)
	assert.Equal(t, "chunk lines (partial)", js.Bins[3].Provenance.From)
	assert.Equal(t, uint64(gib609), js.Summary.LargestFreeChunk)
	assert.Equal(t, "at-least", js.Provenance["largest_free_chunk"].Source)
	assert.Equal(t, "9", js.Provenance["largest_free_chunk"].Lines)
}

// TestBinForChunkState reads the free chunk under "Bin for" in each layout
// a paste gives it, and weighs it against the free chunk lines: the larger
// of the two is the bound.
func TestBinForChunkState(t *testing.T) {
	log := eraLog(t, "tf1.10-partial")
	sameLine := regexp.MustCompile(`Chunk State: \n[^\]]*\] `).ReplaceAllString(log, "Chunk State: ")
	require.NotEqual(t, log, sameLine)
	const larger = "Free  at 0x7f2d4c134300 of size 7516192768\n" // 7 GiB, after the last chunk line
	withLarger := strings.Replace(log, "...\n", larger+"...\n", 1)
	require.NotEqual(t, log, withLarger)
	for _, tc := range []struct {
		name, text string
		want       uint64
		from       string
	}{
		{"next line", log, gib609, `a free chunk under "Bin for"`},
		{"same line", sameLine, gib609, `a free chunk under "Bin for"`},
		{"same line wrapped at 80", hardWrap(sameLine, 80), gib609, `a free chunk under "Bin for"`},
		{"in_use as a word", strings.Replace(log, "in_use: 0 |", "in_use: false |", 1), gib609, `a free chunk under "Bin for"`},
		// The report said "unknown" for this one.
		{"no free chunk lines", dropLines(log, regexp.MustCompile(`Free  at`), 0, -1), gib609, `a free chunk under "Bin for"`},
		{"a larger free chunk line", withLarger, 7 << 30, "free chunk lines (partial)"},
		{"the chunk in use", strings.Replace(log, "in_use: 0 |", "in_use: 1 |", 1), 192 * kib, "free chunk lines (partial)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseLog(strings.NewReader(tc.text), tc.name)
			require.NoError(t, err)
			require.NotNil(t, s.Log.BinFor)
			require.Len(t, s.Log.BinFor.Chunks, 1, "one chunk state, its neighbours not counted")
			rep := NewInspectReport(s, false)
			assert.Equal(t, tc.want, rep.Summary.LargestFreeChunk)
			p := rep.Provenance["largest_free_chunk"]
			assert.Equal(t, SourceAtLeast, p.Source)
			assert.Equal(t, tc.from, p.From)
			assert.GreaterOrEqual(t, rep.Summary.FreeInPool, rep.Summary.LargestFreeChunk)
			assert.Equal(t, VerdictFragmentation, rep.Explanation.Verdict, rep.Explanation.Text)
		})
	}
}

// TestBinForChunkFits: a free chunk under "Bin for" larger than the
// request, beyond TF's rounding, is one that could have served it.
func TestBinForChunkFits(t *testing.T) {
	log := strings.Replace(eraLog(t, "tf1.10-partial"), "Size: 6.09GiB", "Size: 9.00GiB", 1)
	s, err := ParseLog(strings.NewReader(log), "fits")
	require.NoError(t, err)
	rep := NewInspectReport(s, false)
	assert.Equal(t, VerdictUnexplained, rep.Explanation.Verdict, rep.Explanation.Text)
	assert.Contains(t, rep.Explanation.Text, `a free chunk of 9.0 GiB under "Bin for" (line 9)`)
}

// TestPartialOldBinLines: before TF 1.4 the bin lines count only free
// chunks, so the bins without a pasted line are counted over the free chunk
// lines alone, and each bin's line still wins over its chunk lines.
func TestPartialOldBinLines(t *testing.T) {
	const pfx = "I tensorflow/core/common_runtime/bfc_allocator.cc:643] "
	log := pfx + "Bin (256): \tTotal Chunks: 1, Chunks in use: 0 256B allocated for chunks. 256B client-requested for chunks. 0B in use in bin. 0B client-requested in use in bin.\n" +
		pfx + "Bin (4096): \tTotal Chunks: 3, Chunks in use: 0 12.0KiB allocated for chunks. 0B client-requested for chunks. 0B in use in bin. 0B client-requested in use in bin.\n" +
		pfx + "Chunk at 0x7f0000000000 of size 256\n" +
		pfx + "Free  at 0x7f0000000100 of size 256\n" +
		pfx + "Free  at 0x7f0000000200 of size 2048\n" + // bin 3: no line
		pfx + "Chunk at 0x7f0000000a00 of size 2048\n" + // in use, not counted
		pfx + "Free  at 0x7f0000001200 of size 4096\n" // bin 4: its line says 3
	s, err := ParseLog(strings.NewReader(log), "old")
	require.NoError(t, err)
	rep := NewInspectReport(s, false)
	assert.Equal(t, "bin lines (free chunks only) and chunks", rep.BinsFrom)
	require.Len(t, rep.Bins, 3)
	assert.Equal(t, BinSummary{Bin: 0, BinSize: 256, TotalChunks: 1, BytesInBin: 256}, rep.Bins[0].BinSummary, "the line, not the 2 chunk lines")
	assert.Equal(t, BinSummary{Bin: 3, BinSize: 2048, TotalChunks: 1, BytesInBin: 2048}, rep.Bins[1].BinSummary, "the free chunk line alone")
	assert.Equal(t, SourceAtLeast, rep.Bins[1].Provenance.Source)
	assert.Equal(t, int64(3), rep.Bins[2].TotalChunks)
	assert.Equal(t, SourcePrinted, rep.Bins[2].Provenance.Source)
	assert.Equal(t, 5, rep.Summary.FreeChunks, "bins 0 and 4 by their lines, bin 3 by its chunk line")
	assert.Equal(t, uint64(4096), rep.Summary.LargestFreeChunk, "bin 4's line: at least its bin size")
	text := inspectText(t, s, InspectOptions{})
	assert.Contains(t, text, "counted over the pasted free chunk lines")
	assert.Contains(t, text, "    3    2.0 KiB        1        0        2.0 KiB            0 B   chunk lines (partial)\n")
}
