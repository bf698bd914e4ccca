package pytorchoom

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.inspect.txt and *.inspect.json from the reports")

// Each fixture's report, as text and as JSON, is kept in testdata to be
// reviewed as a diff when it changes (-rewrite).
func TestPyTorchOOMGolden(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.file, func(t *testing.T) {
			rep := NewReport(readFixture(t, fx.file))
			var text bytes.Buffer
			require.NoError(t, WriteText(&text, rep))
			js, err := json.MarshalIndent(rep, "", "  ")
			require.NoError(t, err)
			js = append(js, '\n')

			base := filepath.Join("testdata", strings.TrimSuffix(fx.file, ".txt"))
			for _, g := range []struct {
				path string
				got  []byte
			}{{base + ".inspect.txt", text.Bytes()}, {base + ".inspect.json", js}} {
				if *rewrite {
					require.NoError(t, os.WriteFile(g.path, g.got, 0o644))
					continue
				}
				want, err := os.ReadFile(g.path)
				require.NoError(t, err, "run go test -rewrite to create it")
				assert.Equal(t, string(want), string(g.got), g.path)
			}
		})
	}
}

// The text report aligns the figures and says when a verdict is not
// confident.
func TestPyTorchOOMWriteText(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteText(&b, NewReport(readFixture(t, "pytorch-2.2-truncated.txt"))))
	out := b.String()
	assert.Contains(t, out, "PyTorch out of memory on CUDA GPU 0: tried to allocate 1.16 GiB\n")
	assert.Contains(t, out, "explanation: fragmentation (not confident)\n")
	assert.Contains(t, out, "  reserved, unallocated  not in the paste\n")
	assert.Regexp(t, `(?m)^  free +471\.69 MiB  ±5\.12 KiB +line 3$`, out)
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, `: "`) { // quoted clauses run long
			assert.LessOrEqual(t, len([]rune(l)), 100, l)
		}
	}

	// A write error comes back.
	assert.Error(t, WriteText(failingWriter{}, NewReport(readFixture(t, "pytorch-2.2-hip.txt"))))
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }
