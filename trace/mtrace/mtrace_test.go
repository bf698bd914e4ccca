package mtrace

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/trace"
)

// converted is the result of converting a log and reading the trace back.
type converted struct {
	header trace.Header
	events []string // "alloc 1 16 tag@addr", "free 1"
	stats  Stats
	sum    trace.Summary
}

// convert converts log and reads the result back with trace.Reader, which
// must accept it whatever happened.
func convert(t *testing.T, log string, opt Options) (converted, error) {
	t.Helper()
	var buf bytes.Buffer
	st, err := Convert(strings.NewReader(log), "log", trace.NewWriter(&buf), opt)
	out := converted{stats: st}
	if err != nil {
		return out, err
	}
	r, rerr := trace.NewReader(&buf, "out.jsonl")
	require.NoError(t, rerr)
	out.header = r.Header()
	for r.Next() {
		ev := r.Event()
		switch ev.Op {
		case trace.OpAlloc:
			s := fmtEvent("alloc", ev.ID, ev.Size) + " " + ev.Tag
			if ev.Flags&trace.HasAddr != 0 {
				s += "@" + hex(ev.Addr)
			}
			out.events = append(out.events, s)
		case trace.OpFree:
			out.events = append(out.events, "free "+itoa(ev.ID))
		default:
			t.Fatalf("unexpected event %v", ev)
		}
		assert.Zero(t, ev.Flags&trace.HasT, "no timestamps")
	}
	require.NoError(t, r.Err(), "the output is a valid trace")
	out.sum = r.Summary()
	assert.Equal(t, out.sum.Events, st.Events)
	assert.Equal(t, out.sum.Allocs, st.Allocs)
	assert.Equal(t, out.sum.Frees, st.Frees)
	assert.Equal(t, out.sum.PeakLiveBytes, st.PeakLiveBytes)
	assert.Equal(t, out.sum.LiveAllocs, st.LiveAtEnd)
	assert.Equal(t, out.sum.LiveBytes, st.LiveBytesAtEnd)
	return out, nil
}

func fmtEvent(op string, id, size uint64) string { return op + " " + itoa(id) + " " + itoa(size) }
func itoa(n uint64) string                       { return strconv.FormatUint(n, 10) }
func hex(n uint64) string                        { return "0x" + strconv.FormatUint(n, 16) }

func TestConvert(t *testing.T) {
	tests := []struct {
		name  string
		log   string
		want  []string
		check func(t *testing.T, st Stats)
	}{{
		name: "malloc and free, every caller form",
		log: `= Start
@ ./prog:[0x1139] + 0x55d0a2f4b2a0 0x10
@ /lib/x86_64-linux-gnu/libc.so.6:(__strdup+1a)[0x9e9aa] + 0x55d0a2f4b2c0 0x7
@ [0x7f3a5c1d2e3f] + 0x55d0a2f4b2e0 0x20
+ 0x55d0a2f4b300 0
@ /opt/my tools/bin/app:(make_node-10)[0x2000] + 0x55d0a2f4b320 0x1a
@ ./prog:[0x1150] - 0x55d0a2f4b2a0
@ ./prog:[0x1150] - 0x55d0a2f4b300
= End
`,
		want: []string{
			"alloc 1 16 prog+0x1139@0x55d0a2f4b2a0",
			"alloc 2 7 __strdup@0x55d0a2f4b2c0",
			"alloc 3 32 0x7f3a5c1d2e3f@0x55d0a2f4b2e0",
			"alloc 4 0 @0x55d0a2f4b300",
			"alloc 5 26 make_node@0x55d0a2f4b320",
			"free 1",
			"free 4",
		},
		check: func(t *testing.T, st Stats) {
			assert.Equal(t, Stats{Lines: 9, Starts: 1, Events: 7, Allocs: 5, Frees: 2,
				LiveAtEnd: 3, LiveBytesAtEnd: 7 + 32 + 26, PeakLiveBytes: 16 + 7 + 32 + 26}, st)
		},
	}, {
		name: "realloc is a free of the old block and an alloc of the new",
		log: `@ ./p:[0x1] + 0x1000 0x10
@ ./p:[0x2] < 0x1000
@ ./p:[0x2] > 0x2000 0x40
@ ./p:[0x3] < 0x2000
@ ./p:[0x3] > 0x2000 0x20
`,
		want: []string{"alloc 1 16 p+0x1@0x1000", "free 1", "alloc 2 64 p+0x2@0x2000", "free 2", "alloc 3 32 p+0x3@0x2000"},
		check: func(t *testing.T, st Stats) {
			assert.Equal(t, int64(2), st.Reallocs)
			assert.Equal(t, uint64(64), st.PeakLiveBytes)
		},
	}, {
		// glibc logs realloc(NULL, n) as a malloc and realloc(p, 0) as a free.
		name: "realloc of NULL and realloc to size 0",
		log: `@ ./p:[0x1] + 0x1000 0x10
@ ./p:[0x2] - 0x1000
@ ./p:[0x2] + 0x1000 0x8
`,
		want: []string{"alloc 1 16 p+0x1@0x1000", "free 1", "alloc 2 8 p+0x2@0x1000"},
	}, {
		name: "failed malloc and failed realloc write nothing",
		log: `@ ./p:[0x1] + 0x1000 0x10
@ ./p:[0x2] + (nil) 0xffffffffffffffff
@ ./p:[0x3] ! 0x1000 0x7fffffffffffffff
@ ./p:[0x4] < 0x1000
@ ./p:[0x4] > (nil) 0x100000
@ ./p:[0x5] - 0x1000
`,
		want: []string{"alloc 1 16 p+0x1@0x1000", "free 1"},
		check: func(t *testing.T, st Stats) {
			assert.Equal(t, int64(3), st.FailedAllocs)
			assert.Zero(t, st.Reallocs)
		},
	}, {
		name: "frees of addresses allocated before tracing are dropped and counted",
		log: `= Start
@ ./p:[0x1] - 0x9000
@ ./p:[0x1] + 0x1000 0x10
@ ./p:[0x2] < 0x9100
@ ./p:[0x2] > 0x9100 0x30
@ ./p:[0x1] - (nil)
@ ./p:[0x1] - 0x0
`,
		want: []string{"alloc 1 16 p+0x1@0x1000", "alloc 2 48 p+0x2@0x9100"},
		check: func(t *testing.T, st Stats) {
			assert.Equal(t, int64(2), st.DroppedFrees, "the free and the realloc's old block; free(NULL) is no free")
			assert.Equal(t, int64(1), st.Reallocs)
		},
	}, {
		name: "a malloc of a live address frees the old allocation first",
		log: `@ ./p:[0x1] + 0x1000 0x10
@ ./p:[0x1] + 0x1000 0x20
@ ./p:[0x2] < 0x1100
@ ./p:[0x2] > 0x1000 0x30
`,
		want: []string{"alloc 1 16 p+0x1@0x1000", "free 1", "alloc 2 32 p+0x1@0x1000", "free 2", "alloc 3 48 p+0x2@0x1000"},
		check: func(t *testing.T, st Stats) {
			assert.Equal(t, int64(2), st.DoubleAllocs)
			assert.Equal(t, int64(1), st.DroppedFrees)
			assert.Equal(t, uint64(48), st.PeakLiveBytes)
		},
	}, {
		name: "blank lines, CRLF and a second session",
		log:  "= Start\r\n\r\n   \n@ ./p:[0x1] + 0x1000 0x10\r\n= End\n= Start\n@ ./p:[0x1] - 0x1000\n  ",
		want: []string{"alloc 1 16 p+0x1@0x1000", "free 1"},
		check: func(t *testing.T, st Stats) {
			assert.Equal(t, int64(2), st.Starts)
			assert.Equal(t, int64(8), st.Lines)
			assert.False(t, st.CutLastLine, "a blank last line is no cut line")
		},
	}, {
		// The process died with "- 0x1000\n" half written: the address
		// read would be wrong.
		name: "a last line without newline was cut short and is dropped",
		log:  "@ ./p:[0x1] + 0x1000 0x10\n@ ./p:[0x2] + 0x2000 0x20\n@ ./p:[0x1] - 0x10",
		want: []string{"alloc 1 16 p+0x1@0x1000", "alloc 2 32 p+0x2@0x2000"},
		check: func(t *testing.T, st Stats) {
			assert.True(t, st.CutLastLine)
			assert.Zero(t, st.DroppedFrees)
			assert.Equal(t, int64(3), st.Lines)
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := convert(t, tt.log, Options{})
			require.NoError(t, err)
			assert.Equal(t, tt.want, out.events)
			if tt.check != nil {
				tt.check(t, out.stats)
			}
		})
	}
}

func TestConvertHeaderAndOptions(t *testing.T) {
	out, err := convert(t, "@ ./p:[0x1] + 0x1000 0x10\n", Options{
		Name:   "sort",
		NoAddr: true,
		Meta:   map[string]string{"command": `"sort in.txt"`, "source": `"ignored"`},
	})
	require.NoError(t, err)
	assert.Equal(t, trace.Header{Version: 1, Name: "sort", Source: "mtrace",
		Meta: map[string]string{"command": `"sort in.txt"`}}, out.header)
	assert.Equal(t, []string{"alloc 1 16 p+0x1"}, out.events, "no addr")
}

func TestConvertErrors(t *testing.T) {
	tests := []struct{ log, want string }{
		{"hello\n", `log:1: not an mtrace line: "hello" (want "@ CALLER + 0xADDR 0xSIZE"`},
		{"= Start\n@ ./p:[0x1] * 0x1000 0x10\n", `log:2: not an mtrace line: "@ ./p:[0x1] * 0x1000 0x10"`},
		{"@ ./p:[0x1] + 0x1000\n", `log:1: not an mtrace line`},
		{"x ./p:[0x1] + 0x1000 0x10\n", `log:1: not an mtrace line`},
		{"@ ./p:[0x1] + 1000 0x10\n", `log:1: bad address "1000" (want 0x and hex digits, or (nil))`},
		{"@ ./p:[0x1] - 0xZZ\n", `log:1: bad address "0xZZ"`},
		{"@ ./p:[0x1] + 0x1000 lots\n", `log:1: bad size "lots" (want 0x and hex digits)`},
		{"@ ./p:[0x1] + 0x1000 0x8000000000000000\n", `log:1: size 0x8000000000000000 is too large (sizes must be < 2^63)`},
		{"@ ./p:[0x1] + 0x1000 0x10\n@ ./p:[0x1] > 0x2000 0x10\n", `log:2: realloc result (">") without the "<" line before it`},
		{"@ ./p:[0x1] + 0x1000 0x10\n@ ./p:[0x2] < 0x1000\n@ ./p:[0x3] - 0x1000\n",
			`log:2: realloc of 0x1000 ("<") is not followed by its result (">")`},
		{"@ ./p:[0x2] < 0x1000\n", `log:1: realloc of 0x1000 ("<") is not followed by its result (">")`},
		{"@ ./p:[0x1] + 0x1000 0x7fffffffffffffff\n@ ./p:[0x1] + 0x2000 0x7fffffffffffffff\n@ ./p:[0x1] + 0x3000 0x7fffffffffffffff\n",
			`log:3: malloc of 9223372036854775807 bytes would make more than 2^64 bytes live`},
		{strings.Repeat("x", MaxLineBytes+1), "log:1: line longer than 1 MiB (is this an mtrace log?)"},
	}
	for _, tt := range tests {
		_, err := convert(t, tt.log, Options{})
		var serr *trace.SyntaxError
		require.ErrorAs(t, err, &serr, "%q", tt.log)
		assert.True(t, strings.HasPrefix(err.Error(), tt.want), "got %q, want prefix %q", err, tt.want)
	}
}

func TestConvertLenient(t *testing.T) {
	log := `= Start
@ ./p:[0x1] + 0x1000 0x10
garbage
@ ./p:[0x2] < 0x1000
@ ./p:[0x3] + 0x2000 0x20
@ ./p:[0x4] > 0x3000 0x30
@ ./p:[0x1] - 0x1000
@ ./p:[0x1] - 0x2000
@ ./p:[0x5] < 0x4000
@ ./p:[0x5] > 0x4000 0x80000000000000000
@ ./p:[0x6] < 0x1
`
	out, err := convert(t, log, Options{Lenient: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"alloc 1 16 p+0x1@0x1000", "alloc 2 32 p+0x3@0x2000", "free 1", "free 2"}, out.events)
	assert.Equal(t, int64(5), out.stats.Skipped)
	var msgs []string
	for _, e := range out.stats.SkippedErrors {
		msgs = append(msgs, e.Error())
	}
	assert.Equal(t, []string{
		`log:3: not an mtrace line: "garbage" (` + wantLine + `)`,
		`log:4: realloc of 0x1000 ("<") is not followed by its result (">")`,
		`log:6: realloc result (">") without the "<" line before it`,
		`log:10: bad size "0x80000000000000000" (want 0x and hex digits)`,
		`log:11: realloc of 0x1 ("<") is not followed by its result (">")`,
	}, msgs)
}

func TestConvertLenientKeepsReallocHalvesTogether(t *testing.T) {
	log := "@ ./p:[0x1] + 0x1000 0x10\n@ ./p:[0x2] < 0x1000\n@ ./p:[0x2] > 0x20\n@ ./p:[0x2] > 0x2000 0x20\n"
	out, err := convert(t, log, Options{Lenient: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"alloc 1 16 p+0x1@0x1000", "free 1", "alloc 2 32 p+0x2@0x2000"}, out.events)
	assert.Equal(t, int64(1), out.stats.Skipped)
}

func TestConvertKeepsFewSkippedErrors(t *testing.T) {
	out, err := convert(t, "= Start\n"+strings.Repeat("junk\n", 100), Options{Lenient: true})
	require.NoError(t, err)
	assert.Equal(t, int64(100), out.stats.Skipped)
	assert.Len(t, out.stats.SkippedErrors, maxKeptErrors)
}

func TestConvertNotALog(t *testing.T) {
	var buf bytes.Buffer
	_, err := Convert(strings.NewReader("hello\nworld\n"), "notes.txt", trace.NewWriter(&buf), Options{Lenient: true})
	require.ErrorIs(t, err, ErrNoMtrace)
	assert.EqualError(t, err, "notes.txt: no mtrace output in 2 lines (is this an mtrace log?)")
	assert.Empty(t, buf.String(), "nothing is flushed")

	_, err = Convert(strings.NewReader(`{"op":"alloc","id":1,"size":1}`), "t.jsonl", trace.NewWriter(&buf), Options{})
	assert.EqualError(t, err, "t.jsonl: no mtrace output in 1 line (is this an mtrace log?)", "a cut last line is no output")

	out, err := convert(t, "", Options{})
	require.NoError(t, err, "an empty log is a log of nothing")
	assert.Empty(t, out.events)
	out, err = convert(t, "= Start\n", Options{})
	require.NoError(t, err)
	assert.Empty(t, out.events)
}

// A log recorded from GNU sort 9.1 on glibc 2.36.
func TestConvertRecordedLog(t *testing.T) {
	data, err := os.ReadFile("testdata/sort.mtrace")
	require.NoError(t, err)
	out, err := convert(t, string(data), Options{})
	require.NoError(t, err)
	st := out.stats
	assert.Equal(t, int64(1), st.Starts)
	assert.Equal(t, int64(221), st.Allocs)
	assert.Equal(t, int64(207), st.Frees)
	assert.Equal(t, int64(1), st.Reallocs)
	assert.Zero(t, st.DroppedFrees+st.DoubleAllocs+st.FailedAllocs+st.Skipped)
	assert.Equal(t, uint64(17340), st.PeakLiveBytes)
	assert.Contains(t, out.events, "alloc 3 4096 _IO_file_doallocate@0x55ff72b49680")
}

func TestCallerTag(t *testing.T) {
	for caller, want := range map[string]string{
		"/lib/x86_64-linux-gnu/libc.so.6:(__strdup+1a)[0x9e9aa]": "__strdup",
		"/lib/libc.so.6:(__strdup+0x1a)[0x9e9aa]":                "__strdup",
		"./prog:(helper-4)[0x1130]":                              "helper",
		"./prog:[0x1139]":                                        "prog+0x1139",
		"sort:[0x13339]":                                         "sort+0x13339",
		"/opt/my app/bin/x:[0x10]":                               "x+0x10",
		":(f+1)[0x10]":                                           "f",
		"(f+1)[0x10]":                                            "f",
		"[0x7f3a5c1d2e3f]":                                       "0x7f3a5c1d2e3f",
		"/lib/a.so:()[0x10]":                                     "a.so+0x10",
		"something else":                                         "something else",
		"]":                                                      "]",
	} {
		assert.Equal(t, want, callerTag(caller), caller)
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n -= len(p); w.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestConvertWriteError(t *testing.T) {
	log := strings.Repeat("@ ./p:[0x1] + 0x1000 0x10\n@ ./p:[0x1] - 0x1000\n", 10000)
	_, err := Convert(strings.NewReader(log), "log", trace.NewWriter(&failingWriter{n: 1000}), Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "disk full")
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestConvertReadError(t *testing.T) {
	_, err := Convert(failingReader{}, "log", trace.NewWriter(io.Discard), Options{})
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, "reading log: unexpected EOF", err.Error())
}

func FuzzMtrace(f *testing.F) {
	if data, err := os.ReadFile("testdata/sort.mtrace"); err == nil {
		f.Add(data[:min(len(data), 4000)], false)
	}
	f.Add([]byte("= Start\n@ ./p:[0x1] + 0x1000 0x10\n@ ./p:[0x2] < 0x1000\n@ ./p:[0x2] > 0x1000 0x20\n- 0x1000\n"), false)
	f.Add([]byte("+ 0x1 0x7fffffffffffffff\n+ 0x2 0x7fffffffffffffff\n+ 0x1 0\n! 0x1 0x1\n< 0x9\n> (nil) 0\n"), true)
	f.Add([]byte("@ a b c < 0x1\n@ [0x1] > 0x2 0\n@ + + 0x3 0x4\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, lenient bool) {
		var buf bytes.Buffer
		st, err := Convert(bytes.NewReader(data), "fuzz", trace.NewWriter(&buf), Options{Lenient: lenient})
		if err != nil {
			if errors.Is(err, ErrNoMtrace) {
				return
			}
			var serr *trace.SyntaxError
			require.ErrorAs(t, err, &serr)
			require.Positive(t, serr.Line)
			return
		}
		r, err := trace.NewReader(&buf, "out")
		require.NoError(t, err)
		for r.Next() {
		}
		require.NoError(t, r.Err(), "Convert's output is a valid trace")
		sum := r.Summary()
		require.Equal(t, st.Allocs, sum.Allocs)
		require.Equal(t, st.Frees, sum.Frees)
		require.Equal(t, st.PeakLiveBytes, sum.PeakLiveBytes)
	})
}
