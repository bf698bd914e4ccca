//go:build unix

package allocators

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHostSpace(t *testing.T) {
	page := uint64(os.Getpagesize())
	sp, err := NewHostSpace(4*page, DefaultCostModel())
	require.NoError(t, err)
	defer sp.Close()

	a, err := sp.Reserve(1) // rounded up to a page
	require.NoError(t, err)
	assert.Zero(t, a%page)
	b, err := sp.Reserve(2 * page)
	require.NoError(t, err)
	sp.Touch(a, 1)
	sp.Touch(b, 2*page) // every page of the mapping is writable
	assert.Equal(t, 3*page, sp.Stats().ReservedBytes)

	_, err = sp.Reserve(2 * page)
	assert.ErrorIs(t, err, ErrOutOfMemory, "the capacity applies to real memory too")
	assert.Equal(t, int64(1), sp.Stats().FailedReserves)

	assert.ErrorIs(t, sp.Release(b+page, page), ErrNotLive, "part of a mapping")
	if a == b+2*page {
		// The kernel placed a right after b: one release may cover both,
		// as BFC's joined regions do.
		require.NoError(t, sp.Release(b, 3*page))
	} else {
		assert.ErrorIs(t, sp.Release(b, 3*page), ErrNotLive, "more than the mapping")
		require.NoError(t, sp.Release(b, 2*page))
		require.NoError(t, sp.Release(a, 1))
	}
	assert.ErrorIs(t, sp.Release(a, 1), ErrNotLive, "already released")
	st := sp.Stats()
	assert.Zero(t, st.ReservedBytes)
	assert.Equal(t, 3*page, st.PeakReservedBytes)
	assert.Panics(t, func() { sp.Touch(a, 1) }, "touching unmapped memory is a broken invariant")
}

// BFC over real memory: the blocks are real pointers that can be written.
func TestBFCOverHostSpace(t *testing.T) {
	sp, err := NewSpace(SpaceConfig{Kind: "host", Capacity: 64 << 20, Touch: true})
	require.NoError(t, err)
	defer sp.(*HostSpace).Close()
	a, _, err := New("bfc", sp, nil)
	require.NoError(t, err)
	var blocks []Block
	for _, n := range []uint64{1, 4096, 3 << 20, 100} {
		b, err := a.Allocate(n, 0)
		require.NoError(t, err)
		sp.(Toucher).Touch(b.Addr, n)
		blocks = append(blocks, b)
	}
	for _, b := range blocks {
		require.NoError(t, a.Free(b))
	}
	assert.Equal(t, int64(0), a.(StatsReporter).Stats()["bytes_in_use"])
}

// On the host the device grants whole pages. A memory limit that is not a
// multiple of the page size must still cap the pool: the last region is cut
// to whole pages instead of overshooting the limit.
func TestBFCHostPoolStaysUnderLimit(t *testing.T) {
	page := uint64(os.Getpagesize())
	sp, err := NewHostSpace(64<<20, CostModel{})
	require.NoError(t, err)
	defer sp.Close()
	limit := uint64(10<<20 + 256)
	b := NewBFC(sp, BFCConfig{MemoryLimit: limit, AllowGrowth: true})
	for _, size := range []uint64{2 << 20, 4 << 20, 4<<20 + 256, 1 << 20} {
		_, _ = b.Allocate(size, 0)
		pool := uint64(b.Stats()["pool_bytes"])
		assert.LessOrEqual(t, pool, limit, "after allocating %d bytes", size)
		assert.Zero(t, pool%page)
	}
	assert.LessOrEqual(t, sp.Stats().PeakReservedBytes, limit)
}
