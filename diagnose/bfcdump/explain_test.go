package bfcdump

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestExplain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       func() *Snapshot
		verdict string
		want    []string // substrings of the text
		not     []string
	}{
		{
			name:    "fragmentation across regions with headroom",
			s:       fragSnapshot,
			verdict: VerdictFragmentation,
			want: []string{
				"7.0 MiB free (5.0 MiB in the pool, 2.0 MiB not yet reserved) but the largest free chunk is 2.0 MiB and the pool can grow by only 2.0 MiB: fragmentation, not lack of memory;",
				"the request for 2.9 MiB (3000064 bytes rounded) needs one contiguous chunk.",
				"The free memory lies in 4 free chunks kept apart by chunks in use",
				"TF_GPU_ALLOCATOR=cuda_malloc_async",
			},
			not: []string{"slack", "unknown", "Region boundaries"},
		},
		{
			// TF's PhysicalAllocatorOomsFragmentation in small: the free
			// chunks on either side of the boundary between the second and
			// third regions would hold the request if the regions joined.
			name: "fragmentation at region boundaries",
			s: func() *Snapshot {
				s := fragSnapshot()
				const c = 0x7f0002000000
				s.Chunks[6] = Chunk{Addr: c, Size: 2 * mib, Bin: 13}
				s.Chunks[7] = Chunk{Addr: c + 2*mib, Size: 6 * mib, Requested: 6 * mib, InUse: true, Bin: -1}
				return s
			},
			verdict: VerdictFragmentation,
			want: []string{
				"Region boundaries are the cause: the pool is 3 regions",
				"would make a 3.5 MiB run, enough",
				"garbage_collection", "coalesces regions", "TF_GPU_ALLOCATOR=cuda_malloc_async",
			},
			not: []string{"kept apart by chunks in use"},
		},
		{
			name: "fragmentation in one region",
			s: func() *Snapshot {
				const a = 0x7f0000000000
				return &Snapshot{
					AllocatorName: "GPU_0_bfc",
					Regions:       []Region{{a, 8 * mib}},
					Chunks: []Chunk{
						{Addr: a, Size: 3 * mib, Requested: 3 * mib, InUse: true, Bin: -1},
						{Addr: a + 3*mib, Size: 2 * mib, Bin: 13},
						{Addr: a + 5*mib, Size: 1 * mib, Requested: 1 * mib, InUse: true, Bin: -1},
						{Addr: a + 6*mib, Size: 2 * mib, Bin: 13},
					},
					Stats:   Stats{BytesInUse: 4 * mib, BytesLimit: 8 * mib, PoolBytes: 8 * mib},
					Request: &Request{Bytes: 3 * mib, Rounded: 3 * mib},
				}
			},
			verdict: VerdictFragmentation,
			want: []string{
				"4.0 MiB free in the pool but the largest free chunk is 2.0 MiB: fragmentation, not lack of memory; the request for 3.0 MiB (3145728 bytes rounded) needs one contiguous chunk.",
				"The free memory lies in 2 free chunks kept apart by chunks in use",
			},
			not: []string{"Region boundaries", "not yet reserved", "unknown"},
		},
		{
			name: "out of memory",
			s: func() *Snapshot {
				s := fragSnapshot()
				s.Request = &Request{Bytes: 8 * mib, Rounded: 8 * mib}
				return s
			},
			verdict: VerdictOutOfMemory,
			want:    []string{"Not enough memory: 9.0 MiB is in use of the 16 MiB limit, and the request for 8.0 MiB (8388608 bytes rounded) overshoots the limit by 1.0 MiB."},
			not:     []string{"fragmentation"},
		},
		{
			name: "too large",
			s: func() *Snapshot {
				s := fragSnapshot()
				s.Request = &Request{Bytes: 20 * mib}
				return s
			},
			verdict: VerdictTooLarge,
			want:    []string{"Too large: the request for 20 MiB (20971520 bytes rounded) exceeds the whole memory limit of 16 MiB"},
		},
		{
			name: "device refused to grow the pool",
			s: func() *Snapshot {
				s := fragSnapshot()
				s.Stats.BytesLimit = 64 * mib
				return s
			},
			verdict: VerdictDeviceFull,
			want:    []string{"The pool could still grow by 50 MiB under its 64 MiB limit", "the device refused the new region"},
		},
		{
			name: "a free chunk would have fit",
			s: func() *Snapshot {
				s := fragSnapshot()
				s.Request = &Request{Bytes: 1 * mib}
				return s
			},
			verdict: VerdictUnexplained,
			want:    []string{"The largest free chunk (2.0 MiB) could hold the request for 1.0 MiB"},
		},
		{
			name: "memory dump: limit unknown, fragmentation in the pool",
			s: func() *Snapshot {
				s := fragSnapshot()
				s.Regions, s.Stats.BytesLimit, s.Stats.PoolBytes = nil, 0, 0
				return s
			},
			verdict: VerdictFragmentation,
			want: []string{
				"The memory limit is unknown (a MemoryDump does not record it), so this reasons about the pool alone.",
				"5.0 MiB free in the pool but the largest free chunk is 2.0 MiB",
				"4 free chunks kept apart by chunks in use",
			},
		},
		{
			name: "memory dump: limit unknown, not enough free in the pool",
			s: func() *Snapshot {
				s := fragSnapshot()
				s.Regions, s.Stats.BytesLimit, s.Stats.PoolBytes = nil, 0, 0
				s.Request = &Request{Bytes: 6 * mib}
				return s
			},
			verdict: VerdictOutOfMemory,
			want:    []string{"Not enough memory in the pool: 5.0 MiB is free in it and the request for 6.0 MiB (6291456 bytes rounded) needs more; whether the pool could have grow"},
		},
		{
			name:    "state with internal waste",
			s:       wasteSnapshot,
			verdict: VerdictState,
			want: []string{
				"No failed allocation: 1.0 MiB free in the pool of 4.0 MiB; the largest free chunk is 1.0 MiB; TF fragmentation 0.0%.",
				"The pool may still grow by 4.0 MiB up to its 8.0 MiB limit.",
				"1.5 MiB (50%) of the bytes in use is slack inside in-use chunks",
				"less than twice the rounded request and the slack is under 128 MiB",
			},
		},
		{
			name: "internal waste with a failure",
			s: func() *Snapshot {
				s := wasteSnapshot()
				s.Request = &Request{Bytes: 6 * mib}
				return s
			},
			verdict: VerdictOutOfMemory,
			want:    []string{"Not enough memory", "(50%) of the bytes in use is slack"},
		},
		{
			name: "state without a limit",
			s: func() *Snapshot {
				s := wasteSnapshot()
				s.Stats.BytesLimit = 0
				return s
			},
			verdict: VerdictState,
			want:    []string{"The memory limit is unknown", "No failed allocation"},
			not:     []string{"may still grow"},
		},
		{
			name:    "empty snapshot",
			s:       func() *Snapshot { return &Snapshot{} },
			verdict: VerdictState,
			want:    []string{"No failed allocation: 0 B free in the pool of 0 B"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := Explain(tc.s())
			assert.Equal(t, tc.verdict, ex.Verdict)
			for _, w := range tc.want {
				assert.Contains(t, ex.Text, w)
			}
			for _, n := range tc.not {
				assert.NotContains(t, ex.Text, n)
			}
		})
	}
}
