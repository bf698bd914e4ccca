package freetree

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type span struct{ start, size uint64 }

// model is the obvious slice implementation the tree must agree with.
type model []span

func (m *model) add(start, size uint64) bool {
	for _, s := range *m {
		if start < s.start+s.size && s.start < start+size {
			return false
		}
	}
	*m = append(*m, span{start, size})
	// sort and merge adjacent
	ms := *m
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && ms[j].start < ms[j-1].start; j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
	out := ms[:0]
	for _, s := range ms {
		if k := len(out); k > 0 && out[k-1].start+out[k-1].size == s.start {
			out[k-1].size += s.size
			continue
		}
		out = append(out, s)
	}
	*m = out
	return true
}

func (m *model) firstFit(size uint64) (uint64, bool) {
	for i, s := range *m {
		if s.size >= size {
			(*m)[i].start += size
			(*m)[i].size -= size
			if (*m)[i].size == 0 {
				*m = append((*m)[:i], (*m)[i+1:]...)
			}
			return s.start, true
		}
	}
	return 0, false
}

// take removes [start, start+size) if one span covers it.
func (m *model) take(start, size uint64) bool {
	for i, s := range *m {
		if s.start <= start && start+size <= s.start+s.size {
			rest := model{}
			if start > s.start {
				rest = append(rest, span{s.start, start - s.start})
			}
			if end := start + size; end < s.start+s.size {
				rest = append(rest, span{end, s.start + s.size - end})
			}
			*m = append((*m)[:i], append(rest, (*m)[i+1:]...)...)
			return true
		}
	}
	return false
}

func (t *Tree) spans() model {
	var out model
	t.Walk(func(start, size uint64) { out = append(out, span{start, size}) })
	return out
}

func TestTreeAgainstModel(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var tr Tree
		var m model
		const unit = 256
		require.NoError(t, tr.Add(0, 1<<20))
		m.add(0, 1<<20)
		var taken []span
		for step := range 3000 {
			if rng.IntN(4) == 0 {
				// Take a chosen range, which may or may not be free.
				start := uint64(rng.IntN(1<<20/unit)) * unit
				size := uint64(1+rng.IntN(40)) * unit
				ok := tr.Take(start, size)
				require.Equal(t, m.take(start, size), ok, "seed %d step %d: take [%d, +%d)", seed, step, start, size)
				if ok {
					taken = append(taken, span{start, size})
				}
			} else if rng.IntN(2) == 0 || len(taken) == 0 {
				size := uint64(1+rng.IntN(40)) * unit
				a, ok := tr.FirstFit(size)
				b, ok2 := m.firstFit(size)
				require.Equal(t, ok2, ok, "seed %d step %d", seed, step)
				require.Equal(t, b, a, "seed %d step %d", seed, step)
				if ok {
					taken = append(taken, span{a, size})
				}
			} else {
				i := rng.IntN(len(taken))
				s := taken[i]
				taken[i] = taken[len(taken)-1]
				taken = taken[:len(taken)-1]
				require.NoError(t, tr.Add(s.start, s.size))
				require.True(t, m.add(s.start, s.size))
			}
			require.Equal(t, m, tr.spans(), "seed %d step %d", seed, step)
			var largest, total uint64
			for _, s := range m {
				largest = max(largest, s.size)
				total += s.size
			}
			require.Equal(t, largest, tr.Largest())
			require.Equal(t, total, tr.TotalBytes())
			require.Equal(t, len(m), tr.Len())
		}
	}
}

func TestTreeOverlapAndCovers(t *testing.T) {
	var tr Tree
	require.NoError(t, tr.Add(1000, 100))
	assert.ErrorIs(t, tr.Add(1050, 10), ErrOverlap)
	assert.ErrorIs(t, tr.Add(950, 51), ErrOverlap)
	assert.ErrorIs(t, tr.Add(1099, 5), ErrOverlap)
	require.NoError(t, tr.Add(900, 100), "adjacent below merges")
	require.NoError(t, tr.Add(1100, 50), "adjacent above merges")
	assert.Equal(t, model{{900, 250}}, tr.spans())
	assert.True(t, tr.Covers(900, 250))
	assert.True(t, tr.Covers(1000, 10))
	assert.False(t, tr.Covers(899, 2))
	assert.False(t, tr.Covers(1100, 51))
	assert.True(t, tr.Overlaps(800, 101))
	assert.False(t, tr.Overlaps(800, 100))
	assert.False(t, tr.Overlaps(1150, 10))
	_, ok := tr.FirstFit(251)
	assert.False(t, ok)
	a, ok := tr.FirstFit(250)
	assert.True(t, ok)
	assert.Equal(t, uint64(900), a)
	assert.Equal(t, 0, tr.Len())
	assert.Equal(t, uint64(0), tr.Largest())
}

func BenchmarkFirstFitChurn(b *testing.B) {
	var tr Tree
	tr.Add(0, 1<<40)
	rng := rand.New(rand.NewPCG(1, 2))
	live := make([]span, 0, 1<<16)
	for range 1 << 15 {
		s := uint64(1+rng.IntN(1000)) * 256
		a, _ := tr.FirstFit(s)
		live = append(live, span{a, s})
	}
	b.ReportAllocs()
	for b.Loop() {
		i := rng.IntN(len(live))
		tr.Add(live[i].start, live[i].size)
		s := uint64(1+rng.IntN(1000)) * 256
		a, _ := tr.FirstFit(s)
		live[i] = span{a, s}
	}
}
