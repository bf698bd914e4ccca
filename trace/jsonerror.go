package trace

// The reasons for lines that are not JSON objects.
//
// decodeEvent's scanner only says whether a line is valid. For the few lines
// that are not, malformedReason finds the reason, in the very words of the
// github.com/valyala/fastjson validator and parser that bfcsim used before
// (MIT License, Copyright (c) 2018 Aliaksandr Valialkin), so that messages
// stay what they were. The validator is ported as a loop over an explicit
// stack of open objects and arrays instead of by recursion, so that a line of
// a million '[' gives an error instead of overflowing the goroutine stack.

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// maxReasonLevels bounds how many levels of nesting a reason spells out
// ("cannot parse array: cannot parse array value: ..." per level); deeper
// ones are summarised, so that a corrupt line cannot make a reason of
// gigabytes.
const maxReasonLevels = 10000

// malformedReason returns why line is not a JSON object of nesting depth at
// most maxJSONDepth, or "" if it is one.
func malformedReason(line []byte) string {
	if msg := jsonSyntaxError(line); msg != "" {
		return "malformed JSON: " + msg
	}
	i := skipWS(line, 0)
	if line[i] != '{' {
		return "expected a JSON object, found " + typeName(line[i])
	}
	return ""
}

// jsonSyntaxError returns fastjson's error for line: the validator's if the
// line is not JSON, else the parser's if it nests deeper than maxJSONDepth,
// else "".
func jsonSyntaxError(s []byte) string {
	v := validator{s: s, deepAt: -1}
	return v.run()
}

// validator walks a line as fastjson's validator does.
type validator struct {
	s    []byte
	open []byte // the open containers, outermost first: '{' or '['

	// The first value nested deeper than maxJSONDepth, found while
	// validating: its position and the containers around it.
	deepAt   int
	deepOpen []byte
}

const (
	wantValue = iota // a value starts here
	wantKey          // an object key starts here
	afterValue
)

func (v *validator) run() string {
	s := v.s
	n := len(s)
	i := skipWS(s, 0)
	state := wantValue
	for {
		switch state {
		case wantValue:
			if len(v.open)+1 > maxJSONDepth && v.deepAt < 0 {
				v.deepAt = i
				v.deepOpen = append([]byte(nil), v.open...)
			}
			if i >= n {
				return v.valueError("cannot parse empty string", i)
			}
			switch c := s[i]; c {
			case '{', '[':
				closer := byte('}')
				if c == '[' {
					closer = ']'
				}
				v.open = append(v.open, c)
				i = skipWS(s, i+1)
				switch {
				case i >= n && c == '{':
					return v.levelError("missing '}'", i)
				case i >= n:
					return v.levelError("missing ']'", i)
				case s[i] == closer:
					i++
					v.open = v.open[:len(v.open)-1]
					state = afterValue
				case c == '{':
					state = wantKey
				}
			case '"':
				end, sv, err := validateString(s, i+1)
				if err != "" {
					return v.valueError("cannot parse string: "+err, end)
				}
				if c, ok := firstControl(sv); ok {
					return v.valueError(fmt.Sprintf("string cannot contain control char 0x%02X", c), end)
				}
				i = end
				state = afterValue
			case 't', 'f', 'n':
				lit := "true"
				if c == 'f' {
					lit = "false"
				} else if c == 'n' {
					lit = "null"
				}
				if !hasPrefix(s[i:], lit) {
					return v.valueError(fmt.Sprintf("unexpected value found: %q", s[i:]), i)
				}
				i += len(lit)
				state = afterValue
			default:
				end, err := validateNumber(s, i)
				if err != "" {
					return v.valueError("cannot parse number: "+err, end)
				}
				i = end
				state = afterValue
			}

		case wantKey:
			if i >= n || s[i] != '"' {
				return v.levelError(`cannot find opening '"" for object key`, i)
			}
			var key []byte
			var end int
			if q := bytes.IndexAny(s[i+1:], "\"\\"); q < 0 {
				return v.levelError(`cannot parse object key: missing closing '"'`, i+1)
			} else if s[i+1+q] == '"' {
				key, end = s[i+1:i+1+q], i+q+2
			} else {
				var err string
				if end, key, err = validateString(s, i+1); err != "" {
					return v.levelError("cannot parse object key: "+err, end)
				}
			}
			if c, ok := firstControl(key); ok {
				return v.levelError(fmt.Sprintf("object key cannot contain control char 0x%02X", c), end)
			}
			i = skipWS(s, end)
			if i >= n || s[i] != ':' {
				return v.levelError("missing ':' after object key", i)
			}
			i = skipWS(s, i+1)
			state = wantValue

		case afterValue:
			if len(v.open) == 0 {
				if i = skipWS(s, i); i < n {
					return fmt.Sprintf("unexpected tail: %q", startEndString(s[i:]))
				}
				if v.deepAt >= 0 {
					v.open = v.deepOpen
					return v.valueError(fmt.Sprintf("too big depth for the nested JSON; it exceeds %d", maxJSONDepth), v.deepAt)
				}
				return ""
			}
			i = skipWS(s, i)
			isObject := v.open[len(v.open)-1] == '{'
			switch {
			case i >= n && isObject:
				return v.levelError("unexpected end of object", i)
			case i >= n:
				return v.levelError("unexpected end of array", i)
			case s[i] == ',':
				i = skipWS(s, i+1)
				state = wantValue
				if isObject {
					state = wantKey
				}
			case isObject && s[i] == '}', !isObject && s[i] == ']':
				i++
				v.open = v.open[:len(v.open)-1]
			case isObject:
				return v.levelError("missing ',' after object value", i)
			default:
				return v.levelError("missing ',' after array value", i)
			}
		}
	}
}

// valueError is the message for an error in a value inside the open
// containers; tail is where the unparsed rest of the line starts.
func (v *validator) valueError(msg string, tail int) string {
	return v.message(len(v.open), msg, tail)
}

// levelError is the message for an error in the syntax of the innermost open
// container itself.
func (v *validator) levelError(msg string, tail int) string {
	return v.message(len(v.open)-1, msg, tail)
}

// message wraps msg as fastjson's recursive validator does: every open
// container adds "cannot parse object: ", and the first inner ones
// "cannot parse object value: " (array for arrays) too.
func (v *validator) message(inner int, msg string, tail int) string {
	var b strings.Builder
	b.WriteString("cannot parse JSON: ")
	for k, c := range v.open {
		if k == maxReasonLevels/2 && len(v.open) > maxReasonLevels {
			fmt.Fprintf(&b, "[%d more levels] ", len(v.open)-maxReasonLevels)
		}
		if k >= maxReasonLevels/2 && k < len(v.open)-maxReasonLevels/2 {
			continue
		}
		if c == '{' {
			b.WriteString("cannot parse object: ")
			if k < inner {
				b.WriteString("cannot parse object value: ")
			}
		} else {
			b.WriteString("cannot parse array: ")
			if k < inner {
				b.WriteString("cannot parse array value: ")
			}
		}
	}
	b.WriteString(msg)
	fmt.Fprintf(&b, "; unparsed tail: %q", startEndString(v.s[tail:]))
	return b.String()
}

// startEndString shortens s for a message, as fastjson does.
func startEndString(s []byte) string {
	if len(s) <= 80 {
		return string(s)
	}
	return string(s[:40]) + "..." + string(s[len(s)-40:])
}

func firstControl(s []byte) (byte, bool) {
	for _, c := range s {
		if c < 0x20 {
			return c, true
		}
	}
	return 0, false
}

// validateString checks the string whose content starts at s[i], as
// fastjson's validateString does, and returns the index after it, the part
// of its content after its last escape sequence (where control characters
// are checked), and an error.
func validateString(s []byte, i int) (end int, rest []byte, err string) {
	content := s[i:]
	if q := bytes.IndexByte(content, '"'); q >= 0 && bytes.IndexByte(content[:q], '\\') < 0 {
		return i + q + 1, content[:q], ""
	}
	q := rawStringEnd(content)
	if q < 0 {
		return len(s), content, `missing closing '"'`
	}
	end = i + q + 1
	rs := content[:q]
	for {
		n := bytes.IndexByte(rs, '\\')
		if n < 0 {
			return end, rs, ""
		}
		n++
		if n >= len(rs) {
			return end, rs, fmt.Sprintf("BUG: parseRawString returned invalid string with trailing backslash: %q", rs)
		}
		ch := rs[n]
		rs = rs[n+1:]
		switch ch {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if len(rs) < 4 {
				return end, rs, fmt.Sprintf(`too short escape sequence: \u%s`, rs)
			}
			xs := string(rs[:4])
			if _, perr := strconv.ParseUint(xs, 16, 16); perr != nil {
				return end, rs, fmt.Sprintf(`invalid escape sequence \u%s: %s`, xs, perr)
			}
			rs = rs[4:]
		default:
			return end, rs, fmt.Sprintf(`unknown escape sequence \%c`, ch)
		}
	}
}

// rawStringEnd returns the index of the quote that ends the string content
// s, or -1: the first quote after an even number of backslashes.
func rawStringEnd(s []byte) int {
	off := 0
	for {
		n := bytes.IndexByte(s, '"')
		if n < 0 {
			return -1
		}
		k := n
		for k > 0 && s[k-1] == '\\' {
			k--
		}
		if (n-k)%2 == 0 {
			return off + n
		}
		s = s[n+1:]
		off += n + 1
	}
}

// validateNumber checks the number at s[i:] as fastjson's validateNumber
// does and returns the index after it, or where the error is.
func validateNumber(s []byte, i int) (int, string) {
	n := len(s)
	if i >= n {
		return i, "zero-length number"
	}
	if s[i] == '-' {
		i++
		if i >= n {
			return i, "missing number after minus"
		}
	}
	start := i
	for i < n && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == start {
		return start, fmt.Sprintf("expecting 0..9 digit, got %c", s[start])
	}
	if s[start] == '0' && i-start != 1 {
		return start, "unexpected number starting from 0"
	}
	if i >= n {
		return n, ""
	}
	if s[i] == '.' {
		i++
		if i >= n {
			return i, "missing fractional part"
		}
		start = i
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return start, fmt.Sprintf("expecting 0..9 digit in fractional part, got %c", s[start])
		}
		if i >= n {
			return n, ""
		}
	}
	if s[i] == 'e' || s[i] == 'E' {
		i++
		if i >= n {
			return i, "missing exponent part"
		}
		if s[i] == '-' || s[i] == '+' {
			i++
			if i >= n {
				return i, "missing exponent part"
			}
		}
		start = i
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return start, fmt.Sprintf("expecting 0..9 digit in exponent part, got %c", s[start])
		}
	}
	return i, ""
}
