package sim

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/pytorch"
)

// pytorchOptionSets are the configurations the bundled traces are replayed
// with: the defaults, and each option family at least once.
var pytorchOptionSets = []allocators.Options{
	nil,
	{"max_split_size_mb": "21", "max_non_split_rounding_mb": "64"},
	{"max_split_size_mb": "128", "garbage_collection_threshold": "0.6", "memory_fraction": "0.9"},
	{"roundup_power2_divisions": "4"},
	{"expandable_segments": "true"},
	{"segments": "model", "expandable_segments": "true", "max_split_size_mb": "64"},
}

// Every bundled trace, on a roomy device and on one barely larger than its
// peak (so that the miss path releases and retries), with every option
// set, on both placements: the checker finds nothing, and PyTorch's own
// counters agree with the engine and the space.
func TestPyTorchBundledTraces(t *testing.T) {
	paths, err := filepath.Glob("../traces/*.jsonl")
	require.NoError(t, err)
	tf, err := filepath.Glob("../traces/tf/*.jsonl")
	require.NoError(t, err)
	paths = append(paths, tf...)
	require.NotEmpty(t, paths)
	for _, path := range paths {
		evs := loadTrace(t, path[len("../traces/"):])
		peak := replay(t, evs, config(DefaultCapacity, "naive"))[0].PeakLiveBytes
		tight := max(4<<20, (peak+peak/8+(1<<20)-1)&^((1<<20)-1))
		for _, capacity := range []uint64{DefaultCapacity, tight} {
			for _, placement := range []string{"first-fit", "paged"} {
				for _, opts := range pytorchOptionSets {
					name := fmt.Sprintf("%s/%dMiB/%s/%v", filepath.Base(path), capacity>>20, placement, opts)
					t.Run(name, func(t *testing.T) {
						cfg := config(capacity, "pytorch")
						cfg.Allocators[0].Options = opts
						cfg.Space.Options = allocators.Options{"placement": placement}
						res, err := Replay(context.Background(), &sliceSource{events: evs}, cfg)
						require.NoError(t, err)
						checkPyTorchCounters(t, res[0])
					})
				}
			}
		}
	}
}

// checkPyTorchCounters compares the allocator's memory_stats with what the
// engine and the space measured.
func checkPyTorchCounters(t *testing.T, r Result) {
	t.Helper()
	st := r.AllocatorStats
	assert.Equal(t, int64(r.FinalReservedBytes), st["reserved_bytes.all.current"], "reserved bytes")
	assert.Equal(t, int64(r.PeakReservedBytes), st["reserved_bytes.all.peak"], "peak reserved bytes")
	assert.Equal(t, int64(r.PeakInUseBytes), st["allocated_bytes.all.peak"], "peak allocated bytes")
	assert.Equal(t, st["bytes_in_use"], st["allocated_bytes.all.current"])
	assert.Equal(t, st["allocated_bytes.all.current"], st["active_bytes.all.current"])
	if st["expandable_segments.peak"] == 0 && r.Options["expandable_segments"] != true {
		assert.Equal(t, r.Space.ReserveCalls-r.Space.FailedReserves, st["num_device_alloc"], "device reservations")
		assert.Equal(t, r.Space.ReleaseCalls, st["num_device_free"], "device releases")
	} else {
		// PyTorch counts a mapping (map_block, unmap_block) once; the
		// space sees each page, and the pages of a mapping that failed
		// part way go back.
		assert.GreaterOrEqual(t, r.Space.ReserveCalls-r.Space.FailedReserves, st["num_device_alloc"], "device reservations")
		assert.GreaterOrEqual(t, r.Space.ReleaseCalls, st["num_device_free"], "device releases")
	}
	assert.Equal(t, r.FailedAllocs, st["num_ooms"])
	assert.Equal(t, r.OKAllocs-r.ZeroSizeAllocs, st["num_allocs"])
	for _, k := range []string{"allocated_bytes", "reserved_bytes", "segment", "inactive_split_bytes"} {
		assert.Equal(t, st[k+".all.current"], st[k+".small_pool.current"]+st[k+".large_pool.current"], k)
	}
	assert.LessOrEqual(t, st["inactive_split_bytes.all.current"], st["reserved_bytes.all.current"]-st["allocated_bytes.all.current"])
}

// logSpace is a space that remembers the reservations and releases made
// through it, as a recording of the program would.
type logSpace struct {
	allocators.Space
	log []trace.Event
}

func (s *logSpace) Reserve(n uint64) (uint64, error) {
	addr, err := s.Space.Reserve(n)
	if err == nil {
		s.log = append(s.log, trace.Event{Op: trace.OpReserve, Addr: addr, Size: n})
	}
	return addr, err
}

func (s *logSpace) ReserveAt(addr, n uint64) error {
	err := s.Space.(allocators.Placer).ReserveAt(addr, n)
	if err == nil {
		s.log = append(s.log, trace.Event{Op: trace.OpReserve, Addr: addr, Size: n})
	}
	return err
}

func (s *logSpace) MapAt(addr, n uint64) error {
	err := s.Space.(allocators.Placer).MapAt(addr, n)
	if err == nil {
		s.log = append(s.log, trace.Event{Op: trace.OpReserve, Addr: addr, Size: n})
	}
	return err
}

func (s *logSpace) Release(addr, n uint64) error {
	err := s.Space.Release(addr, n)
	if err == nil {
		s.log = append(s.log, trace.Event{Op: trace.OpRelease, Addr: addr, Size: n})
	}
	return err
}

func (s *logSpace) FindFree(n uint64) (uint64, bool) {
	return s.Space.(interface{ FindFree(uint64) (uint64, bool) }).FindFree(n)
}

// recordPyTorch plays evs against a pytorch allocator in model mode, as a program
// would run, and returns the trace its recording would give: every
// reservation and release as reserve and release events before the
// allocation that made them, and every allocation with the address it got.
// With cut > 0, the recording starts at event cut: the trace opens with the
// state the allocator was in then (its segments, and the allocations live
// in them at their addresses), between the start-state marks.
func recordPyTorch(t *testing.T, evs []trace.Event, capacity uint64, opts allocators.Options, cut int) []trace.Event {
	t.Helper()
	sp := &logSpace{Space: allocators.NewVirtualSpace(capacity, allocators.CostModel{}, allocators.FirstFit)}
	model := allocators.Options{"segments": "model"}
	for k, v := range opts {
		model[k] = v
	}
	a, _, err := allocators.New("pytorch", sp, model)
	require.NoError(t, err)
	p := a.(*allocators.PyTorch)
	live := map[uint64]allocators.Block{}
	ids := map[uint64]uint64{} // address → id of the live block there
	var out []trace.Event
	for i, ev := range evs {
		if i == cut && cut > 0 {
			out = append(out, startState(p, ids, evs)...)
		}
		sp.log = sp.log[:0]
		switch ev.Op {
		case trace.OpAlloc:
			if ev.Size == 0 {
				break
			}
			b, err := p.AllocateOnStream(ev.Size, ev.Align, ev.Stream)
			if err == nil {
				live[ev.ID] = b
				ids[b.Addr] = ev.ID
				ev.Addr = b.Addr
				ev.Flags |= trace.HasAddr
			} else if i >= cut {
				// A snapshot says the program failed it (an oom entry).
				sp.log = append(sp.log, trace.Event{Op: trace.OpMark, Name: trace.RecordedOOMMark + " out of memory"})
			}
		case trace.OpFree:
			if b, ok := live[ev.ID]; ok {
				require.NoError(t, p.Free(b))
				delete(live, ev.ID)
				delete(ids, b.Addr)
			}
		}
		if i < cut {
			continue
		}
		for _, s := range sp.log {
			s.Stream, s.Flags = ev.Stream, trace.HasStream
			out = append(out, s)
		}
		out = append(out, ev)
	}
	return out
}

// startState describes p's pool as a snapshot import does: each segment,
// then the allocations live in it, each of the size of its block, with its
// address. Everything is on stream 0.
func startState(p *allocators.PyTorch, ids map[uint64]uint64, evs []trace.Event) []trace.Event {
	out := []trace.Event{{Op: trace.OpMark, Name: allocators.StartStateMark}}
	var regions [][]allocators.Chunk
	p.WalkChunks(func(c allocators.Chunk) {
		if c.Region == len(regions) {
			regions = append(regions, nil)
		}
		regions[c.Region] = append(regions[c.Region], c)
	})
	for _, r := range regions {
		last := r[len(r)-1]
		out = append(out, trace.Event{Op: trace.OpReserve, Addr: r[0].Addr, Size: last.Addr + last.Size - r[0].Addr})
		for _, c := range r {
			if c.InUse {
				out = append(out, trace.Event{Op: trace.OpAlloc, ID: ids[c.Addr], Size: c.Size, Addr: c.Addr, Flags: trace.HasAddr})
			}
		}
	}
	return append(out, trace.Event{Op: trace.OpMark, Name: allocators.RecordingStartsMark})
}

// withStreams puts every third allocation on another stream, or two.
func withStreams(evs []trace.Event) []trace.Event {
	evs = slices.Clone(evs)
	for i := range evs {
		if evs[i].Op == trace.OpAlloc {
			evs[i].Stream = int64(evs[i].ID%3) * 7
			evs[i].Flags |= trace.HasStream
		}
	}
	return evs
}

// A self-consistency check, not evidence of fidelity: a recording the model
// makes of itself (recordPyTorch), replayed with its segments adopted, puts
// every allocation where the recording had it, without the allocator
// reserving anything itself. The evidence that the model is PyTorch's is in
// cmd/bfcsim (TestRealSnapshots): snapshots PyTorch recorded.
func TestPyTorchRecordedReplayMatches(t *testing.T) {
	type tc struct {
		trace    string
		streams  bool
		capacity uint64
		opts     allocators.Options
		cut      int
	}
	cases := []tc{
		{"transformer-train.jsonl", false, DefaultCapacity, nil, 0},
		{"transformer-train.jsonl", false, 3 << 30, nil, 0}, // releases and retries
		{"transformer-train.jsonl", false, 3 << 30, allocators.Options{"max_split_size_mb": "64"}, 0},
		{"transformer-train.jsonl", false, 4 << 30, allocators.Options{"memory_fraction": "0.8", "garbage_collection_threshold": "0.5"}, 0},
		{"transformer-train.jsonl", false, DefaultCapacity, allocators.Options{"expandable_segments": "true"}, 0},
		{"transformer-infer.jsonl", false, 96 << 20, allocators.Options{"expandable_segments": "true"}, 0},
		{"random.jsonl", true, DefaultCapacity, nil, 0},
		{"random.jsonl", true, 60 << 20, allocators.Options{"roundup_power2_divisions": "4"}, 0},
		{"cnn-infer.jsonl", true, 100 << 20, allocators.Options{"max_split_size_mb": "21"}, 0},
		// Recordings that start mid-run, with the state at their start.
		{"transformer-train.jsonl", false, DefaultCapacity, nil, 2000},
		{"transformer-infer.jsonl", false, 96 << 20, allocators.Options{"max_split_size_mb": "21"}, 5000},
		{"random.jsonl", false, DefaultCapacity, nil, 10001},
	}
	for _, c := range cases {
		evs := loadTrace(t, c.trace)
		if c.streams {
			evs = withStreams(evs)
		}
		rec := recordPyTorch(t, evs, c.capacity, c.opts, c.cut)
		for _, mode := range []string{allocators.PyTorchSegmentsAuto, allocators.PyTorchSegmentsRecorded} {
			t.Run(fmt.Sprintf("%s/%v/%dMiB/%v/cut=%d/%s", c.trace, c.streams, c.capacity>>20, c.opts, c.cut, mode), func(t *testing.T) {
				cfg := config(c.capacity, "pytorch")
				cfg.Allocators[0].Options = maps.Clone(c.opts)
				if cfg.Allocators[0].Options == nil {
					cfg.Allocators[0].Options = allocators.Options{}
				}
				cfg.Allocators[0].Options["segments"] = mode
				// The recording was made on a first-fit device: replay on one.
				cfg.Space.Options = allocators.Options{"placement": "first-fit"}
				r := replay(t, rec, cfg)[0]
				require.NotZero(t, r.AddrChecked)
				assert.Equal(t, r.AddrChecked, r.AddrMatched, "allocations at their recorded address")
				assert.Equal(t, r.RecordedOOMs, r.OOMsMatched, "allocations the recording failed")
				st := r.AllocatorStats
				assert.Zero(t, st["model_segments"], "segments the allocator reserved itself")
				assert.Zero(t, st["start_state_misplaced"])
				require.NotNil(t, r.Decisions)
				if mode == allocators.PyTorchSegmentsAuto {
					assert.Equal(t, "followed", r.Decisions.Outcome, r.Decisions.Reason)
				} else {
					assert.Equal(t, "adopted", r.Decisions.Outcome)
					assert.Zero(t, st["recorded_segments_refused"])
					assert.Zero(t, st["recorded_releases_ignored"])
					assert.Zero(t, st["recorded_segment_size_mismatch"])
					if c.opts["expandable_segments"] == "" && c.cut == 0 {
						assert.NotZero(t, st["recorded_segment_size_match"])
					}
				}
				checkPyTorchCounters(t, r)
			})
		}
	}
}

// With segments=model the recorded events and addresses are ignored: the
// replay is the model's own, whatever the recording says.
func TestPyTorchModelIgnoresRecording(t *testing.T) {
	evs := loadTrace(t, "transformer-infer.jsonl")
	rec := recordPyTorch(t, evs, DefaultCapacity, nil, 3000)
	cfg := config(DefaultCapacity, "pytorch")
	cfg.Allocators[0].Options = allocators.Options{"segments": "model"}
	r := replay(t, rec, cfg)[0]
	st := r.AllocatorStats
	assert.Zero(t, st["recorded_segments_adopted"])
	assert.Zero(t, st["start_state_placed"])
	assert.NotZero(t, st["model_segments"])
	assert.Less(t, r.AddrMatched, r.AddrChecked)
}

// The snapshots the PyTorch importer is tested with were written by a model
// of PyTorch's allocator made independently of bfcsim's (see
// trace/pytorch/testdata/make_snapshots.py). Imported and replayed with their
// segments adopted, their allocations land at the recorded addresses. In
// proto5-bigints two do not: a block allocated before the recording and
// freed during it is known only by its requested size, and PyTorch had
// handed it out with slack, which moves the next allocations in its segment.
func TestPyTorchImportedSnapshots(t *testing.T) {
	for _, c := range []struct {
		file        string
		checked     int64
		mismatching int64
	}{
		{"small-large.pickle", 277, 0},
		{"small-large.json", 277, 0},
		{"streams.pickle", 219, 0},
		{"segments-only.pickle", 58, 0},
		{"proto5-bigints.pickle", 242, 0},
	} {
		t.Run(c.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("../trace/pytorch/testdata", c.file))
			require.NoError(t, err)
			defer f.Close()
			var buf bytes.Buffer
			_, err = pytorch.Convert(t.Context(), f, trace.NewWriter(&buf), pytorch.Options{Device: -1})
			require.NoError(t, err)
			r, err := trace.NewReader(&buf, c.file)
			require.NoError(t, err)
			res, err := Replay(context.Background(), r, config(DefaultCapacity, "pytorch"))
			require.NoError(t, err)
			st := res[0].AllocatorStats
			assert.Equal(t, c.checked, res[0].AddrChecked)
			assert.Equal(t, c.checked-c.mismatching, res[0].AddrMatched)
			assert.Zero(t, st["model_segments"])
			assert.Zero(t, st["recorded_segments_refused"])
			assert.Zero(t, st["recorded_releases_ignored"])
			assert.Zero(t, st["start_state_misplaced"])
			assert.Zero(t, st["recorded_segment_size_mismatch"])
			checkPyTorchCounters(t, res[0])
		})
	}
}

// The recorded settings are where the allocator they name starts: each
// option the replay does not set comes from them and is listed, --set wins,
// other allocators ignore them. An allocation after an "oom:" mark is one
// the recording failed; recorded_oom_match says whether the replay failed
// it too.
func TestRecordedSettingsAndOOMs(t *testing.T) {
	const mib = 1 << 20
	evs := []trace.Event{
		{Op: trace.OpAlloc, ID: 1, Size: 60 * mib},
		{Op: trace.OpMark, Name: trace.RecordedOOMMark + " the recording failed this allocation"},
		{Op: trace.OpAlloc, ID: 2, Size: 50 * mib},
		{Op: trace.OpFree, ID: 2},
		{Op: trace.OpMark, Name: "oom (not a recorded failure: no colon)"},
		{Op: trace.OpAlloc, ID: 3, Size: 10 * mib},
	}
	rec := trace.RecordedSettings{Allocator: "pytorch", Options: map[string]string{
		"expandable_segments": "true", "max_split_size_mb": "unlimited", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}}

	cfg := config(100*mib, "pytorch", "bfc")
	cfg.Recorded = rec
	res := replay(t, evs, cfg)
	assert.Equal(t, []string{"expandable_segments", "max_split_size_mb"}, res[0].OptionsFromRecording)
	assert.Equal(t, true, res[0].Options["expandable_segments"])
	assert.EqualValues(t, 1, res[0].RecordedOOMs)
	assert.EqualValues(t, 1, res[0].OOMsMatched, "60 + 50 MiB do not fit in 100 MiB")
	assert.EqualValues(t, 1, res[0].FailedAllocs)
	assert.Nil(t, res[1].OptionsFromRecording, "the settings are pytorch's, not bfc's")
	assert.EqualValues(t, 1, res[1].RecordedOOMs)

	cfg = config(200*mib, "pytorch")
	cfg.Recorded = rec
	cfg.Allocators[0].Options = allocators.Options{"expandable_segments": "false"}
	res = replay(t, evs, cfg)
	assert.Equal(t, []string{"max_split_size_mb"}, res[0].OptionsFromRecording, "--set wins")
	assert.Equal(t, false, res[0].Options["expandable_segments"])
	assert.EqualValues(t, 1, res[0].RecordedOOMs)
	assert.Zero(t, res[0].OOMsMatched, "on 200 MiB the replay serves what the recording failed")

	cfg = config(100*mib, "pytorch")
	cfg.Recorded = trace.RecordedSettings{Allocator: "pytorch", Options: map[string]string{"max_split_size_mb": "7"}}
	_, err := Replay(context.Background(), &sliceSource{events: evs}, cfg)
	assert.ErrorContains(t, err, "max_split_size_mb came from the trace header's allocator_settings")
}
