package tensorflow_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/internal/tfcapture"
	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/tensorflow"
)

func loadTrace(t *testing.T, name string) []trace.Event {
	t.Helper()
	f, err := os.Open("../../traces/" + name)
	require.NoError(t, err)
	defer f.Close()
	r, err := trace.NewReader(f, name)
	require.NoError(t, err)
	var evs []trace.Event
	for r.Next() {
		evs = append(evs, r.Event())
	}
	require.NoError(t, r.Err())
	return evs
}

// convert writes c as an XSpace and converts it back to trace events.
func convert(t *testing.T, data []byte, opt tensorflow.Options) ([]trace.Event, trace.Header, tensorflow.Stats, error) {
	t.Helper()
	var out bytes.Buffer
	st, err := tensorflow.ConvertAny(context.Background(), bytes.NewReader(data), "capture.xplane.pb", trace.NewWriter(&out), opt)
	if err != nil {
		return nil, trace.Header{}, st, err
	}
	r, err := trace.NewReader(&out, "converted")
	require.NoError(t, err)
	var evs []trace.Event
	for r.Next() {
		evs = append(evs, r.Event())
	}
	require.NoError(t, r.Err())
	return evs, r.Header(), st, nil
}

func xspace(t *testing.T, c tensorflow.Capture) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, tensorflow.WriteCapture(&b, c))
	return b.Bytes()
}

// A capture made from the start of a trace converts to the trace's own
// allocations and frees, each with the address and chunk size bfc gave it,
// and no start state; the header carries the memory limit.
func TestCaptureFromEmpty(t *testing.T) {
	evs := loadTrace(t, "transformer-infer.jsonl")
	c, err := tfcapture.FromTrace(evs, tfcapture.Options{Allocator: "GPU_0_bfc", Capacity: 16 << 30})
	require.NoError(t, err)
	for _, strs := range []bool{false, true} {
		c.StringValues = strs
		got, h, st, err := convert(t, xspace(t, c), tensorflow.Options{})
		require.NoError(t, err)
		assert.Equal(t, "GPU_0_bfc", st.Allocator)
		assert.Equal(t, uint64(16<<30), h.CapacityBytes)
		assert.Zero(t, st.StartInUseBytes, "a capture from the start has no start state")
		assert.True(t, st.AddressesRebased)
		assert.Zero(t, st.Inconsistent)
		var allocs, frees int
		for i, e := range got {
			switch e.Op {
			case trace.OpMark:
				t.Fatalf("event %d: a mark %q in a capture from empty", i, e.Name)
			case trace.OpAlloc:
				ce := c.Events[allocs+frees]
				require.True(t, ce.Alloc)
				assert.Equal(t, ce.Addr, e.Addr)
				assert.Equal(t, uint64(ce.Requested), e.Size)
				assert.Equal(t, uint64(ce.Chunk), e.Block)
				assert.NotZero(t, e.Flags&trace.HasBlock)
				allocs++
			case trace.OpFree:
				require.False(t, c.Events[allocs+frees].Alloc)
				frees++
			}
		}
		assert.Equal(t, len(c.Events), allocs+frees)
		assert.Equal(t, int64(allocs), st.Allocs)
	}
}

// A capture that starts mid-run: the chunks allocated before it and freed
// in it come first, at their addresses, and the rest of the bytes then in
// use as one allocation without an address; together they are exactly what
// bfc had in use when the capture started.
func TestCaptureMidRun(t *testing.T) {
	evs := loadTrace(t, "transformer-infer.jsonl")
	const from = 3000
	c, err := tfcapture.FromTrace(evs, tfcapture.Options{Allocator: "GPU_0_bfc", Capacity: 16 << 30, From: from})
	require.NoError(t, err)
	full, err := tfcapture.FromTrace(evs, tfcapture.Options{Allocator: "GPU_0_bfc", Capacity: 16 << 30})
	require.NoError(t, err)
	// What bfc had in use just before the window: the last event before it.
	before := full.Events[len(full.Events)-len(c.Events)-1].InUse
	got, _, st, err := convert(t, xspace(t, c), tensorflow.Options{})
	require.NoError(t, err)
	assert.Equal(t, uint64(before), st.StartInUseBytes)
	assert.Equal(t, st.StartInUseBytes, st.StartChunkBytes+st.StartInferredBytes)
	assert.Positive(t, st.StartChunks)
	require.Equal(t, trace.OpMark, got[0].Op)
	assert.Equal(t, "start state", got[0].Name)
	var startBytes uint64
	i := 1
	for ; got[i].Op == trace.OpAlloc; i++ {
		if got[i].Flags&trace.HasBlock != 0 {
			startBytes += got[i].Block
		} else {
			startBytes += got[i].Size
			assert.Zero(t, got[i].Flags&trace.HasAddr, "the inferred rest has no address")
		}
	}
	assert.Equal(t, "recording starts", got[i].Name)
	assert.Equal(t, st.StartInUseBytes, startBytes)
	assert.False(t, st.AddressesRebased)
	for _, e := range got {
		assert.Zero(t, e.Flags&trace.HasAddr, "mid-run: the layout before is unknown, so no address is compared")
	}
}

// A capture with several device allocators converts one only when asked;
// the error lists them with their event counts. A host allocator is never
// picked by default: beside one device allocator, the device's is.
func TestCaptureSeveralAllocators(t *testing.T) {
	evs := loadTrace(t, "cnn-infer.jsonl")
	a, err := tfcapture.FromTrace(evs, tfcapture.Options{Allocator: "GPU_0_bfc", Capacity: 1 << 30})
	require.NoError(t, err)
	b, err := tfcapture.FromTrace(evs[:200], tfcapture.Options{Allocator: "gpu_host_bfc", Capacity: 1 << 30})
	require.NoError(t, err)
	c, err := tfcapture.FromTrace(evs[:300], tfcapture.Options{Allocator: "GPU_1_bfc", Capacity: 1 << 30})
	require.NoError(t, err)
	data := append(xspace(t, a), xspace(t, b)...) // two planes of one XSpace
	_, _, st, err := convert(t, data, tensorflow.Options{})
	require.NoError(t, err)
	assert.Equal(t, "GPU_0_bfc", st.Allocator, "the only device allocator")
	assert.True(t, st.AutoPicked)

	_, _, _, err = convert(t, append(data, xspace(t, c)...), tensorflow.Options{})
	var several *tensorflow.SeveralAllocatorsError
	require.ErrorAs(t, err, &several)
	assert.Equal(t, []tensorflow.AllocatorCount{{Name: "GPU_0_bfc", Events: len(a.Events)}, {Name: "GPU_1_bfc", Events: len(c.Events)}, {Name: "gpu_host_bfc", Events: len(b.Events)}}, several.Allocators)
	assert.Contains(t, err.Error(), "pick one with --allocator NAME")

	_, _, st, err = convert(t, data, tensorflow.Options{Allocator: "gpu_host_bfc"})
	require.NoError(t, err)
	assert.Equal(t, int64(len(b.Events)), st.Allocs+st.Frees)

	_, _, _, err = convert(t, data, tensorflow.Options{Allocator: "GPU_9_bfc"})
	assert.ErrorContains(t, err, "--allocator GPU_9_bfc: the capture has no events of it (it has GPU_0_bfc, gpu_host_bfc)")
}

// Damaged and foreign captures fail with what is wrong.
func TestCaptureErrors(t *testing.T) {
	evs := loadTrace(t, "cnn-infer.jsonl")
	c, err := tfcapture.FromTrace(evs, tfcapture.Options{Allocator: "GPU_0_bfc", Capacity: 1 << 30})
	require.NoError(t, err)
	data := xspace(t, c)
	_, _, _, err = convert(t, data[:len(data)/2], tensorflow.Options{})
	assert.ErrorContains(t, err, "the capture ends inside a plane (truncated file?)")

	empty := xspace(t, tensorflow.Capture{Allocator: "GPU_0_bfc"})
	_, _, _, err = convert(t, empty, tensorflow.Options{})
	assert.ErrorContains(t, err, "the capture holds no MemoryAllocation or MemoryDeallocation events")

	_, _, _, err = convert(t, []byte(`{"memoryProfilePerAllocator": 7}`), tensorflow.Options{})
	assert.ErrorContains(t, err, "not a TensorBoard memory profile")
	assert.True(t, tensorflow.LooksLikeXSpace(data))
	assert.False(t, tensorflow.LooksLikeXSpace([]byte("\n\x05hello")))
	assert.False(t, errors.Is(err, context.Canceled))
}

// TensorBoard's memory profile JSON, in both its forms: all snapshots in
// time order (a short run), and a version 1 file whose sample is said to be
// one.
func TestMemoryProfile(t *testing.T) {
	const v0 = `{"memoryProfilePerAllocator":{"GPU_0_bfc":{"memoryProfileSnapshots":[
 {"timeOffsetPs":"2000","aggregationStats":{"stackReservedBytes":"0","heapAllocatedBytes":"1024","freeMemoryBytes":"3072"},
  "activityMetadata":{"memoryActivity":"ALLOCATION","requestedBytes":"1000","allocationBytes":"1024","address":"140000000000000","tfOpName":"MatMul","stepId":"1"}},
 {"timeOffsetPs":"3000","aggregationStats":{"stackReservedBytes":"0","heapAllocatedBytes":"0","freeMemoryBytes":"4096"},
  "activityMetadata":{"memoryActivity":"DEALLOCATION","requestedBytes":"1000","allocationBytes":"1024","address":"140000000000000","tfOpName":"MatMul","stepId":"1"}},
 {"timeOffsetPs":"1000","aggregationStats":{"stackReservedBytes":"0","heapAllocatedBytes":"512","freeMemoryBytes":"3584"},
  "activityMetadata":{"memoryActivity":"DEALLOCATION","requestedBytes":"256","allocationBytes":"512","address":"139999999999488","stepId":"1"}}
]}},"numHosts":1,"memoryIds":["GPU_0_bfc"]}`
	got, h, st, err := convert(t, []byte(v0), tensorflow.Options{})
	require.NoError(t, err)
	assert.Equal(t, "memory_profile", st.Format)
	assert.Equal(t, uint64(4096), h.CapacityBytes)
	assert.Equal(t, uint64(1024), st.StartInUseBytes, "512 B freed first, out of file order: the snapshots are sorted by time")
	assert.Equal(t, uint64(512), st.StartChunkBytes)
	assert.Equal(t, uint64(512), st.StartInferredBytes)
	assert.False(t, st.Sampled || st.Truncated)
	var allocs int
	for _, e := range got {
		if e.Op == trace.OpAlloc && e.Tag == "MatMul" {
			allocs++
			assert.Zero(t, e.Flags&trace.HasAddr, "a capture that starts mid-run leaves addresses out")
			assert.Equal(t, uint64(1024), e.Block)
		}
	}
	assert.Equal(t, 1, allocs)

	var b strings.Builder
	b.WriteString(`{"memoryProfilePerAllocator":{"GPU_0_bfc":{"memoryProfileSnapshots":[],"sampledTimelineSnapshots":[`)
	for i := range 1000 {
		if i > 0 {
			b.WriteString(",")
		}
		act := "ALLOCATION"
		if i%2 == 1 {
			act = "DEALLOCATION"
		}
		b.WriteString(`{"timeOffsetPs":"` + strconv.Itoa(i) + `","aggregationStats":{"heapAllocatedBytes":"` + strconv.Itoa(256*(1-i%2)) + `","freeMemoryBytes":"4096"},"activityMetadata":{"memoryActivity":"` + act + `","requestedBytes":"256","allocationBytes":"256","address":"` + strconv.Itoa(4096*(i/2+1)) + `"}}`)
	}
	b.WriteString(`]}},"version":1}`)
	_, _, st, err = convert(t, []byte(b.String()), tensorflow.Options{})
	require.NoError(t, err)
	assert.True(t, st.Sampled, "1,000 snapshots of version 1 are a sample")
}

// A real capture: the tensorflow/profiler demo of a multi-GPU BERT run
// (testdata/real/README.md). Four BFC allocators; GPU_4_bfc's 969 events
// convert with every bytes-in-use figure following from the one before.
func TestRealCapture(t *testing.T) {
	raw, err := os.ReadFile("testdata/real/gpu-multi-worker.xplane.pb.zst")
	require.NoError(t, err)
	dec, err := zstd.NewReader(nil)
	require.NoError(t, err)
	data, err := dec.DecodeAll(raw, nil)
	require.NoError(t, err)
	_, _, _, err = convert(t, data, tensorflow.Options{})
	var several *tensorflow.SeveralAllocatorsError
	require.ErrorAs(t, err, &several)
	assert.Equal(t, []tensorflow.AllocatorCount{{"GPU_4_bfc", 969}, {"GPU_6_bfc", 969}, {"gpu_host_bfc", 536}, {"GPU_1_bfc", 19}}, several.Allocators)

	got, h, st, err := convert(t, data, tensorflow.Options{Allocator: "GPU_4_bfc"})
	require.NoError(t, err)
	assert.Equal(t, int64(761), st.Allocs)
	assert.Equal(t, int64(208), st.Frees)
	assert.Zero(t, st.Inconsistent, "each event's bytes in use follow from the one before")
	assert.Equal(t, uint64(15477102400), h.CapacityBytes, "bytes in use + reserved + available")
	assert.Equal(t, uint64(4013337088), st.StartInUseBytes)
	blocks := 0
	for _, e := range got {
		if e.Op == trace.OpAlloc && e.Flags&trace.HasBlock != 0 {
			blocks++
			assert.Zero(t, e.Block%256, "a BFC chunk is a multiple of 256 bytes")
		}
	}
	assert.Equal(t, 761, blocks)

	_, _, st, err = convert(t, data, tensorflow.Options{Allocator: "gpu_host_bfc"})
	require.NoError(t, err)
	assert.Equal(t, 11, st.StartChunks, "chunks allocated before the capture and freed in it")
}

// A JAX TPU capture (testdata/real/README.md): allocators known by their
// index, text stats by reference, frees without chunk sizes.
func TestRealTPUCapture(t *testing.T) {
	raw, err := os.ReadFile("testdata/real/tpu-inference-2.xplane.pb.zst")
	require.NoError(t, err)
	dec, err := zstd.NewReader(nil)
	require.NoError(t, err)
	data, err := dec.DecodeAll(raw, nil)
	require.NoError(t, err)
	_, _, _, err = convert(t, data, tensorflow.Options{})
	var several *tensorflow.SeveralAllocatorsError
	require.ErrorAs(t, err, &several)
	assert.Equal(t, tensorflow.AllocatorCount{Name: "index_on_host 0", Events: 234}, several.Allocators[0])
	_, _, st, err := convert(t, data, tensorflow.Options{Allocator: "index_on_host 0"})
	require.NoError(t, err)
	assert.Equal(t, int64(117), st.Allocs)
	assert.Equal(t, int64(117), st.Frees)
	assert.Zero(t, st.Inconsistent, "frees without a chunk size are not checked")
}

// A crafted plane length does not make the reader allocate it.
func TestCaptureCraftedLength(t *testing.T) {
	data := []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x12, 0x03, '/', 'x', 'y'} // a 4 GiB plane, 5 bytes of it
	_, _, _, err := convert(t, data, tensorflow.Options{})
	assert.ErrorContains(t, err, "the capture ends inside a plane")
}

// FuzzConvert: whatever the bytes, converting them fails cleanly or writes
// a trace that reads back.
func FuzzConvert(f *testing.F) {
	c := tensorflow.Capture{Allocator: "GPU_0_bfc", Events: []tensorflow.CaptureEvent{
		{Alloc: true, Addr: 1 << 40, Requested: 1000, Chunk: 1024, InUse: 1024, Limit: 1 << 20, Op: "MatMul"},
		{Addr: 1 << 40, Requested: 1000, Chunk: 1024, InUse: 0, Limit: 1 << 20},
	}}
	var b bytes.Buffer
	if err := tensorflow.WriteCapture(&b, c); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte(`{"memoryProfilePerAllocator":{"a":{"memoryProfileSnapshots":[{"activityMetadata":{"memoryActivity":"DEALLOCATION","address":"8"}}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		_, err := tensorflow.ConvertAny(context.Background(), bytes.NewReader(data), "fuzz", trace.NewWriter(&out), tensorflow.Options{})
		if err != nil {
			return
		}
		r, err := trace.NewReader(&out, "converted")
		if err != nil {
			t.Fatalf("the converted trace's header does not read: %v", err)
		}
		for r.Next() {
		}
		if err := r.Err(); err != nil {
			t.Fatalf("the converted trace does not read: %v", err)
		}
	})
}
