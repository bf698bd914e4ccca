package allocators

import "testing"

// BenchmarkPyTorchAllocFree replays bundled traces straight against a fresh
// pytorch allocator on an 80 GiB virtual device, with no engine and no
// checker, as BenchmarkBFCAllocFree does for bfc. Creating the space and the
// allocator is left out of the timing; the segments it reserves are inside
// it. ns/pair is the time per allocation served and freed.
func BenchmarkPyTorchAllocFree(b *testing.B) {
	configs := []struct {
		name string
		cfg  func(*PyTorchConfig)
	}{
		{"default", func(*PyTorchConfig) {}},
		{"max_split_size_mb=64", func(c *PyTorchConfig) { c.MaxSplitSize = 64 << 20 }},
		{"expandable_segments", func(c *PyTorchConfig) { c.ExpandableSegments = true }},
	}
	for _, name := range []string{"transformer-train", "random", "sqlite-orders"} {
		events, slots := loadBenchTrace(b, "../traces/"+name+".jsonl")
		for _, c := range configs {
			b.Run(name+"/"+c.name, func(b *testing.B) {
				cfg := DefaultPyTorchConfig()
				c.cfg(&cfg)
				live, ok := make([]Block, slots), make([]bool, slots)
				var pairs int64
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					a := NewPyTorch(NewVirtualSpace(80<<30, CostModel{}, Paged), cfg)
					b.StartTimer()
					pairs += replayBench(b, a, events, live, ok)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pairs), "ns/pair")
			})
		}
	}
}
