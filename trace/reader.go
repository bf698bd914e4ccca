package trace

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"sync/atomic"

	"github.com/bfcsim/bfcsim/internal/paged"
)

// MaxLineBytes bounds one line of a trace. Event lines are a few dozen bytes;
// the bound exists so that a corrupt file (say, a binary blob with no newline)
// is reported instead of being read into memory whole.
const MaxLineBytes = 64 << 20

// maxID is the exclusive upper bound of ids and sizes: 2^63, so that sums and
// differences of sizes cannot overflow and ids survive a round trip through
// signed integers in other tools.
const maxID = 1 << 63

// maxExactFloat is the largest integer a float64 holds exactly (2^53). Sizes
// written as floats (4096.0, 4.096e3) are accepted up to it.
const maxExactFloat = 1 << 53

var utf8BOM = []byte{0xef, 0xbb, 0xbf}

// maxKeptErrors is how many skipped-line errors a Reader keeps for reports;
// the rest are only counted.
const maxKeptErrors = 20

// maxInternedTags bounds the table that lets repeated tags share one string.
// Traces tag allocations with op or tensor names, which repeat; past the bound
// new tags are simply not shared.
const maxInternedTags = 1 << 16

// ReaderOption configures a Reader.
type ReaderOption func(*Reader)

// TrackCallSites makes the Reader keep, by call site, the bytes live at the
// trace's peak (PeakCallSites).
func TrackCallSites() ReaderOption { return func(r *Reader) { r.sites = newSiteCounter() } }

// SkipInvalid makes the Reader count and skip invalid lines instead of
// stopping at the first one. Skipped lines change no state: an alloc that was
// skipped leaves its id not live, a skipped free leaves its id live.
func SkipInvalid() ReaderOption { return func(r *Reader) { r.skipInvalid = true } }

// Summary is what a Reader has seen so far.
type Summary struct {
	Events          int64 // valid events, all ops
	Allocs          int64
	ZeroSizeAllocs  int64
	Frees           int64
	Steps           int64
	Marks           int64
	Reserves        int64
	Releases        int64
	Skipped         int64  // invalid lines skipped under SkipInvalid
	LiveAllocs      int64  // allocations live now
	PeakLiveAllocs  int64  // the most allocations live at once
	LiveBytes       uint64 // sum of the requested sizes of the live allocations
	PeakLiveBytes   uint64 // the largest LiveBytes
	TotalAllocBytes uint64 // sum of the requested sizes of every alloc; stops at 2^64-1
	MaxAllocBytes   uint64 // the largest single alloc
	FirstT, LastT   float64
	HasT            bool // FirstT and LastT are set
	// PeakLiveEvent is the valid event, from 0, that first reached
	// PeakLiveBytes; PeakStep counts the steps begun before it (the peak
	// falls in step PeakStep, from 1; 0: before the first), PeakStepName
	// is that step's name, and PeakMark the name of the last mark before
	// it that is a recording's annotation (not one an importer writes).
	PeakLiveEvent          int64
	PeakStep               int64
	PeakStepName, PeakMark string
}

// liveAlloc is what the Reader remembers of a live allocation, by slot.
type liveAlloc struct {
	size uint64
	line int64
	// refused: the recording failed it (RecordedOOMMark); not live.
	refused bool
	site    uint32 // its call site's key, with TrackCallSites
}

// msgDefinition is what apply returns for a line that defined a frame or a
// stack: valid, and no event to hand on.
const msgDefinition = "\x00definition"

// Reader reads a v1 trace as a stream of Events. It is shaped like
// bufio.Scanner: call Next until it returns false, then Err.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	name        string
	raw         *countingReader
	in          *bufio.Reader
	closeFn     func()
	skipInvalid bool

	header  Header
	pending []byte // the first line, read while looking for a header
	lineNo  int64
	long    []byte // accumulates lines longer than the bufio buffer
	dec     decoder
	// pipe decodes the lines past the first pipelineStartLines on other
	// goroutines; chunk is the decoded chunk being checked, at its next
	// event and badAt its next invalid line.
	pipe      *pipeline
	pipeAfter int64 // pipelineStartLines when the Reader was made
	chunk     *lineChunk
	at, badAt int
	ev        Event
	err       error
	kept      []*SyntaxError
	sum       Summary
	live      liveIDs
	slots     paged.Table[liveAlloc] // by slot
	freeSlot  []uint32
	// oomNext: a RecordedOOMMark mark came last, before any alloc.
	oomNext  bool
	nextSlot uint32
	stacks   StackTable
	sites    *siteCounter // with TrackCallSites
	// stepName and markName are the last step's name and the last
	// annotation's, for Summary.PeakStepName and PeakMark.
	stepName, markName string
	// inMem: the events are mem's, not an input's (NewEventReader).
	inMem bool
	mem   []Event
}

// NewReader returns a Reader of the trace in rd. name is used in error
// messages and is usually the file's path. The input may be gzip or zstd
// compressed; the compression is detected from its first bytes.
//
// NewReader reads up to the first non-blank line to find the header. It
// returns an error if the input cannot be read or decompressed, or if the
// header line is invalid; an invalid first event line is reported by Next.
// The caller keeps ownership of rd; Close releases the decompressor.
func NewReader(rd io.Reader, name string, opts ...ReaderOption) (*Reader, error) {
	r := &Reader{
		name:      name,
		raw:       &countingReader{r: rd},
		dec:       decoder{tags: make(map[string]string)},
		pipeAfter: pipelineStartLines,
		closeFn:   func() {},
	}
	for _, o := range opts {
		o(r)
	}
	dec, closeFn, err := decompress(r.raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	r.in = bufio.NewReaderSize(dec, 64<<10)
	r.closeFn = closeFn
	if err := r.readHeader(); err != nil {
		r.closeFn()
		return nil, err
	}
	return r, nil
}

// NewEventReader returns a Reader of events built in memory, under the
// header h, whose stacks are in stacks (nil: none). It checks each event
// and fills in what a Reader of a file fills in (a free's size, slots,
// the summary); an event's Line is its place in events, from 1. The
// Reader shares stacks and copies each event as it reads it.
func NewEventReader(h Header, stacks *StackTable, events []Event, name string) *Reader {
	r := &Reader{name: name, header: h, mem: events, inMem: true, closeFn: func() {}}
	if stacks != nil {
		r.stacks = *stacks
	}
	return r
}

// nextMem is Next for a Reader of events in memory.
func (r *Reader) nextMem() bool {
	for r.err == nil {
		if len(r.mem) == 0 {
			r.forgetLive()
			return false
		}
		ev := r.mem[0]
		r.mem = r.mem[1:]
		r.lineNo++
		ev.Line = r.lineNo
		if msg := r.apply(&ev); msg != "" {
			if msg != msgDefinition && r.invalid(msg, ev.Line) {
				return false
			}
			continue
		}
		r.ev = ev
		return true
	}
	return false
}

// Header returns the trace's header; its Version is 0 if the trace has none.
func (r *Reader) Header() Header { return r.header }

// Next advances to the next valid event. It returns false at the end of the
// trace or at the first error; Err tells which.
func (r *Reader) Next() bool {
	if r.inMem {
		return r.nextMem()
	}
	for r.err == nil {
		if r.pipe != nil {
			ev := r.nextDecoded()
			if ev == nil {
				return false
			}
			r.ev = *ev
			return true
		}
		if r.lineNo >= r.pipeAfter && r.pending == nil {
			r.pipe = startPipeline(r.in, r.lineNo+1, r.name)
			continue
		}
		line, ok := r.readLine()
		if !ok {
			if r.err == nil {
				r.forgetLive()
			}
			return false
		}
		if isBlank(line) {
			continue
		}
		var ev Event
		msg := r.dec.decodeEvent(&ev, line, r.lineNo)
		if msg == "" {
			msg = r.apply(&ev)
		}
		if msg != "" {
			if msg != msgDefinition && r.invalid(msg, r.lineNo) {
				return false
			}
			continue
		}
		r.ev = ev
		return true
	}
	return false
}

// nextDecoded is Next once the pipeline decodes the lines: it returns the
// next valid event, in the chunk being checked (valid until the next call),
// or nil at the end or on an error.
func (r *Reader) nextDecoded() *Event {
	for r.err == nil {
		c := r.chunk
		if c == nil {
			if c = r.pipe.next(); c == nil {
				return nil // stopped by Close
			}
			r.chunk, r.at, r.badAt = c, 0, 0
		}
		if r.at == len(c.events) {
			r.chunk = nil
			err := c.err
			r.pipe.release(c)
			r.endChunk(err)
			if err != nil {
				return nil
			}
			continue
		}
		ev, msg := r.checkNext(c)
		if msg != "" {
			if msg != msgDefinition && r.invalid(msg, ev.Line) {
				return nil
			}
			continue
		}
		return ev
	}
	return nil
}

// checkNext checks the event at r.at of chunk c, the next in input order,
// and moves past it: it returns the event and the reason it is invalid, or
// "". It touches the live set for the events a little further on.
func (r *Reader) checkNext(c *lineChunk) (*Event, string) {
	i := r.at
	if i%prefetchAhead == 0 {
		r.live.prefetch(c.events[min(i+prefetchAhead, len(c.events)):min(i+2*prefetchAhead, len(c.events))])
	}
	ev := &c.events[i]
	r.at++
	r.lineNo = ev.Line
	if r.badAt < len(c.bad) && c.bad[r.badAt].at == i {
		r.badAt++
		return ev, c.bad[r.badAt-1].msg
	}
	return ev, r.apply(ev)
}

// endChunk takes note of err, how the chunk checked to its end ended the
// input: not at all (nil), at its end, or with a read error.
func (r *Reader) endChunk(err error) {
	switch err {
	case nil:
	case io.EOF:
		r.pipe.stop() // and the next chunk asked for is nil
		r.forgetLive()
	default:
		r.err = err
	}
}

// NextBatch appends the next valid events to dst, up to its capacity, and
// returns it: Next and Event for many events at once, copying each event
// once. It returns fewer only at the end of the trace or at an error; Err
// tells which.
func (r *Reader) NextBatch(dst []Event) []Event {
	for len(dst) < cap(dst) && r.err == nil {
		if r.pipe != nil {
			ev := r.nextDecoded()
			if ev == nil {
				break
			}
			dst = append(dst, *ev)
			continue
		}
		if !r.Next() {
			break
		}
		dst = append(dst, r.ev)
	}
	return dst
}

// Lent is a run of checked events that NextLent lends: the decoded events
// of one chunk of the input, read in place rather than copied. The events
// stay valid until Return, which gives their memory back to the Reader;
// the caller must call it exactly once, from any goroutine.
type Lent struct {
	Events []Event
	c      *lineChunk
	p      *pipeline
}

// Return gives the events back to the Reader.
func (l Lent) Return() {
	if l.c != nil {
		l.p.release(l.c)
	}
}

// NextLent is NextBatch without the copy: it returns the next valid events
// in the Reader's own memory, a chunk's worth (thousands) at a time once
// the trace is past its first lines, and borrowed until Return. A few
// chunks may be out at once; the Reader waits for one to come back
// before it reads further than that. It returns no events only at the end
// of the trace or at an error; Err tells which.
func (r *Reader) NextLent() Lent {
	if r.pipe == nil {
		// The first lines, read without the pipeline, are copied.
		var evs []Event
		for len(evs) < lentBeforePipeline && r.pipe == nil && r.Next() {
			evs = append(evs, r.ev)
		}
		if len(evs) > 0 || r.pipe == nil {
			return Lent{Events: evs}
		}
	}
	for r.err == nil {
		c := r.chunk
		if c == nil {
			if c = r.pipe.next(); c == nil {
				return Lent{} // stopped by Close
			}
			r.at, r.badAt = 0, 0
		}
		r.chunk = nil
		evs := c.events
		start := r.at
		w := start
		for r.at < len(evs) {
			i := r.at
			ev, msg := r.checkNext(c)
			if msg != "" {
				if msg != msgDefinition && r.invalid(msg, ev.Line) {
					break
				}
				continue
			}
			if w != i {
				evs[w] = *ev
			}
			w++
		}
		if r.err == nil && r.at == len(evs) {
			r.endChunk(c.err)
		}
		if w > start {
			return Lent{Events: evs[start:w], c: c, p: r.pipe}
		}
		r.pipe.release(c)
	}
	return Lent{}
}

// prefetchAhead is how many events the Reader touches the live set for at
// once, that many events ahead of the one being checked: enough loads in
// one tight loop that they wait on memory together, and far enough ahead
// that they have arrived when their turn comes.
const prefetchAhead = 16

// lentBeforePipeline is how many events NextLent copies at a time from
// the lines the Reader reads before it starts the pipeline.
const lentBeforePipeline = 2048

// invalid handles the invalid line lineNo: it stops the Reader, and returns
// true, unless invalid lines are skipped.
func (r *Reader) invalid(msg string, lineNo int64) bool {
	serr := &SyntaxError{File: r.name, Line: lineNo, Msg: msg}
	if !r.skipInvalid {
		r.err = serr
		return true
	}
	r.sum.Skipped++
	if len(r.kept) < maxKeptErrors {
		r.kept = append(r.kept, serr)
	}
	return false
}

// Event returns the event Next found. It is a copy; the caller may keep it.
func (r *Reader) Event() Event { return r.ev }

// Err returns the error that stopped the Reader: a *SyntaxError for an invalid
// line, or an I/O or decompression error wrapped with the trace's name. It is
// nil at a clean end of the trace.
func (r *Reader) Err() error { return r.err }

// Stacks returns the trace's stack table as read so far. It grows while
// the trace is read: read it once the Reader is done.
func (r *Reader) Stacks() *StackTable { return &r.stacks }

// Summary returns the counts and sizes of what has been read so far.
func (r *Reader) Summary() Summary { return r.sum }

// SkippedErrors returns the first few errors skipped under SkipInvalid, in
// order. The slice is the Reader's; the caller must not modify it.
func (r *Reader) SkippedErrors() []*SyntaxError { return r.kept }

// BytesRead returns how many bytes of the underlying (possibly compressed)
// input have been consumed, for progress reports.
func (r *Reader) BytesRead() int64 { return r.raw.n.Load() }

// Name returns the name the Reader was created with.
func (r *Reader) Name() string { return r.name }

// forgetLive lets go of the tables of live allocations at the end of the
// trace, where no event is left to check against them, and of the
// pipeline's idle chunks: for a trace of a million live allocations, tens
// of megabytes that a replay's report, plots and memory dumps are then
// built beside.
func (r *Reader) forgetLive() {
	r.live = liveIDs{}
	r.slots = paged.Table[liveAlloc]{}
	r.freeSlot = nil
	if r.pipe != nil {
		r.pipe.drop()
	}
}

// Close releases the decompressor. It does not close the underlying reader.
func (r *Reader) Close() error {
	if r.pipe != nil {
		r.pipe.stop()
	}
	r.closeFn()
	return nil
}

// readHeader reads the first non-blank line. If it is a header it is decoded
// into r.header; otherwise it is kept in r.pending for Next.
func (r *Reader) readHeader() error {
	for {
		line, ok := r.readLine()
		if !ok {
			return r.err
		}
		if isBlank(line) {
			continue
		}
		fields, ok := headerFields(line)
		if !ok {
			r.pending = append([]byte(nil), line...)
			return nil
		}
		h, msg := decodeHeader(fields)
		if msg != "" {
			return &SyntaxError{File: r.name, Line: r.lineNo, Msg: msg}
		}
		r.header = h
		return nil
	}
}

// readLine returns the next line without its line ending. The slice is valid
// until the next call. At the end of input or on an error it returns false
// and, for an error, sets r.err.
func (r *Reader) readLine() ([]byte, bool) {
	if r.pending != nil {
		line := r.pending
		r.pending = nil
		return line, true
	}
	line, err := r.in.ReadSlice('\n')
	if err != nil && errors.Is(err, bufio.ErrBufferFull) {
		r.long = append(r.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) && len(r.long) <= MaxLineBytes {
			line, err = r.in.ReadSlice('\n')
			r.long = append(r.long, line...)
		}
		if len(r.long) > MaxLineBytes {
			r.err = &SyntaxError{File: r.name, Line: r.lineNo + 1,
				Msg: fmt.Sprintf("line longer than %d MiB (is this a trace?)", MaxLineBytes>>20)}
			return nil, false
		}
		line = r.long
	}
	if err != nil && err != io.EOF {
		r.err = fmt.Errorf("reading %s: %w", r.name, err)
		return nil, false
	}
	if len(line) == 0 && err == io.EOF {
		return nil, false
	}
	r.lineNo++
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if r.lineNo == 1 {
		line = bytes.TrimPrefix(line, utf8BOM) // editors on Windows write one
	}
	return line, true
}

func isBlank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// apply checks ev against the state built by the events before it and, if
// it is valid, updates that state and annotates ev. It changes nothing when
// it returns a reason.
func (r *Reader) apply(ev *Event) string {
	switch ev.Op {
	case OpFrame:
		if msg := r.stacks.addFrame(ev.ID, Frame{Name: ev.Name, File: ev.Tag, Line: int64(ev.Size)}); msg != "" {
			return msg
		}
		return msgDefinition
	case OpStack:
		if msg := r.stacks.addStack(ev.ID, ev.Tag); msg != "" {
			return msg
		}
		return msgDefinition
	}
	if ev.Flags&HasT != 0 {
		if r.sum.HasT && ev.T < r.sum.LastT {
			return fmt.Sprintf("t %s is before the previous event's t %s (t must not decrease)",
				fmtFloat(ev.T), fmtFloat(r.sum.LastT))
		}
	}
	switch ev.Op {
	case OpAlloc:
		if ev.Stack != 0 && int(ev.Stack) > r.stacks.NumStacks() {
			if r.stacks.dropped == 0 {
				return fmt.Sprintf("alloc names stack %d, which is not defined (a stack is defined by a stack line before its first use)", ev.Stack)
			}
			ev.Stack = 0 // past the table's bounds: the tag stands alone
		}
		if r.sum.LiveBytes+ev.Size < r.sum.LiveBytes {
			if slot, ok := r.live.get(ev.ID); ok {
				return dupAlloc(ev.ID, r.slots.At(slot).line)
			}
			return fmt.Sprintf("alloc of %d bytes would make more than 2^64 bytes live", ev.Size)
		}
		slot := r.nextFree()
		if had, ok := r.live.add(ev.ID, slot); !ok {
			return dupAlloc(ev.ID, r.slots.At(had).line)
		}
		r.takeSlot()
		ev.Slot = slot
		refused := r.oomNext
		r.oomNext = false
		r.slots.Grow(ev.Slot)
		la := r.slots.At(ev.Slot)
		*la = liveAlloc{size: ev.Size, line: ev.Line, refused: refused}
		s := &r.sum
		s.Allocs++
		if ev.Size == 0 {
			s.ZeroSizeAllocs++
		}
		s.LiveAllocs++
		s.PeakLiveAllocs = max(s.PeakLiveAllocs, s.LiveAllocs)
		if !refused {
			s.LiveBytes += ev.Size
			if r.sites != nil {
				la.site = r.sites.alloc(ev, s.LiveBytes > s.PeakLiveBytes)
			}
			if s.LiveBytes > s.PeakLiveBytes {
				s.PeakLiveBytes = s.LiveBytes
				s.PeakLiveEvent, s.PeakStep, s.PeakStepName, s.PeakMark = s.Events, s.Steps, r.stepName, r.markName
			}
		}
		s.TotalAllocBytes = satAdd(s.TotalAllocBytes, ev.Size)
		s.MaxAllocBytes = max(s.MaxAllocBytes, ev.Size)
	case OpFree:
		slot, ok := r.live.remove(ev.ID)
		if !ok {
			return fmt.Sprintf("free of id %d that is not live", ev.ID)
		}
		a := r.slots.At(slot)
		r.freeSlot = append(r.freeSlot, slot)
		ev.Size = a.size
		ev.Slot = slot
		r.sum.Frees++
		r.sum.LiveAllocs--
		if !a.refused {
			r.sum.LiveBytes -= a.size
			if r.sites != nil {
				r.sites.free(a.site, a.size)
			}
		}
	case OpStep:
		r.sum.Steps++
		r.stepName = ev.Name
	case OpMark:
		r.sum.Marks++
		r.oomNext = IsRecordedOOMMark(ev.Name)
		if IsAnnotation(ev.Name) {
			r.markName = ev.Name
		}
	case OpReserve:
		r.sum.Reserves++
	case OpRelease:
		r.sum.Releases++
	}
	if ev.Flags&HasT != 0 {
		if !r.sum.HasT {
			r.sum.FirstT = ev.T
			r.sum.HasT = true
		}
		r.sum.LastT = ev.T
	}
	r.sum.Events++
	return ""
}

// satAdd adds without wrapping around: a sum past 2^64-1 stays there.
func satAdd(a, b uint64) uint64 {
	if s, c := bits.Add64(a, b, 0); c == 0 {
		return s
	}
	return math.MaxUint64
}

// nextFree returns the slot takeSlot will return.
func (r *Reader) nextFree() uint32 {
	if n := len(r.freeSlot); n > 0 {
		return r.freeSlot[n-1]
	}
	return r.nextSlot
}

// takeSlot takes the slot nextFree returns: the most recently freed one,
// or a new one.
func (r *Reader) takeSlot() {
	if n := len(r.freeSlot); n > 0 {
		r.freeSlot = r.freeSlot[:n-1]
		return
	}
	r.nextSlot++
}

func dupAlloc(id uint64, line int64) string {
	return fmt.Sprintf("alloc of id %d that is already live (allocated at line %d)", id, line)
}

// intern returns b as a string, sharing one copy between equal tags.
//
// A small table indexed by a hash of the tag's length and first and last
// eight bytes answers most lookups with one comparison, before the map:
// a trace's tags are a few thousand call sites or tensor names, looked up
// at every alloc, and the map's hashing of the whole tag was a tenth of
// decoding a line.
func (d *decoder) intern(b []byte) string {
	h := quickHash(b)
	if s := d.recent[h]; s == string(b) {
		return s
	}
	s := d.internMap(b)
	d.recent[h] = s
	return s
}

// recentTags is the size of decoder.recent.
const (
	recentBits = 12
	recentTags = 1 << recentBits
)

// quickHash hashes b's length and its first and last eight bytes (or all
// of it, if shorter) to an index of decoder.recent.
func quickHash(b []byte) uint32 {
	var lo, hi uint64
	if len(b) >= 8 {
		lo = binary.LittleEndian.Uint64(b)
		hi = binary.LittleEndian.Uint64(b[len(b)-8:])
	} else {
		for i, c := range b {
			lo |= uint64(c) << (8 * i)
		}
	}
	x := (lo*0x9e3779b97f4a7c15 ^ hi) * 0xbf58476d1ce4e5b9
	x ^= uint64(len(b))
	return uint32((x * 0x94d049bb133111eb) >> (64 - recentBits))
}

// internMap is intern without the table in front.
func (d *decoder) internMap(b []byte) string {
	if s, ok := d.tags[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(d.tags) < maxInternedTags {
		d.tags[s] = s
	}
	return s
}

func fmtFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64 // read on the goroutine that reads ahead, if any
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
