package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/trace/pytorch"
)

// stripTimings removes what differs between two runs of the same replay:
// the clock's figures and the input's path.
var stripTimings = regexp.MustCompile(`"(p50|p90|p99|p999|max|mean|replay_seconds|events_per_second|path)": ("[^"]*"|[0-9.e+-]+)`)

// A recording given to replay (and plot, compare, sweep, validate: they
// open traces the same way) is recognised by its content, whatever its
// file is called, and gives the same report as importing it and replaying
// the result.
func TestRecordingsReplayDirectly(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		format, file string
		args         []string
	}{
		{"pytorch", fixtures + "small-large.pickle", []string{"-a", "pytorch,bfc"}},
		{"pytorch", fixtures + "small-large.json", []string{"-a", "pytorch"}},
		{"pytorch", fixtures + "proto5-bigints.pickle", []string{"-a", "pytorch,planner"}},
		{"mtrace", "../../trace/mtrace/testdata/sort.mtrace", nil},
		{"malloclab", "../../trace/malloclab/testdata/small.rep", []string{"-a", "bfc,arena"}},
	} {
		imported := filepath.Join(dir, tc.format+filepath.Base(tc.file)+".jsonl")
		code, _, stderr := cli(t, "", "import", tc.format, tc.file, "-o", imported)
		require.Equal(t, 0, code, stderr)

		// The same bytes under a name that says nothing of the format.
		data, err := os.ReadFile(tc.file)
		require.NoError(t, err)
		anon := filepath.Join(dir, "recording.bin")
		require.NoError(t, os.WriteFile(anon, data, 0o644))

		args := append([]string{"replay", "-f", "json"}, tc.args...)
		code, viaImport, stderr := cli(t, "", append(args, imported)...)
		require.Equal(t, 0, code, stderr)
		code, direct, stderr := cli(t, "", append(args, tc.file)...)
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, stripTimings.ReplaceAllString(viaImport, ""), stripTimings.ReplaceAllString(direct, ""), tc.file)
		code, _, stderr = cli(t, "", append(args, anon)...)
		require.Equal(t, 0, code, "%s under another name: %s", tc.file, stderr)
	}

	// validate reads the converted trace.
	code, out, stderr := cli(t, "", "validate", fixtures+"streams.pickle")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "streams.pickle: valid")
	assert.Contains(t, out, "source=pytorch-snapshot")

	// Every recorded address of a snapshot replayed directly is
	// reproduced, as after an import.
	checked, matched := addressMatch(t, fixtures+"proto5-bigints.pickle", "-a", "pytorch")
	assert.EqualValues(t, 242, checked)
	assert.Equal(t, checked, matched)
}

// An input that is none of the formats gets one line saying what it looks
// like and what was expected.
func TestReplayUnknownInput(t *testing.T) {
	const want = "; expected a bfcsim trace (JSON Lines), a PyTorch memory snapshot (pickle or JSON), a TensorFlow profiler capture (*.xplane.pb or *.memory_profile.json.gz), a glibc mtrace log or a malloc-lab trace\n"
	text := writeFile(t, "notes.txt", "hello world\n")
	code, _, stderr := cli(t, "", "replay", text)
	assert.Equal(t, 2, code)
	assert.Equal(t, "bfcsim: "+text+`: text that is not a trace (its first line is "hello world")`+want, stderr)

	bin := writeFile(t, "weights.pt", "PK\x03\x04\x14\x00\x00\x00")
	code, _, stderr = cli(t, "", "validate", bin)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "a zip archive (torch.save writes these")

	list := writeFile(t, "list.pickle", "\x80\x04]\x94.")
	code, _, stderr = cli(t, "", "plot", list, "-a", "bfc", "--kind", "timeline", "-o", filepath.Join(t.TempDir(), "p.png"))
	assert.Equal(t, 2, code)
	assert.Equal(t, "bfcsim: "+list+": a pickle that is not a memory snapshot: its top level is a list, not a dict\n", stderr)
}

// On a terminal, import and replay draw a bar of the input's bytes read;
// -q hides it, and it never touches standard output. (The input is
// standard input, whose length is unknown, so that the bar is drawn while
// the input is read and not only once it is all read.)
func TestRecordingProgress(t *testing.T) {
	var snap bytes.Buffer
	opt := pytorch.DefaultSynthetic(50_000)
	opt.Frames = 4
	require.NoError(t, pytorch.WriteSynthetic(&snap, opt))

	for _, args := range [][]string{
		{"import", "pytorch", "-", "-o", filepath.Join(t.TempDir(), "t.jsonl")},
		{"replay", "-", "-a", "bfc"},
	} {
		var out, errOut bytes.Buffer
		e := &env{stdin: bytes.NewReader(snap.Bytes()), stdout: &out, stderr: &errOut, progress: true, redraw: time.Millisecond}
		require.Equal(t, 0, run(context.Background(), e, args), errOut.String())
		assert.Contains(t, errOut.String(), "stdin", "%v: the bar names the input", args)
		assert.Contains(t, errOut.String(), "MiB", "%v: and counts its bytes", args)
		assert.NotContains(t, out.String(), "\r", "%v: the bar is on standard error only", args)

		errOut.Reset()
		e.stdin = bytes.NewReader(snap.Bytes())
		require.Equal(t, 0, run(context.Background(), e, append(args, "-q")))
		assert.NotContains(t, errOut.String(), "MiB", "%v -q: no bar", args)
	}
}

// A recording replayed as it is is followed, on standard error, by what its
// conversion made of it; -q leaves the line out.
func TestRecordingConversionNote(t *testing.T) {
	const real = fixtures + "real/assignment2-systems.pickle.gz"
	code, _, stderr := cli(t, "", "replay", real, "-a", "bfc")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "converted "+real+" (a PyTorch memory snapshot) on the fly: 4,871 events (2,609 allocs, 2,162 frees; device 0, "+
		"447 allocations live when the recording started, 96 segments held then, 208 blocks of unknown size "+
		"(freed during the recording; their requested sizes are used), "+
		"2 marks where phases the program named begin and end (external_annotations), allocator settings expandable_segments=false garbage_collection_threshold=0 max_split_size_mb=unlimited), peak live 3.59 GiB\n", stderr)
	code, _, stderr = cli(t, "", "replay", real, "-a", "bfc", "-q")
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr)
	code, _, stderr = cli(t, "", "replay", bundled+"nodups.jsonl", "-a", "bfc")
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr, "a trace needs no note")
}
