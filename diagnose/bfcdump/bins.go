package bfcdump

import "github.com/bfcsim/bfcsim/allocators/bfcstate"

// NumBins, BinNumForSize and BinSize are TensorFlow's bins, as bfcstate
// defines them for the allocator and for its dumps alike.
const NumBins = bfcstate.NumBins

// BinNumForSize returns the bin TF files a free chunk of n bytes in
// (bfcstate.BinNumForSize).
func BinNumForSize(n uint64) int { return bfcstate.BinNumForSize(n) }

// BinSize returns the smallest chunk size bin b holds, 256<<b
// (bfcstate.BinSize).
func BinSize(b int) uint64 { return bfcstate.BinSize(b) }

// minAllocationBits is TF's kMinAllocationBits: requests are rounded up to
// 256 bytes.
const minAllocationBits = bfcstate.MinAllocationBits

// invalidChunkHandle is TF's kInvalidChunkHandle, size_t(-1): the "next" of
// the last chunk of a region in DumpMemoryLog's chunk lines.
const invalidChunkHandle = ^uint64(0)

// roundedBytes rounds n up to a multiple of 256, as TF's RoundedBytes does;
// it saturates instead of wrapping for n within 255 of 2^64.
func roundedBytes(n uint64) uint64 {
	r := (n + (1<<minAllocationBits - 1)) &^ (1<<minAllocationBits - 1)
	if r < n {
		return n
	}
	return r
}

// BinSummary is one bin as TF's get_bin_debug_info counts it for
// DumpMemoryLog's bin lines and MemoryDump.bin_summary: every chunk, in use
// or free, in the bin its size maps to (BinNumForSize), so in-use chunks are
// counted too although only free chunks sit in a bin.
type BinSummary struct {
	Bin     int    `json:"bin"`
	BinSize uint64 `json:"bin_size"`
	// TotalChunks and BytesInBin count every chunk of the bin's sizes;
	// ChunksInUse and BytesInUse the in-use ones.
	TotalChunks int64  `json:"total_chunks"`
	ChunksInUse int64  `json:"chunks_in_use"`
	BytesInBin  uint64 `json:"bytes_in_bin"`
	BytesInUse  uint64 `json:"bytes_in_use"`
	// RequestedInUse is the client-requested bytes of the in-use chunks;
	// 0 when the source does not record them (a log).
	RequestedInUse uint64 `json:"requested_in_use"`
}

// Bins returns the 21 bin summaries over all of s's chunks, as
// get_bin_debug_info computes them.
func (s *Snapshot) Bins() [NumBins]BinSummary {
	var out [NumBins]BinSummary
	for b := range out {
		out[b].Bin, out[b].BinSize = b, BinSize(b)
	}
	for _, c := range s.Chunks {
		b := &out[BinNumForSize(c.Size)]
		b.TotalChunks++
		b.BytesInBin += c.Size
		if c.InUse {
			b.ChunksInUse++
			b.BytesInUse += c.Size
			b.RequestedInUse += c.Requested
		}
	}
	return out
}
