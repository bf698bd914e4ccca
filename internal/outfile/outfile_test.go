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

// A failed WithDir takes back what was written and the directory it made,
// and a Dir whose context is done writes nothing more.
func TestWithDirTakesBackAFailedRun(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	ctx, cancel := context.WithCancel(context.Background())
	err := WithDir(ctx, dir, func(d *Dir) error {
		write := func(name string) error {
			return d.Write(name, func(w io.Writer) error { _, err := io.WriteString(w, name); return err })
		}
		require.NoError(t, write("a.png"))
		assert.FileExists(t, filepath.Join(dir, "a.png"))
		cancel()
		return write("b.png")
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.NoDirExists(t, dir)

	// A directory that was there stays, with what was in it.
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mine.txt"), nil, 0o644))
	err = WithDir(context.Background(), dir, func(d *Dir) error {
		require.NoError(t, d.Write("report.json", func(w io.Writer) error { return nil }))
		return errors.New("plotting failed")
	})
	require.Error(t, err)
	assert.FileExists(t, filepath.Join(dir, "mine.txt"))
	assert.NoFileExists(t, filepath.Join(dir, "report.json"))
}
