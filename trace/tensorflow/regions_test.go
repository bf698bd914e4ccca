package tensorflow

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func allocAt(addr uint64, requested int64) memEvent {
	return memEvent{alloc: true, addr: addr, requested: requested, chunk: int64(roundUp(uint64(requested)))}
}

func TestInferLayout(t *testing.T) {
	const mib = 1 << 20
	const base = 0x7f0000000000
	for _, tc := range []struct {
		name    string
		evs     []memEvent
		layout  poolLayout
		regions []region
	}{
		{"one small region", []memEvent{allocAt(base, 1024), allocAt(base+1024, 4096)}, layoutEither,
			[]region{{base, 2 * mib, 0}}},
		// 1 MiB then 3 MiB: the 2 MiB region cannot hold the second, so
		// the pool grew by the next region size, 4 MiB, wherever the
		// device put it, here below the first.
		{"grew below", []memEvent{allocAt(base, mib), allocAt(base-64*mib, 3*mib), allocAt(base+mib, 512)}, layoutGrowth,
			[]region{{base, 2 * mib, 0}, {base - 64*mib, 4 * mib, 1}}},
		// The region after one that needed no doubling is twice as large.
		{"doubling", []memEvent{allocAt(base, 2*mib), allocAt(base+100*mib, 2*mib), allocAt(base+200*mib, 8*mib)}, layoutGrowth,
			[]region{{base, 2 * mib, 0}, {base + 100*mib, 4 * mib, 1}, {base + 200*mib, 8 * mib, 2}}},
		// Back-to-back 4 MiB buffers tile the sizes a growing pool's
		// regions would have: both layouts put every one where it is, so
		// the addresses cannot tell.
		{"tiles either way", func() []memEvent {
			var evs []memEvent
			for i := range uint64(8) {
				evs = append(evs, allocAt(base+i*4*mib, 4*mib))
			}
			return evs
		}(), layoutEither, nil},
		// Regions one after another, the first's tail left free when the
		// second was needed: only a growing pool puts the 3 MiB there.
		{"grew contiguously", []memEvent{allocAt(base, mib), allocAt(base+2*mib, 3*mib), allocAt(base+mib, 512)}, layoutGrowth,
			[]region{{base, 2 * mib, 0}, {base + 2*mib, 4 * mib, 1}}},
		// A chunk across the first region's end: one pool, preallocated.
		{"straddles", []memEvent{allocAt(base, mib), allocAt(base+mib, 3*mib)}, layoutPreallocate, nil},
		// Below the first allocation and not a growing pool's either.
		{"neither", []memEvent{allocAt(base, mib), allocAt(base+mib, 3*mib), allocAt(base-mib, 4096)}, layoutUnknown, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			layout, regs := inferLayout(tc.evs, 1<<30)
			assert.Equal(t, tc.layout, layout)
			if tc.regions != nil {
				assert.Equal(t, tc.regions, regs)
			}
		})
	}
	// More than the limit: not a growing pool.
	_, ok := growthRegions([]memEvent{allocAt(base, 3*mib), allocAt(base+100*mib, 3*mib)}, 6*mib)
	assert.False(t, ok)
}

func TestIsDeviceBFC(t *testing.T) {
	for name, want := range map[string]bool{"GPU_0_bfc": true, "GPU_12_bfc": true, "gpu_host_bfc": false,
		"xla_gpu_host_bfc": false, "GPU__bfc": false, "GPU_0_cuda_malloc": false, "TPU_0": false} {
		assert.Equal(t, want, isDeviceBFC(name), name)
	}
}
