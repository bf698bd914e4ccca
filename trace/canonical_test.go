package trace

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkCanonical fails if decodeCanonical accepts line and the general
// decoder reads it differently; it returns whether it was accepted.
func checkCanonical(t *testing.T, line []byte) bool {
	t.Helper()
	d := decoder{tags: map[string]string{}}
	var fast Event
	if !d.decodeCanonical(&fast, line) {
		require.Equal(t, Event{}, fast, "a refused line leaves the event zero: %q", line)
		return false
	}
	var want Event
	msg, ok := d.scanEvent(&want, line)
	require.True(t, ok, "accepted %q, which is not JSON", line)
	require.Empty(t, msg, "accepted the invalid line %q", line)
	require.Equal(t, want, fast, "line %q", line)
	return true
}

// The lines Writer writes for allocs and frees take the fast path, and
// decode as the general decoder decodes them; lines it must refuse do not.
func TestCanonicalLines(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		ev := Event{Op: OpAlloc, ID: rng.Uint64N(maxID), Size: rng.Uint64N(1 << uint(rng.IntN(63)))}
		if rng.IntN(2) == 0 {
			ev.Tag = strings.Repeat("ab_", rng.IntN(5))
		}
		if rng.IntN(2) == 0 {
			ev.Addr, ev.Flags = rng.Uint64(), HasAddr
		}
		if rng.IntN(3) == 0 {
			ev = Event{Op: OpFree, ID: rng.Uint64N(maxID)}
		}
		if rng.IntN(2) == 0 {
			ev.T, ev.Flags = float64(rng.Uint64N(1<<53)), ev.Flags|HasT
		}
		if rng.IntN(2) == 0 {
			ev.Stream, ev.Flags = rng.Int64N(1<<20), ev.Flags|HasStream
		}
		line := AppendEvent(nil, ev)
		// 19-digit numbers are left to the general decoder.
		long := ev.ID >= 1e18 || ev.Size >= 1e18 || ev.Addr >= 1e18 || ev.T >= 1e18
		require.Equal(t, !long, checkCanonical(t, line), "line %q", line)
	}
	// Numbers of every length, the line's last field or not.
	for n := 1; n <= 19; n++ {
		num := strings.Repeat("9", n)
		for _, line := range []string{
			`{"op":"free","id":` + num + `}`,
			`{"op":"free","id":` + num + `,"t":7}`,
			`{"op":"alloc","id":1,"size":` + num + `,"addr":` + num + `}`,
		} {
			require.Equal(t, n <= 18, checkCanonical(t, []byte(line)), "line %q", line)
		}
	}
	for _, line := range []string{
		`{"op":"alloc","id":1,"size":2,"tag":"a\"b"}`,
		`{"op":"alloc","id":1,"size":2,"tag":"é"}`,
		`{"op":"alloc","id":01,"size":2}`,
		`{"op":"alloc","id":1,"size":2.0}`,
		`{"op":"alloc","id":1,"size":2,"align":64}`,
		`{"op":"alloc","id":1,"size":2,"addr":3,"block":4}`,
		`{"op":"alloc","id":1,"size":2} `,
		`{"op":"alloc","id":1,"size":2,"addr":-3}`,
		`{"op":"alloc","id":1,"size":2,"tag":"x"`,
		`{"op":"alloc","id":9999999999999999999,"size":2}`,
		`{"op":"free","id":1,"t":3.5}`,
		`{"op":"free","id":1,"t":9007199254740992}`,
		`{"op":"free","id":1,"stream":-1}`,
		`{"op":"free","id":1,"stream":1,"t":3}`,
		`{"op":"free","id":}`,
	} {
		require.False(t, checkCanonical(t, []byte(line)), "line %q", line)
	}
}

// Whatever decodeCanonical accepts, the general decoder decodes the same.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		`{"op":"alloc","id":7,"size":4096,"tag":"matmul","addr":140737488355328}`,
		`{"op":"free","id":7}`,
		`{"op":"alloc","id":0,"size":0}`,
		`{"op":"alloc","id":1,"size":2,"addr":3}`,
		`{"op":"alloc","id":1,"size":2,"t":5,"stream":7,"tag":"x"}`,
		`{"op":"free","id":1,"t":3,"stream":2}`,
	} {
		f.Add([]byte(s))
		f.Add([]byte(s + "\n" + s))
		f.Add([]byte(s + "\r\n"))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkCanonical(t, line)
		checkCanonicalLine(t, line)
	})
}

// checkCanonicalLine fails unless canonicalLine accepts exactly the
// buffers whose first line decodeCanonical accepts, and decodes it the
// same.
func checkCanonicalLine(t *testing.T, buf []byte) {
	t.Helper()
	d := decoder{tags: map[string]string{}}
	first := buf
	if i := bytes.IndexByte(buf, '\n'); i >= 0 {
		first = buf[:i]
	}
	var want, got Event
	accepted := d.decodeCanonical(&want, first)
	n := d.canonicalLine(&got, buf)
	if !accepted {
		require.Equal(t, -1, n, "%q", buf)
		require.Equal(t, Event{}, got, "a refused line leaves the event zero: %q", buf)
		return
	}
	require.Equal(t, len(first), n, "%q", buf)
	require.Equal(t, want, got, "%q", buf)
}

// decodeLines decodes a chunk as its lines decode one at a time: canonical
// lines found where they start, the others (blank, with a carriage
// return, not canonical, not valid) cut at their newline first.
func TestDecodeLinesMatchesLineByLine(t *testing.T) {
	lines := []string{
		`{"op":"alloc","id":1,"size":4096,"tag":"matmul","addr":140737488355328}`,
		`{"op":"free","id":1}`,
		`{"op":"free","id":1}` + "\r",
		`{"op":"alloc","id":2,"size":64,"align":128}`,
		`{"op":"free","id":2} `,
		`{"op":"free","id":2}x`,
		`{"op":"alloc","id":3,"size":1,"tag":"a` + "\t" + `b"}`,
		`{"op":"alloc","id":3,"size":`,
		`{"op":"step","name":"s"}`,
		`not json`,
		"",
		" \t",
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		var buf []byte
		for k := range 1 + rng.IntN(12) {
			if k > 0 {
				buf = append(buf, '\n')
			}
			buf = append(buf, lines[rng.IntN(len(lines))]...)
		}
		if rng.IntN(2) == 0 {
			buf = append(buf, '\n')
		}
		c := &lineChunk{buf: buf, first: 10}
		d := decoder{tags: map[string]string{}}
		d.decodeLines(c)

		var want []Event
		var bad []badLine
		ref := decoder{tags: map[string]string{}}
		for k, l := range bytes.Split(bytes.TrimSuffix(buf, []byte("\n")), []byte("\n")) {
			l = bytes.TrimSuffix(l, []byte("\r"))
			if isBlank(l) {
				continue
			}
			var ev Event
			if msg := ref.decodeEvent(&ev, l, 10+int64(k)); msg != "" {
				bad = append(bad, badLine{len(want), msg})
			}
			want = append(want, ev)
		}
		require.Equal(t, len(want), len(c.events), "%q", buf)
		require.Equal(t, len(bad), len(c.bad), "%q", buf)
		if len(want) > 0 {
			require.Equal(t, want, c.events, "%q", buf)
		}
		if len(bad) > 0 {
			require.Equal(t, bad, c.bad, "%q", buf)
		}
	}
}

// leadingDigits and stopsString agree with the byte-by-byte definitions for
// every byte value at every position of a word, and for random words made
// mostly of digits or of tag characters.
func TestWordScans(t *testing.T) {
	check := func(b [8]byte) {
		w := binary.LittleEndian.Uint64(b[:])
		n := 0
		for n < 8 && b[n]-'0' <= 9 {
			n++
		}
		require.Equal(t, n, leadingDigits(w), "% x", b)
		stops := false
		for _, c := range b {
			stops = stops || c == '"' || c == '\\' || c < 0x20 || c >= 0x80
		}
		require.Equal(t, stops, stopsString(w), "% x", b)
	}
	for _, fill := range []byte{'7', 'a', '0', '9'} {
		for pos := range 8 {
			for v := range 256 {
				var b [8]byte
				for i := range b {
					b[i] = fill
				}
				b[pos] = byte(v)
				check(b)
				if pos < 7 {
					b[pos+1] = 0xff // a carry out of the byte after
					check(b)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789/:az_.+\"\\\x00\x1f\x7f\x80\xfa\xff"
	for range 200_000 {
		var b [8]byte
		for i := range b {
			if rng.IntN(4) == 0 {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				b[i] = '0' + byte(rng.IntN(10))
			}
		}
		check(b)
	}
}
