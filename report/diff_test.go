package report

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDiffCallSitesMatchByName(t *testing.T) {
	before := []CallSite{{CallSite: "a", Bytes: 100, Count: 1}, {CallSite: "b", Bytes: 50, Count: 2}, {CallSite: "gone", Bytes: 10, Count: 1},
		{CallSite: "(3 other call sites)", Bytes: 7, Count: 3}}
	after := []CallSite{{CallSite: "b", Bytes: 80, Count: 2, Stack: []string{"f (x.py:1)"}}, {CallSite: "a", Bytes: 100, Count: 1},
		{CallSite: "fresh", Bytes: 5, Count: 1}, {CallSite: "(4 other call sites)", Bytes: 9, Count: 4}}
	rows := DiffCallSites(before, after)
	var names []string
	var sum int64
	for _, r := range rows {
		names = append(names, r.CallSite)
		sum += r.DeltaBytes
	}
	assert.Equal(t, []string{"b", "fresh", "(other call sites)", "a", "gone"}, names, "the largest growth first, then by name")
	assert.Equal(t, int64(30), rows[0].DeltaBytes)
	assert.Equal(t, []string{"f (x.py:1)"}, rows[0].Stack)
	assert.Equal(t, "new", rows[1].Status)
	assert.Equal(t, "vanished", rows[4].Status)
	assert.Equal(t, int64(-10), rows[4].DeltaBytes)
	assert.Equal(t, int64(194-167), sum, "the differences add up to the totals'")
}

func TestGrowth(t *testing.T) {
	g, err := ParseGrowth("2%")
	require.NoError(t, err)
	assert.False(t, g.exceeds(100, 102))
	assert.True(t, g.exceeds(100, 103))
	assert.False(t, g.exceeds(100, 50), "shrinking is no growth")
	assert.True(t, g.exceeds(0, 1), "from nothing, any growth")
	g, err = ParseGrowth("1KiB")
	require.NoError(t, err)
	assert.True(t, g.IsBytes)
	assert.False(t, g.exceeds(1<<30, 1<<30+1024))
	assert.True(t, g.exceeds(1<<30, 1<<30+1025))
	_, err = ParseGrowth("lots")
	assert.ErrorContains(t, err, "want a percentage")

	b, a := uint64(1000), uint64(2000)
	d := Diff{Before: DiffSide{PeakLiveBytes: 100}, After: DiffSide{PeakLiveBytes: 100},
		Allocators: []DiffAllocator{
			{Allocator: "grows", PeakReservedBytes: [2]*uint64{&b, &a}, MinCapacityBytes: [2]*uint64{&b, &a}, Fits: [2]bool{true, true}},
			{Allocator: "stops", PeakReservedBytes: [2]*uint64{&b, &a}, MinCapacityBytes: [2]*uint64{&b, nil}, Fits: [2]bool{true, false}},
			{Allocator: "after-only", PeakReservedBytes: [2]*uint64{nil, &a}, MinCapacityBytes: [2]*uint64{nil, &a}, Fits: [2]bool{false, true}},
		}}
	g, _ = ParseGrowth("10%")
	assert.Equal(t, []string{"grows fit +1000 B (+100.0%)", "stops fit: no device fits after"}, d.exceeded(g))
}

func TestDiffPhase(t *testing.T) {
	three, zero := int64(3), int64(0)
	assert.Equal(t, `step 3 ("train")`, DiffSide{PeakStep: &three, PeakStepName: "train"}.Phase())
	assert.Equal(t, "step 3", DiffSide{PeakStep: &three, PeakStepName: "3"}.Phase())
	assert.Equal(t, `before the first step, after "load"`, DiffSide{PeakStep: &zero, PeakMark: "load"}.Phase())
	assert.Empty(t, DiffSide{}.Phase())
}

// A text report names the call sites that changed most and sums the rest
// in one row: the column still adds up to the peaks' difference.
func TestDiffTextSumsTheRest(t *testing.T) {
	var before, after []CallSite
	for i := range 40 {
		before = append(before, CallSite{CallSite: fmt.Sprintf("site%02d", i), Bytes: 1000, Count: 1})
		after = append(after, CallSite{CallSite: fmt.Sprintf("site%02d", i), Bytes: uint64(1000 + 10*(i-10)), Count: 1})
	}
	after = append(after, CallSite{CallSite: "same", Bytes: 5, Count: 1})
	before = append(before, CallSite{CallSite: "same", Bytes: 5, Count: 1})
	d := Diff{CallSites: DiffCallSites(before, after)}
	for _, c := range d.CallSites {
		d.PeakDeltaBytes += c.DeltaBytes
	}
	rows, unchanged := shownCallSites(d)
	assert.Len(t, rows, DiffTopCallSites+1)
	assert.Equal(t, 2, unchanged, "site10 and same")
	var sum int64
	for _, r := range rows {
		sum += r.DeltaBytes
	}
	assert.Equal(t, d.PeakDeltaBytes, sum)
	assert.Equal(t, "site39", rows[0].CallSite)
	assert.Equal(t, "site00", rows[len(rows)-1].CallSite, "the largest shrink last")
	var b strings.Builder
	require.NoError(t, RenderDiff(&b, d, "table"))
	assert.Contains(t, b.String(), "(24 other call sites)")
	assert.Contains(t, b.String(), "2 other call sites held the same at both peaks")
}

// BenchmarkDiffCallSites matches two runs of 100,000 call sites each, a
// tenth of them new or vanished.
func BenchmarkDiffCallSites(b *testing.B) {
	const n = 100_000
	before, after := make([]CallSite, n), make([]CallSite, n)
	for i := range n {
		before[i] = CallSite{CallSite: fmt.Sprintf("model.py:%d", i), Bytes: uint64(i), Count: 1}
		j := i
		if i%10 == 0 {
			j = n + i
		}
		after[i] = CallSite{CallSite: fmt.Sprintf("model.py:%d", j), Bytes: uint64(i + i%7), Count: 1}
	}
	b.ReportAllocs()
	for b.Loop() {
		if rows := DiffCallSites(before, after); len(rows) != n+n/10 {
			b.Fatal(len(rows))
		}
	}
}
