package bfcdump

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"
)

// Format is the kind of input Read found.
type Format int

const (
	// FormatMemoryDump is TF's MemoryDump protobuf (binary).
	FormatMemoryDump Format = iota + 1
	// FormatLog is the text TF's BFC allocator logs on an out-of-memory.
	FormatLog
)

// String names the format: "memorydump" or "log".
func (f Format) String() string {
	switch f {
	case FormatMemoryDump:
		return "memorydump"
	case FormatLog:
		return "log"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// MaxInputBytes bounds what Read accepts: 1 GiB. A MemoryDump must be read
// whole to be decoded; TF's largest are a few MiB (some 60 bytes a chunk).
const MaxInputBytes = 1 << 30

// logMarkers are strings that only a BFC log holds. Any of them in valid
// UTF-8 text makes Read take the input for a log.
var logMarkers = [][]byte{
	[]byte("InUse at "), []byte("Free  at "), []byte("Free at "), []byte("Chunk at "), []byte("Bin ("),
	[]byte("ran out of memory"), []byte("Ran out of memory"), []byte("BFCAllocator dump for"),
	[]byte("Chunks of size"), []byte("Sum Total of in-use chunks"), []byte("MaxInUse:"), []byte("Stats:"),
	[]byte("Bin for "), []byte("Total bytes in pool"), []byte("total_region_allocated_bytes_"),
}

// Read reads a BFC allocator state from r, whichever form it is in: a
// MemoryDump protobuf (Unmarshal) or a TensorFlow OOM log (ParseLog). name is
// used in errors. Input over MaxInputBytes is refused. Text holding one of
// the log's marker strings (logMarkers: "InUse at ", "Chunk at ", "Bin (",
// "ran out of memory", "Sum Total of in-use chunks", "MaxInUse:", ...) is
// parsed as a log, whatever part of the dump it is; anything else is
// decoded as a MemoryDump, and an input that is neither fails with an error
// that says so.
func Read(r io.Reader, name string) (*Snapshot, Format, error) {
	return readLimited(r, name, MaxInputBytes)
}

// readLimited is Read with the input bound as a parameter, for tests.
func readLimited(r io.Reader, name string, limit int64) (*Snapshot, Format, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, 0, fmt.Errorf("reading %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, 0, fmt.Errorf("%s: larger than %d bytes, too large for a MemoryDump or a BFC log", name, limit)
	}
	if len(data) == 0 {
		return nil, 0, fmt.Errorf("%s: empty input: neither a MemoryDump nor a TensorFlow BFC log", name)
	}
	hasMarker := false
	for _, m := range logMarkers {
		if bytes.Contains(data, m) {
			hasMarker = true
			break
		}
	}
	if hasMarker && utf8.Valid(data) {
		s, err := ParseLog(bytes.NewReader(data), name)
		return s, FormatLog, err
	}
	s, perr := Unmarshal(data)
	if perr == nil {
		return s, FormatMemoryDump, nil
	}
	if hasMarker { // text with a stray invalid byte
		s, err := ParseLog(bytes.NewReader(data), name)
		return s, FormatLog, err
	}
	return nil, 0, fmt.Errorf("%s: neither a MemoryDump protobuf nor a TensorFlow BFC log (no line of TensorFlow's dump, such as \"ran out of memory\", \"Bin (\", \"InUse at\", \"Chunk at\" or \"Sum Total of in-use chunks\"; as a protobuf: %w)", name, perr)
}
