package sticky

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// failAfter accepts n writes, then fails every one.
type failAfter struct {
	n   int
	buf bytes.Buffer
}

var errFull = errors.New("disk full")

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errFull
	}
	f.n--
	return f.buf.Write(p)
}

func TestWriterKeepsTheFirstError(t *testing.T) {
	dst := &failAfter{n: 2}
	w := &Writer{W: dst}
	w.Printf("a%d ", 1)
	_, _ = w.Write([]byte("b "))
	w.Printf("c")
	w.Printf("d")
	_, err := w.Write([]byte("e"))
	assert.Equal(t, "a1 b ", dst.buf.String(), "nothing is written after the first failure")
	assert.ErrorIs(t, w.Err, errFull)
	assert.ErrorIs(t, err, errFull)
}

func TestWriterWithAnErrorWritesNothing(t *testing.T) {
	opening := errors.New("cannot create the file")
	w := &Writer{Err: opening}
	n, err := w.Write([]byte("x"))
	assert.Zero(t, n)
	assert.ErrorIs(t, err, opening)
}
