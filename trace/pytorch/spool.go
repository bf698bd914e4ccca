package pytorch

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// spool holds the records of every list, in the order they were placed, so
// that the trace can be read again after the whole snapshot has been seen:
// the start state it opens with depends on the last entry. It lives in
// memory while small and in an unlinked temporary file after that (about 25
// bytes a trace entry), so memory does not grow with the trace.
//
// Each list's records form a chain of chunks: a run of records written
// while that list was the one being filled. A snapshot fills one list at a
// time, so a chain is one chunk or a few.
type spool struct {
	dir    string // where the file goes; "" is os.TempDir()
	limit  int64  // bytes kept in memory before spilling to a file
	mem    []byte
	f      *os.File
	w      *bufio.Writer
	size   int64
	chunks []chunk
	// reading: the writer has been flushed and no more records come.
	reading bool
}

type chunk struct {
	off, n int64
	next   int32 // the next chunk of the same list, or -1
}

// defaultSpoolLimit keeps small snapshots (and tests, and fuzzing) off the
// disk.
const defaultSpoolLimit = 32 << 20

func newSpool(dir string, limit int64) *spool {
	return &spool{dir: dir, limit: limit}
}

// append adds one record to l's chain.
func (s *spool) append(l *listNode, rec []byte) error {
	if s.reading {
		return errors.New("internal error: spool written after reading began")
	}
	n := int64(len(rec))
	if t := l.tail; t >= 0 && s.chunks[t].off+s.chunks[t].n == s.size {
		s.chunks[t].n += n
	} else {
		if len(s.chunks) >= math.MaxInt32 {
			return errors.New("the snapshot's lists are interleaved in more pieces than bfcsim can hold")
		}
		c := int32(len(s.chunks))
		s.chunks = append(s.chunks, chunk{off: s.size, n: n, next: -1})
		if t >= 0 {
			s.chunks[t].next = c
		} else {
			l.head = c
		}
		l.tail = c
	}
	s.size += n
	if s.f == nil {
		if int64(len(s.mem))+n <= s.limit {
			s.mem = append(s.mem, rec...)
			return nil
		}
		if err := s.spill(); err != nil {
			return err
		}
	}
	if _, err := s.w.Write(rec); err != nil {
		return fmt.Errorf("writing the temporary file: %w", err)
	}
	return nil
}

// spill moves the spool to a temporary file, removed at once so that
// nothing is left behind however the process ends.
func (s *spool) spill() error {
	f, err := os.CreateTemp(s.dir, "bfcsim-snapshot-*.spool")
	if err != nil {
		return fmt.Errorf("a snapshot this large needs a temporary file: %w", err)
	}
	_ = os.Remove(f.Name())
	s.f = f
	s.w = bufio.NewWriterSize(f, 1<<20)
	if _, err := s.w.Write(s.mem); err != nil {
		return fmt.Errorf("writing the temporary file: %w", err)
	}
	s.mem = nil
	return nil
}

// finish ends writing; the chains can then be read.
func (s *spool) finish() error {
	if s.reading {
		return nil
	}
	s.reading = true
	if s.w != nil {
		if err := s.w.Flush(); err != nil {
			return fmt.Errorf("writing the temporary file: %w", err)
		}
	}
	return nil
}

// Close releases the temporary file, if any.
func (s *spool) Close() error {
	if s.f != nil {
		err := s.f.Close()
		s.f = nil
		return err
	}
	return nil
}

// chainReader reads the records of one list.
type chainReader struct {
	s        *spool
	c        int32  // the chunk being read, or -1
	pos, end int64  // what is left of it
	buf      []byte // what is read of the current chunk
	i        int
	own      []byte // buf's storage when reading from the file
	b        *builder
	last     int64 // index of the last record read
}

func (b *builder) chain(l *listNode) *chainReader {
	r := &chainReader{s: b.sp, c: l.head, b: b, last: -1}
	if r.c >= 0 {
		c := b.sp.chunks[r.c]
		r.pos, r.end = c.off, c.off+c.n
	}
	return r
}

// fill refills buf from the chain; io.EOF at its end.
func (r *chainReader) fill() error {
	for r.c >= 0 && r.pos == r.end {
		r.c = r.s.chunks[r.c].next
		if r.c >= 0 {
			c := r.s.chunks[r.c]
			r.pos, r.end = c.off, c.off+c.n
		}
	}
	if r.c < 0 {
		return io.EOF
	}
	if r.s.f == nil {
		r.buf, r.i = r.s.mem[r.pos:r.end], 0
		r.pos = r.end
		return nil
	}
	if r.own == nil {
		r.own = make([]byte, 1<<16)
	}
	n := min(int64(len(r.own)), r.end-r.pos)
	r.buf = r.own[:n]
	if _, err := r.s.f.ReadAt(r.buf, r.pos); err != nil {
		return fmt.Errorf("reading the temporary file: %w", err)
	}
	r.pos += n
	r.i = 0
	return nil
}

func (r *chainReader) byte() (byte, error) {
	if r.i == len(r.buf) {
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	c := r.buf[r.i]
	r.i++
	return c, nil
}

func (r *chainReader) uvarint() (uint64, error) {
	// The fast path: the whole varint is in the buffer.
	if r.i+binary.MaxVarintLen64 <= len(r.buf) {
		x, n := binary.Uvarint(r.buf[r.i:])
		if n <= 0 {
			return 0, errCorruptSpool
		}
		r.i += n
		return x, nil
	}
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, errCorruptSpool
		}
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x, nil
		}
	}
	return 0, errCorruptSpool
}

var errCorruptSpool = errors.New("internal error: the temporary record file is damaged")

// record is one item of a list as read back: a dict's known fields, or any
// other value.
type record struct {
	index int64
	dict  bool
	item  value          // when !dict
	have  uint32         // bit k set: f[k] was in the dict
	f     [numKeys]value // by keyCode
}

// get returns field k, or the zero value (kind 0) when absent.
func (r *record) get(k keyCode) value { return r.f[k] }

func (r *record) has(k keyCode) bool { return r.have&(1<<k) != 0 }

// Record layout: uvarint (index - previous index - 1), a type byte (0 an
// item, 1 a dict), then for an item one value, for a dict a field count and
// (key byte, value) pairs. A value is a kind byte and its payload.
const (
	recItem = 0
	recDict = 1
)

func (b *builder) encodeDict(dst []byte, gap int64, d *dictNode) []byte {
	dst = binary.AppendUvarint(dst, uint64(gap))
	dst = append(dst, recDict, byte(len(d.fields)))
	for _, f := range d.fields {
		dst = append(dst, byte(f.key))
		dst = appendValue(dst, f.v)
	}
	return dst
}

func appendItemRecord(dst []byte, gap int64, v value) []byte {
	dst = binary.AppendUvarint(dst, uint64(gap))
	dst = append(dst, recItem)
	return appendValue(dst, v)
}

func appendValue(dst []byte, v value) []byte {
	dst = append(dst, byte(v.kind))
	switch v.kind {
	case kInt:
		dst = binary.AppendVarint(dst, int64(v.bits))
	case kUint, kList, kDict:
		dst = binary.AppendUvarint(dst, v.bits)
	case kBig:
		dst = binary.AppendUvarint(dst, uint64(v.aux))
		dst = binary.AppendUvarint(dst, v.bits)
	case kFloat:
		dst = binary.LittleEndian.AppendUint64(dst, v.bits)
	case kStr, kTag, kFrame:
		dst = binary.AppendUvarint(dst, uint64(v.aux))
	}
	return dst
}

// next reads the next record into rec; io.EOF at the end of the chain.
func (r *chainReader) next(rec *record) error {
	if r.i == len(r.buf) {
		if err := r.fill(); err != nil {
			return err // io.EOF: the chain ends between records
		}
	}
	gap, err := r.uvarint()
	if err != nil {
		return err
	}
	rec.index = r.last + 1 + int64(gap)
	r.last = rec.index
	t, err := r.byte()
	if err != nil {
		return errCorruptSpool
	}
	if t == recItem {
		rec.dict = false
		rec.item, err = r.value()
		return err
	}
	rec.dict = true
	for k := range rec.f {
		if rec.have&(1<<k) != 0 {
			rec.f[k] = value{}
		}
	}
	rec.have = 0
	n, err := r.byte()
	if err != nil {
		return errCorruptSpool
	}
	for range n {
		k, err := r.byte()
		if err != nil || k >= byte(numKeys) {
			return errCorruptSpool
		}
		v, err := r.value()
		if err != nil {
			return err
		}
		rec.f[k] = v
		rec.have |= 1 << k
	}
	return nil
}

func (r *chainReader) value() (value, error) {
	k, err := r.byte()
	if err != nil {
		return value{}, errCorruptSpool
	}
	v := value{kind: kind(k)}
	var x uint64
	switch v.kind {
	case kInt:
		x, err = r.uvarint()
		v.bits = uint64(int64(x>>1) ^ -int64(x&1)) // zigzag, as binary.AppendVarint writes
	case kUint, kList, kDict:
		v.bits, err = r.uvarint()
	case kBig:
		if x, err = r.uvarint(); err == nil {
			v.aux = uint32(x)
			v.bits, err = r.uvarint()
		}
	case kFloat:
		var c [8]byte
		for j := range c {
			if c[j], err = r.byte(); err != nil {
				return value{}, errCorruptSpool
			}
		}
		v.bits = binary.LittleEndian.Uint64(c[:])
	case kStr, kTag, kFrame:
		x, err = r.uvarint()
		v.aux = uint32(x)
	}
	return v, err
}
