package trace

import (
	"encoding/binary"
	"math/bits"
)

// Most lines of a large trace are allocs and frees exactly as Writer (and so
// every importer and generator) writes them:
//
//	{"op":"alloc","id":7,"size":4096,"t":12,"stream":0,"tag":"matmul","stack":3,"addr":140737488355328}
//	{"op":"free","id":7,"t":30}
//
// decodeCanonical reads those lines in one pass with no key lookups; any
// other line, or one with a field it does not know, an escape, a non-ASCII
// byte, a space or an unusual number, it leaves to scanEvent, which gives
// the same event for every line decodeCanonical accepts (FuzzCanonical).

var (
	canonAlloc = newCanonKey(`{"op":"alloc","id":`)
	canonFree  = newCanonKey(`{"op":"free","id":`)
	canonSize  = newCanonKey(`,"size":`)
	canonTag   = newCanonKey(`,"tag":"`)
	canonAddr  = newCanonKey(`,"addr":`)
	canonT     = newCanonKey(`,"t":`)
	canonStrm  = newCanonKey(`,"stream":`)
	canonStack = newCanonKey(`,"stack":`)
)

// canonKey is a piece of a canonical line's fixed text, with its first
// eight bytes as a word: a line is tested for it with one load and one
// comparison, rather than a call to compare bytes.
type canonKey struct {
	text    string
	w, mask uint64 // the first (up to) eight bytes, little-endian, and which count
}

func newCanonKey(text string) canonKey {
	k := canonKey{text: text}
	for i := range min(len(text), 8) {
		k.w |= uint64(text[i]) << (8 * i)
		k.mask |= 0xff << (8 * i)
	}
	return k
}

// at reports whether line[i:] starts with k.
func (k *canonKey) at(line []byte, i int) bool {
	end := i + len(k.text)
	if i+8 > len(line) {
		return end <= len(line) && string(line[i:end]) == k.text
	}
	if binary.LittleEndian.Uint64(line[i:])&k.mask != k.w {
		return false
	}
	return len(k.text) <= 8 || end <= len(line) && string(line[i+8:end]) == k.text[8:]
}

// decodeCanonical decodes line into *ev (which must be zero) if it is a
// canonical alloc or free, and reports whether it was; it leaves *ev zero
// if not. It accepts only valid lines.
func (d *decoder) decodeCanonical(ev *Event, line []byte) bool {
	if end, ok := d.canonical(ev, line); !ok || end != len(line) {
		*ev = Event{}
		return false
	}
	return true
}

// canonicalLine decodes the line that buf starts with, as decodeCanonical
// does, and returns its length (without the newline that ends it, if
// any), or -1, leaving *ev zero, if it is not canonical. A chunk of lines
// is decoded this way without first looking for each line's end: the
// fixed keys, the digits and the plain run of a tag are none of them a
// newline, so a canonical line ends at its closing brace, which must be
// followed by a newline or the end of buf.
func (d *decoder) canonicalLine(ev *Event, buf []byte) int {
	end, ok := d.canonical(ev, buf)
	if !ok || end < len(buf) && buf[end] != '\n' {
		*ev = Event{}
		return -1
	}
	return end
}

// canonical decodes the canonical alloc or free at the start of line and
// returns the index after its closing brace; it may leave *ev partly
// filled if it fails.
func (d *decoder) canonical(ev *Event, line []byte) (int, bool) {
	switch {
	case canonAlloc.at(line, 0):
		i := len(canonAlloc.text)
		id, i, ok := canonUint(line, i)
		if !ok || !canonSize.at(line, i) {
			return 0, false
		}
		size, i, ok := canonUint(line, i+len(canonSize.text))
		if !ok {
			return 0, false
		}
		if i, ok = canonTimeStream(ev, line, i); !ok {
			return 0, false
		}
		if canonTag.at(line, i) {
			i += len(canonTag.text)
			start := i
			for i+8 <= len(line) && !stopsString(binary.LittleEndian.Uint64(line[i:])) {
				i += 8
			}
			for i < len(line) {
				c := line[i]
				if c == '"' {
					break
				}
				if c < 0x20 || c == '\\' || c >= 0x80 {
					return 0, false
				}
				i++
			}
			if i == len(line) {
				return 0, false
			}
			ev.Tag = d.intern(line[start:i])
			i++
		}
		if canonStack.at(line, i) {
			var stack uint64
			if stack, i, ok = canonUint(line, i+len(canonStack.text)); !ok || stack > 1<<32-1 {
				return 0, false
			}
			ev.Stack = uint32(stack)
		}
		if canonAddr.at(line, i) {
			var addr uint64
			if addr, i, ok = canonUint(line, i+len(canonAddr.text)); !ok {
				return 0, false
			}
			ev.Addr = addr
			ev.Flags |= HasAddr
		}
		if i >= len(line) || line[i] != '}' {
			return 0, false
		}
		ev.Op, ev.ID, ev.Size = OpAlloc, id, size
		return i + 1, true
	case canonFree.at(line, 0):
		id, i, ok := canonUint(line, len(canonFree.text))
		if !ok {
			return 0, false
		}
		if i, ok = canonTimeStream(ev, line, i); !ok {
			return 0, false
		}
		if i >= len(line) || line[i] != '}' {
			return 0, false
		}
		ev.Op, ev.ID = OpFree, id
		return i + 1, true
	}
	return 0, false
}

// canonTimeStream reads the optional t (a whole number below 2^53, which a
// float64 holds exactly) and stream (not negative) at line[i:] into ev, and
// returns the index after them. It leaves ev zero when it fails.
func canonTimeStream(ev *Event, line []byte, i int) (int, bool) {
	if canonT.at(line, i) {
		t, j, ok := canonUint(line, i+len(canonT.text))
		if !ok || t >= maxExactFloat {
			return i, false
		}
		ev.T, ev.Flags, i = float64(t), ev.Flags|HasT, j
	}
	if canonStrm.at(line, i) {
		st, j, ok := canonUint(line, i+len(canonStrm.text))
		if !ok {
			return i, false
		}
		ev.Stream, ev.Flags, i = int64(st), ev.Flags|HasStream, j
	}
	return i, true
}

// canonUint reads the integer at line[i:] as Writer writes one: 1 to 18
// digits with no leading zero, or 0, so below 2^63 without a check. It
// returns the value and the index after it. i must be at least 8: a number
// in a canonical line always follows its key.
func canonUint(line []byte, i int) (uint64, int, bool) {
	if i+8 <= len(line) {
		// Most numbers (ids, sizes) are shorter than eight digits: the
		// word that finds their end holds them whole.
		w := binary.LittleEndian.Uint64(line[i:])
		if n := leadingDigits(w); n < 8 {
			if n == 0 || byte(w) == '0' && n > 1 {
				return 0, i, false
			}
			return digitsWord(w<<(8*(8-n)), n), i + n, true
		}
	}
	j := i
	for len(line) >= 8 && j-i < 19 {
		var w uint64
		if j+8 <= len(line) {
			w = binary.LittleEndian.Uint64(line[j:])
		} else {
			// The line's last eight bytes, shifted to start at j: the
			// bytes past the end read as zeros, which are not digits.
			w = binary.LittleEndian.Uint64(line[len(line)-8:]) >> (8 * (j - (len(line) - 8)))
		}
		k := leadingDigits(w)
		j += k
		if k < 8 {
			break
		}
	}
	for len(line) < 8 && j < len(line) && j-i < 19 && line[j]-'0' <= 9 {
		j++
	}
	n := j - i
	if n == 0 || n > 18 || (line[i] == '0' && n > 1) {
		return 0, i, false
	}
	// Eight digits at a time, the first group the short one: a chain of
	// multiply-adds digit by digit would be most of a line's decoding.
	var v uint64
	for k := i + (n-1)%8 + 1; ; k += 8 {
		v = v*1e8 + digits8(line, k, min(k-i, 8))
		if k == j {
			return v, j, true
		}
	}
}

// Eight bytes at a time, as a little-endian word: the masks below look at
// every byte at once.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// leadingDigits returns how many of w's bytes, from its first, are ASCII
// digits before one that is not (8 if all are). A byte is a digit if its
// high nibble is 3 and stays 3 when 6 is added (0x30 to 0x39). The sums
// carry from one byte into the next only out of a byte of 0xfa or more,
// which is not a digit, and so only past the first byte that is not.
func leadingDigits(w uint64) int {
	const nibbles = 0xf0 * ones
	m := (w&nibbles ^ 0x30*ones) | ((w+6*ones)&nibbles ^ 0x30*ones) // 0 for digits
	m = (m&(0x7f*ones) + 0x7f*ones | m) & highs                     // high bit for the rest
	return bits.TrailingZeros64(m) / 8
}

// stopsString reports whether any of w's bytes ends the plain run of a
// canonical string: a quote, a backslash, a control byte or a non-ASCII
// byte. It is exact as to whether there is one, not which.
func stopsString(w uint64) bool {
	hasZero := func(v uint64) uint64 { return (v - ones) &^ v & highs }
	return (w&highs | (w-0x20*ones)&^w&highs | hasZero(w^'"'*ones) | hasZero(w^'\\'*ones)) != 0
}

// digits8 returns the value of the n digits (1 to 8) that end at
// line[end-1], reading the eight bytes before end as one word: the bytes
// that are not digits of the number are taken as zeros, each byte's digit
// is paired with its neighbour's, the pairs into fours, the fours into the
// whole, with three multiplications.
func digits8(line []byte, end, n int) uint64 {
	return digitsWord(binary.LittleEndian.Uint64(line[end-8:end]), n)
}

// digitsWord is digits8 on the word already loaded: the number's n digits
// are its last (most significant) n bytes.
func digitsWord(w uint64, n int) uint64 {
	keep := ^uint64(0) << (8 * (8 - n)) // the last n bytes, the number's
	w = w&keep | 0x3030303030303030&^keep
	w -= 0x3030303030303030
	w = w*10 + w>>8 // byte 2k: the digits 2k and 2k+1 as a number
	const lo = 0x000000ff000000ff
	w = ((w&lo)*(100+1000000<<32) + (w>>16&lo)*(1+10000<<32)) >> 32
	return w
}
