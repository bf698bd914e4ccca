package bfcdump

import (
	"fmt"
	"math"
	"slices"
)

// Validate checks the invariants every reader and writer in this package
// relies on, and that any snapshot taken from a BFC pool satisfies:
//
//   - every chunk has a size above 0 and ends below 2^64;
//   - chunks are in address order and do not overlap;
//   - an in-use chunk's requested size is at most its size (free chunks keep
//     a stale requested size, which is not checked);
//   - regions, when given, are in address order, do not overlap, and every
//     chunk lies inside one region.
//
// Chunks need not cover their regions: a log may have lost lines.
func (s *Snapshot) Validate() error {
	var prevEnd uint64
	for i, c := range s.Chunks {
		if c.Size == 0 {
			return fmt.Errorf("chunk %d at %#x has size 0", i, c.Addr)
		}
		end := c.Addr + c.Size
		if end < c.Addr {
			return fmt.Errorf("chunk %d at %#x of size %d runs past the end of the address space", i, c.Addr, c.Size)
		}
		if i > 0 && c.Addr < prevEnd {
			prev := s.Chunks[i-1]
			if c.Addr < prev.Addr {
				return fmt.Errorf("chunk %d at %#x is out of address order (after %#x)", i, c.Addr, prev.Addr)
			}
			return fmt.Errorf("chunk %d at %#x overlaps the chunk at %#x of size %d", i, c.Addr, prev.Addr, prev.Size)
		}
		if c.InUse && c.Requested > c.Size {
			return fmt.Errorf("chunk %d at %#x is in use with %d bytes requested, more than its size %d", i, c.Addr, c.Requested, c.Size)
		}
		prevEnd = end
	}
	prevEnd = 0
	for i, r := range s.Regions {
		if r.Size == 0 {
			return fmt.Errorf("region %d at %#x has size 0", i, r.Addr)
		}
		end := r.Addr + r.Size
		if end < r.Addr {
			return fmt.Errorf("region %d at %#x of size %d runs past the end of the address space", i, r.Addr, r.Size)
		}
		if i > 0 && r.Addr < prevEnd {
			return fmt.Errorf("region %d at %#x overlaps or precedes the region before it", i, r.Addr)
		}
		prevEnd = end
	}
	if len(s.Regions) > 0 {
		ri := 0
		for i, c := range s.Chunks {
			for ri < len(s.Regions) && s.Regions[ri].Addr+s.Regions[ri].Size <= c.Addr {
				ri++
			}
			if ri == len(s.Regions) || c.Addr < s.Regions[ri].Addr || c.Addr+c.Size > s.Regions[ri].Addr+s.Regions[ri].Size {
				return fmt.Errorf("chunk %d at %#x of size %d lies outside every region", i, c.Addr, c.Size)
			}
		}
	}
	return nil
}

// PoolRegions returns the pool's regions in address order: s.Regions when
// the source recorded them, otherwise regions inferred from the chunks, a new
// one starting wherever a chunk does not begin at the end of the chunk before
// it. A MemoryDump records no regions, and two regions that happen to be
// adjacent in the address space cannot be told apart in it: they are
// inferred as one. The caller owns the returned slice.
func (s *Snapshot) PoolRegions() []Region {
	if len(s.Regions) > 0 {
		return slices.Clone(s.Regions)
	}
	chunks := s.Chunks
	if !slices.IsSortedFunc(chunks, byAddr) {
		chunks = slices.Clone(chunks)
		slices.SortStableFunc(chunks, byAddr)
	}
	var out []Region
	for _, c := range chunks {
		if n := len(out); n > 0 && out[n-1].Addr+out[n-1].Size == c.Addr {
			out[n-1].Size += c.Size
			continue
		}
		out = append(out, Region{Addr: c.Addr, Size: c.Size})
	}
	return out
}

func byAddr(a, b Chunk) int {
	switch {
	case a.Addr < b.Addr:
		return -1
	case a.Addr > b.Addr:
		return 1
	}
	return 0
}

// Summary is a snapshot's pool in figures, in bytes unless named otherwise.
type Summary struct {
	// PoolBytes is what the pool holds from the device: Stats.PoolBytes when
	// known, else the regions' total.
	PoolBytes uint64 `json:"pool_bytes"`
	// BytesInUse is the in-use chunks' total (chunk sizes, as TF counts);
	// Stats.BytesInUse when the snapshot has no chunks.
	BytesInUse uint64 `json:"bytes_in_use"`
	// RequestedInUse is what clients asked for in the in-use chunks; 0 when
	// the source does not record it (a log).
	RequestedInUse uint64 `json:"requested_in_use"`
	// InternalWaste is the slack inside in-use chunks, Σ size − requested
	// over in-use chunks whose requested size is known.
	InternalWaste uint64 `json:"internal_waste"`
	// FreeInPool is the free chunks' total (pool − in use without chunks).
	FreeInPool       uint64 `json:"free_in_pool"`
	LargestFreeChunk uint64 `json:"largest_free_chunk"`
	// Unreserved is the headroom the pool may still grow into,
	// memory limit − pool; 0 when the limit is unknown.
	Unreserved uint64 `json:"unreserved"`
	// MemoryLimit is TF's memory_limit_; 0 when unknown (a MemoryDump).
	MemoryLimit uint64 `json:"memory_limit"`
	Regions     int    `json:"regions"`
	Chunks      int    `json:"chunks"`
	ChunksInUse int    `json:"chunks_in_use"`
	FreeChunks  int    `json:"free_chunks"`
	// TFFragmentation is TF's metric over the chunks, (free in pool −
	// largest free chunk) / free in pool, in [0, 1]; 0 when nothing is free
	// (TF leaves that case undefined). It ignores Unreserved.
	TFFragmentation float64 `json:"tf_fragmentation"`
}

// Summarize computes s's Summary. It never fails: on a snapshot that does not
// Validate the figures are sums over whatever is there.
func (s *Snapshot) Summarize() Summary {
	var sum Summary
	regions := s.PoolRegions()
	sum.Regions = len(regions)
	for _, r := range regions {
		sum.PoolBytes += r.Size
	}
	if s.Stats.PoolBytes > 0 {
		sum.PoolBytes = uint64(s.Stats.PoolBytes)
	}
	for _, c := range s.Chunks {
		sum.Chunks++
		if !c.InUse {
			sum.FreeChunks++
			sum.FreeInPool += c.Size
			sum.LargestFreeChunk = max(sum.LargestFreeChunk, c.Size)
			continue
		}
		sum.ChunksInUse++
		sum.BytesInUse += c.Size
		if c.Requested > 0 && c.Requested <= c.Size {
			sum.RequestedInUse += c.Requested
			sum.InternalWaste += c.Size - c.Requested
		}
	}
	if len(s.Chunks) == 0 {
		sum.BytesInUse = uint64(max(s.Stats.BytesInUse, 0))
		if sum.PoolBytes > sum.BytesInUse {
			sum.FreeInPool = sum.PoolBytes - sum.BytesInUse
		}
	}
	if s.Stats.BytesLimit > 0 {
		sum.MemoryLimit = uint64(s.Stats.BytesLimit)
		if sum.MemoryLimit > sum.PoolBytes {
			sum.Unreserved = sum.MemoryLimit - sum.PoolBytes
		}
	}
	sum.TFFragmentation = tfFragmentation(sum.FreeInPool, sum.LargestFreeChunk)
	return sum
}

// tfFragmentation is TF's GetFragmentation over free bytes and the largest
// free chunk: 0 when nothing is free.
func tfFragmentation(free, largest uint64) float64 {
	if free == 0 || largest > free {
		return 0
	}
	f := float64(free-largest) / float64(free)
	if math.IsNaN(f) {
		return 0
	}
	return f
}
