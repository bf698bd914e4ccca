package pytorchoom

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

// BenchmarkRead scans a 64 MiB training log for messages: log lines of
// every kind, with a message of each wording every 20,000 lines. Memory
// per operation stays at a message's worth of lines, whatever the size.
func BenchmarkRead(b *testing.B) {
	var msgs [][]byte
	for _, f := range []string{"pytorch-2.2-torchrun.txt", "pytorch-mps-gb-quoted.txt", "pytorch-1.13-quoted.txt", "pytorch-xpu-2.5.txt"} {
		data, err := os.ReadFile("testdata/" + f)
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, data)
	}
	var log bytes.Buffer
	for i := 0; log.Len() < 64<<20; i++ {
		if i%20000 == 19999 {
			log.Write(msgs[(i/20000)%len(msgs)])
			continue
		}
		fmt.Fprintf(&log, "[rank%d]: step %d loss %.4f lr 3.0e-4 grad_norm 1.25 tokens/s 181234 (out of 1000000 steps)\n", i%8, i, 2.5/float64(i%97+1))
	}
	data := log.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		in, err := Read(bytes.NewReader(data), "log")
		if err != nil {
			b.Fatal(err)
		}
		if in.Count == 0 {
			b.Fatal("no message found")
		}
	}
}
