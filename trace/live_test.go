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
