package pytorch

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
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
	dir    string   // where the file goes; "" is os.TempDir()
	limit  int64    // bytes kept in memory before spilling to a file
	mem    [][]byte // while in memory: blocks, each twice the last up to spoolBlock bytes
	memOff []int64  // where each block starts
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
// disk. Memory grows in blocks, so that growing never copies, from
// spoolFirstBlock to spoolBlock bytes.
const (
	defaultSpoolLimit = 32 << 20
	spoolFirstBlock   = 4 << 10
	spoolBlock        = 1 << 20
)

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
		if s.size <= s.limit {
			for len(rec) > 0 {
				k := len(s.mem) - 1
				if k < 0 || len(s.mem[k]) == cap(s.mem[k]) {
					size, off := spoolFirstBlock, int64(0)
					if k >= 0 {
						size, off = min(2*cap(s.mem[k]), spoolBlock), s.memOff[k]+int64(cap(s.mem[k]))
					}
					s.mem = append(s.mem, make([]byte, 0, size))
					s.memOff = append(s.memOff, off)
					k++
				}
				b := s.mem[k]
				m := copy(b[len(b):cap(b)], rec)
				s.mem[k] = b[:len(b)+m]
				rec = rec[m:]
			}
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
	for _, b := range s.mem {
		if _, err := s.w.Write(b); err != nil {
			return fmt.Errorf("writing the temporary file: %w", err)
		}
	}
	s.mem, s.memOff = nil, nil
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

// readAt fills p from offset off.
func (s *spool) readAt(p []byte, off int64) error {
	if s.f != nil {
		if _, err := s.f.ReadAt(p, off); err != nil {
			return fmt.Errorf("reading the temporary file: %w", err)
		}
		return nil
	}
	k, _ := slices.BinarySearch(s.memOff, off+1)
	for k--; len(p) > 0; k++ {
		m := copy(p, s.mem[k][off-s.memOff[k]:])
		p, off = p[m:], off+int64(m)
	}
	return nil
}

// Close releases the temporary file, if any.
func (s *spool) Close() error {
	s.mem = nil
	if s.f != nil {
		err := s.f.Close()
		s.f = nil
		return err
	}
	return nil
}

// chainReader reads the records of one list. Its buffer always holds a
// whole record when one is left, so records decode from a slice.
type chainReader struct {
	s        *spool
	c        int32 // the chunk being read, or -1
	pos, end int64 // what is left of it
	buf      []byte
	i        int
	last     int64 // index of the last record read
	// lastAddr and lastTime are the previous compact entry's, which the
	// next one's are written as differences from (see encodeDict).
	lastAddr, lastTime uint64
}

// maxRecord bounds an encoded record: a field count, and for each key a
// key byte, a kind byte and two varints.
const maxRecord = 16 + int(numKeys)*(2+2*binary.MaxVarintLen64)

func (b *builder) chain(l *listNode) *chainReader {
	r := &chainReader{s: b.sp, c: l.head, last: -1}
	size := int64(1 << 16)
	if r.c >= 0 {
		c := b.sp.chunks[r.c]
		r.pos, r.end = c.off, c.off+c.n
		if c.next < 0 {
			size = min(size, c.n) // all of it
		}
	}
	r.buf = make([]byte, 0, max(size, 2*int64(maxRecord)))
	return r
}

// fill tops the buffer up from the chain: the unread bytes move to its
// front, and as much follows as fits.
func (r *chainReader) fill() error {
	n := copy(r.buf[:cap(r.buf)], r.buf[r.i:])
	r.buf, r.i = r.buf[:n], 0
	for len(r.buf) < cap(r.buf) && r.c >= 0 {
		if r.pos == r.end {
			r.c = r.s.chunks[r.c].next
			if r.c >= 0 {
				c := r.s.chunks[r.c]
				r.pos, r.end = c.off, c.off+c.n
			}
			continue
		}
		m := min(int64(cap(r.buf)-len(r.buf)), r.end-r.pos)
		if err := r.s.readAt(r.buf[len(r.buf):len(r.buf)+int(m)], r.pos); err != nil {
			return err
		}
		r.buf = r.buf[:len(r.buf)+int(m)]
		r.pos += m
	}
	return nil
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
	// compact says the dict was a trace entry written in its compact form:
	// its fields are in e, not f.
	compact bool
	e       compactEntry
}

// compactEntry is a trace entry whose fields all converted: an action
// string, unsigned addr and size, a signed stream, a numeric time and a
// tag. Most of a snapshot is these.
type compactEntry struct {
	flags      byte
	action     uint32 // string id
	addr, size uint64
	stream     int64
	time       uint64 // an int64, or float64 bits (flags)
	tag        uint32
}

const (
	ceAction    = 1 << iota // action is set
	ceAddr                  // addr is set
	ceSize                  // size is set
	ceStream                // stream is set
	ceTimeInt               // time is an int64
	ceTimeFloat             // time is float64 bits
	ceTag                   // tag is set
)

// entryKeys are the keys a compact entry holds.
const entryKeys = 1<<keyAction | 1<<keyAddr | 1<<keySize | 1<<keyStream | 1<<keyTimeUS | 1<<keyFrames

// get returns field k, or the zero value (kind 0) when absent.
func (r *record) get(k keyCode) value {
	if !r.compact {
		return r.f[k]
	}
	e := &r.e
	switch {
	case k == keyAction && e.flags&ceAction != 0:
		return value{kind: kStr, aux: e.action}
	case k == keyAddr && e.flags&ceAddr != 0:
		return uintValue(e.addr)
	case k == keySize && e.flags&ceSize != 0:
		return uintValue(e.size)
	case k == keyStream && e.flags&ceStream != 0:
		return intValue(e.stream)
	case k == keyTimeUS && e.flags&ceTimeInt != 0:
		return intValue(int64(e.time))
	case k == keyTimeUS && e.flags&ceTimeFloat != 0:
		return value{kind: kFloat, bits: e.time}
	case k == keyFrames && e.flags&ceTag != 0:
		return value{kind: kTag, aux: e.tag}
	}
	return value{}
}

func (r *record) has(k keyCode) bool { return r.get(k).kind != 0 }

// Record layout: uvarint (index - previous index - 1), a type byte, then
//
//   - recItem: one value (a kind byte and its payload);
//   - recDict: a field count and (key byte, value) pairs;
//   - recEntry: a compact entry: flags, then the fields they name, as
//     varints (time as 8 bytes when it is a float).
const (
	recItem  = 0
	recDict  = 1
	recEntry = 2
)

// encodeDict encodes d, placed in l after a gap of items that were not
// written. A compact entry's address and integer time are written as the
// difference from the list's previous ones: a few bytes instead of eight.
func (b *builder) encodeDict(dst []byte, gap int64, d *dictNode, l *listNode) []byte {
	dst = binary.AppendUvarint(dst, uint64(gap))
	if e, ok := b.compactEntry(d); ok {
		dst = append(dst, recEntry, e.flags)
		if e.flags&ceAction != 0 {
			dst = binary.AppendUvarint(dst, uint64(e.action))
		}
		if e.flags&ceAddr != 0 {
			dst = binary.AppendVarint(dst, int64(e.addr-l.lastAddr))
			l.lastAddr = e.addr
		}
		if e.flags&ceSize != 0 {
			dst = binary.AppendUvarint(dst, e.size)
		}
		if e.flags&ceStream != 0 {
			dst = binary.AppendVarint(dst, e.stream)
		}
		if e.flags&ceTimeInt != 0 {
			dst = binary.AppendVarint(dst, int64(e.time-l.lastTime))
			l.lastTime = e.time
		} else if e.flags&ceTimeFloat != 0 {
			dst = binary.LittleEndian.AppendUint64(dst, e.time)
		}
		if e.flags&ceTag != 0 {
			dst = binary.AppendUvarint(dst, uint64(e.tag))
		}
		return dst
	}
	dst = append(dst, recDict, byte(len(d.fields)))
	for _, f := range d.fields {
		dst = append(dst, byte(f.key))
		dst = appendValue(dst, f.v)
	}
	return dst
}

// compactEntry returns a dict as a compact entry, if it is a trace entry
// whose every field converts. Anything else is written in full, so that
// reading it reports what is wrong.
func (b *builder) compactEntry(d *dictNode) (compactEntry, bool) {
	var e compactEntry
	var err error
	for _, f := range d.fields {
		if entryKeys&(1<<f.key) == 0 {
			return e, false
		}
		if f.v.kind == kNone {
			continue // None reads as absent
		}
		switch f.key {
		case keyAction:
			if f.v.kind != kStr {
				return e, false
			}
			e.action, e.flags = f.v.aux, e.flags|ceAction
		case keyAddr:
			e.addr, err = b.asUint(f.v, "")
			e.flags |= ceAddr
		case keySize:
			e.size, err = b.asUint(f.v, "")
			e.flags |= ceSize
		case keyStream:
			e.stream, err = b.asInt(f.v, "")
			e.flags |= ceStream
		case keyTimeUS:
			switch f.v.kind {
			case kInt:
				e.time, e.flags = f.v.bits, e.flags|ceTimeInt
			case kFloat:
				if _, _, err := b.asFloat(f.v, ""); err != nil {
					return e, false // not finite: written in full, to be reported
				}
				e.time, e.flags = f.v.bits, e.flags|ceTimeFloat
			default:
				return e, false
			}
		case keyFrames:
			if f.v.kind != kTag || b.tags[f.v.aux].err != "" {
				return e, false
			}
			e.tag, e.flags = f.v.aux, e.flags|ceTag
		}
		if err != nil {
			return e, false
		}
	}
	return e, e.flags&ceAction != 0
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
	if len(r.buf)-r.i < maxRecord && r.c >= 0 {
		if err := r.fill(); err != nil {
			return err
		}
	}
	if r.i == len(r.buf) {
		return io.EOF
	}
	d := decoder{b: r.buf[r.i:]}
	gap := d.uvarint()
	rec.index = r.last + 1 + int64(gap)
	r.last = rec.index
	rec.compact = false
	switch d.byte() {
	case recItem:
		rec.dict = false
		rec.item = d.value()
	case recEntry:
		rec.dict, rec.compact = true, true
		e := &rec.e
		e.flags = d.byte()
		e.action, e.addr, e.size, e.stream, e.time, e.tag = 0, 0, 0, 0, 0, 0
		if e.flags&ceAction != 0 {
			e.action = uint32(d.uvarint())
		}
		if e.flags&ceAddr != 0 {
			e.addr = r.lastAddr + uint64(d.varint())
			r.lastAddr = e.addr
		}
		if e.flags&ceSize != 0 {
			e.size = d.uvarint()
		}
		if e.flags&ceStream != 0 {
			e.stream = d.varint()
		}
		if e.flags&ceTimeInt != 0 {
			e.time = r.lastTime + uint64(d.varint())
			r.lastTime = e.time
		} else if e.flags&ceTimeFloat != 0 {
			e.time = d.fixed64()
		}
		if e.flags&ceTag != 0 {
			e.tag = uint32(d.uvarint())
		}
	default:
		rec.dict = true
		for k := range rec.f {
			if rec.have&(1<<k) != 0 {
				rec.f[k] = value{}
			}
		}
		rec.have = 0
		for n := d.byte(); n > 0; n-- {
			k := d.byte()
			if k >= byte(numKeys) {
				return errCorruptSpool
			}
			rec.f[k] = d.value()
			rec.have |= 1 << k
		}
	}
	if d.bad {
		return errCorruptSpool
	}
	r.i += d.i
	return nil
}

// decoder reads a record from a slice that holds all of it.
type decoder struct {
	b   []byte
	i   int
	bad bool
}

func (d *decoder) byte() byte {
	if d.i >= len(d.b) {
		d.bad = true
		return 0
	}
	c := d.b[d.i]
	d.i++
	return c
}

func (d *decoder) uvarint() uint64 {
	x, n := binary.Uvarint(d.b[min(d.i, len(d.b)):])
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.i += n
	return x
}

// varint reads what binary.AppendVarint writes.
func (d *decoder) varint() int64 {
	x := d.uvarint()
	return int64(x>>1) ^ -int64(x&1)
}

func (d *decoder) fixed64() uint64 {
	if d.i+8 > len(d.b) {
		d.bad = true
		return 0
	}
	x := binary.LittleEndian.Uint64(d.b[d.i:])
	d.i += 8
	return x
}

func (d *decoder) value() value {
	v := value{kind: kind(d.byte())}
	switch v.kind {
	case kInt:
		v.bits = uint64(d.varint())
	case kUint, kList, kDict:
		v.bits = d.uvarint()
	case kBig:
		v.aux = uint32(d.uvarint())
		v.bits = d.uvarint()
	case kFloat:
		v.bits = d.fixed64()
	case kStr, kTag, kFrame:
		v.aux = uint32(d.uvarint())
	}
	return v
}
