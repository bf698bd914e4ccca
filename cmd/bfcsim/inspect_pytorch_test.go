package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/diagnose"
)

const pytorchOOM = "../../diagnose/pytorchoom/testdata/"

// A PyTorch out-of-memory message, from a file, as text and as JSON.
func TestInspectPyTorchOOM(t *testing.T) {
	file := pytorchOOM + "pytorch-2.1-capacty.txt"
	code, out, stderr := cli(t, "", "inspect", file)
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stderr)
	assert.True(t, strings.HasPrefix(out, "PyTorch out of memory on CUDA GPU 0: tried to allocate 298.00 MiB\n"), out)
	assert.Contains(t, out, "in the words of PyTorch 2.1")
	assert.Regexp(t, `(?m)^  free +12\.06 MiB  ±5\.12 KiB +line 4$`, out)
	assert.Regexp(t, `(?m)^  process 6324 +8\.06 GiB`, out)
	assert.Contains(t, out, "\nexplanation: other-process\n")

	code, out, stderr = cli(t, "", "inspect", "-f", "json", file)
	require.Equal(t, 0, code, stderr)
	var rep struct {
		Format  string `json:"format"`
		Request struct {
			Bytes uint64 `json:"bytes"`
		} `json:"request"`
		PyTorch map[string]json.RawMessage `json:"pytorch"`
		Source  struct {
			Format   string `json:"format"`
			Messages int    `json:"messages"`
		} `json:"source"`
		Explanation struct {
			Verdict   string `json:"verdict"`
			Confident bool   `json:"confident"`
			Reason    string `json:"reason"`
		} `json:"explanation"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.Equal(t, "pytorch-2.1", rep.Format)
	assert.Equal(t, "pytorch-2.1", rep.Source.Format)
	assert.Equal(t, 1, rep.Source.Messages)
	assert.Equal(t, uint64(312475648), rep.Request.Bytes, "298.00 MiB")
	for _, k := range []string{"total_capacity", "free", "allocated", "reserved", "reserved_unallocated", "allowed", "other_processes"} {
		assert.Contains(t, rep.PyTorch, k)
	}
	assert.Equal(t, "47620449894", string(rep.PyTorch["total_capacity"]), "44.35 GiB")
	assert.Equal(t, "12645827", string(rep.PyTorch["free"]), "12.06 MiB")
	assert.Equal(t, "null", string(rep.PyTorch["allowed"]))
	assert.JSONEq(t, `[{"pid":6324,"bytes":8654359101,"printed":"8.06 GiB","tolerance":5368709,"from":"Process 6324 has 8.06 GiB memory in use.","line":4}]`,
		string(rep.PyTorch["other_processes"]))
	assert.Equal(t, "other-process", rep.Explanation.Verdict)
	assert.True(t, rep.Explanation.Confident)
	assert.Contains(t, rep.Explanation.Reason, "8.06 GiB")

	// A 1.x message prints no process list: null, not [].
	code, out, stderr = cli(t, "", "inspect", "-f", "json", pytorchOOM+"pytorch-1.0-cached.txt")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.Equal(t, "null", string(rep.PyTorch["other_processes"]))
	assert.Equal(t, "fragmentation", rep.Explanation.Verdict)
}

// Pasted on standard input, compressed, with several messages: the last is
// explained, and the report says so.
func TestInspectPyTorchOOMStdin(t *testing.T) {
	raw, err := os.ReadFile(pytorchOOM + "pytorch-2.2-torchrun.txt")
	require.NoError(t, err)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err = zw.Write(raw)
	require.NoError(t, err)
	require.NoError(t, zw.Close())

	code, out, stderr := cli(t, gz.String(), "inspect", "-")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "read from stdin, lines 9–18\n")
	assert.Contains(t, out, "the input holds 2 out-of-memory messages (lines 5, 9): this report is on the last\n")
	assert.Contains(t, out, "on CUDA GPU 1:")

	// Quoted in an e-mail, with CRLF line ends.
	quoted := "> " + strings.ReplaceAll(strings.TrimSuffix(string(raw), "\n"), "\n", "\r\n> ") + "\r\n"
	code, out, stderr = cli(t, quoted, "inspect", "-", "-f", "json")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, `"verdict": "other-process"`)
}

// --chunks and --export apply to a BFC allocator's state, not to PyTorch's
// message; a text that is neither says it is none of the three.
func TestInspectPyTorchOOMErrors(t *testing.T) {
	file := pytorchOOM + "pytorch-1.8-allowed.txt"
	assertUsageError(t, []string{"inspect", file, "--chunks"}, "--chunks applies to a BFC allocator's state")

	dump := filepath.Join(t.TempDir(), "x.memdump")
	assertUsageError(t, []string{"inspect", file, "--export", dump}, "--export applies to a BFC allocator's state")
	assert.NoFileExists(t, dump)

	assertUsageError(t, []string{"inspect", pytorchOOM + "not-allocator.txt"},
		"neither a MemoryDump protobuf, a TensorFlow BFC log nor a PyTorch out-of-memory message")
	code, _, stderr := cli(t, "", "inspect", pytorchOOM+"not-allocator.txt")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `line 4, "RuntimeError: CUDA error: out of memory"`)

	code, _, stderr = cli(t, "just some text\n", "inspect", "-")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "bfcsim: stdin: neither a MemoryDump protobuf, a TensorFlow BFC log nor a PyTorch out-of-memory message")
}

// A TensorFlow log on standard input still reads as one when a long
// stretch of other text comes first: what the scan for a PyTorch message
// read is kept, past diagnose.SpoolMemBytes in a temporary file, and given to the
// TensorFlow reader.
func TestInspectTFLogAfterLongStdin(t *testing.T) {
	raw, err := os.ReadFile("testdata/tf-oom.log")
	require.NoError(t, err)
	junk := strings.Repeat("step 1000 loss 0.25 lr 1e-4 tokens/s 12345.6 ........................\n", diagnose.SpoolMemBytes/64+1000)
	require.Greater(t, len(junk), diagnose.SpoolMemBytes)
	code, out, stderr := cli(t, junk+string(raw), "inspect", "-")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "GPU_0_bfc")
	assert.Regexp(t, `\|[*x_]{100}\|`, out)
}
