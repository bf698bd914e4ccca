package allocators

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/allocators/cudadrv"
)

// newFakeCuda is a cuda space of capacity over a fake GPU of total bytes.
func newFakeCuda(t *testing.T, total, capacity uint64) (*CudaSpace, *cudadrv.Fake) {
	t.Helper()
	f := cudadrv.NewFake("Fake GPU", total)
	s, err := NewCudaSpace(0, capacity, DefaultCostModel(), func(int) (cudadrv.Driver, error) { return f, nil })
	require.NoError(t, err)
	return s, f
}

// names lists the calls made since call i.
func names(f *cudadrv.Fake, i int) []string {
	var out []string
	for _, c := range f.Calls[i:] {
		out = append(out, c.Name)
	}
	return out
}

// everythingBack checks that the space gave the fake GPU all it took and
// never called it wrongly.
func everythingBack(t *testing.T, f *cudadrv.Fake) {
	t.Helper()
	assert.NoError(t, f.Misuse())
	assert.Equal(t, cudadrv.Usage{}, f.Live())
	assert.Equal(t, f.Total, f.Free)
}

// A segment is a cuMemAlloc, after a look at what is free, and its release
// a cuMemFree; every call is timed, and the model prices the same calls.
func TestCudaSpaceSegments(t *testing.T) {
	s, f := newFakeCuda(t, 8<<30, 1<<30)
	assert.Equal(t, uint64(1<<30), s.Capacity())
	n := len(f.Calls)
	a, err := s.Reserve(20 * mib)
	require.NoError(t, err)
	b, err := s.Reserve(1000)
	require.NoError(t, err)
	assert.Equal(t, []string{"cuMemGetInfo", "cuMemAlloc", "cuMemGetInfo", "cuMemAlloc"}, names(f, n))
	assert.Equal(t, []uint64{20 * mib}, f.Calls[n+1].Args)
	assert.Equal(t, []uint64{1024}, f.Calls[n+3].Args, "rounded to 256 bytes")
	st := s.Stats()
	assert.Equal(t, uint64(20*mib+1024), st.ReservedBytes)
	assert.True(t, st.Measured)
	assert.Equal(t, int64(2), st.Calls)
	assert.Equal(t, "Fake GPU", st.Device)
	assert.Positive(t, st.ModeledTime, "the model prices them too")

	require.Error(t, s.Release(a, 10*mib), "not a whole reservation")
	n = len(f.Calls)
	require.NoError(t, s.Release(a, 20*mib))
	require.NoError(t, s.Release(b, 1000))
	assert.Equal(t, []string{"cuMemFree", "cuMemFree"}, names(f, n))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "twice is fine")
	everythingBack(t, f)
}

// The space never holds more than its capacity, never asks for more than
// the GPU has free (other processes' memory included), and takes the
// driver's out-of-memory as the allocator's.
func TestCudaSpaceOutOfMemory(t *testing.T) {
	s, f := newFakeCuda(t, 1<<30, 64*mib)
	_, err := s.Reserve(65 * mib)
	require.ErrorIs(t, err, ErrOutOfMemory, "over the capacity")

	f.Free = 10 * mib // another process took the rest
	n := len(f.Calls)
	_, err = s.Reserve(20 * mib)
	require.ErrorIs(t, err, ErrOutOfMemory)
	assert.Equal(t, []string{"cuMemGetInfo"}, names(f, n), "no cuMemAlloc for more than is free")
	f.Free = 1 << 30

	f.FailAt = 1
	_, err = s.Reserve(2 * mib)
	require.ErrorIs(t, err, ErrOutOfMemory)
	assert.Equal(t, int64(3), s.Stats().FailedReserves)
	require.NoError(t, s.Close())
	everythingBack(t, f)

	// A device with less free than asked: the capacity is what it has.
	f = cudadrv.NewFake("small", 1<<30)
	f.Free = 100 * mib
	s, err = NewCudaSpace(0, 80<<30, CostModel{}, func(int) (cudadrv.Driver, error) { return f, nil })
	require.NoError(t, err)
	assert.Equal(t, uint64(100*mib), s.Capacity())
	require.NoError(t, s.Close())
}

// Mapped pages (PyTorch's expandable segments) go in the space's range:
// create, map, set access; given back with unmap and release. A failure
// part-way undoes what was done.
func TestCudaSpaceMappedPages(t *testing.T) {
	s, f := newFakeCuda(t, 8<<30, 1<<30)
	lo, hi := s.Bounds()
	addr, ok := s.FindFree(20 * mib)
	require.True(t, ok)
	assert.True(t, addr >= lo && addr+20*mib <= hi)
	n := len(f.Calls)
	require.NoError(t, s.MapAt(addr, 2*mib))
	require.NoError(t, s.MapAt(addr+2*mib, 2*mib))
	assert.Equal(t, []string{"cuMemGetInfo", "cuMemCreate", "cuMemMap", "cuMemSetAccess",
		"cuMemGetInfo", "cuMemCreate", "cuMemMap", "cuMemSetAccess"}, names(f, n))
	require.ErrorIs(t, s.MapAt(addr, 2*mib), ErrOutOfMemory, "already mapped")
	require.ErrorIs(t, s.MapAt(addr+mib, 2*mib), ErrOutOfMemory, "not on a page")
	require.ErrorIs(t, s.MapAt(addr+6*mib, mib), ErrOutOfMemory, "part of a page")
	require.ErrorIs(t, s.ReserveAt(addr+8*mib, 2*mib), ErrOutOfMemory, "cuMemAlloc takes no address")

	f.FailAt = 2 // the cuMemMap of the next page
	n = len(f.Calls)
	require.ErrorIs(t, s.MapAt(addr+4*mib, 2*mib), ErrOutOfMemory)
	assert.Equal(t, []string{"cuMemGetInfo", "cuMemCreate", "cuMemMap", "cuMemRelease"}, names(f, n))
	require.NoError(t, s.MapAt(addr+4*mib, 2*mib), "the range is free again")

	n = len(f.Calls)
	require.NoError(t, s.Release(addr, 4*mib), "two pages in one release")
	assert.Equal(t, []string{"cuMemUnmap", "cuMemRelease", "cuMemUnmap", "cuMemRelease"}, names(f, n))
	st := s.Stats()
	assert.Equal(t, uint64(2*mib), st.ReservedBytes)
	require.NoError(t, s.Close(), "the page still mapped is given back")
	everythingBack(t, f)
}

// Close gives back every segment and page still held, the address range
// and the context, in that order.
func TestCudaSpaceCloseGivesEverythingBack(t *testing.T) {
	s, f := newFakeCuda(t, 8<<30, 1<<30)
	_, err := s.Reserve(4 * mib)
	require.NoError(t, err)
	addr, _ := s.FindFree(2 * mib)
	require.NoError(t, s.MapAt(addr, 2*mib))
	n := len(f.Calls)
	require.NoError(t, s.Close())
	assert.Equal(t, []string{"cuMemFree", "cuMemUnmap", "cuMemRelease", "cuMemAddressFree", "cuDevicePrimaryCtxRelease"}, names(f, n))
	everythingBack(t, f)
	_, err = s.Reserve(2 * mib)
	assert.ErrorIs(t, err, ErrOutOfMemory, "a closed space reserves nothing")
}

func TestParseSpace(t *testing.T) {
	for in, want := range map[string]struct {
		kind string
		dev  int
	}{"virtual": {"virtual", 0}, "host": {"host", 0}, "cuda": {"cuda", 0}, "cuda:3": {"cuda", 3}} {
		kind, dev, err := ParseSpace(in)
		require.NoError(t, err, in)
		assert.Equal(t, want.kind, kind, in)
		assert.Equal(t, want.dev, dev, in)
	}
	for _, bad := range []string{"gpu", "cuda:", "cuda:-1", "cuda:x"} {
		_, _, err := ParseSpace(bad)
		assert.Error(t, err, bad)
	}
}

// failingAccess is a fake GPU whose cuMemSetAccess fails.
type failingAccess struct{ *cudadrv.Fake }

func (f failingAccess) SetAccess(ptr, size uint64) error {
	_ = f.Fake.SetAccess(ptr, size)
	return fmt.Errorf("cuMemSetAccess(%#x, %d): CUDA_ERROR_INVALID_VALUE", ptr, size)
}

// A page whose access cannot be set is unmapped and released again, and
// the allocator sees an out-of-memory; a GPU whose address range cannot be
// reserved is closed again.
func TestCudaSpaceFailurePaths(t *testing.T) {
	f := cudadrv.NewFake("Fake GPU", 8<<30)
	s, err := NewCudaSpace(0, 1<<30, CostModel{}, func(int) (cudadrv.Driver, error) { return failingAccess{f}, nil })
	require.NoError(t, err)
	addr, _ := s.FindFree(2 * mib)
	n := len(f.Calls)
	require.ErrorIs(t, s.MapAt(addr, 2*mib), ErrOutOfMemory)
	assert.Equal(t, []string{"cuMemGetInfo", "cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease"}, names(f, n))
	require.NoError(t, s.Close())
	everythingBack(t, f)

	f = cudadrv.NewFake("Fake GPU", 8<<30)
	f.FailAt = 1 // the address range
	_, err = NewCudaSpace(2, 1<<30, CostModel{}, func(int) (cudadrv.Driver, error) { return f, nil })
	require.ErrorIs(t, err, cudadrv.ErrOutOfMemory)
	assert.Contains(t, err.Error(), "--space cuda:2 (Fake GPU): reserving")
	assert.Equal(t, "cuDevicePrimaryCtxRelease", f.Calls[len(f.Calls)-1].Name, "closed again")
	everythingBack(t, f)

	_, err = NewCudaSpace(0, 1<<30, CostModel{}, func(int) (cudadrv.Driver, error) { return nil, cudadrv.ErrNoDriver })
	require.ErrorIs(t, err, cudadrv.ErrNoDriver)
}
