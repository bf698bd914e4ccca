package pytorch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"
)

// A snapshot pickle is read by walking its opcodes once, in a stack
// machine like Python's own unpickler, except that containers are not
// built: they are handed to the builder, which reduces each to what the
// importer needs when it is placed (see builder.go). Three things follow:
//
//   - Nothing can run. The opcodes that import a name, call it or reach
//     outside the stream are refused by name: a snapshot holds only plain
//     data.
//   - Time and memory are linear in the file. Every opcode does O(1) work
//     per stack item it pops; a memo reference is never expanded, however
//     often it is shared or however deeply lists nest; a declared length
//     is never trusted to allocate (long strings keep their first
//     maxKeptString bytes, bytes none).
//   - The stack is bounded (maxStack), so a crafted pickle cannot grow it
//     without limit either.

// maxStack bounds the unpickler's stack. Python's pickler never leaves more
// than a batch (1,000 items) per level of nesting on it.
const maxStack = 1 << 20

// The read buffer starts small, so that small pickles cost little, and
// grows to pickleBuf as the input goes on, and beyond when a kept string
// needs more.
const (
	pickleBufStart = 4 << 10
	pickleBuf      = 1 << 20
)

// maxLongBytes bounds the integers written out in messages; a longer one
// is only described by its size.
const maxLongBytes = 256

// codeOpcodes are the opcodes that import a name, call it, or hand the
// unpickler an object from outside the stream.
var codeOpcodes = map[byte]string{
	'c':    "GLOBAL",
	'\x93': "STACK_GLOBAL",
	'R':    "REDUCE",
	'b':    "BUILD",
	'i':    "INST",
	'o':    "OBJ",
	'\x81': "NEWOBJ",
	'\x92': "NEWOBJ_EX",
	'\x82': "EXT1",
	'\x83': "EXT2",
	'\x84': "EXT4",
	'P':    "PERSID",
	'Q':    "BINPERSID",
	'\x97': "NEXT_BUFFER",
}

// opNames name the other opcodes in messages.
var opNames = map[byte]string{
	'\x80': "PROTO", '\x95': "FRAME", '.': "STOP", '(': "MARK", '0': "POP", '1': "POP_MARK",
	'2': "DUP", 'N': "NONE", '\x88': "NEWTRUE", '\x89': "NEWFALSE", 'I': "INT", 'L': "LONG",
	'J': "BININT", 'K': "BININT1", 'M': "BININT2", '\x8a': "LONG1", '\x8b': "LONG4",
	'F': "FLOAT", 'G': "BINFLOAT", 'S': "STRING", 'T': "BINSTRING", 'U': "SHORT_BINSTRING",
	'V': "UNICODE", 'X': "BINUNICODE", '\x8c': "SHORT_BINUNICODE", '\x8d': "BINUNICODE8",
	'B': "BINBYTES", 'C': "SHORT_BINBYTES", '\x8e': "BINBYTES8", '\x96': "BYTEARRAY8",
	'}': "EMPTY_DICT", 'd': "DICT", 's': "SETITEM", 'u': "SETITEMS",
	']': "EMPTY_LIST", 'l': "LIST", 'a': "APPEND", 'e': "APPENDS",
	')': "EMPTY_TUPLE", 't': "TUPLE", '\x85': "TUPLE1", '\x86': "TUPLE2", '\x87': "TUPLE3",
	'\x8f': "EMPTY_SET", '\x90': "ADDITEMS", '\x91': "FROZENSET",
	'p': "PUT", 'q': "BINPUT", 'r': "LONG_BINPUT", '\x94': "MEMOIZE",
	'g': "GET", 'h': "BINGET", 'j': "LONG_BINGET", '\x98': "READONLY_BUFFER",
}

func opName(op byte) string {
	if n, ok := opNames[op]; ok {
		return n
	}
	return fmt.Sprintf("0x%02x", op)
}

type pickleReader struct {
	in    io.Reader
	buf   []byte
	i, n  int   // buf[i:n] is read and not yet used
	off   int64 // input offset of buf[0]
	eof   bool
	b     *builder
	stack []value
	marks []int
	tmp   []byte // a string being assembled
}

// readPickle walks the pickle in r and returns its top-level value.
func readPickle(r io.Reader, b *builder) (value, error) {
	p := &pickleReader{in: r, buf: make([]byte, pickleBufStart), b: b}
	return p.run()
}

// errTruncated is what running out of input inside an opcode gives.
var errTruncated = errors.New("the file ends inside it")

// fill makes at least k unread bytes available.
func (p *pickleReader) fill(k int) error {
	if p.n-p.i >= k {
		return nil
	}
	if len(p.buf) < pickleBuf || len(p.buf) < k {
		// Each refill of a growing input doubles the buffer, up to
		// pickleBuf or what k needs.
		nb := make([]byte, max(min(2*len(p.buf), pickleBuf), k))
		p.n = copy(nb, p.buf[p.i:p.n])
		p.off += int64(p.i)
		p.buf, p.i = nb, 0
	}
	if p.i > 0 {
		copy(p.buf, p.buf[p.i:p.n])
		p.off += int64(p.i)
		p.n -= p.i
		p.i = 0
	}
	for p.n < k {
		if p.eof {
			return errTruncated
		}
		m, err := p.in.Read(p.buf[p.n:])
		p.n += m
		if err == io.EOF {
			p.eof = true
		} else if err != nil {
			return readError{err}
		}
	}
	return nil
}

func (p *pickleReader) bytes(k int) ([]byte, error) {
	if p.n-p.i < k {
		if err := p.fill(k); err != nil {
			return nil, err
		}
	}
	s := p.buf[p.i : p.i+k]
	p.i += k
	return s, nil
}

// skip consumes k bytes without keeping them.
func (p *pickleReader) skip(k uint64) error {
	for k > 0 {
		if p.i == p.n {
			if err := p.fill(1); err != nil {
				return err
			}
		}
		m := min(k, uint64(p.n-p.i))
		p.i += int(m)
		k -= m
	}
	return nil
}

// long reads up to maxKeptString bytes of a k-byte argument and skips the
// rest; cut says whether some were skipped.
func (p *pickleReader) long(k uint64) (kept []byte, cut bool, err error) {
	n := min(k, maxKeptString)
	if kept, err = p.bytes(int(n)); err != nil {
		return nil, false, err
	}
	if k > n {
		p.tmp = append(p.tmp[:0], kept...)
		return p.tmp, true, p.skip(k - n)
	}
	return kept, false, nil
}

// line reads up to and without a '\n'; a line longer than maxKeptString is
// cut and the rest skipped.
func (p *pickleReader) line() ([]byte, bool, error) { return p.lineMax(maxKeptString) }

// unicodeEscapeMax is the most bytes protocol 0 spells a character with
// (\UXXXXXXXX is ten; a character it escapes with \uXXXX takes up to three
// bytes in UTF-8).
const unicodeEscapeMax = 6

// lineMax is line with a bound of its own.
func (p *pickleReader) lineMax(maxKept int) ([]byte, bool, error) {
	p.tmp = p.tmp[:0]
	cut := false
	for {
		if p.i == p.n {
			if err := p.fill(1); err != nil {
				return nil, false, err
			}
		}
		chunk := p.buf[p.i:p.n]
		if j := bytes.IndexByte(chunk, '\n'); j >= 0 {
			if !cut {
				keep := min(j, maxKept-len(p.tmp))
				p.tmp = append(p.tmp, chunk[:keep]...)
				cut = keep < j
			}
			p.i += j + 1
			return p.tmp, cut, nil
		}
		if !cut {
			keep := min(len(chunk), maxKept-len(p.tmp))
			p.tmp = append(p.tmp, chunk[:keep]...)
			cut = keep < len(chunk)
		}
		p.i = p.n
	}
}

func (p *pickleReader) push(v value) error {
	if len(p.stack) >= maxStack {
		return fmt.Errorf("the stack grows past %d items; a memory snapshot's never does", maxStack)
	}
	p.stack = append(p.stack, v)
	if v.kind == kDict || v.kind == kList {
		p.b.hold(v)
	}
	return nil
}

// dropAll forgets popped stack items once they are used.
func (p *pickleReader) dropAll(items []value) {
	for _, v := range items {
		if v.kind == kDict || v.kind == kList {
			p.b.drop(v)
		}
	}
}

// floor is the stack height at the last mark: what is below it cannot be
// popped until the mark is.
func (p *pickleReader) floor() int {
	if n := len(p.marks); n > 0 {
		return p.marks[n-1]
	}
	return 0
}

var errUnderflow = errors.New("it pops from an empty stack")

func (p *pickleReader) pop() (value, error) {
	n := len(p.stack)
	if n <= p.floor() {
		return value{}, errUnderflow
	}
	v := p.stack[n-1]
	p.stack = p.stack[:n-1]
	return v, nil
}

func (p *pickleReader) top() (value, error) {
	n := len(p.stack)
	if n <= p.floor() {
		return value{}, errUnderflow
	}
	return p.stack[n-1], nil
}

// pop and popMark take items off the stack; the caller drops them (the
// builder counts copies of containers on the stack) once they are used.

// popMark pops everything above the last mark, and the mark. The slice is
// valid until the next push.
func (p *pickleReader) popMark() ([]value, error) {
	n := len(p.marks)
	if n == 0 {
		return nil, errors.New("there is no MARK before it")
	}
	m := p.marks[n-1]
	p.marks = p.marks[:n-1]
	items := p.stack[m:]
	p.stack = p.stack[:m]
	return items, nil
}

func (p *pickleReader) run() (value, error) {
	for {
		if p.i == p.n {
			if err := p.fill(1); err != nil {
				if err == errTruncated {
					return value{}, errors.New("truncated pickle: it ends without a STOP opcode")
				}
				return value{}, p.fail(0, p.off+int64(p.i), err)
			}
		}
		at := p.off + int64(p.i)
		op := p.buf[p.i]
		p.i++
		if op == '.' {
			v, err := p.pop()
			if err != nil {
				return value{}, p.fail(op, at, err)
			}
			return v, nil
		}
		if err := p.step(op); err != nil {
			return value{}, p.fail(op, at, err)
		}
	}
}

// fail says where an opcode went wrong.
func (p *pickleReader) fail(op byte, at int64, err error) error {
	var code codeError
	switch {
	case errors.As(err, &code):
		return err
	case err == errTruncated:
		return fmt.Errorf("truncated pickle: the file ends inside opcode %s at byte %d", opName(op), at)
	case errors.Is(err, errUnknownOpcode):
		return fmt.Errorf("not a pickle, or a damaged one: unknown opcode 0x%02x at byte %d", op, at)
	}
	var rerr readError
	if errors.As(err, &rerr) {
		return rerr.err
	}
	return fmt.Errorf("damaged or crafted pickle: opcode %s at byte %d: %w", opName(op), at, err)
}

var errUnknownOpcode = errors.New("unknown opcode")

// codeError refuses an opcode that would run code.
type codeError struct {
	name string
	at   int64
}

func (e codeError) Error() string {
	return fmt.Sprintf("the pickle asks to run code (opcode %s at byte %d); a memory snapshot holds only plain data, so it is refused", e.name, e.at)
}

// readError is a failure to read the input, passed on as it is.
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }
func (e readError) Unwrap() error { return e.err }

// step runs one opcode (its byte already consumed).
func (p *pickleReader) step(op byte) error {
	b := p.b
	switch op {
	case '\x80': // PROTO
		a, err := p.bytes(1)
		if err != nil {
			return err
		}
		if a[0] > 5 {
			return fmt.Errorf("pickle protocol %d is newer than bfcsim reads (0 to 5)", a[0])
		}
	case '\x95': // FRAME: a length hint; its contents are opcodes like any others
		_, err := p.bytes(8)
		return err
	case '(':
		p.marks = append(p.marks, len(p.stack))
		if len(p.marks) > maxStack {
			return fmt.Errorf("more than %d marks; a memory snapshot never nests that deep", maxStack)
		}
	case '0': // POP
		if len(p.stack) > p.floor() {
			p.b.drop(p.stack[len(p.stack)-1])
			p.stack = p.stack[:len(p.stack)-1]
		} else if len(p.marks) > 0 {
			p.marks = p.marks[:len(p.marks)-1]
		} else {
			return errUnderflow
		}
	case '1': // POP_MARK
		items, err := p.popMark()
		p.dropAll(items)
		return err
	case '2': // DUP
		v, err := p.top()
		if err != nil {
			return err
		}
		return p.push(v)
	case 'N':
		return p.push(noneValue)
	case '\x88':
		return p.push(trueValue)
	case '\x89':
		return p.push(value{kind: kFalse})
	case 'J', 'K', 'M': // BININT, BININT1, BININT2
		n := 4
		switch op {
		case 'K':
			n = 1
		case 'M':
			n = 2
		}
		a, err := p.bytes(n)
		if err != nil {
			return err
		}
		var x int64
		switch op {
		case 'J':
			x = int64(int32(binary.LittleEndian.Uint32(a)))
		case 'K':
			x = int64(a[0])
		default:
			x = int64(binary.LittleEndian.Uint16(a))
		}
		return p.push(intValue(x))
	case '\x8a', '\x8b': // LONG1, LONG4
		var n uint64
		if op == '\x8a' {
			a, err := p.bytes(1)
			if err != nil {
				return err
			}
			n = uint64(a[0])
		} else {
			a, err := p.bytes(4)
			if err != nil {
				return err
			}
			m := int32(binary.LittleEndian.Uint32(a))
			if m < 0 {
				return fmt.Errorf("LONG4 of negative length %d", m)
			}
			n = uint64(m)
		}
		v, err := p.longValue(n)
		if err != nil {
			return err
		}
		return p.push(v)
	case 'I', 'L': // INT, LONG: decimal text
		text, _, err := p.line()
		if err != nil {
			return err
		}
		v, err := p.decimal(text, op == 'L')
		if err != nil {
			return err
		}
		return p.push(v)
	case 'F': // FLOAT
		text, _, err := p.line()
		if err != nil {
			return err
		}
		f, err := strconv.ParseFloat(string(text), 64)
		if err != nil {
			return fmt.Errorf("FLOAT %q is not a number", text)
		}
		return p.push(floatValue(f))
	case 'G': // BINFLOAT
		a, err := p.bytes(8)
		if err != nil {
			return err
		}
		return p.push(floatValue(math.Float64frombits(binary.BigEndian.Uint64(a))))
	case 'X', '\x8c', '\x8d', 'T', 'U': // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, BINSTRING, SHORT_BINSTRING
		n, err := p.length(op)
		if err != nil {
			return err
		}
		s, cut, err := p.long(n)
		if err != nil {
			return err
		}
		return p.pushString(s, cut)
	case 'V': // UNICODE: raw-unicode-escape text, cut once decoded, as other strings are
		text, cut, err := p.lineMax(unicodeEscapeMax * maxKeptString)
		if err != nil {
			return err
		}
		s := rawUnicodeEscape(text)
		if len(s) > maxKeptString {
			s, cut = s[:maxKeptString], true
		}
		return p.pushString(s, cut)
	case 'S': // STRING: a quoted Python 2 literal
		text, cut, err := p.line()
		if err != nil {
			return err
		}
		s, err := pythonQuoted(text)
		if err != nil {
			return err
		}
		return p.pushString(s, cut)
	case 'B', 'C', '\x8e', '\x96': // BINBYTES, SHORT_BINBYTES, BINBYTES8, BYTEARRAY8
		n, err := p.length(op)
		if err != nil {
			return err
		}
		if err := p.skip(n); err != nil {
			return err
		}
		return p.push(value{kind: kBytes})
	case '}':
		v, err := b.newDict()
		if err != nil {
			return err
		}
		return p.push(v)
	case ']':
		v, err := b.newList()
		if err != nil {
			return err
		}
		return p.push(v)
	case ')':
		v, err := b.newTuple(nil)
		if err != nil {
			return err
		}
		return p.push(v)
	case 'd': // DICT: from the pairs above the mark
		items, err := p.popMark()
		if err != nil {
			return err
		}
		if len(items)%2 != 0 {
			return errors.New("an odd number of items for a dict")
		}
		v, err := b.newDict()
		if err != nil {
			return err
		}
		for j := 0; j < len(items); j += 2 {
			if err := b.setItem(v, items[j], items[j+1]); err != nil {
				return err
			}
		}
		p.dropAll(items)
		return p.push(v)
	case 'l', 't': // LIST, TUPLE: from the items above the mark
		items, err := p.popMark()
		if err != nil {
			return err
		}
		var v value
		if op == 't' {
			v, err = b.newTuple(items)
		} else {
			v, err = b.newList()
			for _, it := range items {
				if err == nil {
					err = b.appendItem(v, it)
				}
			}
		}
		if err != nil {
			return err
		}
		p.dropAll(items)
		return p.push(v)
	case '\x85', '\x86', '\x87': // TUPLE1, TUPLE2, TUPLE3
		k := int(op-'\x85') + 1
		if len(p.stack)-p.floor() < k {
			return errUnderflow
		}
		items := p.stack[len(p.stack)-k:]
		p.stack = p.stack[:len(p.stack)-k]
		v, err := b.newTuple(items)
		if err != nil {
			return err
		}
		p.dropAll(items)
		return p.push(v)
	case 's': // SETITEM
		v, err := p.pop()
		if err != nil {
			return err
		}
		k, err := p.pop()
		if err != nil {
			return err
		}
		d, err := p.top()
		if err != nil {
			return err
		}
		if err := b.setItem(d, k, v); err != nil {
			return err
		}
		b.drop(k)
		b.drop(v)
	case 'u': // SETITEMS
		items, err := p.popMark()
		if err != nil {
			return err
		}
		if len(items)%2 != 0 {
			return errors.New("an odd number of items for a dict")
		}
		d, err := p.top()
		if err != nil {
			return err
		}
		for j := 0; j < len(items); j += 2 {
			if err := b.setItem(d, items[j], items[j+1]); err != nil {
				return err
			}
		}
		p.dropAll(items)
	case 'a': // APPEND
		v, err := p.pop()
		if err != nil {
			return err
		}
		l, err := p.top()
		if err != nil {
			return err
		}
		if err := b.appendItem(l, v); err != nil {
			return err
		}
		b.drop(v)
	case 'e': // APPENDS
		items, err := p.popMark()
		if err != nil {
			return err
		}
		l, err := p.top()
		if err != nil {
			return err
		}
		for _, it := range items {
			if err := b.appendItem(l, it); err != nil {
				return err
			}
			b.drop(it)
		}
	case '\x8f': // EMPTY_SET
		return p.push(value{kind: kSet})
	case '\x90', '\x91': // ADDITEMS, FROZENSET: a set's items are not kept
		items, err := p.popMark()
		if err != nil {
			return err
		}
		for _, it := range items {
			if err := b.seal(it); err != nil {
				return err
			}
		}
		p.dropAll(items)
		if op == '\x91' {
			return p.push(value{kind: kSet})
		}
		s, err := p.top()
		if err != nil {
			return err
		}
		if s.kind != kSet {
			return fmt.Errorf("adds items to a %s, not to a set", s.typeName())
		}
	case 'p', 'q', 'r', '\x94': // PUT, BINPUT, LONG_BINPUT, MEMOIZE
		idx := b.memo.n
		if op != '\x94' {
			var err error
			if idx, err = p.memoIndex(op); err != nil {
				return err
			}
		}
		v, err := p.top()
		if err != nil {
			return err
		}
		return b.memoize(idx, v)
	case 'g', 'h', 'j': // GET, BINGET, LONG_BINGET
		idx, err := p.memoIndex(op)
		if err != nil {
			return err
		}
		v, err := b.fetch(idx)
		if err != nil {
			return err
		}
		return p.push(v)
	case '\x98': // READONLY_BUFFER
		_, err := p.top()
		return err
	default:
		if name, ok := codeOpcodes[op]; ok {
			return codeError{name: name, at: p.off + int64(p.i) - 1}
		}
		return errUnknownOpcode
	}
	return nil
}

// length reads the length argument of a string or bytes opcode.
func (p *pickleReader) length(op byte) (uint64, error) {
	switch op {
	case '\x8c', 'U', 'C':
		a, err := p.bytes(1)
		if err != nil {
			return 0, err
		}
		return uint64(a[0]), nil
	case 'X', 'B':
		a, err := p.bytes(4)
		if err != nil {
			return 0, err
		}
		return uint64(binary.LittleEndian.Uint32(a)), nil
	case 'T':
		a, err := p.bytes(4)
		if err != nil {
			return 0, err
		}
		n := int32(binary.LittleEndian.Uint32(a))
		if n < 0 {
			return 0, fmt.Errorf("BINSTRING of negative length %d", n)
		}
		return uint64(n), nil
	}
	a, err := p.bytes(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(a), nil
}

func (p *pickleReader) memoIndex(op byte) (uint32, error) {
	// The common cases, straight from the buffer.
	if p.n-p.i >= 4 {
		switch op {
		case 'q', 'h':
			p.i++
			return uint32(p.buf[p.i-1]), nil
		case 'r', 'j':
			p.i += 4
			return binary.LittleEndian.Uint32(p.buf[p.i-4:]), nil
		}
	}
	switch op {
	case 'q', 'h':
		a, err := p.bytes(1)
		if err != nil {
			return 0, err
		}
		return uint32(a[0]), nil
	case 'r', 'j':
		a, err := p.bytes(4)
		if err != nil {
			return 0, err
		}
		return binary.LittleEndian.Uint32(a), nil
	}
	text, _, err := p.line()
	if err != nil {
		return 0, err
	}
	idx, err := strconv.ParseUint(string(text), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("memo index %q is not a number below 2^32", text)
	}
	return uint32(idx), nil
}

// pushString interns a string; a cut one gets a suffix no real string has,
// so that it equals no key.
func (p *pickleReader) pushString(s []byte, cut bool) error {
	return p.push(p.b.str(s, cut))
}

// fromSurrogatePass reads what Python's pickler writes for a str: UTF-8,
// except that a lone surrogate (which Python's str may hold) is encoded as
// if it were a character, in three bytes. Each surrogate, like any other
// byte that is not UTF-8, becomes U+FFFD: what a JSON reader makes of the
// same string's \uDXXX escape.
func fromSurrogatePass(b []byte) []byte {
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		if b[i] == 0xed && i+2 < len(b) && b[i+1] >= 0xa0 && b[i+1] <= 0xbf && b[i+2] >= 0x80 && b[i+2] <= 0xbf {
			out = utf8.AppendRune(out, utf8.RuneError)
			i += 3
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		out = utf8.AppendRune(out, r)
		i += n
	}
	return out
}

// longValue reads n bytes of a little-endian two's complement integer.
func (p *pickleReader) longValue(n uint64) (value, error) {
	if n <= 8 {
		a, err := p.bytes(int(n))
		if err != nil {
			return value{}, err
		}
		var x uint64
		for j := len(a) - 1; j >= 0; j-- {
			x = x<<8 | uint64(a[j])
		}
		if n > 0 && n < 8 && a[n-1]&0x80 != 0 {
			x |= ^uint64(0) << (8 * n) // sign-extend
		}
		return intValue(int64(x)), nil
	}
	keep := min(n, maxLongBytes)
	a, err := p.bytes(int(keep))
	if err != nil {
		return value{}, err
	}
	low := binary.LittleEndian.Uint64(a)
	neg := a[keep-1]&0x80 != 0
	if n == keep {
		// Fits in 64 bits if the bytes above the low 8 are sign extension.
		ext := byte(0)
		if neg {
			ext = 0xff
		}
		fits := true
		for _, c := range a[8:] {
			fits = fits && c == ext
		}
		switch {
		case fits && !neg:
			return uintValue(low), nil
		case fits && neg && int64(low) < 0:
			return intValue(int64(low)), nil
		}
		return value{kind: kBig, bits: low, aux: p.b.strs.intern([]byte(bigText(a)))}, nil
	}
	if err := p.skip(n - keep); err != nil {
		return value{}, err
	}
	text := fmt.Sprintf("an integer of %d bytes", n)
	return value{kind: kBig, bits: low, aux: p.b.strs.intern([]byte(text))}, nil
}

// bigText writes a little-endian two's complement integer in decimal.
func bigText(le []byte) string {
	be := make([]byte, len(le))
	for j, c := range le {
		be[len(le)-1-j] = c
	}
	x := new(big.Int).SetBytes(be)
	if le[len(le)-1]&0x80 != 0 {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(8*len(le))))
	}
	return x.String()
}

// decimal reads the text of INT or LONG. INT's 00 and 01 are False and True.
func (p *pickleReader) decimal(text []byte, long bool) (value, error) {
	s := string(text)
	if !long {
		switch s {
		case "00":
			return value{kind: kFalse}, nil
		case "01":
			return trueValue, nil
		}
	} else if len(s) > 0 && s[len(s)-1] == 'L' {
		s = s[:len(s)-1]
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return intValue(i), nil
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return uintValue(u), nil
	}
	v, ok := bigDecimal(p.b, s)
	if !ok {
		return value{}, fmt.Errorf("%q is not a whole number", text)
	}
	return v, nil
}

// maxBigDigits bounds the integers parsed in full: parsing is quadratic in
// the digits, and no number in a snapshot has more than 20.
const maxBigDigits = 600

// bigDecimal reads an integer of any size written in decimal.
func bigDecimal(b *builder, s string) (value, bool) {
	digits := s
	if len(digits) > 0 && (digits[0] == '-' || digits[0] == '+') {
		digits = digits[1:]
	}
	if digits == "" {
		return value{}, false
	}
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return value{}, false
		}
	}
	if len(digits) > maxBigDigits {
		// Too long to parse whole; its low 64 bits (a stream handle's,
		// say) are still exact: arithmetic modulo 2^64 is.
		var low uint64
		for _, c := range []byte(digits) {
			low = low*10 + uint64(c-'0')
		}
		if s[0] == '-' {
			low = -low
		}
		text := fmt.Sprintf("an integer of %d digits", len(digits))
		return value{kind: kBig, bits: low, aux: b.strs.intern([]byte(text))}, true
	}
	x, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return value{}, false
	}
	low := new(big.Int).And(x, new(big.Int).SetUint64(math.MaxUint64)).Uint64()
	return value{kind: kBig, bits: low, aux: b.strs.intern([]byte(x.String()))}, true
}

// rawUnicodeEscape decodes what protocol 0 writes for a str: Latin-1 bytes
// with \uXXXX and \UXXXXXXXX escapes.
func rawUnicodeEscape(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == '\\' && i+1 < len(b) && (b[i+1] == 'u' || b[i+1] == 'U') {
			n := 4
			if b[i+1] == 'U' {
				n = 8
			}
			if i+2+n <= len(b) {
				if r, err := strconv.ParseUint(string(b[i+2:i+2+n]), 16, 32); err == nil {
					out = utf8.AppendRune(out, rune(r))
					i += 1 + n
					continue
				}
			}
		}
		out = utf8.AppendRune(out, rune(c))
	}
	return out
}

// pythonQuoted decodes a Python 2 string literal as STRING writes it.
func pythonQuoted(b []byte) ([]byte, error) {
	if len(b) < 2 || (b[0] != '\'' && b[0] != '"') || b[len(b)-1] != b[0] {
		return nil, fmt.Errorf("STRING %q is not quoted", b)
	}
	b = b[1 : len(b)-1]
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '\\' || i+1 == len(b) {
			out = append(out, c)
			continue
		}
		i++
		switch e := b[i]; e {
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case 'r':
			out = append(out, '\r')
		case 'x':
			if i+2 < len(b) {
				if v, err := strconv.ParseUint(string(b[i+1:i+3]), 16, 8); err == nil {
					out = append(out, byte(v))
					i += 2
					continue
				}
			}
			out = append(out, '\\', e)
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(b) && j < i+3 && b[j] >= '0' && b[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(string(b[i:j]), 8, 16)
			out = append(out, byte(v))
			i = j - 1
		default:
			out = append(out, e) // \\, \', \" and anything else
		}
	}
	return out, nil
}
