package trace

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The read-ahead reader gives back exactly the bytes under it, whatever the
// sizes of the reads on either side.
func TestReadAheadContent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, readAheadSize - 1, readAheadSize, readAheadSize + 1, 5*readAheadSize + 123} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rng.IntN(256))
		}
		for name, src := range map[string]io.Reader{
			"whole":    bytes.NewReader(data),
			"one byte": iotest.OneByteReader(bytes.NewReader(data)),
			"half":     iotest.HalfReader(bytes.NewReader(data)),
			"data+eof": iotest.DataErrReader(bytes.NewReader(data)),
		} {
			ra := newReadAhead(src)
			got, err := io.ReadAll(iotest.OneByteReader(io.LimitReader(ra, int64(n)+1)))
			require.NoError(t, err, "%d bytes, %s", n, name)
			assert.Equal(t, data, got, "%d bytes, %s", n, name)
			ra.Close()
		}
		require.NoError(t, iotest.TestReader(newReadAhead(bytes.NewReader(data)), data))
	}
}

// An error under the reader reaches the reader after the bytes before it.
func TestReadAheadError(t *testing.T) {
	boom := errors.New("boom")
	src := io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("x"), readAheadSize+10)), iotest.ErrReader(boom))
	ra := newReadAhead(src)
	got, err := io.ReadAll(ra)
	assert.ErrorIs(t, err, boom)
	assert.Len(t, got, readAheadSize+10)
	_, err = ra.Read(make([]byte, 1))
	assert.ErrorIs(t, err, boom, "the error stays")
}

// Close stops the goroutine, though nobody reads what it read ahead.
func TestReadAheadClose(t *testing.T) {
	src := &aheadCounter{r: bytes.NewReader(make([]byte, 64*readAheadSize))}
	ra := newReadAhead(src)
	_, err := ra.Read(make([]byte, 10))
	require.NoError(t, err)
	ra.Close()
	ra.Close() // twice is fine
	ra.wait()
	assert.Less(t, src.n, int64(64*readAheadSize), "it stops reading ahead, bounded by its buffers")
}

type aheadCounter struct {
	r io.Reader
	n int64
}

func (c *aheadCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
