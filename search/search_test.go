package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
)

// openTrace opens a bundled trace for a search.
func openTrace(t testing.TB, name string) (*trace.Reader, sim.Setup) {
	t.Helper()
	f, err := os.Open("../traces/" + name)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	r, err := trace.NewReader(f, name)
	require.NoError(t, err)
	setup, err := sim.SetupOf(r.Header())
	require.NoError(t, err)
	return r, setup
}

func load(t testing.TB, name string, specs []sim.AllocatorSpec, opt Options) *Trace {
	t.Helper()
	r, setup := openTrace(t, name)
	tr, err := Load(context.Background(), r, setup, specs, opt)
	require.NoError(t, err)
	t.Cleanup(tr.Close)
	return tr
}

// randomEvents are events of every kind with random fields, as a reader
// hands them out.
func randomEvents(n int, seed uint64) []trace.Event {
	rng := rand.New(rand.NewPCG(seed, 1))
	evs := make([]trace.Event, n)
	line := int64(1)
	for i := range evs {
		line += int64(rng.IntN(3))
		ev := trace.Event{Line: line, Op: trace.Op(1 + rng.IntN(6))}
		switch ev.Op {
		case trace.OpAlloc:
			ev.Slot, ev.Size, ev.Align = rng.Uint32(), rng.Uint64()>>rng.IntN(64), 1<<rng.IntN(12)
			if rng.IntN(2) == 0 {
				ev.Flags |= trace.HasStream
				ev.Stream = rng.Int64() - rng.Int64()
			}
			if rng.IntN(2) == 0 {
				ev.Flags |= trace.HasAddr
				ev.Addr = rng.Uint64()
			}
			if rng.IntN(3) == 0 {
				ev.Flags |= trace.HasBlock
				ev.Block = rng.Uint64()
			}
		case trace.OpFree:
			ev.Slot, ev.Size = rng.Uint32(), rng.Uint64()
		case trace.OpReserve, trace.OpRelease:
			ev.Addr, ev.Size = rng.Uint64(), rng.Uint64()>>rng.IntN(64)
			if rng.IntN(2) == 0 {
				ev.Flags |= trace.HasStream
				ev.Stream = -rng.Int64N(5)
			}
		case trace.OpMark:
			ev.Name = fmt.Sprintf("mark %d %s", i, string(make([]byte, rng.IntN(300))))
		}
		evs[i] = ev
	}
	return evs
}

// A tape gives back every event as it was written, in memory and past it
// in its file, to any number of readers, by Next and NextBatch alike.
func TestTapeRoundTrip(t *testing.T) {
	for _, memory := range []int64{64 << 20, 0, 5000} {
		t.Run(fmt.Sprint(memory), func(t *testing.T) {
			defer func(m int64) { tapeMemory = m }(tapeMemory)
			tapeMemory = memory
			evs := randomEvents(20000, uint64(memory)+1)
			tp := newTape(t.TempDir())
			defer tp.close()
			for i := range evs {
				tp.append(&evs[i])
			}
			require.NoError(t, tp.finish())
			if memory < 1<<20 {
				require.NotNil(t, tp.file, "the tape spilled to its file")
			}
			r := tp.reader()
			for i := range evs {
				require.True(t, r.Next(), "event %d", i)
				require.Equal(t, evs[i], r.Event(), "event %d", i)
			}
			require.False(t, r.Next())
			require.NoError(t, r.Err())

			r2 := tp.reader()
			var got []trace.Event
			for {
				b := r2.NextBatch(make([]trace.Event, 0, 777))
				got = append(got, b...)
				if len(b) < 777 {
					break
				}
			}
			require.NoError(t, r2.Err())
			require.Equal(t, evs, got)
		})
	}
}

// A damaged tape is an error, not a panic or a wrong event.
func TestTapeCorrupt(t *testing.T) {
	tp := newTape(t.TempDir())
	evs := randomEvents(50, 9)
	for i := range evs {
		tp.append(&evs[i])
	}
	require.NoError(t, tp.finish())
	tp.chunks[0] = append(tp.chunks[0][:len(tp.chunks[0])-1], 0x80) // a varint that never ends
	r := tp.reader()
	for r.Next() {
	}
	assert.ErrorIs(t, r.Err(), errTapeCorrupt)

	tp.chunks[0] = []byte{7} // an op that does not exist
	r = tp.reader()
	assert.False(t, r.Next())
	assert.ErrorIs(t, r.Err(), errTapeCorrupt)
}

// Fit's answer is a bracket that replays confirm: the trace runs at the
// answer and fails one step below it, for allocators whose limit is the
// device and for pytorch's memory limit.
func TestFitBracket(t *testing.T) {
	specs := []sim.AllocatorSpec{{Name: "bfc"}, {Name: "naive"}, {Name: "arena"}, {Name: "pytorch"},
		{Name: "pytorch", Options: allocators.Options{"expandable_segments": "true"}}}
	for _, name := range []string{"transformer-train.jsonl", "cnn-infer.jsonl", "fragmenter.jsonl"} {
		for _, spec := range specs {
			t.Run(fmt.Sprintf("%s/%s%v", name, spec.Name, spec.Options), func(t *testing.T) {
				tr := load(t, name, []sim.AllocatorSpec{spec}, Options{Workers: 2})
				res, err := tr.Fit(context.Background())
				require.NoError(t, err)
				f := res[0]
				require.True(t, f.Fits)
				assert.Zero(t, f.MinCapacityBytes%f.GranularityBytes)
				assert.GreaterOrEqual(t, f.MinCapacityBytes, tr.Summary.PeakLiveBytes, "no allocator holds less than is live")
				ok, err := tr.probe(context.Background(), spec, f.MinCapacityBytes)
				require.NoError(t, err)
				assert.True(t, ok.OK, "it runs at the answer")
				below, err := tr.probe(context.Background(), spec, f.MinCapacityBytes-f.GranularityBytes)
				require.NoError(t, err)
				assert.False(t, below.OK, "and fails a step below")
				assert.Equal(t, len(f.Trials), f.Probes)
			})
		}
	}
}

// Fit's answer does not depend on how many replays run at once: the
// capacities a round probes depend only on the answers before it. (Which
// probes of a round end before a success makes them moot does.)
func TestFitDeterministic(t *testing.T) {
	spec := []sim.AllocatorSpec{{Name: "pytorch"}, {Name: "bfc"}}
	es := sim.AllocatorSpec{Name: "pytorch", Options: allocators.Options{"expandable_segments": "true"}}
	var answers [][]uint64
	for _, workers := range []int{1, 2, 5} {
		tr := load(t, "transformer-train.jsonl", spec, Options{Workers: workers})
		res, err := tr.Fit(context.Background())
		require.NoError(t, err)
		one, err := tr.FitOne(context.Background(), es)
		require.NoError(t, err)
		answers = append(answers, []uint64{res[0].MinCapacityBytes, res[1].MinCapacityBytes, one.MinCapacityBytes})
	}
	for i := 1; i < len(answers); i++ {
		assert.Equal(t, answers[0], answers[i])
	}
}

// With the same number of replays at once, the trials a fit lists are the
// same run after run, whichever probe of a round ends first: the report
// that lists them is deterministic.
func TestFitTrialsDeterministic(t *testing.T) {
	spec := []sim.AllocatorSpec{{Name: "pytorch"}, {Name: "bfc"}}
	var first [][]Probe
	for run := range 4 {
		tr := load(t, "transformer-train.jsonl", spec, Options{Workers: 4})
		res, err := tr.Fit(context.Background())
		require.NoError(t, err)
		var trials [][]Probe
		for _, r := range res {
			trials = append(trials, r.Trials)
			assert.Equal(t, len(r.Trials), r.Probes)
		}
		if run == 0 {
			first = trials
			continue
		}
		assert.Equal(t, first, trials, "run %d", run)
	}
}

// A trace that does not fit the device is tried on larger ones.
func TestFitBeyondTheDevice(t *testing.T) {
	tr := load(t, "transformer-train.jsonl", []sim.AllocatorSpec{{Name: "naive"}},
		Options{Space: allocators.SpaceConfig{Kind: "virtual", Capacity: 1 << 30}, Workers: 2})
	require.NotZero(t, tr.Unlimited[0].FailedAllocs, "2.25 GiB live does not fit 1 GiB")
	res, err := tr.Fit(context.Background())
	require.NoError(t, err)
	assert.True(t, res[0].Fits)
	assert.Greater(t, res[0].MinCapacityBytes, uint64(1<<30))
	assert.GreaterOrEqual(t, res[0].MinCapacityBytes, tr.Summary.PeakLiveBytes)
}

// A cancelled search stops with the context's error.
func TestFitCancelled(t *testing.T) {
	tr := load(t, "transformer-train.jsonl", []sim.AllocatorSpec{{Name: "bfc"}}, Options{Workers: 2})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tr.Fit(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

// Advise tries the settings one at a time from the recorded ones and never
// picks a candidate that needs a larger device than another it tried.
func TestAdvise(t *testing.T) {
	tr := load(t, "transformer-train.jsonl", []sim.AllocatorSpec{{Name: "bfc"}}, Options{Workers: 2})
	adv, err := tr.Advise(context.Background(), sim.AllocatorSpec{Name: "bfc"})
	require.NoError(t, err)
	require.NotEmpty(t, adv.Candidates)
	for _, c := range adv.Candidates {
		if c.Fit.Fits {
			assert.LessOrEqual(t, adv.Best.Fit.MinCapacityBytes, c.Fit.MinCapacityBytes, "%v", c.Settings)
		}
	}
	assert.Equal(t, map[string]string{"allow_growth": "true", "garbage_collection": "false"}, adv.Recorded.Settings)
	env := Env("bfc", adv.Best.Settings)
	assert.Contains(t, env, "TF_FORCE_GPU_ALLOW_GROWTH=")

	// An option set by hand is not searched.
	fixed, err := tr.Advise(context.Background(), sim.AllocatorSpec{Name: "bfc", Options: allocators.Options{"allow_growth": "false"}})
	require.NoError(t, err)
	for _, c := range fixed.Candidates {
		assert.Equal(t, "false", c.Settings["allow_growth"])
	}
}

func TestEnv(t *testing.T) {
	assert.Equal(t, "unset PYTORCH_CUDA_ALLOC_CONF", Env("pytorch", map[string]string{"expandable_segments": "false", "max_split_size_mb": "unlimited"}))
	assert.Equal(t, "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.8",
		Env("pytorch", map[string]string{"expandable_segments": "true", "max_split_size_mb": "128", "garbage_collection_threshold": "0.8", "roundup_power2_divisions": "0"}))
}
