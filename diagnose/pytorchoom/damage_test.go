package pytorchoom

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gist is what a paste must keep of a message however it is damaged.
type gist struct {
	Format          Format
	GPU             int
	Device          string
	Figures         map[string]uint64
	Others          string
	Advice, ConfVar string
	Verdict         Verdict
	Confident       bool
	Count           int
	Exception       string
}

func gistOf(in *Input, withException bool) gist {
	m := in.Last
	g := gist{Format: m.Format, GPU: m.GPU, Device: m.Device, Figures: map[string]uint64{},
		Advice: m.Advice, ConfVar: m.ConfVar, Count: in.Count}
	for _, nf := range m.figures() {
		if nf.f != nil {
			g.Figures[nf.key] = nf.f.Bytes
		}
	}
	for _, p := range m.Others {
		g.Others += fmt.Sprintf("%d:%d ", p.PID, p.InUse.Bytes)
	}
	e := Explain(m)
	g.Verdict, g.Confident = e.Verdict, e.Confident
	if withException {
		g.Exception = m.Exception
	}
	return g
}

// lines splits text into lines without their ends.
func lines(text string) []string {
	return strings.Split(strings.TrimSuffix(strings.ReplaceAll(text, "\r\n", "\n"), "\n"), "\n")
}

// hardWrap cuts every line at width columns, as a terminal copy does:
// mid-word and mid-number.
func hardWrap(width int) func(string) string {
	return func(text string) string {
		var out []string
		for _, l := range lines(text) {
			for len(l) > width {
				out = append(out, l[:width])
				l = l[width:]
			}
			out = append(out, l)
		}
		return strings.Join(out, "\n") + "\n"
	}
}

// wordWrap breaks every line between words to at most width columns, as
// a mail client does.
func wordWrap(width int) func(string) string {
	return func(text string) string {
		var out []string
		for _, l := range lines(text) {
			lead := l[:len(l)-len(strings.TrimLeft(l, " "))]
			cur := lead
			for _, w := range strings.Fields(l) {
				if len(cur) > len(lead) && len(cur)+1+len(w) > width {
					out = append(out, cur)
					cur = lead
				}
				if len(cur) > len(lead) {
					cur += " "
				}
				cur += w
			}
			out = append(out, cur)
		}
		return strings.Join(out, "\n") + "\n"
	}
}

// prefixed puts p before every line.
func prefixed(p string) func(string) string {
	return func(text string) string {
		ls := lines(text)
		for i := range ls {
			ls[i] = p + ls[i]
		}
		return strings.Join(ls, "\n") + "\n"
	}
}

func crlf(text string) string { return strings.Join(lines(text), "\r\n") + "\r\n" }

func then(fs ...func(string) string) func(string) string {
	return func(text string) string {
		for _, f := range fs {
			text = f(text)
		}
		return text
	}
}

// However a fixture is pasted (wrapped at any column or between words,
// quoted, commented, prefixed, indented, with CRLF), the same figures and
// verdict come out.
func TestPyTorchOOMPasteDamage(t *testing.T) {
	damages := []struct {
		name string
		f    func(string) string
		// keepsException is whether the exception's name stays whole on
		// the line before the message.
		keepsException bool
		// keepsPrefixes is whether a log prefix on every line survives;
		// cutting lines at a column breaks them.
		keepsPrefixes bool
	}{
		{"hard wrap 23", hardWrap(23), false, false},
		{"hard wrap 41", hardWrap(41), false, false},
		{"hard wrap 80", hardWrap(80), false, false},
		{"hard wrap 97", hardWrap(97), false, false},
		{"word wrap 40", wordWrap(40), true, true},
		{"word wrap 76", wordWrap(76), true, true},
		{"quoted", prefixed("> "), true, true},
		{"quoted twice, wrapped", then(wordWrap(60), prefixed("> > ")), true, true},
		{"python comment, wrapped", then(wordWrap(70), prefixed("# ")), true, true},
		{"indented, wrapped", then(wordWrap(66), prefixed("    ")), true, true},
		{"rank prefix, wrapped", then(wordWrap(66), prefixed("[rank3]: ")), true, true},
		{"pytest, wrapped", then(wordWrap(66), prefixed("E   ")), true, true},
		{"crlf", crlf, true, true},
		{"crlf, quoted, hard wrap 61", then(hardWrap(61), prefixed("> "), crlf), false, false},
	}
	for _, fx := range fixtures {
		raw, err := os.ReadFile(filepath.Join("testdata", fx.file))
		require.NoError(t, err)
		want := readFixture(t, fx.file)
		for _, d := range damages {
			if !d.keepsPrefixes && fx.file == "pytorch-2.2-torchrun.txt" {
				continue // "[rank1]: " on every line, then cut at a column
			}
			t.Run(fx.file+"/"+d.name, func(t *testing.T) {
				in, err := Read(strings.NewReader(d.f(string(raw))), fx.file)
				require.NoError(t, err)
				assert.Equal(t, gistOf(want, d.keepsException), gistOf(in, d.keepsException))
			})
		}
	}
}

// Several messages in one line (a JSON record) and across a log: the last
// is the one reported, and each is counted.
func TestPyTorchOOMSeveralMessages(t *testing.T) {
	first := "CUDA out of memory. Tried to allocate 876.00 MiB. GPU 0 has a total capacity of 23.68 GiB of which 251.06 MiB is free. Including non-PyTorch memory, this process has 22.98 GiB memory in use. Of the allocated memory 22.65 GiB is allocated by PyTorch, and 77.68 MiB is reserved by PyTorch but unallocated."
	second := "CUDA out of memory. Tried to allocate 18.00 MiB. GPU 0 has a total capacity of 23.68 GiB of which 11.06 MiB is free. Including non-PyTorch memory, this process has 23.21 GiB memory in use. Of the allocated memory 22.79 GiB is allocated by PyTorch, and 173.99 MiB is reserved by PyTorch but unallocated."
	text := `{"sdar": {"error": "CUDA OOM: ` + first + `"}, "grpo": {"error": "CUDA OOM: ` + second + `"}}` + "\n"
	in, err := Read(strings.NewReader(text), "j")
	require.NoError(t, err)
	assert.Equal(t, 2, in.Count)
	assert.Equal(t, []int{1, 1}, in.MessageLines)
	assert.Equal(t, "18.00 MiB", in.Last.Request.Printed)
	assert.Equal(t, "173.99 MiB", in.Last.ReservedUnallocated.Printed)
	assert.False(t, in.Last.Truncated)
	// U = 173.99 MiB covers the 18.00 MiB request.
	assert.Equal(t, Fragmentation, Explain(in.Last).Verdict)

	// The torchrun fixture: rank 0's message, then rank 1's.
	tr := readFixture(t, "pytorch-2.2-torchrun.txt")
	assert.Equal(t, 2, tr.Count)
	assert.Equal(t, []int{5, 9}, tr.MessageLines)
	assert.Equal(t, 1, tr.Last.GPU)

	// A message cut short by the next one keeps what it has.
	cutShort := "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of\n" +
		"torch.OutOfMemoryError: " + second + "\n"
	in, err = Read(strings.NewReader(cutShort), "c")
	require.NoError(t, err)
	assert.Equal(t, 2, in.Count)
	assert.Equal(t, "18.00 MiB", in.Last.Request.Printed)
}

// The scanner's memory does not grow with the input: long inputs, long
// lines and many messages leave it holding a message's worth of lines.
func TestPyTorchOOMScannerFlatMemory(t *testing.T) {
	msg := "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.54 GiB. GPU 0 has a total capacity of 79.18 GiB of which 1.02 GiB is free. Of the allocated memory 77.22 GiB is allocated by PyTorch, and 93.93 MiB is reserved by PyTorch but unallocated.\n"
	r := &patternReader{n: 200_000, line: func(i int) string {
		switch {
		case i%5000 == 17:
			return msg
		case i == 1234:
			return strings.Repeat("x", 3*maxLineBytes) + " out of memory. Tried to allocate 1.00 GiB.\n"
		}
		return fmt.Sprintf("step %d loss %.3f\n", i, 1/float64(i+1))
	}}
	s := NewScanner(r)
	count, most := 0, 0
	for s.Scan() {
		count++
		most = max(most, len(s.win))
		require.Equal(t, "1.54 GiB", s.Message().Request.Printed)
	}
	require.NoError(t, s.Err())
	assert.Equal(t, 40, count)
	assert.Equal(t, 200_000, s.Lines())
	assert.LessOrEqual(t, most, maxBodyLines+4, "lines held")
}

// patternReader yields n generated lines.
type patternReader struct {
	n, i int
	line func(int) string
	buf  string
}

func (r *patternReader) Read(p []byte) (int, error) {
	for r.buf == "" {
		if r.i >= r.n {
			return 0, io.EOF
		}
		r.buf = r.line(r.i)
		r.i++
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}
