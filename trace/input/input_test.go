package input

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/pytorch"
)

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name, head string
		want       Format
		err        string
	}{
		{"empty", "", Trace, ""},
		{"a header", `{"bfcsim_trace":1,"name":"x"}` + "\n", Trace, ""},
		{"an event", `{"op":"alloc","id":1,"size":8}` + "\n", Trace, ""},
		{"an event with an unknown key first", `{"x":1,"op":"alloc","id":1,"size":8}`, Trace, ""},
		{"a BOM and a header", "\xef\xbb\xbf" + `{"bfcsim_trace":1}`, Trace, ""},
		{"a pickle, protocol 4", "\x80\x04\x95\x10\x00", PyTorch, ""},
		{"a pickle, protocol 2", "\x80\x02}q\x00", PyTorch, ""},
		{"a pickle, protocol 1", "}q\x00(X\x08\x00\x00\x00segments", PyTorch, ""},
		{"a pickle, protocol 0", "(dp0\nVsegments\n", PyTorch, ""},
		{"a JSON snapshot", `{"segments": [], "device_traces": []}`, PyTorch, ""},
		{"a JSON snapshot, indented", "{\n  \"segments\": [\n", PyTorch, ""},
		{"a JSON snapshot, traces first", `{"device_traces": [[]], "segments": []}`, PyTorch, ""},
		{"an mtrace log", "= Start\n@ ./p:[0x1] + 0x10 0x20\n", Mtrace, ""},
		{"an mtrace log without its start", "@ ./p:[0x1] + 0x10 0x20\n", Mtrace, ""},
		{"a malloc-lab trace", "20000\n2\n3\n1\na 0 10\na 1 20\nf 0\n", Malloclab, ""},
		{"a malloc-lab trace, one header line", "# made by hand\n20000 2 3 1\na 0 10\n", Malloclab, ""},
		{"an XSpace capture", "\n\x20\x08\x01\x12\x09/host:CPU\x1a\x00", TensorFlow, ""},
		{"an XSpace capture, plane id 0", "\n\x0b\x12\x09/host:CPU", TensorFlow, ""},
		{"a TensorBoard memory profile", `{"memoryProfilePerAllocator":{"GPU_0_bfc":{}}}`, TensorFlow, ""},
		{"a TensorBoard memory profile, hosts first", `{"numHosts":1,"memoryProfilePerAllocator":{}}`, TensorFlow, ""},
		{"a newline, then text", "\nhello\n", 0, `text that is not a trace (its first line is "hello")`},
		{"a JSON array", `[1, 2, 3]`, 0, "a JSON array, not a trace"},
		{"binary", "\x00\x01\x02garbage", 0, "binary data, not a trace; expected a bfcsim trace (JSON Lines), a PyTorch memory snapshot"},
		{"an executable", "\x7fELF\x02\x01\x01\x00", 0, "an ELF executable, not a trace"},
		{"a torch.save file", "PK\x03\x04\x00\x00", 0, "a zip archive (torch.save writes these"},
		{"a newer pickle", "\x80\x09junk", 0, "binary data (a pickle of protocol 9?)"},
		{"text", "hello world\nsecond line\n", 0, `text that is not a trace (its first line is "hello world"); expected`},
		{"numbers, not malloc-lab", "1\n2\n3\n4\nhello\n", 0, `text that is not a trace (its first line is "1")`},
	} {
		f, err := Detect([]byte(tc.head), true)
		if tc.err != "" {
			require.Error(t, err, tc.name)
			assert.Contains(t, err.Error(), tc.err, tc.name)
			assert.NotContains(t, err.Error(), "\n", tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, f, tc.name)
	}
}

// A multi-byte character cut at the end of what Detect is shown is not
// binary data.
func TestDetectCutRune(t *testing.T) {
	head := []byte("= Start\n@ ./prög:[0x1] + 0x10 0x20\n")
	cut := head[:bytes.IndexRune(head, 'ö')+1] // half of ö
	f, err := Detect(cut, false)
	require.NoError(t, err)
	assert.Equal(t, Mtrace, f)
	_, err = Detect(cut, true)
	assert.Error(t, err, "at the end of the input, it is not cut: it is not UTF-8")
}

// readAll reads a stream to its end and returns its events as a trace.
func readAll(t *testing.T, s *Stream) []trace.Event {
	t.Helper()
	var evs []trace.Event
	for s.Next() {
		evs = append(evs, s.Event())
	}
	require.NoError(t, s.Err())
	return evs
}

// convertDirectly is what `bfcsim import` writes, read back.
func convertDirectly(t *testing.T, f Format, data []byte) []trace.Event {
	t.Helper()
	var buf bytes.Buffer
	_, err := Convert(context.Background(), f, bytes.NewReader(data), "x", trace.NewWriter(&buf), Options{Name: "n", Device: -1})
	require.NoError(t, err)
	r, err := trace.NewReader(&buf, "converted")
	require.NoError(t, err)
	var evs []trace.Event
	for r.Next() {
		evs = append(evs, r.Event())
	}
	require.NoError(t, r.Err())
	return evs
}

// Every recording reads, plain or compressed, as the events its import
// writes.
func TestOpenConvertsRecordings(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Format
	}{
		{"../pytorch/testdata/small-large.pickle", PyTorch},
		{"../pytorch/testdata/small-large.json", PyTorch},
		{"../pytorch/testdata/proto5-bigints.pickle", PyTorch},
		{"../mtrace/testdata/sort.mtrace", Mtrace},
		{"../malloclab/testdata/small.rep", Malloclab},
	} {
		data, err := os.ReadFile(tc.file)
		require.NoError(t, err)
		want := convertDirectly(t, tc.want, data)
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write(data)
		require.NoError(t, zw.Close())
		for _, in := range [][]byte{data, gz.Bytes()} {
			s, err := Open(context.Background(), bytes.NewReader(in), tc.file, Options{Name: "n", Device: -1})
			require.NoError(t, err, tc.file)
			assert.Equal(t, tc.want, s.Format, tc.file)
			assert.Equal(t, "n", s.Header().Name)
			got := readAll(t, s)
			assert.Equal(t, want, got, tc.file)
			assert.NotNil(t, s.Stats(), "%s: the importer's statistics, once read to the end", tc.file)
			assert.EqualValues(t, len(in), s.BytesRead(), "%s: every byte of the input was read", tc.file)
			require.NoError(t, s.Close())
		}
	}
}

func TestOpenTrace(t *testing.T) {
	const tr = `{"bfcsim_trace":1,"name":"own"}` + "\n" + `{"op":"alloc","id":1,"size":8}` + "\n" + `{"op":"free","id":1}` + "\n"
	s, err := Open(context.Background(), strings.NewReader(tr), "t.jsonl", Options{Name: "not used"})
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, Trace, s.Format)
	assert.Equal(t, "own", s.Header().Name, "a trace keeps its own name")
	assert.Len(t, readAll(t, s), 2)
	assert.Nil(t, s.Stats())
}

// A recording that cannot be converted fails with the importer's error,
// naming the file, not a pipe's.
func TestOpenConversionErrors(t *testing.T) {
	_, err := Open(context.Background(), strings.NewReader("\x80\x04]\x94."), "list.pickle", Options{Device: -1})
	require.Error(t, err)
	assert.Equal(t, "list.pickle: a pickle that is not a memory snapshot: its top level is a list, not a dict", err.Error())

	// An mtrace log converts as it is read: the error comes when Open
	// reads the header or, after events, from Err.
	for _, events := range []int{0, 20_000} {
		log := "= Start\n" + strings.Repeat("@ ./p:[0x1] + 0x10 0x20\n@ ./p:[0x1] - 0x10\n", events) + "@ ./p:[0x1] + 0x20\n"
		s, err := Open(context.Background(), strings.NewReader(log), "bad.mtrace", Options{})
		if err == nil {
			for s.Next() {
			}
			err = s.Err()
			s.Close()
		}
		require.Error(t, err)
		assert.Contains(t, err.Error(), `bad.mtrace:`+strconv.Itoa(2*events+2)+`: not an mtrace line: "@ ./p:[0x1] + 0x20"`)
	}

	_, err = Open(context.Background(), strings.NewReader("\x00\x00"), "zeros", Options{})
	assert.EqualError(t, err, "zeros: binary data, not a trace; "+expected)
}

// Closing a stream early stops its conversion, and an interrupt stops it
// too; neither waits for an input that blocks.
func TestOpenStops(t *testing.T) {
	var snap bytes.Buffer
	opt := pytorch.DefaultSynthetic(50_000)
	opt.Frames = 4
	require.NoError(t, pytorch.WriteSynthetic(&snap, opt))

	s, err := Open(context.Background(), bytes.NewReader(snap.Bytes()), "s.pickle", Options{Device: -1})
	require.NoError(t, err)
	for range 10 {
		require.True(t, s.Next())
	}
	require.NoError(t, s.Close())
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the conversion goes on after Close")
	}

	// An input that blocks after its first half: the interrupt comes while
	// the conversion waits in a Read, before the trace's header, and Open
	// returns without waiting for that Read.
	ctx, cancel := context.WithCancel(context.Background())
	in := newStalling(snap.Bytes()[:snap.Len()/2])
	go func() {
		<-in.stalled
		cancel()
	}()
	_, err = Open(ctx, in, "half.pickle", Options{Device: -1})
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	close(in.release)

	// The same once the trace has begun: an mtrace log converts as it is
	// read, so events come before the input stalls; Next then ends, while
	// the conversion still waits in its Read, and Err says why.
	log := "= Start\n" + strings.Repeat("@ ./p:[0x1] + 0x10 0x20\n@ ./p:[0x1] - 0x10\n", 50_000)
	ctx, cancel = context.WithCancel(context.Background())
	in = newStalling([]byte(log))
	s, err = Open(ctx, in, "stall.mtrace", Options{})
	require.NoError(t, err)
	go func() {
		<-in.stalled
		cancel()
	}()
	n := 0
	for s.Next() {
		n++
	}
	assert.Positive(t, n, "events came before the interrupt")
	assert.True(t, errors.Is(s.Err(), context.Canceled), "%v", s.Err())
	require.NoError(t, s.Close())
	close(in.release)
}

// stalling reads data, then blocks until release is closed, closing
// stalled when it starts to wait.
type stalling struct {
	r                *bytes.Reader
	stalled, release chan struct{}
}

func newStalling(data []byte) *stalling {
	return &stalling{r: bytes.NewReader(data), stalled: make(chan struct{}), release: make(chan struct{})}
}

func (s *stalling) Read(p []byte) (int, error) {
	if s.r.Len() > 0 {
		return s.r.Read(p)
	}
	close(s.stalled)
	<-s.release
	return 0, io.EOF
}

// FuzzOpen: whatever the bytes, Open and the stream it returns never
// panic, every error is one line, and a stream that ends cleanly gave
// valid events (the trace reader checked each one).
func FuzzOpen(f *testing.F) {
	for _, seed := range []string{
		`{"bfcsim_trace":1}` + "\n" + `{"op":"alloc","id":1,"size":8}` + "\n",
		"= Start\n@ ./p:[0x1] + 0x10 0x20\n@ ./p:[0x1] - 0x10\n",
		"20000\n2\n3\n1\na 0 10\na 1 20\nf 0\n",
		`{"segments": [], "device_traces": [[{"action": "alloc", "addr": 512, "size": 8}]]}`,
		"\x80\x04}\x94(\x8c\x08segments\x94]\x94u.",
		"PK\x03\x04",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Open(context.Background(), bytes.NewReader(data), "fuzz", Options{Device: -1})
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a two-line error: %q", err)
			}
			return
		}
		defer s.Close()
		for s.Next() {
		}
		if err := s.Err(); err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("a two-line error: %q", err)
		}
	})
}
