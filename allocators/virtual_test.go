package allocators

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVirtualSpaceReleasesWholeReservations(t *testing.T) {
	sp := NewVirtualSpace(1<<20, DefaultCostModel(), FirstFit)
	a, err := sp.Reserve(4096)
	require.NoError(t, err)
	b, err := sp.Reserve(1000) // rounded to 1024, placed right after a
	require.NoError(t, err)
	require.Equal(t, a+4096, b)

	assert.ErrorIs(t, sp.Release(a+256, 256), ErrNotLive, "part of a reservation")
	assert.ErrorIs(t, sp.Release(a, 256), ErrNotLive, "the head of a reservation")
	assert.ErrorIs(t, sp.Release(a, 4096+512), ErrNotLive, "one and a half reservations")
	assert.ErrorIs(t, sp.Release(b+1024, 256), ErrNotLive, "free space")
	assert.Equal(t, uint64(5120), sp.Stats().ReservedBytes, "refused releases change nothing")

	require.NoError(t, sp.Release(a, 4096+1000), "a run of adjacent reservations, as BFC's joined regions")
	assert.Zero(t, sp.Stats().ReservedBytes)
	assert.Equal(t, int64(1), sp.Stats().ReleaseCalls)
	c, err := sp.Reserve(1 << 20)
	require.NoError(t, err, "the released ranges merged back into the whole device")
	assert.Equal(t, a, c)
}

func TestVirtualSpacePaged(t *testing.T) {
	sp := NewVirtualSpace(8192, CostModel{}, Paged)
	base, limit := sp.Bounds()
	assert.Equal(t, uint64(VirtualBase), base)
	assert.Equal(t, uint64(VirtualBase+pagedVirtualBytes), limit)
	a, _ := sp.Reserve(4096)
	_, _ = sp.Reserve(2048)
	require.NoError(t, sp.Release(a, 4096))
	c, err := sp.Reserve(6144)
	require.NoError(t, err, "only the bytes reserved count, not the holes")
	assert.Equal(t, a+6144, c, "placed after the live reservation, in the large virtual range")
	_, err = sp.Reserve(256)
	assert.ErrorIs(t, err, ErrOutOfMemory, "the capacity is full")
	assert.Zero(t, sp.LargestFreeBytes())
}

func TestParseSize(t *testing.T) {
	for text, want := range map[string]uint64{
		"4096": 4096, "80GiB": 80 << 30, "512MiB": 512 << 20, "4KiB": 4096, "1GB": 1_000_000_000,
		"1.5KiB": 1536, " 2MiB ": 2 << 20, "0": 0, "16gib": 16 << 30,
	} {
		got, err := ParseSize(text)
		require.NoError(t, err, text)
		assert.Equal(t, want, got, text)
	}
	for _, text := range []string{"", "lots", "1.5", "1.9999999999", "-4", "4 parsecs", "1e3"} {
		_, err := ParseSize(text)
		assert.Error(t, err, text)
	}
}

func TestVirtualSpaceReserveAt(t *testing.T) {
	s := NewVirtualSpace(1<<20, CostModel{}, FirstFit)
	require.NoError(t, s.ReserveAt(VirtualBase+4096, 1000))
	assert.EqualValues(t, 1024, s.Stats().ReservedBytes, "rounded up to the granule")
	assert.ErrorIs(t, s.ReserveAt(VirtualBase+4096+512, 256), ErrOutOfMemory, "inside a reservation")
	assert.ErrorIs(t, s.ReserveAt(VirtualBase+100, 256), ErrOutOfMemory, "off the granule")
	assert.ErrorIs(t, s.ReserveAt(VirtualBase-256, 256), ErrOutOfMemory, "below the space")
	assert.ErrorIs(t, s.ReserveAt(VirtualBase+(1<<20)-256, 512), ErrOutOfMemory, "past its end")
	addr, err := s.Reserve(4096)
	require.NoError(t, err)
	assert.EqualValues(t, VirtualBase, addr, "first fit still uses the hole before it")
	require.NoError(t, s.Release(VirtualBase+4096, 1024))
	assert.EqualValues(t, 4096, s.Stats().ReservedBytes)
	assert.EqualValues(t, 4, s.Stats().FailedReserves)
}

// TestVirtualSpaceReleaseMatchesModel reserves and releases at random,
// sizes from a granule to several table pages, and checks every Release
// against a plain map of the reservations: a run of whole, adjacent
// reservations is released; anything else is refused and changes nothing.
func TestVirtualSpaceReleaseMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sp := NewVirtualSpace(1<<30, CostModel{}, FirstFit)
	model := map[uint64]uint64{} // start → rounded size
	// run reports whether [addr, end) is a run of whole, adjacent
	// reservations.
	run := func(addr, end uint64) bool {
		for addr < end {
			sz, ok := model[addr]
			if !ok {
				return false
			}
			addr += sz
		}
		return addr == end
	}
	var released, refused int
	for range 5000 {
		if len(model) == 0 || rng.IntN(2) == 0 {
			n := 1 + rng.Uint64N(256)*VirtualGranule
			if rng.IntN(10) == 0 {
				n = 1 + rng.Uint64N(64<<10) // beyond a page of the table
			}
			addr, err := sp.Reserve(n)
			require.NoError(t, err)
			model[addr] = alignUp(n, VirtualGranule)
			continue
		}
		// A live start, and an end some reservations or granules later.
		starts := slices.Sorted(maps.Keys(model))
		addr := starts[rng.IntN(len(starts))]
		end := addr
		for k := rng.IntN(3); k >= 0; k-- {
			end += model[end] // 0 once past the run: then it stays put
		}
		switch rng.IntN(6) {
		case 0:
			end += VirtualGranule
		case 1:
			addr += VirtualGranule
		case 2:
			addr -= VirtualGranule
		}
		if end <= addr {
			end = addr + VirtualGranule
		}
		before := sp.Stats()
		err := sp.Release(addr, end-addr)
		if !run(addr, end) {
			require.ErrorIs(t, err, ErrNotLive, "[%#x, %#x)", addr, end)
			require.Equal(t, before, sp.Stats(), "a refused release changes nothing")
			refused++
			continue
		}
		require.NoError(t, err, "[%#x, %#x)", addr, end)
		released++
		for a := addr; a < end; {
			sz := model[a]
			delete(model, a)
			a += sz
		}
		var held uint64
		for _, sz := range model {
			held += sz
		}
		require.Equal(t, held, sp.Stats().ReservedBytes)
	}
	require.Greater(t, released, 500)
	require.Greater(t, refused, 500)
	require.NotEmpty(t, model)
	for addr, sz := range model {
		require.NoError(t, sp.Release(addr, sz))
	}
	assert.Zero(t, sp.Stats().ReservedBytes)
	assert.LessOrEqual(t, len(sp.reservations.pages), 2*reservationSlackPages, "empty pages are dropped")
	assert.ErrorIs(t, sp.Release(VirtualBase-VirtualGranule, VirtualGranule), ErrNotLive, "below the space")
	assert.ErrorIs(t, sp.Release(VirtualBase+1, VirtualGranule), ErrNotLive, "off the granule")
	assert.Equal(t, uint64(1<<30), sp.LargestFreeBytes(), "every release merged back")
}

// TestReservationTableSweepsEmptyPages: pages left empty stay for reuse
// until they outnumber the slack and half the table, and a swept page is
// reused rather than allocated again.
func TestReservationTableSweepsEmptyPages(t *testing.T) {
	const pageBytes = reservationPageGranules * VirtualGranule
	var tb reservationTable
	const n = 1000
	for i := range uint64(n) {
		tb.put(i*pageBytes, pageBytes) // a page each
	}
	require.Len(t, tb.pages, n)
	for i := range uint64(n) {
		require.Equal(t, uint64(pageBytes), tb.remove(i*pageBytes))
		empty := 0
		for _, p := range tb.pages {
			if p.n == 0 {
				empty++
			}
		}
		require.Equal(t, empty, tb.empty)
		require.LessOrEqual(t, empty, reservationSlackPages+len(tb.pages)/2+1)
	}
	assert.LessOrEqual(t, len(tb.pages), 2*reservationSlackPages)
	assert.NotEmpty(t, tb.spare, "swept pages wait for reuse")
	spare := len(tb.spare)
	tb.put(5*n*pageBytes, VirtualGranule)
	assert.Len(t, tb.spare, spare-1, "a new page comes from the spares")
	assert.Equal(t, uint64(VirtualGranule), tb.get(5*n*pageBytes))
	assert.Zero(t, tb.get(5*n*pageBytes+VirtualGranule))
	assert.Zero(t, tb.get(5*n*pageBytes+1), "off the granule")
}

// A handle an allocator maps itself is priced as one mapping and, when
// given back, one unmapping; a segment as a cudaMalloc and a cudaFree. The
// defaults are the option defaults.
func TestVirtualSpaceMappedCosts(t *testing.T) {
	eff, err := SpaceConfig{Kind: "virtual", Capacity: 1 << 30}.Validate()
	require.NoError(t, err)
	c := DefaultCostModel()
	for k, d := range map[string]time.Duration{"reserve_cost": c.ReserveFixed, "reserve_cost_per_gib": c.ReservePerGiB,
		"release_cost": c.ReleaseFixed, "release_cost_per_gib": c.ReleasePerGiB, "map_cost": c.MapFixed,
		"map_cost_per_gib": c.MapPerGiB, "unmap_cost": c.UnmapFixed, "unmap_cost_per_gib": c.UnmapPerGiB} {
		assert.Equal(t, d.String(), eff[k], k)
	}
	s := NewVirtualSpace(1<<30, c, Paged)
	const page = 20 << 20
	require.NoError(t, s.MapAt(VirtualBase, page))
	require.NoError(t, s.MapAt(VirtualBase+page, page))
	gib := func(per time.Duration, n uint64) time.Duration {
		return time.Duration(float64(per) * float64(n) / (1 << 30))
	}
	mapOne := c.MapFixed + gib(c.MapPerGiB, page)
	assert.Equal(t, 2*mapOne, s.Stats().ModeledTime)
	require.NoError(t, s.Release(VirtualBase, 2*page), "two handles in one release")
	assert.InDelta(t, float64(2*mapOne+2*c.UnmapFixed+gib(c.UnmapPerGiB, 2*page)), float64(s.Stats().ModeledTime), 2)
	before := s.Stats().ModeledTime
	addr, err := s.Reserve(page)
	require.NoError(t, err)
	require.NoError(t, s.Release(addr, page))
	assert.InDelta(t, float64(c.ReserveFixed+gib(c.ReservePerGiB, page)+c.ReleaseFixed+gib(c.ReleasePerGiB, page)),
		float64(s.Stats().ModeledTime-before), 2)
}
