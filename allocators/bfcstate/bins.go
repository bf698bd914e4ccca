package bfcstate

import "math/bits"

// NumBins is the number of BFC bins (TF's kNumBins). Bin b holds free chunks
// of [256<<b, 256<<(b+1)) bytes; the last bin, 20, holds everything from
// 256 MiB up, so 21 bins cover any size.
const NumBins = 21

// MinAllocationBits is TF's kMinAllocationBits: every request is rounded
// up to a multiple of 1<<8 = 256 bytes, and bin 0 starts there.
const MinAllocationBits = 8

// BinNumForSize returns the bin TF files a free chunk of n bytes in:
// min(20, floor(log2(max(n, 256) >> 8))). Examples: 1 → 0, 511 → 0,
// 512 → 1, 1024 → 2, 1 GiB → 20.
func BinNumForSize(n uint64) int {
	v := max(n, 1<<MinAllocationBits) >> MinAllocationBits
	return min(NumBins-1, bits.Len64(v)-1)
}

// BinSize returns the smallest chunk size bin b holds, 256<<b: the figure
// DumpMemoryLog prints as "Bin (SIZE)". b must be in [0, NumBins).
func BinSize(b int) uint64 { return 1 << (MinAllocationBits + b) }
