package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkReplayFile is the whole command, end to end: a gzip'd trace file
// read, decoded and replayed against bfc, the report rendered. It reports
// events per second of wall time; b.ReportAllocs shows what a run costs
// beyond the per-event path.
func BenchmarkReplayFile(b *testing.B) {
	for _, name := range []string{"random.jsonl", "sqlite-orders.jsonl"} {
		raw, err := os.ReadFile(bundled + name)
		if err != nil {
			b.Fatal(err)
		}
		events := int64(bytes.Count(raw, []byte("\n")) - 1) // the header is not an event
		path := filepath.Join(b.TempDir(), name+".gz")
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		zw := gzip.NewWriter(f)
		if _, err := zw.Write(raw); err != nil {
			b.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		b.Run(name+".gz/bfc", func(b *testing.B) {
			b.ReportAllocs()
			e := &env{stdin: bytes.NewReader(nil), stdout: io.Discard, stderr: io.Discard}
			for b.Loop() {
				if code := run(context.Background(), e, []string{"replay", "-a", "bfc", "-q", "-f", "json", path}); code != 0 {
					b.Fatalf("exit %d", code)
				}
			}
			b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
