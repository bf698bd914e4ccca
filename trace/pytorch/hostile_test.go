package pytorch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/trace"
)

// asm assembles a pickle by hand, opcode by opcode.
type asm struct{ b []byte }

func newAsm() *asm { return &asm{b: []byte{0x80, 4}} }

func (a *asm) op(b ...byte) *asm { a.b = append(a.b, b...); return a }

func (a *asm) str(s string) *asm {
	a.b = append(a.b, 0x8c, byte(len(s)))
	a.b = append(a.b, s...)
	return a
}

func (a *asm) put(i uint32) *asm {
	a.b = binary.LittleEndian.AppendUint32(append(a.b, 'r'), i)
	return a
}

func (a *asm) get(i uint32) *asm {
	a.b = binary.LittleEndian.AppendUint32(append(a.b, 'j'), i)
	return a
}

func (a *asm) putb(i byte) *asm { return a.op('q', i) }
func (a *asm) getb(i byte) *asm { return a.op('h', i) }

func (a *asm) int(i int32) *asm {
	a.b = binary.LittleEndian.AppendUint32(append(a.b, 'J'), uint32(i))
	return a
}

func (a *asm) bytes() []byte { return append(a.b, '.') }

// snapshotAround wraps a device trace (already on the stack as a list) in a
// minimal snapshot: {"segments": [], "device_traces": [TRACE]}.
func snapshotAround(trace func(a *asm)) []byte {
	a := newAsm()
	a.op('}').op('(').str("segments").op(']').str("device_traces").op(']')
	a.op('(')
	trace(a)
	a.op('e') // device_traces = [trace]
	a.op('u')
	return a.bytes()
}

// asmEntry pushes {"action": "alloc", "addr": addr, "size": 512, "frames": <frames>}.
func asmEntry(a *asm, addr int32, frames func(a *asm)) {
	a.op('}').op('(').str("action").str("alloc").str("addr").int(addr).str("size").int(512)
	if frames != nil {
		a.str("frames")
		frames(a)
	}
	a.op('u')
}

// convertBytes converts a snapshot in memory and reports what it allocated
// on the heap on the way.
func convertBytes(t *testing.T, data []byte) (string, Stats, uint64, error) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var buf bytes.Buffer
	st, err := Convert(context.Background(), bytes.NewReader(data), trace.NewWriter(&buf), Options{Device: -1})
	runtime.ReadMemStats(&after)
	if err != nil {
		assert.NotContains(t, err.Error(), "\n", "errors are one line")
	}
	return buf.String(), st, after.TotalAlloc - before.TotalAlloc, err
}

// heapBound is what an input of n bytes may allocate: a constant for the
// buffers, and a small multiple of the input.
func heapBound(n int) uint64 { return 8<<20 + 64*uint64(n) }

// The frames of an entry is a list nested 40 deep, each level holding the
// level below twice through the memo: 2^40 references if expanded. The
// walk places each level once, and the tag reads only a list's own items.
func TestHostileExponentialSharing(t *testing.T) {
	nested := func(a *asm) {
		a.op(']').putb(100).op('0')
		for i := byte(1); i <= 40; i++ {
			a.op(']').putb(100 + i).op('(').getb(100 + i - 1).getb(100 + i - 1).op('e')
			if i < 40 {
				a.op('0')
			}
		}
	}
	data := snapshotAround(func(a *asm) {
		a.op(']').op('(')
		asmEntry(a, 4096, nested)
		a.op('e')
	})
	require.Less(t, len(data), 500)
	out, st, heap, err := convertBytes(t, data)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Allocs)
	assert.Contains(t, out, `{"op":"alloc","id":1,"size":512,"stream":0}`, "no frame dict anywhere in the nesting: no tag")
	assert.Less(t, heap, heapBound(len(data)))

	// The same nesting as the device trace itself: its items are lists,
	// not entries.
	data = snapshotAround(nested)
	_, _, heap, err = convertBytes(t, data)
	require.ErrorContains(t, err, "device_traces[0][0]: a list where a dict was expected")
	assert.Less(t, heap, heapBound(len(data)))

	// And under a key the importer does not read: a correct result.
	a := newAsm()
	a.op('}').op('(').str("segments").op(']').str("junk")
	nested(a)
	data = a.op('u').bytes()
	_, _, heap, err = convertBytes(t, data)
	require.NoError(t, err)
	assert.Less(t, heap, heapBound(len(data)))
}

// Nesting is never recursion: a million levels of lists, built through
// the memo with a stack of three, read in time and memory linear in the
// file; a million MARKs or pushes hit the stack's bound.
func TestHostileDeepNesting(t *testing.T) {
	const depth = 1_000_000
	deep := func(a *asm) {
		a.op(']').put(0).op('0')
		for i := uint32(1); i < depth; i++ {
			a.op(']').put(i).get(i - 1).op('a').op('0') // level i holds level i-1
		}
		a.get(depth - 1)
	}
	a := newAsm()
	a.op('}').op('(').str("segments").op(']').str("other")
	deep(a)
	data := a.op('u').bytes()
	_, _, heap, err := convertBytes(t, data)
	require.NoError(t, err)
	assert.Less(t, heap, heapBound(len(data)))

	data = snapshotAround(func(a *asm) {
		a.op(']').op('(')
		asmEntry(a, 4096, deep)
		a.op('e')
	})
	out, _, _, err := convertBytes(t, data)
	require.NoError(t, err)
	assert.Contains(t, out, `{"op":"alloc","id":1,"size":512,"stream":0}`)

	for name, op := range map[string]byte{"marks": '(', "pushes": 'N'} {
		_, _, heap, err := convertBytes(t, append(append([]byte{0x80, 4}, bytes.Repeat([]byte{op}, 2*maxStack)...), '.'))
		require.Error(t, err, name)
		assert.Regexp(t, `(more than 1048576 marks|the stack grows past 1048576 items)`, err.Error(), name)
		assert.Less(t, heap, heapBound(2*maxStack), name)
	}

	_, _, _, err = convertBytes(t, []byte(strings.Repeat("[", 100_000)+strings.Repeat("]", 100_000)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reading the JSON snapshot")
}

// A length is never trusted: a declared gigabyte is read as far as the
// file goes, and a short file is a truncated pickle.
func TestHostileHugeLengths(t *testing.T) {
	for name, p := range map[string][]byte{
		"BINUNICODE8": binary.LittleEndian.AppendUint64([]byte{0x80, 4, 0x8d}, 1<<62),
		"BINUNICODE":  binary.LittleEndian.AppendUint32([]byte{0x80, 4, 'X'}, 0xffffffff),
		"BINBYTES8":   binary.LittleEndian.AppendUint64([]byte{0x80, 4, 0x8e}, 1<<62),
		"BYTEARRAY8":  binary.LittleEndian.AppendUint64([]byte{0x80, 5, 0x96}, 1<<63),
		"LONG4":       binary.LittleEndian.AppendUint32([]byte{0x80, 4, 0x8b}, 0x7fffffff),
		"BINSTRING":   binary.LittleEndian.AppendUint32([]byte{0x80, 2, 'T'}, 0x7fffffff),
		"FRAME":       append(binary.LittleEndian.AppendUint64([]byte{0x80, 4, 0x95}, 1<<63), '}', '.'),
	} {
		p = append(p, bytes.Repeat([]byte{'x'}, 100)...)
		_, _, heap, err := convertBytes(t, p)
		require.Error(t, err, name)
		if name != "FRAME" {
			assert.Contains(t, err.Error(), "truncated pickle", name)
		}
		assert.Less(t, heap, heapBound(len(p)), name)
	}
	// A long string that is there is kept in part, and still reads.
	long := strings.Repeat("y", 3*maxKeptString)
	a := newAsm()
	a.op('}').op('(').str("segments").op(']').str("long")
	a.b = binary.LittleEndian.AppendUint32(append(a.b, 'X'), uint32(len(long)))
	a.b = append(a.b, long...)
	_, _, _, err := convertBytes(t, a.op('u').bytes())
	require.NoError(t, err)
}

// Every cut of a real-shaped snapshot is an error, one line, never a
// panic.
func TestHostileTruncated(t *testing.T) {
	for _, form := range []bool{false, true} {
		opt := DefaultSynthetic(40)
		opt.Frames, opt.Live, opt.JSON = 4, 5, form
		var full bytes.Buffer
		require.NoError(t, WriteSynthetic(&full, opt))
		_, _, _, err := convertBytes(t, full.Bytes())
		require.NoError(t, err)
		for n := 0; n < full.Len(); n += 1 + n/50 {
			_, _, _, err := convertBytes(t, full.Bytes()[:n])
			require.Error(t, err, "a snapshot cut at byte %d of %d (json %v)", n, full.Len(), form)
		}
	}
}

// What a snapshot never does is refused with a reason.
func TestHostileStructure(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		pickle     []byte
	}{
		{"get before put", "memo 7 is read before it is written", newAsm().get(7).bytes()},
		{"huge memo index", "larger than any memory snapshot needs", newAsm().op('N').put(0xffffffff).bytes()},
		{"setitem on a list", "sets an item of a list", newAsm().op(']').str("k").str("v").op('s').bytes()},
		{"stop on an empty stack", "pops from an empty stack", newAsm().bytes()},
		{"entry placed twice", "memo 9 is a trace entry, segment or block already placed", snapshotAround(func(a *asm) {
			a.op(']').op('(')
			asmEntry(a, 4096, nil)
			a.put(9).op('e').get(9).op('a')
		})},
		{"dict changed after placing", "a dict is changed after it was placed",
			newAsm().op('}').op('(').str("x").op('}').put(9).op('u').get(9).str("k").str("v").op('s').bytes()},
		{"list changed after placing", "a list is changed after it was placed",
			newAsm().op('}').op('(').str("x").op(']').put(9).op('u').get(9).op('N').op('a').bytes()},
		{"protocol 6", "pickle protocol 6 is newer", []byte{0x80, 6, 'N', '.'}},
		{"not a snapshot", "not a memory snapshot: its top level is a list", newAsm().op(']').bytes()},
		{"no segments", `no segments key (it has keys "device_traces", "junk")`, newAsm().op('}').op('(').str("device_traces").op('N').str("junk").op('N').op('u').bytes()},
		// Found by FuzzConvert: a key that is not one line, and times that
		// are not finite numbers (a 148-byte integer, a NaN), which would
		// have been written as +Inf and NaN, invalid JSON.
		{"a key of two lines", `(it has keys "00\n00")`, newAsm().op('}').op('(').str("00\n00").op('N').op('u').bytes()},
		{"a time of 148 bytes", "time_us is a very large integer, not a finite number", snapshotAround(func(a *asm) {
			a.op(']').op('(').op('}').op('(').str("action").str("alloc").str("time_us").op(0x8a, 148)
			a.b = append(a.b, bytes.Repeat([]byte{0x11}, 147)...)
			a.op(0x40).op('u').op('e')
		})},
		{"a NaN time", "time_us is NaN, not a finite number", snapshotAround(func(a *asm) {
			a.op(']').op('(').op('}').op('(').str("action").str("alloc").str("time_us").op('G', 0x7f, 0xf8, 0, 0, 0, 0, 0, 1).op('u').op('e')
		})},
	} {
		_, _, _, err := convertBytes(t, tc.pickle)
		require.Error(t, err, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
	}

	// Two segments sharing one blocks list would make the start state grow
	// with the square of the file.
	a := newAsm()
	a.op('}').op('(').str("segments").op(']').op('(')
	a.op('}').op('(').str("address").int(1 << 20).str("total_size").int(2 << 20).str("blocks").op(']').put(5).op('u')
	a.op('}').op('(').str("address").int(8 << 20).str("total_size").int(2 << 20).str("blocks").get(5).op('u')
	a.op('e').op('u')
	_, _, _, err := convertBytes(t, a.bytes())
	require.ErrorContains(t, err, "segments[1]: its blocks list is another segment's too")
}

// cancelAfter cancels a context once n bytes have been read through it.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel func()
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	if c.n <= 0 {
		c.cancel()
	}
	m, err := c.r.Read(p[:min(len(p), 4096)])
	c.n -= m
	return m, err
}

// An import stops soon after its context is done, whether it is reading
// the snapshot or writing the trace.
func TestConvertInterrupted(t *testing.T) {
	var snap bytes.Buffer
	opt := DefaultSynthetic(200_000)
	opt.Frames = 4
	require.NoError(t, WriteSynthetic(&snap, opt))

	ctx, cancel := context.WithCancel(context.Background())
	_, err := Convert(ctx, &cancelAfter{r: bytes.NewReader(snap.Bytes()), n: snap.Len() / 2, cancel: cancel},
		trace.NewWriter(io.Discard), Options{Device: -1})
	require.ErrorIs(t, err, context.Canceled)

	ctx, cancel = context.WithCancel(context.Background())
	var writes int
	w := trace.NewWriter(writerFunc(func(p []byte) (int, error) {
		if writes++; writes == 2 {
			cancel()
		}
		return len(p), nil
	}))
	_, err = Convert(ctx, bytes.NewReader(snap.Bytes()), w, Options{Device: -1})
	require.ErrorIs(t, err, context.Canceled)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A snapshot too large for memory spools to a temporary file, which is
// gone when the conversion ends.
func TestSpoolSpills(t *testing.T) {
	var snap bytes.Buffer
	opt := DefaultSynthetic(20_000)
	opt.Frames = 4
	require.NoError(t, WriteSynthetic(&snap, opt))
	var inMemory, spilled bytes.Buffer
	_, err := Convert(context.Background(), bytes.NewReader(snap.Bytes()), trace.NewWriter(&inMemory), Options{Device: -1})
	require.NoError(t, err)
	dir := t.TempDir()
	_, err = Convert(context.Background(), bytes.NewReader(snap.Bytes()), trace.NewWriter(&spilled),
		Options{Device: -1, TempDir: dir, memLimit: 10_000})
	require.NoError(t, err)
	assert.Equal(t, inMemory.String(), spilled.String())
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, left, "the temporary file is removed")
}

// FuzzConvert: no input makes the importer panic, every error is one
// line, and whatever it accepts is a valid trace. The seeds are small, so
// that the fuzzer runs thousands of inputs a second; what it finds is kept
// in testdata/fuzz/FuzzConvert.
func FuzzConvert(f *testing.F) {
	for _, name := range []string{"global.pickle", "segments-only.pickle"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, js := range []bool{false, true} {
		opt := DefaultSynthetic(12)
		opt.Frames, opt.Live, opt.Stacks, opt.JSON = 3, 3, 2, js
		var b bytes.Buffer
		if err := WriteSynthetic(&b, opt); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Add([]byte(`{"segments":[{"address":1,"total_size":5,"blocks":[{"size":9,"state":"active"}]}],"device_traces":[[{"action":"free","addr":3}]]}`))
	f.Add([]byte(`{"segments":[],"device_traces":[[{"action":"alloc","addr":512,"time_us":1e999}]]}`))
	f.Add([]byte(`{"segments":[],"device_traces":[[{"action":"alloc","addr":512,"size":16,"time_us":10},{"action":"free_completed","addr":512,"size":16,"time_us":20}]],` +
		`"external_annotations":[{"name":"fwd","stage":"START","device":0,"time_us":5},{"name":"fwd","stage":"END","device":0,"time_us":15},{"name":"x","stage":"MID","time_us":1},7]}`))
	f.Add(snapshotAround(func(a *asm) {
		a.op(']').op('(')
		asmEntry(a, 4096, func(a *asm) {
			a.op(']').putb(100).op('0')
			for i := byte(1); i <= 3; i++ {
				a.op(']').putb(100 + i).op('(').getb(100 + i - 1).getb(100 + i - 1).op('e')
				if i < 3 {
					a.op('0')
				}
			}
		})
		a.op('e')
	}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var buf bytes.Buffer
		if _, err := Convert(context.Background(), bytes.NewReader(data), trace.NewWriter(&buf), Options{Device: -1}); err != nil {
			if strings.Contains(err.Error(), "\n") || errors.Is(err, errCorruptSpool) {
				t.Fatalf("bad error: %q", err)
			}
			return
		}
		r, err := trace.NewReader(bytes.NewReader(buf.Bytes()), "fuzz")
		require.NoError(t, err)
		for r.Next() {
		}
		require.NoError(t, r.Err(), "%s", buf.String())
	})
}
