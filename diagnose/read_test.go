package diagnose

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/diagnose/bfcdump"
)

const (
	pytorchMessage = "pytorchoom/testdata/pytorch-2.2-torchrun.txt"
	tfLog          = "bfcdump/testdata/oom.log"
)

// Read tells the three kinds of input apart, from a file or from standard
// input, compressed or not.
func TestReadTellsWhatAnInputHolds(t *testing.T) {
	ctx := context.Background()

	found, err := Read(ctx, pytorchMessage, nil)
	require.NoError(t, err)
	require.NotNil(t, found.PyTorch)
	assert.Nil(t, found.BFC)
	assert.Equal(t, pytorchMessage, found.PyTorch.Name)

	found, err = Read(ctx, tfLog, nil)
	require.NoError(t, err)
	require.NotNil(t, found.BFC, "a TensorFlow log is read again, as one")
	assert.Nil(t, found.PyTorch)
	assert.NotNil(t, found.BFC.Log)

	// A MemoryDump is binary, gzip-compressed here, on standard input.
	dump, err := bfcdump.Marshal(found.BFC)
	require.NoError(t, err)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err = zw.Write(dump)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	found, err = Read(ctx, "-", &gz)
	require.NoError(t, err)
	require.NotNil(t, found.BFC)
	assert.Nil(t, found.BFC.Log, "a dump has no log's figures")
}

// Standard input is read once: a TensorFlow log after a long stretch of
// other text is kept (past SpoolMemBytes, in a temporary file) while the
// scan for PyTorch's message reads it, and read again from there; the
// temporary file is gone afterwards.
func TestReadKeepsStandardInputForTheSecondReading(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	raw, err := os.ReadFile(tfLog)
	require.NoError(t, err)
	junk := strings.Repeat("step 1000 loss 0.25 lr 1e-4 ..................................................\n", SpoolMemBytes/64+1000)
	found, err := Read(context.Background(), "-", strings.NewReader(junk+string(raw)))
	require.NoError(t, err)
	require.NotNil(t, found.BFC)
	left, err := filepath.Glob(filepath.Join(tmp, "*"))
	require.NoError(t, err)
	assert.Empty(t, left, "the spool's temporary file is removed")
}

// Input that is none of the three says so, and names the line that spoke
// of running out of memory in other words.
func TestReadRefusesOtherText(t *testing.T) {
	_, err := Read(context.Background(), "-", strings.NewReader("hello\nRuntimeError: CUDA error: out of memory\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stdin: neither a MemoryDump protobuf, a TensorFlow BFC log nor a PyTorch out-of-memory message")
	assert.Contains(t, err.Error(), `line 2, "RuntimeError: CUDA error: out of memory"`)
}

// An interrupted read of standard input that never sends ends at once.
func TestReadStopsWhenCancelled(t *testing.T) {
	r, w := io.Pipe()
	t.Cleanup(func() { r.Close(); w.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Read(ctx, "-", r)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not stop")
	}
}

// A paste of PyTorch's figures is read as PyTorch's message, or refused
// in PyTorch's terms: it never goes to the TensorFlow parser.
func TestReadKeepsPyTorchFiguresFromTensorFlow(t *testing.T) {
	for _, text := range []string{
		"Tried to allocate 20.00 MiB (GPU 0; 1.96 GiB total capacity; 1.24 GiB already allocated; 2.88 MiB free; 1.25 GiB reserved in total by PyTorch)\n",
		"(GPU 0; 15.75 GiB total capacity; 79.11 MiB already allocated; 3.62 MiB free; 86.00 MiB reserved in total by PyTorch)\n",
		"MPS backend out of memory (MPS allocated: 9.57 GiB, other allocations: 17.35 GiB, max allowed: 27.20 GiB). Tried to allocate 292.50 MiB on private pool.\n",
	} {
		found, err := Read(context.Background(), "-", strings.NewReader(text))
		require.NoError(t, err, text)
		require.NotNil(t, found.PyTorch, text)
		assert.Nil(t, found.BFC)
	}
	for _, text := range []string{
		"Tried to allocate 20.00 MiB\n",
		"of which 3.62 MiB is free. Of the allocated memory 1.20 GiB is allocated by PyTorch\n",
	} {
		_, err := Read(context.Background(), "-", strings.NewReader(text))
		require.Error(t, err, text)
		assert.Contains(t, err.Error(), "holds part of PyTorch's out-of-memory message", text)
		assert.NotContains(t, err.Error(), "MemoryDump", text)
	}
}
