package malloclab

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/bfcsim/bfcsim/trace"
)

// MaxLineBytes bounds one line of a .rep file, whose lines are an op letter
// and two numbers. The bound exists so that a file that is not a trace is
// reported instead of being read into memory whole.
const MaxLineBytes = 1 << 20

// maxKeptErrors is how many skipped-line errors Stats keeps.
const maxKeptErrors = 20

// maxID is the exclusive bound on trace ids and sizes (2^63, trace format v1).
const maxID = 1 << 63

// Options configures Convert.
type Options struct {
	// Name is the trace header's name; empty leaves it out.
	Name string
	// Meta adds keys to the trace header; values are JSON text. Convert's
	// own keys (the header numbers) win over them.
	Meta map[string]string
	// Lenient counts and skips invalid op lines instead of stopping at the
	// first one. A skipped line changes nothing: a skipped free leaves its
	// id live.
	Lenient bool
}

// Header holds a .rep file's four header numbers.
type Header struct {
	SuggestedHeapBytes int64 // unused by mdriver; kept as metadata
	NumIDs             int64 // ids run from 0 to NumIDs-1
	NumOps             int64 // op lines that follow
	Weight             int64 // 0 or 1: whether the trace counts towards the score
}

// Stats counts what Convert read and wrote.
type Stats struct {
	Header   Header
	Lines    int64 // lines read
	Ops      int64 // op lines converted
	Events   int64 // events written
	Allocs   int64 // alloc events, reallocs included
	Frees    int64 // free events, reallocs included
	Reallocs int64 // "r" lines, each a free and an alloc
	// Skipped counts op lines skipped under Options.Lenient; SkippedErrors
	// holds the first few.
	Skipped       int64
	SkippedErrors []*trace.SyntaxError
	// Warnings say where the header's counts disagree with the ops, as
	// "file:line: message".
	Warnings       []string
	LiveAtEnd      int64
	LiveBytesAtEnd uint64
	PeakLiveBytes  uint64
}

// Convert reads the .rep file r and writes it to w as a trace, then flushes
// w. file names r in errors and warnings ("short1.rep:12: ...").
//
// It returns a *trace.SyntaxError for an invalid header or op line (op lines
// only unless opt.Lenient), an error wrapping r's for a failed read, or w's
// error. The Stats describe what was converted up to the point of failure.
func Convert(r io.Reader, file string, w *trace.Writer, opt Options) (Stats, error) {
	c := &converter{file: file, w: w, opt: opt, live: make(map[uint64]liveID)}
	err := c.run(r)
	c.st.LiveAtEnd = int64(len(c.live))
	c.st.LiveBytesAtEnd = c.liveBytes
	return c.st, err
}

type liveID struct {
	size uint64
	line int64
}

type converter struct {
	file      string
	w         *trace.Writer
	opt       Options
	st        Stats
	live      map[uint64]liveID
	liveBytes uint64
	// headerLines[i] is the line of the i-th header number, for warnings.
	headerLines [4]int64
	// maxID and maxIDLine are the largest id used and where, for warnings.
	maxID     uint64
	maxIDLine int64
}

// headerFields names the header numbers in order, for messages.
var headerFields = [4]string{"suggested heap size", "number of ids", "number of ops", "weight"}

func (c *converter) run(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	var nums [4]int64
	n := 0
	for n < 4 && sc.Scan() {
		c.st.Lines++
		fields := bytes.Fields(sc.Bytes())
		if len(fields) == 0 || fields[0][0] == '#' {
			continue
		}
		for _, f := range fields {
			if n == 4 {
				return c.syntaxError(fmt.Sprintf("unexpected %s after the four header numbers (%s, %s, %s, %s)",
					quote(f), headerFields[0], headerFields[1], headerFields[2], headerFields[3]))
			}
			v, err := strconv.ParseInt(string(f), 10, 64)
			if err != nil {
				return c.syntaxError(fmt.Sprintf("header: %s %s is not a whole number", headerFields[n], quote(f)))
			}
			if v < 0 && n > 0 {
				return c.syntaxError(fmt.Sprintf("header: %s %d is negative", headerFields[n], v))
			}
			nums[n], c.headerLines[n] = v, c.st.Lines
			n++
		}
	}
	if err := c.scanErr(sc); err != nil {
		return err
	}
	if n < 4 {
		return c.syntaxError(fmt.Sprintf("the file ends inside the header: want 4 numbers (%s, %s, %s, %s), found %d (is this a malloc-lab .rep file?)",
			headerFields[0], headerFields[1], headerFields[2], headerFields[3], n))
	}
	c.st.Header = Header{SuggestedHeapBytes: nums[0], NumIDs: nums[1], NumOps: nums[2], Weight: nums[3]}
	if err := c.writeHeader(); err != nil {
		return err
	}
	for sc.Scan() {
		c.st.Lines++
		msg, err := c.line(sc.Bytes())
		if err != nil {
			return err
		}
		if msg == "" {
			continue
		}
		serr := c.syntaxError(msg)
		if !c.opt.Lenient {
			return serr
		}
		c.st.Skipped++
		if len(c.st.SkippedErrors) < maxKeptErrors {
			c.st.SkippedErrors = append(c.st.SkippedErrors, serr)
		}
	}
	if err := c.scanErr(sc); err != nil {
		return err
	}
	c.checkCounts()
	return c.w.Flush()
}

func (c *converter) writeHeader() error {
	h := c.st.Header
	meta := make(map[string]string, len(c.opt.Meta)+4)
	for k, v := range c.opt.Meta {
		meta[k] = v
	}
	meta["suggested_heap_size"] = strconv.FormatInt(h.SuggestedHeapBytes, 10)
	meta["num_ids"] = strconv.FormatInt(h.NumIDs, 10)
	meta["num_ops"] = strconv.FormatInt(h.NumOps, 10)
	meta["weight"] = strconv.FormatInt(h.Weight, 10)
	delete(meta, "bfcsim_trace")
	delete(meta, "name")
	delete(meta, "source")
	return c.w.WriteHeader(trace.Header{Version: trace.FormatVersion, Name: c.opt.Name, Source: "malloclab", Meta: meta})
}

// scanErr turns the Scanner's error into Convert's.
func (c *converter) scanErr(sc *bufio.Scanner) error {
	err := sc.Err()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bufio.ErrTooLong):
		c.st.Lines++
		return c.syntaxError(fmt.Sprintf("line longer than %d MiB (is this a malloc-lab .rep file?)", MaxLineBytes>>20))
	}
	return fmt.Errorf("reading %s: %w", c.file, err)
}

func (c *converter) syntaxError(msg string) *trace.SyntaxError {
	return &trace.SyntaxError{File: c.file, Line: c.st.Lines, Msg: msg}
}

// line converts one op line. It returns a reason if the line is invalid, in
// which case nothing was written and no state changed, or the Writer's error.
func (c *converter) line(text []byte) (string, error) {
	fields := bytes.Fields(text)
	if len(fields) == 0 || fields[0][0] == '#' {
		return "", nil
	}
	var op, usage string
	switch string(fields[0]) {
	case "a":
		op, usage = "alloc", "a ID BYTES"
	case "r":
		op, usage = "realloc", "r ID BYTES"
	case "f":
		op, usage = "free", "f ID"
	default:
		return fmt.Sprintf("unknown op %s (want a ID BYTES, r ID BYTES or f ID)", quote(fields[0])), nil
	}
	want := 3
	if op == "free" {
		want = 2
	}
	if len(fields) != want {
		return fmt.Sprintf("want %s, found %d fields", usage, len(fields)), nil
	}
	id, msg := number(fields[1], "id")
	if msg != "" {
		return msg, nil
	}
	var size uint64
	if want == 3 {
		if size, msg = number(fields[2], "size"); msg != "" {
			return msg, nil
		}
	}
	prev, live := c.live[id]
	liveBytes := c.liveBytes
	switch {
	case op == "alloc" && live:
		return fmt.Sprintf("alloc of id %d that is already live (allocated at line %d)", id, prev.line), nil
	case op != "alloc" && !live:
		return fmt.Sprintf("%s of id %d that is not live", op, id), nil
	case live:
		liveBytes -= prev.size
	}
	if op != "free" && liveBytes+size < liveBytes {
		return fmt.Sprintf("alloc of %d bytes would make more than 2^64 bytes live", size), nil
	}

	c.st.Ops++
	if id >= c.maxID {
		c.maxID, c.maxIDLine = id, c.st.Lines
	}
	if live {
		delete(c.live, id)
		c.liveBytes -= prev.size
		c.st.Frees++
		c.st.Events++
		if err := c.w.Write(trace.Event{Op: trace.OpFree, ID: id}); err != nil {
			return "", err
		}
	}
	if op == "free" {
		return "", nil
	}
	if op == "realloc" {
		c.st.Reallocs++
	}
	c.live[id] = liveID{size: size, line: c.st.Lines}
	c.liveBytes += size
	c.st.PeakLiveBytes = max(c.st.PeakLiveBytes, c.liveBytes)
	c.st.Allocs++
	c.st.Events++
	return "", c.w.Write(trace.Event{Op: trace.OpAlloc, ID: id, Size: size})
}

// checkCounts warns where the header disagrees with the ops read.
func (c *converter) checkCounts() {
	h := c.st.Header
	read := c.st.Ops + c.st.Skipped
	if read != h.NumOps {
		c.warn(c.headerLines[2], fmt.Sprintf("the header declares %d ops, the file has %d", h.NumOps, read))
	}
	switch {
	case c.st.Ops == 0:
	case h.NumIDs <= 0:
		c.warn(c.headerLines[1], fmt.Sprintf("the header declares %d ids, the file uses ids up to %d (line %d)",
			h.NumIDs, c.maxID, c.maxIDLine))
	case c.maxID >= uint64(h.NumIDs):
		c.warn(c.headerLines[1], fmt.Sprintf("the header declares %d ids (0 to %d), the file uses id %d (line %d)",
			h.NumIDs, h.NumIDs-1, c.maxID, c.maxIDLine))
	}
}

func (c *converter) warn(line int64, msg string) {
	c.st.Warnings = append(c.st.Warnings, fmt.Sprintf("%s:%d: %s", c.file, line, msg))
}

// number reads a decimal id or size below 2^63.
func number(tok []byte, what string) (uint64, string) {
	n, err := strconv.ParseUint(string(tok), 10, 64)
	switch {
	case err != nil && len(tok) > 0 && tok[0] == '-':
		return 0, fmt.Sprintf("%s %s is negative", what, quote(tok))
	case err != nil && errors.Is(err, strconv.ErrRange), err == nil && n >= maxID:
		return 0, fmt.Sprintf("%s %s is too large (must be < 2^63)", what, tok)
	case err != nil:
		return 0, fmt.Sprintf("%s %s is not a whole number", what, quote(tok))
	}
	return n, ""
}

// quote quotes text for a message, shortened if long.
func quote(b []byte) string {
	const maxQuoted = 40
	if len(b) > maxQuoted {
		return strconv.Quote(string(b[:maxQuoted])) + "..."
	}
	return strconv.Quote(string(b))
}
