package gen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/gen"
)

// maxDefaultBytes bounds the JSONL of every default workload: the defaults
// are bundled in traces/ and must stay small.
const maxDefaultBytes = 2 << 20

// opCounts counts emitted events by op.
type opCounts map[trace.Op]int64

func (c opCounts) total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// generate runs g through a trace.Writer and returns the JSONL and the
// number of events emitted by op.
func generate(t testing.TB, g gen.Generator) ([]byte, opCounts) {
	t.Helper()
	var buf bytes.Buffer
	w := trace.NewWriter(&buf)
	require.NoError(t, w.WriteHeader(g.Header()))
	counts := opCounts{}
	require.NoError(t, g.Generate(func(ev trace.Event) error {
		counts[ev.Op]++
		return w.Write(ev)
	}))
	require.NoError(t, w.Flush())
	return buf.Bytes(), counts
}

// replay reads data back with a trace.Reader, failing the test on any error.
// visit, if not nil, sees every event and the Reader's summary after it.
func replay(t testing.TB, data []byte, visit func(ev trace.Event, sum trace.Summary)) (trace.Header, trace.Summary) {
	t.Helper()
	r, err := trace.NewReader(bytes.NewReader(data), "gen.jsonl")
	require.NoError(t, err)
	defer r.Close()
	for r.Next() {
		if visit != nil {
			visit(r.Event(), r.Summary())
		}
	}
	require.NoError(t, r.Err())
	return r.Header(), r.Summary()
}

// unseeded are the workloads that draw no random numbers, and so have no
// Seed: tf-test replays TensorFlow's fixed test sequences.
var unseeded = map[string]bool{"tf-test": true}

// newWithSeed returns the default config of name with its Seed set, if it
// has one.
func newWithSeed(t testing.TB, name string, seed uint64) gen.Generator {
	t.Helper()
	g, err := gen.New(name)
	require.NoError(t, err)
	if f := reflect.ValueOf(g).Elem().FieldByName("Seed"); f.IsValid() {
		f.SetUint(seed)
	}
	return g
}

func TestNames(t *testing.T) {
	names := gen.Names()
	assert.Equal(t, []string{"cnn-infer", "fragmenter", "ramp", "random", "tf-test", "transformer-infer", "transformer-train"}, names)
	assert.True(t, slices.IsSorted(names))
}

func TestNew(t *testing.T) {
	for _, name := range gen.Names() {
		g, err := gen.New(name)
		require.NoError(t, err, name)
		assert.Equal(t, reflect.Pointer, reflect.TypeOf(g).Kind(), "%s: New returns a settable pointer", name)
		h := g.Header()
		assert.True(t, strings.HasPrefix(h.Name, name+" "), "%s: header name %q", name, h.Name)
		assert.Equal(t, strconv.Quote(name), h.Meta["workload"])
	}
	_, err := gen.New("nope")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"nope"`)
	for _, name := range gen.Names() {
		assert.Contains(t, err.Error(), name)
	}
}

// TestConfigFields checks what the CLI relies on to bind one flag per
// field: only int, int64, uint64, float64, bool and string fields, a Seed
// unless the workload draws no random numbers, and every field in the
// header's Meta as valid JSON.
func TestConfigFields(t *testing.T) {
	allowed := []reflect.Kind{reflect.Int, reflect.Int64, reflect.Uint64, reflect.Float64, reflect.Bool, reflect.String}
	for _, name := range gen.Names() {
		g, _ := gen.New(name)
		typ := reflect.TypeOf(g).Elem()
		require.Equal(t, reflect.Struct, typ.Kind())
		_, seeded := typ.FieldByName("Seed")
		assert.Equal(t, !unseeded[name], seeded, "%s has a Seed", name)
		meta := g.Header().Meta
		assert.Len(t, meta, typ.NumField()+1, "%s: one Meta key per field, plus workload", name)
		for i := range typ.NumField() {
			f := typ.Field(i)
			assert.True(t, f.IsExported(), "%s.%s", typ.Name(), f.Name)
			assert.Contains(t, allowed, f.Type.Kind(), "%s.%s", typ.Name(), f.Name)
		}
		for k, v := range meta {
			assert.True(t, json.Valid([]byte(v)), "%s: Meta[%s] = %q", name, k, v)
		}
		if !unseeded[name] {
			assert.Equal(t, "1", meta["seed"], name)
		}
	}
	meta := gen.DefaultTransformerTrain().Header().Meta
	assert.Equal(t, "512", meta["seq_len"])
	assert.Equal(t, "0.25", meta["seq_jitter"])
	assert.Equal(t, "true", gen.DefaultRandom().Header().Meta["free_at_end"])
}

// TestRoundTrip writes every workload, with its defaults and other seeds,
// and reads it back: the trace is valid, the counts match, t strictly
// increases, and the default traces are small.
func TestRoundTrip(t *testing.T) {
	for _, name := range gen.Names() {
		for _, seed := range []uint64{1, 2, 3} {
			if unseeded[name] && seed > 1 {
				continue
			}
			t.Run(name+"/seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
				g := newWithSeed(t, name, seed)
				data, counts := generate(t, g)
				assert.Less(t, len(data), maxDefaultBytes)

				lastT := math.Inf(-1)
				h, sum := replay(t, data, func(ev trace.Event, _ trace.Summary) {
					require.NotZero(t, ev.Flags&trace.HasT, "every event has a t")
					require.Greater(t, ev.T, lastT, "t strictly increases (line %d)", ev.Line)
					lastT = ev.T
				})
				assert.Equal(t, 1, h.Version)
				assert.Equal(t, "gen", h.Source)
				assert.Equal(t, "us", h.TimeUnit)
				assert.Equal(t, g.Header().Name, h.Name)
				if !unseeded[name] {
					assert.Equal(t, strconv.FormatUint(seed, 10), h.Meta["seed"])
				}

				assert.Equal(t, counts.total(), sum.Events)
				assert.Equal(t, counts[trace.OpAlloc], sum.Allocs)
				assert.Equal(t, counts[trace.OpFree], sum.Frees)
				assert.Equal(t, counts[trace.OpStep], sum.Steps)
				assert.Zero(t, sum.Marks+sum.Reserves+sum.Releases+sum.Skipped)
				if name != "random" && name != "ramp" && name != "tf-test" { // random emits steps only when asked
					assert.Positive(t, sum.Steps)
				}
				assert.Positive(t, sum.Frees)
			})
		}
	}
}

// TestDefaultSizes reports the size of each default trace (run with -v).
func TestDefaultSizes(t *testing.T) {
	for _, name := range gen.Names() {
		g, _ := gen.New(name)
		data, counts := generate(t, g)
		_, sum := replay(t, data, nil)
		t.Logf("%-18s %6d events %8d bytes  peak live %d bytes", name, counts.total(), len(data), sum.PeakLiveBytes)
		assert.Less(t, len(data), maxDefaultBytes, name)
		assert.Greater(t, counts.total(), int64(2000), name)
	}
}

func TestDeterminism(t *testing.T) {
	for _, name := range gen.Names() {
		a, _ := generate(t, newWithSeed(t, name, 7))
		b, _ := generate(t, newWithSeed(t, name, 7))
		c, _ := generate(t, newWithSeed(t, name, 8))
		assert.Equal(t, a, b, "%s: the same seed gives the same bytes", name)
		if !unseeded[name] {
			assert.NotEqual(t, a, c, "%s: another seed gives another trace", name)
		}
	}
}

func TestEmitErrorStops(t *testing.T) {
	errStop := errors.New("disk full")
	for _, name := range gen.Names() {
		g, _ := gen.New(name)
		calls := 0
		err := g.Generate(func(trace.Event) error {
			calls++
			if calls == 10 {
				return errStop
			}
			return nil
		})
		assert.ErrorIs(t, err, errStop, name)
		assert.Equal(t, 10, calls, "%s: nothing is emitted after the error", name)
	}
}

func TestInvalidConfig(t *testing.T) {
	train := func(f func(*gen.TransformerTrain)) gen.Generator {
		c := gen.DefaultTransformerTrain()
		f(&c)
		return c
	}
	infer := func(f func(*gen.TransformerInfer)) gen.Generator {
		c := gen.DefaultTransformerInfer()
		f(&c)
		return c
	}
	cnn := func(f func(*gen.CNNInfer)) gen.Generator {
		c := gen.DefaultCNNInfer()
		f(&c)
		return c
	}
	random := func(f func(*gen.Random)) gen.Generator {
		c := gen.DefaultRandom()
		f(&c)
		return c
	}
	frag := func(f func(*gen.Fragmenter)) gen.Generator {
		c := gen.DefaultFragmenter()
		f(&c)
		return c
	}
	tests := []struct {
		g    gen.Generator
		want string
	}{
		{train(func(c *gen.TransformerTrain) { c.Layers = 0 }), "transformer-train: layers must be at least 1, got 0"},
		{train(func(c *gen.TransformerTrain) { c.Heads = 7 }), "transformer-train: heads (7) must divide hidden (512)"},
		{train(func(c *gen.TransformerTrain) { c.SeqJitter = 1.5 }), "seq-jitter must be between 0 and 1, got 1.5"},
		{train(func(c *gen.TransformerTrain) { c.SeqJitter = math.NaN() }), "seq-jitter must be between 0 and 1"},
		{train(func(c *gen.TransformerTrain) { c.SeqLen = 1 << 30 }), "the attention scores would be larger than 256 TiB"},
		{train(func(c *gen.TransformerTrain) { c.Steps = -1 }), "steps must be at least 0"},
		{infer(func(c *gen.TransformerInfer) { c.GenTokens = 0 }), "transformer-infer: gen-tokens must be at least 1"},
		{infer(func(c *gen.TransformerInfer) { c.Hidden = 100 }), "heads (8) must divide hidden (100)"},
		{cnn(func(c *gen.CNNInfer) { c.Stages = 0 }), "cnn-infer: stages must be at least 1"},
		{cnn(func(c *gen.CNNInfer) { c.Stages = 40 }), "cnn-infer: stages must be at most 24"},
		{cnn(func(c *gen.CNNInfer) { c.MaxWorkspaceBytes = -1 }), "max-workspace-bytes must be at least 0"},
		{random(func(c *gen.Random) { c.Events = 1001 }), "random: events must be even with free-at-end"},
		{random(func(c *gen.Random) { c.MinSize = 0 }), "random: min-size must be at least 1, got 0"},
		{random(func(c *gen.Random) { c.MaxSize = 8 }), "random: max-size must be at least 16, got 8"},
		{random(func(c *gen.Random) { c.AlignProb = -0.1 }), "align-prob must be between 0 and 1"},
		{frag(func(c *gen.Fragmenter) { c.Count = 1000 }), "fragmenter: count must be a positive multiple of 2^rounds = 256, got 1000"},
		{frag(func(c *gen.Fragmenter) { c.Rounds = -1 }), "fragmenter: rounds must be at least 1"},
		{frag(func(c *gen.Fragmenter) { c.Rounds = 40 }), "fragmenter: rounds must be at most 30"},
		{frag(func(c *gen.Fragmenter) { c.SmallSize = 1 << 47 }), "fragmenter: the last round's blocks would be larger"},
	}
	for _, tt := range tests {
		emitted := 0
		err := tt.g.Generate(func(trace.Event) error { emitted++; return nil })
		if assert.Error(t, err, tt.want) {
			assert.Contains(t, err.Error(), tt.want)
		}
		assert.Zero(t, emitted, "%s: nothing is emitted for an invalid config", tt.want)
		assert.Equal(t, 1, tt.g.Header().Version, "the header of an invalid config is still well formed")
	}
	// Odd event counts are fine when nothing has to be freed at the end.
	c := gen.DefaultRandom()
	c.Events, c.FreeAtEnd = 1001, false
	assert.NoError(t, c.Generate(func(trace.Event) error { return nil }))
}

// weightTag reports whether tag names a parameter (as opposed to an
// activation, a gradient or optimizer state).
func weightTag(tag string) bool {
	return strings.HasSuffix(tag, ".weight") || strings.HasSuffix(tag, ".bias")
}

func TestTransformerTrain(t *testing.T) {
	c := gen.DefaultTransformerTrain()
	data, _ := generate(t, c)
	params := int64(12*c.Layers + 4)

	var (
		inWeights   = true // before the first batch
		weights     = map[uint64]bool{}
		weightBytes uint64
		steps       []string
		adam        = map[string]int64{}
		grads       int64
		seqLens     = map[int64]bool{}
		last        trace.Event
	)
	_, sum := replay(t, data, func(ev trace.Event, s trace.Summary) {
		last = ev
		switch ev.Op {
		case trace.OpAlloc:
			if ev.Tag == "input.ids" {
				inWeights = false
				seq := int64(ev.Size) / int64(8*c.Batch)
				assert.Zero(t, seq%8, "sequence length %d is a multiple of 8", seq)
				assert.GreaterOrEqual(t, seq, int64(math.Ceil(0.75*float64(c.SeqLen))))
				assert.LessOrEqual(t, seq, int64(c.SeqLen))
				seqLens[seq] = true
			}
			if inWeights {
				assert.True(t, weightTag(ev.Tag), "only weights before the first batch, got %s", ev.Tag)
				weights[ev.ID] = true
				weightBytes += ev.Size
			}
			for _, kind := range []string{".master", ".adam.exp_avg", ".adam.exp_avg_sq"} {
				if strings.HasSuffix(ev.Tag, kind) {
					assert.Empty(t, steps, "optimizer state is created in the first step only")
					adam[kind]++
				}
			}
			if strings.HasSuffix(ev.Tag, ".weight.grad") || strings.HasSuffix(ev.Tag, ".bias.grad") {
				grads++
			}
		case trace.OpFree:
			assert.False(t, weights[ev.ID], "weight %d is never freed", ev.ID)
		case trace.OpStep:
			if ev.Name == "load" {
				// The loading phase ends with only the weights live.
				assert.Empty(t, steps, "load comes first")
				assert.Equal(t, weightBytes, s.LiveBytes)
				assert.Equal(t, params, s.LiveAllocs)
				return
			}
			steps = append(steps, ev.Name)
			// Between steps only the weights and the optimizer state are
			// live: 2 bytes of fp16 weight and 3×4 bytes of fp32 state per
			// parameter element.
			assert.Equal(t, 7*weightBytes, s.LiveBytes, "live bytes at step %s", ev.Name)
			assert.Equal(t, 4*params, s.LiveAllocs, "live allocations at step %s", ev.Name)
		}
	})
	assert.Len(t, weights, int(params))
	assert.Equal(t, []string{"0", "1", "2", "3", "4", "5", "6", "7"}, steps)
	assert.Equal(t, trace.OpStep, last.Op, "the trace ends with a step")
	assert.Equal(t, map[string]int64{".master": params, ".adam.exp_avg": params, ".adam.exp_avg_sq": params}, adam)
	assert.Equal(t, int64(c.Steps)*params, grads, "every parameter gets one gradient per step")
	assert.Greater(t, len(seqLens), 1, "sequence lengths vary with SeqJitter")
	assert.Equal(t, 7*weightBytes, sum.LiveBytes, "weights and optimizer state live to the end")
}

// TestTransformerTrainSavedLIFO checks that the activations the forward pass
// keeps are freed by backward in exactly the reverse order of allocation.
func TestTransformerTrainSavedLIFO(t *testing.T) {
	c := gen.DefaultTransformerTrain()
	c.Layers, c.Steps = 3, 2
	data, _ := generate(t, c)
	const (
		idle = iota
		forward
		backward
	)
	phase := idle
	var fwd []uint64 // forward allocations, in order
	live := map[uint64]bool{}
	var saved, freed []uint64
	steps := 0
	replay(t, data, func(ev trace.Event, _ trace.Summary) {
		switch {
		case ev.Op == trace.OpAlloc && ev.Tag == "input.targets":
			phase, fwd, freed = forward, nil, nil
		case ev.Op == trace.OpAlloc && ev.Tag == "loss.value":
			phase, saved = backward, nil
			for _, id := range fwd {
				if live[id] {
					saved = append(saved, id)
				}
			}
		case ev.Op == trace.OpAlloc && ev.Tag == "amp.found_inf":
			phase = idle
			slices.Reverse(saved)
			assert.Equal(t, saved, freed, "saved activations are freed in reverse order")
			assert.Greater(t, len(saved), 17*c.Layers, "each block saves its activations")
			steps++
		case ev.Op == trace.OpAlloc && phase == forward:
			fwd = append(fwd, ev.ID)
			live[ev.ID] = true
		case ev.Op == trace.OpFree:
			if phase == backward && slices.Contains(saved, ev.ID) {
				freed = append(freed, ev.ID)
			}
			delete(live, ev.ID)
		}
	})
	assert.Equal(t, c.Steps, steps)
}

func TestTransformerTrainPeakGrowsWithBatch(t *testing.T) {
	peak := func(batch, seqLen int) uint64 {
		c := gen.DefaultTransformerTrain()
		c.Batch, c.SeqLen, c.Steps, c.SeqJitter = batch, seqLen, 2, 0
		data, _ := generate(t, c)
		_, sum := replay(t, data, nil)
		return sum.PeakLiveBytes
	}
	assert.Greater(t, peak(8, 256), peak(4, 256))
	assert.Greater(t, peak(4, 512), peak(4, 256))
}

func TestTransformerInfer(t *testing.T) {
	c := gen.DefaultTransformerInfer()
	data, _ := generate(t, c)
	cacheStep := uint64(c.Batch * c.Hidden * 2) // one more token of fp16 keys

	var (
		inWeights   = true
		weightBytes uint64
		steps       int
		cacheLive   = map[uint64]uint64{} // layer0's key cache: id → size
		cacheSizes  []uint64              // its sizes in the current request
	)
	replay(t, data, func(ev trace.Event, s trace.Summary) {
		switch ev.Op {
		case trace.OpAlloc:
			if ev.Tag == "input.ids" {
				inWeights = false
			}
			if inWeights {
				weightBytes += ev.Size
			}
			if ev.Tag == "layer0.attn.cache.k" {
				cacheLive[ev.ID] = ev.Size
				assert.LessOrEqual(t, len(cacheLive), 2, "a grown cache replaces the old one")
				if n := len(cacheSizes); n > 0 {
					assert.Equal(t, cacheSizes[n-1]+cacheStep, ev.Size, "the cache grows one token at a time")
				}
				cacheSizes = append(cacheSizes, ev.Size)
			}
			if ev.Tag == "layer0.attn.scores" {
				assert.Len(t, cacheLive, 1, "the old cache is freed before attention")
			}
		case trace.OpFree:
			delete(cacheLive, ev.ID)
		case trace.OpStep:
			if ev.Name == "load" {
				assert.Zero(t, steps, "load comes first")
				assert.Equal(t, weightBytes, s.LiveBytes, "only the weights are loaded")
				return
			}
			steps++
			gen := len(cacheSizes)
			assert.GreaterOrEqual(t, gen, c.GenTokens/2)
			assert.LessOrEqual(t, gen, c.GenTokens)
			cacheSizes = cacheSizes[:0]
			assert.Empty(t, cacheLive)
			assert.Equal(t, weightBytes, s.LiveBytes, "only the weights are live between requests")
		}
	})
	assert.Equal(t, c.Requests, steps)
}

func TestCNNInfer(t *testing.T) {
	for _, jitter := range []float64{0, 0.5} {
		c := gen.DefaultCNNInfer()
		c.BatchJitter = jitter
		data, _ := generate(t, c)

		var (
			weightBytes uint64
			weightCount int64
			live        = map[uint64]bool{}
			events      []trace.Event
			inputSizes  = map[uint64]bool{}
			blockInput  uint64 // the activation the current block reads
			steps       int
		)
		replay(t, data, func(ev trace.Event, s trace.Summary) {
			events = append(events, ev)
			switch ev.Op {
			case trace.OpAlloc:
				live[ev.ID] = true
				if weightTag(ev.Tag) {
					assert.Zero(t, steps+len(inputSizes), "weights come first")
					weightBytes += ev.Size
					weightCount++
				}
				switch {
				case ev.Tag == "input":
					inputSizes[ev.Size] = true
				case ev.Tag == "stem.maxpool":
					blockInput = ev.ID
				case strings.HasSuffix(ev.Tag, ".conv2.out"):
					assert.True(t, live[blockInput], "%s: the block input lives until the residual add", ev.Tag)
					blockInput = ev.ID
				}
			case trace.OpFree:
				delete(live, ev.ID)
				// A workspace is freed right after its convolution's output
				// is allocated.
				ws := events[len(events)-3]
				if strings.HasSuffix(ws.Tag, ".workspace") {
					assert.Equal(t, ws.ID, ev.ID)
				}
			case trace.OpStep:
				assert.Equal(t, weightBytes, s.LiveBytes, "run %s frees every transient", ev.Name)
				assert.Equal(t, weightCount, s.LiveAllocs)
				if ev.Name == "load" {
					assert.Zero(t, steps+len(inputSizes), "load ends the loading phase")
					return
				}
				steps++
			}
		})
		assert.Equal(t, c.Runs, steps)
		if jitter == 0 {
			assert.Len(t, inputSizes, 1, "a fixed batch gives the same input every run")
		} else {
			assert.Greater(t, len(inputSizes), 1, "batch sizes vary with BatchJitter")
			for size := range inputSizes {
				batch := size / (3 * 224 * 224 * 2)
				assert.GreaterOrEqual(t, batch, uint64(4))
				assert.LessOrEqual(t, batch, uint64(8))
			}
		}
	}
}

func TestRandom(t *testing.T) {
	c := gen.DefaultRandom()
	c.Events = 200_000
	data, counts := generate(t, c)
	minSize, below := uint64(math.MaxUint64), 0
	_, sum := replay(t, data, func(ev trace.Event, _ trace.Summary) {
		if ev.Op == trace.OpAlloc {
			minSize = min(minSize, ev.Size)
			if ev.Size < 4096 { // the geometric mean of 16 B and 1 MiB
				below++
			}
			assert.Zero(t, ev.Align)
		}
	})
	assert.Equal(t, int64(200_000), sum.Allocs+sum.Frees, "exactly Events alloc and free events")
	assert.Equal(t, counts.total(), sum.Events)
	assert.Equal(t, sum.Allocs, sum.Frees)
	assert.Zero(t, sum.LiveAllocs, "FreeAtEnd leaves nothing live")
	assert.Zero(t, sum.Steps)
	// The live count is Poisson around TargetLive: σ = √500 ≈ 22.
	target := int64(c.TargetLive)
	assert.GreaterOrEqual(t, sum.PeakLiveAllocs, target)
	assert.LessOrEqual(t, sum.PeakLiveAllocs, target+150, "the live count hovers around TargetLive")
	assert.GreaterOrEqual(t, minSize, uint64(c.MinSize))
	assert.LessOrEqual(t, sum.MaxAllocBytes, uint64(c.MaxSize))
	assert.InDelta(t, 0.5, float64(below)/float64(sum.Allocs), 0.02, "sizes are log-uniform")
}

func TestRandomOptions(t *testing.T) {
	c := gen.DefaultRandom()
	c.Events, c.StepEvery, c.AlignProb, c.FreeAtEnd = 10_001, 1000, 0.5, false
	data, _ := generate(t, c)
	var steps []string
	aligns := map[uint64]int64{}
	_, sum := replay(t, data, func(ev trace.Event, s trace.Summary) {
		switch ev.Op {
		case trace.OpAlloc:
			aligns[ev.Align]++
		case trace.OpStep:
			steps = append(steps, ev.Name)
			assert.Equal(t, int64(len(steps))*1000, s.Allocs+s.Frees, "a step every 1000 events")
		}
	})
	assert.Equal(t, []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}, steps)
	assert.Equal(t, int64(10_001), sum.Allocs+sum.Frees)
	assert.Positive(t, sum.LiveAllocs, "without FreeAtEnd the trace ends with live allocations")
	assert.InDelta(t, 0.5, float64(aligns[0])/float64(sum.Allocs), 0.03, "half the allocs are aligned")
	for _, a := range []uint64{512, 1024, 2048, 4096} {
		assert.InDelta(t, 0.125, float64(aligns[a])/float64(sum.Allocs), 0.02, "align %d", a)
	}
	assert.Len(t, aligns, 5, "no other alignment")
}

// TestRandomMemoryIsFlat checks that generating does not allocate per event:
// Events can be in the millions, streamed.
func TestRandomMemoryIsFlat(t *testing.T) {
	c := gen.DefaultRandom()
	c.Events = 100_000
	allocs := testing.AllocsPerRun(2, func() {
		require.NoError(t, c.Generate(func(trace.Event) error { return nil }))
	})
	assert.Less(t, allocs, 20.0)
}

func TestFragmenter(t *testing.T) {
	c := gen.DefaultFragmenter()
	data, _ := generate(t, c)
	perRound := map[string]int{}
	sizes := map[string]uint64{}
	var steps []string
	var probe uint64
	_, sum := replay(t, data, func(ev trace.Event, s trace.Summary) {
		switch ev.Op {
		case trace.OpAlloc:
			if ev.Tag == "probe" {
				probe = ev.Size
				return
			}
			perRound[ev.Tag]++
			sizes[ev.Tag] = ev.Size
		case trace.OpStep:
			steps = append(steps, ev.Name)
		}
	})
	for r := range c.Rounds {
		tag := "round" + strconv.Itoa(r)
		assert.Equal(t, c.Count>>r, perRound[tag], tag)
		assert.Equal(t, uint64(c.SmallSize)<<r, sizes[tag], tag)
	}
	assert.Len(t, steps, c.Rounds)
	assert.Equal(t, uint64(c.LargeSize), probe)
	assert.Zero(t, sum.LiveAllocs, "everything is freed at the end")
	// Live bytes stay under two rounds' worth.
	assert.Less(t, sum.PeakLiveBytes, uint64(2*int64(c.Count)*c.SmallSize))
}

// TestFragmenterDefeatsBestFit replays the fragmenter against a small
// best-fit-with-coalescing heap: no round can reuse a hole, so the heap ends
// up about four times the peak live bytes, and the final request lands above
// every hole. A random trace, for contrast, packs well.
func TestFragmenterDefeatsBestFit(t *testing.T) {
	fit := func(g gen.Generator) (*bestFit, uint64) {
		data, _ := generate(t, g)
		h := newBestFit()
		_, sum := replay(t, data, func(ev trace.Event, _ trace.Summary) {
			switch ev.Op {
			case trace.OpAlloc:
				top := h.top
				addr := h.alloc(ev.ID, ev.Size)
				if ev.Tag == "probe" || strings.HasPrefix(ev.Tag, "round") {
					assert.GreaterOrEqual(t, addr, top, "%s (%d bytes) fits no hole", ev.Tag, ev.Size)
				}
			case trace.OpFree:
				h.free(ev.ID)
			}
		})
		return h, sum.PeakLiveBytes
	}
	h, peak := fit(gen.DefaultFragmenter())
	frag := 1 - float64(peak)/float64(h.peakTop)
	assert.Greater(t, frag, 0.7, "fragmentation of best fit: peak live %d, heap %d", peak, h.peakTop)

	h, peak = fit(gen.DefaultRandom())
	assert.Less(t, 1-float64(peak)/float64(h.peakTop), 0.5, "a random trace packs well")
}

// bestFit is a minimal best-fit-with-coalescing heap over [0, ∞): requests
// are rounded to 256 bytes and placed in the smallest hole that fits (the
// lowest such), else at the top of the heap.
type bestFit struct {
	holes   []span // free spans below top, sorted by address, never adjacent
	blocks  map[uint64]span
	top     uint64
	peakTop uint64
}

type span struct{ addr, size uint64 }

func newBestFit() *bestFit { return &bestFit{blocks: map[uint64]span{}} }

func (h *bestFit) alloc(id, size uint64) uint64 {
	size = (size + 255) &^ 255
	best := -1
	for i, s := range h.holes {
		if s.size >= size && (best < 0 || s.size < h.holes[best].size) {
			best = i
		}
	}
	var addr uint64
	if best >= 0 {
		addr = h.holes[best].addr
		if h.holes[best].size == size {
			h.holes = slices.Delete(h.holes, best, best+1)
		} else {
			h.holes[best].addr += size
			h.holes[best].size -= size
		}
	} else {
		addr = h.top
		h.top += size
		h.peakTop = max(h.peakTop, h.top)
	}
	h.blocks[id] = span{addr, size}
	return addr
}

func (h *bestFit) free(id uint64) {
	b := h.blocks[id]
	delete(h.blocks, id)
	if b.size == 0 {
		return
	}
	i, _ := slices.BinarySearchFunc(h.holes, b.addr, func(s span, a uint64) int {
		return cmpUint(s.addr, a)
	})
	h.holes = slices.Insert(h.holes, i, b)
	if i+1 < len(h.holes) && h.holes[i].addr+h.holes[i].size == h.holes[i+1].addr {
		h.holes[i].size += h.holes[i+1].size
		h.holes = slices.Delete(h.holes, i+1, i+2)
	}
	if i > 0 && h.holes[i-1].addr+h.holes[i-1].size == h.holes[i].addr {
		h.holes[i-1].size += h.holes[i].size
		h.holes = slices.Delete(h.holes, i, i+1)
	}
	if last := h.holes[len(h.holes)-1]; last.addr+last.size == h.top {
		h.top = last.addr
		h.holes = h.holes[:len(h.holes)-1]
	}
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// BenchmarkRandom measures the generator alone, per event.
func BenchmarkRandom(b *testing.B) {
	c := gen.DefaultRandom()
	c.Events = 1_000_000
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Generate(func(trace.Event) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*c.Events), "ns/event")
}

// The default ramp is TensorFlow's NoDups test: 1023 allocations of 1..1023
// bytes, then their frees in the same order.
func TestRampIsNoDups(t *testing.T) {
	data, counts := generate(t, gen.DefaultRamp())
	assert.Equal(t, int64(1023), counts[trace.OpAlloc])
	assert.Equal(t, int64(1023), counts[trace.OpFree])
	var sizes []uint64
	_, sum := replay(t, data, func(ev trace.Event, _ trace.Summary) {
		if ev.Op == trace.OpAlloc {
			sizes = append(sizes, ev.Size)
		}
	})
	assert.Equal(t, uint64(1023*1024/2), sum.PeakLiveBytes)
	assert.Equal(t, uint64(1), sizes[0])
	assert.Equal(t, uint64(1023), sizes[1022])
	assert.Zero(t, sum.LiveAllocs)

	r := gen.Ramp{From: 4096, To: 10000, Step: 4096}
	_, counts = generate(t, r)
	assert.Equal(t, int64(2), counts[trace.OpAlloc], "4096 and 8192; 12288 is past To")
	assert.Zero(t, counts[trace.OpFree])
	assert.ErrorContains(t, gen.Ramp{From: 5, To: 4, Step: 1}.Validate(), "ramp: to must be at least 5")

	// Shuffled: the same sizes in another order, fixed by the seed.
	shuffled := gen.DefaultRamp()
	shuffled.Shuffle = true
	var order []uint64
	replay(t, first(generate(t, shuffled)), func(ev trace.Event, _ trace.Summary) {
		if ev.Op == trace.OpAlloc {
			order = append(order, ev.Size)
		}
	})
	assert.NotEqual(t, sizes, order)
	assert.ElementsMatch(t, sizes, order)
}

func first[A, B any](a A, _ B) A { return a }

// Every tf-test case is a valid trace whose header carries the test's memory
// limit; an unknown case is refused with the list of cases.
func TestTFTestCases(t *testing.T) {
	for _, c := range gen.TFTestCases() {
		g := &gen.TFTest{Case: c}
		data, counts := generate(t, g)
		h, sum := replay(t, data, nil)
		assert.Equal(t, counts.total(), sum.Events, c)
		assert.Positive(t, h.CapacityBytes, c)
		assert.Equal(t, "tf-test "+c, h.Name)
	}
	h, _ := replay(t, mustGenerate(t, &gen.TFTest{Case: "custom-limit"}), nil)
	assert.Equal(t, uint64(2<<20), h.CapacityBytes, "TestCustomMemoryLimit's 2 MiB")

	err := (&gen.TFTest{Case: "nope"}).Generate(func(trace.Event) error { return nil })
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown case "nope"`)
	assert.Contains(t, err.Error(), "exercise-coalescing")
}

func mustGenerate(t *testing.T, g gen.Generator) []byte {
	data, _ := generate(t, g)
	return data
}

// Write writes the same bytes as a header and the events written one by
// one, and stops when its context is done.
func TestWrite(t *testing.T) {
	g, err := gen.New("transformer-train")
	require.NoError(t, err)
	want, _ := generate(t, g)
	var got bytes.Buffer
	require.NoError(t, gen.Write(context.Background(), g, g.Header(), &got))
	assert.Equal(t, want, got.Bytes())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, gen.Write(ctx, g, g.Header(), io.Discard), context.Canceled)
}
