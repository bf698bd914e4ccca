package malloclab

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

// convert converts text and reads the result back with trace.Reader, which
// must accept it. Events are "alloc ID SIZE" and "free ID".
func convert(t *testing.T, text string, opt Options) ([]string, trace.Header, Stats, error) {
	t.Helper()
	var buf bytes.Buffer
	st, err := Convert(strings.NewReader(text), "t.rep", trace.NewWriter(&buf), opt)
	if err != nil {
		return nil, trace.Header{}, st, err
	}
	r, err := trace.NewReader(&buf, "out.jsonl")
	require.NoError(t, err)
	var evs []string
	for r.Next() {
		ev := r.Event()
		switch ev.Op {
		case trace.OpAlloc:
			evs = append(evs, "alloc "+strconv.FormatUint(ev.ID, 10)+" "+strconv.FormatUint(ev.Size, 10))
		case trace.OpFree:
			evs = append(evs, "free "+strconv.FormatUint(ev.ID, 10))
		default:
			t.Fatalf("unexpected event %v", ev)
		}
	}
	require.NoError(t, r.Err(), "the output is a valid trace")
	sum := r.Summary()
	assert.Equal(t, sum.Events, st.Events)
	assert.Equal(t, sum.Allocs, st.Allocs)
	assert.Equal(t, sum.Frees, st.Frees)
	assert.Equal(t, sum.PeakLiveBytes, st.PeakLiveBytes)
	assert.Equal(t, sum.LiveAllocs, st.LiveAtEnd)
	assert.Equal(t, sum.LiveBytes, st.LiveBytesAtEnd)
	return evs, r.Header(), st, nil
}

func TestConvertFile(t *testing.T) {
	data, err := os.ReadFile("testdata/small.rep")
	require.NoError(t, err)
	evs, h, st, err := convert(t, string(data), Options{Name: "small", Meta: map[string]string{"origin": `"test"`, "num_ids": "99"}})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"alloc 0 512", "alloc 1 128", "alloc 2 2040",
		"free 0", "alloc 0 640",
		"free 1", "alloc 1 16", "alloc 3 4072",
		"free 3", "alloc 3 8190",
		"free 2", "free 0", "free 1", "free 3",
	}, evs)
	assert.Equal(t, trace.Header{Version: 1, Name: "small", Source: "malloclab", Meta: map[string]string{
		"suggested_heap_size": "4096", "num_ids": "4", "num_ops": "12", "weight": "1", "origin": `"test"`,
	}}, h)
	assert.Equal(t, Stats{
		Header: Header{SuggestedHeapBytes: 4096, NumIDs: 4, NumOps: 12, Weight: 1},
		Lines:  16, Ops: 12, Events: 14, Allocs: 7, Frees: 7, Reallocs: 2,
		PeakLiveBytes: 640 + 16 + 2040 + 8190,
	}, st)
}

func TestConvertLayout(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string
		warnings   []string
	}{{
		name: "header on one line, comments, blank lines, spaces, size 0",
		text: "# made by hand\n\n 100 2 3 0 \n a  0  0\r\n\na 1 7\n# done\nf 0\n",
		want: []string{"alloc 0 0", "alloc 1 7", "free 0"},
	}, {
		name: "ids may be reused after a free",
		text: "0\n1\n4\n1\na 0 8\nf 0\na 0 16\nf 0\n",
		want: []string{"alloc 0 8", "free 0", "alloc 0 16", "free 0"},
	}, {
		name:     "op count and id count that disagree with the header are warnings",
		text:     "0\n2\n5\n1\na 0 8\na 7 8\nf 0\n",
		want:     []string{"alloc 0 8", "alloc 7 8", "free 0"},
		warnings: []string{"t.rep:3: the header declares 5 ops, the file has 3", "t.rep:2: the header declares 2 ids (0 to 1), the file uses id 7 (line 6)"},
	}, {
		name:     "no ids declared",
		text:     "0\n0\n1\n1\na 3 8\n",
		want:     []string{"alloc 3 8"},
		warnings: []string{"t.rep:2: the header declares 0 ids, the file uses ids up to 3 (line 5)"},
	}, {
		name: "an empty trace",
		text: "0\n0\n0\n0\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, _, st, err := convert(t, tt.text, Options{})
			require.NoError(t, err)
			assert.Equal(t, tt.want, evs)
			assert.Equal(t, tt.warnings, st.Warnings)
		})
	}
}

func TestConvertErrors(t *testing.T) {
	const hdr = "1000\n4\n2\n1\n"
	tests := []struct{ text, want string }{
		{"", "t.rep:0: the file ends inside the header: want 4 numbers (suggested heap size, number of ids, number of ops, weight), found 0 (is this a malloc-lab .rep file?)"},
		{"1000\n4\n", "t.rep:2: the file ends inside the header: want 4 numbers"},
		{"{\"op\":\"alloc\"}\n", `t.rep:1: header: suggested heap size "{\"op\":\"alloc\"}" is not a whole number`},
		{"1000\n-4\n", "t.rep:2: header: number of ids -4 is negative"},
		{"1 2 3 4 5\n", `t.rep:1: unexpected "5" after the four header numbers`},
		{hdr + "x 0 1\n", `t.rep:5: unknown op "x" (want a ID BYTES, r ID BYTES or f ID)`},
		{hdr + "a 0\n", "t.rep:5: want a ID BYTES, found 2 fields"},
		{hdr + "a 0 1\nf 0 1\n", "t.rep:6: want f ID, found 3 fields"},
		{hdr + "a zero 1\n", `t.rep:5: id "zero" is not a whole number`},
		{hdr + "a 0 -1\n", `t.rep:5: size "-1" is negative`},
		{hdr + "a 0 1.5\n", `t.rep:5: size "1.5" is not a whole number`},
		{hdr + "a 0 9223372036854775808\n", "t.rep:5: size 9223372036854775808 is too large (must be < 2^63)"},
		{hdr + "a 0 99999999999999999999\n", "t.rep:5: size 99999999999999999999 is too large (must be < 2^63)"},
		{hdr + "a 1 8\na 1 8\n", "t.rep:6: alloc of id 1 that is already live (allocated at line 5)"},
		{hdr + "a 1 8\nf 2\n", "t.rep:6: free of id 2 that is not live"},
		{hdr + "r 3 8\n", "t.rep:5: realloc of id 3 that is not live"},
		{hdr + "a 0 9223372036854775807\na 1 9223372036854775807\na 2 9\n", "t.rep:7: alloc of 9 bytes would make more than 2^64 bytes live"},
		{hdr + strings.Repeat("a", MaxLineBytes+1), "t.rep:5: line longer than 1 MiB (is this a malloc-lab .rep file?)"},
	}
	for _, tt := range tests {
		_, _, _, err := convert(t, tt.text, Options{})
		var serr *trace.SyntaxError
		require.ErrorAs(t, err, &serr, "%q", tt.text)
		assert.True(t, strings.HasPrefix(err.Error(), tt.want), "got %q\nwant %q", err, tt.want)
	}
}

func TestConvertLenient(t *testing.T) {
	text := "0\n3\n6\n1\na 0 8\nf 1\nbad line\nr 0 16\nf 0\nf 0\n"
	evs, _, st, err := convert(t, text, Options{Lenient: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"alloc 0 8", "free 0", "alloc 0 16", "free 0"}, evs)
	assert.Equal(t, int64(3), st.Skipped)
	require.Len(t, st.SkippedErrors, 3)
	assert.Equal(t, "t.rep:6: free of id 1 that is not live", st.SkippedErrors[0].Error())
	assert.Equal(t, "t.rep:10: free of id 0 that is not live", st.SkippedErrors[2].Error())
	assert.Empty(t, st.Warnings, "skipped lines count as ops")

	_, _, _, err = convert(t, "nope\n", Options{Lenient: true})
	assert.EqualError(t, err, `t.rep:1: header: suggested heap size "nope" is not a whole number`, "a bad header is never skipped")
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n -= len(p); w.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestConvertIOErrors(t *testing.T) {
	text := "0\n1\n20000\n1\n" + strings.Repeat("a 0 8\nf 0\n", 10000)
	_, err := Convert(strings.NewReader(text), "t.rep", trace.NewWriter(&failingWriter{n: 1000}), Options{})
	assert.ErrorContains(t, err, "disk full")

	_, err = Convert(io.MultiReader(strings.NewReader("0\n"), iotestErrReader{}), "t.rep", trace.NewWriter(io.Discard), Options{})
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.EqualError(t, err, "reading t.rep: unexpected EOF")
}

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func FuzzMalloclab(f *testing.F) {
	if data, err := os.ReadFile("testdata/small.rep"); err == nil {
		f.Add(data, false)
	}
	f.Add([]byte("0 2 3 1\na 0 9223372036854775807\nr 0 0\nf 0\n"), true)
	f.Add([]byte("1\n1\n1\n1\n# c\na 0 1\na 0 1\nr 1 1\nf 0 0\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, lenient bool) {
		var buf bytes.Buffer
		st, err := Convert(bytes.NewReader(data), "fuzz", trace.NewWriter(&buf), Options{Lenient: lenient})
		if err != nil {
			var serr *trace.SyntaxError
			require.ErrorAs(t, err, &serr)
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
