package paged

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A Table holds what a slice would, across pages, and All visits every
// entry it has room for, in order.
func TestTable(t *testing.T) {
	var tb Table[int]
	want := make([]int, 3*PageSize+5)
	for i := range want {
		tb.Grow(uint32(i))
		*tb.At(uint32(i)) = i * 7
		want[i] = i * 7
	}
	require.Equal(t, 4*PageSize, tb.Len())
	for i, w := range want {
		require.Equal(t, w, *tb.At(uint32(i)))
	}
	n := 0
	for i, v := range tb.All() {
		require.Equal(t, uint32(n), i)
		if n < len(want) {
			require.Equal(t, want[n], *v)
		} else {
			require.Zero(t, *v)
		}
		n++
	}
	require.Equal(t, tb.Len(), n)
	tb.Grow(10 * PageSize) // a jump grows every page before it
	require.Equal(t, 11*PageSize, tb.Len())
	require.Equal(t, want[5], *tb.At(5))
}

// A List appends across pages, and refills its pages once reset.
func TestList(t *testing.T) {
	var l List[int]
	for round, n := range []int{2*PageSize + 3, 5, PageSize} {
		l.Reset()
		var want []int
		for i := range n {
			l.Add(i + round)
			want = append(want, i+round)
		}
		require.Equal(t, n, l.Len())
		require.Equal(t, want, l.AppendTo(nil))
		require.Equal(t, append([]int{-1}, want...), l.AppendTo([]int{-1}))
	}
	require.Len(t, l.pages, 3, "pages kept")
}
