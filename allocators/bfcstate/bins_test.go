package bfcstate

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBinNumForSize(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		want int
	}{
		{0, 0}, {1, 0}, {255, 0}, {256, 0}, {511, 0}, {512, 1}, {768, 1}, {1023, 1}, {1024, 2},
		{256 << 19, 19}, {256<<20 - 1, 19}, {256 << 20, 20}, {1 << 30, 20}, {^uint64(0), 20},
	} {
		assert.Equal(t, tc.want, BinNumForSize(tc.n), "BinNumForSize(%d)", tc.n)
	}
}

func TestBinSize(t *testing.T) {
	assert.Equal(t, uint64(256), BinSize(0))
	assert.Equal(t, uint64(2048), BinSize(3))
	assert.Equal(t, uint64(256<<20), BinSize(NumBins-1))
	for b := range NumBins {
		assert.Equal(t, b, BinNumForSize(BinSize(b)), "a bin's size maps to the bin")
	}
}
