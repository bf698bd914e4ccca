package trace

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"testing"
)

// benchTraces are the bundled traces whose lines BenchmarkDecode decodes:
// generated ones with t and tag, and a PyTorch import with stream and addr.
var benchTraces = []string{"transformer-train", "random", "pytorch-train"}

// benchLines returns the event lines of benchTraces.
func benchLines(t testing.TB) [][]byte {
	var lines [][]byte
	for _, name := range benchTraces {
		l := traceLines(t, "../traces/"+name+".jsonl")
		lines = append(lines, l[1:]...) // without the header
	}
	return lines
}

// jsonEvent is an event line as encoding/json decodes it, for comparison.
type jsonEvent struct {
	Op     string  `json:"op"`
	ID     uint64  `json:"id"`
	Size   uint64  `json:"size"`
	Align  uint64  `json:"align"`
	Addr   uint64  `json:"addr"`
	Block  uint64  `json:"block"`
	T      float64 `json:"t"`
	Stream int64   `json:"stream"`
	Tag    string  `json:"tag"`
	Name   string  `json:"name"`
}

// BenchmarkDecode decodes the event lines of benchTraces, one pass over all
// of them per op, with the Reader's decoder, the fastjson decoder it
// replaced, and encoding/json into a struct.
func BenchmarkDecode(b *testing.B) {
	lines := benchLines(b)
	var size int64
	for _, l := range lines {
		size += int64(len(l))
	}
	run := func(b *testing.B, decode func([]byte)) {
		for _, l := range lines {
			decode(l) // intern the tags, grow the buffers
		}
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for _, l := range lines {
				decode(l)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lines)), "ns/event")
	}
	b.Run("specialised", func(b *testing.B) {
		r := newDecodeReader()
		run(b, func(l []byte) {
			if _, msg := r.decode(l); msg != "" {
				b.Fatal(msg)
			}
		})
	})
	b.Run("fastjson", func(b *testing.B) {
		ref := newRefDecoder()
		run(b, func(l []byte) {
			if _, msg := ref.decode(l); msg != "" {
				b.Fatal(msg)
			}
		})
	})
	b.Run("encoding_json", func(b *testing.B) {
		run(b, func(l []byte) {
			var ev jsonEvent
			if err := json.Unmarshal(l, &ev); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// syntheticTrace returns a trace of n allocs of tagged blocks, each freed at
// once, the shape of a generated trace.
func syntheticTrace(n int) []byte {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for i := range uint64(n) {
		w.Write(Event{Op: OpAlloc, ID: i, Size: 4096 + i*256, T: float64(i), Flags: HasT, Tag: "layer.attn.qkv"})
		w.Write(Event{Op: OpFree, ID: i, T: float64(i), Flags: HasT})
	}
	w.Flush()
	return buf.Bytes()
}

// compress returns data compressed with c.
func compress(b *testing.B, data []byte, c Compression) []byte {
	var buf bytes.Buffer
	zw, err := NewCompressWriter(&buf, c)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := zw.Write(data); err != nil {
		b.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// benchRead reads the trace data whole with a Reader per op. SetBytes counts
// the uncompressed size.
func benchRead(b *testing.B, data []byte, size int64) {
	b.SetBytes(size)
	b.ReportAllocs()
	var events int64
	for b.Loop() {
		events += readCount(b, bytes.NewReader(data), "bench")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
}

// BenchmarkReader measures the whole Reader, lines to events with their
// slots, on typical alloc/free lines, plain and compressed.
func BenchmarkReader(b *testing.B) {
	data := syntheticTrace(100_000)
	for _, c := range []struct {
		name string
		c    Compression
	}{{"plain", None}, {"gzip", Gzip}, {"zstd", Zstd}} {
		b.Run(c.name, func(b *testing.B) { benchRead(b, compress(b, data, c.c), int64(len(data))) })
	}
}

// BenchmarkReaderTraces measures the whole Reader on benchTraces.
func BenchmarkReaderTraces(b *testing.B) {
	for _, name := range benchTraces {
		b.Run(name, func(b *testing.B) {
			data := bytes.Join(traceLines(b, "../traces/"+name+".jsonl"), []byte("\n"))
			benchRead(b, data, int64(len(data)))
		})
	}
}

// BenchmarkReaderFile reads the trace named by $BFCSIM_BENCH_TRACE (a
// recording of your own, of any size and compression) with a Reader per op;
// it is skipped when the variable is unset.
func BenchmarkReaderFile(b *testing.B) {
	path := os.Getenv("BFCSIM_BENCH_TRACE")
	if path == "" {
		b.Skip("BFCSIM_BENCH_TRACE is not set")
	}
	var events int64
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		events += readCount(b, f, path)
		f.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
}

// readCount reads in whole as a trace named name and returns its events.
func readCount(b *testing.B, in io.Reader, name string) int64 {
	r, err := NewReader(in, name)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
	}
	if r.Err() != nil {
		b.Fatal(r.Err())
	}
	return r.Summary().Events
}

// BenchmarkDecodeChunks decodes chunks of whole lines as a decoding
// worker does, on one goroutine: the lines of benchTraces, or the first
// 64 MB of $BFCSIM_BENCH_TRACE (plain JSON Lines) when it is set.
func BenchmarkDecodeChunks(b *testing.B) {
	var text []byte
	if path := os.Getenv("BFCSIM_BENCH_TRACE"); path != "" {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		text, err = io.ReadAll(io.LimitReader(f, 64<<20))
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		text = text[bytes.IndexByte(text, '\n')+1 : bytes.LastIndexByte(text, '\n')+1] // whole event lines
	} else {
		text = append(bytes.Join(benchLines(b), []byte("\n")), '\n')
	}
	var chunks []*lineChunk
	for rest := text; len(rest) > 0; {
		n := min(len(rest), chunkBytes)
		if n < len(rest) {
			n = bytes.LastIndexByte(rest[:n], '\n') + 1
		}
		chunks = append(chunks, &lineChunk{buf: rest[:n]})
		rest = rest[n:]
	}
	lines := bytes.Count(text, []byte("\n"))
	d := decoder{tags: map[string]string{}}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		for _, c := range chunks {
			d.decodeLines(c)
			if len(c.bad) > 0 {
				b.Fatalf("line %d: %s", c.bad[0].at, c.bad[0].msg)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/line")
}
