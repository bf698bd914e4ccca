package pytorchoom

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readString(t *testing.T, text string) *Message {
	t.Helper()
	in, err := Read(strings.NewReader(text), "t")
	require.NoError(t, err)
	return in.Last
}

// The rules, their order, and what a verdict says when the figures cannot
// settle it.
func TestPyTorchOOMExplainRules(t *testing.T) {
	cases := []struct {
		name      string
		text      string
		verdict   Verdict
		confident bool
		reason    []string // in Reason
		open      []string // in CannotKnow, in order
	}{
		{
			name:      "the cache holds the request in pieces",
			text:      "RuntimeError: CUDA out of memory. Tried to allocate 10.84 GiB (GPU 0; 23.65 GiB total capacity; 1.06 GiB already allocated; 10.26 GiB free; 12.53 GiB reserved in total by PyTorch)",
			verdict:   Fragmentation,
			confident: true,
			reason:    []string{"about 11.47 GiB reserved but unallocated", "10.84 GiB", "10.26 GiB free"},
		},
		{
			name:      "free and the cache's pieces together would hold it",
			text:      "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 1.50 GiB is free. Of the allocated memory 20.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated.",
			verdict:   Fragmentation,
			confident: true,
			reason:    []string{"does not fit in the 1.50 GiB", "plus the 1.00 GiB", "(about 2.50 GiB)"},
		},
		{
			name:      "equal within rounding",
			text:      "CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 0 bytes is free. Including non-PyTorch memory, this process has 23.40 GiB memory in use. Of the allocated memory 21.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated.",
			verdict:   Fragmentation,
			confident: false,
			open:      []string{"equal within the rounding"},
		},
		{
			name:      "a limit while the device has room",
			text:      "RuntimeError: CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; 23.70 GiB total capacity; 11.62 GiB already allocated; 11.41 GiB free; 11.85 GiB allowed; 11.80 GiB reserved in total by PyTorch)",
			verdict:   Limit,
			confident: true,
			reason:    []string{"at most 11.85 GiB", "had reserved 11.80 GiB", "about 12.30 GiB", "11.41 GiB free"},
		},
		{
			name:      "a limit that binds on a full device is no-room",
			text:      "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.70 GiB total capacity; 11.62 GiB already allocated; 1.00 GiB free; 11.85 GiB allowed; 11.80 GiB reserved in total by PyTorch)",
			verdict:   NoRoom,
			confident: false, // 10.90 GiB outside PyTorch's cache may be other processes'
			reason:    []string{"limit of 11.85 GiB would stop it too", "about 10.90 GiB of it is in use outside PyTorch's cache"},
			open:      []string{"lists no processes"},
		},
		{
			name:      "room on the device, a 2.x message that may leave a limit out",
			text:      "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 7.65 GiB of which 5.36 GiB is free. Of the allocated memory 1.70 GiB is allocated by PyTorch, and 2.00 MiB is reserved by PyTorch but unallocated.",
			verdict:   Limit,
			confident: true,
			reason:    []string{"5.36 GiB free", "leave the limit out", "a per-process memory limit"},
		},
		{
			name:      "room on the device and nothing to stop it",
			text:      "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; 8.57 MiB already allocated; 9.28 GiB free; 20.00 MiB reserved in total by PyTorch)",
			verdict:   NoRoom,
			confident: false,
			reason:    []string{"do not explain the failure", "9.28 GiB free", "12.50 MiB"},
		},
		{
			name:      "other processes listed",
			text:      "CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 14.57 GiB of which 1.15 GiB is free. Process 2493055 has 12.02 GiB memory in use. Including non-PyTorch memory, this process has 1.38 GiB memory in use. Of the allocated memory 1.17 GiB is allocated by PyTorch, and 10.83 MiB is reserved by PyTorch but unallocated.",
			verdict:   OtherProcess,
			confident: true,
			reason:    []string{"hold 12.02 GiB", "pid 2493055: 12.02 GiB", "1.15 GiB free", "1.95 GiB"},
		},
		{
			name:      "not listed: other processes may explain it, or not",
			text:      "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.90 GiB total capacity; 6.00 GiB already allocated; 1.00 GiB free; 6.10 GiB reserved in total by PyTorch)",
			verdict:   NoRoom,
			confident: false,
			reason:    []string{"about 8.80 GiB of it is in use outside PyTorch's cache"},
			open:      []string{"who holds the about 8.80 GiB"},
		},
		{
			name:      "two lines could be this process: either way the other holds enough",
			text:      "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.00 GiB is free. Process 11 has 40.00 GiB memory in use. Process 12 has 35.00 GiB memory in use. Of the allocated memory 30.00 GiB is allocated by PyTorch, and 10.00 MiB is reserved by PyTorch but unallocated.",
			verdict:   OtherProcess,
			confident: true,
			reason:    []string{"which is this process is uncertain"},
		},
		{
			name:      "more than the whole GPU",
			text:      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 10.73 GiB (GPU 0; 8.00 GiB total capacity; 5.20 GiB already allocated; 0 bytes free; 6.15 GiB reserved in total by PyTorch)",
			verdict:   NoRoom,
			confident: true,
			reason:    []string{"more than the GPU's whole 8.00 GiB"},
		},
		{
			name:      "Windows counts more than the GPU has",
			text:      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 10.73 GiB (GPU 0; 8.00 GiB total capacity; 17.20 GiB already allocated; 0 bytes free; 19.15 GiB reserved in total by PyTorch)",
			verdict:   NoRoom,
			confident: false,
			open:      []string{"WDDM"},
		},
		{
			name:      "a paste cut after the request",
			text:      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.\n\nNext question:",
			verdict:   Fragmentation,
			confident: false,
			reason:    []string{"The paste stops before the figures", "20.00 MiB"},
			open:      []string{"reserved but unallocated", "the paste stops after the request"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := readString(t, tc.text)
			e := Explain(m)
			assert.Equal(t, tc.verdict, e.Verdict, e.Reason)
			assert.Equal(t, tc.confident, e.Confident, "%s\n%q", e.Reason, e.CannotKnow)
			for _, r := range tc.reason {
				assert.Contains(t, e.Reason, r)
			}
			all := strings.Join(e.CannotKnow, "\n")
			for _, o := range tc.open {
				assert.Contains(t, all, o)
			}
			if !e.Confident {
				assert.NotEmpty(t, e.CannotKnow, e.Reason)
			}
			assert.NotEmpty(t, e.RestsOn)
			assert.NotEmpty(t, e.Advice)
			assert.NotContains(t, e.Also, NoRoom)
			assert.NotContains(t, e.Reason, "unknown", "a reason names figures, not unknowns")
		})
	}
}

// NVML's "not available" (2^64 − 1 bytes, printed 17179869184.00 GiB) is no
// figure.
func TestPyTorchOOMNVMLNotAvailable(t *testing.T) {
	m := readString(t, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.98 GiB. GPU 0 has a total capacity of 31.84 GiB of which 16.30 GiB is free. "+
		"Process 77 has 17179869184.00 GiB memory in use. Including non-PyTorch memory, this process has 17179869184.00 GiB memory in use. 17.51 GiB allowed; "+
		"Of the allocated memory 6.74 GiB is allocated by PyTorch, and 7.02 GiB is reserved by PyTorch but unallocated.")
	assert.True(t, m.SelfListed)
	assert.Nil(t, m.ProcessInUse)
	require.Len(t, m.Others, 1)
	assert.Nil(t, m.Others[0].InUse)
	assert.Len(t, m.Notes, 2)
	assert.Contains(t, m.Notes[1], "17179869184.00 GiB")
	// 7.02 GiB reserved but unallocated covers 3.98 GiB.
	assert.Equal(t, Fragmentation, Explain(m).Verdict)

	rep := NewReport(&Input{Name: "t", Count: 1, Last: m})
	require.NotNil(t, rep.PyTorch.OtherProcesses)
	assert.Nil(t, rep.PyTorch.OtherProcesses[0].Bytes)
	assert.Nil(t, rep.PyTorch.ProcessInUse)
}

func TestPyTorchOOMParseSize(t *testing.T) {
	cases := []struct {
		in        string
		bytes     uint64
		tolerance uint64
		printed   string
		n         int
		na        bool
	}{
		{"0bytes", 0, 0, "0 bytes", 6, false},
		{"1024bytesisfree", 1024, 0, "1024 bytes", 9, false},
		{"1.00kib", 1024, 5, "1.00 KiB", 7, false},
		{"1024.00kib", 1 << 20, 5, "1024.00 KiB", 10, false},
		{"20.00mib(gpu0;", 20 << 20, 5242, "20.00 MiB", 8, false},
		{"1.54gib.gpu", 1653562409, 5368709, "1.54 GiB", 7, false},
		{"2tib", 2 << 40, 1 << 39, "2 TiB", 4, false},
		{"9.57gb,other", 10275709256, 5368709, "9.57 GB", 6, false}, // MPS's own format_size: binary
		{"292.50mbonprivate", 306708480, 5242, "292.50 MB", 8, false},
		{"17179869184.00gibmemory", 0, 5368709, "17179869184.00 GiB", 17, true},
		{"99999999999999999999gib", 0, 0, "", 0, false}, // 20 digits
	}
	for _, tc := range cases {
		s, n, na, ok := parseSize([]byte(tc.in))
		if tc.printed == "" {
			assert.False(t, ok, tc.in)
			continue
		}
		require.True(t, ok, tc.in)
		assert.Equal(t, tc.n, n, tc.in)
		assert.Equal(t, tc.na, na, tc.in)
		assert.Equal(t, tc.printed, s.Printed, tc.in)
		assert.Equal(t, tc.tolerance, s.Tolerance, tc.in)
		if !tc.na {
			assert.Equal(t, tc.bytes, s.Bytes, tc.in)
		}
	}
	for _, bad := range []string{"", "gib", ".5gib", "12", "12 gib", "1.2.3gib", "12kg"} {
		_, _, _, ok := parseSize([]byte(bad))
		assert.False(t, ok, bad)
	}
}

func TestPyTorchOOMFormatSize(t *testing.T) {
	for n, want := range map[uint64]string{
		0: "0 bytes", 1024: "1024 bytes", 1025: "1.00 KiB", 1 << 20: "1024.00 KiB",
		1<<20 + 1: "1.00 MiB", 1 << 30: "1024.00 MiB", 1653562409: "1.54 GiB",
	} {
		assert.Equal(t, want, FormatSize(n))
	}
}

func TestPyTorchOOMTri(t *testing.T) {
	a := span{lo: 10, hi: 20, known: true}
	assert.Equal(t, yes, geq(a, span{lo: 5, hi: 10, known: true}))
	assert.Equal(t, maybe, geq(a, span{lo: 15, hi: 15, known: true}))
	assert.Equal(t, no, geq(a, span{lo: 21, hi: 30, known: true}))
	assert.Equal(t, maybe, geq(a, span{}))
	assert.Equal(t, no, gt(a, span{lo: 20, hi: 25, known: true}))
	assert.Equal(t, yes, or(no, maybe, yes))
	assert.Equal(t, no, and(yes, maybe, no))
	assert.Equal(t, span{lo: 0, hi: 15, known: true}, a.sub(span{lo: 5, hi: 12, known: true}))
}

// Other devices' words, and the odd characters of web pastes.
func TestPyTorchOOMVariants(t *testing.T) {
	m := readString(t, "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 256.00 MiB. GPU 0 has a total capacity of 15.11 GiB of which 100.00 MiB is free. "+
		"Of the allocated memory 14.50 GiB is allocated by PyTorch, and 300.00 MiB is reserved by PyTorch but unallocated. Please use `empty_cache` to release all unoccupied cached memory.")
	assert.Equal(t, "XPU", m.Device)
	assert.Equal(t, "empty_cache", m.Advice)
	assert.False(t, m.Truncated)
	assert.Equal(t, Fragmentation, Explain(m).Verdict)

	// A non-breaking space, a zero-width space, HTML's &gt; in the advice.
	m = readString(t, "RuntimeError: CUDA out of memory. Tried to allocate 258.00\u00a0MiB (GPU 0; 23.54 GiB total\u200b capacity; 11.75 GiB already allocated; "+
		"572.50 MiB free; 12.40 GiB reserved in total by PyTorch) If reserved memory is &gt;&gt; allocated memory try setting max_split_size_mb to avoid fragmentation.")
	assert.Equal(t, "258.00 MiB", m.Request.Printed)
	assert.Equal(t, "23.54 GiB", m.TotalCapacity.Printed)
	assert.Equal(t, "max_split_size_mb", m.Advice)
	assert.Equal(t, "1.10–1.12", m.versions())

	// "Pytorch", as a port prints it.
	m = readString(t, "CUDA out of memory. Tried to allocate 2.93 GiB (GPU 0; 23.80 GiB total capacity; 12.04 GiB already allocated; 2.82 GiB free; 19.69 GiB reserved in total by Pytorch)")
	assert.Equal(t, "19.69 GiB", m.Reserved.Printed)
	assert.Equal(t, Fragmentation, Explain(m).Verdict)
}

// A paste cut right after the request does not say which release wrote it.
func TestPyTorchOOMUnknownFormat(t *testing.T) {
	m := readString(t, "CUDA out of memory. Tried to allocate 20.00 MiB")
	assert.Equal(t, FormatUnknown, m.Format)
	assert.Equal(t, "unknown", m.Format.String())
	assert.True(t, m.Truncated)
	e := Explain(m)
	assert.False(t, e.Confident)
	assert.Contains(t, e.Advice[0], "expandable_segments:True (PyTorch 2.1 and later)")
	rep := NewReport(&Input{Name: "t", Count: 1, Last: m})
	assert.Equal(t, "unknown", rep.Format)
	assert.Equal(t, "unknown", rep.Source.PyTorchVersions)
}
