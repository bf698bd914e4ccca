package trace

// The reference decoder: the github.com/valyala/fastjson based decoder the
// Reader used before decode.go, kept verbatim (but for names) so that
// FuzzDecodeMatchesReference can check that the two agree on every line, and
// BenchmarkDecode can compare them. The block key, added after, is decoded
// as addr is, and checked against size on an alloc.

import (
	"fmt"
	"math"
	"slices"

	"github.com/valyala/fastjson"
)

// refDecoder holds what the old decode used of the Reader.
type refDecoder struct {
	parser fastjson.Parser
	lineNo int64
	tags   map[string]string
}

func newRefDecoder() *refDecoder { return &refDecoder{tags: map[string]string{}} }

func (r *refDecoder) intern(b []byte) string {
	if s, ok := r.tags[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(r.tags) < maxInternedTags {
		r.tags[s] = s
	}
	return s
}

// header reports whether line is a header, as the old readHeader decided,
// and decodes it if so.
func (r *refDecoder) header(line []byte) (bool, Header, string) {
	if fastjson.ValidateBytes(line) != nil {
		return false, Header{}, ""
	}
	v, err := r.parser.ParseBytes(line)
	if err != nil || v.Type() != fastjson.TypeObject || v.Get("bfcsim_trace") == nil {
		return false, Header{}, ""
	}
	h, msg := refDecodeHeader(v)
	return true, h, msg
}

func refDecodeHeader(v *fastjson.Value) (Header, string) {
	h := Header{Meta: map[string]string{}}
	var msg string
	v.GetObject().Visit(func(key []byte, f *fastjson.Value) {
		if msg != "" {
			return
		}
		switch k := string(key); k {
		case "bfcsim_trace":
			n, m := refUintField(f, k)
			if m != "" {
				msg = m
			} else if n != FormatVersion {
				msg = fmt.Sprintf("unsupported trace format version %d (this bfcsim reads version %d)", n, FormatVersion)
			} else {
				h.Version = int(n)
			}
		case "name":
			h.Name, msg = refStringField(f, k)
		case "source":
			h.Source, msg = refStringField(f, k)
		case "capacity":
			h.CapacityBytes, msg = refUintField(f, k)
		case "time_unit":
			h.TimeUnit, msg = refStringField(f, k)
			if msg == "" && !slices.Contains(validTimeUnits, h.TimeUnit) {
				msg = fmt.Sprintf("time_unit %q is not one of ns, us, ms, s", h.TimeUnit)
			}
		default:
			h.Meta[k] = f.String()
		}
	})
	return h, msg
}

// decode is the old Reader.decode.
func (r *refDecoder) decode(line []byte) (Event, string) {
	ev := Event{Line: r.lineNo}
	if err := fastjson.ValidateBytes(line); err != nil {
		return ev, "malformed JSON: " + err.Error()
	}
	v, err := r.parser.ParseBytes(line)
	if err != nil {
		return ev, "malformed JSON: " + err.Error()
	}
	obj, err := v.Object()
	if err != nil {
		return ev, fmt.Sprintf("expected a JSON object, found %s", v.Type())
	}
	var (
		msg                                   string
		opText                                []byte
		hasOp, hasID, hasSize, hasName, isHdr bool
		hasFrames                             bool
		frameFile, frameIDs                   string
		frameLine                             uint64
	)
	obj.Visit(func(key []byte, f *fastjson.Value) {
		if msg != "" {
			return
		}
		switch string(key) {
		case "op":
			hasOp = true
			opText, err = f.StringBytes()
			if err != nil {
				msg = fmt.Sprintf("op must be a string, found %s", f.Type())
			}
		case "id":
			hasID = true
			ev.ID, msg = refUintField(f, "id")
			if msg == "" && ev.ID >= maxID {
				msg = fmt.Sprintf("id %d is too large (ids must be < 2^63)", ev.ID)
			}
		case "size":
			hasSize = true
			ev.Size, msg = refUintField(f, "size")
			if msg == "" && ev.Size >= maxID {
				msg = fmt.Sprintf("size %d is too large (sizes must be < 2^63)", ev.Size)
			}
		case "align":
			ev.Align, msg = refUintField(f, "align")
			if msg == "" && ev.Align&(ev.Align-1) != 0 {
				msg = fmt.Sprintf("align %d is not a power of two", ev.Align)
			}
		case "addr":
			ev.Addr, msg = refUintField(f, "addr")
			ev.Flags |= HasAddr
		case "block":
			ev.Block, msg = refUintField(f, "block")
			ev.Flags |= HasBlock
		case "t":
			ev.T, err = f.Float64()
			if err != nil {
				msg = fmt.Sprintf("t must be a number, found %s", f.Type())
			}
			ev.Flags |= HasT
		case "stream":
			ev.Stream, msg = refStreamField(f)
			ev.Flags |= HasStream
		case "tag":
			var b []byte
			b, err = f.StringBytes()
			if err != nil {
				msg = fmt.Sprintf("tag must be a string, found %s", f.Type())
			}
			ev.Tag = r.intern(b)
		case "name":
			hasName = true
			var b []byte
			b, err = f.StringBytes()
			if err != nil {
				msg = fmt.Sprintf("name must be a string, found %s", f.Type())
			}
			ev.Name = r.intern(b)
		case "stack":
			var v uint64
			v, msg = refUintField(f, "stack")
			if msg == "" && v > math.MaxUint32 {
				msg = fmt.Sprintf("stack %d is too large (stack ids must be < 2^32)", v)
			}
			ev.Stack = uint32(v)
		case "file":
			var b []byte
			b, err = f.StringBytes()
			if err != nil {
				msg = fmt.Sprintf("file must be a string, found %s", f.Type())
			}
			frameFile = r.intern(b)
		case "line":
			frameLine, msg = refUintField(f, "line")
			if msg == "" && frameLine >= maxID {
				msg = fmt.Sprintf("line %d is too large", frameLine)
			}
		case "frames":
			hasFrames = true
			frameIDs, msg = refFrames(f)
		case "bfcsim_trace":
			isHdr = true
		}
	})
	if msg != "" {
		return ev, msg
	}
	if !hasOp {
		if isHdr {
			return ev, "a trace header is allowed only on the first line"
		}
		return ev, `missing required field "op"`
	}
	op, ok := ParseOp(string(opText))
	if !ok {
		return ev, fmt.Sprintf("unknown op %q (want alloc, free, step, mark, reserve, release, frame or stack)", opText)
	}
	ev.Op = op
	need := func(has bool, field string) string {
		if has {
			return ""
		}
		return fmt.Sprintf("%s without required field %q", op, field)
	}
	switch op {
	case OpAlloc:
		msg = refFirstOf(need(hasID, "id"), need(hasSize, "size"))
		if msg == "" && ev.Flags&HasBlock != 0 && ev.Block < ev.Size {
			msg = fmt.Sprintf("block %d is smaller than size %d", ev.Block, ev.Size)
		}
	case OpFree:
		msg = need(hasID, "id")
	case OpMark:
		msg = need(hasName, "name")
	case OpReserve:
		msg = refFirstOf(need(ev.Flags&HasAddr != 0, "addr"), need(hasSize, "size"))
	case OpRelease:
		msg = need(ev.Flags&HasAddr != 0, "addr")
	case OpFrame:
		msg = need(hasID, "id")
		ev.Tag, ev.Size = frameFile, frameLine
	case OpStack:
		msg = refFirstOf(need(hasID, "id"), need(hasFrames, "frames"))
		ev.Tag = frameIDs
	}
	if op != OpAlloc {
		ev.Stack = 0
	}
	return ev, msg
}

// refFrames decodes a stack's frames as the decoder hands them on.
func refFrames(f *fastjson.Value) (string, string) {
	a, err := f.Array()
	if err != nil {
		return "", fmt.Sprintf("frames must be an array of frame ids, found %s", f.Type())
	}
	var buf []byte
	for i, el := range a {
		v, msg := refUintField(el, "a frame id")
		if msg != "" {
			return "", msg
		}
		if v == 0 || v > math.MaxUint32 {
			return "", fmt.Sprintf("frame id %d out of range (frame ids are 1 to 2^32-1)", v)
		}
		if i >= MaxStackDepth {
			return "", fmt.Sprintf("a stack lists more than %d frames", MaxStackDepth)
		}
		buf = encodeFrameIDs(buf, uint32(v))
	}
	return string(buf), ""
}

func refFirstOf(msgs ...string) string {
	for _, m := range msgs {
		if m != "" {
			return m
		}
	}
	return ""
}

// uintField decodes a non-negative integer. Integral values written as floats
// (4096.0, 4e3) are accepted while they are exact.
func refUintField(f *fastjson.Value, name string) (uint64, string) {
	if f.Type() != fastjson.TypeNumber {
		return 0, fmt.Sprintf("%s must be an integer, found %s", name, f.Type())
	}
	if n, err := f.Uint64(); err == nil {
		return n, ""
	}
	x, err := f.Float64()
	switch {
	case err != nil:
		return 0, fmt.Sprintf("%s %s is not a number", name, f)
	case x < 0:
		return 0, fmt.Sprintf("%s %s is negative", name, f)
	case x != math.Trunc(x):
		return 0, fmt.Sprintf("%s %s is not an integer", name, f)
	case x > maxExactFloat:
		return 0, fmt.Sprintf("%s %s is too large", name, f)
	}
	return uint64(x), ""
}

// streamField decodes a stream. CUDA stream handles are pointers, so values
// up to 2^64-1 are accepted and kept bit for bit in the int64.
func refStreamField(f *fastjson.Value) (int64, string) {
	if f.Type() == fastjson.TypeNumber {
		if n, err := f.Int64(); err == nil {
			return n, ""
		}
		if n, err := f.Uint64(); err == nil {
			return int64(n), ""
		}
	}
	return 0, fmt.Sprintf("stream must be an integer, found %s", f)
}

func refStringField(f *fastjson.Value, name string) (string, string) {
	b, err := f.StringBytes()
	if err != nil {
		return "", fmt.Sprintf("%s must be a string, found %s", name, f.Type())
	}
	return string(b), ""
}
