package cudadrv

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exercise makes each of d's calls the way an allocator would, and checks
// what comes back. It gives back all it takes and leaves d open.
func exercise(t *testing.T, d Driver) {
	free, total, err := d.MemGetInfo()
	require.NoError(t, err)
	assert.Positive(t, total)
	assert.LessOrEqual(t, free, total)

	p, err := d.MemAlloc(2 << 20)
	require.NoError(t, err)
	assert.NotZero(t, p)
	require.NoError(t, d.MemFree(p))

	// No GPU has a pebibyte.
	_, err = d.MemAlloc(1 << 50)
	assert.ErrorIs(t, err, ErrOutOfMemory)

	g, err := d.Granularity()
	require.NoError(t, err)
	require.Positive(t, g)
	assert.Zero(t, g&(g-1), "granularity %d is not a power of two", g)

	va, err := d.AddressReserve(g, 0, 0)
	require.NoError(t, err)
	assert.Zero(t, va%g, "reserved %#x is not aligned to %d", va, g)
	h, err := d.Create(g)
	require.NoError(t, err)
	require.NoError(t, d.Map(va, g, h))
	require.NoError(t, d.SetAccess(va, g))
	require.NoError(t, d.Unmap(va, g))
	require.NoError(t, d.Release(h))
	require.NoError(t, d.AddressFree(va, g))
}

func TestOpen(t *testing.T) {
	d, err := Open(0)
	if errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNoDevice) {
		t.Skip(err.Error())
	}
	require.NoError(t, err)
	t.Logf("device 0: %s", d.Name())
	assert.NotEmpty(t, d.Name())
	exercise(t, d)

	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "second Close")
	_, err = d.MemAlloc(2 << 20)
	assert.ErrorContains(t, err, "after Close")
}

func TestOpenNoSuchDevice(t *testing.T) {
	for _, ordinal := range []int{-1, 1 << 20} {
		_, err := Open(ordinal)
		if errors.Is(err, ErrNoDriver) {
			t.Skip(err.Error())
		}
		assert.ErrorIs(t, err, ErrNoDevice, "Open(%d)", ordinal)
	}
}

// TestExerciseFake runs the real driver's test against Fake, so that the
// test's calls are known to be right even where no GPU runs it.
func TestExerciseFake(t *testing.T) {
	f := NewFake("fake", 80<<30)
	exercise(t, f)
	assert.NoError(t, f.Misuse())
	assert.Zero(t, f.Live())
	assert.Equal(t, f.Total, f.Free)
}
