package tensorflow

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/bfcsim/bfcsim/trace/tensorflow/xplanepb"
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
}

// readXSpace collects the memory events of every plane of the XSpace in r.
func readXSpace(r io.Reader, file string) ([]memEvent, error) {
	x := &xspaceReader{br: bufio.NewReaderSize(r, 1<<20), file: file}
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
		var plane xplanepb.XPlane
		if err := proto.Unmarshal(buf.Bytes(), &plane); err != nil {
			return nil, fmt.Errorf("%s: not a profiler capture (XSpace): a plane does not decode: %w", file, err)
		}
		out = x.planeEvents(&plane, out)
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

// planeEvents appends the plane's memory events to out.
func (x *xspaceReader) planeEvents(p *xplanepb.XPlane, out []memEvent) []memEvent {
	var allocID, freeID int64 = -1, -1
	for id, m := range p.GetEventMetadata() {
		switch m.GetName() {
		case eventAlloc:
			allocID = id
		case eventFree:
			freeID = id
		}
	}
	if allocID < 0 && freeID < 0 {
		return out
	}
	names := map[int64]string{}
	for id, m := range p.GetStatMetadata() {
		names[id] = m.GetName()
	}
	for li, l := range p.GetLines() {
		base := l.GetTimestampNs() * 1000
		for _, e := range l.GetEvents() {
			id := e.GetMetadataId()
			if id != allocID && id != freeID {
				continue
			}
			ev := memEvent{ps: base + e.GetOffsetPs(), seq: x.seq, line: li, alloc: id == allocID}
			x.seq++
			for _, s := range e.GetStats() {
				setStat(&ev, names[s.GetMetadataId()], s, names)
			}
			out = append(out, ev)
		}
	}
	return out
}

// setStat stores one stat of a memory event. The profiler types a stat by
// its text (ParseAndAddStatValue): integers as int64 (uint64 from 2^63),
// other numbers as double, anything else as a reference to a stat metadata
// whose name is the text (older releases: a string value).
func setStat(ev *memEvent, name string, s *xplanepb.XStat, names map[int64]string) {
	switch name {
	case "allocator_name":
		ev.allocator = statString(s, names)
	case "index_on_host", "device_ordinal":
		// Allocators without a name (a TPU runtime's) are known by
		// their index, as TensorBoard's memory profile keys them.
		if ev.allocator == "" {
			ev.allocator = name + " " + statString(s, names)
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
		ev.op = statString(s, names)
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

func statInt(s *xplanepb.XStat) (int64, bool) {
	switch v := s.GetValue().(type) {
	case *xplanepb.XStat_Int64Value:
		return v.Int64Value, true
	case *xplanepb.XStat_Uint64Value:
		if v.Uint64Value <= math.MaxInt64 {
			return int64(v.Uint64Value), true
		}
	case *xplanepb.XStat_DoubleValue:
		if f := v.DoubleValue; f == math.Trunc(f) && math.Abs(f) < 1<<62 {
			return int64(f), true
		}
	case *xplanepb.XStat_StrValue:
		n, err := strconv.ParseInt(v.StrValue, 10, 64)
		return n, err == nil
	}
	return 0, false
}

func statUint(s *xplanepb.XStat) (uint64, bool) {
	switch v := s.GetValue().(type) {
	case *xplanepb.XStat_Int64Value:
		return uint64(v.Int64Value), true
	case *xplanepb.XStat_Uint64Value:
		return v.Uint64Value, true
	case *xplanepb.XStat_StrValue:
		n, err := strconv.ParseUint(v.StrValue, 0, 64)
		return n, err == nil
	}
	return 0, false
}

func statString(s *xplanepb.XStat, names map[int64]string) string {
	switch v := s.GetValue().(type) {
	case *xplanepb.XStat_StrValue:
		return v.StrValue
	case *xplanepb.XStat_RefValue:
		return names[int64(v.RefValue)]
	case *xplanepb.XStat_Int64Value:
		return strconv.FormatInt(v.Int64Value, 10)
	case *xplanepb.XStat_Uint64Value:
		return strconv.FormatUint(v.Uint64Value, 10)
	case *xplanepb.XStat_BytesValue:
		return string(v.BytesValue)
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
