package pytorchoom

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzRead: any bytes never panic, every message found has a request
// unless the paste starts after it or stops before it, has a figure, and
// has sane lines, and its report renders, in time linear in the input.
func FuzzRead(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.txt")
	for _, name := range files {
		if strings.HasSuffix(name, ".inspect.txt") {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add([]byte("CUDA out of memory. Tried to allocate 1 bytes. GPU 99999999999999999999 has"))
	f.Add([]byte("out of memory.\nout of memory.\n\xff\xfe out of\nmemory. Tried to allocate 17179869184.00 GiB (GPU 0;"))
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		s := NewScanner(bytes.NewReader(data))
		in := &Input{Name: "fuzz"}
		for s.Scan() {
			m := s.Message()
			if m.Request == nil && m.StartsAt == "" && !m.Truncated {
				t.Fatalf("a whole message without its request: %+v", m)
			}
			if !hasFigure(m) {
				t.Fatalf("a message without a figure: %+v", m)
			}
			if m.Line < 1 || m.EndLine < m.Line || m.EndLine > s.Lines() {
				t.Fatalf("lines %d–%d of %d", m.Line, m.EndLine, s.Lines())
			}
			in.Add(m)
		}
		in.Lines = s.Lines()
		if in.Last != nil {
			rep := NewReport(in)
			if err := WriteText(&bytes.Buffer{}, rep); err != nil {
				t.Fatal(err)
			}
			if _, err := json.Marshal(rep); err != nil {
				t.Fatal(err)
			}
		}
		if d := time.Since(start); d > time.Second+time.Duration(len(data))*time.Microsecond {
			t.Fatalf("%d bytes took %v", len(data), d)
		}
	})
}

func hasFigure(m *Message) bool {
	for _, nf := range m.figures() {
		if nf.f != nil {
			return true
		}
	}
	return false
}
