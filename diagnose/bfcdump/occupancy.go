package bfcdump

import (
	"math/bits"
	"slices"
	"strings"
)

// occupancyCells is TF's resolution for RenderOccupancy: 100 characters.
const occupancyCells = 100

// noMemory is what RenderOccupancy returns for an empty pool, as TF does.
const noMemory = "<allocator contains no memory>"

// span is one region with the index range [first, end) of its chunks in a
// slice of chunks sorted by address.
type span struct {
	Region
	first, end int
}

// layout returns chunks in address order (s.Chunks itself when already
// sorted) and the regions of PoolRegions with the chunks that lie wholly
// inside each. Chunks outside every region (a snapshot that does not
// Validate) belong to no span.
func (s *Snapshot) layout() ([]Chunk, []span) {
	chunks := s.Chunks
	if !slices.IsSortedFunc(chunks, byAddr) {
		chunks = slices.Clone(chunks)
		slices.SortStableFunc(chunks, byAddr)
	}
	regions := s.PoolRegions()
	spans := make([]span, len(regions))
	i := 0
	for k, r := range regions {
		end := satAdd(r.Addr, r.Size)
		for i < len(chunks) && chunks[i].Addr < r.Addr {
			i++
		}
		first := i
		for i < len(chunks) && chunks[i].Addr < end && satAdd(chunks[i].Addr, chunks[i].Size) <= end {
			i++
		}
		spans[k] = span{Region: r, first: first, end: i}
	}
	return chunks, spans
}

// RenderOccupancy draws the pool as TF's BFCAllocator::RenderOccupancy does:
// 100 characters over all regions laid end to end, in address order. Every
// cell starts '_' (free); for each in-use chunk the slack [ptr+requested,
// ptr+size) is painted 'x' and then the requested bytes [ptr, ptr+requested)
// '*'. A range of n bytes at offset o (the chunk's offset in its region plus
// the sizes of the regions before it) paints the cells from o*100/total to
// (o+n-1)*100/total inclusive, total being all regions' bytes: the end cell
// is that of the range's last byte, as in TF's RenderRegion. So a chunk
// paints at least one cell, however small, and a later chunk may overpaint a
// shared cell.
//
// Where an in-use chunk's requested size is unknown (0, as in a log) the
// whole chunk is painted '*': TF never has that case, and it is the honest
// reading of "in use". An empty pool gives "<allocator contains no memory>".
func (s *Snapshot) RenderOccupancy() string {
	chunks, spans := s.layout()
	var total uint64
	for _, sp := range spans {
		total = satAdd(total, sp.Size)
	}
	if total == 0 {
		return noMemory
	}
	cells := []byte(strings.Repeat("_", occupancyCells))
	paint := func(off, n uint64, ch byte) {
		first, last := cell(off, total), cell(satAdd(off, n)-1, total)
		for i := first; i <= last; i++ {
			cells[i] = ch
		}
	}
	var regionOffset uint64
	for _, sp := range spans {
		for _, c := range chunks[sp.first:sp.end] {
			if !c.InUse {
				continue
			}
			off := satAdd(regionOffset, c.Addr-sp.Addr)
			req := c.Requested
			if req == 0 || req > c.Size {
				req = c.Size
			}
			if req < c.Size {
				paint(satAdd(off, req), c.Size-req, 'x')
			}
			paint(off, req, '*')
		}
		regionOffset = satAdd(regionOffset, sp.Size)
	}
	return string(cells)
}

// cell is the strip cell of byte offset off: off*100/total, computed without
// overflow and clamped to the last cell.
func cell(off, total uint64) int {
	if off >= total {
		return occupancyCells - 1
	}
	hi, lo := bits.Mul64(off, occupancyCells)
	q, _ := bits.Div64(hi, lo, total) // hi < total since off < total
	return int(min(q, occupancyCells-1))
}

// satAdd is a + b, saturating at 2^64−1.
func satAdd(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return ^uint64(0)
	}
	return s
}
