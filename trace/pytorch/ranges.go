package pytorch

import "github.com/google/btree"

// mappedRange is a range of addresses mapped in an expandable segment,
// with the segment's stream and pool.
type mappedRange struct {
	lo, hi uint64
	stream int64
	small  bool
}

func (r mappedRange) sameSegment(o mappedRange) bool {
	return r.stream == o.stream && r.small == o.small
}

// rangeSet is a set of address ranges: disjoint, in a B-tree by start, and
// never two touching ranges of the same segment. Adding or removing a range
// costs O(log n) plus the ranges it covers, each of which it removes, so a
// walk of any recording costs O(n log n).
type rangeSet struct {
	t *btree.BTreeG[mappedRange]
}

func newRangeSet() *rangeSet {
	return &rangeSet{t: btree.NewG(16, func(a, b mappedRange) bool { return a.lo < b.lo })}
}

// remove takes [lo, hi) out of the set, cutting the ranges it overlaps.
func (s *rangeSet) remove(lo, hi uint64) {
	if hi <= lo {
		return
	}
	var hit []mappedRange
	// The range that starts before lo may reach into it.
	s.t.DescendLessOrEqual(mappedRange{lo: lo}, func(r mappedRange) bool {
		if r.hi > lo {
			hit = append(hit, r)
		}
		return false
	})
	s.t.AscendRange(mappedRange{lo: lo + 1}, mappedRange{lo: hi}, func(r mappedRange) bool {
		hit = append(hit, r)
		return true
	})
	for _, r := range hit {
		s.t.Delete(r)
		if r.lo < lo {
			left := r
			left.hi = lo
			s.t.ReplaceOrInsert(left)
		}
		if r.hi > hi {
			right := r
			right.lo = hi
			s.t.ReplaceOrInsert(right)
		}
	}
}

// add puts r in the set, over whatever it covered, joined with touching
// ranges of the same segment.
func (s *rangeSet) add(r mappedRange) {
	if r.hi <= r.lo {
		return
	}
	s.remove(r.lo, r.hi)
	if prev, ok := s.before(r.lo); ok && prev.hi == r.lo && prev.sameSegment(r) {
		s.t.Delete(prev)
		r.lo = prev.lo
	}
	if next, ok := s.t.Get(mappedRange{lo: r.hi}); ok && next.sameSegment(r) {
		s.t.Delete(next)
		r.hi = next.hi
	}
	s.t.ReplaceOrInsert(r)
}

// before returns the range that starts last before addr.
func (s *rangeSet) before(addr uint64) (mappedRange, bool) {
	var got mappedRange
	found := false
	if addr == 0 {
		return got, false
	}
	s.t.DescendLessOrEqual(mappedRange{lo: addr - 1}, func(r mappedRange) bool {
		got, found = r, true
		return false
	})
	return got, found
}

// gaps calls fn with each part of [lo, hi) the set does not cover, in order.
func (s *rangeSet) gaps(lo, hi uint64, fn func(lo, hi uint64)) {
	cur := lo
	if r, ok := s.before(lo + 1); ok && r.hi > cur {
		cur = r.hi
	}
	s.t.AscendRange(mappedRange{lo: lo + 1}, mappedRange{lo: hi}, func(r mappedRange) bool {
		if r.lo > cur {
			fn(cur, r.lo)
		}
		cur = max(cur, r.hi)
		return cur < hi
	})
	if cur < hi {
		fn(cur, hi)
	}
}

// each calls fn with every range, in address order.
func (s *rangeSet) each(fn func(mappedRange)) {
	s.t.Ascend(func(r mappedRange) bool {
		fn(r)
		return true
	})
}

// startState works out, on address ranges, which pages of expandable
// segments were mapped when the recording started, in one pass over the
// recording's segment_map and segment_unmap entries: a range the recording
// first touches by unmapping it was mapped then; one it first touches by
// mapping it was not; and one it never touches was mapped then if it is
// mapped at the end (a final segment). Memory grows with the distinct
// ranges touched, not with the number of entries.
type startState struct {
	touched *rangeSet // every range a map or an unmap covered
	held    *rangeSet // mapped at the start: first touched by an unmap
}

func newStartState() *startState {
	return &startState{touched: newRangeSet(), held: newRangeSet()}
}

// event takes one segment_map (unmap false) or segment_unmap of [lo, hi).
// An unmapped range's pool is the small one if its size is not a whole
// number of the large pool's 20 MiB pages.
func (st *startState) event(lo, hi uint64, stream int64, unmap bool) {
	if hi <= lo {
		return
	}
	if unmap {
		small := (hi-lo)%largePage != 0
		st.touched.gaps(lo, hi, func(a, b uint64) {
			st.held.add(mappedRange{lo: a, hi: b, stream: stream, small: small})
		})
	}
	st.touched.add(mappedRange{lo: lo, hi: hi})
}

// finish adds the final segments' ranges the recording never touched, and
// returns the ranges mapped at the start.
func (st *startState) finish(final []mappedRange) *rangeSet {
	for _, f := range final {
		st.touched.gaps(f.lo, f.hi, func(a, b uint64) {
			st.held.add(mappedRange{lo: a, hi: b, stream: f.stream, small: f.small})
		})
	}
	return st.held
}

// largePage is the large pool's expandable page (kLargeBuffer); the small
// pool's is smallBuffer.
const largePage = 20 << 20
