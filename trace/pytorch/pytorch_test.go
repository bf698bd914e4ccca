package pytorch

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/trace"
)

// convertFile converts a fixture and reads the result back as a trace.
func convertFile(t *testing.T, name string, opt Options) (Stats, []trace.Event, trace.Header, []byte) {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	require.NoError(t, err)
	defer f.Close()
	var buf bytes.Buffer
	st, err := Convert(context.Background(), f, trace.NewWriter(&buf), opt)
	require.NoError(t, err, name)
	r, err := trace.NewReader(bytes.NewReader(buf.Bytes()), name)
	require.NoError(t, err)
	var evs []trace.Event
	for r.Next() {
		evs = append(evs, r.Event())
	}
	require.NoError(t, r.Err(), "%s converts to a valid trace", name)
	return st, evs, r.Header(), buf.Bytes()
}

// The fixtures (made by testdata/make_snapshots.py) convert to valid traces
// that open with the start state between its two marks.
func TestConvertFixtures(t *testing.T) {
	for _, tc := range []struct {
		file                   string
		orphans, pending       int64
		segmentFrees, clusters int
	}{
		{"small-large.pickle", 26, 0, 0, 1},
		{"streams.pickle", 50, 0, 0, 1},
		{"proto5-bigints.pickle", 41, 3, 8, 1},
	} {
		st, evs, h, _ := convertFile(t, tc.file, Options{Device: -1, Name: "x"})
		assert.Equal(t, "pytorch-snapshot", h.Source)
		assert.Equal(t, "us", h.TimeUnit)
		assert.Contains(t, h.Meta["address_map"], `"recorded":"0x7f2a00000000"`)
		assert.Equal(t, 0, st.Device)
		assert.EqualValues(t, tc.orphans, st.OrphanFrees, tc.file)
		assert.EqualValues(t, tc.pending, st.PendingFrees, tc.file)
		assert.Equal(t, tc.clusters, st.Clusters, tc.file)
		assert.Zero(t, st.Dropped, "%s: %v", tc.file, st.DroppedReasons)
		assert.EqualValues(t, len(evs), st.Events)

		require.Equal(t, trace.OpMark, evs[0].Op)
		assert.Equal(t, startStateMark, evs[0].Name)
		var starts, releases int
		var sawStart bool
		for _, ev := range evs[1:] {
			if ev.Op == trace.OpMark && ev.Name == recordingStartsMark {
				sawStart = true
				continue
			}
			if !sawStart {
				assert.Contains(t, []trace.Op{trace.OpReserve, trace.OpAlloc}, ev.Op, "the start state holds segments and allocations")
				assert.Zero(t, ev.Flags&trace.HasT, "the start state has no time")
				if ev.Op == trace.OpReserve {
					starts++
				}
			}
			if ev.Op == trace.OpRelease {
				releases++
			}
			if ev.Op == trace.OpAlloc {
				assert.NotZero(t, ev.Flags&trace.HasAddr, "every alloc carries its recorded address")
				assert.GreaterOrEqual(t, ev.Addr, uint64(1<<40), "moved into the simulated device")
			}
		}
		assert.True(t, sawStart)
		assert.Equal(t, st.StartSegments, starts)
		assert.Equal(t, tc.segmentFrees, releases, tc.file)
	}
}

// The same snapshot as JSON and as a pickle converts to the same trace.
func TestJSONAndPickleAgree(t *testing.T) {
	_, _, _, p := convertFile(t, "small-large.pickle", Options{Device: -1})
	_, _, _, j := convertFile(t, "small-large.json", Options{Device: -1})
	assert.Equal(t, string(p), string(j))
}

func TestTagsFromFrames(t *testing.T) {
	_, evs, _, _ := convertFile(t, "streams.pickle", Options{Device: -1})
	tags := map[string]bool{}
	streams := map[int64]bool{}
	for _, ev := range evs {
		if ev.Op == trace.OpAlloc {
			tags[ev.Tag] = true
			streams[ev.Stream] = true
		}
	}
	assert.True(t, tags["layer2.forward (model.py:42)"], "the innermost Python frame names the allocation: %v", tags)
	assert.Equal(t, map[int64]bool{0: true, 94_531_122_454_400: true}, streams)
}

func TestSegmentsOnly(t *testing.T) {
	st, evs, h, _ := convertFile(t, "segments-only.pickle", Options{Device: -1})
	assert.Empty(t, h.TimeUnit)
	assert.Positive(t, st.StartSegments)
	assert.Equal(t, st.StartAllocs, int(st.Allocs))
	assert.Equal(t, recordingStartsMark, evs[len(evs)-1].Name, "only a start state")
}

// Numbers that do not fit: on the device imported, a clear error; on
// another device, no matter.
func TestBigInts(t *testing.T) {
	f, err := os.Open("testdata/proto5-bigints.pickle")
	require.NoError(t, err)
	defer f.Close()
	_, err = Convert(context.Background(), f, trace.NewWriter(&bytes.Buffer{}), Options{Device: 1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "device_traces[1][0]: size is 1180591620717411303424, which does not fit in 64 bits")
}

func TestRefusesCode(t *testing.T) {
	f, err := os.Open("testdata/global.pickle")
	require.NoError(t, err)
	defer f.Close()
	_, err = Convert(context.Background(), f, trace.NewWriter(&bytes.Buffer{}), Options{Device: -1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "opcode GLOBAL at byte")

	for name, p := range map[string]string{
		// protocol 2: PROTO 2, MARK, ... each ends with STOP
		"REDUCE":       "\x80\x02)R.",
		"BUILD":        "\x80\x02}}b.",
		"STACK_GLOBAL": "\x80\x04\x8c\x02os\x8c\x06system\x93.",
		"INST":         "(ios\nsystem\n.",
		"NEWOBJ":       "\x80\x02))\x81.",
		"BINPERSID":    "\x80\x02K\x01Q.",
	} {
		_, err := decodePickle([]byte(p))
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "opcode "+name, name)
	}
	for name, p := range map[string]string{
		"empty":     "",
		"no stop":   "\x80\x02}",
		"truncated": "\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00\x8c\xff",
		"unknown":   "\x80\x02\xff.",
	} {
		_, err := decodePickle([]byte(p))
		assert.Error(t, err, name)
	}
}

// decodePickle walks a pickle in memory.
func decodePickle(data []byte) (value, error) {
	b := newBuilder(newSpool("", defaultSpoolLimit))
	defer b.sp.Close()
	return readPickle(bytes.NewReader(data), b)
}

// A hand-written snapshot: what was live before the recording comes first,
// at its recorded place, then the recording.
func TestStartStateByHand(t *testing.T) {
	const snap = `{
	  "segments": [
	    {"device": 0, "address": 8388608, "total_size": 2097152, "stream": 0, "blocks": [
	      {"size": 1024, "requested_size": 1000, "state": "active_allocated"},
	      {"size": 512, "requested_size": 0, "state": "inactive"},
	      {"size": 2095616, "requested_size": 0, "state": "inactive"}]}],
	  "device_traces": [[
	    {"action": "free_requested", "addr": 8389632, "size": 300, "stream": 0, "time_us": 5},
	    {"action": "free_completed", "addr": 8389632, "size": 300, "stream": 0, "time_us": 6},
	    {"action": "alloc", "addr": 8389632, "size": 100, "stream": 0, "time_us": 4,
	     "frames": [{"filename": "x.cpp", "line": 1, "name": "f"}]},
	    {"action": "free_completed", "addr": 8389632, "size": 100, "stream": 0, "time_us": 9},
	    {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": 10}]]}`
	var buf bytes.Buffer
	st, err := Convert(context.Background(), strings.NewReader(snap), trace.NewWriter(&buf), Options{Device: -1, Name: "hand"})
	require.NoError(t, err)
	want := `{"bfcsim_trace":1,"name":"hand","source":"pytorch-snapshot","time_unit":"us","address_map":[{"recorded":"0x800000","replayed":"0x10000000000","bytes":2097152}],"device":0}
{"op":"mark","name":"start state"}
{"op":"reserve","addr":1099511627776,"size":2097152,"stream":0}
{"op":"alloc","id":1,"size":1000,"stream":0,"addr":1099511627776}
{"op":"alloc","id":2,"size":300,"stream":0,"addr":1099511628800}
{"op":"mark","name":"recording starts"}
{"op":"free","id":2,"t":6}
{"op":"frame","id":1,"name":"f","file":"x.cpp","line":1}
{"op":"stack","id":1,"frames":[1]}
{"op":"alloc","id":3,"size":100,"t":6,"stream":0,"tag":"f (x.cpp:1)","stack":1,"addr":1099511628800}
{"op":"free","id":3,"t":9}
{"op":"mark","t":10,"name":"snapshot"}
`
	assert.Equal(t, want, buf.String(), "the clock that stepped back (4 after 6) is held at 6")
	assert.EqualValues(t, 1, st.OrphanFrees)
	assert.Equal(t, 2, st.StartAllocs)
}

func TestDeviceChoice(t *testing.T) {
	const snap = `{"segments": [], "device_traces": [[], [{"action": "segment_alloc", "addr": 4194304, "size": 2097152, "stream": 0}]]}`
	st, err := Convert(context.Background(), strings.NewReader(snap), trace.NewWriter(&bytes.Buffer{}), Options{Device: -1})
	require.NoError(t, err)
	assert.Equal(t, 1, st.Device, "the device with the most entries")
	_, err = Convert(context.Background(), strings.NewReader(snap), trace.NewWriter(&bytes.Buffer{}), Options{Device: 5})
	assert.ErrorContains(t, err, "--device 5")
	_, err = Convert(context.Background(), strings.NewReader(`{"blocks": []}`), trace.NewWriter(&bytes.Buffer{}), Options{Device: -1})
	assert.ErrorContains(t, err, "not a memory snapshot")
	_, err = Convert(context.Background(), strings.NewReader(`[1, 2]`), trace.NewWriter(&bytes.Buffer{}), Options{Device: -1})
	assert.ErrorContains(t, err, "not a memory snapshot")
}

func TestClusters(t *testing.T) {
	cl := makeClusters([]span{{100 << 20, 102 << 20}, {101 << 20, 104 << 20}, {1 << 40, 1<<40 + 2<<20}, {200<<20 + 512, 201 << 20}}, clusterGap)
	require.Len(t, cl, 3)
	a, ok := cl.move(100 << 20)
	require.True(t, ok)
	assert.EqualValues(t, 1<<40, a)
	b, _ := cl.move(103 << 20)
	assert.EqualValues(t, 1<<40+3<<20, b, "offsets inside a cluster are kept")
	c, _ := cl.move(200<<20 + 512)
	assert.EqualValues(t, 512, c%(2<<20), "the offset from a 2 MiB boundary is kept")
	assert.Greater(t, c, b)
	assert.LessOrEqual(t, c-(1<<40+4<<20), uint64(4<<20), "gaps shrink to at most 2 MiB (plus alignment)")
	_, ok = cl.move(50 << 20)
	assert.False(t, ok)
}

// A block allocated before the recording and freed during it is known only
// by its requested size. The recording's first allocation in the free space
// after it shows where that free space, and so the block, ends.
func TestSlackInferredFromTheRecording(t *testing.T) {
	const snap = `{
	  "segments": [
	    {"device": 0, "address": 20971520, "total_size": 20971520, "stream": 0, "blocks": [
	      {"size": 10485760, "requested_size": 0, "state": "inactive"},
	      {"size": 2097664, "requested_size": 2097153, "state": "active_allocated"},
	      {"size": 8388096, "requested_size": 0, "state": "inactive"}]}],
	  "device_traces": [[
	    {"action": "alloc", "addr": 23592960, "size": 1048577, "stream": 0},
	    {"action": "free_completed", "addr": 20971520, "size": 2097153, "stream": 0},
	    {"action": "free_completed", "addr": 23592960, "size": 1048577, "stream": 0}]]}`
	var buf bytes.Buffer
	st, err := Convert(context.Background(), strings.NewReader(snap), trace.NewWriter(&buf), Options{Device: -1})
	require.NoError(t, err)
	// B at 20 MiB asked for 2 MiB + 1 (a 2 MiB + 512 block), but the first
	// allocation after it lands 2.5 MiB in: B had 512 KiB of slack.
	assert.Contains(t, buf.String(), `{"op":"alloc","id":1,"size":2621440,"stream":0,"addr":1099511627776}`)
	assert.Equal(t, 1, st.SizesInferred)
	assert.Zero(t, st.SizesUnknown)

	// Without that allocation nothing tells: the requested size stays.
	noHint := strings.Replace(snap, `{"action": "alloc", "addr": 23592960, "size": 1048577, "stream": 0},`, "", 1)
	noHint = strings.Replace(noHint, `,
	    {"action": "free_completed", "addr": 23592960, "size": 1048577, "stream": 0}`, "", 1)
	buf.Reset()
	st, err = Convert(context.Background(), strings.NewReader(noHint), trace.NewWriter(&buf), Options{Device: -1})
	require.NoError(t, err)
	assert.Contains(t, buf.String(), `{"op":"alloc","id":1,"size":2097153,"stream":0,"addr":1099511627776}`)
	assert.Equal(t, 1, st.SizesUnknown)
}

// expandableDevice is what a real recording of a run with
// expandable_segments:True (device 1 of a public three-GPU snapshot, see
// docs/allocators.md) did to its device's segments, entry by entry: pages
// mapped ("m") and unmapped ("u") at an address, and the allocation it
// failed ("oom": the device's free bytes, then the request); and the
// segments its final state lists. Nothing was held when it started: the 40
// mappings come to 88,166,367,232 bytes, the 6 unmappings, each inside an
// earlier mapping, to 3,963,617,280, and the final segments to the
// difference.
var expandableDevice = struct {
	events [][3]any
	final  []struct {
		addr, size uint64
		kind       string
	}
}{
	events: [][3]any{
		{"m", 0x3288000000, 146800640}, {"m", 0x48cc000000, 2097152}, {"m", 0x3290c00000, 20971520},
		{"m", 0x3292000000, 20971520}, {"m", 0x3293400000, 20971520}, {"m", 0x3294800000, 20971520},
		{"m", 0x3295c00000, 20971520}, {"m", 0x3297000000, 20971520}, {"m", 0x3298400000, 20971520},
		{"m", 0x3299800000, 20971520}, {"m", 0x329ac00000, 20971520}, {"m", 0x329c000000, 20971520},
		{"m", 0x329d400000, 20971520}, {"m", 0x329e800000, 20971520}, {"m", 0x329fc00000, 20971520},
		{"m", 0x32a1000000, 5305794560}, {"m", 0x33dd400000, 1342177280}, {"m", 0x342d400000, 1321205760},
		{"m", 0x347c000000, 5305794560}, {"m", 0x35b8400000, 5305794560}, {"m", 0x36f4800000, 5305794560},
		{"m", 0x3830c00000, 545259520}, {"m", 0x3851400000, 671088640}, {"m", 0x3879400000, 125829120},
		{"m", 0x3880c00000, 125829120}, {"m", 0x3888400000, 5305794560}, {"m", 0x39c4800000, 5326766080},
		{"m", 0x3b02000000, 5305794560}, {"m", 0x3c3e400000, 1321205760}, {"m", 0x3c8d000000, 5305794560},
		{"m", 0x3dc9400000, 5305794560}, {"m", 0x3f05800000, 671088640}, {"m", 0x3f2d800000, 5305794560},
		{"m", 0x4069c00000, 5305794560}, {"m", 0x41a6000000, 5305794560}, {"m", 0x42e2400000, 1342177280},
		{"m", 0x4332400000, 5305794560}, {"m", 0x446e800000, 5305794560}, {"m", 0x45aac00000, 671088640},
		{"u", 0x3879400000, 104857600}, {"u", 0x3849c00000, 104857600}, {"u", 0x37da800000, 104857600},
		{"u", 0x3ee6400000, 503316480}, {"u", 0x3793400000, 503316480}, {"u", 0x450c000000, 2642411520},
		{"m", 0x45d2c00000, 5305794560}, {"oom", 95682560, 5308694528},
	},
	final: []struct {
		addr, size uint64
		kind       string
	}{
		{0x3288000000, 21663580160, "large"}, {0x37b1400000, 692060160, "large"},
		{0x37e0c00000, 1761607680, "large"}, {0x3850000000, 692060160, "large"},
		{0x387f800000, 27493662720, "large"}, {0x3f04400000, 25899827200, "large"},
		{0x45a9800000, 5997854720, "large"}, {0x48cc000000, 2097152, "small"},
	},
}

// The start state of expandable segments is worked out on address ranges:
// a real recording that mapped and unmapped pages and held nothing at its
// start opens with nothing held (matched as whole segments, its unmaps and
// final segments made 11 phantom segments of 66 GB). Its settings, its
// capacity (what it held when it failed, plus the device's free bytes) and
// its failed allocation travel with it.
func TestExpandableStartStateOnRanges(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"segments": [`)
	var mapped, unmapped, finalBytes uint64
	for _, e := range expandableDevice.events {
		switch e[0] {
		case "m":
			mapped += uint64(e[2].(int))
		case "u":
			unmapped += uint64(e[2].(int))
		}
	}
	assert.EqualValues(t, 88166367232, mapped)
	assert.EqualValues(t, 3963617280, unmapped)
	for i, s := range expandableDevice.final {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"device": 1, "address": %d, "total_size": %d, "stream": 0, "segment_type": %q, "is_expandable": true,
			"blocks": [{"address": %d, "size": %d, "requested_size": 0, "state": "inactive"}]}`, s.addr, s.size, s.kind, s.addr, s.size)
		finalBytes += s.size
	}
	b.WriteString(`], "device_traces": [[], [`)
	for i, e := range expandableDevice.events {
		if i > 0 {
			b.WriteString(",")
		}
		switch e[0] {
		case "m":
			fmt.Fprintf(&b, `{"action": "segment_map", "addr": %d, "size": %d, "stream": 0}`, e[1], e[2])
		case "u":
			fmt.Fprintf(&b, `{"action": "segment_unmap", "addr": %d, "size": %d, "stream": 0}`, e[1], e[2])
		case "oom":
			fmt.Fprintf(&b, `{"action": "oom", "device_free": %d, "size": %d, "stream": 0}`, e[1], e[2])
		}
	}
	b.WriteString(`]], "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "max_split_size": -1,
		"garbage_collection_threshold": 0.0, "expandable_segments": true,
		"roundup_power2_divisions": {"1": 0, "2": 0}}}`)

	var buf bytes.Buffer
	st, err := Convert(context.Background(), strings.NewReader(b.String()), trace.NewWriter(&buf), Options{Device: 1})
	require.NoError(t, err)
	assert.True(t, st.ExpandableStart)
	assert.Zero(t, st.StartSegments, "nothing was held when the recording started")
	assert.Equal(t, mapped-unmapped, finalBytes)
	assert.EqualValues(t, finalBytes+95682560, st.CapacityBytes)
	assert.EqualValues(t, 1, st.OOMs)
	assert.Empty(t, st.Unmodelled)
	assert.Zero(t, st.Dropped)

	r, err := trace.NewReader(bytes.NewReader(buf.Bytes()), "expandable")
	require.NoError(t, err)
	h := r.Header()
	assert.EqualValues(t, 84298432512, h.CapacityBytes)
	rs, ok, err := h.Settings()
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "pytorch", rs.Allocator)
	assert.Equal(t, map[string]string{"expandable_segments": "true", "max_split_size_mb": "unlimited",
		"garbage_collection_threshold": "0", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, rs.Options)
	sp, err := h.SpaceSettings()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"placement": "paged"}, sp)

	var reserves, releases int
	var released uint64
	var oom []trace.Event
	for r.Next() {
		ev := r.Event()
		switch {
		case ev.Op == trace.OpReserve:
			reserves++
		case ev.Op == trace.OpRelease:
			releases++
			released += ev.Size
		case len(oom) > 0 || ev.Op == trace.OpMark && trace.IsRecordedOOMMark(ev.Name):
			oom = append(oom, ev)
		}
	}
	require.NoError(t, r.Err())
	assert.Equal(t, 40, reserves, "every mapping, and nothing before them")
	assert.Equal(t, 6, releases)
	assert.EqualValues(t, 3963617280, released, "each release gives back the pages unmapped")
	require.Len(t, oom, 3, "the mark, the failed request, its free")
	assert.Equal(t, trace.OpAlloc, oom[1].Op)
	assert.EqualValues(t, 5308694528, oom[1].Size)
	assert.Zero(t, oom[1].Flags&trace.HasAddr, "PyTorch gave it no address")
	assert.Equal(t, trace.OpFree, oom[2].Op)
}

// The start state on ranges, piece by piece: a range first touched by an
// unmap was mapped at the start, one first touched by a map was not, and
// one never touched is mapped if the final state has it.
func TestStartStateRanges(t *testing.T) {
	const mb = 1 << 20
	st := newStartState()
	st.event(100*mb, 140*mb, 0, false) // mapped during the recording
	st.event(120*mb, 160*mb, 0, true)  // [140, 160) was mapped before
	st.event(200*mb, 202*mb, 0, true)  // a small page, mapped before
	st.event(300*mb, 320*mb, 7, true)
	st.event(300*mb, 340*mb, 7, false) // remapped: still mapped at the start
	held := st.finish([]mappedRange{
		{lo: 100 * mb, hi: 110 * mb},              // touched: not held
		{lo: 400 * mb, hi: 440 * mb},              // never touched: held
		{lo: 440 * mb, hi: 442 * mb, small: true}, // another pool: kept apart
		{lo: 320 * mb, hi: 360 * mb, stream: 7},   // partly touched
	})
	var got []mappedRange
	held.each(func(r mappedRange) { got = append(got, r) })
	assert.Equal(t, []mappedRange{
		{lo: 140 * mb, hi: 160 * mb},
		{lo: 200 * mb, hi: 202 * mb, small: true},
		{lo: 300 * mb, hi: 320 * mb, stream: 7},
		{lo: 340 * mb, hi: 360 * mb, stream: 7},
		{lo: 400 * mb, hi: 440 * mb},
		{lo: 440 * mb, hi: 442 * mb, small: true},
	}, got)
}

// TestDeviceChoiceFollowsAllocations: a snapshot whose device 0 trace holds
// only the snapshot marker, and whose allocations are all in device 1's
// segments, converts device 1 and says so.
func TestDeviceChoiceFollowsAllocations(t *testing.T) {
	const snap = `{"segments": [{"device": 1, "address": 4194304, "total_size": 2097152, "stream": 0, "segment_type": "large",
  "blocks": [{"address": 4194304, "size": 1048576, "requested_size": 1000000, "state": "active_allocated"},
             {"address": 5242880, "size": 1048576, "requested_size": 0, "state": "inactive"}]}],
 "device_traces": [[{"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": 10}], []]}`
	var buf bytes.Buffer
	st, err := Convert(context.Background(), strings.NewReader(snap), trace.NewWriter(&buf), Options{Device: -1})
	require.NoError(t, err)
	assert.Equal(t, 1, st.Device)
	assert.Equal(t, DeviceChoice{Devices: 2, Allocs: 1}, st.DeviceChoice)
	assert.Equal(t, 1, st.StartAllocs)
	assert.Contains(t, buf.String(), `{"op":"alloc","id":1,"size":1048576`)
}

// external_annotations become marks among the entries, by time: a phase's
// name at its start, NAME (end) at its end. The H100 recording of GPT-2
// holds 32: each step's optimizer step and zero_grad, started and ended.
func TestAnnotationsBecomeMarks(t *testing.T) {
	f, err := os.Open("../../traces/h100/train-default.pickle.gz")
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	var buf bytes.Buffer
	st, err := Convert(context.Background(), zr, trace.NewWriter(&buf), Options{Device: -1})
	require.NoError(t, err)
	assert.Equal(t, int64(32), st.Annotations)
	r, err := trace.NewReader(&buf, "train-default")
	require.NoError(t, err)
	var evs []trace.Event
	for r.Next() {
		evs = append(evs, r.Event())
	}
	require.NoError(t, r.Err())
	var names []string
	lastT := 0.0
	for _, e := range evs {
		if e.Flags&trace.HasT != 0 {
			assert.GreaterOrEqual(t, e.T, lastT, "marks keep the time order")
			lastT = e.T
		}
		if e.Op == trace.OpMark && trace.IsAnnotation(e.Name) {
			names = append(names, e.Name)
		}
	}
	require.Len(t, names, 32)
	assert.Equal(t, []string{"Optimizer.step#AdamW.step", "Optimizer.step#AdamW.step (end)",
		"Optimizer.zero_grad#AdamW.zero_grad", "Optimizer.zero_grad#AdamW.zero_grad (end)"}, names[:4])
}
