package trace

import (
	"bytes"
	"testing"
)

// BenchmarkReader measures decoding and validating typical alloc/free lines.
func BenchmarkReader(b *testing.B) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	const n = 100_000
	for i := range uint64(n) {
		w.Write(Event{Op: OpAlloc, ID: i, Size: 4096 + i*256, T: float64(i), Flags: HasT, Tag: "layer.attn.qkv"})
		w.Write(Event{Op: OpFree, ID: i, T: float64(i), Flags: HasT})
	}
	w.Flush()
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(data), "bench")
		if err != nil {
			b.Fatal(err)
		}
		for r.Next() {
		}
		if r.Err() != nil {
			b.Fatal(r.Err())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*n), "ns/event")
}
