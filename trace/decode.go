package trace

// The v1 line decoder.
//
// A trace line is one small JSON object, and a trace has billions of them, so
// the Reader does not build a JSON tree for each. decodeEvent scans the line
// once, left to right, without allocating:
//
//  1. It checks the JSON syntax as it goes: every key and value, including
//     the values of keys it does not know, which it walks (nested objects and
//     arrays too) without keeping them.
//  2. The value of a known key (op, id, size, align, addr, block, t,
//     stream, tag, name; bfcsim_trace only marks a misplaced header) is
//     decoded in place: integers straight from the digits, t with the
//     float parser of number.go, strings as a sub-slice of the line, or
//     unescaped into a reused buffer when they hold escapes. Tags and
//     names are interned. Known keys written without escapes, as every
//     writer writes them, are recognised by comparing a word of the line
//     (matchKey).
//  3. The first field error is kept, and the scan goes on: a line that is not
//     valid JSON is reported as malformed JSON whatever its fields say.
//  4. When the scan meets anything that is not valid JSON, it stops and
//     hands the line to malformedReason (jsonerror.go), which finds the
//     reason. Malformed lines are rare, so that second pass costs nothing in
//     practice and keeps the scanner simple.
//
// The decoder is a drop-in replacement for the github.com/valyala/fastjson
// based decoder bfcsim used before, and matches it exactly, quirks included:
// for every line it gives the same Event or the same error message. The
// quirks it keeps are:
//
//   - Strings are not checked for valid UTF-8, and a raw control character
//     (below 0x20) in a string is an error only after the string's last
//     escape sequence.
//   - Escapes are decoded best effort: a lone surrogate \uD800 stays as the
//     six characters "\uD800", and a high surrogate followed by any other
//     \uXXXX becomes U+FFFD in place of both.
//   - JSON nested deeper than 300 values is malformed.
//   - Numbers are parsed as fastjson's fastfloat does (parseNumber), which
//     for some exponents differs from strconv.ParseFloat in the last bit.
//
// The syntax checks are in jsonscan.go, the number parsing in number.go.
// reference_test.go keeps the old decoder, and FuzzDecodeMatchesReference
// checks that the two agree.
//
// The header (line 1) goes through the same scanner, but collects its keys
// in a slice (headerFields) and decodes them after (decodeHeader): it is read
// once per trace.

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// maxJSONDepth is how deeply JSON values may nest, the top-level object
// being depth 1. It is fastjson's MaxDepth, kept so that exactly the same
// lines are accepted; it also bounds the scanner's stack.
const maxJSONDepth = 300

// Field bits of decodeEvent: which keys a line had.
const (
	hasOp uint8 = 1 << iota
	hasID
	hasSize
	hasName
	hasHeaderKey
	hasFrames
)

// decoder turns event lines into Events. It holds the scratch buffers and
// the tag table of one decoding goroutine: the Reader has one, and each
// worker that decodes a large trace in parallel has its own (see
// pipeline.go).
type decoder struct {
	keyBuf []byte // an unescaped key or op
	valBuf []byte // an unescaped tag or name
	tags   map[string]string
	recent [recentTags]string // the last tag of each quickHash, in front of tags
}

// decodeEvent turns line lineNo into *ev (which must be zero), checking
// everything that can be checked from the line alone. It returns the reason
// the line is invalid, or "".
func (d *decoder) decodeEvent(ev *Event, line []byte, lineNo int64) string {
	if d.decodeCanonical(ev, line) {
		ev.Line = lineNo
		return ""
	}
	return d.decodeGeneral(ev, line, lineNo)
}

// decodeGeneral is decodeEvent for a line that is not canonical.
func (d *decoder) decodeGeneral(ev *Event, line []byte, lineNo int64) string {
	ev.Line = lineNo
	msg, ok := d.scanEvent(ev, line)
	if !ok {
		*ev = Event{Line: lineNo}
		msg = malformedReason(line)
		if msg == "" {
			panic(fmt.Sprintf("trace: internal error: the decoder rejected line %d, which is valid JSON: %q", lineNo, line))
		}
	}
	return msg
}

// scanEvent is decodeEvent's single pass. ok is false if the line is not a
// JSON object of nesting depth at most maxJSONDepth; msg is then meaningless.
func (d *decoder) scanEvent(ev *Event, line []byte) (msg string, ok bool) {
	var (
		fields         uint8
		opStart, opEnd int // the raw text of the last op, without quotes
		opEsc          bool
		// A frame's file and line, a stack's frames: kept aside until the
		// op says the line is one.
		frameFile, frameIDs string
		frameLine           uint64
		i                   = skipWS(line, 0)
		n                   = len(line)
	)
	if i >= n || line[i] != '{' {
		return "", false
	}
	i = skipWS(line, i+1)
	if i >= n {
		return "", false
	}
	if line[i] == '}' {
		i++
		goto end
	}
	for {
		// The key: a known one without escapes directly, any other by
		// the general scan.
		if line[i] != '"' {
			return "", false
		}
		var key int
		i, key = matchKey(line, i+1)
		if key == keyOther {
			keyStart := i
			var keyEsc bool
			if i, keyEsc, ok = scanString(line, keyStart); !ok {
				return "", false
			}
			if msg == "" {
				k := line[keyStart : i-1]
				if keyEsc {
					d.keyBuf = appendUnescaped(d.keyBuf[:0], k)
					k = d.keyBuf
				}
				key = keyCode(k)
			}
		}
		if i < n && line[i] == ':' {
			i++
		} else {
			i = skipWS(line, i)
			if i >= n || line[i] != ':' {
				return "", false
			}
			i++
		}
		if i >= n || line[i] <= ' ' {
			if i = skipWS(line, i); i >= n {
				return "", false
			}
		}

		// The value.
		if msg != "" {
			// An earlier field is invalid: only check the syntax.
			if i, ok = skipValue(line, i); !ok {
				return "", false
			}
		} else {
			switch key {
			case keyOp:
				fields |= hasOp
				if line[i] != '"' {
					msg = "op must be a string, found " + typeName(line[i])
					i, ok = skipValue(line, i)
				} else {
					opStart = i + 1
					i, opEsc, ok = scanString(line, opStart)
					opEnd = i - 1
				}
			case keyID:
				fields |= hasID
				ev.ID, i, msg, ok = uintValue(line, i, "id")
				if msg == "" && ev.ID >= maxID {
					msg = fmt.Sprintf("id %d is too large (ids must be < 2^63)", ev.ID)
				}
			case keySize:
				fields |= hasSize
				ev.Size, i, msg, ok = uintValue(line, i, "size")
				if msg == "" && ev.Size >= maxID {
					msg = fmt.Sprintf("size %d is too large (sizes must be < 2^63)", ev.Size)
				}
			case keyAlign:
				ev.Align, i, msg, ok = uintValue(line, i, "align")
				if msg == "" && ev.Align&(ev.Align-1) != 0 {
					msg = fmt.Sprintf("align %d is not a power of two", ev.Align)
				}
			case keyAddr:
				ev.Addr, i, msg, ok = uintValue(line, i, "addr")
				ev.Flags |= HasAddr
			case keyBlock:
				ev.Block, i, msg, ok = uintValue(line, i, "block")
				ev.Flags |= HasBlock
			case keyT:
				ev.Flags |= HasT
				if c := line[i]; c != '-' && (c < '0' || c > '9') {
					msg = "t must be a number, found " + typeName(c)
					i, ok = skipValue(line, i)
					break
				}
				if t, end, fast := plainFloat(line, i); fast {
					ev.T, i, ok = t, end, true
					break
				}
				start := i
				if i, ok = scanNumber(line, i); !ok {
					break
				}
				var okT bool
				if ev.T, okT = parseNumber(line[start:i]); !okT {
					msg = "t must be a number, found number"
				}
			case keyStream:
				ev.Flags |= HasStream
				ev.Stream, i, msg, ok = streamValue(line, i)
			case keyTag:
				var s []byte
				s, i, msg, ok = d.stringValue(line, i, "tag")
				ev.Tag = d.intern(s)
			case keyName:
				fields |= hasName
				var s []byte
				s, i, msg, ok = d.stringValue(line, i, "name")
				ev.Name = d.intern(s)
			case keyStack:
				var v uint64
				v, i, msg, ok = uintValue(line, i, "stack")
				if msg == "" && v > math.MaxUint32 {
					msg = fmt.Sprintf("stack %d is too large (stack ids must be < 2^32)", v)
				}
				ev.Stack = uint32(v)
			case keyFile:
				var s []byte
				s, i, msg, ok = d.stringValue(line, i, "file")
				frameFile = d.intern(s)
			case keyLine:
				frameLine, i, msg, ok = uintValue(line, i, "line")
				if msg == "" && frameLine >= maxID {
					msg = fmt.Sprintf("line %d is too large", frameLine)
				}
			case keyFrames:
				fields |= hasFrames
				frameIDs, i, msg, ok = d.framesValue(line, i)
			case keyHeader:
				fields |= hasHeaderKey
				i, ok = skipValue(line, i)
			default:
				i, ok = skipValue(line, i)
			}
			if !ok {
				return "", false
			}
		}

		// A comma and the next key, or the end of the object.
		if i < n && line[i] == ',' {
			i++
		} else {
			i = skipWS(line, i)
			if i >= n {
				return "", false
			}
			if line[i] == '}' {
				i++
				break
			}
			if line[i] != ',' {
				return "", false
			}
			i++
		}
		if i < n && line[i] == '"' {
			continue
		}
		i = skipWS(line, i)
		if i >= n {
			return "", false
		}
	}
end:
	if i < n && skipWS(line, i) < n {
		return "", false // a tail after the object
	}
	if msg != "" {
		return msg, true
	}

	if fields&hasOp == 0 {
		if fields&hasHeaderKey != 0 {
			return "a trace header is allowed only on the first line", true
		}
		return `missing required field "op"`, true
	}
	opText := line[opStart:opEnd]
	if opEsc {
		d.keyBuf = appendUnescaped(d.keyBuf[:0], opText)
		opText = d.keyBuf
	}
	switch string(opText) {
	case "alloc":
		ev.Op = OpAlloc
		if fields&hasID == 0 {
			return `alloc without required field "id"`, true
		}
		if fields&hasSize == 0 {
			return `alloc without required field "size"`, true
		}
		if ev.Flags&HasBlock != 0 && ev.Block < ev.Size {
			return fmt.Sprintf("block %d is smaller than size %d", ev.Block, ev.Size), true
		}
	case "free":
		ev.Op = OpFree
		if fields&hasID == 0 {
			return `free without required field "id"`, true
		}
	case "step":
		ev.Op = OpStep
	case "mark":
		ev.Op = OpMark
		if fields&hasName == 0 {
			return `mark without required field "name"`, true
		}
	case "reserve":
		ev.Op = OpReserve
		if ev.Flags&HasAddr == 0 {
			return `reserve without required field "addr"`, true
		}
		if fields&hasSize == 0 {
			return `reserve without required field "size"`, true
		}
	case "release":
		ev.Op = OpRelease
		if ev.Flags&HasAddr == 0 {
			return `release without required field "addr"`, true
		}
	case "frame":
		ev.Op = OpFrame
		if fields&hasID == 0 {
			return `frame without required field "id"`, true
		}
		ev.Tag, ev.Size = frameFile, frameLine
	case "stack":
		ev.Op = OpStack
		if fields&hasID == 0 {
			return `stack without required field "id"`, true
		}
		if fields&hasFrames == 0 {
			return `stack without required field "frames"`, true
		}
		ev.Tag = frameIDs
	default:
		return fmt.Sprintf("unknown op %q (%s)", opText, wantOps), true
	}
	if ev.Op != OpAlloc {
		ev.Stack = 0
	}
	return "", true
}

// The keys decodeEvent knows.
const (
	keyOther = iota
	keyOp
	keyID
	keySize
	keyAlign
	keyAddr
	keyBlock
	keyT
	keyStream
	keyTag
	keyName
	keyStack
	keyFile
	keyLine
	keyFrames
	keyHeader // bfcsim_trace
)

// matchKey recognises a known key written without escapes, as every trace
// writer writes them, at line[i:], just after its opening quote. It returns
// the index after its closing quote and the key, or i and keyOther.
func matchKey(line []byte, i int) (int, int) {
	if i+8 > len(line) {
		return matchKeyShort(line, i)
	}
	// The key and what follows, eight bytes of it as a little-endian word,
	// masked to the key's length and closing quote.
	w := binary.LittleEndian.Uint64(line[i:])
	const m2, m3, m4, m5, m6, m7 = 1<<16 - 1, 1<<24 - 1, 1<<32 - 1, 1<<40 - 1, 1<<48 - 1, 1<<56 - 1
	switch byte(w) {
	case 'o':
		if w&m3 == wOp {
			return i + 3, keyOp
		}
	case 'i':
		if w&m3 == wID {
			return i + 3, keyID
		}
	case 's':
		if w&m5 == wSize {
			return i + 5, keySize
		}
		if w&m7 == wStream {
			return i + 7, keyStream
		}
		if w&m6 == wStack {
			return i + 6, keyStack
		}
	case 'f':
		if w&m5 == wFile {
			return i + 5, keyFile
		}
		if w&m7 == wFrames {
			return i + 7, keyFrames
		}
	case 'l':
		if w&m5 == wLine {
			return i + 5, keyLine
		}
	case 't':
		if w&m2 == wT {
			return i + 2, keyT
		}
		if w&m4 == wTag {
			return i + 4, keyTag
		}
	case 'a':
		if w&m5 == wAddr {
			return i + 5, keyAddr
		}
		if w&m6 == wAlign {
			return i + 6, keyAlign
		}
	case 'n':
		if w&m5 == wName {
			return i + 5, keyName
		}
	case 'b':
		if w&m6 == wBlock {
			return i + 6, keyBlock
		}
	}
	return i, keyOther
}

// The known keys and their closing quote as little-endian words.
const (
	wOp     = 'o' | 'p'<<8 | '"'<<16
	wID     = 'i' | 'd'<<8 | '"'<<16
	wSize   = 's' | 'i'<<8 | 'z'<<16 | 'e'<<24 | '"'<<32
	wStream = 's' | 't'<<8 | 'r'<<16 | 'e'<<24 | 'a'<<32 | 'm'<<40 | '"'<<48
	wT      = 't' | '"'<<8
	wTag    = 't' | 'a'<<8 | 'g'<<16 | '"'<<24
	wAddr   = 'a' | 'd'<<8 | 'd'<<16 | 'r'<<24 | '"'<<32
	wAlign  = 'a' | 'l'<<8 | 'i'<<16 | 'g'<<24 | 'n'<<32 | '"'<<40
	wName   = 'n' | 'a'<<8 | 'm'<<16 | 'e'<<24 | '"'<<32
	wBlock  = 'b' | 'l'<<8 | 'o'<<16 | 'c'<<24 | 'k'<<32 | '"'<<40
	wStack  = 's' | 't'<<8 | 'a'<<16 | 'c'<<24 | 'k'<<32 | '"'<<40
	wFile   = 'f' | 'i'<<8 | 'l'<<16 | 'e'<<24 | '"'<<32
	wFrames = 'f' | 'r'<<8 | 'a'<<16 | 'm'<<24 | 'e'<<32 | 's'<<40 | '"'<<48
	wLine   = 'l' | 'i'<<8 | 'n'<<16 | 'e'<<24 | '"'<<32
)

// matchKeyShort is matchKey near the end of the line.
func matchKeyShort(line []byte, i int) (int, int) {
	rest := line[i:]
	for _, k := range [...]struct {
		text string
		code int
	}{{`op"`, keyOp}, {`id"`, keyID}, {`size"`, keySize}, {`stream"`, keyStream}, {`t"`, keyT},
		{`tag"`, keyTag}, {`addr"`, keyAddr}, {`align"`, keyAlign}, {`name"`, keyName}, {`block"`, keyBlock},
		{`stack"`, keyStack}, {`file"`, keyFile}, {`line"`, keyLine}, {`frames"`, keyFrames}} {
		if hasPrefix(rest, k.text) {
			return i + len(k.text), k.code
		}
	}
	return i, keyOther
}

// keyCode returns the key named k (unescaped).
func keyCode(k []byte) int {
	switch string(k) {
	case "op":
		return keyOp
	case "id":
		return keyID
	case "size":
		return keySize
	case "align":
		return keyAlign
	case "addr":
		return keyAddr
	case "block":
		return keyBlock
	case "t":
		return keyT
	case "stream":
		return keyStream
	case "tag":
		return keyTag
	case "name":
		return keyName
	case "stack":
		return keyStack
	case "file":
		return keyFile
	case "line":
		return keyLine
	case "frames":
		return keyFrames
	case "bfcsim_trace":
		return keyHeader
	}
	return keyOther
}

// uintValue decodes the non-negative integer field name whose value starts
// at line[i], returning it and the index after the value. ok is false if the
// value is not valid JSON.
func uintValue(line []byte, i int, name string) (v uint64, end int, msg string, ok bool) {
	c := line[i]
	if c != '-' && (c < '0' || c > '9') {
		end, ok = skipValue(line, i)
		return 0, end, name + " must be an integer, found " + typeName(c), ok
	}
	// The fast path: a plain integer of at most 19 digits, which cannot
	// overflow, followed by a delimiter.
	if c == '0' {
		if i+1 == len(line) || numberEnds[line[i+1]] {
			return 0, i + 1, "", true
		}
	} else if c != '-' {
		j := i
		for j < len(line) && j-i < 19 {
			d := line[j] - '0'
			if d > 9 {
				break
			}
			v = v*10 + uint64(d)
			j++
		}
		if j == len(line) || numberEnds[line[j]] {
			return v, j, "", true
		}
	}
	if end, ok = scanNumber(line, i); !ok {
		return 0, end, "", false
	}
	v, msg = uintFromNumber(line[i:end], name)
	return v, end, msg, true
}

// uintFromNumber decodes the valid JSON number num as a non-negative
// integer. Integral values written as floats (4096.0, 4e3) are accepted
// while they are exact.
func uintFromNumber(num []byte, name string) (uint64, string) {
	if v, ok := parseUint(num); ok {
		return v, ""
	}
	x, ok := parseNumber(num)
	switch {
	case !ok:
		return 0, fmt.Sprintf("%s %s is not a number", name, num)
	case x < 0:
		return 0, fmt.Sprintf("%s %s is negative", name, num)
	case x != math.Trunc(x):
		return 0, fmt.Sprintf("%s %s is not an integer", name, num)
	case x > maxExactFloat:
		return 0, fmt.Sprintf("%s %s is too large", name, num)
	}
	return uint64(x), ""
}

// streamValue decodes a stream. CUDA stream handles are pointers, so values
// up to 2^64-1 are accepted and kept bit for bit in the int64.
func streamValue(line []byte, i int) (v int64, end int, msg string, ok bool) {
	c := line[i]
	if c == '-' || c >= '0' && c <= '9' {
		if end, ok = scanNumber(line, i); !ok {
			return 0, end, "", false
		}
		num := line[i:end]
		if v, ok := parseInt(num); ok {
			return v, end, "", true
		}
		if v, ok := parseUint(num); ok {
			return int64(v), end, "", true
		}
		return 0, end, "stream must be an integer, found " + string(num), true
	}
	if end, ok = skipValue(line, i); !ok {
		return 0, end, "", false
	}
	return 0, end, "stream must be an integer, found " + valueText(line[i:end]), true
}

// wantOps lists the ops, for the message about one that is not.
const wantOps = "want alloc, free, step, mark, reserve, release, frame or stack"

// framesValue decodes a stack's frames, an array of frame ids, whose value
// starts at line[i]; it returns them encoded as the Reader takes them
// (encodeFrameIDs).
func (d *decoder) framesValue(line []byte, i int) (ids string, end int, msg string, ok bool) {
	if end, ok = skipValue(line, i); !ok {
		return "", end, "", false
	}
	if line[i] != '[' {
		return "", end, "frames must be an array of frame ids, found " + typeName(line[i]), true
	}
	buf := d.valBuf[:0]
	n := 0
	for j := skipWS(line, i+1); j < end && line[j] != ']'; {
		var v uint64
		if v, j, msg, _ = uintValue(line, j, "a frame id"); msg != "" {
			return "", end, msg, true
		}
		if v == 0 || v > math.MaxUint32 {
			return "", end, fmt.Sprintf("frame id %d out of range (frame ids are 1 to 2^32-1)", v), true
		}
		if n++; n > MaxStackDepth {
			return "", end, fmt.Sprintf("a stack lists more than %d frames", MaxStackDepth), true
		}
		buf = encodeFrameIDs(buf, uint32(v))
		j = skipWS(line, j)
		if j < end && line[j] == ',' {
			j = skipWS(line, j+1)
		}
	}
	d.valBuf = buf
	return d.intern(buf), end, "", true // interned: a trace read twice defines its stacks twice
}

// stringValue decodes the string field name whose value starts at line[i].
// The returned bytes are valid until the next call.
func (d *decoder) stringValue(line []byte, i int, name string) (s []byte, end int, msg string, ok bool) {
	if line[i] != '"' {
		end, ok = skipValue(line, i)
		return nil, end, name + " must be a string, found " + typeName(line[i]), ok
	}
	end, esc, ok := scanString(line, i+1)
	if !ok {
		return nil, end, "", false
	}
	s = line[i+1 : end-1]
	if esc {
		d.valBuf = appendUnescaped(d.valBuf[:0], s)
		s = d.valBuf
	}
	return s, end, "", true
}

// headerField is one key of a header line, the key unescaped and the value
// as its raw JSON text.
type headerField struct {
	key   string
	value []byte
}

// headerFields returns the keys of line if it is a header: a valid JSON
// object with the key bfcsim_trace. It returns false for any other line,
// valid or not, which is then read as an event.
func headerFields(line []byte) ([]headerField, bool) {
	i := skipWS(line, 0)
	n := len(line)
	if i >= n || line[i] != '{' {
		return nil, false
	}
	var (
		fields []headerField
		isHdr  bool
		ok     bool
	)
	i = skipWS(line, i+1)
	if i < n && line[i] == '}' {
		i++
	} else {
		for {
			if i >= n || line[i] != '"' {
				return nil, false
			}
			keyStart := i + 1
			var esc bool
			if i, esc, ok = scanString(line, keyStart); !ok {
				return nil, false
			}
			key := line[keyStart : i-1]
			if esc {
				key = appendUnescaped(nil, key)
			}
			if i = skipWS(line, i); i >= n || line[i] != ':' {
				return nil, false
			}
			if i = skipWS(line, i+1); i >= n {
				return nil, false
			}
			start := i
			if i, ok = skipValue(line, i); !ok {
				return nil, false
			}
			fields = append(fields, headerField{string(key), line[start:i]})
			isHdr = isHdr || string(key) == "bfcsim_trace"
			if i = skipWS(line, i); i >= n {
				return nil, false
			}
			if line[i] == '}' {
				i++
				break
			}
			if line[i] != ',' {
				return nil, false
			}
			i = skipWS(line, i+1)
		}
	}
	if skipWS(line, i) < n {
		return nil, false
	}
	return fields, isHdr
}

// decodeHeader decodes the fields of a header line.
func decodeHeader(fields []headerField) (Header, string) {
	h := Header{Meta: map[string]string{}}
	var msg string
	for _, f := range fields {
		switch f.key {
		case "bfcsim_trace":
			n, m := uintField(f.value, f.key)
			if m != "" {
				msg = m
			} else if n != FormatVersion {
				msg = fmt.Sprintf("unsupported trace format version %d (this bfcsim reads version %d)", n, FormatVersion)
			} else {
				h.Version = int(n)
			}
		case "name":
			h.Name, msg = stringField(f.value, f.key)
		case "source":
			h.Source, msg = stringField(f.value, f.key)
		case "capacity":
			h.CapacityBytes, msg = uintField(f.value, f.key)
		case "time_unit":
			h.TimeUnit, msg = stringField(f.value, f.key)
			if msg == "" && !slices.Contains(validTimeUnits, h.TimeUnit) {
				msg = fmt.Sprintf("time_unit %q is not one of ns, us, ms, s", h.TimeUnit)
			}
		default:
			h.Meta[f.key] = string(compactJSON(nil, f.value))
		}
		if msg != "" {
			return h, msg
		}
	}
	return h, ""
}

// uintField decodes the valid JSON value v as the non-negative integer
// field name.
func uintField(v []byte, name string) (uint64, string) {
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return 0, name + " must be an integer, found " + typeName(c)
	}
	return uintFromNumber(v, name)
}

// stringField decodes the valid JSON value v as the string field name.
func stringField(v []byte, name string) (string, string) {
	if v[0] != '"' {
		return "", name + " must be a string, found " + typeName(v[0])
	}
	return string(appendUnescaped(nil, v[1:len(v)-1])), ""
}
