package tensorflow

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// The names TensorFlow's allocators give their events (BFCAllocator::AddTraceMe)
// and the stats on them, as the profiler stores them in an XSpace.
const (
	eventAlloc = "MemoryAllocation"
	eventFree  = "MemoryDeallocation"
)

// maxPlaneBytes bounds one XPlane of a capture: a plane is decoded whole.
const maxPlaneBytes = 4 << 30

// memEvent is one allocator event of a capture, with what TensorFlow's
// allocator recorded on it. Byte counts after the event: InUse is
// stats_.bytes_in_use after the allocation or free, Available the memory
// limit less what is reserved and in use.
type memEvent struct {
	ps   int64 // time: picoseconds since the epoch
	seq  int   // order in the file, for ties
	line int   // the XLine (thread) index in its plane, for messages
	// alloc is true for MemoryAllocation, false for MemoryDeallocation.
	alloc     bool
	allocator string
	addr      uint64
	// requested and chunk are the chunk's requested size and size (for a
	// free, the freed chunk's).
	requested, chunk int64
	inUse            int64
	available        int64
	reserved         int64
	hasInUse         bool
	hasAvailable     bool
	op               string
	step             int64
	hasStep          bool
	hasGroup         bool
}

// xspaceReader reads the memory events of an XSpace one plane at a time:
// a capture's planes are its top-level messages, and only one is decoded at
// once.
type xspaceReader struct {
	br   *bufio.Reader
	file string
	seq  int
	// meta holds the text stats of the planes themselves that say which
	// framework made the capture (frameworkStats): JAX writes
	// jax_version on its "/host:metadata" plane.
	meta map[string]string
}

// frameworkStats are the plane stats kept in xspaceReader.meta.
var frameworkStats = map[string]bool{"jax_version": true, "jaxlib_version": true, "tf_version": true}

// readXSpace collects the memory events of every plane of the XSpace in r.
func readXSpace(r io.Reader, file string) ([]memEvent, map[string]string, error) {
	x := &xspaceReader{br: bufio.NewReaderSize(r, 1<<20), file: file, meta: map[string]string{}}
	out, err := x.read()
	return out, x.meta, err
}

func (x *xspaceReader) read() ([]memEvent, error) {
	file := x.file
	var out []memEvent
	for {
		num, typ, err := x.tag()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if num != 1 || typ != protowire.BytesType {
			if err := x.skip(typ); err != nil {
				return nil, err
			}
			continue
		}
		n, err := x.varint()
		if err != nil {
			return nil, err
		}
		if n > maxPlaneBytes {
			return nil, fmt.Errorf("%s: a plane of %d bytes, more than the %d this reader decodes at once", file, n, uint64(maxPlaneBytes))
		}
		// The buffer grows with the bytes that arrive, not with the length
		// the file claims: a crafted length costs nothing.
		buf := bytes.NewBuffer(make([]byte, 0, min(n, 1<<20)))
		if _, err := io.CopyN(buf, x.br, int64(n)); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("%s: the capture ends inside a plane (truncated file?): %w", file, err)
		}
		if out, err = x.planeEvents(buf.Bytes(), out); err != nil {
			return nil, err
		}
	}
}

func (x *xspaceReader) tag() (protowire.Number, protowire.Type, error) {
	v, err := x.varint()
	if err != nil {
		return 0, 0, err
	}
	num, typ := protowire.DecodeTag(v)
	if num <= 0 {
		return 0, 0, fmt.Errorf("%s: not a profiler capture (XSpace): bad field tag %#x", x.file, v)
	}
	return num, typ, nil
}

// varint reads a base-128 varint; io.EOF only before its first byte.
func (x *xspaceReader) varint() (uint64, error) {
	var v uint64
	for i := 0; i < 10; i++ {
		b, err := x.br.ReadByte()
		if err == io.EOF && i > 0 {
			return 0, fmt.Errorf("%s: the capture ends inside a field (truncated file?)", x.file)
		}
		if err != nil {
			return 0, err
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%s: not a profiler capture (XSpace): a varint of more than 10 bytes", x.file)
}

func (x *xspaceReader) skip(typ protowire.Type) error {
	var n uint64
	switch typ {
	case protowire.VarintType:
		_, err := x.varint()
		return err
	case protowire.Fixed32Type:
		n = 4
	case protowire.Fixed64Type:
		n = 8
	case protowire.BytesType:
		var err error
		if n, err = x.varint(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%s: not a profiler capture (XSpace): wire type %d at the top level", x.file, typ)
	}
	if _, err := x.br.Discard(int(min(n, math.MaxInt32))); err != nil {
		return fmt.Errorf("%s: the capture ends inside a field (truncated file?): %w", x.file, err)
	}
	return nil
}

// planeEvents appends the memory events of one XPlane, in its wire form,
// to out. It reads the plane with protowire rather than into generated
// messages: a host plane holds every event of every thread, and a message
// per event and per stat would cost some 2 KB an event. Two passes: the
// event and stat metadata (fields 4 and 5) come after the lines (field 3).
func (x *xspaceReader) planeEvents(plane []byte, out []memEvent) ([]memEvent, error) {
	bad := func(what string) error {
		return fmt.Errorf("%s: not a profiler capture (XSpace): %s", x.file, what)
	}
	var allocID, freeID int64 = -1, -1
	names := map[int64]string{}
	err := eachField(plane, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
		if typ != protowire.BytesType || (num != 4 && num != 5) {
			return nil
		}
		// A map entry: key (1) and the metadata message (2), whose id (1)
		// and name (2) are what is read.
		var key int64
		var name string
		err := eachField(b, func(n protowire.Number, t protowire.Type, v uint64, mb []byte) error {
			switch {
			case n == 1 && t == protowire.VarintType:
				key = int64(v)
			case n == 2 && t == protowire.BytesType:
				return eachField(mb, func(n protowire.Number, t protowire.Type, v uint64, fb []byte) error {
					if n == 2 && t == protowire.BytesType {
						name = string(fb)
					}
					return nil
				})
			}
			return nil
		})
		if err != nil {
			return err
		}
		if num == 5 {
			names[key] = name
			return nil
		}
		switch name {
		case eventAlloc:
			allocID = key
		case eventFree:
			freeID = key
		}
		return nil
	})
	if err != nil {
		return nil, bad(err.Error())
	}
	if err := x.planeStats(plane, names); err != nil {
		return nil, bad(err.Error())
	}
	if allocID < 0 && freeID < 0 {
		return out, nil
	}
	intern := map[string]string{}
	var stats [][]byte // one event's stats, reused
	li := -1
	err = eachField(plane, func(num protowire.Number, typ protowire.Type, _ uint64, line []byte) error {
		if num != 3 || typ != protowire.BytesType {
			return nil
		}
		li++
		// The line's timestamp may come after its events: find it first.
		var baseNs int64
		if err := eachField(line, func(n protowire.Number, t protowire.Type, v uint64, _ []byte) error {
			if n == 3 && t == protowire.VarintType {
				baseNs = int64(v)
			}
			return nil
		}); err != nil {
			return err
		}
		return eachField(line, func(n protowire.Number, t protowire.Type, _ uint64, event []byte) error {
			if n != 4 || t != protowire.BytesType {
				return nil
			}
			var meta, offset int64
			stats = stats[:0]
			if err := eachField(event, func(n protowire.Number, t protowire.Type, v uint64, sb []byte) error {
				switch {
				case n == 1 && t == protowire.VarintType:
					meta = int64(v)
				case n == 2 && t == protowire.VarintType:
					offset = int64(v)
				case n == 4 && t == protowire.BytesType:
					stats = append(stats, sb)
				}
				return nil
			}); err != nil {
				return err
			}
			if meta != allocID && meta != freeID {
				return nil
			}
			ev := memEvent{ps: baseNs*1000 + offset, seq: x.seq, line: li, alloc: meta == allocID}
			x.seq++
			for _, sb := range stats {
				var sv statVal
				var id int64
				if err := eachField(sb, func(n protowire.Number, t protowire.Type, v uint64, vb []byte) error {
					switch {
					case n == 1 && t == protowire.VarintType:
						id = int64(v)
					case n == 2 && t == protowire.Fixed64Type:
						sv = statVal{kind: statDouble, f: math.Float64frombits(v)}
					case n == 3 && t == protowire.VarintType:
						sv = statVal{kind: statUint64, u: v}
					case n == 4 && t == protowire.VarintType:
						sv = statVal{kind: statInt64, i: int64(v)}
					case (n == 5 || n == 6) && t == protowire.BytesType:
						str, ok := intern[string(vb)]
						if !ok {
							str = string(vb)
							intern[str] = str
						}
						sv = statVal{kind: statText, s: str}
					case n == 7 && t == protowire.VarintType:
						sv = statVal{kind: statText, s: names[int64(v)]}
					}
					return nil
				}); err != nil {
					return err
				}
				setStat(&ev, names[id], sv)
			}
			out = append(out, ev)
			return nil
		})
	})
	if err != nil {
		return nil, bad(err.Error())
	}
	return out, nil
}

// planeStats keeps the plane's own text stats named in frameworkStats
// (XPlane.stats, field 6: each an XStat of metadata id 1 and, for text,
// str_value 5).
func (x *xspaceReader) planeStats(plane []byte, names map[int64]string) error {
	return eachField(plane, func(num protowire.Number, typ protowire.Type, _ uint64, sb []byte) error {
		if num != 6 || typ != protowire.BytesType {
			return nil
		}
		var id int64
		var text string
		err := eachField(sb, func(n protowire.Number, t protowire.Type, v uint64, vb []byte) error {
			switch {
			case n == 1 && t == protowire.VarintType:
				id = int64(v)
			case n == 5 && t == protowire.BytesType:
				text = string(vb)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if name := names[id]; frameworkStats[name] && text != "" && len(x.meta) < len(frameworkStats) {
			x.meta[name] = strings.ToValidUTF8(text, "\uFFFD")
		}
		return nil
	})
}

// eachField calls fn for every field of the message b: its number and
// type, a varint's or a fixed value's bits in v, a length-delimited field's
// bytes in data.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, data []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v uint64
		var data []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(b)
			v = uint64(v32)
		case protowire.BytesType:
			data, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, data); err != nil {
			return err
		}
	}
	return nil
}

// statVal is one XStat's value.
type statVal struct {
	kind int
	i    int64
	u    uint64
	f    float64
	s    string
}

// Kinds of statVal.
const (
	statNone = iota
	statInt64
	statUint64
	statDouble
	statText
)

// setStat stores one stat of a memory event. The profiler types a stat by
// its text (ParseAndAddStatValue): integers as int64 (uint64 from 2^63),
// other numbers as double, anything else as a reference to a stat metadata
// whose name is the text (older releases: a string value).
func setStat(ev *memEvent, name string, s statVal) {
	switch name {
	case "allocator_name":
		ev.allocator = statString(s)
	case "index_on_host", "device_ordinal":
		// Allocators without a name (a TPU runtime's) are known by
		// their index, as TensorBoard's memory profile keys them.
		if ev.allocator == "" {
			ev.allocator = name + " " + statString(s)
		}
	case "addr":
		if v, ok := statUint(s); ok {
			ev.addr = v
		}
	case "requested_bytes":
		ev.requested, _ = statInt(s)
	case "allocation_bytes":
		ev.chunk, _ = statInt(s)
	case "bytes_allocated":
		ev.inUse, ev.hasInUse = statInt(s)
	case "bytes_available":
		ev.available, ev.hasAvailable = statInt(s)
	case "bytes_reserved":
		ev.reserved, _ = statInt(s)
	case "tf_op":
		ev.op = statString(s)
	case "id":
		if !ev.hasGroup {
			ev.step, ev.hasStep = statInt(s)
		}
	case "group_id":
		// The step the profiler's event grouping assigned, when the
		// capture was saved after grouping: preferred to the op's own.
		ev.step, ev.hasStep = statInt(s)
		ev.hasGroup = ev.hasStep
	}
}

func statInt(s statVal) (int64, bool) {
	switch s.kind {
	case statInt64:
		return s.i, true
	case statUint64:
		if s.u <= math.MaxInt64 {
			return int64(s.u), true
		}
	case statDouble:
		if f := s.f; f == math.Trunc(f) && math.Abs(f) < 1<<62 {
			return int64(f), true
		}
	case statText:
		n, err := strconv.ParseInt(s.s, 10, 64)
		return n, err == nil
	}
	return 0, false
}

func statUint(s statVal) (uint64, bool) {
	switch s.kind {
	case statInt64:
		return uint64(s.i), true
	case statUint64:
		return s.u, true
	case statText:
		n, err := strconv.ParseUint(s.s, 0, 64)
		return n, err == nil
	}
	return 0, false
}

func statString(s statVal) string {
	switch s.kind {
	case statText:
		return s.s
	case statInt64:
		return strconv.FormatInt(s.i, 10)
	case statUint64:
		return strconv.FormatUint(s.u, 10)
	}
	return ""
}

// LooksLikeXSpace reports whether head, the start of an input, is an
// XSpace: its first field is a plane (field 1, length-delimited) whose
// first fields are an id or a name, and a plane name appears in it. A
// capture's first plane is "/host:CPU", "/device:GPU:0" or the like.
func LooksLikeXSpace(head []byte) bool {
	num, typ, n := protowire.ConsumeTag(head)
	if n < 0 || num != 1 || typ != protowire.BytesType {
		return false
	}
	head = head[n:]
	size, n := protowire.ConsumeVarint(head)
	if n < 0 || size == 0 {
		return false
	}
	plane := head[n:]
	if uint64(len(plane)) > size {
		plane = plane[:size]
	}
	for len(plane) > 0 {
		num, typ, n := protowire.ConsumeTag(plane)
		if n < 0 {
			return false
		}
		plane = plane[n:]
		switch {
		case num == 1 && typ == protowire.VarintType: // id
			_, m := protowire.ConsumeVarint(plane)
			if m < 0 {
				return false
			}
			plane = plane[m:]
		case num == 2 && typ == protowire.BytesType: // name
			name, m := protowire.ConsumeBytes(plane)
			return m >= 0 && isPlaneName(string(name))
		default:
			return false
		}
	}
	return false
}

// isPlaneName recognises the names the profiler gives planes.
func isPlaneName(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	if s[0] == '/' {
		return true
	}
	switch s {
	case "Task Environment", "host", "tpu":
		return true
	}
	return false
}

// errNoMemoryEvents is wrapped by the error for a capture without any.
var errNoMemoryEvents = errors.New("the capture holds no MemoryAllocation or MemoryDeallocation events")
