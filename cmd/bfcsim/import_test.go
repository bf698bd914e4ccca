package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/internal/outfile"
	"github.com/bfcsim/bfcsim/trace"
)

const mtraceLog = `= Start
@ /lib/x86_64-linux-gnu/libc.so.6:[0x33bcd] - 0x55ff72b492a0
@ ./prog:[0x1139] + 0x55ff72b494a0 0x1d8
@ /lib/x86_64-linux-gnu/libc.so.6:(_IO_file_doallocate+8c)[0x758cc] + 0x55ff72b49680 0x1000
@ ./prog:[0x1150] < 0x55ff72b494a0
@ ./prog:[0x1150] > 0x55ff72b4ace0 0x800
@ /lib/x86_64-linux-gnu/libc.so.6:(_IO_setb+55)[0x83045] - 0x55ff72b49680
`

const malloclabRep = `8192
2
5
1
a 0 100
a 1 2000
r 0 300
f 1
f 0
`

// writeFile writes text to name in a fresh temporary directory.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

// readTrace reads a trace file completely and returns its header, events
// and summary; it must be valid.
func readTrace(t *testing.T, path string) (trace.Header, []trace.Event, trace.Summary) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	r, err := trace.NewReader(f, path)
	require.NoError(t, err)
	defer r.Close()
	var evs []trace.Event
	for r.Next() {
		evs = append(evs, r.Event())
	}
	require.NoError(t, r.Err())
	return r.Header(), evs, r.Summary()
}

func TestImportMtrace(t *testing.T) {
	in := writeFile(t, "prog.mtrace", mtraceLog)
	out := filepath.Join(t.TempDir(), "prog.jsonl")
	code, stdout, stderr := cli(t, "", "import", "mtrace", in, "-o", out)
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stdout)
	assert.Equal(t, "imported 5 events (3 allocs, 2 frees; 1 free of an address allocated before tracing dropped), peak live 6.0 KiB, to "+out+"\n", stderr)

	h, evs, sum := readTrace(t, out)
	assert.Equal(t, trace.Header{Version: 1, Name: "prog", Source: "mtrace", Meta: map[string]string{}}, h)
	require.Len(t, evs, 5)
	assert.Equal(t, trace.Event{Line: 2, Op: trace.OpAlloc, ID: 1, Size: 0x1d8, Tag: "prog+0x1139", Addr: 0x55ff72b494a0, Flags: trace.HasAddr}, evs[0])
	assert.Equal(t, "_IO_file_doallocate", evs[1].Tag)
	assert.Equal(t, trace.OpFree, evs[2].Op, "realloc: the old block is freed")
	assert.Equal(t, uint64(1), evs[2].ID)
	assert.Equal(t, trace.Event{Line: 5, Op: trace.OpAlloc, ID: 3, Size: 0x800, Tag: "prog+0x1150", Addr: 0x55ff72b4ace0, Flags: trace.HasAddr, Slot: 0}, evs[3])
	assert.Equal(t, int64(1), sum.LiveAllocs)

	// The import replays, and the recorded addresses are checked.
	rep := replayJSON(t, out, "-a", "naive")
	res := rep["traces"].([]any)[0].(map[string]any)["results"].([]any)[0].(map[string]any)
	assert.Equal(t, map[string]any{"checked": 3.0, "matched": 0.0}, res["recorded_address_match"])
}

func TestImportMalloclab(t *testing.T) {
	in := writeFile(t, "short.rep", malloclabRep)
	out := filepath.Join(t.TempDir(), "short.jsonl")
	code, _, stderr := cli(t, "", "import", "malloclab", in, "-o", out, "--name", "my-short")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "imported 6 events (3 allocs, 3 frees; 1 realloc), peak live 2.2 KiB, to "+out+"\n", stderr)
	h, evs, sum := readTrace(t, out)
	assert.Equal(t, "my-short", h.Name)
	assert.Equal(t, "malloclab", h.Source)
	assert.Equal(t, map[string]string{"suggested_heap_size": "8192", "num_ids": "2", "num_ops": "5", "weight": "1"}, h.Meta)
	assert.Len(t, evs, 6)
	assert.Equal(t, uint64(2300), sum.PeakLiveBytes)
	assert.Zero(t, sum.LiveAllocs)
}

func TestImportWarnings(t *testing.T) {
	in := writeFile(t, "w.rep", strings.Replace(malloclabRep, "\n5\n", "\n7\n", 1))
	code, stdout, stderr := cli(t, "", "import", "malloclab", in)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "bfcsim: warning: "+in+":3: the header declares 7 ops, the file has 5\n"+
		"imported 6 events (3 allocs, 3 frees; 1 realloc), peak live 2.2 KiB, to standard output\n", stderr)
	assert.True(t, strings.HasPrefix(stdout, `{"bfcsim_trace":1,"name":"w","source":"malloclab"`), stdout)
}

func TestImportCompressedAndStdin(t *testing.T) {
	dir := t.TempDir()
	magic := map[string][]byte{".jsonl.gz": {0x1f, 0x8b}, ".jsonl.zst": {0x28, 0xb5, 0x2f, 0xfd}}
	for ext, want := range magic {
		out := filepath.Join(dir, "t"+ext)
		code, _, stderr := cli(t, mtraceLog, "import", "mtrace", "-", "-o", out)
		require.Equal(t, 0, code, stderr)
		data, err := os.ReadFile(out)
		require.NoError(t, err)
		assert.True(t, bytes.HasPrefix(data, want), "%s is compressed", ext)
		h, evs, _ := readTrace(t, out)
		assert.Equal(t, "mtrace", h.Name, "standard input is named after the format")
		assert.Len(t, evs, 5)
	}

	// A compressed input is decompressed.
	gz := filepath.Join(dir, "log.mtrace.gz")
	require.NoError(t, outfile.Write(gz, func(w io.Writer) error {
		_, err := io.WriteString(w, mtraceLog)
		return err
	}))
	code, stdout, stderr := cli(t, "", "import", "mtrace", gz, "--no-addr", "-o", "-")
	require.Equal(t, 0, code, stderr)
	assert.True(t, strings.HasPrefix(stdout, `{"bfcsim_trace":1,"name":"log","source":"mtrace"}`+"\n"), stdout)
	assert.NotContains(t, stdout, `"addr"`)
	assert.Equal(t, 6, strings.Count(stdout, "\n"))
	assert.Contains(t, stderr, "imported 5 events")
}

func TestImportErrors(t *testing.T) {
	good := writeFile(t, "good.mtrace", mtraceLog)
	bad := writeFile(t, "bad.mtrace", "= Start\n@ ./p:[0x1] + 0x10 0x10\n@ ./p:[0x1] + 0x20\n")
	badRep := writeFile(t, "bad.rep", "0\n1\n2\n1\na 0 8\nf 1\n")
	out := filepath.Join(t.TempDir(), "out.jsonl")
	assertUsageError(t, []string{"import"}, "import needs a format (malloclab, mtrace, pytorch, tensorflow) and an input file")
	assertUsageError(t, []string{"import", "mtrace"}, "import mtrace needs an input file, or - for standard input")
	assertUsageError(t, []string{"import", "pickle", good}, `unknown import format "pickle" (want one of malloclab, mtrace, pytorch, tensorflow)`)
	assertUsageError(t, []string{"import", "pickle"}, `unknown import format "pickle"`)
	assertUsageError(t, []string{"import", "mtrace", good, good}, "import takes a format and one input file, got 3 arguments")
	assertUsageError(t, []string{"import", "mtrace", filepath.Join(t.TempDir(), "missing")}, "no such file or directory")
	assertUsageError(t, []string{"import", "mtrace", t.TempDir()}, "is a directory")
	assertUsageError(t, []string{"import", "mtrace", bad, "-o", out}, bad+`:3: not an mtrace line: "@ ./p:[0x1] + 0x20"`)
	assertUsageError(t, []string{"import", "malloclab", badRep, "-o", out}, badRep+":6: free of id 1 that is not live")
	assertUsageError(t, []string{"import", "malloclab", good, "-o", out}, good+" is a glibc mtrace log, not a malloc-lab trace (bfcsim import mtrace reads it; bfcsim replay takes it as it is)")
	assertUsageError(t, []string{"import", "mtrace", fixtures + "streams.pickle", "-o", out}, "streams.pickle is a PyTorch memory snapshot, not a glibc mtrace log")
	assertUsageError(t, []string{"import", "malloclab", writeFile(t, "odd.rep", "# a comment\n4 2 3 1\nx\n"), "-o", out}, `odd.rep:3: unknown op "x"`)
	assertUsageError(t, []string{"import", "malloclab", badRep, "--no-addr"}, "--no-addr does not apply to the malloclab format")
	assertUsageError(t, []string{"import", "mtrace", good, "--device", "1"}, "--device does not apply to the mtrace format")
	assertUsageError(t, []string{"import", "mtrace", good, "-o", good}, "refusing to overwrite the input "+good+" with an output")
	assertUsageError(t, []string{"import", "mtrace", writeFile(t, "x.jsonl", `{"op":"alloc","id":1,"size":1}`+"\n")}, `:1: not an mtrace line: "{\"op\":\"alloc\",\"id\":1,\"size\":1}"`)
	assertUsageError(t, []string{"import", "mtrace", writeFile(t, "y.jsonl", `{"op":"alloc","id":1,"size":1}`)}, `: no mtrace output in 1 line (is this an mtrace log?)`)
	assert.NoFileExists(t, out, "a failed import writes no file")

	// --skip-invalid skips the bad line, and says so.
	code, _, stderr := cli(t, "", "import", "mtrace", bad, "--skip-invalid", "-o", out)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "bfcsim: warning: "+bad+`:3: not an mtrace line: "@ ./p:[0x1] + 0x20" (`+
		`want "@ CALLER + 0xADDR 0xSIZE", "@ CALLER - 0xADDR", "@ CALLER < 0xOLD", "@ CALLER > 0xNEW 0xSIZE" or "= Start") (skipped)`+"\n"+
		"imported 1 event (1 alloc, 0 frees; 1 invalid line skipped), peak live 16 B, to "+out+"\n", stderr)

	// A file of nothing but junk is not an mtrace log, even with --skip-invalid.
	junk := writeFile(t, "junk.txt", "hello\nworld\n")
	code, _, stderr = cli(t, "", "import", "mtrace", junk, "--skip-invalid", "-o", out+"2")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "bfcsim: "+junk+": no mtrace output in 2 lines (is this an mtrace log?)\n")
	assert.NoFileExists(t, out+"2")
}

func TestImportHelpListsFormats(t *testing.T) {
	code, out, _ := cli(t, "", "import", "--help")
	require.Equal(t, 0, code)
	for _, f := range importFormats {
		assert.Regexp(t, `(?m)^  `+f.name+`\s+`+regexp.QuoteMeta(f.help)+`$`, out)
	}
	assert.Contains(t, out, "--no-addr")
	assert.Regexp(t, `--device int\s+pytorch:`, out)
	assert.Regexp(t, `--allocator string\s+tensorflow:`, out)
}

// bfcsim --help names every allocator and every recording format.
func TestRootHelpListsAllocatorsAndFormats(t *testing.T) {
	code, out, _ := cli(t, "", "--help")
	require.Equal(t, 0, code)
	for _, f := range allocators.Factories() {
		assert.Regexp(t, `(?m)^  `+f.Name+`\s+`+regexp.QuoteMeta(f.Summary)+`$`, out)
	}
	for _, f := range importFormats {
		assert.Regexp(t, `(?m)^  `+f.name+`\s+`+regexp.QuoteMeta(f.help)+`$`, out)
	}
}
