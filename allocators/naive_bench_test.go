package allocators

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkDeviceAllocFree replays traces straight against naive and aligned
// on a fresh 80 GiB paged virtual device (the replay's default), with no
// engine: for these allocators every allocation is a device reservation, so
// this times the virtual space. The bundled traces always run;
// $BFCSIM_BENCH_TRACE names one more (a recording of your own). ns/pair is
// the time per allocation served and freed.
func BenchmarkDeviceAllocFree(b *testing.B) {
	paths := []string{"../traces/transformer-train.jsonl", "../traces/random.jsonl"}
	if p := os.Getenv("BFCSIM_BENCH_TRACE"); p != "" {
		paths = append(paths, p)
	}
	for _, path := range paths {
		events, slots := loadBenchTrace(b, path)
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		for _, alloc := range []string{"naive", "aligned"} {
			b.Run(name+"/"+alloc, func(b *testing.B) {
				live, ok := make([]Block, slots), make([]bool, slots)
				var pairs int64
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					var a Allocator = NewNaive(NewVirtualSpace(80<<30, DefaultCostModel(), Paged))
					if alloc == "aligned" {
						var err error
						if a, err = NewAligned(a, 128); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
					pairs += replayBench(b, a, events, live, ok)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pairs), "ns/pair")
			})
		}
	}
}
