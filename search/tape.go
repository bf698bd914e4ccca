package search

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"

	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
)

// A tape holds a trace's events, decoded and checked once, for replaying
// again and again: a search replays one trace tens of times, and decoding
// a recording (a pickle, a profiler capture) costs more than replaying it.
//
// Each event is a few bytes: its op and flags in one byte, its line as a
// signed varint from the line before, then the fields its op uses as
// varints (an alloc's slot, size, alignment and, when the trace has them,
// stream, recorded address and block; a free's slot and size; a reserve's
// or release's address, size and stream; a mark's name). IDs, tags and
// times are not kept: nothing a search replays needs them. Events are
// written in chunks of about tapeChunk bytes, each holding whole events,
// so that a reader decodes a chunk in one tight loop. The first tapeMemory
// bytes of chunks stay in memory; the rest go to a temporary file, so that
// memory stays flat however long the trace (100 million events make a file
// of about a gigabyte). Any number of readers may read a finished tape at
// once.
type tape struct {
	chunks [][]byte // in memory, in order
	cur    []byte   // the chunk being written
	memN   int64    // bytes in chunks
	file   *os.File // the chunks past memory, once it is full
	spans  []span   // where each chunk of file lies
	fileN  int64    // bytes written to file
	events int64
	line   int64 // the line of the last event written
	dir    string
	err    error

	closeOnce sync.Once
}

// span is a chunk's place in the tape's file.
type span struct{ off, n int64 }

const (
	// tapeChunk is the size of a chunk: large enough that moving from one
	// to the next costs nothing per event, small enough to read from the
	// file into a buffer a reader reuses.
	tapeChunk = 256 << 10
	// maxEventBytes bounds one event's encoding but for a mark's name.
	maxEventBytes = 1 + 7*binary.MaxVarintLen64
)

// tapeMemory is how much of a tape stays in memory: 64 MiB, a few million
// events, so that the traces most searches see never touch the disk.
// Tests lower it.
var tapeMemory int64 = 64 << 20

func newTape(dir string) *tape { return &tape{dir: dir} }

// append adds ev to the tape. After an error (writing the file), it does
// nothing and finish reports the error.
func (t *tape) append(ev *trace.Event) {
	if t.err != nil {
		return
	}
	need := maxEventBytes
	if ev.Op == trace.OpMark {
		need += len(ev.Name)
	}
	if len(t.cur)+need > cap(t.cur) {
		t.flush(need)
	}
	b := t.cur
	b = append(b, byte(ev.Op)|ev.Flags<<3)
	b = binary.AppendVarint(b, ev.Line-t.line)
	t.line = ev.Line
	switch ev.Op {
	case trace.OpAlloc:
		b = binary.AppendUvarint(b, uint64(ev.Slot))
		b = binary.AppendUvarint(b, ev.Size)
		b = binary.AppendUvarint(b, ev.Align)
		if ev.Flags&trace.HasStream != 0 {
			b = binary.AppendVarint(b, ev.Stream)
		}
		if ev.Flags&trace.HasAddr != 0 {
			b = binary.AppendUvarint(b, ev.Addr)
		}
		if ev.Flags&trace.HasBlock != 0 {
			b = binary.AppendUvarint(b, ev.Block)
		}
	case trace.OpFree:
		b = binary.AppendUvarint(b, uint64(ev.Slot))
		b = binary.AppendUvarint(b, ev.Size)
	case trace.OpReserve, trace.OpRelease:
		b = binary.AppendUvarint(b, ev.Addr)
		b = binary.AppendUvarint(b, ev.Size)
		if ev.Flags&trace.HasStream != 0 {
			b = binary.AppendVarint(b, ev.Stream)
		}
	case trace.OpMark:
		b = binary.AppendUvarint(b, uint64(len(ev.Name)))
		b = append(b, ev.Name...)
	}
	t.cur = b
	t.events++
}

// flush ends the current chunk, keeping it in memory or writing it to the
// file, and starts one with room for at least need bytes.
func (t *tape) flush(need int) {
	if len(t.cur) > 0 {
		switch {
		case t.file == nil && t.memN+int64(len(t.cur)) <= tapeMemory:
			t.chunks = append(t.chunks, t.cur)
			t.memN += int64(len(t.cur))
		default:
			if t.file == nil {
				f, err := os.CreateTemp(t.dir, "bfcsim-tape-*")
				if err != nil {
					t.err = fmt.Errorf("a temporary file for the trace's events: %w", err)
					return
				}
				// Unlinked at once where the system allows: nothing is
				// left behind, whatever ends the process.
				_ = os.Remove(f.Name())
				t.file = f
			}
			if _, err := t.file.Write(t.cur); err != nil {
				t.err = fmt.Errorf("writing the trace's events to a temporary file: %w", err)
				return
			}
			t.spans = append(t.spans, span{t.fileN, int64(len(t.cur))})
			t.fileN += int64(len(t.cur))
			t.cur = t.cur[:0] // written out: the buffer is free again
			if cap(t.cur) >= need {
				return
			}
		}
	}
	t.cur = make([]byte, 0, max(tapeChunk, need))
}

// finish ends the writing; the tape can be read after it.
func (t *tape) finish() error {
	if t.err == nil && len(t.cur) > 0 {
		t.flush(0)
	}
	t.cur = nil
	return t.err
}

// close lets the tape's memory and file go.
func (t *tape) close() {
	t.closeOnce.Do(func() {
		if t.file != nil {
			t.file.Close()
		}
		t.chunks = nil
	})
}

// reader returns a new reader of the whole tape, a sim.Source.
func (t *tape) reader() *tapeReader { return &tapeReader{t: t} }

// tapeReader reads a tape's events in order.
type tapeReader struct {
	t     *tape
	chunk int    // the next chunk to read: memory's, then the file's
	buf   []byte // the rest of the current chunk
	fbuf  []byte // a chunk read from the file
	ev    trace.Event
	line  int64
	err   error
}

var errTapeCorrupt = errors.New("the trace's temporary copy is corrupt")

// next makes buf the next chunk's bytes; false at the tape's end.
func (r *tapeReader) next() bool {
	t := r.t
	switch {
	case r.chunk < len(t.chunks):
		r.buf = t.chunks[r.chunk]
	case r.chunk-len(t.chunks) < len(t.spans):
		s := t.spans[r.chunk-len(t.chunks)]
		if int64(cap(r.fbuf)) < s.n {
			r.fbuf = make([]byte, s.n)
		}
		r.fbuf = r.fbuf[:s.n]
		if _, err := t.file.ReadAt(r.fbuf, s.off); err != nil {
			r.err = fmt.Errorf("reading the trace's events back from a temporary file: %w", err)
			return false
		}
		r.buf = r.fbuf
	default:
		return false
	}
	r.chunk++
	return true
}

// Next reads the next event.
func (r *tapeReader) Next() bool {
	for len(r.buf) == 0 {
		if r.err != nil || !r.next() {
			return false
		}
	}
	if err := r.decode(&r.ev); err != nil {
		r.err = err
		return false
	}
	return true
}

// Event returns the event Next read.
func (r *tapeReader) Event() trace.Event { return r.ev }

// Err returns the error that ended reading, or nil at the tape's end.
func (r *tapeReader) Err() error { return r.err }

// NextBatch appends events up to dst's capacity (sim.BatchSource).
func (r *tapeReader) NextBatch(dst []trace.Event) []trace.Event {
	for len(dst) < cap(dst) {
		if len(r.buf) == 0 {
			if r.err != nil || !r.next() {
				break
			}
			continue
		}
		dst = dst[:len(dst)+1]
		if err := r.decode(&dst[len(dst)-1]); err != nil {
			r.err = err
			return dst[:len(dst)-1]
		}
	}
	return dst
}

// uvarint reads the varint at b[i:], returning it and the index after it;
// an index past len(b) says it is cut short. Short varints, most of a
// tape's, are read inline.
func uvarint(b []byte, i int) (uint64, int) {
	if i < len(b) && b[i] < 0x80 {
		return uint64(b[i]), i + 1
	}
	return uvarintSlow(b, i)
}

func uvarintSlow(b []byte, i int) (uint64, int) {
	if i >= len(b) {
		return 0, len(b) + 1
	}
	v, n := binary.Uvarint(b[i:])
	if n <= 0 {
		return 0, len(b) + 1
	}
	return v, i + n
}

// zigzag undoes binary.AppendVarint's encoding of a signed number.
func zigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// decode reads the event at the front of buf into ev.
func (r *tapeReader) decode(ev *trace.Event) error {
	b := r.buf
	head := b[0]
	op, flags := trace.Op(head&7), head>>3
	d, i := uvarint(b, 1)
	r.line += zigzag(d)
	// Every field is set, the unused ones to zero: cheaper than clearing
	// the event first.
	ev.Line, ev.Op, ev.Flags = r.line, op, flags
	ev.ID, ev.Align, ev.Addr, ev.Block, ev.T, ev.Stream, ev.Slot = 0, 0, 0, 0, 0, 0, 0
	ev.Tag, ev.Name = "", ""
	var v uint64
	switch op {
	case trace.OpAlloc:
		v, i = uvarint(b, i)
		ev.Size, i = uvarint(b, i)
		ev.Align, i = uvarint(b, i)
		if v > math.MaxUint32 {
			return r.corrupt()
		}
		ev.Slot = uint32(v)
		if flags&trace.HasStream != 0 {
			v, i = uvarint(b, i)
			ev.Stream = zigzag(v)
		}
		if flags&trace.HasAddr != 0 {
			ev.Addr, i = uvarint(b, i)
		}
		if flags&trace.HasBlock != 0 {
			ev.Block, i = uvarint(b, i)
		}
	case trace.OpFree:
		v, i = uvarint(b, i)
		ev.Size, i = uvarint(b, i)
		if v > math.MaxUint32 {
			return r.corrupt()
		}
		ev.Slot = uint32(v)
	case trace.OpReserve, trace.OpRelease:
		ev.Addr, i = uvarint(b, i)
		ev.Size, i = uvarint(b, i)
		if flags&trace.HasStream != 0 {
			v, i = uvarint(b, i)
			ev.Stream = zigzag(v)
		}
	case trace.OpMark:
		v, i = uvarint(b, i)
		if i > len(b) || v > uint64(len(b)-i) {
			return r.corrupt()
		}
		ev.Name = string(b[i : i+int(v)])
		i += int(v)
	case trace.OpStep:
		ev.Size = 0
	default:
		return r.corrupt()
	}
	if i > len(b) {
		return r.corrupt()
	}
	if op != trace.OpAlloc && op != trace.OpFree && op != trace.OpReserve && op != trace.OpRelease {
		ev.Size = 0
	}
	r.buf = b[i:]
	return nil
}

// corrupt ends reading with errTapeCorrupt.
func (r *tapeReader) corrupt() error {
	r.buf = nil
	r.err = errTapeCorrupt
	return errTapeCorrupt
}

// recorder is a sim.Source that reads another and writes every event it
// hands out onto a tape: the first replay of a search reads the trace and
// fills the tape at once.
type recorder struct {
	src sim.Source
	t   *tape
	ev  trace.Event
}

func (r *recorder) Next() bool {
	if !r.src.Next() {
		return false
	}
	r.ev = r.src.Event()
	r.t.append(&r.ev)
	return true
}

func (r *recorder) Event() trace.Event { return r.ev }

func (r *recorder) Err() error {
	if err := r.src.Err(); err != nil {
		return err
	}
	return r.t.err
}

// NextBatch is Next for many events at once, when the source can.
func (r *recorder) NextBatch(dst []trace.Event) []trace.Event {
	bs, ok := r.src.(sim.BatchSource)
	if !ok {
		for len(dst) < cap(dst) && r.Next() {
			dst = append(dst, r.ev)
		}
		return dst
	}
	k := len(dst)
	dst = bs.NextBatch(dst)
	for i := k; i < len(dst); i++ {
		r.t.append(&dst[i])
	}
	return dst
}
