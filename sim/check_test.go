package sim

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/trace"
)

// The checker must catch what a broken allocator would do.
func TestCheckerCatchesViolations(t *testing.T) {
	newC := func() (*checker, checkedSpace) {
		sp := allocators.NewVirtualSpace(1<<20, allocators.CostModel{}, allocators.FirstFit)
		c := newChecker("broken", sp)
		return c, checkedSpace{Space: sp, c: c}
	}
	base := uint64(allocators.VirtualBase)

	c, sp := newC()
	addr, err := sp.Reserve(4096)
	require.NoError(t, err)
	c.onAlloc(100, 0, allocators.Block{Addr: addr, Size: 128})
	require.NoError(t, c.err())
	c.onAlloc(100, 0, allocators.Block{Addr: addr + 64, Size: 128})
	assert.ErrorContains(t, c.err(), "overlaps")

	c, sp = newC()
	_, _ = sp.Reserve(4096)
	c.onAlloc(100, 0, allocators.Block{Addr: base + 8192, Size: 128})
	assert.ErrorContains(t, c.err(), "not inside reserved memory")

	c, sp = newC()
	_, _ = sp.Reserve(4096)
	c.onAlloc(100, 0, allocators.Block{Addr: base, Size: 64})
	assert.ErrorContains(t, c.err(), "counts only 64 bytes")

	c, sp = newC()
	_, _ = sp.Reserve(4096)
	c.onAlloc(100, 512, allocators.Block{Addr: base + 256, Size: 256})
	assert.ErrorContains(t, c.err(), "not aligned to 512")
	c, sp = newC()
	_, _ = sp.Reserve(4096)
	c.maxAlign = 256
	c.onAlloc(100, 512, allocators.Block{Addr: base + 256, Size: 256})
	assert.NoError(t, c.err(), "an allocator that documents a 256-byte limit")

	c, sp = newC()
	_, _ = sp.Reserve(4096)
	c.onFree(100, allocators.Block{Addr: base, Size: 256})
	assert.ErrorContains(t, c.err(), "is not held")

	c, sp = newC()
	a, _ := sp.Reserve(4096)
	c.onAlloc(100, 0, allocators.Block{Addr: a, Size: 256})
	_ = sp.Release(a, 4096)
	assert.ErrorContains(t, c.err(), "while live block")

	c, sp = newC()
	a, _ = sp.Reserve(4096)
	_ = sp.Release(a+256, 256)
	assert.ErrorContains(t, c.err(), "not a run of whole reservations")

	c, sp = newC()
	_, _ = sp.Reserve(4096)
	c.accounting(8192, sp.Stats(), nil)
	assert.ErrorContains(t, c.err(), "8192 bytes in use but only 4096 reserved")

	c, sp = newC()
	_, _ = sp.Reserve(4096)
	c.accounting(256, sp.Stats(), map[string]int64{"bytes_in_use": 512})
	assert.ErrorContains(t, c.err(), "bytes_in_use 512")

	c, _ = newC()
	c.onReserve(base+1, 10)
	assert.ErrorContains(t, c.err(), "not aligned to the 256-byte granule")
	c, _ = newC()
	c.onReserve(base+(2<<20), 256)
	assert.ErrorContains(t, c.err(), "outside the space")
}

func TestIntervalSet(t *testing.T) {
	s := newIntervalSet()
	require.NoError(t, s.add(span{100, 200}))
	require.NoError(t, s.add(span{200, 300}))
	assert.Equal(t, 2, s.len(), "touching ranges stay apart")
	assert.True(t, s.covers(span{150, 250}), "a run of adjacent ranges covers")
	assert.False(t, s.coversWhole(span{150, 300}))
	assert.True(t, s.coversWhole(span{100, 300}))
	assert.Error(t, s.add(span{170, 190}))
	assert.Error(t, s.remove(span{120, 180}), "part of a range")
	require.NoError(t, s.remove(span{100, 300}), "a run of whole ranges")
	assert.Zero(t, s.len())
	assert.Zero(t, s.total)
	require.NoError(t, s.add(span{0, 10}))
	require.NoError(t, s.add(span{20, 30}))
	assert.False(t, s.covers(span{5, 25}), "a gap breaks the run")
}

// FuzzAllocator: any sequence of allocs and frees, on any allocator and a
// small device, never breaks the checker's invariants.
func FuzzAllocator(f *testing.F) {
	f.Add([]byte{0, 10, 0, 0, 200, 1, 0, 3, 0, 1, 4, 0})
	f.Add([]byte{1, 0xff, 0xff, 0, 1, 0xff, 0xff, 1, 2, 0, 0, 0, 3, 0, 0, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		evs := fuzzEvents(data)
		for _, placement := range []string{"first-fit", "paged"} {
			for _, name := range allocators.Names() {
				for _, opts := range fuzzOptions[name] {
					cfg := config(16<<20, name)
					cfg.Allocators[0].Options = opts
					cfg.Space.Options = allocators.Options{"placement": placement}
					_, err := Replay(context.Background(), reader(t, evs), cfg)
					require.NoError(t, err, "%s %v %s", name, opts, placement)
				}
			}
		}
	})
}

// fuzzEvents turns fuzz data into a valid trace: four bytes an event, an
// alloc (sizes from 0 to ~4 MiB, skewed small, some aligned), a free of a
// live allocation, or a step.
func fuzzEvents(data []byte) []trace.Event {
	var evs []trace.Event
	var live []uint64
	next := uint64(1)
	for len(data) >= 4 {
		op, arg := data[0], binary.LittleEndian.Uint16(data[1:3])
		salt := data[3]
		data = data[4:]
		switch {
		case op%4 == 3 && len(live) > 0:
			i := int(arg) % len(live)
			evs = append(evs, free(live[i]))
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		case op%4 == 2 && salt%3 == 0:
			evs = append(evs, trace.Event{Op: trace.OpStep})
		case op%4 == 2:
			// A recorded program's segment call, somewhere in the first
			// 128 MiB of the device: 2 MiB or whole 20 MiB pages, or (for a
			// release) a size of 0, the whole reservation.
			addr := allocators.VirtualBase + uint64(arg%64)<<21
			size := uint64(2 << 20)
			if salt&4 != 0 {
				size = uint64(salt>>3%4+1) * 20 << 20
			}
			ev := trace.Event{Op: trace.OpReserve, Addr: addr, Size: size}
			if salt%3 == 2 {
				ev.Op = trace.OpRelease
				if salt&8 != 0 {
					ev.Size = 0
				}
			}
			evs = append(evs, ev)
		default:
			size := uint64(arg) << (salt % 7)
			ev := alloc(next, size)
			if salt&0x80 != 0 {
				ev.Align = 1 << (salt % 13)
			}
			evs = append(evs, ev)
			live = append(live, next)
			next++
		}
	}
	return evs
}

var fuzzOptions = map[string][]allocators.Options{
	"bfc": {
		nil,
		{"allow_growth": "false"},
		{"garbage_collection": "true"},
		{"coalescing_regions": "true", "garbage_collection": "true"},
		{"fragmentation_fraction": "0.01"},
	},
	"arena":   {nil, {"size": "8MiB"}, {"reset": "step", "chunk": "4KiB"}},
	"aligned": {nil, {"base": "bfc"}, {"base": "arena", "line": "64"}},
	"naive":   {nil},
	"pytorch": {
		nil,
		{"max_split_size_mb": "21", "max_non_split_rounding_mb": "64"},
		{"memory_fraction": "0.5", "garbage_collection_threshold": "0.3"},
		{"roundup_power2_divisions": "4"},
		{"expandable_segments": "true"},
		{"expandable_segments": "true", "memory_fraction": "0.7", "segments": "model"},
	},
}
