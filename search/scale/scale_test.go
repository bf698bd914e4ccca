package scale

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/search"
	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
)

func readRec(t testing.TB, name string) *Recording {
	t.Helper()
	rec, err := ReadFile(context.Background(), "../../traces/h100/"+name+".pickle.gz", os.Stdin)
	require.NoError(t, err)
	return rec
}

// h100 are the recordings of traces/h100 whose steps ran at several sizes
// (their truth files say which), with the steps held out as the checks of
// the model hold them out.
var h100 = []struct {
	name   string
	values []int64
	held   []int
	// sameSize is the share of a held-out step's allocations the program
	// must have at the recorded size.
	sameSize, sameBlock float64
}{
	{"train-default", []int64{512, 1024, 256, 768, 1024, 384, 896, 640}, []int{1, 4}, 0.99, 0.99},
	{"train-expandable", []int64{512, 1024, 256, 768, 1024, 384, 896, 640}, []int{1, 4}, 0.99, 0.99},
	{"train-cppstacks", []int64{512, 1024, 256, 768, 1024, 384, 896, 640}, []int{1, 4}, 0.99, 0.99},
	// Some allocations' sizes are chosen per batch size and are no smooth
	// function of it (131 bytes more at some sizes than others, a
	// workspace at batch 96 alone): 740 of 775 at the exact size.
	{"resnet-default", []int64{64, 32, 96, 48, 64, 80}, []int{2}, 0.95, 0.97},
	{"resnet-expandable", []int64{64, 32, 96, 48, 64, 80}, []int{2}, 0.95, 0.97},
}

func heldOut(values []int64, held []int) []bool {
	known := make([]bool, len(values))
	for i := range known {
		known[i] = true
	}
	for _, h := range held {
		known[h] = false
	}
	return known
}

// A step left out of the model and predicted has the sizes the H100's step
// had, and fit on the predicted program finds the smallest memory limit
// the H100 ran the whole recording under (the truth file's), within 1%.
func TestHeldOutStepsMatchTheH100(t *testing.T) {
	for _, tc := range h100 {
		t.Run(tc.name, func(t *testing.T) {
			rec := readRec(t, tc.name)
			res, err := Run(context.Background(), rec, Request{Values: tc.values, Known: heldOut(tc.values, tc.held), To: tc.values})
			require.NoError(t, err)
			require.Len(t, res.Steps, len(tc.values))
			require.Len(t, res.Held, len(tc.held))
			for _, h := range res.Held {
				assert.GreaterOrEqual(t, float64(h.Same), tc.sameSize*float64(h.Allocs), "step %d: %d of %d at the recorded size", h.Step, h.Same, h.Allocs)
				assert.GreaterOrEqual(t, float64(h.SameBlock), tc.sameBlock*float64(h.Allocs), "step %d: %d of %d in the recorded block", h.Step, h.SameBlock, h.Allocs)
			}
			raw, err := os.ReadFile("../../traces/h100/" + tc.name + ".truth.json")
			require.NoError(t, err)
			var truth struct {
				Smallest uint64 `json:"smallest_limit_that_ran"`
			}
			require.NoError(t, json.Unmarshal(raw, &truth))
			if truth.Smallest == 0 {
				return // recorded without a limit search
			}
			spec := sim.AllocatorSpec{Name: "pytorch"}
			tr, err := res.Program.Load(context.Background(), []sim.AllocatorSpec{spec}, search.Options{Workers: 2, TolerateScratch: true})
			require.NoError(t, err)
			defer tr.Close()
			f, err := tr.FitOne(context.Background(), spec)
			require.NoError(t, err)
			require.True(t, f.Fits)
			off := float64(f.MinCapacityBytes)/float64(truth.Smallest) - 1
			t.Logf("fit on the predicted program: %d bytes, the H100's smallest limit %d (%+.2f%%)", f.MinCapacityBytes, truth.Smallest, 100*off)
			assert.InDelta(t, 0, off, 0.01)
		})
	}
}

// --fit-in agrees with fit: the program at the answer fits the capacity,
// the program at the next value does not.
func TestFitInAgreesWithFit(t *testing.T) {
	rec := readRec(t, "resnet-default")
	values := []int64{64, 32, 96, 48, 64, 80}
	steps, err := FindSteps(rec, len(values), "")
	require.NoError(t, err)
	m, err := NewModel(rec, steps, values, heldOut(values, nil))
	require.NoError(t, err)
	spec := sim.AllocatorSpec{Name: "pytorch"}
	sopt := search.Options{Workers: 2, TolerateScratch: true}
	const capacity = 6 << 30
	l, err := m.FitIn(context.Background(), rec, FitInOptions{Capacity: capacity, Spec: spec, Search: sopt})
	require.NoError(t, err)
	require.True(t, l.Fits)
	assert.Greater(t, l.Value, int64(96), "6 GiB holds more than the 4.4 GiB batch 96 needed")
	assert.LessOrEqual(t, l.MinCapacityBytes, uint64(capacity))
	assert.LessOrEqual(t, l.Checks, 16)
	next, err := m.At(rec, l.Value+1)
	require.NoError(t, err)
	tr, err := next.Load(context.Background(), []sim.AllocatorSpec{spec}, sopt)
	require.NoError(t, err)
	defer tr.Close()
	f, err := tr.FitOne(context.Background(), spec)
	require.NoError(t, err)
	assert.Greater(t, f.MinCapacityBytes, uint64(capacity), "the next value does not fit")
}

// --fit-in, with the answer for advise's settings, costs at most 10 fits
// of the recording: its replays, counted, against those a fit of the
// recording's steps makes (written by the model at their own values, as
// every program --fit-in tries is).
func TestFitInCostsAtMostTenFits(t *testing.T) {
	for _, tc := range []struct {
		name     string
		values   []int64
		capacity uint64
	}{
		{"train-default", []int64{512, 1024, 256, 768, 1024, 384, 896, 640}, 24 << 30},
		{"resnet-default", []int64{64, 32, 96, 48, 64, 80}, 24 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := readRec(t, tc.name)
			sopt := search.Options{Workers: 2, TolerateScratch: true}
			res, err := Run(context.Background(), rec, Request{Values: tc.values, Known: heldOut(tc.values, nil),
				FitIn: tc.capacity, Advise: true, Search: sopt})
			require.NoError(t, err)
			require.True(t, res.Largest.Fits)
			require.True(t, res.Advised.Fits)
			assert.GreaterOrEqual(t, res.Advised.Value, res.Largest.Value, "advise's settings fit no less")

			spec := sim.AllocatorSpec{Name: "pytorch"}
			all, err := NewModel(rec, res.Model.Steps, tc.values, heldOut(tc.values, nil))
			require.NoError(t, err)
			recorded, err := all.Write(rec, tc.values)
			require.NoError(t, err)
			tr, err := recorded.Load(context.Background(), nil, sopt)
			require.NoError(t, err)
			defer tr.Close()
			f, err := tr.FitOne(context.Background(), spec)
			require.NoError(t, err)
			t.Logf("%d replays for both answers, %d for a fit of the recording: %.1f fits", res.Advised.Replays, f.Probes,
				float64(res.Advised.Replays)/float64(f.Probes))
			assert.LessOrEqual(t, res.Advised.Replays, 10*f.Probes)

			// The advised answer holds: its settings fit the program
			// there, and not at the next value.
			aspec := sim.AllocatorSpec{Name: "pytorch", Options: res.Advised.Settings}
			for x, want := range map[int64]bool{res.Advised.Value: true, res.Advised.Value + 1: false} {
				p, err := res.Model.At(rec, x)
				require.NoError(t, err)
				tr, err := p.Load(context.Background(), nil, sopt)
				require.NoError(t, err)
				ok, err := tr.Fits(context.Background(), aspec, tc.capacity)
				tr.Close()
				require.NoError(t, err)
				assert.Equal(t, want, ok, "at %d", x)
			}
		})
	}
}

func TestStepsAndRequestsRefused(t *testing.T) {
	rec := readRec(t, "resnet-default")
	_, err := FindSteps(rec, 7, "")
	assert.ErrorContains(t, err, "allocates exactly 7 times")
	untagged := &Recording{Stacks: &trace.StackTable{}}
	for i := range 8 {
		untagged.Events = append(untagged.Events, trace.Event{Op: trace.OpAlloc, ID: uint64(i + 1), Size: 512})
	}
	_, err = FindSteps(untagged, 2, "")
	assert.ErrorContains(t, err, "names no call site")
	_, err = FindSteps(rec, 6, "no_such_function")
	assert.ErrorContains(t, err, `no call site named "no_such_function"`)
	steps, err := FindSteps(rec, 6, "torch_worker.py:85")
	require.NoError(t, err)
	found, err := FindSteps(rec, 6, "")
	require.NoError(t, err)
	assert.Equal(t, found[0].Start, steps[0].Start, "the call site found is the one named")
	_, err = NewModel(rec, found, []int64{64, 0, 0, 0, 0, 0}, []bool{true, false, false, false, false, false})
	assert.ErrorContains(t, err, "at least 2 steps")

	for _, bad := range []struct{ steps, to, out, fitIn, want string }{
		{"64,x", "", "", "", "--steps: value 2"},
		{"64,0", "", "", "", "at least 1"},
		{"64,32", "_", "o.jsonl", "", "--to: value 1"},
		{"64,32", "96", "", "", "--to and -o go together"},
		{"64,32", "", "", "lots", "--fit-in"},
	} {
		_, err := ParseRequest(bad.steps, bad.to, bad.out, bad.fitIn, "", "768MiB")
		assert.ErrorContains(t, err, bad.want, bad)
	}
	req, err := ParseRequest("64,_,32", "", "", "", "H100 80GB", "768MiB")
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, true}, req.Known)
	assert.Equal(t, uint64(85017493504-768<<20), req.FitIn)
}

// A size is the lowest-degree polynomial through the recorded points, in
// exact arithmetic; one odd point among four or more is tolerated.
func TestFitSize(t *testing.T) {
	f := fitSize([]point{{256, 4096}, {512, 4096}, {1024, 4096}})
	assert.Equal(t, Constant, f.kind)
	f = fitSize([]point{{32, 1000}, {48, 1500}, {64, 2000}, {80, 2500}})
	assert.Equal(t, Affine, f.kind)
	y, ok := f.at(96)
	assert.True(t, ok)
	assert.Equal(t, uint64(3000), y)
	f = fitSize([]point{{256, 256 * 256 * 2}, {512, 512 * 512 * 2}, {768, 768 * 768 * 2}, {1024, 1024 * 1024 * 2}})
	assert.Equal(t, Quadratic, f.kind)
	y, _ = f.at(2048)
	assert.Equal(t, uint64(2048*2048*2), y)
	// Sizes no polynomial gives come from the two nearest values.
	f = fitSize([]point{{32, 1000}, {48, 1500}, {64, 2131}, {80, 2500}})
	assert.Equal(t, Local, f.kind)
	y, _ = f.at(96)
	assert.Equal(t, uint64(2869), y, "beyond: the line through 64 and 80")
	y, _ = f.at(56)
	assert.Equal(t, uint64(1816), y, "between: the line through 48 and 64, rounded up")
	y, _ = f.at(64)
	assert.Equal(t, uint64(2131), y, "at a recorded value: its size")
	// Sizes a polynomial gives within a padding some values add (ResNet-50
	// on the H100): the polynomial through the most of them, from the
	// nearest recorded size.
	f = fitSize([]point{{64, 8388608}, {32, 4194304}, {48, 6291728}, {80, 10486032}})
	assert.Equal(t, Local, f.kind)
	y, _ = f.at(96)
	assert.Equal(t, uint64(12583184), y, "96 × 128 KiB + 272, as at 48 and 80")
	f = fitSize([]point{{64, 16056336}, {32, 8028176}, {48, 12042256}, {80, 20070547}})
	y, _ = f.at(96)
	assert.Equal(t, uint64(24084627), y, "the padding of 80, the nearest")
	// A workspace chosen at one value (a megabyte more) is no padding:
	// the line through the two nearest values.
	f = fitSize([]point{{64, 11141136}, {32, 7929872}, {48, 9535504}, {80, 13795535}})
	assert.Nil(t, f.trend)
	y, _ = f.at(96)
	assert.Equal(t, uint64(16449934), y)
	f = fitSize([]point{{32, 1000}, {32, 1000}})
	assert.Equal(t, Constant, f.kind)
	f = fitSize([]point{{32, 1000}, {32, 1200}})
	assert.Equal(t, Unexplained, f.kind, "one value, two sizes")
	f = fitSize([]point{{32, 1000}, {48, 1501}})
	y, _ = f.at(40)
	assert.Equal(t, uint64(1251), y, "rounded up to a whole byte")
}
