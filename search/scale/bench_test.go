package scale

import (
	"context"

	"fmt"
	"testing"

	"github.com/bfcsim/bfcsim/search"

	"github.com/bfcsim/bfcsim/trace"
)

// synthetic builds a recording of steps, one per value: a prologue of
// weights, then each step's allocs allocations at sites that repeat every
// step, a tenth of a site's sizes constant, the rest affine in the value,
// each freed a few allocations later or at the step's end.
func synthetic(values []int64, allocs int) *Recording {
	rec := &Recording{Name: "synthetic", Stacks: &trace.StackTable{}}
	id := uint64(1)
	add := func(e trace.Event) { rec.Events = append(rec.Events, e) }
	for i := range 100 {
		add(trace.Event{Op: trace.OpAlloc, ID: id, Size: 1 << 20, Tag: fmt.Sprintf("weights:%d", i)})
		id++
	}
	for _, v := range values {
		var live []uint64
		for k := range allocs {
			size := uint64(4096)
			if k%10 != 0 {
				size = uint64(v)*uint64(k%97+1)*512 + 256
			}
			tag := fmt.Sprintf("site:%d", k%1000+1)
			if k == 0 {
				tag = "batch"
			}
			add(trace.Event{Op: trace.OpAlloc, ID: id, Size: size, Tag: tag})
			live = append(live, id)
			id++
			if len(live) > 8 {
				add(trace.Event{Op: trace.OpFree, ID: live[0]})
				live = live[1:]
			}
		}
		for _, l := range live {
			add(trace.Event{Op: trace.OpFree, ID: l})
		}
	}
	return rec
}

// BenchmarkModel finds, matches and models 8 steps of 100,000 allocations
// each (1.6 million events), and writes the program at other values.
func BenchmarkModel(b *testing.B) {
	values := []int64{64, 32, 96, 48, 64, 80, 112, 128}
	rec := synthetic(values, 100_000)
	known := make([]bool, len(values))
	for i := range known {
		known[i] = true
	}
	b.ReportAllocs()
	for b.Loop() {
		steps, err := FindSteps(rec, len(values), "")
		if err != nil {
			b.Fatal(err)
		}
		m, err := NewModel(rec, steps, values, known)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.At(rec, 256); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(rec.Events)), "events")
}

// BenchmarkFitIn finds the largest sequence length of the GPT-2 recording
// that fits 24 GiB, as recorded and with advise's settings.
func BenchmarkFitIn(b *testing.B) {
	rec := readRec(b, "train-default")
	values := []int64{512, 1024, 256, 768, 1024, 384, 896, 640}
	req := Request{Values: values, Known: heldOut(values, nil), FitIn: 24 << 30, Advise: true,
		Search: search.Options{Workers: 2, TolerateScratch: true}}
	for b.Loop() {
		if _, err := Run(context.Background(), rec, req); err != nil {
			b.Fatal(err)
		}
	}
}
