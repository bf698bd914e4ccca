package search

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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
// stream, recorded address and block; a free's slot and size; a mark's
// name). IDs, tags and times are not kept: nothing a search replays needs
// them. The first tapeMemory bytes are held in memory; the rest go to a
// temporary file, so that memory stays flat however long the trace (a
// 100-million-event recording is a file of about a gigabyte). Any number of
// readers may read a finished tape at once.
type tape struct {
	mem    []byte
	file   *os.File      // the bytes past mem, once mem is full
	w      *bufio.Writer // writes file
	fileN  int64         // bytes written to file
	events int64
	line   int64 // the line of the last event written
	dir    string
	err    error

	closeOnce sync.Once
}

// tapeMemory is how much of a tape stays in memory: 64 MiB, a few million
// events, so that the traces most searches see never touch the disk.
const tapeMemory = 64 << 20

func newTape(dir string) *tape { return &tape{dir: dir} }

// append adds ev to the tape. After an error (writing the file), it does
// nothing and finish reports the error.
func (t *tape) append(ev *trace.Event) {
	if t.err != nil {
		return
	}
	var buf [96]byte
	b := buf[:0]
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
		t.write(b)
		t.write([]byte(ev.Name))
		t.events++
		return
	}
	t.write(b)
	t.events++
}

func (t *tape) write(b []byte) {
	if t.file == nil {
		if len(t.mem)+len(b) <= tapeMemory {
			t.mem = append(t.mem, b...)
			return
		}
		f, err := os.CreateTemp(t.dir, "bfcsim-tape-*")
		if err != nil {
			t.err = fmt.Errorf("a temporary file for the trace's events: %w", err)
			return
		}
		// Unlinked at once where the system allows: nothing is left
		// behind, whatever ends the process.
		_ = os.Remove(f.Name())
		t.file, t.w = f, bufio.NewWriterSize(f, 1<<20)
	}
	n, err := t.w.Write(b)
	t.fileN += int64(n)
	if err != nil {
		t.err = fmt.Errorf("writing the trace's events to a temporary file: %w", err)
	}
}

// finish ends the writing; the tape can be read after it.
func (t *tape) finish() error {
	if t.err == nil && t.w != nil {
		if err := t.w.Flush(); err != nil {
			t.err = fmt.Errorf("writing the trace's events to a temporary file: %w", err)
		}
	}
	return t.err
}

// close lets the tape's file go.
func (t *tape) close() {
	t.closeOnce.Do(func() {
		if t.file != nil {
			t.file.Close()
		}
		t.mem = nil
	})
}

// reader returns a new reader of the whole tape, a sim.Source.
func (t *tape) reader() *tapeReader {
	r := &tapeReader{mem: t.mem}
	if t.file != nil {
		r.file = bufio.NewReaderSize(io.NewSectionReader(t.file, 0, t.fileN), 256<<10)
	}
	return r
}

// tapeReader reads a tape's events in order.
type tapeReader struct {
	mem  []byte
	file *bufio.Reader // after mem
	ev   trace.Event
	line int64
	err  error
}

var errTapeCorrupt = errors.New("the trace's temporary copy is corrupt")

// Next reads the next event.
func (r *tapeReader) Next() bool {
	if r.err != nil {
		return false
	}
	if err := r.decode(&r.ev); err != nil {
		if err != io.EOF {
			r.err = err
		}
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
	for len(dst) < cap(dst) && r.err == nil {
		dst = dst[:len(dst)+1]
		if err := r.decode(&dst[len(dst)-1]); err != nil {
			dst = dst[:len(dst)-1]
			if err != io.EOF {
				r.err = err
			}
			break
		}
	}
	return dst
}

func (r *tapeReader) byte() (byte, error) {
	if len(r.mem) > 0 {
		c := r.mem[0]
		r.mem = r.mem[1:]
		return c, nil
	}
	if r.file == nil {
		return 0, io.EOF
	}
	return r.file.ReadByte()
}

// ReadByte makes the reader an io.ByteReader for binary's varints.
func (r *tapeReader) ReadByte() (byte, error) { return r.byte() }

func (r *tapeReader) uvarint() (uint64, error) {
	if len(r.mem) > 0 {
		if v, n := binary.Uvarint(r.mem); n > 0 {
			r.mem = r.mem[n:]
			return v, nil
		}
	}
	v, err := binary.ReadUvarint(r)
	if err == io.EOF {
		err = errTapeCorrupt
	}
	return v, err
}

func (r *tapeReader) varint() (int64, error) {
	u, err := r.uvarint()
	return int64(u>>1) ^ -int64(u&1), err
}

// decode reads one event into ev; io.EOF at the tape's clean end.
func (r *tapeReader) decode(ev *trace.Event) error {
	head, err := r.byte()
	if err != nil {
		return err // io.EOF: the end
	}
	*ev = trace.Event{Op: trace.Op(head & 7), Flags: head >> 3}
	d, err := r.varint()
	if err != nil {
		return err
	}
	r.line += d
	ev.Line = r.line
	var v [3]uint64
	switch ev.Op {
	case trace.OpAlloc:
		for i := range v {
			if v[i], err = r.uvarint(); err != nil {
				return err
			}
		}
		if v[0] > math.MaxUint32 {
			return errTapeCorrupt
		}
		ev.Slot, ev.Size, ev.Align = uint32(v[0]), v[1], v[2]
		if ev.Flags&trace.HasStream != 0 {
			if ev.Stream, err = r.varint(); err != nil {
				return err
			}
		}
		if ev.Flags&trace.HasAddr != 0 {
			if ev.Addr, err = r.uvarint(); err != nil {
				return err
			}
		}
		if ev.Flags&trace.HasBlock != 0 {
			if ev.Block, err = r.uvarint(); err != nil {
				return err
			}
		}
	case trace.OpFree:
		for i := range 2 {
			if v[i], err = r.uvarint(); err != nil {
				return err
			}
		}
		if v[0] > math.MaxUint32 {
			return errTapeCorrupt
		}
		ev.Slot, ev.Size = uint32(v[0]), v[1]
	case trace.OpReserve, trace.OpRelease:
		for i := range 2 {
			if v[i], err = r.uvarint(); err != nil {
				return err
			}
		}
		ev.Addr, ev.Size = v[0], v[1]
		if ev.Flags&trace.HasStream != 0 {
			if ev.Stream, err = r.varint(); err != nil {
				return err
			}
		}
	case trace.OpMark:
		n, err := r.uvarint()
		if err != nil {
			return err
		}
		if n > 1<<20 {
			return errTapeCorrupt
		}
		name := make([]byte, n)
		for i := range name {
			if name[i], err = r.byte(); err != nil {
				return errTapeCorrupt
			}
		}
		ev.Name = string(name)
	case trace.OpStep:
	default:
		return errTapeCorrupt
	}
	return nil
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
