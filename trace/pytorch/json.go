package pytorch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// readJSON walks a snapshot written as JSON token by token, feeding the
// same builder as the pickle reader: each object and array is reduced when
// it is closed, so nothing of the document is kept but what the importer
// reads. The tokenizer (jsontext) bounds nesting depth; every token costs
// O(1).
func readJSON(r io.Reader, b *builder) (value, error) {
	dec := jsontext.NewDecoder(r,
		jsontext.AllowDuplicateNames(true), // the last one wins, as in Python
		jsontext.AllowInvalidUTF8(true))
	type level struct {
		c       value
		dict    bool
		key     value
		haveKey bool
	}
	var stack []level
	var scratch []byte
	// place puts a finished value into its parent; done says it was the
	// document itself.
	place := func(v value) (done bool, err error) {
		n := len(stack)
		if n == 0 {
			return true, nil
		}
		l := &stack[n-1]
		if l.dict {
			l.haveKey = false
			return false, b.setItem(l.c, l.key, v)
		}
		return false, b.appendItem(l.c, v)
	}
	for {
		var v value
		switch k := dec.PeekKind(); k {
		case '{', '[':
			if _, err := dec.ReadToken(); err != nil {
				return value{}, jsonError(err)
			}
			var err error
			if k == '{' {
				v, err = b.newDict()
			} else {
				v, err = b.newList()
			}
			if err != nil {
				return value{}, err
			}
			b.hold(v) // until it is placed
			stack = append(stack, level{c: v, dict: k == '{'})
			continue
		case '}', ']':
			if _, err := dec.ReadToken(); err != nil {
				return value{}, jsonError(err)
			}
			v = stack[len(stack)-1].c
			stack = stack[:len(stack)-1]
		case '"':
			// A token, not a raw value, so that a lone surrogate escape
			// (which Python writes) reads as U+FFFD, as AllowInvalidUTF8 asks.
			tok, err := dec.ReadToken()
			if err != nil {
				return value{}, jsonError(err)
			}
			scratch = append(scratch[:0], tok.String()...)
			cut := len(scratch) > maxKeptString
			if cut {
				scratch = scratch[:maxKeptString]
			}
			v = b.str(scratch, cut)
			if n := len(stack); n > 0 && stack[n-1].dict && !stack[n-1].haveKey {
				stack[n-1].key, stack[n-1].haveKey = v, true
				continue
			}
		case '0':
			raw, err := dec.ReadValue()
			if err != nil {
				return value{}, jsonError(err)
			}
			v = jsonNumber(b, raw)
		case 't', 'f', 'n':
			if _, err := dec.ReadToken(); err != nil {
				return value{}, jsonError(err)
			}
			switch k {
			case 't':
				v = trueValue
			case 'f':
				v = value{kind: kFalse}
			default:
				v = noneValue
			}
		default:
			_, err := dec.ReadToken() // reports what is wrong
			if err == nil {
				err = fmt.Errorf("unexpected %v", k)
			}
			return value{}, jsonError(err)
		}
		done, err := place(v)
		if err != nil {
			return value{}, fmt.Errorf("the JSON snapshot at byte %d: %w", dec.InputOffset(), err)
		}
		if done {
			return v, nil
		}
		b.drop(v)
	}
}

func jsonError(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the JSON snapshot: the file ends inside it")
	}
	var rerr readError
	if errors.As(err, &rerr) {
		return rerr.err
	}
	return fmt.Errorf("reading the JSON snapshot: %w", err)
}

// jsonNumber reads a number as written: integers exactly, at any size.
func jsonNumber(b *builder, raw []byte) value {
	if !bytes.ContainsAny(raw, ".eE") {
		s := string(raw)
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return intValue(i)
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return uintValue(u)
		}
		if v, ok := bigDecimal(b, s); ok {
			return v
		}
	}
	f, _ := strconv.ParseFloat(string(raw), 64) // out of range reads as ±Inf, as Python's json does
	return floatValue(f)
}
