package allocators

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ptLayout renders p's pool as the datadriven "chunks" command does, one
// line per block, addresses relative to the virtual space's base.
func ptLayout(p *PyTorch) string {
	var sb strings.Builder
	p.WalkChunks(func(c Chunk) {
		state := fmt.Sprintf("free pool=%d", c.Bin)
		if c.InUse {
			state = fmt.Sprintf("in use requested=%d", c.Requested)
		}
		fmt.Fprintf(&sb, "seg %d +%#x size=%d %s\n", c.Region, c.Addr-VirtualBase, c.Size, state)
	})
	return sb.String()
}

func newPyTorchForTest(t *testing.T, capacity uint64, cfg PyTorchConfig) (*PyTorch, *VirtualSpace) {
	t.Helper()
	sp := NewVirtualSpace(capacity, CostModel{}, FirstFit)
	return NewPyTorch(sp, cfg), sp
}

func ptAlloc(t *testing.T, p *PyTorch, size uint64, stream int64) Block {
	t.Helper()
	b, err := p.AllocateOnStream(size, 0, stream)
	require.NoError(t, err)
	return b
}

func TestPyTorchRounding(t *testing.T) {
	for _, c := range []struct{ n, div, want uint64 }{
		{1200, 4, 1280}, // PyTorch's documented example
		{1024, 4, 1024}, // a power of two stays
		{1025, 4, 1280},
		{1536, 4, 1536}, // already on a step
		{4, 4, 4},
		{5000, 1, 5000}, // one division: nothing to do
		{3 << 20, 8, 3 << 20},
		{(3 << 20) + 1, 8, (3 << 20) + (256 << 10)},
		{(1 << 40) + 1, 2, (1 << 40) + (1 << 39)},
	} {
		assert.Equal(t, c.want, ptRoundupPower2NextDivision(c.n, c.div), "next division of %d in %d", c.n, c.div)
	}
	for _, c := range []struct{ n, div, want uint64 }{
		{0, 0, 512},
		{1, 0, 512},
		{512, 0, 512},
		{513, 0, 1024},
		{1200, 4, 1536}, // 1200 <= 512*4: plain rounding, not 1280
		{2048, 4, 2048},
		{4200, 4, 5120},
		{4200, 0, 4608},
		{4200, 16, 4608}, // 4200 <= 512*16
		{(100 << 20) + 1, 4, 112 << 20},
	} {
		assert.Equal(t, c.want, ptRoundSize(c.n, c.div), "round_size(%d) with %d divisions", c.n, c.div)
	}
}

// A block freed on one stream serves only that stream; a request on another
// stream is a miss even when the block would fit.
func TestPyTorchStreamIsolation(t *testing.T) {
	p, _ := newPyTorchForTest(t, 1<<30, DefaultPyTorchConfig())
	a := ptAlloc(t, p, 4*mib, 1)
	require.NoError(t, p.Free(a))
	b := ptAlloc(t, p, 4*mib, 2)
	assert.Equal(t, uint64(VirtualBase+20*mib), b.Addr, "stream 2 cannot use stream 1's segment")
	c := ptAlloc(t, p, 4*mib, 1)
	assert.Equal(t, a.Addr, c.Addr, "stream 1 reuses its own")
	// Stream 0 has nothing: its search lands on stream 1's blocks and misses.
	d := ptAlloc(t, p, 1*mib+512, 0)
	assert.Equal(t, uint64(VirtualBase+40*mib), d.Addr)
	assert.Equal(t, `seg 0 +0x0 size=4194304 in use requested=4194304
seg 0 +0x400000 size=16777216 free pool=1
seg 1 +0x1400000 size=4194304 in use requested=4194304
seg 1 +0x1800000 size=16777216 free pool=1
seg 2 +0x2800000 size=1049088 in use requested=1049088
seg 2 +0x2900200 size=19922432 free pool=1
`, ptLayout(p))
	assert.Equal(t, int64(3), p.Stats()["segment.all.current"])
}

// Best fit is keyed by (stream, size, address): with equal blocks on two
// streams, each stream takes its own lowest address; the largest free block
// is found across streams, negative ones included.
func TestPyTorchBestFitKey(t *testing.T) {
	p, _ := newPyTorchForTest(t, 1<<30, DefaultPyTorchConfig())
	var blocks []Block
	for _, s := range []int64{5, -3, 5, -3} {
		blocks = append(blocks, ptAlloc(t, p, 12*mib, s)) // a 12 MiB segment each
	}
	big := ptAlloc(t, p, 30*mib, -3)
	for _, b := range append(blocks, big) {
		require.NoError(t, p.Free(b))
	}
	assert.Equal(t, uint64(30*mib), p.LargestFreeBytes())
	x := ptAlloc(t, p, 11*mib, 5)
	y := ptAlloc(t, p, 11*mib, -3)
	assert.Equal(t, blocks[0].Addr, x.Addr, "stream 5's lowest 12 MiB block")
	assert.Equal(t, blocks[1].Addr, y.Addr, "stream -3's lowest 12 MiB block")
	z := ptAlloc(t, p, 13*mib, 5)
	assert.Equal(t, uint64(VirtualBase+78*mib), z.Addr, "stream -3's 30 MiB block is not stream 5's")
}

// Adopted recorded segments (segments=recorded): the allocations that
// follow land where the recording had them, and a recorded release gives
// the segment back once it is free.
func TestPyTorchRecordedSegments(t *testing.T) {
	cfg := DefaultPyTorchConfig()
	cfg.Segments = PyTorchSegmentsRecorded
	p, sp := newPyTorchForTest(t, 1<<30, cfg)
	base := uint64(VirtualBase)
	// In a recording, the segment comes just before the allocation that
	// made the program reserve it.
	p.RecordedReserve(base+40*mib, 20*mib, 7)
	a := ptAlloc(t, p, 5*mib, 7)
	p.RecordedReserve(base+2*mib, 2*mib, 7) // 2 MiB: a small-pool segment
	c := ptAlloc(t, p, 4096, 7)
	b := ptAlloc(t, p, 3*mib, 7)
	assert.Equal(t, uint64(22*mib), sp.Stats().ReservedBytes)
	assert.Equal(t, base+40*mib, a.Addr)
	assert.Equal(t, base+45*mib, b.Addr)
	assert.Equal(t, base+2*mib, c.Addr)

	p.RecordedRelease(base+40*mib, 0) // blocks are live: ignored
	require.NoError(t, p.Free(a))
	require.NoError(t, p.Free(b))
	p.RecordedRelease(base+40*mib, 0)
	p.RecordedRelease(base+41*mib, 0) // not a segment's start
	p.RecordedRelease(base+900*mib, 0)

	// Overlapping an adopted segment, or not a multiple of 512: refused.
	p.RecordedReserve(base+3*mib, 2*mib, 7)
	p.RecordedReserve(base+100*mib, 1000, 7)
	// A 40 MiB segment for a 5 MiB request is not what the model would
	// have reserved (20 MiB).
	p.RecordedReserve(base+100*mib, 40*mib, 7)
	d := ptAlloc(t, p, 5*mib, 7)
	assert.Equal(t, base+100*mib, d.Addr)

	st := p.Stats()
	assert.Equal(t, int64(3), st["recorded_segments_adopted"])
	assert.Equal(t, int64(2), st["recorded_segments_refused"])
	assert.Equal(t, int64(4), st["recorded_releases"])
	assert.Equal(t, int64(3), st["recorded_releases_ignored"])
	assert.Equal(t, int64(2), st["recorded_segment_size_match"], "the 20 and the 2 MiB segments")
	assert.Equal(t, int64(1), st["recorded_segment_size_mismatch"])
	assert.Equal(t, int64(0), st["model_segments"], "the model reserved nothing itself")
	assert.Equal(t, int64(1), st["num_device_free"])
	assert.Equal(t, int64(42*mib), st["reserved_bytes.all.current"])
	assert.Equal(t, uint64(42*mib), sp.Stats().ReservedBytes)
	assert.Equal(t, `seg 0 +0x200000 size=4096 in use requested=4096
seg 0 +0x201000 size=2093056 free pool=0
seg 1 +0x6400000 size=5242880 in use requested=5242880
seg 1 +0x6900000 size=36700160 free pool=1
`, ptLayout(p))
}

// With segments=model the recorded events change nothing; a space that
// cannot place reservations refuses them.
func TestPyTorchRecordedSegmentsIgnored(t *testing.T) {
	cfg := DefaultPyTorchConfig()
	cfg.Segments = PyTorchSegmentsModel
	p, sp := newPyTorchForTest(t, 1<<30, cfg)
	p.RecordedReserve(VirtualBase+40*mib, 20*mib, 0)
	p.RecordedRelease(VirtualBase+40*mib, 0)
	assert.Zero(t, sp.Stats().ReserveCalls)
	assert.Zero(t, p.Stats()["recorded_segments_refused"])
	a := ptAlloc(t, p, 5*mib, 0)
	assert.Equal(t, uint64(VirtualBase), a.Addr)

	rec := DefaultPyTorchConfig()
	rec.Segments = PyTorchSegmentsRecorded
	q := NewPyTorch(struct{ Space }{NewVirtualSpace(1<<30, CostModel{}, FirstFit)}, rec)
	q.RecordedReserve(VirtualBase, 20*mib, 0)
	assert.Equal(t, int64(1), q.Stats()["recorded_segments_refused"])
	assert.Zero(t, q.Stats()["reserved_bytes.all.current"])

	// Following them on such a space ends at the first segment, which the
	// model then places itself.
	f := NewPyTorch(struct{ Space }{NewVirtualSpace(1<<30, CostModel{}, FirstFit)}, DefaultPyTorchConfig())
	f.RecordedReserve(VirtualBase+100*mib, 20*mib, 0)
	b := ptAlloc(t, f, 5*mib, 0)
	assert.Equal(t, uint64(VirtualBase), b.Addr)
	assert.False(t, f.Following())
	assert.Contains(t, f.Decisions().Reason, "cannot place the program's 20.00 MiB segment")
}

// The start state of a recording is rebuilt block by block at the recorded
// addresses; afterwards a recorded address no longer steers the allocator.
func TestPyTorchStartState(t *testing.T) {
	p, _ := newPyTorchForTest(t, 1<<30, DefaultPyTorchConfig())
	base := uint64(VirtualBase)
	at := func(size uint64, addr uint64) Block {
		t.Helper()
		b, err := p.AllocateAt(size, 0, 0, addr)
		require.NoError(t, err)
		return b
	}
	p.Mark(StartStateMark)
	p.RecordedReserve(base, 20*mib, 0)
	p.RecordedReserve(base+20*mib, 2*mib, 0)
	x := at(3*mib, base+5*mib) // cut exactly: the 12 MiB after it stay free
	y := at(12*mib, base+8*mib)
	z := at(1000, base+21*mib)
	w := at(1000, base+900*mib) // in no segment: placed by the model instead
	assert.Equal(t, base+5*mib, x.Addr)
	assert.Equal(t, base+8*mib, y.Addr)
	assert.Equal(t, base+21*mib, z.Addr)
	assert.Equal(t, base+21*mib+1024, w.Addr, "best fit among the small free blocks")
	p.Mark(RecordingStartsMark)
	v := at(5*mib, base+500*mib)
	assert.Equal(t, base, v.Addr, "best fit (the free 5 MiB before x), not the recorded address")
	st := p.Stats()
	assert.Equal(t, int64(3), st["start_state_placed"])
	assert.Equal(t, int64(1), st["start_state_misplaced"])
	assert.Equal(t, int64(0), st["model_segments"])
	assert.Equal(t, `seg 0 +0x0 size=5242880 in use requested=5242880
seg 0 +0x500000 size=3145728 in use requested=3145728
seg 0 +0x800000 size=12582912 in use requested=12582912
seg 1 +0x1400000 size=1048576 free pool=0
seg 1 +0x1500000 size=1024 in use requested=1000
seg 1 +0x1500400 size=1024 in use requested=1000
seg 1 +0x1500800 size=1046528 free pool=0
`, ptLayout(p))
	assert.Equal(t, int64(2), st["inactive_split.all.current"])
	assert.Equal(t, int64(1048576+1046528), st["inactive_split_bytes.all.current"])

	// A recorded address the model could not honour (another stream's
	// segment, a block in use) falls back to best fit too.
	_, err := p.AllocateAt(1000, 0, 3, base+20*mib)
	require.NoError(t, err)
	p.Mark(StartStateMark)
	_, err = p.AllocateAt(1000, 0, 0, base+21*mib)
	require.NoError(t, err)
	assert.Equal(t, int64(2), p.Stats()["start_state_misplaced"])
}

// A stale block — freed, its slot since reused at the same address — is
// refused, as is a double free.
func TestPyTorchStaleBlockIsRefused(t *testing.T) {
	p, _ := newPyTorchForTest(t, 1<<30, DefaultPyTorchConfig())
	x := ptAlloc(t, p, 4096, 0)
	require.NoError(t, p.Free(x))
	y := ptAlloc(t, p, 4096, 0)
	require.Equal(t, x.Addr, y.Addr)
	assert.ErrorIs(t, p.Free(x), ErrNotLive)
	assert.NoError(t, p.Free(y))
	assert.ErrorIs(t, p.Free(y), ErrNotLive)
	assert.ErrorIs(t, p.Free(Block{Addr: 1, Handle: 1 << 30}), ErrNotLive)
}

func TestPyTorchEdgeCases(t *testing.T) {
	p, _ := newPyTorchForTest(t, 1<<30, DefaultPyTorchConfig())
	assert.Equal(t, uint64(256), p.MaxAlign(), "512-byte blocks in 256-byte-aligned segments")
	_, err := p.Allocate(0, 0)
	assert.Error(t, err)
	_, err = p.Allocate(1<<63+1, 0)
	assert.ErrorIs(t, err, ErrOutOfMemory)
	_, err = p.Allocate(2<<30, 0)
	assert.ErrorIs(t, err, ErrOutOfMemory)
	st := p.Stats()
	assert.Equal(t, int64(2), st["num_ooms"])
	assert.Equal(t, int64(1), st["num_alloc_retries"])
	assert.Equal(t, int64(-1), st["max_split_size"])
	assert.Zero(t, st["reserved_bytes.all.current"])
}
