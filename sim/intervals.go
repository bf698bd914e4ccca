package sim

import (
	"fmt"

	"github.com/google/btree"
)

// span is a half-open address range [start, end).
type span struct{ start, end uint64 }

func (s span) String() string { return fmt.Sprintf("[%#x, %#x)", s.start, s.end) }

// intervalSet is a set of disjoint address ranges. With merge, touching
// ranges are joined, so the set describes a region of memory however it was
// built up; without, every range stays the unit it was added as.
type intervalSet struct {
	t     *btree.BTreeG[span]
	total uint64
	merge bool
}

func newIntervalSet(merge bool) *intervalSet {
	return &intervalSet{t: btree.NewG(16, func(a, b span) bool { return a.start < b.start }), merge: merge}
}

// floor returns the range with the largest start <= addr.
func (s *intervalSet) floor(addr uint64) (span, bool) {
	var out span
	found := false
	s.t.DescendLessOrEqual(span{start: addr}, func(x span) bool {
		out, found = x, true
		return false
	})
	return out, found
}

// ceil returns the range with the smallest start >= addr.
func (s *intervalSet) ceil(addr uint64) (span, bool) {
	var out span
	found := false
	s.t.AscendGreaterOrEqual(span{start: addr}, func(x span) bool {
		out, found = x, true
		return false
	})
	return out, found
}

// overlapping returns a range of the set that shares a byte with r.
func (s *intervalSet) overlapping(r span) (span, bool) {
	if p, ok := s.floor(r.start); ok && p.end > r.start {
		return p, true
	}
	if n, ok := s.ceil(r.start); ok && n.start < r.end {
		return n, true
	}
	return span{}, false
}

// add inserts r; it fails if r overlaps a range of the set.
func (s *intervalSet) add(r span) error {
	if o, ok := s.overlapping(r); ok {
		return fmt.Errorf("%v overlaps %v", r, o)
	}
	s.total += r.end - r.start
	if s.merge {
		if p, ok := s.floor(r.start); ok && p.end == r.start {
			s.t.Delete(p)
			r.start = p.start
		}
		if n, ok := s.ceil(r.end); ok && n.start == r.end {
			s.t.Delete(n)
			r.end = n.end
		}
	}
	s.t.ReplaceOrInsert(r)
	return nil
}

// covers reports whether r lies inside one range of the set.
func (s *intervalSet) covers(r span) bool {
	p, ok := s.floor(r.start)
	return ok && p.end >= r.end
}

// remove takes r out of the set; r must lie inside one range (and, without
// merge, be exactly one range).
func (s *intervalSet) remove(r span) error {
	p, ok := s.floor(r.start)
	if !ok || p.end < r.end || (!s.merge && p != r) {
		return fmt.Errorf("%v is not held", r)
	}
	s.t.Delete(p)
	if p.start < r.start {
		s.t.ReplaceOrInsert(span{p.start, r.start})
	}
	if r.end < p.end {
		s.t.ReplaceOrInsert(span{r.end, p.end})
	}
	s.total -= r.end - r.start
	return nil
}

func (s *intervalSet) len() int { return s.t.Len() }
