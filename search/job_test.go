package search

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/sim"
)

// A job needs what its neediest member needs; one that fits nowhere is
// decided by it.
func TestWeigh(t *testing.T) {
	for _, tc := range []struct {
		members  []FitResult
		fits     bool
		need     uint64
		deciding int
	}{
		{[]FitResult{{Fits: true, MinCapacityBytes: 4}}, true, 4, 0},
		{[]FitResult{{Fits: true, MinCapacityBytes: 4}, {Fits: true, MinCapacityBytes: 9}, {Fits: true, MinCapacityBytes: 2}}, true, 9, 1},
		{[]FitResult{{Fits: true, MinCapacityBytes: 9}, {Fits: true, MinCapacityBytes: 9}}, true, 9, 0},
		{[]FitResult{{Fits: true, MinCapacityBytes: 9}, {Fits: false}, {Fits: false}}, false, 0, 1},
	} {
		fits, need, deciding := weigh(tc.members)
		assert.Equal(t, tc.fits, fits)
		assert.Equal(t, tc.need, need)
		assert.Equal(t, tc.deciding, deciding)
	}
}

// A job's fit is each member's own, and the most of them; advice for a job
// of one is the trace's own.
func TestJob(t *testing.T) {
	specs := []sim.AllocatorSpec{{Name: "bfc"}, {Name: "naive"}}
	small := load(t, "nodups.jsonl", specs, Options{Workers: 2})
	big := load(t, "transformer-train.jsonl", specs, Options{Workers: 2})
	alone := func(tr *Trace) []FitResult {
		res, err := tr.Fit(context.Background())
		require.NoError(t, err)
		return res
	}
	s, b := alone(small), alone(big)
	fits, err := Job{small, big}.Fit(context.Background())
	require.NoError(t, err)
	require.Len(t, fits, 2)
	for i, f := range fits {
		assert.Equal(t, specs[i].Name, f.Allocator)
		assert.Equal(t, []uint64{s[i].MinCapacityBytes, b[i].MinCapacityBytes},
			[]uint64{f.Members[0].MinCapacityBytes, f.Members[1].MinCapacityBytes})
		assert.True(t, f.Fits)
		assert.Equal(t, max(s[i].MinCapacityBytes, b[i].MinCapacityBytes), f.MinCapacityBytes)
		assert.Equal(t, 1, f.Deciding, "the training trace needs more")
	}

	one, err := small.Advise(context.Background(), sim.AllocatorSpec{Name: "bfc"})
	require.NoError(t, err)
	both, err := Job{small, big}.Advise(context.Background(), sim.AllocatorSpec{Name: "bfc"})
	require.NoError(t, err)
	require.Len(t, both.Best.Members, 2)
	assert.Equal(t, max(both.Best.Members[0].MinCapacityBytes, both.Best.Members[1].MinCapacityBytes), both.Best.Fit.MinCapacityBytes)
	require.Len(t, one.Best.Members, 1)
	assert.Equal(t, one.Best.Fit, one.Best.Members[0])
}
