package sim

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/trace"
)

// sliceSource replays events held in memory, so that benchmarks measure the
// engine and the allocators rather than JSON parsing.
type sliceSource struct {
	events []trace.Event
	i      int
}

func (s *sliceSource) Next() bool         { s.i++; return s.i <= len(s.events) }
func (s *sliceSource) Event() trace.Event { return s.events[s.i-1] }
func (s *sliceSource) Err() error         { return nil }

// batchSource is a sliceSource that hands out batches, as a trace.Reader
// does: the benchmarks then time the engine, not a per-event copy that a
// replay of a file does not make.
type batchSource struct{ sliceSource }

func (s *batchSource) NextBatch(dst []trace.Event) []trace.Event {
	n := copy(dst[len(dst):cap(dst)], s.events[s.i:])
	s.i += n
	return dst[:len(dst)+n]
}

// loadTrace reads a bundled trace into memory, Slots assigned.
func loadTrace(b testing.TB, name string) []trace.Event {
	b.Helper()
	if !filepath.IsAbs(name) {
		name = "../traces/" + name
	}
	f, err := os.Open(name)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	r, err := trace.NewReader(f, name)
	if err != nil {
		b.Fatal(err)
	}
	var evs []trace.Event
	for r.Next() {
		ev := r.Event()
		ev.Stack = 0 // the stack table stays with the Reader: the events are written again alone
		evs = append(evs, ev)
	}
	if r.Err() != nil {
		b.Fatal(r.Err())
	}
	return evs
}

// BenchmarkReplay replays bundled traces against one allocator at a time and
// reports events per second of engine plus allocator (timing included,
// checker off, as in a default replay).
func BenchmarkReplay(b *testing.B) {
	for _, tr := range []string{"transformer-train.jsonl", "random.jsonl"} {
		evs := loadTrace(b, tr)
		for _, name := range allocators.Names() {
			b.Run(tr+"/"+name, func(b *testing.B) {
				cfg := Config{
					Allocators: []AllocatorSpec{{Name: name}},
					Space:      allocators.SpaceConfig{Kind: "virtual", Capacity: DefaultCapacity},
					// The planner reads the trace once more, to plan.
					Reread: func() (Source, error) { return &sliceSource{events: evs}, nil },
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Replay(context.Background(), &batchSource{sliceSource{events: evs}}, cfg); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(evs))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}

// BenchmarkReplayRecording is BenchmarkReplay with the series for plots
// recorded, as replay -o and plot do: the cost of the timeline, the memory
// map and the layout at the peak.
func BenchmarkReplayRecording(b *testing.B) {
	for _, tr := range []string{"transformer-train.jsonl", "random.jsonl"} {
		evs := loadTrace(b, tr)
		for _, name := range []string{"bfc", "naive"} {
			b.Run(tr+"/"+name, func(b *testing.B) {
				cfg := Config{
					Allocators: []AllocatorSpec{{Name: name}},
					Space:      allocators.SpaceConfig{Kind: "virtual", Capacity: DefaultCapacity},
					Record:     &RecordConfig{},
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Replay(context.Background(), &batchSource{sliceSource{events: evs}}, cfg); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(evs))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}

// BenchmarkReplayFile is BenchmarkReplay on the trace named by
// $BFCSIM_BENCH_TRACE (a recording of your own, held in memory whole), for
// the allocators in $BFCSIM_BENCH_ALLOCATORS (comma-separated; default bfc);
// it is skipped when the trace is not named.
func BenchmarkReplayFile(b *testing.B) {
	path := os.Getenv("BFCSIM_BENCH_TRACE")
	if path == "" {
		b.Skip("BFCSIM_BENCH_TRACE is not set")
	}
	names := []string{"bfc"}
	if s := os.Getenv("BFCSIM_BENCH_ALLOCATORS"); s != "" {
		names = strings.Split(s, ",")
	}
	evs := loadTrace(b, path)
	for _, name := range names {
		for _, record := range []bool{false, true} {
			label := name + "/plain"
			var rc *RecordConfig
			if record {
				label, rc = name+"/record", &RecordConfig{}
			}
			b.Run(label, func(b *testing.B) {
				cfg := Config{
					Allocators: []AllocatorSpec{{Name: name}},
					Space:      allocators.SpaceConfig{Kind: "virtual", Capacity: DefaultCapacity},
					Record:     rc,
					Reread:     func() (Source, error) { return &sliceSource{events: evs}, nil },
				}
				for b.Loop() {
					if _, err := Replay(context.Background(), &batchSource{sliceSource{events: evs}}, cfg); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(len(evs))/float64(b.N), "ns/event")
			})
		}
	}
}

// BenchmarkSortLayout sorts the blocks of a layout the size of the Python
// trace's peak (577,000 blocks of a bfc pool, 256-byte aligned, in the
// order of their slots) by address, as the layout at the peak is built.
func BenchmarkSortLayout(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 577_000
	blocks := make([]LayoutBlock, n)
	addr := uint64(0x10000000000)
	for i := range blocks {
		size := uint64(256 * (1 + rng.IntN(8)))
		blocks[i] = LayoutBlock{Addr: addr, Size: size, Requested: size - 8}
		addr += size + uint64(256*rng.IntN(2))
	}
	rng.Shuffle(n, func(i, j int) { blocks[i], blocks[j] = blocks[j], blocks[i] })
	work := make([]LayoutBlock, n)
	for b.Loop() {
		copy(work, blocks)
		sortLayout(&Layout{Blocks: work})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/block")
}
