package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readAll reads every event of text, returning them and the Reader's error.
// It reads text several times: alone, and with the lines decoded in
// parallel from the first line and from the second (pipeline.go), each
// event by itself and in batches (NextBatch), and fails unless all agree on
// every event, the error, the summary and the skipped lines. It reads
// lent events (NextLent) as well.
func readAll(t *testing.T, text string, opts ...ReaderOption) ([]Event, *Reader, error) {
	t.Helper()
	evs, r, err := readWith(t, text, math.MaxInt64, opts...)
	// same requires that another way of reading text gave what the first
	// did: the events, the error, the summary and, if skipped, the lines
	// skipped.
	same := func(how string, oevs []Event, or *Reader, oerr error, skipped bool) {
		t.Helper()
		require.Equal(t, evs, oevs, "events %s", how)
		require.Equal(t, err, oerr, "error %s", how)
		if r != nil {
			require.Equal(t, r.Summary(), or.Summary(), "summary %s", how)
			if skipped {
				require.Equal(t, r.SkippedErrors(), or.SkippedErrors(), "skipped lines %s", how)
			}
		}
	}
	for _, start := range []int64{0, 1} {
		pevs, pr, perr := readWith(t, text, start, opts...)
		same(fmt.Sprintf("decoding in parallel after line %d", start), pevs, pr, perr, true)
	}
	for _, start := range []int64{0, math.MaxInt64} {
		bevs, br, berr := readBatches(t, text, start, opts...)
		same(fmt.Sprintf("reading in batches, pipeline after line %d", start), bevs, br, berr, false)
		levs, lr, lerr := readLent(t, text, start, opts...)
		same(fmt.Sprintf("reading lent events, pipeline after line %d", start), levs, lr, lerr, true)
	}
	return evs, r, err
}

// readLent is readWith with NextLent, holding as many lent runs as the
// Reader allows while it reads on, reading each only before it is
// returned, and returning the last ones in the reverse order.
func readLent(t *testing.T, text string, start int64, opts ...ReaderOption) ([]Event, *Reader, error) {
	t.Helper()
	return readUsing(t, text, start, func(r *Reader) []Event {
		var evs []Event
		var held []Lent
		for {
			l := r.NextLent()
			if len(l.Events) == 0 {
				break
			}
			held = append(held, l)
			if len(held) == maxLentChunks {
				evs = append(evs, held[0].Events...)
				held[0].Return()
				held = held[1:]
			}
		}
		for _, l := range held {
			evs = append(evs, l.Events...)
		}
		for i := len(held) - 1; i >= 0; i-- {
			held[i].Return()
		}
		require.False(t, r.Next(), "Next after the last lent events")
		return evs
	}, opts...)
}

// readBatches is readWith with NextBatch, five events at a time.
func readBatches(t *testing.T, text string, start int64, opts ...ReaderOption) ([]Event, *Reader, error) {
	t.Helper()
	return readUsing(t, text, start, func(r *Reader) []Event {
		var evs []Event
		for {
			b := r.NextBatch(make([]Event, 0, 5))
			evs = append(evs, b...)
			if len(b) < 5 {
				break
			}
		}
		require.False(t, r.Next(), "Next after a short batch")
		return evs
	}, opts...)
}

// readWith is readAll with the pipeline started after line start.
func readWith(t *testing.T, text string, start int64, opts ...ReaderOption) ([]Event, *Reader, error) {
	t.Helper()
	return readUsing(t, text, start, func(r *Reader) []Event {
		var evs []Event
		for r.Next() {
			evs = append(evs, r.Event())
		}
		return evs
	}, opts...)
}

// readUsing reads text with read, the pipeline started after line start.
func readUsing(t *testing.T, text string, start int64, read func(*Reader) []Event, opts ...ReaderOption) ([]Event, *Reader, error) {
	t.Helper()
	defer func(old int64) { pipelineStartLines = old }(pipelineStartLines)
	pipelineStartLines = start
	r, err := NewReader(strings.NewReader(text), "t.jsonl", opts...)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	evs := read(r)
	return evs, r, r.Err()
}

func TestReaderValidTrace(t *testing.T) {
	text := `{"bfcsim_trace":1,"name":"demo","source":"gen","capacity":1073741824,"time_unit":"us","model":{"layers":2}}

{"op":"alloc","id":1,"size":4096,"t":1,"tag":"w","stream":7}
{"op":"alloc","id":2,"size":100,"align":512,"t":2,"addr":1099511627776,"block":512}` + "\r\n" + `
{"op":"free","id":1,"t":2}
{"op":"alloc","id":3,"size":0,"t":3}
{"op":"mark","name":"fwd","t":3}
{"op":"free","id":3}
{"op":"alloc","id":1,"size":8192.0,"future_key":[1,2]}
{"op":"step","name":"0"}
{"op":"reserve","addr":4096,"size":2097152}
{"op":"release","addr":4096}
`
	evs, r, err := readAll(t, text)
	require.NoError(t, err)

	h := r.Header()
	assert.Equal(t, Header{Version: 1, Name: "demo", Source: "gen", CapacityBytes: 1 << 30, TimeUnit: "us",
		Meta: map[string]string{"model": `{"layers":2}`}}, h)

	require.Len(t, evs, 10)
	assert.Equal(t, Event{Line: 3, Op: OpAlloc, ID: 1, Size: 4096, T: 1, Tag: "w", Stream: 7,
		Flags: HasT | HasStream, Slot: 0}, evs[0])
	assert.Equal(t, Event{Line: 4, Op: OpAlloc, ID: 2, Size: 100, Align: 512, T: 2, Addr: 1 << 40, Block: 512,
		Flags: HasT | HasAddr | HasBlock, Slot: 1}, evs[1])
	// The free carries the size and slot of the allocation it ends.
	assert.Equal(t, Event{Line: 6, Op: OpFree, ID: 1, Size: 4096, T: 2, Flags: HasT, Slot: 0}, evs[2])
	// Slot 0 is reused by the next alloc; the size-0 alloc is an ordinary live id.
	assert.Equal(t, uint32(0), evs[3].Slot)
	assert.Equal(t, Event{Line: 8, Op: OpMark, Name: "fwd", T: 3, Flags: HasT}, evs[4])
	assert.Equal(t, uint64(8192), evs[6].Size, "integral floats are accepted")
	assert.Equal(t, OpStep, evs[7].Op)
	assert.Equal(t, Event{Line: 12, Op: OpReserve, Addr: 4096, Size: 2 << 20, Flags: HasAddr}, evs[8])

	s := r.Summary()
	assert.Equal(t, Summary{
		Events: 10, Allocs: 4, ZeroSizeAllocs: 1, Frees: 2, Steps: 1, Marks: 1, Reserves: 1, Releases: 1,
		LiveAllocs: 2, PeakLiveAllocs: 2, LiveBytes: 8292, PeakLiveBytes: 8292,
		TotalAllocBytes: 4096 + 100 + 8192, MaxAllocBytes: 8192, FirstT: 1, LastT: 3, HasT: true,
		PeakLiveEvent: 6, PeakMark: "fwd", // before the first step
	}, s)
}

func TestReaderWithoutHeader(t *testing.T) {
	evs, r, err := readAll(t, `{"op":"alloc","id":5,"size":1}`)
	require.NoError(t, err, "a final line without newline is read")
	assert.Equal(t, 0, r.Header().Version)
	require.Len(t, evs, 1)
	assert.Equal(t, int64(1), evs[0].Line)
}

// Every invalid case docs/trace-format.md lists, each placed on line 3 after two valid
// lines, must stop the Reader with "t.jsonl:3: <reason>".
func TestReaderInvalidLines(t *testing.T) {
	const prefix = `{"op":"alloc","id":1,"size":16,"t":10}` + "\n" + `{"op":"alloc","id":2,"size":16,"t":10}` + "\n"
	cases := []struct{ name, line, msg string }{
		{"malformed JSON", `{"op":"alloc",`, "malformed JSON"},
		{"trailing garbage", `{"op":"step"} x`, "malformed JSON"},
		{"NaN is not JSON", `{"op":"alloc","id":3,"size":NaN}`, "malformed JSON"},
		{"not an object", `[1,2]`, "expected a JSON object, found array"},
		{"missing op", `{"id":3}`, `missing required field "op"`},
		{"op not a string", `{"op":1}`, "op must be a string"},
		{"unknown op", `{"op":"malloc","id":3}`, `unknown op "malloc"`},
		{"alloc without id", `{"op":"alloc","size":3}`, `alloc without required field "id"`},
		{"alloc without size", `{"op":"alloc","id":3}`, `alloc without required field "size"`},
		{"free without id", `{"op":"free"}`, `free without required field "id"`},
		{"mark without name", `{"op":"mark"}`, `mark without required field "name"`},
		{"reserve without addr", `{"op":"reserve","size":4}`, `reserve without required field "addr"`},
		{"release without addr", `{"op":"release"}`, `release without required field "addr"`},
		{"negative size", `{"op":"alloc","id":3,"size":-4}`, "size -4 is negative"},
		{"non-integer size", `{"op":"alloc","id":3,"size":1.5}`, "size 1.5 is not an integer"},
		{"size as string", `{"op":"alloc","id":3,"size":"4"}`, "size must be an integer, found string"},
		{"huge size", `{"op":"alloc","id":3,"size":9223372036854775808}`, "size 9223372036854775808 is too large"},
		{"huge id", `{"op":"free","id":9223372036854775808}`, "id 9223372036854775808 is too large"},
		{"alloc of a live id", `{"op":"alloc","id":2,"size":3}`, "alloc of id 2 that is already live (allocated at line 2)"},
		{"free of an unknown id", `{"op":"free","id":77}`, "free of id 77 that is not live"},
		{"bad alignment", `{"op":"alloc","id":3,"size":3,"align":48}`, "align 48 is not a power of two"},
		{"decreasing t", `{"op":"free","id":1,"t":9.5}`, "t 9.5 is before the previous event's t 10"},
		{"t not a number", `{"op":"step","t":"now"}`, "t must be a number, found string"},
		{"tag not a string", `{"op":"alloc","id":3,"size":1,"tag":5}`, "tag must be a string"},
		{"stream not an integer", `{"op":"alloc","id":3,"size":1,"stream":1.5}`, "stream must be an integer"},
		{"block not an integer", `{"op":"alloc","id":3,"size":1,"block":"4"}`, "block must be an integer, found string"},
		{"negative block", `{"op":"alloc","id":3,"size":1,"block":-4}`, "block -4 is negative"},
		{"block smaller than size", `{"op":"alloc","id":3,"size":1000,"block":512}`, "block 512 is smaller than size 1000"},
		{"late header", `{"bfcsim_trace":1}`, "a trace header is allowed only on the first line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs, _, err := readAll(t, prefix+tc.line+"\n"+`{"op":"step"}`+"\n")
			require.Error(t, err)
			var serr *SyntaxError
			require.True(t, errors.As(err, &serr), "want a *SyntaxError, got %T", err)
			assert.Equal(t, int64(3), serr.Line)
			assert.Equal(t, "t.jsonl", serr.File)
			assert.True(t, strings.HasPrefix(err.Error(), "t.jsonl:3: "), err.Error())
			assert.Contains(t, serr.Msg, tc.msg)
			assert.Len(t, evs, 2, "the valid events before the error are delivered")
		})
	}
}

func TestReaderSizeSums(t *testing.T) {
	const big = `{"op":"alloc","id":%d,"size":9223372036854775807}`
	text := fmt.Sprintf(big+"\n"+big+"\n"+big+"\n", 1, 2, 3)
	_, _, err := readAll(t, text)
	assert.EqualError(t, err, "t.jsonl:3: alloc of 9223372036854775807 bytes would make more than 2^64 bytes live")

	// Allocated in total, a sum that does not fit stays at 2^64-1.
	text = fmt.Sprintf(big+"\n"+`{"op":"free","id":1}`+"\n"+big+"\n"+`{"op":"free","id":2}`+"\n"+big+"\n", 1, 2, 3)
	_, r, err := readAll(t, text)
	require.NoError(t, err)
	assert.Equal(t, uint64(math.MaxUint64), r.Summary().TotalAllocBytes)
}

func TestReaderByteOrderMark(t *testing.T) {
	evs, r, err := readAll(t, "\xef\xbb\xbf"+`{"bfcsim_trace":1,"name":"bom"}`+"\n"+`{"op":"step"}`)
	require.NoError(t, err)
	assert.Equal(t, "bom", r.Header().Name)
	assert.Len(t, evs, 1)
}

func TestReaderSkipInvalid(t *testing.T) {
	text := `{"op":"alloc","id":1,"size":16}
{"op":"alloc","id":1,"size":32}
{"op":"free","id":9}
not json
{"op":"free","id":1}
{"op":"free","id":1}
`
	evs, r, err := readAll(t, text, SkipInvalid())
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.Equal(t, uint64(16), evs[1].Size, "the skipped alloc changed nothing")
	s := r.Summary()
	assert.Equal(t, int64(4), s.Skipped)
	assert.Equal(t, int64(2), s.Events)
	kept := r.SkippedErrors()
	require.Len(t, kept, 4)
	assert.Equal(t, []int64{2, 3, 4, 6}, []int64{kept[0].Line, kept[1].Line, kept[2].Line, kept[3].Line})
}

func TestReaderHeaderErrors(t *testing.T) {
	for _, tc := range []struct{ text, msg string }{
		{`{"bfcsim_trace":2}`, "t.jsonl:1: unsupported trace format version 2"},
		{`{"bfcsim_trace":1,"time_unit":"h"}`, `t.jsonl:1: time_unit "h" is not one of ns, us, ms, s`},
		{`{"bfcsim_trace":1,"capacity":-1}`, "t.jsonl:1: capacity -1 is negative"},
		{"\n\n" + `{"bfcsim_trace":1,"name":7}`, "t.jsonl:3: name must be a string"},
	} {
		_, err := NewReader(strings.NewReader(tc.text), "t.jsonl")
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.msg)
	}
}

func TestReaderLongLines(t *testing.T) {
	tag := strings.Repeat("x", 300<<10) // several times the read buffer
	text := `{"op":"alloc","id":1,"size":1,"tag":"` + tag + `"}` + "\n" + `{"op":"free","id":1}`
	evs, _, err := readAll(t, text)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.Equal(t, tag, evs[0].Tag)

	huge := bytes.Repeat([]byte{'a'}, MaxLineBytes+10)
	r, err := NewReader(bytes.NewReader(huge), "blob")
	require.Error(t, err)
	assert.Nil(t, r)
	assert.Contains(t, err.Error(), "blob:1: line longer than 64 MiB")
}

type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

func TestReaderIOError(t *testing.T) {
	boom := errors.New("disk on fire")
	in := io.MultiReader(strings.NewReader(`{"op":"step"}`+"\n"), failingReader{boom})
	r, err := NewReader(in, "t.jsonl")
	require.NoError(t, err)
	assert.True(t, r.Next())
	assert.False(t, r.Next())
	assert.ErrorIs(t, r.Err(), boom)
	assert.Contains(t, r.Err().Error(), "reading t.jsonl")
}

func sampleEvents() []Event {
	return []Event{
		{Op: OpAlloc, ID: 1, Size: 4096, T: 0.5, Flags: HasT, Tag: `we"ird\tag` + "\x01é\xff"},
		{Op: OpAlloc, ID: 2, Size: 1 << 40, Align: 4096, Stream: -3, Addr: 1<<40 + 256, Block: 1<<40 + 512,
			Flags: HasStream | HasAddr | HasBlock},
		{Op: OpAlloc, ID: 3, Size: 0, Block: 0, Flags: HasBlock},
		{Op: OpMark, Name: "forward", T: 1e9, Flags: HasT},
		{Op: OpFree, ID: 1, Stream: 7, Flags: HasStream},
		{Op: OpStep, Name: ""},
		{Op: OpReserve, Addr: 1 << 40, Size: 2 << 20, Flags: HasAddr},
		{Op: OpRelease, Addr: 1 << 40, Flags: HasAddr},
		{Op: OpFree, ID: 2},
		{Op: OpFree, ID: 3},
	}
}

func TestWriterRoundTrip(t *testing.T) {
	for _, c := range []Compression{None, Gzip, Zstd} {
		var buf bytes.Buffer
		zw, err := NewCompressWriter(&buf, c)
		require.NoError(t, err)
		w := NewWriter(zw)
		hdr := Header{Version: 1, Name: "rt", Source: "test", CapacityBytes: 80 << 30, TimeUnit: "ns",
			Meta: map[string]string{"b": "2", "a": `"x"`}}
		require.NoError(t, w.WriteHeader(hdr))
		for _, ev := range sampleEvents() {
			require.NoError(t, w.Write(ev))
		}
		require.NoError(t, w.Flush())
		require.NoError(t, zw.Close())

		r, err := NewReader(bytes.NewReader(buf.Bytes()), "rt")
		require.NoError(t, err)
		assert.Equal(t, hdr, r.Header())
		var got []Event
		for r.Next() {
			ev := r.Event()
			ev.Line, ev.Slot = 0, 0
			if ev.Op == OpFree {
				ev.Size = 0 // filled in by the Reader, not written
			}
			got = append(got, ev)
		}
		require.NoError(t, r.Err())
		want := sampleEvents()
		want[0].Tag = `we"ird\tag` + "\x01é\uFFFD"
		assert.Equal(t, want, got, "compression %d", c)
	}
}

func TestWriterFixedBytes(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	require.NoError(t, w.Write(Event{Op: OpAlloc, ID: 7, Size: 4096, T: 12.5, Flags: HasT, Tag: "x"}))
	require.NoError(t, w.Write(Event{Op: OpFree, ID: 7, Size: 4096}))
	require.NoError(t, w.Write(Event{Op: OpAlloc, ID: 8, Size: 100, Addr: 4096, Block: 512, Flags: HasAddr | HasBlock}))
	require.NoError(t, w.Write(Event{Op: OpFree, ID: 8, Block: 512, Flags: HasBlock}))
	require.NoError(t, w.Flush())
	assert.Equal(t, `{"op":"alloc","id":7,"size":4096,"t":12.5,"tag":"x"}`+"\n"+`{"op":"free","id":7}`+"\n"+
		`{"op":"alloc","id":8,"size":100,"addr":4096,"block":512}`+"\n"+`{"op":"free","id":8}`+"\n", buf.String())
}

func TestCompressionForPath(t *testing.T) {
	assert.Equal(t, Gzip, CompressionForPath("a/b.jsonl.gz"))
	assert.Equal(t, Zstd, CompressionForPath("b.jsonl.zst"))
	assert.Equal(t, None, CompressionForPath("b.jsonl"))
}

// FuzzReader: no input makes the Reader panic, every error names a line, and
// the Summary stays consistent with the events delivered.
func FuzzReader(f *testing.F) {
	f.Add([]byte(`{"bfcsim_trace":1}` + "\n" + `{"op":"alloc","id":1,"size":3}` + "\n" + `{"op":"free","id":1}`))
	f.Add([]byte(`{"op":"alloc","id":1,"size":3,"t":1}` + "\n" + `{"op":"alloc","id":1,"size":3,"t":0}`))
	f.Add([]byte(`{"op":"alloc","id":1,"size":3,"block":512}` + "\n" + `{"op":"alloc","id":2,"size":513,"block":512}`))
	f.Add([]byte{0x1f, 0x8b, 0, 0})
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 1, 2})
	f.Add([]byte("\n\n\r\n{}\n[]\n\"x\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opts := range [][]ReaderOption{nil, {SkipInvalid()}} {
			r, err := NewReader(bytes.NewReader(data), "fuzz", opts...)
			if err != nil {
				continue
			}
			var allocs, frees int64
			live := map[uint64]uint64{}
			var liveBytes uint64
			for r.Next() {
				ev := r.Event()
				switch ev.Op {
				case OpAlloc:
					allocs++
					_, dup := live[ev.ID]
					require.False(t, dup, "alloc of live id delivered")
					if ev.Flags&HasBlock != 0 {
						require.GreaterOrEqual(t, ev.Block, ev.Size, "an alloc's block is at least its size")
					}
					live[ev.ID] = ev.Size
					liveBytes += ev.Size
				case OpFree:
					frees++
					size, ok := live[ev.ID]
					require.True(t, ok, "free of non-live id delivered")
					require.Equal(t, size, ev.Size)
					delete(live, ev.ID)
					liveBytes -= size
				}
			}
			if err := r.Err(); err != nil {
				var serr *SyntaxError
				if errors.As(err, &serr) {
					require.Positive(t, serr.Line)
				}
			}
			s := r.Summary()
			require.Equal(t, allocs, s.Allocs)
			require.Equal(t, frees, s.Frees)
			require.Equal(t, liveBytes, s.LiveBytes)
			require.Equal(t, int64(len(live)), s.LiveAllocs)
			r.Close()
		}
	})
}

// An allocation the recording failed (after an "oom:" mark) was never held
// by the program: it is an alloc of the trace, but not live.
func TestRecordedFailureIsNotLive(t *testing.T) {
	const in = `{"op":"alloc","id":1,"size":100}
{"op":"mark","name":"oom: the recording failed this 500-byte allocation"}
{"op":"alloc","id":2,"size":500}
{"op":"free","id":2}
{"op":"mark","name":"oom (not a recorded failure)"}
{"op":"alloc","id":3,"size":40}
{"op":"free","id":1}
{"op":"free","id":3}
`
	r, err := NewReader(strings.NewReader(in), "t.jsonl")
	require.NoError(t, err)
	for r.Next() {
	}
	require.NoError(t, r.Err())
	s := r.Summary()
	assert.EqualValues(t, 3, s.Allocs)
	assert.EqualValues(t, 140, s.PeakLiveBytes, "the refused 500 bytes never count")
	assert.Zero(t, s.LiveBytes)
	assert.Zero(t, s.LiveAllocs)
}

// A Reader of events in memory checks them and fills them in as a Reader
// of the same trace written to a file does.
func TestEventReaderMatchesAFile(t *testing.T) {
	h := Header{Version: 1, Name: "mem"}
	events := []Event{
		{Op: OpAlloc, ID: 1, Size: 512, Tag: "a"},
		{Op: OpAlloc, ID: 2, Size: 1024, Tag: "b"},
		{Op: OpFree, ID: 1},
		{Op: OpAlloc, ID: 3, Size: 256},
		{Op: OpFree, ID: 2},
		{Op: OpFree, ID: 3},
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	require.NoError(t, w.WriteHeader(h))
	for _, e := range events {
		require.NoError(t, w.Write(e))
	}
	require.NoError(t, w.Flush())
	file, err := NewReader(&buf, "mem.jsonl")
	require.NoError(t, err)
	mem := NewEventReader(h, nil, events, "mem")
	for i := range events {
		require.True(t, file.Next())
		require.True(t, mem.Next(), "event %d", i+1)
		want, got := file.Event(), mem.Event()
		want.Line, got.Line = 0, 0
		assert.Equal(t, want, got, "event %d", i+1)
		assert.Equal(t, int64(i+1), mem.Event().Line)
	}
	assert.False(t, file.Next())
	assert.False(t, mem.Next())
	require.NoError(t, mem.Err())
	assert.Equal(t, file.Summary(), mem.Summary())
	assert.Zero(t, events[4].Size, "the caller's free is left as it was; the Reader's copy has its size")

	bad := NewEventReader(h, nil, []Event{{Op: OpAlloc, ID: 1, Size: 8}, {Op: OpFree, ID: 2}}, "mem")
	require.True(t, bad.Next())
	assert.False(t, bad.Next())
	assert.ErrorContains(t, bad.Err(), "mem:2: free of id 2 that is not live")
}
