package allocators

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stale block — freed, its chunk or slot since reused at the same address —
// is refused rather than freeing the live block that replaced it.
func TestStaleBlockIsRefused(t *testing.T) {
	for _, name := range []string{"bfc", "aligned"} {
		sp := NewVirtualSpace(1<<30, CostModel{}, FirstFit)
		a, _, err := New(name, sp, Options{})
		require.NoError(t, err)
		x, err := a.Allocate(256, 0)
		require.NoError(t, err)
		require.NoError(t, a.Free(x))
		y, err := a.Allocate(256, 0)
		require.NoError(t, err)
		require.Equal(t, x.Addr, y.Addr, "%s reuses the address", name)
		assert.ErrorIs(t, a.Free(x), ErrNotLive, name)
		assert.NoError(t, a.Free(y), "%s: the live block is untouched", name)
		assert.ErrorIs(t, a.Free(y), ErrNotLive, "%s: double free", name)
	}
}

// TF computes the backpedal in single precision: 0.9 × 1.5 GiB rounds to a
// different 256-byte multiple in float32 than in float64.
func TestBFCBackpedalIsSinglePrecision(t *testing.T) {
	sp := NewVirtualSpace(1536<<20, CostModel{}, FirstFit)
	b := NewBFC(sp, BFCConfig{MemoryLimit: 2 << 30})
	_, err := b.Allocate(1024, 0)
	require.NoError(t, err)
	// The 1.5 GiB device refuses 2 GiB, then backpedals in float32:
	// 2147483648 → 1932735232 → 1739461632 → 1565515520, which fits. In
	// float64 the first step would give 1932735488 and the chain would end
	// at 1565516032.
	assert.Equal(t, int64(1565515520), b.Stats()["pool_bytes"])
	assert.Equal(t, int64(4), sp.Stats().ReserveCalls)
}

// A memory limit near 2^64 would overflow the doubling of the region size
// and spin forever; the option refuses it and NewBFC lowers it to
// MaxCapacity, so a failing request ends.
func TestBFCHugeMemoryLimit(t *testing.T) {
	sp := NewVirtualSpace(1<<30, CostModel{}, FirstFit)
	_, _, err := New("bfc", sp, Options{"memory_limit": "8EiB"})
	require.ErrorIs(t, err, ErrBadOption)
	assert.Contains(t, err.Error(), "at most 4EiB")

	for _, limit := range []uint64{1 << 63, 1<<64 - 1} {
		b := NewBFC(NewVirtualSpace(1<<30, CostModel{}, FirstFit), BFCConfig{MemoryLimit: limit})
		_, err := b.Allocate(1, 0) // backpedals to what the 1 GiB device has
		require.NoError(t, err)
		_, err = b.Allocate(2<<30, 0)
		assert.ErrorIs(t, err, ErrOutOfMemory)
		assert.Equal(t, int64(MaxCapacity), b.Stats()["bytes_limit"])
	}
}

// churn frees one of live, or allocates size() bytes and adds the block to
// live, at random.
func churn(t *testing.T, rng *rand.Rand, b *BFC, live *[]Block, size func() uint64) {
	t.Helper()
	if l := *live; len(l) > 0 && rng.IntN(2) == 0 {
		i := rng.IntN(len(l))
		require.NoError(t, b.Free(l[i]))
		l[i] = l[len(l)-1]
		*live = l[:len(l)-1]
		return
	}
	blk, err := b.Allocate(size(), 0)
	require.NoError(t, err)
	*live = append(*live, blk)
}

// LargestFreeBytes, cached between changes to the top bin, is always the
// largest free chunk a walk of the pool finds, through allocations and frees
// of every size class, region growth and coalescing.
func TestBFCLargestFreeBytesIsCurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	b := NewBFC(NewVirtualSpace(64<<30, CostModel{}, FirstFit), BFCConfig{AllowGrowth: true})
	var live []Block
	for step := range 20_000 {
		churn(t, rng, b, &live, func() uint64 {
			size := uint64(1) << rng.IntN(28)
			return size + rng.Uint64N(size)
		})
		var want uint64
		b.WalkChunks(func(c Chunk) {
			if !c.InUse {
				want = max(want, c.Size)
			}
		})
		require.Equal(t, want, b.LargestFreeBytes(), "after step %d", step)
	}
}

// A checkpoint describes the pool as it was when saved, through random
// allocations and frees between saves, and across the wrap of the
// checkpoints' generation count, where every chunk is copied again.
func TestCheckpointSnapshot(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	b := NewBFC(NewVirtualSpace(64<<30, CostModel{}, FirstFit), BFCConfig{AllowGrowth: true})
	var live []Block
	for round := range 60 {
		for range rng.IntN(300) {
			churn(t, rng, b, &live, func() uint64 { return 1 + rng.Uint64N(1<<20) })
		}
		b.Checkpoint()
		want := b.Snapshot()
		if round == 30 {
			b.cp.gen = math.MaxUint32 - 1 // the next two saves wrap it
		}
		for range rng.IntN(100) { // changes after the save are not in it
			blk, err := b.Allocate(1+rng.Uint64N(1<<16), 0)
			require.NoError(t, err)
			live = append(live, blk)
		}
		require.Equal(t, want, b.CheckpointSnapshot(), "round %d", round)
	}
}

// A region the recording reserved (RecordedReserve, before the allocation
// that made the pool grow) is put at its address when bfc grows by a
// region of that size; another size, or an address outside the space, is
// placed by the space as usual, and the notice lasts one allocation.
func TestBFCRecordedRegions(t *testing.T) {
	const mib = 1 << 20
	sp := NewVirtualSpace(1<<30, CostModel{}, Paged)
	b := NewBFC(sp, BFCConfig{AllowGrowth: true})
	at := uint64(VirtualBase + 64<<30)

	b.RecordedReserve(at, 2*mib, 0)
	blk, err := b.Allocate(mib, 0)
	require.NoError(t, err)
	assert.Equal(t, at, blk.Addr, "the first region, 2 MiB, where the recording had it")

	b.RecordedReserve(at-100*mib, 8*mib, 0) // bfc grows by 4 MiB next: not this one
	blk, err = b.Allocate(3*mib, 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(VirtualBase), blk.Addr, "a region of another size is the space's to place")

	blk, err = b.Allocate(7*mib, 0) // the notice did not carry over
	require.NoError(t, err)
	assert.Equal(t, uint64(VirtualBase+4*mib), blk.Addr)

	b.RecordedReserve(1<<62, 16*mib, 0) // outside the space
	blk, err = b.Allocate(16*mib, 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(VirtualBase+12*mib), blk.Addr)
	followed, missed := b.RecordedRegions()
	assert.Equal(t, int64(1), followed)
	assert.Equal(t, int64(1), missed)
	assert.Zero(t, sp.Stats().FailedReserves, "a region that could not be placed is no failed device call")
}
