package bfcdump

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBins(t *testing.T) {
	bins := fragSnapshot().Bins()
	for b, s := range bins {
		assert.Equal(t, b, s.Bin)
		assert.Equal(t, BinSize(b), s.BinSize)
	}
	// Bin 11 [512 KiB, 1 MiB): one free and one in-use 512 KiB chunk.
	assert.Equal(t, BinSummary{Bin: 11, BinSize: 512 * kib, TotalChunks: 2, ChunksInUse: 1,
		BytesInBin: 1 * mib, BytesInUse: 512 * kib, RequestedInUse: 512 * kib}, bins[11])
	// Bin 12 [1 MiB, 2 MiB): 1 MiB in use, 1 MiB free, 1.5 MiB in use, 1.5 MiB free.
	assert.Equal(t, BinSummary{Bin: 12, BinSize: 1 * mib, TotalChunks: 4, ChunksInUse: 2,
		BytesInBin: 5 * mib, BytesInUse: 2560 * kib, RequestedInUse: 1000000 + 1200000}, bins[12])
	// Bin 13 [2 MiB, 4 MiB): the free 2 MiB chunk; bin 14 the in-use 6 MiB one.
	assert.Equal(t, int64(1), bins[13].TotalChunks)
	assert.Equal(t, int64(0), bins[13].ChunksInUse)
	assert.Equal(t, uint64(6*mib), bins[14].BytesInUse)
	var total int64
	for _, s := range bins {
		total += s.TotalChunks
	}
	assert.Equal(t, int64(8), total, "every chunk is counted once")
}
