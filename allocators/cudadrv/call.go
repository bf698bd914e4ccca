package cudadrv

import (
	"fmt"
	"strings"
)

// Call is one driver call as Fake records it. The real driver's errors
// name their call the same way, so a message reads alike from both.
type Call struct {
	// Name is the driver API function, without its _v2 suffix
	// ("cuMemMap").
	Name string
	// Args are the Driver method's arguments in order (cuMemMap: ptr,
	// size, handle). Calls without arguments have none.
	Args []uint64
	// Ret is the method's first result on success: the pointer, handle,
	// granularity, or free bytes. Zero otherwise.
	Ret uint64
	// Err is what the call returned.
	Err error
}

// String is the call as C would write it, with its outcome:
// "cuMemMap(0x600000000000, 2097152, 0x1) = CUDA_ERROR_INVALID_VALUE".
func (c Call) String() string {
	s := callString(c.Name, c.Args...)
	if c.Err != nil {
		if e, ok := c.Err.(*cuError); ok {
			return s + " = " + e.name
		}
		return s + " = " + c.Err.Error()
	}
	return s
}

// CUDA error names that Fake returns and that Open's driver uses for
// calls it refuses itself; the rest come from cuGetErrorName.
const (
	errInvalidValue   = "CUDA_ERROR_INVALID_VALUE"
	errInvalidContext = "CUDA_ERROR_INVALID_CONTEXT"
	errOutOfMemory    = "CUDA_ERROR_OUT_OF_MEMORY"
)

// cuError is a failed driver call: "cuMemMap(0x7f0000000000, 2097152,
// 0x1): CUDA_ERROR_INVALID_VALUE", then Fake's reason if it has one.
type cuError struct {
	call   string // callString of the call
	name   string // the CUDA error name
	is     error  // ErrOutOfMemory, ErrNoDevice or ErrNoDriver, or nil
	detail string // why, where Fake knows; "" from the real driver
}

func (e *cuError) Error() string {
	s := e.call + ": " + e.name
	if e.detail != "" {
		s += ": " + e.detail
	}
	return s
}

func (e *cuError) Unwrap() error { return e.is }

// callString writes a call as C would: addresses and handles in hex,
// sizes in decimal, so a pointer in an error can be found in a trace.
func callString(name string, args ...uint64) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('(')
	hex := hexArgs[name]
	for i, a := range args {
		if i > 0 {
			b.WriteString(", ")
		}
		if i < len(hex) && hex[i] {
			fmt.Fprintf(&b, "%#x", a)
		} else {
			fmt.Fprintf(&b, "%d", a)
		}
	}
	b.WriteByte(')')
	return b.String()
}

// hexArgs says which of a call's arguments are addresses or handles. The
// arguments are the Driver method's, not the C function's.
var hexArgs = map[string][]bool{
	"cuMemFree":           {true},
	"cuMemAddressReserve": {false, false, true}, // size, align, hint
	"cuMemAddressFree":    {true},
	"cuMemMap":            {true, false, true},
	"cuMemSetAccess":      {true},
	"cuMemUnmap":          {true},
	"cuMemRelease":        {true},
	"cuCtxSetCurrent":     {true},
}
