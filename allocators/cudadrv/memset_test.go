package cudadrv

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Memset writes only inside memory allocated or mapped.
func TestFakeMemset(t *testing.T) {
	f := NewFake("f", 1<<30)
	p, err := f.MemAlloc(4 << 20)
	require.NoError(t, err)
	require.NoError(t, f.Memset(p+100, 1000))
	base, err := f.AddressReserve(8<<20, 0, 0)
	require.NoError(t, err)
	h, err := f.Create(2 << 20)
	require.NoError(t, err)
	require.NoError(t, f.Map(base, 2<<20, h))
	require.NoError(t, f.Memset(base, 2<<20))
	assert.Error(t, f.Memset(base+(2<<20), 1), "reserved, not mapped")
	g := NewFake("g", 1<<30)
	assert.Error(t, g.Memset(0x1000, 1), "nothing there")
	assert.Error(t, g.Misuse())
}
