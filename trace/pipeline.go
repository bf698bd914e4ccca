package trace

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// A large trace is decoded in parallel. One goroutine cuts the input into
// chunks of whole lines; workers, one per processor, decode each chunk's
// lines into Events (the part of reading that needs only the line); the
// Reader then takes the chunks in input order and checks each event against
// the state the events before it built (live ids, slots, the summary), which
// only it may do. Memory stays bounded: a fixed pool of chunks circulates,
// and the cutter waits when none is free.
//
// Small traces never start the pipeline: the Reader decodes the first
// pipelineStartLines lines itself, which keeps the goroutines away from the
// many tiny traces tests and fuzzers read.

const (
	// chunkBytes is how much of the input one chunk holds, about 5,000
	// event lines: big enough that handing chunks around costs nothing per
	// event, small enough that the pool stays a few megabytes.
	chunkBytes = 256 << 10
	// maxDecodeWorkers bounds the workers; past a few the Reader's own
	// checks are the limit.
	maxDecodeWorkers = 4
	// maxLentChunks is how many chunks NextLent's callers may hold
	// without keeping the workers waiting.
	maxLentChunks = 4
)

// pipelineStartLines is how many lines the Reader reads alone before it
// starts the pipeline. Tests change it to read small traces both ways.
var pipelineStartLines int64 = 4096

// lineChunk is a run of whole lines and, once a worker has decoded it, their
// events.
type lineChunk struct {
	buf   []byte
	first int64 // the line number of buf's first line
	// events are the decoded non-blank lines, in order; bad lists the ones
	// that are invalid on their own.
	events []Event
	bad    []badLine
	// err ends the input after buf: io.EOF at its end, a read error, or a
	// *SyntaxError for a line too long to hold.
	err   error
	ready chan struct{} // receives once the chunk is decoded
}

// badLine is an invalid line of a chunk: events[at] holds only its Line.
type badLine struct {
	at  int
	msg string
}

type pipeline struct {
	free   chan *lineChunk // chunks to fill
	work   chan *lineChunk // chunks to decode
	order  chan *lineChunk // chunks in input order, for the Reader
	quit   chan struct{}
	once   sync.Once
	exited chan struct{} // closed when the cutter has returned
}

// startPipeline reads the rest of src, whose first line is line number
// first, with name used in errors.
func startPipeline(src io.Reader, first int64, name string) *pipeline {
	workers := min(runtime.GOMAXPROCS(0), maxDecodeWorkers)
	chunks := 2*workers + 2 + maxLentChunks
	p := &pipeline{
		free:   make(chan *lineChunk, chunks),
		work:   make(chan *lineChunk, chunks),
		order:  make(chan *lineChunk, chunks),
		quit:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	for range chunks {
		p.free <- &lineChunk{buf: make([]byte, 0, chunkBytes), ready: make(chan struct{}, 1)}
	}
	for range workers {
		go p.decodeChunks()
	}
	go p.cut(src, first, name)
	return p
}

// cut fills chunks with whole lines of src and hands them to the workers
// and, in order, to the Reader. A line that does not fit grows the chunk,
// up to MaxLineBytes.
func (p *pipeline) cut(src io.Reader, line int64, name string) {
	defer close(p.exited)
	defer close(p.order)
	defer close(p.work)
	var carry []byte // the start of a line the last chunk cut off
	for {
		var c *lineChunk
		select {
		case c = <-p.free:
		case <-p.quit:
			return
		}
		c.buf = append(c.buf[:0], carry...)
		c.err = nil
		cut := -1
		for c.err == nil {
			if len(c.buf) == cap(c.buf) {
				if len(c.buf) > MaxLineBytes {
					c.err = &SyntaxError{File: name, Line: line,
						Msg: fmt.Sprintf("line longer than %d MiB (is this a trace?)", MaxLineBytes>>20)}
					c.buf = c.buf[:0]
					break
				}
				c.buf = append(c.buf, 0)[:len(c.buf)] // the line goes on: room for more
			}
			n, err := src.Read(c.buf[len(c.buf):cap(c.buf)])
			c.buf = c.buf[:len(c.buf)+n]
			if err != nil {
				c.err = err
				if err != io.EOF {
					c.err = fmt.Errorf("reading %s: %w", name, err)
				}
				break
			}
			if len(c.buf) == cap(c.buf) {
				if cut = bytes.LastIndexByte(c.buf, '\n'); cut >= 0 {
					break
				}
			}
		}
		switch {
		case c.err == nil:
			carry = append(carry[:0], c.buf[cut+1:]...)
			c.buf = c.buf[:cut+1]
		case c.err != io.EOF:
			// A line the error cut short is not read, as if the input
			// had stopped after the last whole one.
			c.buf = c.buf[:bytes.LastIndexByte(c.buf, '\n')+1]
		default:
			// The last line ends the input: it may be the long one.
			if last := bytes.LastIndexByte(c.buf, '\n'); len(c.buf)-(last+1) > MaxLineBytes {
				c.buf = c.buf[:last+1]
				c.err = &SyntaxError{File: name, Line: line + int64(bytes.Count(c.buf, []byte{'\n'})),
					Msg: fmt.Sprintf("line longer than %d MiB (is this a trace?)", MaxLineBytes>>20)}
			}
		}
		c.first = line
		line += int64(bytes.Count(c.buf, []byte{'\n'}))
		p.order <- c // never blocks: the channels hold every chunk
		p.work <- c
		if c.err != nil {
			return
		}
	}
}

// decodeChunks is a worker.
func (p *pipeline) decodeChunks() {
	d := decoder{tags: make(map[string]string)}
	for c := range p.work {
		if c.events == nil {
			// Room for a chunk of short lines at once, rather than
			// growing to it by copies.
			c.events = make([]Event, 0, chunkBytes/32)
		}
		d.decodeLines(c)
		c.ready <- struct{}{}
	}
}

// decodeLines decodes the lines of c.buf into c.events, and notes those
// that are not valid in c.bad. A canonical line is decoded where it
// starts, before its end is known; any other line is cut at its newline
// first.
func (d *decoder) decodeLines(c *lineChunk) {
	c.events, c.bad = c.events[:0], c.bad[:0]
	line := c.first
	for rest := c.buf; len(rest) > 0; line++ {
		c.events = append(c.events, Event{})
		ev := &c.events[len(c.events)-1]
		if n := d.canonicalLine(ev, rest); n >= 0 {
			ev.Line = line
			rest = rest[min(n+1, len(rest)):]
			continue
		}
		l := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			l, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		decode := d.decodeGeneral // canonicalLine has refused l
		if n := len(l); n > 0 && l[n-1] == '\r' {
			l, decode = l[:n-1], d.decodeEvent
		}
		if isBlank(l) {
			c.events = c.events[:len(c.events)-1]
			continue
		}
		if msg := decode(ev, l, line); msg != "" {
			c.bad = append(c.bad, badLine{len(c.events) - 1, msg})
		}
	}
}

// next returns the next decoded chunk in input order, or nil at the end.
func (p *pipeline) next() *lineChunk {
	c, ok := <-p.order
	if !ok {
		return nil
	}
	<-c.ready
	return c
}

// release gives a chunk the Reader is done with back to the cutter. A chunk
// grown for a long line is replaced, so that one long line does not keep
// the pool large.
func (p *pipeline) release(c *lineChunk) {
	if cap(c.buf) > 4*chunkBytes {
		c.buf = make([]byte, 0, chunkBytes)
	}
	if cap(c.events) > 4*chunkBytes/16 {
		c.events = nil
	}
	p.free <- c
}

// drop lets go of the chunks waiting to be filled, once the input has
// ended: the cutter and the workers have returned then. Chunks still lent
// out come back to the pool, but are not read again.
func (p *pipeline) drop() {
	<-p.exited
	for {
		select {
		case <-p.free:
		default:
			return
		}
	}
}

// stop ends the cutter at its next chunk (a Read it is blocked in ends when
// that Read does) and, with it, the workers.
func (p *pipeline) stop() { p.once.Do(func() { close(p.quit) }) }
