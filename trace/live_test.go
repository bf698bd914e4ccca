package trace

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// liveSet behaves as a map under random allocs and frees of ids that are
// dense, sparse, aligned like addresses, and at the ends of the id range.
func TestLiveSetMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, idOf := range []func(k uint64) uint64{
		func(k uint64) uint64 { return k },
		func(k uint64) uint64 { return 1<<40 + k*512 },
		func(k uint64) uint64 { return k * 0x9e3779b97f4a7c15 >> 1 },
		func(k uint64) uint64 { return 1<<63 - 1 - k },
	} {
		var s liveSet
		m := map[uint64]uint32{}
		for step := range 200_000 {
			id := idOf(rng.Uint64N(uint64(1 + step/50)))
			i, ok := s.find(id)
			want, wantOK := m[id]
			require.Equal(t, wantOK, ok, "id %d", id)
			if ok {
				require.Equal(t, want, s.entries[i].slot)
			}
			if rng.IntN(2) == 0 {
				if ok {
					s.removeAt(i)
					delete(m, id)
				}
			} else if !ok {
				a := rng.Uint32()
				s.reserve()
				i, _ = s.find(id)
				s.put(i, id, a)
				m[id] = a
			}
			require.Equal(t, len(m), s.n)
		}
		for id, want := range m {
			i, ok := s.find(id)
			require.True(t, ok)
			require.Equal(t, want, s.entries[i].slot)
		}
	}
}

// liveIDs behaves as a map whatever the order of the ids: rising one by
// one as writers number them, with long-lived ones left behind; addresses;
// jumps far ahead and back; the ends of the id range.
func TestLiveIDsMatchesMap(t *testing.T) {
	for name, idOf := range map[string]func(rng *rand.Rand, step int) uint64{
		"rising": func(rng *rand.Rand, step int) uint64 {
			return uint64(step) - rng.Uint64N(min(uint64(step)+1, 1+uint64(rng.ExpFloat64()*5000)))
		},
		"addresses": func(rng *rand.Rand, step int) uint64 { return 1<<40 + rng.Uint64N(20_000)*16 },
		"jumps": func(rng *rand.Rand, step int) uint64 {
			if rng.IntN(8) == 0 {
				return rng.Uint64N(1 << 62)
			}
			return uint64(step) + rng.Uint64N(64)
		},
		"top": func(rng *rand.Rand, step int) uint64 { return 1<<63 - 1 - rng.Uint64N(uint64(step)+1) },
	} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			var s liveIDs
			m := map[uint64]uint32{}
			for step := range 300_000 {
				id := idOf(rng, step)
				got, ok := s.get(id)
				want, wantOK := m[id]
				require.Equal(t, wantOK, ok, "step %d: id %d", step, id)
				require.Equal(t, want, got, "step %d: id %d", step, id)
				if rng.IntN(2) == 0 {
					got, ok = s.remove(id)
					require.Equal(t, wantOK, ok, "step %d: remove %d", step, id)
					require.Equal(t, want, got)
					delete(m, id)
				} else {
					slot := rng.Uint32N(1 << 31)
					got, ok = s.add(id, slot)
					require.Equal(t, !wantOK, ok, "step %d: add %d", step, id)
					if wantOK {
						require.Equal(t, want, got)
					} else {
						m[id] = slot
					}
				}
				require.Equal(t, len(m), s.len())
			}
			for id, want := range m {
				got, ok := s.get(id)
				require.True(t, ok, "id %d", id)
				require.Equal(t, want, got)
			}
		})
	}
}

// The window stays on for ids that rise, scanning about one entry per id,
// and grows while many of its ids stay live; ids that jump turn it off
// before its scanning costs more than a few entries per id.
func TestLiveIDsWindow(t *testing.T) {
	for _, tc := range []struct {
		every   uint64 // one id in every lives on
		ring    int
		maxHash int
	}{
		{every: 1000, ring: minRing, maxHash: 3_000}, // the long-lived, behind the window
		{every: 3, ring: maxRing, maxHash: 0},        // all within the window
	} {
		var s liveIDs
		live := 0
		for id := range uint64(3_000_000) {
			_, ok := s.add(id, uint32(id))
			require.True(t, ok)
			live++
			if old := id - 50; id >= 50 && old%tc.every != 0 {
				_, ok = s.remove(old)
				require.True(t, ok, "id %d", old)
				live--
			}
		}
		require.False(t, s.off)
		require.Equal(t, tc.ring, len(s.ring))
		require.LessOrEqual(t, s.hash.n, tc.maxHash)
		require.Equal(t, live, s.len())
		require.LessOrEqual(t, s.scanned, 2*s.puts)
	}

	var j liveIDs
	rng := rand.New(rand.NewPCG(7, 8))
	for k := range uint64(1_000_000) {
		j.add(k<<24+rng.Uint64N(1<<20), uint32(k)) // each id a window's length past the last
	}
	require.True(t, j.off)
	require.LessOrEqual(t, j.scanned, ringBudget*j.puts+2*maxRing)
	require.Equal(t, 1_000_000, j.len())
}

// FuzzLiveIDs: any sequence of adds and removes, of ids that rise, jump,
// fall back or repeat, is answered as a map answers it, and the window
// never scans more than its budget allows.
func FuzzLiveIDs(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 1, 1, 0, 200, 2, 0, 3, 9})
	f.Add([]byte{0, 0, 0, 1, 0, 2, 0, 3, 3, 255, 0, 4, 1, 2, 2, 7})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var s liveIDs
		m := map[uint64]uint32{}
		var last uint64
		for k := 0; k+1 < len(ops); k += 2 {
			arg := uint64(ops[k+1])
			var id uint64
			switch ops[k] % 4 {
			case 0: // the next ids, one by one
				id = last + 1 + arg%3
			case 1: // one not long ago
				id = last - min(last, arg)
			case 2: // far ahead
				id = last + arg<<20
			case 3: // anywhere
				id = arg * 0x9e3779b97f4a7c15 >> 2
			}
			last = max(last, id)
			got, ok := s.get(id)
			want, wantOK := m[id]
			require.Equal(t, wantOK, ok, "op %d: id %d", k/2, id)
			require.Equal(t, want, got)
			if ops[k]&4 != 0 {
				got, ok = s.remove(id)
				require.Equal(t, wantOK, ok)
				require.Equal(t, want, got)
				delete(m, id)
			} else {
				_, ok = s.add(id, uint32(k))
				require.Equal(t, !wantOK, ok)
				if !wantOK {
					m[id] = uint32(k)
				}
			}
			require.Equal(t, len(m), s.len())
			require.LessOrEqual(t, s.scanned, ringBudget*s.puts+4*maxRing)
		}
	})
}
