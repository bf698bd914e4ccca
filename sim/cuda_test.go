package sim

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/allocators/cudadrv"
	"github.com/bfcsim/bfcsim/trace"
)

// cudaConfig replays spec on a fake GPU of 16 GiB.
func cudaConfig(f *cudadrv.Fake, spec AllocatorSpec) Config {
	return Config{
		Allocators: []AllocatorSpec{spec},
		Space: allocators.SpaceConfig{Kind: "cuda", Capacity: 16 << 30,
			OpenDriver: func(int) (cudadrv.Driver, error) { return f, nil }},
		Check: true,
	}
}

// gaveBack checks that a replay left the fake GPU as it found it, having
// never called it wrongly.
func gaveBack(t *testing.T, f *cudadrv.Fake, free uint64) {
	t.Helper()
	assert.NoError(t, f.Misuse())
	assert.Equal(t, cudadrv.Usage{}, f.Live())
	assert.Equal(t, free, f.Free)
}

// A replay on a GPU measures its device calls beside the model's figure,
// through every call path (segments, and pages mapped for PyTorch's
// expandable segments), and gives everything back at the end.
func TestReplayOnCudaSpace(t *testing.T) {
	evs := loadTrace(t, "transformer-train.jsonl")
	for _, spec := range []AllocatorSpec{
		{Name: "bfc"},
		{Name: "pytorch"},
		{Name: "pytorch", Options: allocators.Options{"expandable_segments": "true"}},
		{Name: "naive"},
	} {
		f := cudadrv.NewFake("Fake H100", 80<<30)
		res, err := Replay(context.Background(), reader(t, evs), cudaConfig(f, spec))
		require.NoError(t, err, "%v", spec)
		r := res[0]
		assert.Zero(t, r.FailedAllocs)
		assert.True(t, r.Space.Measured)
		assert.Positive(t, r.Space.Calls)
		assert.Positive(t, r.Space.ModeledTime)
		assert.Equal(t, "Fake H100", r.Space.Device)
		gaveBack(t, f, f.Total)
		var mapped bool
		for _, c := range f.Calls {
			mapped = mapped || c.Name == "cuMemMap"
		}
		assert.Equal(t, spec.Options["expandable_segments"] == "true", mapped, "%v maps pages", spec)
	}
}

// A GPU smaller than the trace needs: allocations fail as out of memory,
// as in a real run, and nothing is left behind.
func TestReplayOnFullCudaSpace(t *testing.T) {
	evs := loadTrace(t, "transformer-train.jsonl")
	f := cudadrv.NewFake("small", 1<<30)
	f.Free = 64 << 20 // another process holds the rest
	res, err := Replay(context.Background(), reader(t, evs), cudaConfig(f, AllocatorSpec{Name: "bfc"}))
	require.NoError(t, err)
	assert.Positive(t, res[0].FailedAllocs)
	gaveBack(t, f, 64<<20)
}

// Ctrl-C (a cancelled context) and a panic mid-replay give back
// everything reserved.
func TestCudaSpaceGivenBackOnCancelAndPanic(t *testing.T) {
	evs := loadTrace(t, "transformer-train.jsonl")
	f := cudadrv.NewFake("Fake", 80<<30)
	ctx, cancel := context.WithCancel(context.Background())
	src := &hookSource{sliceSource: sliceSource{events: evs}, at: len(evs) / 2, hook: cancel}
	_, err := Replay(ctx, src, cudaConfig(f, AllocatorSpec{Name: "pytorch", Options: allocators.Options{"expandable_segments": "true"}}))
	require.ErrorIs(t, err, context.Canceled)
	gaveBack(t, f, f.Total)

	f = cudadrv.NewFake("Fake", 80<<30)
	src = &hookSource{sliceSource: sliceSource{events: evs}, at: len(evs) / 2, hook: func() { panic("boom") }}
	assert.PanicsWithValue(t, "boom", func() {
		_, _ = Replay(context.Background(), src, cudaConfig(f, AllocatorSpec{Name: "bfc"}))
	})
	gaveBack(t, f, f.Total)
}

// hookSource calls hook when event at is read.
type hookSource struct {
	sliceSource
	at   int
	hook func()
}

func (s *hookSource) Event() trace.Event {
	if s.i-1 == s.at {
		s.hook()
	}
	return s.sliceSource.Event()
}

// --touch writes every allocation on the device, inside the memory the
// allocator was given (the fake refuses a write anywhere else).
func TestCudaSpaceTouch(t *testing.T) {
	evs := loadTrace(t, "transformer-train.jsonl")
	for _, spec := range []AllocatorSpec{{Name: "bfc"}, {Name: "pytorch", Options: allocators.Options{"expandable_segments": "true"}}} {
		f := cudadrv.NewFake("Fake", 80<<30)
		cfg := cudaConfig(f, spec)
		cfg.Space.Touch = true
		res, err := Replay(context.Background(), reader(t, evs), cfg)
		require.NoError(t, err)
		var writes int64
		for _, c := range f.Calls {
			if c.Name == "cuMemsetD8" {
				writes++
			}
		}
		assert.Equal(t, res[0].OKAllocs, writes, "%v: one write per allocation", spec)
		gaveBack(t, f, f.Total)
	}
}
