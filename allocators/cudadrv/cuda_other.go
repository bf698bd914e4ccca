//go:build !(linux && (amd64 || arm64))

package cudadrv

import (
	"fmt"
	"runtime"
)

// Open says there is no driver: libcuda is loaded only on linux/amd64 and
// linux/arm64, where purego calls C without cgo.
func Open(ordinal int) (Driver, error) {
	return nil, fmt.Errorf("loading the CUDA driver on %s/%s: %w", runtime.GOOS, runtime.GOARCH, ErrNoDriver)
}
