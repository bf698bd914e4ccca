package diagnose

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/bfcsim/bfcsim/diagnose/bfcdump"
	"github.com/bfcsim/bfcsim/diagnose/pytorchoom"
	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/input"
)

// Found is what an input to `bfcsim inspect` holds: PyTorch's
// out-of-memory messages, or a BFC pool's state (a MemoryDump or a
// TensorFlow log). Exactly one of the two is set.
type Found struct {
	PyTorch *pytorchoom.Input
	BFC     *bfcdump.Snapshot
}

// sniffBytes is how much of the input Read looks at to tell a binary
// MemoryDump (which holds NUL bytes) from text.
const sniffBytes = 64 << 10

// Read reads the input at path ("-" for stdin), gzip- or zstd-compressed
// or not, and says what it holds (see the package's doc). ctx ends a read
// that waits for input.
func Read(ctx context.Context, path string, stdin io.Reader) (Found, error) {
	name := "stdin"
	if path != "-" {
		name = path
	}
	open := func() (io.Reader, func(), error) {
		raw, err := input.OpenRaw(ctx, path, stdin)
		if err != nil {
			return nil, nil, err
		}
		rc, err := trace.NewDecompressReader(raw)
		if err != nil {
			raw.Close()
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		return rc, func() { rc.Close(); raw.Close() }, nil
	}
	in, done, err := open()
	if err != nil {
		return Found{}, err
	}
	defer func() { done() }()

	// Text may hold PyTorch's message: scan it for one, line by line, in
	// flat memory. Standard input cannot be read twice, so what the scan
	// reads is also kept (spoolWriter), up to bfcdump's own bound, for
	// bfcdump in case no message turns up; the copy is dropped at the first
	// message.
	br := bufio.NewReaderSize(in, sniffBytes)
	head, err := br.Peek(sniffBytes)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return Found{}, fmt.Errorf("reading %s: %w", name, err)
	}
	if bytes.Contains(head, []byte{0}) {
		snap, err := readBFC(br, name, nil)
		return Found{BFC: snap}, err
	}
	var spool *spoolWriter
	scanned := io.Reader(br)
	if path == "-" {
		spool = &spoolWriter{max: bfcdump.MaxInputBytes}
		defer spool.release()
		scanned = io.TeeReader(br, spool)
	}
	s := pytorchoom.NewScanner(scanned)
	found := &pytorchoom.Input{Name: name}
	for s.Scan() {
		found.Add(s.Message())
		if spool != nil {
			spool.release()
		}
	}
	found.Lines = s.Lines()
	if err := s.Err(); err != nil {
		return Found{}, fmt.Errorf("reading %s: %w", name, err)
	}
	if found.Last != nil {
		return Found{PyTorch: found}, nil
	}
	if n, _ := s.Partial(); n > 0 {
		// PyTorch's words, too few to read: not TensorFlow's.
		return Found{}, pytorchoom.NoMessageError(name, s)
	}
	var src io.Reader
	switch {
	case spool == nil: // a file: read it again
		done()
		done = func() {}
		again, closeAgain, err := open()
		if err != nil {
			return Found{}, err
		}
		src, done = again, closeAgain
	case spool.over:
		return Found{}, fmt.Errorf("%s: larger than %d bytes, too large for a MemoryDump or a BFC log, and no PyTorch out-of-memory message in it", name, bfcdump.MaxInputBytes)
	default:
		if src, err = spool.reader(); err != nil {
			return Found{}, err
		}
	}
	snap, err := readBFC(src, name, s)
	return Found{BFC: snap}, err
}

// readBFC reads a MemoryDump or a TensorFlow log. Its error for input that
// is neither also says it is no PyTorch message, with what the scan s saw.
func readBFC(r io.Reader, name string, s *pytorchoom.Scanner) (*bfcdump.Snapshot, error) {
	snap, _, err := bfcdump.Read(r, name)
	if err == nil {
		return snap, nil
	}
	msg := err.Error()
	for _, old := range []string{
		"neither a MemoryDump protobuf nor a TensorFlow BFC log",
		"neither a MemoryDump nor a TensorFlow BFC log",
	} {
		if strings.Contains(msg, old) {
			msg = strings.Replace(msg, old, "neither a MemoryDump protobuf, a TensorFlow BFC log nor a PyTorch out-of-memory message", 1)
			if s != nil {
				if n, text := s.NearMiss(); n > 0 {
					msg += fmt.Sprintf(" (line %d, %q, speaks of running out of memory but is not PyTorch's caching allocator message, which says \"out of memory. Tried to allocate\")", n, text)
				}
			}
			return nil, &relabeledError{msg: msg, err: err}
		}
	}
	return nil, err
}

// relabeledError rewords an error and keeps it for errors.Is.
type relabeledError struct {
	msg string
	err error
}

func (e *relabeledError) Error() string { return e.msg }
func (e *relabeledError) Unwrap() error { return e.err }

// SpoolMemBytes is how much of standard input the spool keeps in memory;
// past it the spool is a temporary file, so that a long log on standard
// input costs disk, not memory, while it is scanned.
const SpoolMemBytes = 8 << 20

// spoolWriter keeps what is written, up to max bytes, until released: the
// first SpoolMemBytes in memory, the rest in a temporary file. A write
// never fails (the scan that feeds it must go on); reader reports the
// first error.
type spoolWriter struct {
	mem  bytes.Buffer
	file *os.File
	n    int64
	max  int64
	over bool // more than max was written
	done bool // released: writes are dropped
	err  error
}

func (w *spoolWriter) Write(p []byte) (int, error) {
	if w.done || w.over || w.err != nil {
		return len(p), nil
	}
	if w.n+int64(len(p)) > w.max {
		w.over = true
		w.release()
		return len(p), nil
	}
	w.n += int64(len(p))
	if w.file == nil && w.mem.Len()+len(p) <= SpoolMemBytes {
		w.mem.Write(p)
		return len(p), nil
	}
	if w.file == nil {
		f, err := os.CreateTemp("", "bfcsim-inspect-*")
		if err != nil {
			w.err = fmt.Errorf("keeping standard input: %w", err)
			return len(p), nil
		}
		w.file = f
		if _, err := f.Write(w.mem.Bytes()); err != nil {
			w.err = fmt.Errorf("keeping standard input: %w", err)
			return len(p), nil
		}
		w.mem = bytes.Buffer{}
	}
	if _, err := w.file.Write(p); err != nil {
		w.err = fmt.Errorf("keeping standard input: %w", err)
	}
	return len(p), nil
}

// reader reads back what was kept.
func (w *spoolWriter) reader() (io.Reader, error) {
	if w.err != nil {
		return nil, w.err
	}
	if w.file != nil {
		if _, err := w.file.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("keeping standard input: %w", err)
		}
		return w.file, nil
	}
	return bytes.NewReader(w.mem.Bytes()), nil
}

// release drops what was kept and removes the temporary file.
func (w *spoolWriter) release() {
	w.done = true
	w.mem = bytes.Buffer{}
	if w.file != nil {
		w.file.Close()
		os.Remove(w.file.Name())
		w.file = nil
	}
}
