package trace

import (
	"errors"
	"io"
	"sync"
)

// readAhead reads r on a goroutine of its own, up to readAheadBufs buffers
// of readAheadSize bytes ahead of the reader, so that decompressing a trace
// (on that goroutine) and parsing it (on the reader's) run on two cores
// instead of taking turns. Memory stays bounded: the goroutine waits when
// the buffers are full. Close stops the goroutine at its next buffer; a
// Read it is blocked in (a pipe nobody writes) ends when that Read does.
type readAhead struct {
	full   chan chunk
	empty  chan []byte
	done   chan struct{}
	exited chan struct{} // closed when the goroutine has returned
	once   sync.Once
	buf    []byte // the buffer being read, whole
	cur    []byte // its unread part
	err    error
}

type chunk struct {
	b   []byte
	err error
}

// errReadAheadClosed is what a Read after Close returns.
var errReadAheadClosed = errors.New("read after close")

const (
	readAheadSize = 256 << 10
	readAheadBufs = 4
)

func newReadAhead(r io.Reader) *readAhead {
	ra := &readAhead{
		full:   make(chan chunk, readAheadBufs),
		empty:  make(chan []byte, readAheadBufs),
		done:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	for range readAheadBufs {
		ra.empty <- make([]byte, readAheadSize)
	}
	go ra.fill(r)
	return ra
}

func (ra *readAhead) fill(r io.Reader) {
	defer close(ra.exited)
	for {
		var buf []byte
		select {
		case buf = <-ra.empty:
		case <-ra.done:
			return
		}
		n, err := io.ReadFull(r, buf)
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		select {
		case ra.full <- chunk{buf[:n], err}:
		case <-ra.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (ra *readAhead) Read(p []byte) (int, error) {
	for len(ra.cur) == 0 {
		if ra.buf != nil {
			ra.empty <- ra.buf[:cap(ra.buf)]
			ra.buf = nil
		}
		if ra.err != nil {
			return 0, ra.err
		}
		var c chunk
		select {
		case c = <-ra.full:
		case <-ra.done:
			c.err = errReadAheadClosed
		}
		ra.buf, ra.cur, ra.err = c.b, c.b, c.err
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

// Close stops the goroutine; it does not wait for it (see wait).
func (ra *readAhead) Close() { ra.once.Do(func() { close(ra.done) }) }

// wait returns once the goroutine has: after Close, when the Read it may be
// in has returned. Only then may what it reads from be released.
func (ra *readAhead) wait() { <-ra.exited }

// closeAfter closes ra and, once its goroutine has stopped reading, calls
// release (the decompressor's Close) on a goroutine of its own: Close does
// not block on a Read that waits for input.
func (ra *readAhead) closeAfter(release func()) {
	ra.Close()
	go func() {
		ra.wait()
		release()
	}()
}
