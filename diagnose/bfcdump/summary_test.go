package bfcdump

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSummarize(t *testing.T) {
	got := fragSnapshot().Summarize()
	assert.Equal(t, Summary{
		PoolBytes:        14 * mib,
		BytesInUse:       9 * mib,
		RequestedInUse:   1000000 + 512*kib + 1200000 + 6*mib,
		InternalWaste:    (1*mib - 1000000) + (1536*kib - 1200000),
		FreeInPool:       5 * mib,
		LargestFreeChunk: 2 * mib,
		Unreserved:       2 * mib,
		MemoryLimit:      16 * mib,
		Regions:          3,
		Chunks:           8,
		ChunksInUse:      4,
		FreeChunks:       4,
		TFFragmentation:  0.6,
	}, got)
}

func TestSummarizeUnknowns(t *testing.T) {
	// A MemoryDump: no limit, no pool size, no regions.
	s := fragSnapshot()
	s.Regions, s.Stats.BytesLimit, s.Stats.PoolBytes = nil, 0, 0
	got := s.Summarize()
	assert.Equal(t, uint64(14*mib), got.PoolBytes, "the inferred regions' total stands in")
	assert.Equal(t, 3, got.Regions, "the regions are not adjacent, so they are told apart")
	assert.Zero(t, got.MemoryLimit)
	assert.Zero(t, got.Unreserved, "no headroom without a limit")

	// A log: no requested sizes.
	s = fragSnapshot()
	for i := range s.Chunks {
		s.Chunks[i].Requested = 0
	}
	got = s.Summarize()
	assert.Zero(t, got.RequestedInUse)
	assert.Zero(t, got.InternalWaste, "waste is counted only where the requested size is known")

	// Nothing but stats.
	got = (&Snapshot{Stats: Stats{PoolBytes: 10, BytesInUse: 4, BytesLimit: 16}}).Summarize()
	assert.Equal(t, Summary{PoolBytes: 10, BytesInUse: 4, FreeInPool: 6, Unreserved: 6, MemoryLimit: 16, TFFragmentation: 1}, got)

	// A full pool: TF's metric is 0/0; bfcsim reports 0.
	got = (&Snapshot{Chunks: []Chunk{{Addr: 0, Size: 256, Requested: 256, InUse: true}}}).Summarize()
	assert.Zero(t, got.TFFragmentation)
}

func TestPoolRegions(t *testing.T) {
	s := fragSnapshot()
	regions := s.PoolRegions()
	assert.Equal(t, s.Regions, regions)
	regions[0].Size = 1
	assert.Equal(t, uint64(2*mib), s.Regions[0].Size, "the caller owns the returned slice")

	s.Regions = nil
	assert.Equal(t, fragSnapshot().Regions, s.PoolRegions(), "regions inferred from the gaps between chunks")

	// Adjacent regions cannot be told apart in a dump: they read as one.
	adj := &Snapshot{Chunks: []Chunk{{Addr: 0x1000, Size: 0x1000}, {Addr: 0x2000, Size: 0x3000, InUse: true}}}
	assert.Equal(t, []Region{{0x1000, 0x4000}}, adj.PoolRegions())
	assert.Empty(t, (&Snapshot{}).PoolRegions())
}

func TestValidate(t *testing.T) {
	require.NoError(t, fragSnapshot().Validate())
	require.NoError(t, (&Snapshot{}).Validate())
	for _, tc := range []struct {
		name   string
		mutate func(s *Snapshot)
		want   string
	}{
		{"zero size", func(s *Snapshot) { s.Chunks[1].Size = 0 }, "chunk 1 at 0x7f0000100000 has size 0"},
		{"overlap", func(s *Snapshot) { s.Chunks[1].Addr -= 256 }, "chunk 1 at 0x7f00000fff00 overlaps the chunk at 0x7f0000000000 of size 1048576"},
		{"order", func(s *Snapshot) { s.Chunks[0], s.Chunks[7] = s.Chunks[7], s.Chunks[0] }, "chunk 1 at 0x7f0000100000 is out of address order (after 0x7f0002600000)"},
		{"wraps", func(s *Snapshot) {
			s.Regions = nil
			s.Chunks = []Chunk{{Addr: ^uint64(0) - 255, Size: 512}}
		}, "runs past the end of the address space"},
		{"requested above size", func(s *Snapshot) { s.Chunks[0].Requested = 2 * mib }, "chunk 0 at 0x7f0000000000 is in use with 2097152 bytes requested, more than its size 1048576"},
		{"outside regions", func(s *Snapshot) { s.Regions[2].Size = 4 * mib }, "chunk 6 at 0x7f0002000000 of size 6291456 lies outside every region"},
		{"regions overlap", func(s *Snapshot) { s.Regions[1].Addr = s.Regions[0].Addr + mib }, "region 1 at 0x7f0000100000 overlaps or precedes the region before it"},
		{"empty region", func(s *Snapshot) { s.Regions[0].Size = 0 }, "region 0 at 0x7f0000000000 has size 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fragSnapshot()
			tc.mutate(s)
			err := s.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// A stale requested size on a free chunk is normal in TF.
	s := fragSnapshot()
	s.Chunks[1].Requested = 10 * mib
	assert.NoError(t, s.Validate())
}
