package sim

// slotTable is a table indexed by trace slot (trace.Event.Slot) that grows
// a page at a time. A slice grown by append would copy itself at every
// growth, about five times its final size in all for the hundreds of
// thousands of slots of a large trace, and leave each old copy behind for
// the collector, which then lets the heap grow to twice as much; pages are
// never copied, and none is thrown away.
type slotTable[T any] struct {
	pages []*[slotPage]T
}

// slotPage is how many slots a page holds: 4,096, a page of tens to a
// hundred kilobytes, small beside a trace that needs a table.
const (
	slotPageBits = 12
	slotPage     = 1 << slotPageBits
)

// at returns the entry of slot, which must have been grown to.
func (t *slotTable[T]) at(slot uint32) *T {
	return &t.pages[slot>>slotPageBits][slot&(slotPage-1)]
}

// grow makes room for slot.
func (t *slotTable[T]) grow(slot uint32) {
	for int(slot>>slotPageBits) >= len(t.pages) {
		t.pages = append(t.pages, new([slotPage]T))
	}
}

// len is how many slots the table has room for.
func (t *slotTable[T]) len() int { return len(t.pages) * slotPage }

// pagedList is a list that grows a page at a time, for the same reasons,
// and keeps its pages when it is emptied, to fill them again.
type pagedList[T any] struct {
	pages []*[slotPage]T
	n     int
}

func (l *pagedList[T]) add(v T) {
	if l.n>>slotPageBits == len(l.pages) {
		l.pages = append(l.pages, new([slotPage]T))
	}
	l.pages[l.n>>slotPageBits][l.n&(slotPage-1)] = v
	l.n++
}

// reset empties the list.
func (l *pagedList[T]) reset() { l.n = 0 }

// appendTo appends the list's entries to dst, in order.
func (l *pagedList[T]) appendTo(dst []T) []T {
	for i, p := range l.pages {
		if i*slotPage >= l.n {
			break
		}
		dst = append(dst, p[:min(slotPage, l.n-i*slotPage)]...)
	}
	return dst
}
