package sim

import "math/bits"

// areaGrid accumulates rectangles of address × time into a fixed number of
// cells, for memory maps too large to keep block by block. Each cell holds
// the area (bytes × events) rectangles covered in it, in two layers (blocks
// and regions).
//
// A rectangle costs one step per row it crosses, not per cell: the columns
// it covers whole are added to a per-row difference array of bytes, and
// only its first and last columns are added as areas. The difference arrays
// are folded into the areas whenever the columns are merged and at the end.
//
// The grid grows to fit: the time axis covers [0, cols·width) and doubles
// width, merging neighbouring columns, when a rectangle ends past it; the
// address axis covers [lo, lo+rows·rowBytes), a span that is a power of two
// and aligned to itself, and doubles rowBytes, merging neighbouring rows,
// when a rectangle falls outside it.
type areaGrid struct {
	rows, cols   int
	lo, rowBytes uint64 // rowBytes is 0 until the first rectangle
	width        int64
	area         [2][]float64 // rows × cols
	rate         [2][]int64   // rows × (cols+1)
}

func newAreaGrid(rows, cols int) *areaGrid {
	g := &areaGrid{rows: rows, cols: cols, width: 1}
	for l := range g.area {
		g.area[l] = make([]float64, rows*cols)
		g.rate[l] = make([]int64, rows*(cols+1))
	}
	return g
}

// maxSpan bounds the address axis; no space hands out addresses near 2^64.
const maxSpan = 1 << 63

// add paints [addr, addr+size) over the events [t0, t1) into layer.
func (g *areaGrid) add(layer int, addr, size uint64, t0, t1 int64) {
	if size == 0 || t1 <= t0 {
		return
	}
	g.fitAddr(addr, addr+size)
	for t1 > int64(g.cols)*g.width {
		g.mergeCols()
	}
	w := g.width
	ws := bits.TrailingZeros64(uint64(w)) // w is a power of two: shift, not divide
	c0, c1 := t0>>ws, (t1-1)>>ws
	r0 := g.row(addr)
	r1 := g.row(addr + size - 1)
	area, rate := g.area[layer], g.rate[layer]
	for row := r0; row <= r1; row++ {
		start := g.lo + uint64(row)*g.rowBytes
		b := min(addr+size, start+g.rowBytes) - max(addr, start)
		a := area[row*g.cols:]
		if c0 == c1 {
			a[c0] += float64(b) * float64(t1-t0)
			continue
		}
		a[c0] += float64(b) * float64((c0+1)*w-t0)
		a[c1] += float64(b) * float64(t1-c1*w)
		if c1 > c0+1 {
			rr := rate[row*(g.cols+1):]
			rr[c0+1] += int64(b)
			rr[c1] -= int64(b)
		}
	}
}

func (g *areaGrid) row(addr uint64) int {
	return min(int((addr-g.lo)>>bits.TrailingZeros64(g.rowBytes)), g.rows-1) // rowBytes is a power of two
}

func (g *areaGrid) span() uint64 { return uint64(g.rows) * g.rowBytes }

// fitAddr grows the address axis until it covers [a, e).
func (g *areaGrid) fitAddr(a, e uint64) {
	if g.rowBytes == 0 {
		g.rowBytes = 1
		for g.lo = a &^ (g.span() - 1); e-g.lo > g.span() && g.span() < maxSpan; g.lo = a &^ (g.span() - 1) {
			g.rowBytes *= 2
		}
		return
	}
	for (a < g.lo || e-g.lo > g.span()) && g.span() < maxSpan {
		g.mergeRows()
	}
}

// mergeRows doubles rowBytes and realigns lo to the doubled span, in
// place: the old rows land in the lower half of the new ones (offset 0) or
// in the upper half (offset rows/2), and are folded in the order that never
// overwrites a row before it is read.
func (g *areaGrid) mergeRows() {
	newLo := g.lo &^ (2*g.span() - 1)
	half := g.rows / 2
	upper := g.lo != newLo
	for l := range g.area {
		mergeRowPairs(g.area[l], g.rows, g.cols, half, upper)
		mergeRowPairs(g.rate[l], g.rows, g.cols+1, half, upper)
	}
	g.lo, g.rowBytes = newLo, 2*g.rowBytes
}

// mergeRowPairs folds rows 2k and 2k+1 of a rows × cols array into row k
// (or row half+k when upper), and clears the rows left over.
func mergeRowPairs[T int64 | float64](a []T, rows, cols, half int, upper bool) {
	fold := func(to, from int) {
		dst := a[to*cols : (to+1)*cols]
		s0, s1 := a[2*from*cols:(2*from+1)*cols], a[(2*from+1)*cols:(2*from+2)*cols]
		for c := range dst {
			dst[c] = s0[c] + s1[c]
		}
	}
	if upper {
		for k := half - 1; k >= 0; k-- {
			fold(half+k, k)
		}
		clear(a[:half*cols])
		return
	}
	for k := range half {
		fold(k, k)
	}
	clear(a[half*cols:])
}

// fold adds the difference arrays into the areas and clears them.
func (g *areaGrid) fold() {
	for l := range g.area {
		for r := range g.rows {
			a := g.area[l][r*g.cols : (r+1)*g.cols]
			rr := g.rate[l][r*(g.cols+1) : (r+1)*(g.cols+1)]
			var run int64
			for c := range a {
				run += rr[c]
				a[c] += float64(run) * float64(g.width)
				rr[c] = 0
			}
			rr[g.cols] = 0
		}
	}
}

// mergeCols doubles width, merging neighbouring columns.
func (g *areaGrid) mergeCols() {
	g.fold()
	for l := range g.area {
		for r := range g.rows {
			a := g.area[l][r*g.cols : (r+1)*g.cols]
			for k := range a {
				v := 0.0
				if 2*k < len(a) {
					v = a[2*k]
					if 2*k+1 < len(a) {
						v += a[2*k+1]
					}
				}
				a[k] = v
			}
		}
	}
	g.width *= 2
}

// raster returns the fractions of each cell covered, cropped to the events
// [0, events) and the addresses [lo, hi).
func (g *areaGrid) raster(events int64, lo, hi uint64) *Raster {
	g.fold()
	if g.rowBytes == 0 || events == 0 {
		return &Raster{}
	}
	cols := int(min((events+g.width-1)/g.width, int64(g.cols)))
	r0, r1 := g.row(lo), g.row(hi-1)
	out := &Raster{
		Lo: g.lo + uint64(r0)*g.rowBytes, RowBytes: g.rowBytes,
		Rows: r1 - r0 + 1, Cols: cols, Width: g.width,
	}
	for l, dst := range []*[]float64{&out.InUse, &out.Reserved} {
		*dst = make([]float64, out.Rows*cols)
		for r := range out.Rows {
			for c := range cols {
				evs := min(g.width, events-int64(c)*g.width)
				(*dst)[r*cols+c] = g.area[l][(r0+r)*g.cols+c] / (float64(g.rowBytes) * float64(evs))
			}
		}
	}
	return out
}
