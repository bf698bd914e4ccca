package pytorch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"
)

// A snapshot pickle holds plain data only. Before it is decoded its opcodes
// are walked once and every opcode that can name or call code is refused:
// unpickling runs whatever a pickle asks for, and a file someone sends you
// should not be able to. Decoding is then left to gopickle, whose values
// are turned into plain Go ones (map[string]any, []any, string, int64,
// *big.Int, float64, bool, []byte, nil).

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

// argument says how many bytes follow an opcode: a fixed count, a length
// prefix of lenBytes bytes, or lines ended by '\n'.
type argument struct {
	fixed    int
	lenBytes int
	lines    int
}

// opcodeArgs lists every opcode of pickle protocols 0 to 5 and its argument.
var opcodeArgs = map[byte]argument{
	'(': {}, '.': {}, '0': {}, '1': {}, '2': {}, 'N': {}, 'R': {}, 'a': {}, 'b': {},
	'd': {}, '}': {}, 'e': {}, 'l': {}, ']': {}, 'o': {}, 's': {}, 't': {}, ')': {}, 'u': {},
	'Q': {},
	'F': {lines: 1}, 'I': {lines: 1}, 'L': {lines: 1}, 'P': {lines: 1}, 'S': {lines: 1},
	'V': {lines: 1}, 'g': {lines: 1}, 'p': {lines: 1},
	'c': {lines: 2}, 'i': {lines: 2},
	'J': {fixed: 4}, 'K': {fixed: 1}, 'M': {fixed: 2}, 'h': {fixed: 1}, 'j': {fixed: 4},
	'q': {fixed: 1}, 'r': {fixed: 4}, 'G': {fixed: 8},
	'T': {lenBytes: 4}, 'U': {lenBytes: 1}, 'X': {lenBytes: 4}, 'B': {lenBytes: 4}, 'C': {lenBytes: 1},
	'\x80': {fixed: 1}, '\x81': {}, '\x82': {fixed: 1}, '\x83': {fixed: 2}, '\x84': {fixed: 4},
	'\x85': {}, '\x86': {}, '\x87': {}, '\x88': {}, '\x89': {},
	'\x8a': {lenBytes: 1}, '\x8b': {lenBytes: 4},
	'\x8c': {lenBytes: 1}, '\x8d': {lenBytes: 8}, '\x8e': {lenBytes: 8},
	'\x8f': {}, '\x90': {}, '\x91': {}, '\x92': {}, '\x93': {}, '\x94': {},
	'\x95': {fixed: 8}, // FRAME: the frame's length; its contents are opcodes like any others
	'\x96': {lenBytes: 8}, '\x97': {}, '\x98': {},
}

// checkPickle walks the opcodes of a pickle and refuses any that could run
// code, naming it and its offset.
func checkPickle(data []byte) error {
	for i := 0; i < len(data); {
		op := data[i]
		arg, ok := opcodeArgs[op]
		if !ok {
			return fmt.Errorf("not a pickle, or a damaged one: unknown opcode 0x%02x at byte %d", op, i)
		}
		if name, bad := codeOpcodes[op]; bad {
			return fmt.Errorf("the pickle asks to run code (opcode %s at byte %d); a memory snapshot holds only plain data, so it is refused", name, i)
		}
		at := i
		i++
		switch {
		case arg.lines > 0:
			for range arg.lines {
				n := bytes.IndexByte(data[i:], '\n')
				if n < 0 {
					return fmt.Errorf("truncated pickle: opcode 0x%02x at byte %d has no end of line", op, at)
				}
				i += n + 1
			}
		case arg.lenBytes > 0:
			if len(data)-i < arg.lenBytes {
				return fmt.Errorf("truncated pickle at byte %d", at)
			}
			var n uint64
			switch arg.lenBytes {
			case 1:
				n = uint64(data[i])
			case 4:
				n = uint64(binary.LittleEndian.Uint32(data[i:]))
			case 8:
				n = binary.LittleEndian.Uint64(data[i:])
			}
			i += arg.lenBytes
			if n > uint64(len(data)-i) {
				return fmt.Errorf("truncated pickle: opcode 0x%02x at byte %d wants %d bytes, %d remain", op, at, n, len(data)-i)
			}
			i += int(n)
		default:
			if len(data)-i < arg.fixed {
				return fmt.Errorf("truncated pickle at byte %d", at)
			}
			if op == '\x95' && binary.LittleEndian.Uint64(data[i:]) > uint64(len(data)-i-arg.fixed) {
				return fmt.Errorf("truncated pickle: the frame at byte %d is longer than the file", at)
			}
			i += arg.fixed
		}
		if op == '.' {
			return nil
		}
	}
	return errors.New("truncated pickle: no STOP opcode")
}

// decodePickle checks and decodes a pickle of plain data.
func decodePickle(data []byte) (v any, err error) {
	if err := checkPickle(data); err != nil {
		return nil, err
	}
	defer func() {
		// The decoder trusts what it reads more than a damaged file deserves.
		if p := recover(); p != nil {
			v, err = nil, fmt.Errorf("damaged pickle: %v", p)
		}
	}()
	u := pickle.NewUnpickler(bytes.NewReader(data))
	refuse := func(what string) error {
		return fmt.Errorf("the pickle asks for %s; a memory snapshot holds only plain data, so it is refused", what)
	}
	u.FindClass = func(module, name string) (any, error) { return nil, refuse("class " + module + "." + name) }
	u.PersistentLoad = func(any) (any, error) { return nil, refuse("a persistent object") }
	u.GetExtension = func(int) (any, error) { return nil, refuse("an extension") }
	u.NextBuffer = func() (any, error) { return nil, refuse("an out-of-band buffer") }
	v, err = u.Load()
	if err != nil {
		return nil, fmt.Errorf("decoding the pickle: %w", err)
	}
	return plain(v)
}

// plain turns gopickle's values into plain Go ones.
func plain(v any) (any, error) {
	switch x := v.(type) {
	case nil, string, bool, float64, int64, []byte:
		return x, nil
	case int:
		return int64(x), nil
	case *big.Int:
		if x.IsInt64() {
			return x.Int64(), nil
		}
		return x, nil
	case *types.Dict:
		m := make(map[string]any, len(*x))
		for _, e := range *x {
			k, ok := e.Key.(string)
			if !ok {
				// Keys other than strings (none in a snapshot) are kept as text.
				k = fmt.Sprint(e.Key)
			}
			pv, err := plain(e.Value)
			if err != nil {
				return nil, err
			}
			m[k] = pv
		}
		return m, nil
	case *types.List:
		return plainSlice(*x)
	case *types.Tuple:
		return plainSlice(*x)
	case *types.ByteArray:
		return []byte(*x), nil
	case *types.Set:
		return nil, nil // no set in a snapshot carries anything bfcsim reads
	case *types.FrozenSet:
		return nil, nil
	}
	return nil, fmt.Errorf("the pickle holds a %T, which a memory snapshot does not", v)
}

func plainSlice(xs []any) (any, error) {
	out := make([]any, len(xs))
	for i, x := range xs {
		p, err := plain(x)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}
