package sim

import (
	"fmt"

	"github.com/google/btree"
)

// span is a half-open address range [start, end).
type span struct{ start, end uint64 }

func (s span) String() string { return fmt.Sprintf("[%#x, %#x)", s.start, s.end) }

// intervalSet is a set of disjoint address ranges, each kept as the unit it
// was added as (touching ranges are not joined).
type intervalSet struct {
	t     *btree.BTreeG[span]
	total uint64
}

func newIntervalSet() *intervalSet {
	return &intervalSet{t: btree.NewG(16, func(a, b span) bool { return a.start < b.start })}
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
	s.t.ReplaceOrInsert(r)
	return nil
}

// run returns the ranges of the set that cover r without a gap, in order,
// starting with the one holding r.start; ok is false if a byte of r is not
// covered.
func (s *intervalSet) run(r span) (ranges []span, ok bool) {
	p, found := s.floor(r.start)
	if !found || p.end <= r.start {
		return nil, false
	}
	ranges = append(ranges, p)
	for p.end < r.end {
		n, found := s.ceil(p.end)
		if !found || n.start != p.end {
			return nil, false
		}
		ranges = append(ranges, n)
		p = n
	}
	return ranges, true
}

// covers reports whether every byte of r lies in the set's ranges.
func (s *intervalSet) covers(r span) bool {
	_, ok := s.run(r)
	return ok
}

// coversWhole reports whether r is exactly a run of whole ranges.
func (s *intervalSet) coversWhole(r span) bool {
	ranges, ok := s.run(r)
	return ok && ranges[0].start == r.start && ranges[len(ranges)-1].end == r.end
}

// remove takes out r, which must be exactly a run of whole ranges.
func (s *intervalSet) remove(r span) error {
	ranges, ok := s.run(r)
	if !ok || ranges[0].start != r.start || ranges[len(ranges)-1].end != r.end {
		return fmt.Errorf("%v is not held", r)
	}
	for _, x := range ranges {
		s.t.Delete(x)
	}
	s.total -= r.end - r.start
	return nil
}

func (s *intervalSet) len() int { return s.t.Len() }
