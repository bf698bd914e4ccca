package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bfcsim/bfcsim/trace"
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

// BenchmarkFitVsReplay measures fit against a replay of the same recording,
// both whole commands: a million events of PyTorch recording (the H100's
// train-default, its recorded training run repeated, as a longer run
// records it: segments reserved in the first repetition only). It reports
// fit's time over the replay's ("fit/replay"); the target is 3.
func BenchmarkFitVsReplay(b *testing.B) {
	path := millionEventRecording(b)
	e := &env{stdin: bytes.NewReader(nil), stdout: io.Discard, stderr: io.Discard}
	var replay, fit time.Duration
	for b.Loop() {
		start := time.Now()
		if code := run(context.Background(), e, []string{"replay", "-a", "pytorch", "-q", "-f", "json", path}); code != 0 {
			b.Fatalf("replay: exit %d", code)
		}
		replay += time.Since(start)
		start = time.Now()
		if code := run(context.Background(), e, []string{"fit", "-q", "-f", "json", path}); code != 0 {
			b.Fatalf("fit: exit %d", code)
		}
		fit += time.Since(start)
	}
	b.ReportMetric(fit.Seconds()/replay.Seconds(), "fit/replay")
	b.ReportMetric(replay.Seconds()/float64(b.N), "replay-s")
	b.ReportMetric(fit.Seconds()/float64(b.N), "fit-s")
}

// millionEventRecording writes traces/h100/train-default's recording
// repeated to about a million events, as a trace file, and returns its
// path: the start state once, then the recorded run again and again, its
// reserve events (the segments the first run made) and recorded addresses
// in the first repetition only.
func millionEventRecording(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	one := filepath.Join(dir, "one.jsonl")
	e := &env{stdin: bytes.NewReader(nil), stdout: io.Discard, stderr: io.Discard}
	if code := run(context.Background(), e, []string{"import", "pytorch", bundled + "h100/train-default.pickle.gz", "-o", one, "-q"}); code != 0 {
		b.Fatalf("import: exit %d", code)
	}
	f, err := os.Open(one)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	r, err := trace.NewReader(f, one)
	if err != nil {
		b.Fatal(err)
	}
	var start, body []trace.Event
	var maxID uint64
	inStart := true
	for r.Next() {
		ev := r.Event()
		maxID = max(maxID, ev.ID)
		if inStart {
			start = append(start, ev)
			inStart = !(ev.Op == trace.OpMark && ev.Name == "recording starts")
			continue
		}
		body = append(body, ev)
	}
	if err := r.Err(); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "train-1m.jsonl")
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := trace.NewWriter(out)
	if err := w.WriteHeader(r.Header()); err != nil {
		b.Fatal(err)
	}
	write := func(ev trace.Event) {
		if err := w.Write(ev); err != nil {
			b.Fatal(err)
		}
	}
	for _, ev := range start {
		write(ev)
	}
	var startIDs uint64 // the ids of the start state stay live throughout
	for _, ev := range start {
		startIDs = max(startIDs, ev.ID)
	}
	for rep := uint64(0); int(rep)*len(body) < 1_000_000; rep++ {
		for _, ev := range body {
			if rep > 0 {
				if ev.Op == trace.OpReserve || ev.Op == trace.OpRelease {
					continue
				}
				ev.Flags &^= trace.HasAddr | trace.HasT
				if ev.ID > startIDs && (ev.Op == trace.OpAlloc || ev.Op == trace.OpFree) {
					ev.ID += rep * maxID
				}
			}
			write(ev)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}
