package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/allocators/bfcstate"
	"github.com/bfcsim/bfcsim/trace"
)

// The peak snapshot, taken lazily, is the pool exactly as it was after the
// allocation that first reached the peak: replaying the trace up to that
// event against a fresh allocator gives the same snapshot.
func TestPeakSnapshotIsThePoolAtThePeak(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts allocators.Options
	}{
		{"growth", allocators.Options{}},
		{"gc", allocators.Options{"garbage_collection": "true"}},
		{"no-growth", allocators.Options{"allow_growth": "false"}},
		{"coalescing-regions", allocators.Options{"coalescing_regions": "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{"transformer-train.jsonl", "random.jsonl", "fragmenter.jsonl"} {
				evs := loadTrace(t, name)
				cfg := Config{
					Allocators:    []AllocatorSpec{{Name: "bfc", Options: tc.opts}},
					Space:         allocators.SpaceConfig{Kind: "virtual", Capacity: 1 << 30},
					PeakSnapshots: true,
				}
				res, err := Replay(t.Context(), &sliceSource{events: evs}, cfg)
				require.NoError(t, err)
				got := res[0].PeakSnapshot
				require.NotNil(t, got, name)
				assert.Equal(t, res[0].PeakInUseBytes, uint64(got.Stats.BytesInUse), "%s: in use at the peak", name)

				want := prefixSnapshot(t, evs[:got.Event+1], tc.opts)
				want.Event, want.Line = got.Event, got.Line
				assert.Equal(t, want, got, name)

				// Able to read the trace again, the replay skips the peaks
				// that the next events pass, and needs no second reading.
				rereads := 0
				cfg.Reread = func() (Source, error) { rereads++; return &sliceSource{events: evs}, nil }
				res, err = Replay(t.Context(), &sliceSource{events: evs}, cfg)
				require.NoError(t, err)
				assert.Equal(t, want, res[0].PeakSnapshot, "%s, skipping passed peaks", name)
				assert.Zero(t, rereads, name)
			}
		})
	}
}

// For an allocator that describes its pool but cannot save it cheaply
// (bfc with checkpoints turned off stands in for one): with no budget for
// describing the pool at each rise of the peak, the peak snapshot is made
// by replaying the trace again to the peak, and is the same; with no way
// to read the trace again there is none.
func TestPeakSnapshotBeyondItsBudget(t *testing.T) {
	defer func(b, e int64) { peakBudgetBase, peakBudgetEventsPerChunk = b, e }(peakBudgetBase, peakBudgetEventsPerChunk)
	defer func(u bool) { useCheckpoints = u }(useCheckpoints)
	useCheckpoints = false
	for _, name := range []string{"transformer-train.jsonl", "random.jsonl", "fragmenter.jsonl"} {
		evs := loadTrace(t, name)
		cfg := Config{
			Allocators:    []AllocatorSpec{{Name: "bfc"}, {Name: "naive"}},
			Space:         allocators.SpaceConfig{Kind: "virtual", Capacity: 1 << 30},
			PeakSnapshots: true,
		}
		peakBudgetBase, peakBudgetEventsPerChunk = 1<<20, 1
		res, err := Replay(t.Context(), &sliceSource{events: evs}, cfg)
		require.NoError(t, err)
		want := res[0].PeakSnapshot
		require.NotNil(t, want, name)

		peakBudgetBase, peakBudgetEventsPerChunk = 0, 1<<62
		rereads := 0
		cfg.Reread = func() (Source, error) { rereads++; return &sliceSource{events: evs}, nil }
		res, err = Replay(t.Context(), &sliceSource{events: evs}, cfg)
		require.NoError(t, err)
		assert.True(t, assert.ObjectsAreEqual(want, res[0].PeakSnapshot), "%s: the snapshot made by reading again", name)
		assert.Equal(t, 1, rereads, "%s: read again once, for bfc's peak", name)

		cfg.Reread = nil
		res, err = Replay(t.Context(), &sliceSource{events: evs}, cfg)
		require.NoError(t, err)
		assert.True(t, res[0].PeakSnapshot == nil, "%s: a stale snapshot is not reported as the peak's", name)
	}
}

// A peak skipped because the next events were to pass it, and then was
// not passed (the allocation that would have failed), is described by
// reading the trace again; without the means to, no peak is skipped. The
// replay skips only peaks it is sure of, so the test makes it careless.
func TestPeakSkippedThenNotPassed(t *testing.T) {
	defer func(r bool) { skipNeedsRoom = r }(skipNeedsRoom)
	skipNeedsRoom = false
	// 256 KiB, then 512 KiB: the peak. Freeing the first, 1 MiB is to
	// follow, which would pass it, but does not fit the 1 MiB device.
	evs := []trace.Event{alloc(1, 256<<10), alloc(2, 512<<10), free(1), alloc(3, 1<<20), free(2)}
	cfg := config(1<<20, "bfc")
	cfg.Space.Capacity = 1 << 20
	cfg.PeakSnapshots = true
	res := replay(t, evs, cfg)
	want := res[0].PeakSnapshot
	require.NotNil(t, want)
	assert.Equal(t, int64(1), want.Event, "no skipping")
	assert.Equal(t, int64(1), res[0].FailedAllocs)

	rereads := 0
	cfg.Reread = func() (Source, error) { rereads++; return reader(t, evs), nil }
	res = replay(t, evs, cfg)
	assert.Equal(t, want, res[0].PeakSnapshot, "skipped, then described by reading again")
	assert.Equal(t, 1, rereads)
}

// prefixSnapshot replays events against a fresh bfc and describes its pool.
func prefixSnapshot(t *testing.T, evs []trace.Event, opts allocators.Options) *bfcstate.Snapshot {
	t.Helper()
	sp, err := allocators.NewSpace(allocators.SpaceConfig{Kind: "virtual", Capacity: 1 << 30})
	require.NoError(t, err)
	a, _, err := allocators.New("bfc", sp, opts)
	require.NoError(t, err)
	blocks := map[uint64]allocators.Block{}
	for _, ev := range evs {
		switch ev.Op {
		case trace.OpAlloc:
			if ev.Size == 0 {
				continue
			}
			if b, err := a.Allocate(ev.Size, ev.Align); err == nil {
				blocks[ev.ID] = b
			}
		case trace.OpFree:
			if b, ok := blocks[ev.ID]; ok {
				require.NoError(t, a.Free(b))
				delete(blocks, ev.ID)
			}
		}
	}
	s := a.(allocators.Snapshotter).Snapshot()
	s.Request = nil
	return s
}

// The first failed allocation leaves a snapshot naming the request and
// where it was; later failures do not replace it. Peak snapshots are off
// unless asked for.
func TestOOMSnapshot(t *testing.T) {
	evs := []trace.Event{alloc(1, 600<<10), alloc(2, 600<<10), alloc(3, 300<<10), free(1), alloc(4, 2<<20)}
	res := replay(t, evs, config(1<<20, "bfc", "naive"))
	s := res[0].OOMSnapshot
	require.NotNil(t, s)
	// The 1 MiB region is under twice 600 KiB, so the first block took it
	// whole and the second allocation (event 1) failed.
	assert.Equal(t, int64(1), s.Event)
	assert.Equal(t, int64(2), s.Line)
	assert.Equal(t, &bfcstate.Request{Bytes: 600 << 10, Rounded: 600 << 10}, s.Request)
	assert.Equal(t, []bfcstate.Chunk{{Addr: 1 << 40, Size: 1 << 20, Requested: 600 << 10, InUse: true, Bin: -1}}, s.Chunks)
	assert.Nil(t, res[0].PeakSnapshot)
	assert.Nil(t, res[1].OOMSnapshot, "naive cannot describe a pool")
	assert.Equal(t, int64(3), res[0].FailedAllocs)
}
