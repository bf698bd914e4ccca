//go:build linux && (amd64 || arm64)

package cudadrv

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestLayout checks the Go mirrors of the C structs against cuda.h's
// sizes and offsets on 64-bit platforms.
func TestLayout(t *testing.T) {
	var p allocProp
	assert.EqualValues(t, 8, unsafe.Sizeof(memLocation{}))
	assert.EqualValues(t, 32, unsafe.Sizeof(p))
	assert.EqualValues(t, 8, unsafe.Offsetof(p.location))
	assert.EqualValues(t, 16, unsafe.Offsetof(p.win32HandleMetaData))
	assert.EqualValues(t, 24, unsafe.Offsetof(p.compressionType))
	assert.EqualValues(t, 26, unsafe.Offsetof(p.usage))
	assert.EqualValues(t, 12, unsafe.Sizeof(accessDesc{}))
	assert.EqualValues(t, 8, unsafe.Offsetof(accessDesc{}.flags))
}
