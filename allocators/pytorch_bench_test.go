package allocators

import (
	"fmt"
	"testing"
)

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

// BenchmarkPyTorchUnmapRemap unmaps and maps again one page in the middle
// of an expandable segment's run that holds many allocated blocks, as a
// recording's segment_unmap and segment_map (or a crafted trace) can, over
// and over. The run splits and joins each time; the cost per pair must not
// grow with the blocks in the run (a block finds its run by address, so
// splitting and joining do not visit the blocks).
func BenchmarkPyTorchUnmapRemap(b *testing.B) {
	const mib = 1 << 20
	for _, blocks := range []int{1000, 20000} {
		b.Run(fmt.Sprintf("blocks=%d", blocks), func(b *testing.B) {
			cfg := DefaultPyTorchConfig()
			cfg.ExpandableSegments = true
			sp := NewVirtualSpace(64<<30, CostModel{}, Paged)
			p := NewPyTorch(sp, cfg)
			const block = 1536 << 10
			run := ptRoundUp(uint64(blocks)*block, ptLargeBuffer)
			p.RecordedReserve(VirtualBase, run, 0)
			live := make([]Block, blocks)
			for i := range live {
				blk, err := p.Allocate(block, 0)
				if err != nil {
					b.Fatal(err)
				}
				live[i] = blk
			}
			// Free 40 blocks in the middle: 60 MiB, which holds whole pages.
			mid := blocks / 2
			for i := mid; i < mid+40; i++ {
				if err := p.Free(live[i]); err != nil {
					b.Fatal(err)
				}
			}
			page := VirtualBase + ptRoundUp(live[mid].Addr-VirtualBase, ptLargeBuffer)
			b.ReportAllocs()
			for b.Loop() {
				p.RecordedRelease(page, 20*mib)
				p.RecordedReserve(page, 20*mib, 0)
			}
			if p.rec.refused > 0 || p.rec.releasesIgnored > 0 {
				b.Fatalf("%d reserves refused, %d releases ignored", p.rec.refused, p.rec.releasesIgnored)
			}
		})
	}
}
