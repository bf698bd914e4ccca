package tensorflow_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/bfcsim/bfcsim/internal/tfcapture"
	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/gen"
	"github.com/bfcsim/bfcsim/trace/tensorflow"
)

// BenchmarkConvertCapture converts captures of a growing pool whose regions
// lie one after another, the case that costs most: the layout is decided
// by replaying the capture both ways. The time per event should not grow
// with the capture.
func BenchmarkConvertCapture(b *testing.B) {
	for _, n := range []int64{100_000, 1_000_000} {
		g := gen.DefaultRandom()
		g.Events = n
		var evs []trace.Event
		if err := g.Generate(func(ev trace.Event) error { evs = append(evs, ev); return nil }); err != nil {
			b.Fatal(err)
		}
		c, err := tfcapture.FromTrace(evs, tfcapture.Options{Allocator: "GPU_0_bfc", Capacity: 64 << 30,
			BFC: map[string]string{"allow_growth": "true"}})
		if err != nil {
			b.Fatal(err)
		}
		var pb bytes.Buffer
		if err := tensorflow.WriteCapture(&pb, c); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("events=%d", len(c.Events)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := trace.NewWriter(io.Discard)
				st, err := tensorflow.Convert(context.Background(), bytes.NewReader(pb.Bytes()), "bench.xplane.pb", w, tensorflow.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if st.Layout != tensorflow.LayoutGrowth {
					b.Fatalf("layout %q, want growth", st.Layout)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(c.Events)), "ns/event")
		})
	}
}
