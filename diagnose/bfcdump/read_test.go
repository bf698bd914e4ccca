package bfcdump

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadDetectsFormat(t *testing.T) {
	dump, err := Marshal(fragSnapshot())
	require.NoError(t, err)
	s, f, err := Read(bytes.NewReader(dump), "x.memdump")
	require.NoError(t, err)
	assert.Equal(t, FormatMemoryDump, f)
	assert.Equal(t, "memorydump", f.String())
	assert.Equal(t, fragSnapshot().Chunks, s.Chunks)

	log, err := os.ReadFile("testdata/oom.log")
	require.NoError(t, err)
	s, f, err = Read(bytes.NewReader(log), "oom.log")
	require.NoError(t, err)
	assert.Equal(t, FormatLog, f)
	assert.Equal(t, "log", f.String())
	assert.Equal(t, oomLogChunks, s.Chunks)

	// A log with a stray invalid byte is still a log.
	bad := append([]byte("\xff\xfe"), log...)
	_, f, err = Read(bytes.NewReader(bad), "oom.log")
	require.NoError(t, err)
	assert.Equal(t, FormatLog, f)
}

func TestReadInputs(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "g: empty input: neither a MemoryDump nor a TensorFlow BFC log"},
		{"text", "hello, world\n", "g: neither a MemoryDump protobuf nor a TensorFlow BFC log"},
		{"binary", "\x00\x01\x02\xff\xff\xff\xff", "g: neither a MemoryDump protobuf nor a TensorFlow BFC log"},
		{"log with only a bad line", "InUse at zz of size 1 next 1\n", "g: no BFC allocator dump found in 1 lines: the lines that look like chunk lines cannot be read: line 1: not a whole chunk line"},
		{"tail of a dump", "Sum Total of in-use chunks: 4.00MiB\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Read(strings.NewReader(tc.in), "g")
			if tc.want == "" {
				assert.NoError(t, err, "any line of TF's dump makes the input a log")
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	assert.Equal(t, "Format(7)", Format(7).String())
}

func TestReadTooLarge(t *testing.T) {
	log, err := os.ReadFile("testdata/oom.log")
	require.NoError(t, err)
	_, _, err = readLimited(bytes.NewReader(log), "big", int64(len(log))-1)
	assert.EqualError(t, err, "big: larger than "+strconv.Itoa(len(log)-1)+" bytes, too large for a MemoryDump or a BFC log")
	_, _, err = readLimited(bytes.NewReader(log), "big", int64(len(log)))
	assert.NoError(t, err, "exactly at the bound is fine")

	boom := errors.New("read failed")
	_, _, err = Read(failReader{boom}, "r")
	assert.ErrorIs(t, err, boom)
	assert.ErrorContains(t, err, "reading r: ")
}

// FuzzRead feeds arbitrary bytes to Read: it must never panic, and whatever
// it accepts must Validate and render.
func FuzzRead(f *testing.F) {
	dump, err := Marshal(fragSnapshot())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(dump)
	log, err := os.ReadFile("testdata/oom.log")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(log)
	f.Add([]byte("InUse at 100 of size 256 next 1\nFree  at 200 of size 256 next 2\n"))
	f.Add([]byte("Next region of size 512\nInUse at 100 of size 256 next 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, _, err := Read(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Read returned a snapshot that does not validate: %v", err)
		}
		_ = s.Summarize()
		if got := s.RenderOccupancy(); got != noMemory && len(got) != occupancyCells {
			t.Fatalf("occupancy strip of %d cells", len(got))
		}
		_ = Explain(s)
		if err := WriteInspect(io.Discard, s, InspectOptions{Chunks: true}); err != nil {
			t.Fatal(err)
		}
		if err := WriteMemoryLog(io.Discard, s); err != nil {
			t.Fatal(err)
		}
		if _, err := Marshal(s); err != nil && !strings.Contains(err.Error(), "does not fit an int64") {
			t.Fatal(err)
		}
	})
}
