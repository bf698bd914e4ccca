// Package paged holds tables that grow a page at a time.
//
// A slice grown by append copies itself at every growth: about five times
// its final size in all, for the hundreds of thousands of entries of a
// large trace, each old copy left behind for the collector, which then
// lets the heap grow to twice as much. Pages are never copied, and none is
// thrown away; an entry costs one more load to reach, from a page table
// small enough to stay in the cache.
package paged

import "iter"

// PageBits is log2 of the entries a page holds: 4,096, a page of tens to a
// hundred kilobytes, small beside a trace that needs a table.
const (
	PageBits = 12
	PageSize = 1 << PageBits
)

// Table is a table indexed by a dense index (a trace slot, a chunk
// handle) that grows a page at a time.
type Table[T any] struct {
	pages []*[PageSize]T
}

// At returns the entry of index i, which must have been grown to.
func (t *Table[T]) At(i uint32) *T {
	return &t.pages[i>>PageBits][i&(PageSize-1)]
}

// Grow makes room for index i. It is called for every entry written, so
// the check is kept small enough to inline, and adding pages apart.
func (t *Table[T]) Grow(i uint32) {
	if int(i>>PageBits) >= len(t.pages) {
		t.addPages(i)
	}
}

func (t *Table[T]) addPages(i uint32) {
	for int(i>>PageBits) >= len(t.pages) {
		t.pages = append(t.pages, new([PageSize]T))
	}
}

// All yields every entry the table has room for, with its index, in order.
func (t *Table[T]) All() iter.Seq2[uint32, *T] {
	return func(yield func(uint32, *T) bool) {
		for k, p := range t.pages {
			for i := range p {
				if !yield(uint32(k<<PageBits+i), &p[i]) {
					return
				}
			}
		}
	}
}

// Len is how many entries the table has room for.
func (t *Table[T]) Len() int { return len(t.pages) * PageSize }

// List is a list that grows a page at a time, for the same reasons, and
// keeps its pages when it is emptied, to fill them again.
type List[T any] struct {
	pages []*[PageSize]T
	n     int
}

// Add appends v.
func (l *List[T]) Add(v T) {
	if l.n>>PageBits == len(l.pages) {
		l.pages = append(l.pages, new([PageSize]T))
	}
	l.pages[l.n>>PageBits][l.n&(PageSize-1)] = v
	l.n++
}

// Len is how many entries the list holds.
func (l *List[T]) Len() int { return l.n }

// Reset empties the list.
func (l *List[T]) Reset() { l.n = 0 }

// AppendTo appends the list's entries to dst, in order.
func (l *List[T]) AppendTo(dst []T) []T {
	for i, p := range l.pages {
		if i*PageSize >= l.n {
			break
		}
		dst = append(dst, p[:min(PageSize, l.n-i*PageSize)]...)
	}
	return dst
}
