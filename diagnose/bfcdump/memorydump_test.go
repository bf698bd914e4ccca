package bfcdump

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/bfcsim/bfcsim/diagnose/bfcdump/memorypb"
)

func TestMarshalFillsLikeRecordMemoryMap(t *testing.T) {
	s := fragSnapshot()
	s.Chunks[6].OpName, s.Chunks[6].StepID, s.Chunks[6].ActionCount = "model/dense/MatMul", 7, 99
	s.Chunks[7].FreedAtCount = 12
	b, err := Marshal(s)
	require.NoError(t, err)
	var md memorypb.MemoryDump
	require.NoError(t, proto.Unmarshal(b, &md))

	assert.Equal(t, "GPU_0_bfc", md.GetAllocatorName())
	require.Len(t, md.GetBinSummary(), NumBins, "one summary per bin, empty ones included")
	for i, bs := range md.GetBinSummary() {
		assert.Equal(t, int32(i), bs.GetBin())
	}
	b12 := md.GetBinSummary()[12]
	assert.Equal(t, int64(4), b12.GetTotalChunksInBin(), "in-use chunks count in their size's bin")
	assert.Equal(t, int64(2), b12.GetTotalChunksInUse())
	assert.Equal(t, int64(5*mib), b12.GetTotalBytesInBin())
	assert.Equal(t, int64(2560*kib), b12.GetTotalBytesInUse())

	require.Len(t, md.GetChunk(), 8)
	c0 := md.GetChunk()[0]
	assert.Equal(t, uint64(0x7f0000000000), c0.GetAddress())
	assert.Equal(t, int64(1*mib), c0.GetSize())
	assert.Equal(t, int64(1000000), c0.GetRequestedSize())
	assert.True(t, c0.GetInUse())
	assert.Equal(t, int32(-1), c0.GetBin(), "in-use chunks are in no bin")
	assert.Equal(t, int32(11), md.GetChunk()[1].GetBin())
	assert.Equal(t, int64(4096), md.GetChunk()[3].GetRequestedSize(), "a free chunk's stale requested size is kept")
	assert.Equal(t, "model/dense/MatMul", md.GetChunk()[6].GetOpName())
	assert.Equal(t, uint64(12), md.GetChunk()[7].GetFreedAtCount())

	st := md.GetStats()
	assert.Equal(t, int64(42), st.GetNumAllocs())
	assert.Equal(t, int64(9*mib), st.GetBytesInUse())
	assert.Equal(t, int64(12*mib), st.GetPeakBytesInUse())
	assert.Equal(t, int64(6*mib), st.GetLargestAllocSize())
	assert.Equal(t, float32(0.6), st.GetFragmentationMetric())
}

func TestMarshalWireFormat(t *testing.T) {
	// The field numbers are TF's: allocator_name is field 1 (bytes),
	// bin_summary 2, chunk 3, stats 5.
	b, err := Marshal(&Snapshot{AllocatorName: "x", Chunks: []Chunk{{Addr: 256, Size: 256}}})
	require.NoError(t, err)
	num, typ, n := protowire.ConsumeTag(b)
	require.Positive(t, n)
	assert.Equal(t, protowire.Number(1), num)
	assert.Equal(t, protowire.BytesType, typ)
	seen := map[protowire.Number]int{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		require.Positive(t, n)
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		require.Positive(t, m)
		b = b[m:]
		seen[num]++
	}
	assert.Equal(t, map[protowire.Number]int{1: 1, 2: NumBins, 3: 1, 5: 1}, seen)
}

// Marshal's chunk-by-chunk encoding gives the bytes proto.Marshal gives for
// the whole message, on snapshots with every field set and unset: empty
// ones, debug fields, names that are not UTF-8, chunks of size past bin 20.
func TestMarshalMatchesWholeMessage(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	names := []string{"", "a/b", "model/dense/MatMul", "bad\xffname"}
	snaps := []*Snapshot{fragSnapshot(), {AllocatorName: "empty"}, {}}
	for range 50 {
		s := &Snapshot{AllocatorName: names[rng.IntN(len(names))]}
		addr := uint64(rng.IntN(4)) << 40
		for range rng.IntN(300) {
			size := uint64(1+rng.IntN(4096)) * 256
			if rng.IntN(50) == 0 {
				size <<= 20 // well past bin 20's lower bound
			}
			c := Chunk{Addr: addr, Size: size, InUse: rng.IntN(2) == 0}
			if c.InUse || rng.IntN(2) == 0 {
				c.Requested = uint64(rng.Int64N(int64(size) + 1))
			}
			if rng.IntN(3) == 0 {
				c.OpName, c.StepID = names[rng.IntN(len(names))], rng.Uint64N(100)
				c.ActionCount, c.FreedAtCount = rng.Uint64N(1000), rng.Uint64N(1000)
			}
			s.Chunks = append(s.Chunks, c)
			addr += size + uint64(rng.IntN(2))*256
		}
		s.Stats = Stats{NumAllocs: rng.Int64N(1000), BytesInUse: rng.Int64N(1 << 40), Fragmentation: float64(rng.IntN(2)) * rng.Float64()}
		snaps = append(snaps, s)
	}
	for i, s := range snaps {
		got, err := Marshal(s)
		require.NoError(t, err)
		md := dumpHead(s)
		for _, c := range s.Chunks {
			var m memorypb.MemChunk
			chunkMsg(c, &m)
			md.Chunk = append(md.Chunk, &m)
		}
		md.Stats = dumpStats(s)
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(md)
		require.NoError(t, err)
		require.Equal(t, want, got, "snapshot %d", i)
	}
}

func TestMarshalDeterministic(t *testing.T) {
	a, err := Marshal(fragSnapshot())
	require.NoError(t, err)
	for range 5 {
		b, err := Marshal(fragSnapshot())
		require.NoError(t, err)
		assert.Equal(t, a, b)
	}
}

func TestMarshalComputesFragmentation(t *testing.T) {
	s := fragSnapshot()
	s.Stats.Fragmentation = 0
	b, err := Marshal(s)
	require.NoError(t, err)
	back, err := Unmarshal(b)
	require.NoError(t, err)
	assert.InDelta(t, 0.6, back.Stats.Fragmentation, 1e-7, "TF's metric over the chunks when the snapshot has none")
}

func TestMemoryDumpRoundTrip(t *testing.T) {
	s := fragSnapshot()
	s.Chunks[2].OpName, s.Chunks[2].StepID, s.Chunks[2].ActionCount = "a/b", 3, 17
	s.Chunks[5].FreedAtCount = 4
	b, err := Marshal(s)
	require.NoError(t, err)
	back, err := Unmarshal(b)
	require.NoError(t, err)

	assert.Equal(t, s.AllocatorName, back.AllocatorName)
	assert.Equal(t, s.Chunks, back.Chunks)
	assert.Equal(t, Stats{
		NumAllocs: s.Stats.NumAllocs, BytesInUse: s.Stats.BytesInUse, PeakBytesInUse: s.Stats.PeakBytesInUse,
		LargestAllocSize: s.Stats.LargestAllocSize, Fragmentation: float64(float32(s.Stats.Fragmentation)),
	}, back.Stats, "the limit, pool and next region size are not in a MemoryDump")
	assert.Empty(t, back.Regions, "nor are regions")
	assert.Equal(t, s.Regions, back.PoolRegions(), "these regions are not adjacent, so they are inferred back")
	assert.Nil(t, back.Request)

	again, err := Marshal(back)
	require.NoError(t, err)
	assert.Equal(t, b, again, "decoding and encoding again changes nothing")
}

func TestUnmarshalSortsChunks(t *testing.T) {
	md := &memorypb.MemoryDump{AllocatorName: "GPU_0_bfc", Chunk: []*memorypb.MemChunk{
		{Address: 0x2000, Size: 0x1000, Bin: 4},
		{Address: 0x1000, Size: 0x1000, RequestedSize: 100, InUse: true, Bin: -1},
	}}
	b, err := proto.Marshal(md)
	require.NoError(t, err)
	s, err := Unmarshal(b)
	require.NoError(t, err)
	require.Len(t, s.Chunks, 2)
	assert.Equal(t, uint64(0x1000), s.Chunks[0].Addr)
	assert.Equal(t, uint64(0x2000), s.Chunks[1].Addr)
}

func TestUnmarshalErrors(t *testing.T) {
	enc := func(md *memorypb.MemoryDump) []byte {
		b, err := proto.Marshal(md)
		require.NoError(t, err)
		return b
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"not a protobuf", []byte{0xff, 0xff, 0xff}, "decoding a MemoryDump: "},
		{"empty", nil, "empty MemoryDump"},
		{"negative size", enc(&memorypb.MemoryDump{Chunk: []*memorypb.MemChunk{{Address: 256, Size: -1}}}),
			"chunk 0 at 0x100: negative size -1"},
		{"zero size", enc(&memorypb.MemoryDump{Chunk: []*memorypb.MemChunk{{Address: 256}}}),
			"chunk 0 at 0x100 has size 0"},
		{"overlap", enc(&memorypb.MemoryDump{Chunk: []*memorypb.MemChunk{{Address: 256, Size: 512}, {Address: 512, Size: 256}}}),
			"chunk 1 at 0x200 overlaps the chunk at 0x100 of size 512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Unmarshal(tc.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestMarshalRejectsInvalid(t *testing.T) {
	s := fragSnapshot()
	s.Chunks[1].Size = 0
	_, err := Marshal(s)
	assert.ErrorContains(t, err, "encoding a MemoryDump: chunk 1 at 0x7f0000100000 has size 0")

	_, err = Marshal(&Snapshot{Chunks: []Chunk{{Addr: 0, Size: 1 << 63}}})
	assert.ErrorContains(t, err, "does not fit an int64")
}

// chunkMsg fills m, every field of it, from c: the message whose
// encoding appendChunk writes directly.
func chunkMsg(c Chunk, m *memorypb.MemChunk) {
	bin := int32(-1)
	if !c.InUse {
		bin = int32(BinNumForSize(c.Size))
	}
	m.Address = c.Addr
	m.Size = int64(c.Size)
	m.RequestedSize = int64(c.Requested)
	m.Bin = bin
	m.OpName = validUTF8(c.OpName)
	m.FreedAtCount = c.FreedAtCount
	m.ActionCount = c.ActionCount
	m.InUse = c.InUse
	m.StepId = c.StepID
}

// BenchmarkMarshal encodes a pool of 500,000 chunks, about the size of
// the memory dump of a replayed Python program's peak.
func BenchmarkMarshal(b *testing.B) {
	s := &Snapshot{AllocatorName: "bfc"}
	addr := uint64(0x7f0000000000)
	for i := range 500_000 {
		size := uint64(256 << (i % 7))
		s.Chunks = append(s.Chunks, Chunk{Addr: addr, Size: size, Requested: size - 13, InUse: i%3 != 0})
		addr += size
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Marshal(s); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(s.Chunks)), "ns/chunk")
}
