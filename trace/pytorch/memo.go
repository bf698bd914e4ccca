package pytorch

import (
	"fmt"
	"path"
)

// strTable interns the strings of a snapshot by content. Keys, actions,
// states and frame names repeat endlessly and are few; a string is kept
// once, with what the importer needs to know of it precomputed.
type strTable struct {
	list  []string
	index map[string]uint32
	key   []keyCode // the key a string spells, by id
	py    []bool    // whether a string is a file name ending in .py
	act   []action  // the trace action a string names
}

func newStrTable() strTable {
	t := strTable{index: map[string]uint32{}}
	t.intern(nil) // id 0: ""
	return t
}

// intern returns the id of the string b. A string cut at maxKeptString is
// marked so that it equals no whole string.
func (t *strTable) intern(b []byte) uint32 {
	if id, ok := t.index[string(b)]; ok {
		return id
	}
	s := string(b)
	id := uint32(len(t.list))
	t.list = append(t.list, s)
	t.index[s] = id
	var code keyCode
	for k, name := range keyNames {
		if name != "" && name == s {
			code = keyCode(k)
		}
	}
	t.key = append(t.key, code)
	t.py = append(t.py, path.Ext(s) == ".py")
	t.act = append(t.act, actionNames[s])
	return id
}

func (t *strTable) get(id uint32) string { return t.list[id] }

// memo is the pickle's memo: what PUT, BINPUT, LONG_BINPUT and MEMOIZE
// store and GET reads back. Indices are dense in every pickle Python writes
// (each MEMOIZE takes the next), so the memo is an array of pages of packed
// values. The slot of a dict that has been placed and spooled holds a
// marker, and a page of nothing but markers is given back: a snapshot's
// trace entries, each memoized once and never read again, leave no memory
// behind.
type memo struct {
	pages   []*memoPage
	live    []int32 // slots of each page that hold more than a marker
	written []int32 // slots of each page ever written
	retired []bool  // pages given back: every slot was written and holds the marker
	wide    map[uint32]value
	n       uint32 // slots ever written: where MEMOIZE writes next
}

const (
	memoPageBits = 12
	memoPageSize = 1 << memoPageBits
	// maxMemoIndex bounds memo indices: a snapshot of a billion memoized
	// objects would be far larger than any recording.
	maxMemoIndex = 1 << 30
	// packKindShift puts a value's kind above its 56-bit payload.
	packKindShift = 56
	packPayload   = 1<<packKindShift - 1
)

type memoPage [memoPageSize]uint64

// wideKind says whether a value needs more than 56 bits of payload and is
// kept in the memo's map instead. Python memoizes no numbers, so these are
// rare.
func wideKind(k kind) bool { return k == kInt || k == kUint || k == kBig || k == kFloat }

func pack(v value) uint64 {
	w := uint64(v.kind) << packKindShift
	switch v.kind {
	case kStr, kTag, kFrame:
		w |= uint64(v.aux)
	case kList, kDict:
		w |= v.bits & packPayload
	}
	return w
}

func unpack(w uint64) value {
	v := value{kind: kind(w >> packKindShift)}
	switch v.kind {
	case kStr, kTag, kFrame:
		v.aux = uint32(w & packPayload)
	case kList, kDict:
		v.bits = w & packPayload
	}
	return v
}

var spooledWord = pack(value{kind: kSpooled})

func (m *memo) put(idx uint32, v value) error {
	if idx >= maxMemoIndex {
		return fmt.Errorf("memo index %d is larger than any memory snapshot needs", idx)
	}
	p, i := idx>>memoPageBits, idx&(memoPageSize-1)
	if need := int(p) + 1 - len(m.pages); need > 0 {
		// One step, however far the index jumps.
		m.pages = append(m.pages, make([]*memoPage, need)...)
		m.live = append(m.live, make([]int32, need)...)
		m.written = append(m.written, make([]int32, need)...)
		m.retired = append(m.retired, make([]bool, need)...)
	}
	page := m.pages[p]
	if page == nil {
		page = new(memoPage)
		if m.retired[p] {
			for j := range page {
				page[j] = spooledWord
			}
			m.retired[p] = false
		}
		m.pages[p] = page
	}
	old := page[i]
	if old == 0 {
		m.n++
		m.written[p]++
	} else if old != spooledWord {
		m.live[p]--
	}
	if wideKind(kind(old >> packKindShift)) {
		delete(m.wide, idx)
	}
	page[i] = pack(v)
	if v.kind != kSpooled {
		m.live[p]++
	}
	if wideKind(v.kind) {
		if m.wide == nil {
			m.wide = map[uint32]value{}
		}
		m.wide[idx] = v
	}
	if m.live[p] == 0 && m.written[p] == memoPageSize {
		m.retire(p)
	}
	return nil
}

// replace changes what an index holds when the container there is reduced.
func (m *memo) replace(idx uint32, v value) {
	_ = m.put(idx, v) // idx was accepted by put before
}

func (m *memo) retire(p uint32) {
	m.pages[p] = nil
	m.retired[p] = true
}

// get returns what idx holds, and false if nothing was ever stored there.
func (m *memo) get(idx uint32) (value, bool) {
	p, i := idx>>memoPageBits, idx&(memoPageSize-1)
	if int(p) >= len(m.pages) {
		return value{}, false
	}
	if m.retired[p] {
		return value{kind: kSpooled}, true
	}
	page := m.pages[p]
	if page == nil || page[i] == 0 {
		return value{}, false
	}
	w := page[i]
	if wideKind(kind(w >> packKindShift)) {
		return m.wide[idx], true
	}
	return unpack(w), true
}
