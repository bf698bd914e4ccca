package pytorch

import (
	"fmt"
	"math"
	"strconv"
)

// kind is the type of a decoded value.
type kind uint8

const (
	kNone    kind = iota + 1
	kFalse        // Python's False
	kTrue         // Python's True
	kInt          // bits holds an int64
	kUint         // bits holds a uint64 above math.MaxInt64
	kBig          // an integer outside 64 bits: aux is its decimal text (a string id), bits its low 64 bits
	kFloat        // bits holds math.Float64bits
	kStr          // aux is a string id
	kBytes        // bytes or bytearray; the content is not kept
	kSet          // a set or frozenset; the content is not kept
	kList         // a list or tuple: bits is a node reference
	kDict         // bits is a node reference
	kTag          // a frames list placed in a dict, reduced to its tag: aux is a tag id
	kFrame        // a frame dict placed in a list, reduced to its frame: aux is a frame id
	kSpooled      // memo only: a dict placed in a list, written to the spool and gone
	kEmpty        // a dict with no key the importer reads, placed in a list
)

// value is one decoded pickle or JSON value as the builder keeps it: a
// scalar in full, a string by id, a container by reference.
type value struct {
	bits uint64
	aux  uint32
	kind kind
}

var (
	noneValue = value{kind: kNone}
	trueValue = value{kind: kTrue}
)

func intValue(i int64) value { return value{kind: kInt, bits: uint64(i)} }

func uintValue(u uint64) value {
	if u > math.MaxInt64 {
		return value{kind: kUint, bits: u}
	}
	return value{kind: kInt, bits: u}
}

func floatValue(f float64) value { return value{kind: kFloat, bits: math.Float64bits(f)} }

// typeName names a value's type the way Python would, for messages.
func (v value) typeName() string {
	switch v.kind {
	case kNone:
		return "None"
	case kFalse, kTrue:
		return "bool"
	case kInt, kUint, kBig:
		return "int"
	case kFloat:
		return "float"
	case kStr:
		return "str"
	case kBytes:
		return "bytes"
	case kSet:
		return "set"
	case kList, kTag:
		return "list"
	case kDict, kFrame, kSpooled, kEmpty:
		return "dict"
	}
	return "value"
}

// describe prints a value for a message: a number or string as written
// (long strings cut), anything else by its type.
func (b *builder) describe(v value) string {
	switch v.kind {
	case kNone:
		return "None"
	case kFalse:
		return "False"
	case kTrue:
		return "True"
	case kInt:
		return strconv.FormatInt(int64(v.bits), 10)
	case kUint:
		return strconv.FormatUint(v.bits, 10)
	case kBig:
		if s := b.strs.get(v.aux); len(s) <= 40 {
			return s
		}
		return "a very large integer"
	case kFloat:
		return strconv.FormatFloat(math.Float64frombits(v.bits), 'g', -1, 64)
	case kStr:
		s := b.strs.get(v.aux)
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		return strconv.Quote(s)
	}
	return "a " + v.typeName()
}

// The conversions below read a field of a record the way the snapshot's
// schema wants it. A missing field or None reads as zero; anything else of
// the wrong type is an error naming the field.

// asUint reads an unsigned integer: an int, or a float holding a whole
// number.
func (b *builder) asUint(v value, key string) (uint64, error) {
	switch v.kind {
	case 0, kNone:
		return 0, nil
	case kInt:
		if int64(v.bits) >= 0 {
			return v.bits, nil
		}
	case kUint:
		return v.bits, nil
	case kBig:
		return 0, fmt.Errorf("%s is %s, which does not fit in 64 bits", key, b.strs.get(v.aux))
	case kFloat:
		if x := math.Float64frombits(v.bits); x >= 0 && x == math.Trunc(x) && x < 1<<64 {
			return uint64(x), nil
		}
	}
	return 0, fmt.Errorf("%s is %s, not an unsigned integer", key, b.describe(v))
}

// asInt reads a signed integer. A stream handle can be any pointer-sized
// value, so an integer of 64 bits or more keeps its low 64 bits.
func (b *builder) asInt(v value, key string) (int64, error) {
	switch v.kind {
	case 0, kNone:
		return 0, nil
	case kInt, kUint, kBig:
		return int64(v.bits), nil
	case kFloat:
		if x := math.Float64frombits(v.bits); x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return int64(x), nil
		}
	}
	return 0, fmt.Errorf("%s is %s, not an integer", key, b.describe(v))
}

// asFloat reads a finite number; ok is false for a missing field or None.
func (b *builder) asFloat(v value, key string) (f float64, ok bool, err error) {
	switch v.kind {
	case 0, kNone:
		return 0, false, nil
	case kInt:
		f = float64(int64(v.bits))
	case kUint:
		f = float64(v.bits)
	case kBig:
		var err error
		if f, err = strconv.ParseFloat(b.strs.get(v.aux), 64); err != nil {
			f = math.Inf(1) // beyond float64's range, or too long to write out
		}
	case kFloat:
		f = math.Float64frombits(v.bits)
	default:
		return 0, false, fmt.Errorf("%s is %s, not a number", key, b.describe(v))
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false, fmt.Errorf("%s is %s, not a finite number", key, b.describe(v))
	}
	return f, true, nil
}

// asStr reads a string; anything else reads as "".
func (b *builder) asStr(v value) string {
	if v.kind == kStr {
		return b.strs.get(v.aux)
	}
	return ""
}
