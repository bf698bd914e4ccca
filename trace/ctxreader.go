package trace

import (
	"context"
	"errors"
	"io"
	"os"
	"time"
)

// ContextReader returns a reader of r whose reads fail with ctx's error
// once ctx is done, so that reading a large input stops soon after an
// interrupt: a read of a buffer's worth is never long. A read that waits
// for input that does not come is not interrupted: InterruptReader is for
// inputs that can stall.
func ContextReader(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx: ctx, r: r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// InterruptReader returns a reader of r whose Read returns ctx's error as
// soon as ctx is done, a Read already waiting for input included: input
// from a pipe that stopped sending, a FIFO nobody writes to, a terminal.
// Its stop releases what it holds for ctx; the reader must not be used
// after.
//
// How a waiting Read is ended depends on r:
//
//   - a regular file never waits long: its reads fail once ctx is done,
//     as ContextReader's do;
//   - a pipe, FIFO or socket that Go's poller watches (os.Open gives one)
//     gets a read deadline in the past when ctx is done, which wakes the
//     Read at once;
//   - anything else (standard input left in blocking mode, a reader that is
//     not a file) is read in a goroutine, each Read into a buffer of its
//     own that the caller's is filled from, and a Read waiting when ctx is
//     done is abandoned: its goroutine ends with the process, which an
//     interrupt is about to end, and never writes into the caller's
//     buffer.
func InterruptReader(ctx context.Context, r io.Reader) (reader io.Reader, stop func()) {
	if f, ok := r.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			return ContextReader(ctx, f), func() {}
		}
		if f.SetReadDeadline(time.Time{}) == nil {
			unwatch := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
			return &deadlineReader{ctx: ctx, f: f}, func() { unwatch() }
		}
	}
	return &asyncReader{ctx: ctx, r: r, done: make(chan readResult, 1)}, func() {}
}

// deadlineReader reads a pollable file, whose read deadline is set in the
// past when ctx is done.
type deadlineReader struct {
	ctx context.Context
	f   *os.File
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	if err := d.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := d.f.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) && d.ctx.Err() != nil {
		err = d.ctx.Err()
	}
	return n, err
}

// asyncReader reads r in a goroutine per Read, so that a Read can return
// when ctx is done while r's is still waiting.
type asyncReader struct {
	ctx     context.Context
	r       io.Reader
	buf     []byte
	done    chan readResult
	waiting bool // a Read of r was abandoned: buf is its
}

// asyncReadMax bounds the asyncReader's own buffer: a read of more is
// cut short. A pipe holds 64 KiB; four times that keeps a reader ahead.
const asyncReadMax = 256 << 10

type readResult struct {
	n   int
	err error
}

func (a *asyncReader) Read(p []byte) (int, error) {
	if err := a.ctx.Err(); err != nil {
		return 0, err
	}
	if a.waiting || len(p) == 0 {
		return 0, nil
	}
	if len(p) > asyncReadMax {
		p = p[:asyncReadMax] // a short read, as io.Reader allows
	}
	if cap(a.buf) < len(p) {
		a.buf = make([]byte, len(p))
	}
	buf := a.buf[:len(p)]
	a.waiting = true
	go func() {
		n, err := a.r.Read(buf)
		a.done <- readResult{n, err}
	}()
	select {
	case res := <-a.done:
		a.waiting = false
		return copy(p, buf[:res.n]), res.err
	case <-a.ctx.Done():
		return 0, a.ctx.Err()
	}
}
