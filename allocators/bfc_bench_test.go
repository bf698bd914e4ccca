package allocators

import (
	"fmt"
	"os"
	"testing"

	"github.com/bfcsim/bfcsim/trace"
)

// benchEvent is an alloc or free of a trace, kept in memory so that the
// timed loop measures the allocator alone.
type benchEvent struct {
	size, align uint64
	slot        uint32
	alloc       bool
}

// loadBenchTrace reads the alloc and free events of a bundled trace, and
// returns them with the number of slots they use.
func loadBenchTrace(b *testing.B, path string) ([]benchEvent, int) {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	r, err := trace.NewReader(f, path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var events []benchEvent
	slots := 0
	for r.Next() {
		ev := r.Event()
		switch ev.Op {
		case trace.OpAlloc:
			if ev.Size == 0 {
				continue // bfc refuses 0 bytes; the trace's free of it is skipped below
			}
			events = append(events, benchEvent{size: ev.Size, align: ev.Align, slot: ev.Slot, alloc: true})
			slots = max(slots, int(ev.Slot)+1)
		case trace.OpFree:
			events = append(events, benchEvent{slot: ev.Slot})
		}
	}
	if err := r.Err(); err != nil {
		b.Fatal(err)
	}
	return events, slots
}

// replayBench runs events against a, then frees what is still live. It
// returns the number of allocations served, each of which was freed.
func replayBench(b *testing.B, a Allocator, events []benchEvent, live []Block, ok []bool) int64 {
	var pairs int64
	for _, ev := range events {
		if ev.alloc {
			blk, err := a.Allocate(ev.size, ev.align)
			live[ev.slot], ok[ev.slot] = blk, err == nil
			continue
		}
		if ok[ev.slot] {
			if err := a.Free(live[ev.slot]); err != nil {
				b.Fatal(err)
			}
			ok[ev.slot] = false
			pairs++
		}
	}
	for slot := range ok {
		if ok[slot] {
			if err := a.Free(live[slot]); err != nil {
				b.Fatal(err)
			}
			ok[slot] = false
			pairs++
		}
	}
	return pairs
}

// BenchmarkBFCAllocFree replays bundled traces straight against a fresh bfc
// on an 80 GiB virtual device, with no engine and no checker. Creating the
// space and the allocator is left out of the timing; the pool's growth (its
// device reservations) is inside it. ns/pair is the time per allocation
// served and freed.
func BenchmarkBFCAllocFree(b *testing.B) {
	for _, name := range []string{"transformer-train", "random"} {
		events, slots := loadBenchTrace(b, "../traces/"+name+".jsonl")
		for _, growth := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/allow_growth=%v", name, growth), func(b *testing.B) {
				live, ok := make([]Block, slots), make([]bool, slots)
				var pairs int64
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					a := NewBFC(NewVirtualSpace(80<<30, CostModel{}, FirstFit), BFCConfig{AllowGrowth: growth})
					b.StartTimer()
					pairs += replayBench(b, a, events, live, ok)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pairs), "ns/pair")
			})
		}
	}
}

// BenchmarkBFCAllocFreeFile is BenchmarkBFCAllocFree on the trace named by
// $BFCSIM_BENCH_TRACE (a recording of your own, its allocs and frees held
// in memory); it is skipped when none is named. ns/event counts allocs and
// frees alike, as a replay's events_per_second does, so that it compares
// with another allocator replaying the same events pre-parsed.
func BenchmarkBFCAllocFreeFile(b *testing.B) {
	path := os.Getenv("BFCSIM_BENCH_TRACE")
	if path == "" {
		b.Skip("BFCSIM_BENCH_TRACE is not set")
	}
	events, slots := loadBenchTrace(b, path)
	for _, growth := range []bool{true, false} {
		b.Run(fmt.Sprintf("allow_growth=%v", growth), func(b *testing.B) {
			live, ok := make([]Block, slots), make([]bool, slots)
			var evs int64
			for b.Loop() {
				b.StopTimer()
				a := NewBFC(NewVirtualSpace(80<<30, CostModel{}, FirstFit), BFCConfig{AllowGrowth: growth})
				b.StartTimer()
				evs += 2 * replayBench(b, a, events, live, ok)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(evs), "ns/event")
		})
	}
}

// BenchmarkBFCManyFreeChunks times one allocation and free on a pool whose
// bin 2 holds n free chunks: n-1 of 1024 bytes, then one of 1792 at the
// highest address, each between blocks in use so that nothing merges. A
// 1792-byte request fits only the last, so TF's walk of the bin (the linear
// reference) passes every other chunk, while bfc's B-tree finds it by a
// lower-bound search.
func BenchmarkBFCManyFreeChunks(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("bfc/%d", n), func(b *testing.B) {
			a := NewBFC(NewVirtualSpace(1<<30, CostModel{}, FirstFit), BFCConfig{})
			var holes []Block
			for i := range n {
				size := uint64(1024)
				if i == n-1 {
					size = 1792
				}
				holes = append(holes, mustAlloc(b, a, size))
				mustAlloc(b, a, 256)
			}
			for _, h := range holes {
				mustFree(b, a, h)
			}
			want := holes[n-1].Addr
			b.ReportAllocs()
			for b.Loop() {
				blk, err := a.Allocate(1792, 0)
				if err != nil || blk.Addr != want {
					b.Fatalf("got %+v, %v; want the chunk at %#x", blk, err, want)
				}
				if err := a.Free(blk); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("linear/%d", n), func(b *testing.B) {
			r := newRefBFC(NewVirtualSpace(1<<30, CostModel{}, FirstFit), BFCConfig{})
			var holes []*refChunk
			for i := range n {
				size := uint64(1024)
				if i == n-1 {
					size = 1792
				}
				h, err := r.Allocate(size)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := r.Allocate(256); err != nil {
					b.Fatal(err)
				}
				holes = append(holes, h)
			}
			for _, h := range holes {
				r.Free(h)
			}
			want := holes[n-1].ptr
			b.ReportAllocs()
			for b.Loop() {
				c, err := r.Allocate(1792)
				if err != nil || c.ptr != want {
					b.Fatalf("got %+v, %v; want the chunk at %#x", c, err, want)
				}
				r.Free(c)
			}
		})
	}
}
