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

// prefetch touches the entries where the probe sequences of evs' ids
// start, so that their lookups a few events later find them in the cache.
// The loads are independent and issued in one short loop, so they wait on
// memory together instead of each in turn; a table of a million live
// allocations is tens of megabytes, and a lookup that misses the cache
// otherwise costs more than all the rest of reading an event.
func (s *liveSet) prefetch(evs []Event) {
	if len(s.entries) == 0 {
		return
	}
	var sum uint64
	for i := range evs {
		sum += s.entries[s.home(evs[i].ID)].key
	}
	s.touched += sum
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
