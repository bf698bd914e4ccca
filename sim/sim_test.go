package sim

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/trace"
)

// reader returns a trace.Reader over events, which assigns their Slots.
func reader(t testing.TB, events []trace.Event) *trace.Reader {
	t.Helper()
	var buf bytes.Buffer
	w := trace.NewWriter(&buf)
	for _, ev := range events {
		require.NoError(t, w.Write(ev))
	}
	require.NoError(t, w.Flush())
	r, err := trace.NewReader(&buf, "test.jsonl")
	require.NoError(t, err)
	return r
}

func alloc(id, size uint64) trace.Event { return trace.Event{Op: trace.OpAlloc, ID: id, Size: size} }
func free(id uint64) trace.Event        { return trace.Event{Op: trace.OpFree, ID: id} }

func config(capacity uint64, names ...string) Config {
	var specs []AllocatorSpec
	for _, n := range names {
		specs = append(specs, AllocatorSpec{Name: n})
	}
	return Config{
		Allocators: specs,
		Space:      allocators.SpaceConfig{Kind: "virtual", Capacity: capacity},
		Check:      true,
	}
}

func replay(t testing.TB, events []trace.Event, cfg Config) []Result {
	t.Helper()
	res, err := Replay(context.Background(), reader(t, events), cfg)
	require.NoError(t, err)
	return res
}

// TensorFlow's GPUBFCAllocatorTest.NoDups
// (tensorflow/core/common_runtime/gpu/gpu_bfc_allocator_test.cc, the same
// numbers from its 2015 version to tensorflow/tensorflow@0f563557ee), through
// the engine: allocate 1..1023 bytes on a 1 GiB device without growth, then
// free everything.
func TestNoDupsThroughEngine(t *testing.T) {
	var evs []trace.Event
	for s := uint64(1); s <= 1023; s++ {
		evs = append(evs, alloc(s, s))
	}
	for s := uint64(1); s <= 1023; s++ {
		evs = append(evs, free(s))
	}
	cfg := config(1<<30, "bfc")
	cfg.Allocators[0].Options = allocators.Options{"allow_growth": "false"}
	res := replay(t, evs, cfg)
	require.Len(t, res, 1)
	r := res[0]
	st := r.AllocatorStats
	assert.Equal(t, int64(1023), st["num_allocs"])
	assert.Equal(t, int64(654336), st["peak_bytes_in_use"])
	assert.Equal(t, int64(1024), st["largest_alloc_size"])
	assert.Equal(t, int64(0), st["bytes_in_use"])
	assert.Equal(t, uint64(654336), r.PeakInUseBytes, "the engine's in-use peak agrees with TF's counter")
	assert.Equal(t, uint64(1023*1024/2), r.PeakLiveBytes)
	assert.Equal(t, uint64(1<<30), r.PeakReservedBytes, "allow_growth=false reserves the whole limit")
	assert.Equal(t, int64(1023), r.OKAllocs)
	assert.Equal(t, int64(1), r.Space.ReserveCalls)
}

func TestMetricsByHand(t *testing.T) {
	// naive on a 4 KiB device: 1000 -> 1024 reserved, 100 -> 256, 3000 -> 3072 fails.
	evs := []trace.Event{
		alloc(1, 1000), alloc(2, 100), alloc(3, 3000), free(1), {Op: trace.OpStep},
		alloc(4, 0), free(4), free(2), free(3),
	}
	cfg := config(4096, "naive")
	cfg.LatencySample = 1
	res := replay(t, evs, cfg)
	r := res[0]
	assert.Equal(t, int64(9), r.Events)
	assert.Equal(t, int64(3), r.OKAllocs, "1, 2 and the size-0 alloc")
	assert.Equal(t, int64(1), r.ZeroSizeAllocs)
	assert.Equal(t, int64(1), r.FailedAllocs)
	assert.Equal(t, int64(2), r.FirstOOMEvent)
	assert.Equal(t, int64(3), r.FirstOOMLine)
	assert.Equal(t, uint64(1100), r.PeakLiveBytes)
	assert.Equal(t, uint64(1280), r.PeakInUseBytes)
	assert.Equal(t, uint64(1280), r.PeakReservedBytes)
	assert.Equal(t, uint64(180), r.InternalWasteAtPeakBytes)
	assert.Equal(t, uint64(0), r.FinalReservedBytes)
	assert.InDelta(t, 1-1100.0/1280, r.Fragmentation(), 1e-12)
	assert.InDelta(t, 1100.0/1280, r.Utilization(), 1e-12)
	assert.Equal(t, int64(3), r.Space.ReserveCalls, "two that succeeded, one that failed")
	assert.Equal(t, int64(1), r.Space.FailedReserves)
	assert.Equal(t, int64(2), r.Space.ReleaseCalls)
	assert.Equal(t, int64(3), r.AllocLatency.Count, "two served, one failed; the size-0 alloc is not a call")
	assert.Equal(t, int64(2), r.FreeLatency.Count, "frees of failed and size-0 allocs are not calls")
	assert.Zero(t, r.TFFragmentationMax, "naive holds no free memory")
}

// Calls are timed one in LatencySample, the first of each kind included.
func TestLatencySampling(t *testing.T) {
	var evs []trace.Event
	for id := uint64(1); id <= 10; id++ {
		evs = append(evs, alloc(id, 256))
	}
	for id := uint64(1); id <= 10; id++ {
		evs = append(evs, free(id))
	}
	for _, tc := range []struct{ every, want int }{{0, 1}, {1, 10}, {4, 3}, {16, 1}} {
		cfg := config(1<<20, "bfc")
		cfg.LatencySample = tc.every
		r := replay(t, evs, cfg)[0]
		assert.EqualValues(t, tc.want, r.AllocLatency.Count, "one in %d", tc.every)
		assert.EqualValues(t, tc.want, r.FreeLatency.Count, "one in %d", tc.every)
		want := tc.every
		if want == 0 {
			want = DefaultLatencySample
		}
		assert.Equal(t, want, r.LatencySampleEvery)
	}
}

func TestTFFragmentation(t *testing.T) {
	// bfc on 1 GiB without growth: after freeing the middle of three 1 KiB
	// blocks the pool holds a free 1 KiB chunk and the large tail.
	evs := []trace.Event{alloc(1, 1024), alloc(2, 1024), alloc(3, 1024), free(2)}
	cfg := config(1<<30, "bfc")
	cfg.Allocators[0].Options = allocators.Options{"allow_growth": "false"}
	r := replay(t, evs, cfg)[0]
	free := float64(1<<30 - 2048)
	assert.InDelta(t, 1024/free, r.TFFragmentationMax, 1e-12)
	assert.InDelta(t, (1024/free)/4, r.TFFragmentationMean, 1e-12, "0, 0, 0, then 1024/free")
}

func TestStopOnOOM(t *testing.T) {
	evs := []trace.Event{alloc(1, 3000), alloc(2, 3000), alloc(3, 10), free(1)}
	cfg := config(4096, "naive", "bfc")
	cfg.StopOnOOM = true
	res := replay(t, evs, cfg)
	for _, r := range res {
		assert.True(t, r.Stopped, r.Allocator)
		assert.Equal(t, int64(2), r.Events, r.Allocator)
		assert.Equal(t, int64(1), r.FirstOOMEvent, r.Allocator)
		assert.Equal(t, int64(1), r.OKAllocs, r.Allocator)
	}
}

func TestRecordedAddressMatch(t *testing.T) {
	a1 := alloc(1, 300)
	a1.Addr, a1.Flags = allocators.VirtualBase, trace.HasAddr
	a2 := alloc(2, 300)
	a2.Addr, a2.Flags = allocators.VirtualBase+4096, trace.HasAddr
	r := replay(t, []trace.Event{a1, a2}, config(1<<20, "naive"))[0]
	assert.Equal(t, int64(2), r.AddrChecked)
	assert.Equal(t, int64(1), r.AddrMatched, "naive places the second block at base+512")
}

// An allocation's recorded block is checked against the size of the block
// the allocator set aside: bfc and pytorch round 300 bytes up to 512 and
// 1000 to 1024, and an allocation without a recorded block is not counted.
func TestRecordedBlockMatch(t *testing.T) {
	a1 := alloc(1, 300)
	a1.Block, a1.Flags = 512, trace.HasBlock
	a2 := alloc(2, 1000)
	a2.Block, a2.Flags = 1000, trace.HasBlock
	a3 := alloc(3, 2000)
	for _, r := range replay(t, []trace.Event{a1, a2, a3}, config(1<<30, "bfc", "pytorch")) {
		assert.Equal(t, int64(2), r.BlockChecked, r.Allocator)
		assert.Equal(t, int64(1), r.BlockMatched, r.Allocator)
		assert.Zero(t, r.AddrChecked, r.Allocator)
	}
	// A failed allocation is not checked.
	a4 := alloc(4, 1<<30)
	a4.Block, a4.Flags = 1<<30, trace.HasBlock
	r := replay(t, []trace.Event{a1, a4}, config(1<<20, "bfc"))[0]
	assert.Equal(t, int64(1), r.FailedAllocs)
	assert.Equal(t, int64(1), r.BlockChecked)
	assert.Equal(t, int64(1), r.BlockMatched)
}

func TestEventsOutput(t *testing.T) {
	evs := []trace.Event{alloc(7, 4096), alloc(8, 5000), free(7)}
	var mu sync.Mutex
	outs := map[string]*bytes.Buffer{}
	cfg := config(8192, "naive", "arena")
	cfg.Events = func(name string) io.Writer {
		mu.Lock()
		defer mu.Unlock()
		outs[name] = &bytes.Buffer{}
		return outs[name]
	}
	replay(t, evs, cfg)
	assert.Equal(t, `{"i":0,"allocator":"naive","op":"alloc","id":7,"addr":1099511627776,"size":4096,"ok":true,"block":4096,"line":1}
{"i":1,"allocator":"naive","op":"alloc","id":8,"size":5000,"ok":false,"line":2}
{"i":2,"allocator":"naive","op":"free","id":7,"addr":1099511627776,"size":4096,"ok":true,"block":4096,"line":3}
`, outs["naive"].String())
	assert.Equal(t, 3, strings.Count(outs["arena"].String(), "\n"))
}

func TestDeterministic(t *testing.T) {
	var evs []trace.Event
	for i := range uint64(3000) {
		evs = append(evs, alloc(i, 1+(i*7919)%100000))
		if i >= 50 {
			evs = append(evs, free(i-50))
		}
	}
	cfg := config(1<<30, allocators.DefaultNames...)
	a := replay(t, evs, cfg)
	b := replay(t, evs, cfg)
	for i := range a {
		zeroTimings(&a[i])
		zeroTimings(&b[i])
	}
	assert.Equal(t, a, b)
}

// onlyNext hides every method of a Source but Next, Event and Err, so that
// the engine reads it an event at a time.
type onlyNext struct{ Source }

// Events lent in place (a trace.Reader's, past its first few thousand
// lines), copied in batches and taken one at a time replay alike, the
// series recorded for the plots included, with every default allocator.
func TestLentEventsReplayAlike(t *testing.T) {
	var evs []trace.Event
	for i := range uint64(40_000) {
		evs = append(evs, alloc(i, 1+(i*7919)%100000))
		if i >= 300 && i%3 != 0 {
			evs = append(evs, free(i-300))
		}
	}
	run := func(src Source) []Result {
		cfg := config(1<<34, allocators.DefaultNames...)
		cfg.Record = &RecordConfig{}
		res, err := Replay(context.Background(), src, cfg)
		require.NoError(t, err)
		for i := range res {
			zeroTimings(&res[i])
			require.NotNil(t, res[i].Timeline)
		}
		return res
	}
	var _ LendingSource = reader(t, nil)
	lent := run(reader(t, evs))
	batched := run(batchOnly{onlyNext{reader(t, evs)}})
	single := run(onlyNext{reader(t, evs)})
	assert.Equal(t, single, lent)
	assert.Equal(t, single, batched)
}

// batchOnly adds NextBatch to a source that hides NextLent.
type batchOnly struct{ onlyNext }

func (b batchOnly) NextBatch(dst []trace.Event) []trace.Event {
	return b.Source.(*trace.Reader).NextBatch(dst)
}

func zeroTimings(r *Result) {
	r.AllocLatency, r.FreeLatency, r.ReplaySeconds = Latency{Count: r.AllocLatency.Count}, Latency{Count: r.FreeLatency.Count}, 0
}

func TestInvalidTraceStopsReplay(t *testing.T) {
	r, err := trace.NewReader(strings.NewReader(`{"op":"alloc","id":1,"size":5}`+"\n"+`{"op":"free","id":2}`+"\n"), "bad.jsonl")
	require.NoError(t, err)
	_, err = Replay(context.Background(), r, config(1<<20, "bfc"))
	require.Error(t, err)
	assert.EqualError(t, err, "bad.jsonl:2: free of id 2 that is not live")
}

func TestBadConfig(t *testing.T) {
	_, err := Replay(context.Background(), reader(t, nil), config(1<<20, "bfc", "tlsf"))
	assert.ErrorContains(t, err, `unknown allocator "tlsf"`)
	cfg := config(1<<20, "bfc")
	cfg.Allocators[0].Options = allocators.Options{"allow_growth": "sometimes"}
	_, err = Replay(context.Background(), reader(t, nil), cfg)
	assert.ErrorContains(t, err, `bfc: bad option: bfc.allow_growth="sometimes"`)
	_, err = Replay(context.Background(), reader(t, nil), Config{})
	assert.Error(t, err)
	_, err = Replay(context.Background(), reader(t, nil), config(1<<20, "bfc", "bfc"))
	assert.EqualError(t, err, "allocator bfc is listed twice")
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var evs []trace.Event
	for i := range uint64(10000) {
		evs = append(evs, alloc(i, 100))
	}
	_, err := Replay(ctx, reader(t, evs), config(1<<30, "bfc"))
	assert.ErrorIs(t, err, context.Canceled)
}
