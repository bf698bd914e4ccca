package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/trace"
)

func TestDescribeHeld(t *testing.T) {
	a := HeldBlock{Addr: 100, Size: 10, Requested: 8, Tag: "a"}
	b := HeldBlock{Addr: 150, Size: 20, Requested: 20, Tag: "b"}
	p := describeHeld([]HeldBlock{a, b}, []LayoutRegion{{Addr: 100, Size: 100}, {Addr: 300, Size: 40}}, false)
	assert.Equal(t, uint64(140), p.ReservedBytes)
	assert.Equal(t, uint64(30), p.InUseBytes)
	assert.Equal(t, uint64(28), p.LiveBytes)
	assert.Equal(t, uint64(110), p.CachedFreeBytes)
	assert.Equal(t, uint64(40), p.LargestFreeBytes)
	assert.Equal(t, 1, p.EmptyRegions)
	assert.Equal(t, uint64(40), p.EmptyRegionBytes)
	require.Len(t, p.FreeRanges, 3)
	assert.Equal(t, FreeRange{Addr: 110, Size: 40, Below: &a, Above: &b}, p.FreeRanges[0], "between a and b: pinned by both")
	assert.Equal(t, FreeRange{Addr: 300, Size: 40}, p.FreeRanges[1], "a region with nothing live")
	assert.Equal(t, FreeRange{Addr: 170, Size: 30, Below: &b}, p.FreeRanges[2], "above b, to the region's end")
}

// TestHeldAtPeakReserved replays a trace whose reserved bytes peak while a
// long-lived block pins a freed one's range, and checks what Held says
// then, against the replay's own peaks.
func TestHeldAtPeakReserved(t *testing.T) {
	ev := func(e trace.Event, tag string) trace.Event { e.Tag = tag; return e }
	events := []trace.Event{
		ev(alloc(1, 6<<20), "activations"),
		ev(alloc(2, 4<<20), "weights"),
		free(1),
		ev(alloc(3, 12<<20), "logits"), // fits neither free range: a new segment, the peak
		free(3),
		free(2),
	}
	for _, name := range []string{"pytorch", "bfc", "naive"} {
		t.Run(name, func(t *testing.T) {
			res := replay(t, events, config(1<<30, name))[0]
			h := res.Held
			require.NotNil(t, h)
			assert.Equal(t, res.PeakReservedBytes, h.ReservedBytes)
			assert.Equal(t, h.ReservedBytes, h.InUseBytes+h.CachedFreeBytes)
			if name == "bfc" {
				return // its regions grow by doubling: its peak comes elsewhere
			}
			assert.Equal(t, uint64(16<<20), h.LiveBytes, "weights and logits are live at the peak")
			assert.Equal(t, int64(3), h.Event, "the peak is reached by the logits' allocation")
			if name == "pytorch" {
				// One 20 MiB segment holds the weights between the
				// activations' freed 6 MiB and the 10 MiB never used.
				require.Len(t, h.FreeRanges, 2)
				assert.Equal(t, uint64(10<<20), h.FreeRanges[0].Size)
				require.NotNil(t, h.FreeRanges[0].Below)
				assert.Equal(t, "weights", h.FreeRanges[0].Below.Tag)
				assert.Equal(t, uint64(6<<20), h.FreeRanges[1].Size)
				require.NotNil(t, h.FreeRanges[1].Above)
				assert.Equal(t, "weights", h.FreeRanges[1].Above.Tag, "the weights pin the activations' range")
				assert.Equal(t, uint64(16<<20), h.CachedFreeBytes)
			}
		})
	}
}

// TestDescribeHeldJoins: an expandable segment maps its pages as
// reservations that touch; a block may span two, and its free bytes run
// across them. Without joining, a block's tail in the next region is not
// free, and that region is not empty.
func TestDescribeHeldJoins(t *testing.T) {
	a := HeldBlock{Addr: 0, Size: 30, Requested: 30, Tag: "a"}
	regions := []LayoutRegion{{Addr: 0, Size: 20}, {Addr: 20, Size: 20}, {Addr: 40, Size: 20}}
	joined := describeHeld([]HeldBlock{a}, regions, true)
	require.Len(t, joined.FreeRanges, 1)
	assert.Equal(t, FreeRange{Addr: 30, Size: 30, Below: &a}, joined.FreeRanges[0])
	assert.Zero(t, joined.EmptyRegions)

	apart := describeHeld([]HeldBlock{a}, regions, false)
	require.Len(t, apart.FreeRanges, 2)
	assert.Equal(t, uint64(20), apart.LargestFreeBytes, "the third region, whole")
	assert.Equal(t, FreeRange{Addr: 30, Size: 10}, apart.FreeRanges[1], "the second region past the block's tail")
	assert.Equal(t, 1, apart.EmptyRegions)
	assert.Equal(t, uint64(30), apart.CachedFreeBytes)
}
