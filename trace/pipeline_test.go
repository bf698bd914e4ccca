package trace

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// messyTrace is a trace of n lines that spans many chunks, with what real
// files have: CRLF line ends, blank lines, tags long enough to cross a chunk
// boundary, escapes, and, if bad, invalid lines of both kinds (malformed,
// and valid alone but not after the lines before them).
func messyTrace(seed uint64, n int, bad bool) string {
	rng := rand.New(rand.NewPCG(seed, 7))
	var b strings.Builder
	b.WriteString(`{"bfcsim_trace":1,"name":"messy"}` + "\n")
	var live []uint64
	next := uint64(1)
	for range n {
		end := "\n"
		if rng.IntN(50) == 0 {
			end = "\r\n"
		}
		switch k := rng.IntN(100); {
		case k < 2:
			b.WriteString("  \t" + end)
		case k < 3 && rng.IntN(20) == 0:
			fmt.Fprintf(&b, `{"op":"alloc","id":%d,"size":%d,"tag":"%s"}%s`,
				next, rng.IntN(1<<20), strings.Repeat("t\\u00e9", rng.IntN(60_000)), end)
			live = append(live, next)
			next++
		case bad && k < 4:
			b.WriteString(`{"op":"alloc","id":` + end) // malformed
		case bad && k < 5:
			fmt.Fprintf(&b, `{"op":"free","id":%d}%s`, next+1000, end) // not live
		case k < 55 || len(live) == 0:
			fmt.Fprintf(&b, `{"op":"alloc","id":%d,"size":%d,"tag":"op%d"}%s`, next, rng.IntN(1<<20), rng.IntN(30), end)
			live = append(live, next)
			next++
		default:
			i := rng.IntN(len(live))
			fmt.Fprintf(&b, `{"op":"free","id":%d}%s`, live[i], end)
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		}
	}
	return strings.TrimSuffix(b.String(), "\n") // the last line has no line end
}

// Reading in parallel gives what reading alone gives, event for event, on
// traces of many chunks, valid and not, stopping at the first invalid line
// or skipping them (readAll compares the three ways of reading).
func TestPipelineMatchesSerial(t *testing.T) {
	for seed := range uint64(4) {
		for _, bad := range []bool{false, true} {
			text := messyTrace(seed, 30_000, bad)
			evs, _, err := readAll(t, text)
			if bad {
				var serr *SyntaxError
				require.ErrorAs(t, err, &serr)
			} else {
				require.NoError(t, err)
				require.Greater(t, len(evs), 25_000)
			}
			evs, r, err := readAll(t, text, SkipInvalid())
			require.NoError(t, err)
			if bad {
				require.NotZero(t, r.Summary().Skipped)
			}
			require.Equal(t, r.Summary().Events, int64(len(evs)))
		}
	}
}

// The line numbers of events decoded in parallel are the file's.
func TestPipelineLineNumbers(t *testing.T) {
	text := messyTrace(9, 20_000, false)
	evs, _, err := readWith(t, text, 0)
	require.NoError(t, err)
	lines := strings.Split(text, "\n")
	for _, ev := range evs {
		line := lines[ev.Line-1]
		require.Contains(t, line, fmt.Sprintf(`"id":%d`, ev.ID), "line %d", ev.Line)
	}
}

// A read error after many chunks is reported once the events before it have
// been read; a line it cut short is not read.
func TestPipelineIOError(t *testing.T) {
	boom := errors.New("disk on fire")
	whole := messyTrace(1, 20_000, false) + "\n"
	for _, text := range []string{whole, whole + `{"op":"alloc","id":1`} {
		want, _, err := readWith(t, whole, 0)
		require.NoError(t, err)
		defer func(old int64) { pipelineStartLines = old }(pipelineStartLines)
		pipelineStartLines = 0
		r, err := NewReader(io.MultiReader(strings.NewReader(text), failingReader{boom}), "t.jsonl")
		require.NoError(t, err)
		var got []Event
		for r.Next() {
			got = append(got, r.Event())
		}
		require.ErrorIs(t, r.Err(), boom)
		assert.Contains(t, r.Err().Error(), "reading t.jsonl")
		assert.Equal(t, want, got)
		r.Close()
	}
}

// A line longer than MaxLineBytes deep in a trace is an error that names it.
func TestPipelineLineTooLong(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 64 MiB")
	}
	text := messyTrace(2, 10_000, false) + "\n" + strings.Repeat("a", MaxLineBytes+10)
	lines := int64(strings.Count(text, "\n")) + 1
	_, _, err := readAll(t, text)
	var serr *SyntaxError
	require.ErrorAs(t, err, &serr)
	assert.Equal(t, lines, serr.Line)
	assert.Contains(t, serr.Msg, "line longer than 64 MiB")
}

// Closing a Reader in the middle of a trace stops the goroutines decoding
// it, and their memory goes with them.
func TestPipelineClose(t *testing.T) {
	text := messyTrace(3, 50_000, false)
	before := runtime.NumGoroutine()
	defer func(old int64) { pipelineStartLines = old }(pipelineStartLines)
	pipelineStartLines = 0
	for range 20 {
		r, err := NewReader(strings.NewReader(text), "t.jsonl")
		require.NoError(t, err)
		for i := 0; i < 1000 && r.Next(); i++ {
		}
		require.NoError(t, r.Err())
		require.NoError(t, r.Close())
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines left running after Close")
}
