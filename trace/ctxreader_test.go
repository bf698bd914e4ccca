package trace

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Read waiting for input that does not come returns ctx's error once
// ctx is done, whatever the reader: a pipe Go's poller watches, a reader
// that is not a file. Input that comes is read as it comes.
func TestInterruptReaderEndsAWaitingRead(t *testing.T) {
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { pr.Close(); pw.Close() })
	ir, iw := io.Pipe()
	t.Cleanup(func() { ir.Close(); iw.Close() })
	for name, src := range map[string]struct {
		r io.Reader
		w io.Writer
	}{"a pipe": {pr, pw}, "a reader that is not a file": {ir, iw}} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			r, stop := InterruptReader(ctx, src.r)
			defer stop()
			go func() { _, _ = src.w.Write([]byte("some")) }()
			buf := make([]byte, 16)
			n, err := r.Read(buf)
			require.NoError(t, err)
			assert.Equal(t, "some", string(buf[:n]))

			done := make(chan error, 1)
			go func() {
				_, err := r.Read(buf)
				done <- err
			}()
			time.Sleep(20 * time.Millisecond) // the Read is waiting
			cancel()
			select {
			case err := <-done:
				assert.ErrorIs(t, err, context.Canceled)
			case <-time.After(5 * time.Second):
				t.Fatal("the waiting Read did not end")
			}
		})
	}
}

// A regular file is read to its end, and not once ctx is done.
func TestInterruptReaderRegularFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("x", 10000)), 0o644))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	r, stop := InterruptReader(ctx, f)
	defer stop()
	data, err := io.ReadAll(io.LimitReader(r, 5000))
	require.NoError(t, err)
	assert.Len(t, data, 5000)
	cancel()
	_, err = r.Read(make([]byte, 10))
	assert.ErrorIs(t, err, context.Canceled)
}
