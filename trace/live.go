package trace

import "math/bits"

// liveSet is the set of live allocations, keyed by id: an open-addressing
// hash table with linear probing and backward-shift deletion.
//
// Every alloc and every free of a trace looks its id up, so this is the
// Reader's busiest structure after the decoder. Compared with a Go map, the
// alloc costs one probe sequence instead of two (find the id, or the empty
// entry where it goes, then fill it), and so does the free (find it, then
// shift the entries after it back, which leaves no tombstones). Ids are
// spread over the table by Fibonacci hashing, multiplying by 2^64/φ, which
// scatters the sequential ids of generated traces and the aligned addresses
// of recorded ones alike.
//
// The table doubles when it is three-quarters full and never shrinks, so
// memory follows the peak number of live allocations, and nothing is
// allocated while the live set stays below that peak.
type liveSet struct {
	entries []liveEntry // len is a power of two, or 0
	n       int         // entries in use
	shift   uint        // 64 - log2(len(entries))
	touched uint64      // a sink for prefetch's loads
}

// liveEntry maps a live id to its slot; what else the Reader remembers of
// the allocation is kept by slot (Reader.slots), so that the table, the
// structure lookups wander over, stays 16 bytes an entry.
type liveEntry struct {
	key  uint64 // the id + 1; 0 marks an empty entry (ids are < 2^63)
	slot uint32
}

// minLiveEntries is the table's first size: room for 48 live allocations
// in 1 KiB.
const minLiveEntries = 64

// home returns the index where id's probe sequence starts.
func (s *liveSet) home(id uint64) int {
	return int((id * 0x9e3779b97f4a7c15) >> s.shift)
}

// find returns the index of id's entry and true if id is live, or the index
// of the empty entry where it would go (-1 if the table has none yet) and
// false.
func (s *liveSet) find(id uint64) (int, bool) {
	if len(s.entries) == 0 {
		return -1, false
	}
	mask := len(s.entries) - 1
	for i := s.home(id); ; i = (i + 1) & mask {
		switch s.entries[i].key {
		case id + 1:
			return i, true
		case 0:
			return i, false
		}
	}
}

// reserve makes room for one more entry, so that the index find returns for
// an id that is not live can be filled.
func (s *liveSet) reserve() {
	if (s.n+1)*4 <= len(s.entries)*3 {
		return
	}
	old := s.entries
	size := max(2*len(old), minLiveEntries)
	s.entries = make([]liveEntry, size)
	s.shift = uint(64 - bits.Len(uint(size-1)))
	for _, e := range old {
		if e.key != 0 {
			i, _ := s.find(e.key - 1)
			s.entries[i] = e
		}
	}
}

// put fills the empty entry i, which find returned for id, after reserve.
func (s *liveSet) put(i int, id uint64, slot uint32) {
	s.entries[i] = liveEntry{key: id + 1, slot: slot}
	s.n++
}

// removeAt empties entry i and moves back the entries after it that can no
// longer be found past the hole.
func (s *liveSet) removeAt(i int) {
	mask := len(s.entries) - 1
	s.n--
	for {
		s.entries[i] = liveEntry{}
		j := i
		for {
			j = (j + 1) & mask
			if s.entries[j].key == 0 {
				return
			}
			// Entry j stays unless its probe sequence, from its home h
			// to j, passes the hole at i: i in [h, j) cyclically.
			h := s.home(s.entries[j].key - 1)
			if (j-h)&mask >= (j-i)&mask {
				break
			}
		}
		s.entries[i] = s.entries[j]
		i = j
	}
}

// liveIDs is the Reader's table of live ids: liveSet, with a window of
// recent ids in front of it.
//
// Writers number allocations in order (mtrace recordings, PyTorch imports
// and generated traces alike), and most allocations are freed soon after
// they are made. So the ids of a trace's allocs rise one by one, and most
// frees name an id allocated not long before. The window holds the ids in
// [base, base+len(ring)) in a plain array indexed by the id itself: an
// alloc writes the entry next to the last one, which is in the cache, and
// a free of a recent id finds it without hashing or probing. An id that
// falls behind the window as it moves up is moved into the hash table,
// which therefore holds only ids below base; an id above the window was
// never allocated.
//
// Ids that do not rise (addresses, or a crafted trace's jumps) would make
// the window move far at every event and scan what it leaves behind. The
// scanning is paid for from a budget that grows with the events put, and
// once spent the window is turned off for good: every id then goes to the
// hash table, and the Reader costs what it cost without a window.
type liveIDs struct {
	hash liveSet
	ring []uint32 // ring[id&(len-1)] is the slot+1 of live id, or 0; len is a power of two, or 0
	base uint64   // the window's first id
	// inRing counts the live ids in the window; off is set once the
	// window is given up; scanned counts the entries the window has
	// looked at while moving or growing, puts the ids put.
	inRing        int
	off           bool
	scanned, puts uint64
}

const (
	minRing = 1 << 12
	maxRing = 1 << 22 // 16 MiB
	// ringBudget is how many window entries may be scanned per id put,
	// beyond a first allowance of twice the largest window, before the
	// window is turned off.
	ringBudget = 4
)

// inWindow reports whether id is at or above the window's base, and so
// either in the window or never allocated.
func (s *liveIDs) inWindow(id uint64) bool { return !s.off && len(s.ring) > 0 && id >= s.base }

// get returns the slot of live id.
func (s *liveIDs) get(id uint64) (uint32, bool) {
	if s.inWindow(id) {
		if id-s.base >= uint64(len(s.ring)) {
			return 0, false
		}
		if c := s.ring[id&uint64(len(s.ring)-1)]; c != 0 {
			return c - 1, true
		}
		return 0, false
	}
	if i, ok := s.hash.find(id); ok {
		return s.hash.entries[i].slot, true
	}
	return 0, false
}

// add makes id live with slot, unless it is live already: then it returns
// id's slot and false, and changes nothing.
func (s *liveIDs) add(id uint64, slot uint32) (uint32, bool) {
	if !s.off {
		if len(s.ring) == 0 {
			s.ring = make([]uint32, minRing)
			s.base = id
		}
		if id >= s.base {
			if id-s.base >= uint64(len(s.ring)) {
				s.advance(id)
			}
			if !s.off {
				c := &s.ring[id&uint64(len(s.ring)-1)]
				if *c != 0 {
					return *c - 1, false
				}
				*c = slot + 1
				s.inRing++
				s.puts++
				return slot, true
			}
		}
	}
	s.hash.reserve()
	i, ok := s.hash.find(id)
	if ok {
		return s.hash.entries[i].slot, false
	}
	s.hash.put(i, id, slot)
	s.puts++
	return slot, true
}

// remove makes live id not live and returns its slot; false if id was not
// live.
func (s *liveIDs) remove(id uint64) (uint32, bool) {
	if s.inWindow(id) {
		if id-s.base >= uint64(len(s.ring)) {
			return 0, false
		}
		c := &s.ring[id&uint64(len(s.ring)-1)]
		slot := *c
		if slot == 0 {
			return 0, false
		}
		*c = 0
		s.inRing--
		return slot - 1, true
	}
	i, ok := s.hash.find(id)
	if !ok {
		return 0, false
	}
	slot := s.hash.entries[i].slot
	s.hash.removeAt(i)
	return slot, true
}

// len returns the number of live ids.
func (s *liveIDs) len() int { return s.inRing + s.hash.n }

// advance moves the window up until id is its last entry, moving the live
// ids it leaves behind into the hash table. A well-used window doubles
// instead, up to maxRing. It turns the window off if that would overspend
// the scanning budget.
func (s *liveIDs) advance(id uint64) {
	for len(s.ring) < maxRing && s.inRing*4 >= len(s.ring) && id-s.base >= uint64(len(s.ring)) {
		s.scanned += uint64(len(s.ring))
		old := s.ring
		s.ring = make([]uint32, 2*len(old))
		for k := range uint64(len(old)) {
			at := s.base + k
			s.ring[at&uint64(len(s.ring)-1)] = old[at&uint64(len(old)-1)]
		}
	}
	if id-s.base < uint64(len(s.ring)) {
		return
	}
	nb := id - uint64(len(s.ring)) + 1
	cost := min(nb-s.base, uint64(len(s.ring)))
	if s.inRing == 0 {
		cost = 0
	}
	if s.scanned+cost > ringBudget*s.puts+2*maxRing {
		s.stop()
		return
	}
	s.scanned += cost
	for at := s.base; s.inRing > 0 && at < s.base+cost; at++ {
		c := &s.ring[at&uint64(len(s.ring)-1)]
		if *c != 0 {
			s.evict(at, *c-1)
			*c = 0
		}
	}
	s.base = nb
}

// evict moves live id, leaving the window, into the hash table.
func (s *liveIDs) evict(id uint64, slot uint32) {
	s.hash.reserve()
	i, _ := s.hash.find(id)
	s.hash.put(i, id, slot)
	s.inRing--
}

// stop turns the window off, moving its live ids into the hash table.
func (s *liveIDs) stop() {
	for k := uint64(0); s.inRing > 0 && k < uint64(len(s.ring)); k++ {
		at := s.base + k
		if c := s.ring[at&uint64(len(s.ring)-1)]; c != 0 {
			s.evict(at, c-1)
		}
	}
	s.ring = nil
	s.off = true
}

// prefetch touches the entries that the lookups of evs' ids will read
// first (the window's, or where their probe sequences in the hash table
// start), so that those lookups, a few events later, find them in the
// cache. The loads are independent and issued in one short loop, so they
// wait on memory together instead of each in turn: a table of a million
// live allocations is tens of megabytes, and a lookup that misses the
// cache otherwise costs more than all the rest of reading an event.
func (s *liveIDs) prefetch(evs []Event) {
	var sum uint64
	ring, mask := s.ring, uint64(len(s.ring)-1)
	for i := range evs {
		id := evs[i].ID
		if s.inWindow(id) {
			if id-s.base < uint64(len(ring)) {
				sum += uint64(ring[id&mask])
			}
		} else if len(s.hash.entries) > 0 {
			sum += s.hash.entries[s.hash.home(id)].key
		}
	}
	s.hash.touched += sum
}
