package cudadrv

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const g = defaultGran

func alloc(t *testing.T, f *Fake, n uint64) uint64 {
	t.Helper()
	p, err := f.MemAlloc(n)
	require.NoError(t, err)
	return p
}

func reserve(t *testing.T, f *Fake, size uint64) uint64 {
	t.Helper()
	va, err := f.AddressReserve(size, 0, 0)
	require.NoError(t, err)
	return va
}

func create(t *testing.T, f *Fake, size uint64) Handle {
	t.Helper()
	h, err := f.Create(size)
	require.NoError(t, err)
	return h
}

// mapAt creates size bytes and maps them at va.
func mapAt(t *testing.T, f *Fake, va, size uint64) Handle {
	t.Helper()
	h := create(t, f, size)
	require.NoError(t, f.Map(va, size, h))
	return h
}

func TestFakeMisuse(t *testing.T) {
	// Each setup makes right calls and returns the wrong one.
	tests := []struct {
		name  string
		setup func(t *testing.T, f *Fake) func() error
		why   string // in the error
	}{
		{"MemAlloc of 0", func(t *testing.T, f *Fake) func() error {
			return func() error { _, err := f.MemAlloc(0); return err }
		}, "size 0"},
		{"MemFree of a pointer never allocated", func(t *testing.T, f *Fake) func() error {
			return func() error { return f.MemFree(allocBase) }
		}, "not a pointer MemAlloc returned"},
		{"MemFree twice", func(t *testing.T, f *Fake) func() error {
			p := alloc(t, f, g)
			require.NoError(t, f.MemFree(p))
			return func() error { return f.MemFree(p) }
		}, "freed already"},
		{"MemFree inside an allocation", func(t *testing.T, f *Fake) func() error {
			p := alloc(t, f, 2*g)
			return func() error { return f.MemFree(p + g) }
		}, "not a pointer MemAlloc returned"},

		{"AddressReserve of 0", func(t *testing.T, f *Fake) func() error {
			return func() error { _, err := f.AddressReserve(0, 0, 0); return err }
		}, "size 0"},
		{"AddressReserve of part of a granule", func(t *testing.T, f *Fake) func() error {
			return func() error { _, err := f.AddressReserve(g+4096, 0, 0); return err }
		}, "size not a multiple of the granularity"},
		{"AddressReserve aligned to part of a granule", func(t *testing.T, f *Fake) func() error {
			return func() error { _, err := f.AddressReserve(g, g/2, 0); return err }
		}, "alignment not a multiple of the granularity"},

		{"AddressFree of a range never reserved", func(t *testing.T, f *Fake) func() error {
			return func() error { return f.AddressFree(reserveBase, g) }
		}, "not a range AddressReserve returned"},
		{"AddressFree of part of a range", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, 2*g)
			return func() error { return f.AddressFree(va, g) }
		}, "not a range AddressReserve returned"},
		{"AddressFree of the end of a range", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, 2*g)
			return func() error { return f.AddressFree(va+g, g) }
		}, "not a range AddressReserve returned"},
		{"AddressFree twice", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, g)
			require.NoError(t, f.AddressFree(va, g))
			return func() error { return f.AddressFree(va, g) }
		}, "not a range AddressReserve returned"},
		{"AddressFree with pages mapped", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, 2*g)
			mapAt(t, f, va+g, g)
			return func() error { return f.AddressFree(va, 2*g) }
		}, "still mapped"},

		{"Create of 0", func(t *testing.T, f *Fake) func() error {
			return func() error { _, err := f.Create(0); return err }
		}, "size 0"},
		{"Create of part of a granule", func(t *testing.T, f *Fake) func() error {
			return func() error { _, err := f.Create(g + 1); return err }
		}, "size not a multiple of the granularity"},

		{"Map outside any reservation", func(t *testing.T, f *Fake) func() error {
			h := create(t, f, g)
			return func() error { return f.Map(reserveBase, g, h) }
		}, "not inside one reserved range"},
		{"Map past the end of a reservation", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, g)
			h := create(t, f, 2*g)
			return func() error { return f.Map(va, 2*g, h) }
		}, "not inside one reserved range"},
		{"Map over a mapping", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, 2*g)
			mapAt(t, f, va, g)
			h := create(t, f, g)
			return func() error { return f.Map(va, g, h) }
		}, "overlaps the mapping"},
		{"Map over part of a mapping", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, 3*g)
			mapAt(t, f, va+g, g)
			h := create(t, f, 2*g)
			return func() error { return f.Map(va, 2*g, h) }
		}, "overlaps the mapping"},
		{"Map of a released handle", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, g)
			h := create(t, f, g)
			require.NoError(t, f.Release(h))
			return func() error { return f.Map(va, g, h) }
		}, "handle unknown or released"},
		{"Map of a released handle still mapped", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, 2*g)
			h := mapAt(t, f, va, g)
			require.NoError(t, f.Release(h))
			return func() error { return f.Map(va+g, g, h) }
		}, "handle unknown or released"},
		{"Map of an unknown handle", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, g)
			return func() error { return f.Map(va, g, 42) }
		}, "handle unknown or released"},
		{"Map of less than the handle", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, 2*g)
			h := create(t, f, 2*g)
			return func() error { return f.Map(va, g, h) }
		}, "size is not the handle's"},
		{"Map of more than the handle", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, 2*g)
			h := create(t, f, g)
			return func() error { return f.Map(va, 2*g, h) }
		}, "size is not the handle's"},
		{"Map at an unaligned address", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, 2*g)
			h := create(t, f, g)
			return func() error { return f.Map(va+4096, g, h) }
		}, "address not a multiple of the granularity"},

		{"SetAccess on an unmapped range", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, g)
			return func() error { return f.SetAccess(va, g) }
		}, "not all mapped"},
		{"SetAccess past a mapping", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, 2*g)
			mapAt(t, f, va, g)
			return func() error { return f.SetAccess(va, 2*g) }
		}, "not all mapped"},
		{"SetAccess over a gap", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, 3*g)
			mapAt(t, f, va, g)
			mapAt(t, f, va+2*g, g)
			return func() error { return f.SetAccess(va, 3*g) }
		}, "not all mapped"},
		{"SetAccess of part of a granule", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, 2*g)
			mapAt(t, f, va, 2*g)
			return func() error { return f.SetAccess(va, g+4096) }
		}, "size not a multiple of the granularity"},
		{"SetAccess of 0 bytes", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, g)
			mapAt(t, f, va, g)
			return func() error { return f.SetAccess(va, 0) }
		}, "size 0"},

		{"Unmap of an unmapped range", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, g)
			return func() error { return f.Unmap(va, g) }
		}, "not all mapped"},
		{"Unmap of part of a mapping", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, 2*g)
			mapAt(t, f, va, 2*g)
			return func() error { return f.Unmap(va, g) }
		}, "cuts a mapping"},
		{"Unmap of the end of a mapping", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, 2*g)
			mapAt(t, f, va, 2*g)
			return func() error { return f.Unmap(va+g, g) }
		}, "cuts a mapping"},
		{"Unmap over a gap", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, 3*g)
			mapAt(t, f, va, g)
			mapAt(t, f, va+2*g, g)
			return func() error { return f.Unmap(va, 3*g) }
		}, "not all mapped"},
		{"Unmap twice", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, g)
			mapAt(t, f, va, g)
			require.NoError(t, f.Unmap(va, g))
			return func() error { return f.Unmap(va, g) }
		}, "not all mapped"},

		{"Release of an unknown handle", func(t *testing.T, f *Fake) func() error {
			return func() error { return f.Release(42) }
		}, "handle unknown or released"},
		{"Release twice", func(t *testing.T, f *Fake) func() error {
			h := create(t, f, g)
			require.NoError(t, f.Release(h))
			return func() error { return f.Release(h) }
		}, "handle unknown or released"},
		{"Release twice while mapped", func(t *testing.T, f *Fake) func() error {
			va := reserve(t, f, g)
			h := mapAt(t, f, va, g)
			require.NoError(t, f.Release(h))
			return func() error { return f.Release(h) }
		}, "handle unknown or released"},

		{"MemGetInfo after Close", func(t *testing.T, f *Fake) func() error {
			require.NoError(t, f.Close())
			return func() error { _, _, err := f.MemGetInfo(); return err }
		}, "CUDA_ERROR_INVALID_CONTEXT: Driver used after Close"},
		{"MemFree after Close", func(t *testing.T, f *Fake) func() error {
			p := alloc(t, f, g)
			require.NoError(t, f.Close())
			return func() error { return f.MemFree(p) }
		}, "after Close"},
		{"Granularity after Close", func(t *testing.T, f *Fake) func() error {
			require.NoError(t, f.Close())
			return func() error { _, err := f.Granularity(); return err }
		}, "after Close"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFake("test", 64*g)
			bad := tt.setup(t, f)
			require.NoError(t, f.Misuse(), "in setup")
			live, free, calls := f.Live(), f.Free, len(f.Calls)

			err := bad()
			require.Error(t, err)
			assert.ErrorContains(t, err, tt.why)
			assert.NotErrorIs(t, err, ErrOutOfMemory)
			assert.Equal(t, err, f.Misuse())
			require.Len(t, f.Calls, calls+1)
			assert.Equal(t, err, f.Calls[calls].Err)
			// A refused call changes nothing.
			assert.Equal(t, live, f.Live())
			assert.Equal(t, free, f.Free)
		})
	}
}

func TestFakeMisuseKeepsFirst(t *testing.T) {
	f := NewFake("test", 64*g)
	err := f.MemFree(allocBase)
	require.Error(t, err)
	_, err2 := f.MemAlloc(0)
	require.Error(t, err2)
	assert.Equal(t, err, f.Misuse())
}

func TestFakeErrorText(t *testing.T) {
	f := NewFake("test", 64*g)
	err := f.Map(reserveBase, g, 7)
	assert.EqualError(t, err,
		"cuMemMap(0x600000000000, 2097152, 0x7): CUDA_ERROR_INVALID_VALUE: handle unknown or released")
	assert.Equal(t, "cuMemMap(0x600000000000, 2097152, 0x7) = CUDA_ERROR_INVALID_VALUE", f.Calls[0].String())

	p := alloc(t, f, 1)
	assert.Equal(t, "cuMemAlloc(1)", f.Calls[1].String())
	assert.Equal(t, p, f.Calls[1].Ret)
	_, err = f.MemAlloc(65 * g)
	assert.EqualError(t, err, "cuMemAlloc(136314880): CUDA_ERROR_OUT_OF_MEMORY: 136314880 bytes asked, 132120576 free")
}

func TestFakeAccounting(t *testing.T) {
	f := NewFake("test", 10*g)
	free := func() uint64 {
		t.Helper()
		free, total, err := f.MemGetInfo()
		require.NoError(t, err)
		assert.Equal(t, 10*uint64(g), total)
		assert.Equal(t, f.Free, free)
		return free / g
	}

	// MemAlloc rounds up to the granularity.
	p1 := alloc(t, f, 1)
	assert.EqualValues(t, 9, free())
	p2 := alloc(t, f, g+1)
	assert.EqualValues(t, 7, free())
	assert.Zero(t, p1%g)
	assert.Zero(t, p2%g)
	assert.GreaterOrEqual(t, p2, p1+g, "allocations overlap")
	require.NoError(t, f.MemFree(p1))
	assert.EqualValues(t, 8, free())

	// A handle's memory is taken at Create and given back once it is
	// both released and unmapped, in either order.
	va := reserve(t, f, 4*g)
	h1 := mapAt(t, f, va, 3*g)
	assert.EqualValues(t, 5, free())
	require.NoError(t, f.Release(h1))
	assert.EqualValues(t, 5, free(), "a mapped handle's memory is freed at Unmap")
	assert.Equal(t, Usage{Allocs: 1, Handles: 1, MappedBytes: 3 * g, ReservedBytes: 4 * g}, f.Live())
	require.NoError(t, f.Unmap(va, 3*g))
	assert.EqualValues(t, 8, free())

	h2 := mapAt(t, f, va, g)
	require.NoError(t, f.Unmap(va, g))
	assert.EqualValues(t, 7, free(), "an unreleased handle keeps its memory")
	require.NoError(t, f.Release(h2))
	assert.EqualValues(t, 8, free())

	// Running out is no misuse and changes nothing.
	_, err := f.MemAlloc(8*g + 1)
	assert.ErrorIs(t, err, ErrOutOfMemory)
	_, err = f.Create(9 * g)
	assert.ErrorIs(t, err, ErrOutOfMemory)
	_, err = f.MemAlloc(1 << 63)
	assert.ErrorIs(t, err, ErrOutOfMemory)
	_, err = f.MemAlloc(^uint64(0))
	assert.ErrorIs(t, err, ErrOutOfMemory)
	assert.EqualValues(t, 8, free())

	// All of it can be had.
	h3 := create(t, f, 8*g)
	assert.EqualValues(t, 0, free())
	_, err = f.MemAlloc(1)
	assert.ErrorIs(t, err, ErrOutOfMemory)
	require.NoError(t, f.Release(h3))
	require.NoError(t, f.MemFree(p2))
	require.NoError(t, f.AddressFree(va, 4*g))

	assert.EqualValues(t, 10, free())
	assert.Zero(t, f.Live())
	assert.NoError(t, f.Misuse())
}

func TestFakeFailAt(t *testing.T) {
	f := NewFake("test", 64*g)
	va := reserve(t, f, 4*g)

	f.FailAt = 2
	h1 := create(t, f, g)
	_, err := f.Create(g)
	assert.ErrorIs(t, err, ErrOutOfMemory)
	assert.ErrorContains(t, err, "FailAt")
	assert.Zero(t, f.FailAt)
	assert.Equal(t, 63*uint64(g), f.Free, "the failed Create took memory")
	create(t, f, g) // FailAt fails once

	f.FailAt = 1
	_, err = f.MemAlloc(g)
	assert.ErrorIs(t, err, ErrOutOfMemory)
	f.FailAt = 1
	_, err = f.AddressReserve(g, 0, 0)
	assert.ErrorIs(t, err, ErrOutOfMemory)
	f.FailAt = 1
	before := f.Live()
	assert.ErrorIs(t, f.Map(va, g, h1), ErrOutOfMemory)
	assert.Equal(t, before, f.Live(), "the failed Map changed something")

	// Map counts; the calls that cannot run out, and wrong calls, do not.
	f.FailAt = 2
	require.NoError(t, f.Map(va, g, h1))
	require.NoError(t, f.SetAccess(va, g))
	require.NoError(t, f.Unmap(va, g))
	_, _, err = f.MemGetInfo()
	require.NoError(t, err)
	_, err = f.Create(0)
	assert.NotErrorIs(t, err, ErrOutOfMemory)
	_, err = f.Create(g)
	assert.ErrorIs(t, err, ErrOutOfMemory)
	assert.Error(t, f.Misuse(), "Create(0)")
}

func TestFakeAddresses(t *testing.T) {
	f := NewFake("test", 64*g)

	a := reserve(t, f, 2*g)
	assert.EqualValues(t, reserveBase, a)
	b, err := f.AddressReserve(g, 8*g, 0)
	require.NoError(t, err)
	assert.Zero(t, b%(8*g), "alignment not honoured")
	assert.GreaterOrEqual(t, b, a+2*g)

	// The hint is taken when it is free and aligned, else ignored.
	hint := uint64(reserveBase + 64*g)
	c, err := f.AddressReserve(2*g, 0, hint)
	require.NoError(t, err)
	assert.Equal(t, hint, c)
	d, err := f.AddressReserve(2*g, 0, hint+g)
	require.NoError(t, err)
	assert.NotEqual(t, hint+g, d, "hint over a reservation taken")
	assert.GreaterOrEqual(t, d, c+2*g)
	e, err := f.AddressReserve(2*g, 0, hint+128*g+4096)
	require.NoError(t, err)
	assert.Zero(t, e%g)

	// A freed range is not handed out again at once.
	require.NoError(t, f.AddressFree(a, 2*g))
	next := reserve(t, f, 2*g)
	assert.Greater(t, next, a)

	// MemAlloc pointers lie apart from reservations.
	p := alloc(t, f, g)
	assert.GreaterOrEqual(t, p, uint64(reserveLimit))
	assert.NoError(t, f.Misuse())
}

func TestFakeAddressesWrapRound(t *testing.T) {
	const half = (reserveLimit - reserveBase) / 2
	f := NewFake("test", 64*g)
	a := reserve(t, f, half)
	reserve(t, f, half)
	_, err := f.AddressReserve(g, 0, 0)
	assert.ErrorIs(t, err, ErrOutOfMemory, "addresses ran out")

	require.NoError(t, f.AddressFree(a, half))
	b := reserve(t, f, g)
	assert.Equal(t, a, b, "search did not wrap round to the freed range")
	_, err = f.AddressReserve(half, 0, 0)
	assert.ErrorIs(t, err, ErrOutOfMemory)
	c := reserve(t, f, half-g)
	assert.Equal(t, a+g, c)
	assert.NoError(t, f.Misuse())
}

// TestFakeHappyPath is an expandable segment's life: reserve a range, map
// handles into it one by one, make them accessible, and give it all back.
func TestFakeHappyPath(t *testing.T) {
	f := NewFake("H100", 80<<30)
	assert.Equal(t, "H100", f.Name())
	gran, err := f.Granularity()
	require.NoError(t, err)
	require.EqualValues(t, g, gran)

	va := reserve(t, f, 8*g)
	h1 := create(t, f, g)
	h2 := create(t, f, 3*g)
	require.NoError(t, f.Map(va, g, h1))
	require.NoError(t, f.SetAccess(va, g))
	require.NoError(t, f.Map(va+g, 3*g, h2))
	require.NoError(t, f.SetAccess(va+g, 3*g))
	require.NoError(t, f.SetAccess(va, 4*g), "over two mappings")
	assert.Equal(t, Usage{Handles: 2, MappedBytes: 4 * g, ReservedBytes: 8 * g}, f.Live())

	require.NoError(t, f.Unmap(va, 4*g), "two whole mappings at once")
	require.NoError(t, f.Release(h1))
	require.NoError(t, f.Release(h2))
	require.NoError(t, f.AddressFree(va, 8*g))
	require.NoError(t, f.Close())
	require.NoError(t, f.Close(), "second Close")

	assert.Zero(t, f.Live())
	assert.NoError(t, f.Misuse())
	assert.Equal(t, f.Total, f.Free)
	var names []string
	for _, c := range f.Calls {
		assert.NoError(t, c.Err, "%s", c)
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{
		"cuMemGetAllocationGranularity",
		"cuMemAddressReserve", "cuMemCreate", "cuMemCreate",
		"cuMemMap", "cuMemSetAccess", "cuMemMap", "cuMemSetAccess", "cuMemSetAccess",
		"cuMemUnmap", "cuMemRelease", "cuMemRelease", "cuMemAddressFree",
		"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease",
	}, names)
	assert.Equal(t, []uint64{va, g, uint64(h1)}, f.Calls[4].Args)
}

func TestFakeZeroValue(t *testing.T) {
	var f Fake
	_, err := f.MemAlloc(1)
	assert.ErrorIs(t, err, ErrOutOfMemory)
	gran, err := f.Granularity()
	require.NoError(t, err)
	assert.EqualValues(t, g, gran)
	assert.NoError(t, f.Misuse())
}
