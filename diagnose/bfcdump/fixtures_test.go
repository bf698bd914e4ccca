package bfcdump

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites the file with -rewrite.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *rewrite {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), got, "rerun with -rewrite and review the diff")
}

const (
	mib = 1 << 20
	kib = 1 << 10
)

// fragSnapshot is a pool that fails a 3 MB request by fragmentation: three
// regions (2, 4 and 8 MiB) under a 16 MiB limit, 9 MiB in use, 5 MiB free in
// four chunks of at most 2 MiB, and 2 MiB of headroom.
func fragSnapshot() *Snapshot {
	const a, b, c = 0x7f0000000000, 0x7f0001000000, 0x7f0002000000
	return &Snapshot{
		AllocatorName: "GPU_0_bfc",
		Regions:       []Region{{a, 2 * mib}, {b, 4 * mib}, {c, 8 * mib}},
		Chunks: []Chunk{
			{Addr: a, Size: 1 * mib, Requested: 1000000, InUse: true, Bin: -1},
			{Addr: a + 1*mib, Size: 512 * kib, Bin: 11},
			{Addr: a + 1536*kib, Size: 512 * kib, Requested: 512 * kib, InUse: true, Bin: -1},
			{Addr: b, Size: 1 * mib, Requested: 4096, Bin: 12},
			{Addr: b + 1*mib, Size: 1536 * kib, Requested: 1200000, InUse: true, Bin: -1},
			{Addr: b + 2560*kib, Size: 1536 * kib, Bin: 12},
			{Addr: c, Size: 6 * mib, Requested: 6 * mib, InUse: true, Bin: -1},
			{Addr: c + 6*mib, Size: 2 * mib, Bin: 13},
		},
		Stats: Stats{
			NumAllocs: 42, BytesInUse: 9 * mib, PeakBytesInUse: 12 * mib, LargestAllocSize: 6 * mib,
			Fragmentation: 0.6, // (5 MiB free − 2 MiB largest) / 5 MiB
			BytesLimit:    16 * mib, PoolBytes: 14 * mib, CurrRegionAllocationBytes: 16 * mib,
		},
		Request: &Request{Bytes: 3000000, Rounded: 3000064, Op: "model/dense/MatMul"},
	}
}

// wasteSnapshot is one 4 MiB region under an 8 MiB limit whose in-use chunks
// hold much slack: 3 MiB in use for 1.5 MiB requested. No failed request.
func wasteSnapshot() *Snapshot {
	const a = 0x10000000000 // bfcsim's virtual space base, 1<<40
	return &Snapshot{
		AllocatorName: "bfc",
		Regions:       []Region{{a, 4 * mib}},
		Chunks: []Chunk{
			{Addr: a, Size: 2 * mib, Requested: 1 * mib, InUse: true, Bin: -1},
			{Addr: a + 2*mib, Size: 1 * mib, Requested: 512 * kib, InUse: true, Bin: -1},
			{Addr: a + 3*mib, Size: 1 * mib, Bin: 12},
		},
		Stats: Stats{
			NumAllocs: 2, BytesInUse: 3 * mib, PeakBytesInUse: 3 * mib, LargestAllocSize: 2 * mib,
			BytesLimit: 8 * mib, PoolBytes: 4 * mib, CurrRegionAllocationBytes: 8 * mib,
		},
	}
}
