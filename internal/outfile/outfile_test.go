package outfile

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A write that fails leaves the file as it was: no half-written file, no
// temporary file beside it.
func TestWriteFailedLeavesTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.json")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	err := Write(path, func(w io.Writer) error {
		_, _ = io.WriteString(w, "half")
		return errors.New("the replay failed")
	})
	require.Error(t, err)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "old", string(data))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left")

	require.NoError(t, Write(path, func(w io.Writer) error {
		_, err := io.WriteString(w, "new")
		return err
	}))
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "new", string(data))
}

// Abandon takes back what was written and the directory it made, and a
// Dir whose context is done writes nothing more.
func TestDirAbandon(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	ctx, cancel := context.WithCancel(context.Background())
	d, err := NewDir(ctx, dir)
	require.NoError(t, err)
	write := func(name string) error {
		return d.Write(name, func(w io.Writer) error { _, err := io.WriteString(w, name); return err })
	}
	require.NoError(t, write("a.png"))
	assert.FileExists(t, filepath.Join(dir, "a.png"))
	cancel()
	assert.ErrorIs(t, write("b.png"), context.Canceled)
	assert.NoFileExists(t, filepath.Join(dir, "b.png"))
	d.Abandon()
	assert.NoDirExists(t, dir)
}
