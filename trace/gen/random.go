package gen

import (
	"fmt"
	"math"
	"strconv"

	"github.com/bfcsim/bfcsim/trace"
)

// Random is a memoryless allocation workload, the classic synthetic
// benchmark for general-purpose allocators: sizes log-uniform between
// MinSize and MaxSize, lifetimes random.
//
// Each event is an alloc with probability T/(T+n), where n is the number of
// live allocations and T is TargetLive, and otherwise the free of a live
// allocation chosen uniformly. This birth–death chain keeps n Poisson-
// distributed around T (standard deviation √T), so the live count hovers
// around TargetLive however long the trace is. Live ids sit in a slice with
// swap-remove, so every event is O(1) and memory stays proportional to the
// live count: Events may be in the billions, streamed.
type Random struct {
	// Seed drives every choice: alloc or free, sizes, alignments, victims.
	Seed uint64 `help:"seed for every choice"`
	// Events is the number of alloc and free events, in all (step events
	// are not counted). With FreeAtEnd it must be even.
	Events int64 `help:"alloc and free events in all (even with --free-at-end)"`
	// MinSize is the smallest allocation, in bytes (at least 1).
	MinSize int64 `help:"smallest allocation (bytes)"`
	// MaxSize is the largest allocation, in bytes; sizes are log-uniform in
	// [MinSize, MaxSize].
	MaxSize int64 `help:"largest allocation (bytes); sizes are log-uniform"`
	// TargetLive is the number of live allocations the trace hovers around.
	TargetLive int `help:"live allocations the trace hovers around"`
	// AlignProb is the probability that an alloc asks for an alignment, one
	// of 512, 1024, 2048 and 4096 bytes, chosen uniformly.
	AlignProb float64 `help:"probability an alloc asks for 512..4096-byte alignment"`
	// StepEvery emits a step event after every StepEvery alloc and free
	// events; 0 emits none.
	StepEvery int64 `help:"emit a step event every N events (0: none)"`
	// FreeAtEnd makes the trace end with nothing live: once the events left
	// are as many as the live allocations, only frees follow.
	FreeAtEnd bool `help:"free everything by the end"`
}

// DefaultRandom returns 20,000 events of 16 B to 1 MiB allocations around
// 500 live, all freed by the end: about 0.8 MB of JSONL.
func DefaultRandom() Random {
	return Random{
		Seed:       1,
		Events:     20000,
		MinSize:    16,
		MaxSize:    1 << 20,
		TargetLive: 500,
		FreeAtEnd:  true,
	}
}

var _ Generator = Random{}

// Header implements Generator.
func (c Random) Header() trace.Header {
	name := fmt.Sprintf("random events=%d min-size=%d max-size=%d target-live=%d seed=%d",
		c.Events, c.MinSize, c.MaxSize, c.TargetLive, c.Seed)
	return header("random", name, c)
}

// Validate reports the first invalid field, if any.
func (c Random) Validate() error {
	ck := checker{workload: "random"}
	ck.atLeast("Events", c.Events, 0)
	ck.atLeast("MinSize", c.MinSize, 1)
	ck.atLeast("MaxSize", c.MaxSize, c.MinSize)
	ck.atLeast("TargetLive", int64(c.TargetLive), 1)
	ck.atMost("TargetLive", int64(c.TargetLive), maxHeld)
	ck.fraction("AlignProb", c.AlignProb)
	ck.atLeast("StepEvery", c.StepEvery, 0)
	if ck.err == nil && c.MaxSize > maxTensorBytes {
		ck.fail("max-size must be at most %d, got %d", int64(maxTensorBytes), c.MaxSize)
	}
	if ck.err == nil && c.FreeAtEnd && c.Events%2 != 0 {
		ck.fail("events must be even with free-at-end (every alloc has its free), got %d", c.Events)
	}
	return ck.err
}

// Generate implements Generator.
func (c Random) Generate(emit func(trace.Event) error) error {
	if err := c.Validate(); err != nil {
		return err
	}
	e := newEmitter(emit, 0)
	rng := newRand(c.Seed)
	target := float64(c.TargetLive)
	lnMin, lnMax := math.Log(float64(c.MinSize)), math.Log(float64(c.MaxSize)+1)
	live := make([]uint64, 0, min(int64(2*c.TargetLive), c.Events))
	for n := int64(0); n < c.Events && e.err == nil; n++ {
		nlive := int64(len(live))
		alloc := nlive == 0 || rng.Float64()*(target+float64(nlive)) < target
		if c.FreeAtEnd && nlive >= c.Events-n {
			alloc = false // the rest must free what is live
		}
		if alloc {
			size := int64(math.Exp(lnMin + rng.Float64()*(lnMax-lnMin)))
			size = min(max(size, c.MinSize), c.MaxSize)
			var align uint64
			if c.AlignProb > 0 && rng.Float64() < c.AlignProb {
				align = 512 << rng.IntN(4)
			}
			live = append(live, e.allocAligned(size, align, ""))
		} else {
			i := rng.IntN(len(live))
			e.free(live[i])
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		}
		if c.StepEvery > 0 && (n+1)%c.StepEvery == 0 {
			e.step(strconv.FormatInt((n+1)/c.StepEvery-1, 10))
		}
	}
	return e.err
}
