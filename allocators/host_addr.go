//go:build unix

package allocators

import "unsafe"

// sliceAddr returns the address of a mapping's first byte. The mapping is
// kept in the space for as long as the address is used, and mmap'd memory is
// never moved by the Go runtime.
func sliceAddr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
