package bfcdump

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func memLog(t *testing.T, s *Snapshot) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, WriteMemoryLog(&b, s))
	return b.String()
}

func TestWriteMemoryLogGolden(t *testing.T) {
	golden(t, "frag.memlog", memLog(t, fragSnapshot()))
	golden(t, "waste.memlog", memLog(t, wasteSnapshot()))
}

func TestWriteMemoryLogLines(t *testing.T) {
	lines := strings.Split(memLog(t, fragSnapshot()), "\n")
	// The headline, as TF 2.x prints it.
	assert.Equal(t, []string{
		"Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.86MiB (rounded to 3000064)requested by op model/dense/MatMul",
		"If the cause is memory fragmentation maybe the environment variable 'TF_GPU_ALLOCATOR=cuda_malloc_async' will improve the situation. ",
		"Current allocation summary follows.",
		"Current allocation summary follows.",
		"BFCAllocator dump for GPU_0_bfc",
		"Bin (256): \tTotal Chunks: 0, Chunks in use: 0. 0B allocated for chunks. 0B in use in bin. 0B client-requested in use in bin.",
	}, lines[:6])
	assert.Contains(t, lines, "Bin (1048576): \tTotal Chunks: 4, Chunks in use: 2. 5.00MiB allocated for chunks. 2.50MiB in use in bin. 2.10MiB client-requested in use in bin.")
	// 3000064 bytes map to bin 13 (2 MiB), which holds the free 2 MiB chunk
	// at the end of region C, after the 6 MiB in-use chunk.
	assert.Contains(t, lines, "Bin for 2.86MiB was 2.00MiB, Chunk State: ")
	assert.Contains(t, lines, "  Size: 2.00MiB | Requested Size: 0B | in_use: 0 | bin_num: 13, prev:   Size: 6.00MiB | Requested Size: 6.00MiB | in_use: 1 | bin_num: -1")
	assert.Contains(t, lines, "Next region of size 2097152")
	assert.Contains(t, lines, "InUse at 7f0000000000 of size 1048576 next 1")
	assert.Contains(t, lines, "Free  at 7f0000100000 of size 524288 next 2")
	assert.Contains(t, lines, "InUse at 7f0000180000 of size 524288 next 18446744073709551615", "the last chunk of a region has no next")
	assert.Contains(t, lines, "     Summary of in-use Chunks by size: ")
	assert.Contains(t, lines, "1 Chunks of size 6291456 totalling 6.00MiB")
	assert.Contains(t, lines, "Sum Total of in-use chunks: 9.00MiB")
	assert.Contains(t, lines, "Total bytes in pool: 14680064 memory_limit_: 16777216 available bytes: 2097152 curr_region_allocation_bytes_: 16777216")
	assert.Contains(t, lines, "Limit:                        16777216")
	assert.Contains(t, lines, "NumAllocs:                          42")
	assert.Contains(t, lines, "LargestFreeBlock:                    0")
	assert.Equal(t, fragSnapshot().RenderOccupancy(), lines[len(lines)-2], "TF logs the strip after the dump")
}

func TestWriteMemoryLogWithoutRequest(t *testing.T) {
	out := memLog(t, wasteSnapshot())
	assert.True(t, strings.HasPrefix(out, "BFCAllocator dump for bfc\n"))
	assert.NotContains(t, out, "ran out of memory")
	assert.NotContains(t, out, "Chunk State")
	assert.True(t, strings.HasSuffix(out, "LargestFreeBlock:                    0\n\n"), "no strip without a failure")
}

func TestWriteMemoryLogOpAndSizes(t *testing.T) {
	s := wasteSnapshot()
	s.Request = &Request{Bytes: 100}
	out := memLog(t, s)
	assert.Contains(t, out, "trying to allocate 100B (rounded to 256)requested by op \n", "TF prints nothing after \"op \" when no op is known")

	s.Request = &Request{Rounded: 5 * mib}
	out = memLog(t, s)
	assert.Contains(t, out, "trying to allocate 5.00MiB (rounded to 5242880)")

	s.Request = nil
	s.Chunks[0].OpName, s.Chunks[0].ActionCount, s.Chunks[0].StepID = "conv", 5, 2
	s.Chunks[2].FreedAtCount = 9
	out = memLog(t, s)
	assert.Contains(t, out, "InUse at 10000000000 of size 2097152 by op conv action_count 5 step 2 next 1\n")
	assert.Contains(t, out, "Free  at 10000300000 of size 1048576 next 18446744073709551615 freed_at_count 9\n")
}

func TestWriteMemoryLogErrors(t *testing.T) {
	s := fragSnapshot()
	s.Chunks[3].Size = 0
	assert.ErrorContains(t, WriteMemoryLog(&strings.Builder{}, s), "writing a memory log: chunk 3")

	boom := errors.New("disk full")
	err := WriteMemoryLog(failWriter{boom}, fragSnapshot())
	assert.ErrorIs(t, err, boom)
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

func TestMemoryLogRoundTrip(t *testing.T) {
	for _, s := range []*Snapshot{fragSnapshot(), wasteSnapshot()} {
		t.Run(s.AllocatorName, func(t *testing.T) {
			back, err := ParseLog(strings.NewReader(memLog(t, s)), "log")
			require.NoError(t, err)
			assert.Equal(t, s.AllocatorName, back.AllocatorName)
			assert.Equal(t, s.Regions, back.Regions)
			want := make([]Chunk, len(s.Chunks))
			for i, c := range s.Chunks {
				c.Requested = 0 // a log does not print it
				want[i] = c
			}
			assert.Equal(t, want, back.Chunks)
			wantStats := s.Stats
			wantStats.Fragmentation = s.Summarize().TFFragmentation
			assert.Equal(t, wantStats, back.Stats)
			if s.Request == nil {
				assert.Nil(t, back.Request)
			} else {
				assert.Equal(t, &Request{Bytes: roundedBytes(s.Request.Bytes), Rounded: s.Request.Rounded, Op: s.Request.Op}, back.Request,
					"2.86MiB reads back as a size that rounds to 3000064, so the rounded size stands in")
			}
		})
	}
}
