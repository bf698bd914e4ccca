package trace

// JSON scanning primitives for decode.go: they check the syntax of JSON
// values in a line, as github.com/valyala/fastjson accepts it, without
// building anything, and decode strings. The rules for strings and
// appendUnescaped follow fastjson's code (MIT License, Copyright (c) 2018
// Aliaksandr Valialkin).

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// strSpecial marks the bytes that end the fast scan of a string's content:
// the closing quote, a backslash, and the control characters.
var strSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'] = true
	t['\\'] = true
	return t
}()

// skipWS returns the index of the first byte of line at or after i that is
// not JSON whitespace.
func skipWS(line []byte, i int) int {
	for i < len(line) {
		switch line[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString checks the string whose content starts at line[i], just after
// its opening quote, and returns the index after its closing quote and
// whether it holds escapes. ok is false if it is not a valid JSON string (in
// fastjson's sense: raw control characters before the last escape are
// allowed).
func scanString(line []byte, i int) (end int, esc, ok bool) {
	ctl := false // a control character since the last escape
	for {
		// Skip the plain bytes, eight at a time while there are eight.
		for i+8 <= len(line) {
			if m := specialBytes(binary.LittleEndian.Uint64(line[i:])); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		for i < len(line) && !strSpecial[line[i]] {
			i++
		}
		if i >= len(line) {
			return i, esc, false
		}
		switch line[i] {
		case '"':
			return i + 1, esc, !ctl
		case '\\':
			esc, ctl = true, false
			if i+1 >= len(line) {
				return i, esc, false
			}
			switch line[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(line) {
					return i, esc, false
				}
				if _, ok := hex4(line[i+2 : i+6]); !ok {
					return i, esc, false
				}
				i += 6
			default:
				return i, esc, false
			}
		default:
			ctl = true
			i++
		}
	}
}

// specialBytes returns a word with the high bit set in the bytes of x, eight
// bytes of a string in little-endian order, that are a quote, a backslash or
// a control character. Bits above the lowest one may be set wrongly (by a
// borrow); the lowest one is exact.
func specialBytes(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	b := x ^ (ones * '\\')
	return ((q-ones)&^q | (b-ones)&^b | (x-ones*0x20)&^x) & highs
}

// scanNumber checks the JSON number at line[i:] and returns the index after
// it. The byte after it is checked by the caller.
func scanNumber(line []byte, i int) (int, bool) {
	n := len(line)
	if i < n && line[i] == '-' {
		i++
	}
	start := i
	for i < n && line[i] >= '0' && line[i] <= '9' {
		i++
	}
	if i == start || line[start] == '0' && i-start != 1 {
		return i, false
	}
	if i < n && line[i] == '.' {
		i++
		start = i
		for i < n && line[i] >= '0' && line[i] <= '9' {
			i++
		}
		if i == start {
			return i, false
		}
	}
	if i < n && (line[i] == 'e' || line[i] == 'E') {
		i++
		if i < n && (line[i] == '+' || line[i] == '-') {
			i++
		}
		start = i
		for i < n && line[i] >= '0' && line[i] <= '9' {
			i++
		}
		if i == start {
			return i, false
		}
	}
	return i, true
}

// numberEnds marks the bytes that may follow a JSON number in valid JSON.
var numberEnds = func() (t [256]bool) {
	for _, c := range []byte{',', '}', ']', ' ', '\t', '\n', '\r'} {
		t[c] = true
	}
	return t
}()

// skipValue checks the JSON value that starts at line[i], a value of the
// top-level object (nesting depth 2), and returns the index after it.
func skipValue(line []byte, i int) (int, bool) {
	switch c := line[i]; c {
	case '"':
		end, _, ok := scanString(line, i+1)
		return end, ok
	case '{', '[':
		return skipNested(line, i)
	case 't':
		return i + 4, hasPrefix(line[i:], "true")
	case 'f':
		return i + 5, hasPrefix(line[i:], "false")
	case 'n':
		return i + 4, hasPrefix(line[i:], "null")
	}
	return scanNumber(line, i)
}

func hasPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

// skipNested checks the object or array that starts at line[i], at nesting
// depth 2, and returns the index after it. It walks the nesting with a
// stack of bits (1 for an object) rather than by recursion, so that its
// cost does not depend on the depth.
func skipNested(line []byte, i int) (int, bool) {
	var (
		objects [(maxJSONDepth + 63) / 64]uint64 // bit k: open container k is an object
		open    = 0                              // containers open; the next value is at depth 2+open
		n       = len(line)
		ok      bool
	)
	for {
		// A value at depth 2+open starts at line[i].
		if i >= n || 2+open > maxJSONDepth {
			return i, false
		}
		closed := true // whether the value is complete
		switch c := line[i]; c {
		case '{':
			objects[open/64] |= 1 << (open % 64)
			open++
			if i = skipWS(line, i+1); i < n && line[i] == '}' {
				i++
				open--
			} else if i, ok = skipKey(line, i); !ok {
				return i, false
			} else {
				closed = false
			}
		case '[':
			objects[open/64] &^= 1 << (open % 64)
			open++
			if i = skipWS(line, i+1); i < n && line[i] == ']' {
				i++
				open--
			} else {
				closed = false
			}
		default:
			if i, ok = skipValue(line, i); !ok {
				return i, false
			}
		}
		for closed {
			if open == 0 {
				return i, true
			}
			if i = skipWS(line, i); i >= n {
				return i, false
			}
			isObject := objects[(open-1)/64]&(1<<((open-1)%64)) != 0
			switch {
			case line[i] == ',':
				i = skipWS(line, i+1)
				if isObject {
					if i, ok = skipKey(line, i); !ok {
						return i, false
					}
				}
				closed = false
			case isObject && line[i] == '}', !isObject && line[i] == ']':
				i++
				open--
			default:
				return i, false
			}
		}
	}
}

// skipKey checks an object key and its colon at line[i:] and returns the
// index of the value after them.
func skipKey(line []byte, i int) (int, bool) {
	if i >= len(line) || line[i] != '"' {
		return i, false
	}
	i, _, ok := scanString(line, i+1)
	if !ok {
		return i, false
	}
	if i = skipWS(line, i); i >= len(line) || line[i] != ':' {
		return i, false
	}
	return skipWS(line, i+1), true
}

// typeName names the type of the valid JSON value that starts with c, as
// error messages spell it.
func typeName(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't':
		return "true"
	case 'f':
		return "false"
	case 'n':
		return "null"
	}
	return "number"
}

// hex4 decodes four hex digits.
func hex4(b []byte) (rune, bool) {
	var x rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		x = x<<4 | rune(c)
	}
	return x, true
}

// appendUnescaped appends the content of a valid JSON string, raw (without
// its quotes), with its escapes decoded, to dst. Surrogates are decoded best
// effort, as fastjson does: a high surrogate followed by another \uXXXX is
// decoded with it as a pair (U+FFFD if they do not pair), one followed by
// anything else is kept as its six characters.
func appendUnescaped(dst, raw []byte) []byte {
	for {
		n := bytes.IndexByte(raw, '\\')
		if n < 0 || n+1 >= len(raw) {
			return append(dst, raw...)
		}
		dst = append(dst, raw[:n]...)
		ch := raw[n+1]
		raw = raw[n+2:]
		switch ch {
		case '"', '\\', '/':
			dst = append(dst, ch)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			if len(raw) < 4 {
				dst = append(dst, `\u`...)
				break
			}
			x, ok := hex4(raw)
			if !ok {
				dst = append(dst, `\u`...)
				break
			}
			xs := raw[:4]
			raw = raw[4:]
			if !utf16.IsSurrogate(x) {
				dst = utf8.AppendRune(dst, x)
				break
			}
			var x1 rune
			if len(raw) >= 6 && raw[0] == '\\' && raw[1] == 'u' {
				x1, ok = hex4(raw[2:])
			} else {
				ok = false
			}
			if !ok {
				dst = append(append(dst, `\u`...), xs...)
				break
			}
			dst = utf8.AppendRune(dst, utf16.DecodeRune(x, x1))
			raw = raw[6:]
		default:
			dst = append(dst, '\\', ch)
		}
	}
}

// valueText is the text error messages show for the valid JSON value v: its
// text without whitespace, a string's escapes decoded and written again the
// way Go quotes strings when it has characters that need it.
func valueText(v []byte) string {
	if v[0] == '"' {
		s := appendUnescaped(nil, v[1:len(v)-1])
		if bytes.IndexByte(s, '"') >= 0 || bytes.IndexByte(s, '\\') >= 0 || hasControl(s) {
			return strconv.Quote(string(s))
		}
		return `"` + string(s) + `"`
	}
	return string(compactJSON(nil, v))
}

func hasControl(s []byte) bool {
	for _, c := range s {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// compactJSON appends the valid JSON text v to dst without the whitespace
// between its tokens.
func compactJSON(dst, v []byte) []byte {
	inString := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case inString:
			if c == '\\' {
				dst = append(dst, c)
				i++
				c = v[i]
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		}
		dst = append(dst, c)
	}
	return dst
}

// b2s views b as a string without copying; the string must not outlive b's
// content.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
