package bfcdump

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fixture testdata/oom.log is an invented TF 2.x log: glog prefixes,
// Keras progress bars redrawn with '\r', TF's non-fatal "ran out of memory"
// warning, the OOM dump of a 1.5 MiB request over two regions, the Python
// traceback, and the start of a second dump that must be ignored.
var oomLogChunks = []Chunk{
	{Addr: 0x7f3a40000000, Size: 1280, InUse: true, Bin: -1},
	{Addr: 0x7f3a40000500, Size: 256, InUse: true, Bin: -1},
	{Addr: 0x7f3a40000600, Size: 1046016, Bin: 11},
	{Addr: 0x7f3a400ffc00, Size: 1049600, InUse: true, Bin: -1},
	{Addr: 0x7f3a60000000, Size: 3145728, InUse: true, Bin: -1},
	{Addr: 0x7f3a60300000, Size: 1048576, Bin: 12},
}

func parseFixture(t *testing.T) *Snapshot {
	t.Helper()
	f, err := os.Open("testdata/oom.log")
	require.NoError(t, err)
	defer f.Close()
	s, err := ParseLog(f, "oom.log")
	require.NoError(t, err)
	return s
}

func TestParseLogFixture(t *testing.T) {
	s := parseFixture(t)
	assert.Equal(t, "GPU_0_bfc", s.AllocatorName)
	assert.Equal(t, &Request{Bytes: 1572864, Rounded: 1572864, Op: "sequential/conv2d_3/Conv2D"}, s.Request)
	assert.Equal(t, []Region{{0x7f3a40000000, 2 * mib}, {0x7f3a60000000, 4 * mib}}, s.Regions)
	assert.Equal(t, oomLogChunks, s.Chunks, "the second dump at the end is not merged in")
	assert.Equal(t, Stats{
		NumAllocs: 1234, BytesInUse: 4196864, PeakBytesInUse: 5245440, LargestAllocSize: 3145728,
		Fragmentation: float64(2094592-1048576) / 2094592,
		BytesLimit:    7340032, PoolBytes: 6 * mib, CurrRegionAllocationBytes: 8 * mib,
	}, s.Stats)
}

func TestParseLogPrefixesAndLineEnds(t *testing.T) {
	const body = `BFCAllocator dump for GPU_1_bfc
Next region of size 4096
InUse at 7f0000000000 of size 1024 next 1
Free  at 7f0000000400 of size 3072 next 18446744073709551615
Total bytes in pool: 4096 memory_limit_: 8192 available bytes: 4096 curr_region_allocation_bytes_: 8192`
	want := []Chunk{{Addr: 0x7f0000000000, Size: 1024, InUse: true, Bin: -1}, {Addr: 0x7f0000000400, Size: 3072, Bin: 3}}
	prefix := func(p string) string {
		lines := strings.Split(body, "\n")
		for i := range lines {
			lines[i] = p + lines[i]
		}
		return strings.Join(lines, "\n")
	}
	for name, in := range map[string]string{
		"bare":        body,
		"tf":          prefix("2026-01-02 10:11:12.123456: I tensorflow/tsl/framework/bfc_allocator.cc:1034] "),
		"glog":        prefix("I0102 10:11:12.123456   12345 bfc_allocator.cc:1034] "),
		"xla":         prefix("2026-01-02 10:11:12.123456: W external/local_xla/xla/tsl/framework/bfc_allocator.cc:1034] "),
		"error level": prefix("E0102 10:11:12.123456 12345 bfc_allocator.cc:1034] "),
		"crlf":        strings.ReplaceAll(body, "\n", "\r\n"),
		"cr":          strings.ReplaceAll(body, "\n", "\r"),
		"extra lines": strings.ReplaceAll(body, "\n", "\nsome other output\n\n"),
		"final eol":   body + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			s, err := ParseLog(strings.NewReader(in), name)
			require.NoError(t, err)
			assert.Equal(t, "GPU_1_bfc", s.AllocatorName)
			assert.Equal(t, want, s.Chunks)
			assert.Equal(t, []Region{{0x7f0000000000, 4096}}, s.Regions)
			assert.Equal(t, int64(8192), s.Stats.BytesLimit)
			assert.Equal(t, int64(4096), s.Stats.PoolBytes)
			assert.Equal(t, int64(1024), s.Stats.BytesInUse, "the in-use chunks' total when no Stats block")
		})
	}
}

func TestParseLogNewerXLAFormat(t *testing.T) {
	const in = `W0102 10:11:12.000001 777 bfc_allocator.cc:512] Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.00KiB (rounded to 1024) from the lower end requested by op 
I0102 10:11:12.000002 777 bfc_allocator.cc:1040] BFCAllocator dump for GPU_0_bfc
I0102 10:11:12.000003 777 bfc_allocator.cc:1047] Bin (256): 	Total Chunks: 1, Chunks in use: 1. 256B allocated for chunks. 256B in use in bin. 100B client-requested in use in bin.
I0102 10:11:12.000004 777 bfc_allocator.cc:1077] Next region of size 2097152
I0102 10:11:12.000005 777 bfc_allocator.cc:1090] InUse at 10000000000 of size 256 tag lower allocation_annotation jit_step{n=1} / fusion.3 next 1
I0102 10:11:12.000006 777 bfc_allocator.cc:1090] Free  at 10000000100 of size 2096896 tag lower next 18446744073709551615 freed_at_count 3
I0102 10:11:12.000007 777 bfc_allocator.cc:1100]      Summary of in-use Chunks by size: 
I0102 10:11:12.000008 777 bfc_allocator.cc:1107] Sum Total of in-use chunks: 256B
I0102 10:11:12.000009 777 bfc_allocator.cc:1120] Allocator memory summary: rounded request 1.0KiB, total free in pool 2.00MiB, largest free chunk usable by lower end 2.00MiB, unallocated bytes 0B, pool size 2.00MiB, pool limit 3.00MiB
I0102 10:11:12.000010 777 bfc_allocator.cc:1135] Allocator region growth hint: next region allocation target 4.00MiB (growth enabled).
I0102 10:11:12.000011 777 bfc_allocator.cc:1141] Stats: 
Limit:                         3145728
InUse:                             256
MaxInUse:                         4096
NumAllocs:                           7
MaxAllocSize:                     2048
Reserved:                            0
PeakReserved:                        0
LargestFreeBlock:              2096896
`
	s, err := ParseLog(strings.NewReader(in), "xla.log")
	require.NoError(t, err)
	assert.Equal(t, &Request{Bytes: 1024, Rounded: 1024}, s.Request)
	assert.Equal(t, []Chunk{
		{Addr: 1 << 40, Size: 256, InUse: true, Bin: -1},
		{Addr: 1<<40 + 256, Size: 2096896, Bin: 12, FreedAtCount: 3},
	}, s.Chunks)
	assert.Equal(t, int64(3145728), s.Stats.BytesLimit, "the Stats block's exact limit beats the summary's 3.00MiB")
	assert.Zero(t, s.Stats.PoolBytes, "the region's exact size stands in for the summary's approximate pool size")
	assert.Equal(t, uint64(2*mib), s.Summarize().PoolBytes)
	assert.Equal(t, int64(4*mib), s.Stats.CurrRegionAllocationBytes)
	assert.Equal(t, int64(7), s.Stats.NumAllocs)
	assert.Equal(t, int64(4096), s.Stats.PeakBytesInUse)
}

func TestParseLogHumanStats(t *testing.T) {
	// Some TF builds print the Stats block in human-readable sizes; exact
	// figures from elsewhere in the log win.
	const in = `BFCAllocator dump for GPU_0_bfc
InUse at 100 of size 3072 next 1
Free  at d00 of size 1024 next 18446744073709551615
Stats: 
Limit:             2.16GiB
InUse:              3.0KiB
MaxInUse:           7.5KiB
NumAllocs:              12
MaxAllocSize:       2.0KiB
`
	s, err := ParseLog(strings.NewReader(in), "h.log")
	require.NoError(t, err)
	assert.Equal(t, int64(2319282340), s.Stats.BytesLimit, "approximate")
	assert.Equal(t, int64(3072), s.Stats.BytesInUse)
	assert.Equal(t, int64(7680), s.Stats.PeakBytesInUse)
	assert.Equal(t, int64(12), s.Stats.NumAllocs)
	assert.Equal(t, int64(2048), s.Stats.LargestAllocSize)
}

func TestParseLogBinsOnly(t *testing.T) {
	s, err := ParseLog(strings.NewReader("Bin (256): \tTotal Chunks: 0, Chunks in use: 0. 0B allocated for chunks. 0B in use in bin. 0B client-requested in use in bin.\n"), "b.log")
	require.NoError(t, err, "bin lines alone are a (truncated) dump")
	assert.Empty(t, s.Chunks)
}

func TestParseLogRegionsLost(t *testing.T) {
	// A chunk before any region header: the headers describe part of the
	// pool only, so the regions are inferred instead.
	const in = "InUse at 1000 of size 4096 next 1\nNext region of size 4096\nFree  at 3000 of size 4096 next 18446744073709551615\n"
	s, err := ParseLog(strings.NewReader(in), "r.log")
	require.NoError(t, err)
	assert.Empty(t, s.Regions)
	assert.Equal(t, []Region{{0x1000, 4096}, {0x3000, 4096}}, s.PoolRegions())
}

func TestParseLogErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "e.log: no BFC allocator dump found in 0 lines: none is a line TensorFlow's BFC allocator prints"},
		{"unrelated text", "Epoch 1/10\nloss: 0.3\n", "e.log: no BFC allocator dump found in 2 lines: none is a line"},
		{"only warnings", "Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.50MiB with freed_by_count=0. The caller indicates that this is not a failure, but may mean that there could be performance gains if more memory were available.\n" +
			"Ran out of memory trying to allocate 1.09GiB. The caller indicates that this is not a failure, but may mean that there could be performance gains if more memory is available.\n",
			"only 2 of TensorFlow's warnings for an allocation it may retry"},
		{"unreadable chunk lines", "x\ny\nFree  at 7f00 of siz", "the lines that look like chunk lines cannot be read: line 3: not a whole chunk line"},
		{"bad rounded size", "Allocator (x) ran out of memory trying to allocate 1B (rounded to 99999999999999999999)requested by op y\n", "e.log:1: reading the rounded size"},
		{"zero region", "Next region of size 0\nInUse at 100 of size 256 next 1\n", "e.log:1: bad region size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseLog(strings.NewReader(tc.in), "e.log")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := ParseLog(strings.NewReader(""), "e.log")
	assert.ErrorIs(t, err, ErrNoDump)
	_, err = ParseLog(strings.NewReader("Allocator (x) ran out of memory trying to allocate 1B (rounded to 99999999999999999999)requested by op y"), "e.log")
	var serr *SyntaxError
	require.ErrorAs(t, err, &serr)
	assert.Equal(t, SyntaxError{File: "e.log", Line: 1, Msg: serr.Msg}, *serr)

	boom := errors.New("read failed")
	_, err = ParseLog(failReader{boom}, "e.log")
	assert.ErrorIs(t, err, boom)
}

// TestParseLogDamage: lines that cannot be one pool (unreadable chunk
// lines, chunks of two dumps, lost region headers) are worked around and
// said, not fatal: a pasted log is rarely whole.
func TestParseLogDamage(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		chunks   int
		regions  int
		note     string
	}{
		{"bad address", "InUse at 100 of size 256 next 1\nInUse at 7fzz of size 256 next 1\n", 1, 0, "line 2: not a whole chunk line"},
		{"huge address", "InUse at 100 of size 256 next 1\nInUse at 1ffffffffffffffff of size 256 next 1\n", 1, 0, `line 2: bad chunk address "1ffffffffffffffff"`},
		{"zero size", "InUse at 100 of size 256 next 1\nInUse at 200 of size 0 next 1\n", 1, 0, `line 2: bad chunk size "0"`},
		{"huge size", "InUse at 100 of size 256 next 1\nInUse at 200 of size 99999999999999999999 next 1\n", 1, 0, "line 2: bad chunk size"},
		{"wraps", "InUse at 100 of size 256 next 1\nInUse at ffffffffffffff00 of size 512 next 1\n", 1, 0, "chunk at 0xffffffffffffff00 of size 512 runs past the end of the address space"},
		{"overlap", "InUse at 1000 of size 4096 next 1\nFree  at 1800 of size 256 next 2\n", 1, 0, "The chunk at 0x1800 of size 256 (line 2) overlaps the chunk at 0x1000 of size 4096 (line 1): the paste mixes lines of two dumps, so line 2 is left out."},
		{"region too small", "Next region of size 256\nInUse at 1000 of size 4096 next 1\n", 1, 0, "The chunk at 0x1000 (line 2) lies outside the region of line 1 (0x1000, 256 B): a \"Next region\" line is missing."},
		{"region header lost", "Next region of size 512\nInUse at 1000 of size 256 next 1\nFree  at 1100 of size 256 next 18446744073709551615\nInUse at 9000 of size 256 next 3\n", 3, 0, "lies outside the region of line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseLog(strings.NewReader(tc.in), "e.log")
			require.NoError(t, err)
			assert.Len(t, s.Chunks, tc.chunks)
			assert.Len(t, s.Regions, tc.regions)
			rep := NewInspectReport(s, false)
			assert.True(t, rep.Source.Partial)
			assert.Contains(t, strings.Join(rep.Source.Notes, "\n"), tc.note)
		})
	}
}

type failReader struct{ err error }

func (f failReader) Read([]byte) (int, error) { return 0, f.err }

func TestParseLogLongLines(t *testing.T) {
	// A megabyte-long progress bar does not hide the lines around it, nor
	// trip a line-length limit.
	in := "InUse at 1000 of size 256 next 1\n" + strings.Repeat("=", 3*maxLogLine) + "\nFree  at 1100 of size 256 next 2\n"
	s, err := ParseLog(strings.NewReader(in), "l.log")
	require.NoError(t, err)
	assert.Len(t, s.Chunks, 2)
}

func TestLineReader(t *testing.T) {
	lr := newLineReader(strings.NewReader("a\r\nb\rc\n\nd"))
	type seg struct {
		text string
		line int
	}
	var got []seg
	for {
		s, n, err := lr.next()
		if err != nil {
			break
		}
		got = append(got, seg{s, n})
	}
	assert.Equal(t, []seg{{"a", 1}, {"b", 2}, {"c", 2}, {"", 3}, {"d", 4}}, got)
}

// FuzzParseLog feeds ParseLog pasted text: it must never panic; whatever
// it accepts must Validate, say where every summary figure comes from, and
// render; and CRLF line ends must read as "\n" ones. (Run it with a short
// -fuzzminimizetime: minimizing a new input from these seeds takes the
// default minute, during which the exec count stands still.)
func FuzzParseLog(f *testing.F) {
	for _, e := range logEras {
		data, err := os.ReadFile("testdata/logs/" + e.name + ".log")
		if err != nil {
			f.Fatal(err)
		}
		// A few lines of each kind keep each run short.
		var seed []string
		for i, l := range strings.Split(string(data), "\n") {
			if i%5 == 0 || strings.Contains(l, "ran out of memory") || strings.Contains(l, "Stats") {
				seed = append(seed, l)
			}
		}
		f.Add(strings.Join(seed, "\n"))
		f.Add(hardWrap(strings.Join(seed[:min(6, len(seed))], "\n"), 80))
	}
	f.Add("> Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.50MiB (rounded to 1572864)requested by op x\n> Stats: Limit: 100 InUse: 90\n")
	f.Add("Bin for 2.86MiB was 2.00MiB, Chunk State: \n  Size: 2.00MiB | Requested Size: 0B | in_use: 0 | bin_num: 13\n")
	f.Add("Chunk at 0x100 of size 256\nFree at 0x200 of size 256\nSum Total of in-use chunks: 256B\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseLog(strings.NewReader(in), "fuzz")
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("ParseLog returned a snapshot that does not validate: %v", err)
		}
		rep := NewInspectReport(s, true)
		for _, k := range []string{"pool_bytes", "bytes_in_use", "free_in_pool", "largest_free_chunk", "memory_limit", "chunks"} {
			if _, ok := rep.Provenance[k]; !ok {
				t.Fatalf("no provenance for %s", k)
			}
		}
		if err := WriteInspect(io.Discard, s, InspectOptions{Chunks: true}); err != nil {
			t.Fatal(err)
		}
		if strings.ContainsRune(in, '\r') {
			return
		}
		s2, err := ParseLog(strings.NewReader(strings.ReplaceAll(in, "\n", "\r\n")), "fuzz")
		if err != nil {
			t.Fatalf("the CRLF copy fails: %v", err)
		}
		rep2 := NewInspectReport(s2, true)
		if rep.Summary != rep2.Summary || rep.Explanation.Verdict != rep2.Explanation.Verdict {
			t.Fatalf("CRLF changes the reading:\n%+v\n%+v", rep.Summary, rep2.Summary)
		}
	})
}

// TestParseLogNotesBounded: a paste mangled on every line gets a report of
// bounded size, the first notes and a count of the rest.
func TestParseLogNotesBounded(t *testing.T) {
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "InUse at %x of size 4096 next 1\nFree  at %x of size 256 next 2\nInUse at zz%d of size 1 next 1\n", 0x100000+i*0x2000, 0x100000+i*0x2000+0x800, i)
	}
	s, err := ParseLog(strings.NewReader(b.String()), "m.log")
	require.NoError(t, err)
	rep := NewInspectReport(s, false)
	assert.LessOrEqual(t, len(rep.Source.Notes), 3*(maxNotes+1)+5)
	assert.Contains(t, strings.Join(rep.Source.Notes, "\n"), "... and 990 more lines of other dumps.")
	assert.Contains(t, strings.Join(rep.Source.Notes, "\n"), "... and 990 more lines skipped.")
}
