package bfcdump

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// strip builds a 100-cell strip from runs: "*5x5_90" is five '*', five 'x'
// and ninety '_'.
func strip(runs ...any) string {
	var b strings.Builder
	for i := 0; i < len(runs); i += 2 {
		b.WriteString(strings.Repeat(runs[i].(string), runs[i+1].(int)))
	}
	return b.String()
}

func TestRenderOccupancy(t *testing.T) {
	const base = 0x7f0000000000
	for _, tc := range []struct {
		name string
		s    *Snapshot
		want string
	}{
		{
			name: "empty pool",
			s:    &Snapshot{},
			want: "<allocator contains no memory>",
		},
		{
			name: "requested then slack",
			// 25600 bytes: a cell is 256 bytes. 2560 bytes in use, 1280 requested.
			s: &Snapshot{Chunks: []Chunk{
				{Addr: base, Size: 2560, Requested: 1280, InUse: true},
				{Addr: base + 2560, Size: 23040},
			}},
			want: strip("*", 5, "x", 5, "_", 90),
		},
		{
			name: "free chunks stay blank",
			s: &Snapshot{Chunks: []Chunk{
				{Addr: base, Size: 12800},
				{Addr: base + 12800, Size: 12800, Requested: 12800, InUse: true},
			}},
			want: strip("_", 50, "*", 50),
		},
		{
			name: "a tiny chunk still paints its cell",
			s: &Snapshot{Chunks: []Chunk{
				{Addr: base, Size: 256, Requested: 4, InUse: true},
				{Addr: base + 256, Size: 1<<20 - 256},
			}},
			want: strip("*", 1, "_", 99),
		},
		{
			// The end cell is that of the last byte, ptr+size−1: in a
			// 1000-byte pool 10 bytes stay in cell 0, 11 reach cell 1.
			name: "end cell is the last byte's",
			s: &Snapshot{Chunks: []Chunk{
				{Addr: base, Size: 10, Requested: 10, InUse: true},
				{Addr: base + 10, Size: 10},
				{Addr: base + 20, Size: 11, Requested: 11, InUse: true},
				{Addr: base + 31, Size: 969},
			}},
			want: strip("*", 1, "_", 1, "*", 2, "_", 96),
		},
		{
			// '*' is painted after 'x', so a shared cell shows '*'.
			name: "requested wins a shared cell",
			s: &Snapshot{Chunks: []Chunk{
				{Addr: base, Size: 1000, Requested: 15, InUse: true},
			}},
			want: strip("*", 2, "x", 98),
		},
		{
			name: "regions laid end to end, gaps between them not drawn",
			s: &Snapshot{
				Regions: []Region{{base, 12800}, {base + 1<<30, 12800}},
				Chunks: []Chunk{
					{Addr: base, Size: 12800},
					{Addr: base + 1<<30, Size: 6400, Requested: 6400, InUse: true},
					{Addr: base + 1<<30 + 6400, Size: 6400},
				},
			},
			want: strip("_", 50, "*", 25, "_", 25),
		},
		{
			name: "inferred regions: the same strip without Regions",
			s: &Snapshot{Chunks: []Chunk{
				{Addr: base, Size: 12800},
				{Addr: base + 1<<30, Size: 6400, Requested: 6400, InUse: true},
				{Addr: base + 1<<30 + 6400, Size: 6400},
			}},
			want: strip("_", 50, "*", 25, "_", 25),
		},
		{
			name: "unknown requested size paints the whole chunk",
			s: &Snapshot{Chunks: []Chunk{
				{Addr: base, Size: 5120, InUse: true},
				{Addr: base + 5120, Size: 20480},
			}},
			want: strip("*", 20, "_", 80),
		},
		{
			name: "unsorted chunks are drawn in place",
			s: &Snapshot{Chunks: []Chunk{
				{Addr: base + 12800, Size: 12800, Requested: 12800, InUse: true},
				{Addr: base, Size: 12800},
			}},
			want: strip("_", 50, "*", 50),
		},
		{
			name: "a region at the top of the address space",
			s: &Snapshot{Chunks: []Chunk{
				{Addr: ^uint64(0) - 25599, Size: 25600, Requested: 12800, InUse: true},
			}},
			want: strip("*", 50, "x", 50),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.s.RenderOccupancy()
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRenderOccupancyFrag(t *testing.T) {
	got := fragSnapshot().RenderOccupancy()
	assert.Len(t, got, 100)
	// 14 MiB in 100 cells of 146800 bytes. Region A (cells 0–14): 1000000
	// of 1 MiB requested (cells 0–6 '*', the slack in cell 7), 512 KiB free,
	// 512 KiB in use (cells 10–14). Region C's 6 MiB in-use chunk starts at
	// 6 MiB, cell 42, and ends at cell 85.
	assert.Equal(t, "*******x__*****__", got[:17])
	assert.Equal(t, strings.Repeat("*", 44), got[42:86])
	assert.Equal(t, strings.Repeat("_", 14), got[86:])
}
