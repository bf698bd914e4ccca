package search

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAxis(t *testing.T) {
	ax, err := ParseAxis("bfc.memory_limit=128MiB,1GiB")
	require.NoError(t, err)
	assert.Equal(t, Axis{Name: "bfc.memory_limit", Values: []string{"128MiB", "1GiB"}}, ax)
	ax, err = ParseAxis("aligned.base.allow_growth=false")
	require.NoError(t, err)
	assert.Equal(t, Axis{Name: "aligned.base.allow_growth", Values: []string{"false"}}, ax)

	for in, msg := range map[string]string{
		"bfc.allow_growth":         "want NAME.KEY=V1,V2,...",
		"allow_growth=true,false":  "want NAME.KEY=V1,V2,...",
		".allow_growth=true":       "want NAME.KEY=V1,V2,...",
		"bfc.=true":                "want NAME.KEY=V1,V2,...",
		"bfc.allow_growth=":        "no values after '='",
		"bfc.allow_growth=true,":   "value 2 is empty",
		"bfc.allow_growth=,true":   "value 1 is empty",
		"bfc.allow_growth=true,,x": "value 2 is empty",
		"bfc.allow_growth=1,2,1":   "1 is listed twice",
	} {
		_, err := ParseAxis(in)
		if assert.Error(t, err, in) {
			assert.Contains(t, err.Error(), msg, in)
		}
	}
}

func TestGridPoints(t *testing.T) {
	info := Grid{
		Paths: []string{"a.jsonl", "b.jsonl"},
		Axes: []Axis{
			{Name: "bfc.allow_growth", Values: []string{"true", "false"}},
			{Name: "bfc.fragmentation_fraction", Values: []string{"0", "0.01", "0.1"}},
		},
	}
	require.Equal(t, 6, info.Points())
	// Row-major: the last axis varies fastest.
	var got []string
	for p := range info.Points() {
		got = append(got, info.PointLabel(info.Point(p)))
	}
	assert.Equal(t, []string{
		"bfc.allow_growth=true bfc.fragmentation_fraction=0",
		"bfc.allow_growth=true bfc.fragmentation_fraction=0.01",
		"bfc.allow_growth=true bfc.fragmentation_fraction=0.1",
		"bfc.allow_growth=false bfc.fragmentation_fraction=0",
		"bfc.allow_growth=false bfc.fragmentation_fraction=0.01",
		"bfc.allow_growth=false bfc.fragmentation_fraction=0.1",
	}, got)
	assert.Equal(t, []string{"bfc.allow_growth=false", "bfc.fragmentation_fraction=0.01"}, info.PointSets(4))
	tr, p := info.JobOf(7)
	assert.Equal(t, [2]int{1, 1}, [2]int{tr, p}, "job 7: the second trace at its second point")

	none := Grid{Paths: []string{"a"}}
	assert.Equal(t, 1, none.Points(), "no axes: one point")
	assert.Equal(t, map[string]string{}, none.Point(0))
	assert.Equal(t, "(no grid)", none.PointLabel(none.Point(0)))
	assert.Empty(t, none.PointSets(0))
}

func TestShards(t *testing.T) {
	i, n, err := ParseShard("2/3")
	require.NoError(t, err)
	assert.Equal(t, [2]int{2, 3}, [2]int{i, n})
	for _, bad := range []string{"0/3", "4/3", "1/0", "-1/2", "a/b", "2", "2/3/4", "", "1/ 2"} {
		_, _, err := ParseShard(bad)
		assert.Error(t, err, bad)
	}
	assert.Equal(t, []int{0, 3, 6, 9}, ShardJobs(10, 1, 3))
	assert.Equal(t, []int{1, 4, 7}, ShardJobs(10, 2, 3))
	assert.Equal(t, []int{2, 5, 8}, ShardJobs(10, 3, 3))
	assert.Equal(t, []int{}, ShardJobs(2, 3, 3), "more shards than jobs: an empty shard")
	// Every job in exactly one shard.
	seen := map[int]int{}
	for i := 1; i <= 4; i++ {
		for _, k := range ShardJobs(11, i, 4) {
			seen[k]++
		}
	}
	assert.Len(t, seen, 11)
	for k, c := range seen {
		assert.Equal(t, 1, c, "job %d", k)
	}
}

// RunJobs runs every job, on several workers, and stops at the first
// failure, which it returns: the first in job order.
func TestRunJobs(t *testing.T) {
	var n atomic.Int64
	var done atomic.Int64
	err := RunJobs(context.Background(), []int{3, 5, 7, 9}, 2, func(_ context.Context, k int) error {
		n.Add(int64(k))
		return nil
	}, func() { done.Add(1) })
	require.NoError(t, err)
	assert.Equal(t, int64(24), n.Load())
	assert.Equal(t, int64(4), done.Load())

	bad := errors.New("job 5 failed")
	err = RunJobs(context.Background(), []int{1, 5, 9, 13, 17}, 3, func(ctx context.Context, k int) error {
		if k == 5 {
			return bad
		}
		<-ctx.Done() // the others wait until the failure cancels them
		return ctx.Err()
	}, nil)
	assert.ErrorIs(t, err, bad)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = RunJobs(ctx, []int{1, 2}, 1, func(context.Context, int) error { return nil }, nil)
	assert.ErrorIs(t, err, context.Canceled)
}
