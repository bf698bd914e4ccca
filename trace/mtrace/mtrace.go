package mtrace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/bfcsim/bfcsim/trace"
)

// MaxLineBytes bounds one line of a log. mtrace lines are a caller (a path,
// a symbol, an offset) and two numbers, well under a kilobyte; the bound
// exists so that a file that is not a log (a binary with no newline) is
// reported instead of being read into memory whole.
const MaxLineBytes = 1 << 20

// maxKeptErrors is how many skipped-line errors Stats keeps; the rest are
// only counted.
const maxKeptErrors = 20

// maxTags bounds the cache from caller text to tag. A program has a few
// thousand call sites at most; past the bound tags are still made, only
// not cached.
const maxTags = 1 << 16

// maxID is the exclusive bound on trace ids (2^63, see trace format v1).
const maxID = 1 << 63

// ErrNoMtrace is returned (wrapped, with the file's name) for an input that
// has lines but neither a "= Start" line nor any allocation: not a log.
var ErrNoMtrace = errors.New("no mtrace output")

// Options configures Convert.
type Options struct {
	// Name is the trace header's name; empty leaves it out.
	Name string
	// Meta adds keys to the trace header. Values are JSON text (a string is
	// written quoted: `"sort -n"`). The keys bfcsim_trace, name and source
	// are Convert's.
	Meta map[string]string
	// Lenient counts and skips lines that are not mtrace output, instead of
	// stopping at the first one. A skipped line between the two halves of a
	// realloc does not separate them; a realloc with a bad or missing half
	// is skipped whole, its old block left live.
	Lenient bool
	// NoAddr leaves the recorded address out of alloc events.
	NoAddr bool
}

// Stats counts what Convert read and wrote.
type Stats struct {
	Lines    int64 // lines read, blank ones included
	Starts   int64 // "= Start" lines: 0 means the log is not from mtrace(), or empty
	Events   int64 // events written: Allocs + Frees
	Allocs   int64 // alloc events: malloc, calloc, memalign, the new block of a realloc
	Frees    int64 // free events: free, the old block of a realloc, DoubleAllocs
	Reallocs int64 // reallocs (a "<" and ">" pair), each written as a free and an alloc
	// DroppedFrees counts frees (and reallocs) of addresses the log never
	// allocated: blocks allocated before tracing began. They are not written.
	DroppedFrees int64
	// DoubleAllocs counts mallocs that returned an address still live in the
	// log (its free was not logged). Each is written as the free of the old
	// allocation followed by the new alloc.
	DoubleAllocs int64
	// FailedAllocs counts mallocs that returned NULL and failed reallocs.
	// They write nothing; a failed realloc leaves its block live.
	FailedAllocs int64
	// Skipped counts lines skipped under Options.Lenient; SkippedErrors holds
	// the first few of them.
	Skipped       int64
	SkippedErrors []*trace.SyntaxError
	// LiveAtEnd and LiveBytesAtEnd describe the allocations never freed.
	LiveAtEnd      int64
	LiveBytesAtEnd uint64
	// PeakLiveBytes is the largest sum of the sizes of live allocations.
	PeakLiveBytes uint64
	// CutLastLine reports that the log's last line had no newline and was
	// not converted. glibc ends every line with one, so such a line was cut
	// short (the process died, or called _exit, before flushing its log)
	// and its numbers cannot be trusted.
	CutLastLine bool
}

// Convert reads the mtrace log r and writes it to w as a trace: a header
// with source "mtrace", then one alloc or free per heap call, and flushes w.
// file names r in errors ("log.txt:12: ...").
//
// It returns a *trace.SyntaxError for a line that is not mtrace output
// (unless opt.Lenient), ErrNoMtrace (wrapped) for an input with no mtrace
// output at all, an error wrapping r's for a failed read, or w's error; w
// is flushed only on success. The Stats describe what was converted up to the point of failure.
// Frees of addresses the log never allocated are not errors: they are
// dropped and counted (see Stats).
func Convert(r io.Reader, file string, w *trace.Writer, opt Options) (Stats, error) {
	c := &converter{
		file:   file,
		w:      w,
		opt:    opt,
		live:   make(map[uint64]block),
		tags:   make(map[string]string),
		nextID: 1,
	}
	err := c.run(r)
	c.st.LiveAtEnd = int64(len(c.live))
	c.st.LiveBytesAtEnd = c.liveBytes
	return c.st, err
}

// block is a live allocation.
type block struct{ id, size uint64 }

type converter struct {
	file      string
	w         *trace.Writer
	opt       Options
	st        Stats
	live      map[uint64]block // by address
	liveBytes uint64
	nextID    uint64
	tags      map[string]string
	werr      error // the Writer's first error

	// A "<" line waits for its ">" line.
	pending     bool
	pendingAddr uint64
	pendingLine int64
}

func (c *converter) run(r io.Reader) error {
	meta := make(map[string]string, len(c.opt.Meta))
	for k, v := range c.opt.Meta {
		if k != "bfcsim_trace" && k != "name" && k != "source" {
			meta[k] = v
		}
	}
	h := trace.Header{Version: trace.FormatVersion, Name: c.opt.Name, Source: "mtrace", Meta: meta}
	if err := c.w.WriteHeader(h); err != nil {
		return err
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	unterminated := false
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		unterminated = atEOF && len(data) > 0 && bytes.IndexByte(data, '\n') < 0
		return bufio.ScanLines(data, atEOF)
	})
	for sc.Scan() {
		c.st.Lines++
		if unterminated && len(bytes.TrimSpace(sc.Bytes())) > 0 {
			// glibc ends every line with a newline: this one was cut
			// short by a process that died before flushing its log.
			c.st.CutLastLine = true
			break
		}
		if err := c.line(sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return c.syntaxError(c.st.Lines+1,
				fmt.Sprintf("line longer than %d MiB (is this an mtrace log?)", MaxLineBytes>>20))
		}
		return fmt.Errorf("reading %s: %w", c.file, err)
	}
	if c.pending {
		if err := c.unmatchedRealloc(); err != nil {
			return err
		}
	}
	if c.st.Starts == 0 && c.st.Events == 0 && c.st.Lines > 0 {
		lines := "lines"
		if c.st.Lines == 1 {
			lines = "line"
		}
		return fmt.Errorf("%s: %w in %d %s (is this an mtrace log?)", c.file, ErrNoMtrace, c.st.Lines, lines)
	}
	return c.w.Flush()
}

// fail reports the invalid line n: an error, or under Lenient a count.
func (c *converter) fail(n int64, msg string) error {
	serr := c.syntaxError(n, msg)
	if !c.opt.Lenient {
		return serr
	}
	c.st.Skipped++
	if len(c.st.SkippedErrors) < maxKeptErrors {
		c.st.SkippedErrors = append(c.st.SkippedErrors, serr)
	}
	return nil
}

func (c *converter) syntaxError(n int64, msg string) *trace.SyntaxError {
	return &trace.SyntaxError{File: c.file, Line: n, Msg: msg}
}

// unmatchedRealloc reports a "<" line that no ">" line followed.
func (c *converter) unmatchedRealloc() error {
	c.pending = false
	return c.fail(c.pendingLine, fmt.Sprintf(`realloc of %#x ("<") is not followed by its result (">")`, c.pendingAddr))
}

// line converts one line. It returns a *trace.SyntaxError for an invalid
// line (unless Lenient), or the Writer's error.
func (c *converter) line(text []byte) error {
	rec, msg := parse(text)
	if msg != "" {
		if rec.op == '>' {
			c.pending = false // the realloc is skipped whole
		}
		return c.fail(c.st.Lines, msg)
	}
	if rec.op == 0 {
		return nil // a blank line
	}
	if c.pending && rec.op != '>' {
		if err := c.unmatchedRealloc(); err != nil {
			return err
		}
	}
	if msg := c.apply(rec); msg != "" {
		return c.fail(c.st.Lines, msg)
	}
	return c.werr
}

// apply converts one valid line. It returns a reason if the line cannot be
// converted, in which case it has written nothing and changed no state but
// for dropping a pending "<".
func (c *converter) apply(rec record) string {
	switch rec.op {
	case '=':
		if string(rec.caller) == "Start" {
			c.st.Starts++
		}
	case '+':
		if rec.addr == 0 {
			c.st.FailedAllocs++
			return ""
		}
		if msg := c.checkAlloc(rec, 0); msg != "" {
			return msg
		}
		c.alloc(rec)
	case '-':
		if rec.addr != 0 {
			c.free(rec.addr)
		}
	case '<':
		c.pending, c.pendingAddr, c.pendingLine = true, rec.addr, c.st.Lines
	case '>':
		if !c.pending {
			return `realloc result (">") without the "<" line before it`
		}
		c.pending = false
		if rec.addr == 0 {
			c.st.FailedAllocs++
			return ""
		}
		if msg := c.checkAlloc(rec, c.pendingAddr); msg != "" {
			return msg
		}
		c.st.Reallocs++
		if c.pendingAddr != 0 {
			c.free(c.pendingAddr)
		}
		c.alloc(rec)
	case '!':
		c.st.FailedAllocs++
	}
	return ""
}

// checkAlloc returns why rec cannot be written as an alloc after the free
// of the allocation at freed (0 for none), or "".
func (c *converter) checkAlloc(rec record, freed uint64) string {
	if rec.size >= maxID {
		return fmt.Sprintf("size %#x is too large (sizes must be < 2^63)", rec.size)
	}
	if c.nextID >= maxID {
		return "more than 2^63 allocations"
	}
	liveBytes := c.liveBytes
	if b, ok := c.live[freed]; ok && freed != 0 {
		liveBytes -= b.size
	}
	if b, ok := c.live[rec.addr]; ok && rec.addr != freed {
		liveBytes -= b.size
	}
	if liveBytes+rec.size < liveBytes {
		return fmt.Sprintf("malloc of %d bytes would make more than 2^64 bytes live", rec.size)
	}
	return ""
}

// alloc writes the alloc of rec, which checkAlloc accepted, after the free
// of an allocation the log left live at the same address.
func (c *converter) alloc(rec record) {
	if _, dup := c.live[rec.addr]; dup {
		c.st.DoubleAllocs++
		c.free(rec.addr)
	}
	ev := trace.Event{Op: trace.OpAlloc, ID: c.nextID, Size: rec.size, Tag: c.tag(rec.caller)}
	if !c.opt.NoAddr {
		ev.Addr, ev.Flags = rec.addr, trace.HasAddr
	}
	c.live[rec.addr] = block{id: c.nextID, size: rec.size}
	c.nextID++
	c.liveBytes += rec.size
	c.st.PeakLiveBytes = max(c.st.PeakLiveBytes, c.liveBytes)
	c.st.Allocs++
	c.st.Events++
	c.write(ev)
}

// free writes the free of the allocation at addr, or counts it as dropped.
func (c *converter) free(addr uint64) {
	b, ok := c.live[addr]
	if !ok {
		c.st.DroppedFrees++
		return
	}
	delete(c.live, addr)
	c.liveBytes -= b.size
	c.st.Frees++
	c.st.Events++
	c.write(trace.Event{Op: trace.OpFree, ID: b.id})
}

// write writes ev, keeping the Writer's first error in c.werr.
func (c *converter) write(ev trace.Event) {
	if err := c.w.Write(ev); err != nil && c.werr == nil {
		c.werr = err
	}
}

// tag returns the short tag of a caller, cached.
func (c *converter) tag(caller []byte) string {
	if t, ok := c.tags[string(caller)]; ok {
		return t
	}
	t := callerTag(string(caller))
	if len(c.tags) < maxTags {
		c.tags[string(caller)] = t
	}
	return t
}

// callerTag shortens a caller as glibc prints it to a tag:
//
//	/lib/x86_64-linux-gnu/libc.so.6:(__strdup+1a)[0x9e9aa]  →  __strdup
//	./prog:[0x1139]                                          →  prog+0x1139
//	[0x7f3a5c1d2e3f]                                         →  0x7f3a5c1d2e3f
//
// Anything else is kept as it is.
func callerTag(caller string) string {
	lb := strings.LastIndexByte(caller, '[')
	if lb < 0 || caller[len(caller)-1] != ']' {
		return caller
	}
	offset := caller[lb+1 : len(caller)-1]
	prefix := caller[:lb]
	if n := len(prefix); n > 0 && prefix[n-1] == ')' {
		if lp := strings.LastIndexByte(prefix, '('); lp >= 0 {
			sym := prefix[lp+1 : n-1]
			if i := strings.LastIndexAny(sym, "+-"); i > 0 {
				sym = sym[:i]
			}
			if sym != "" {
				return sym
			}
			prefix = prefix[:lp]
		}
	}
	if n := len(prefix); n > 0 && prefix[n-1] == ':' {
		prefix = prefix[:n-1]
	}
	if prefix == "" {
		return offset
	}
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 && i < len(prefix)-1 {
		prefix = prefix[i+1:]
	}
	return prefix + "+" + offset
}

// record is one parsed line. op is 0 for a blank line; for "=" lines caller
// holds the text after "= ". An addr of 0 is glibc's "(nil)".
type record struct {
	op     byte
	caller []byte
	addr   uint64
	size   uint64
}

const wantLine = `want "@ CALLER + 0xADDR 0xSIZE", "@ CALLER - 0xADDR", "@ CALLER < 0xOLD", "@ CALLER > 0xNEW 0xSIZE" or "= Start"`

// parse splits a line into its parts. The operator and numbers are taken
// from the right, so that the caller may contain spaces.
func parse(line []byte) (record, string) {
	s := bytes.TrimRight(line, " \t\r")
	s = bytes.TrimLeft(s, " \t")
	if len(s) == 0 {
		return record{}, ""
	}
	if s[0] == '=' {
		return record{op: '=', caller: bytes.TrimLeft(s[1:], " \t")}, ""
	}
	var rec record
	var addrTok, sizeTok, rest []byte
	rest1, last := cutLast(s)
	rest2, prev := cutLast(rest1)
	switch {
	case isOp(prev, "-<"):
		rec.op, addrTok, rest = prev[0], last, rest2
	default:
		rest3, op := cutLast(rest2)
		if !isOp(op, "+>!") {
			return rec, fmt.Sprintf("not an mtrace line: %s (%s)", quote(s), wantLine)
		}
		rec.op, addrTok, sizeTok, rest = op[0], prev, last, rest3
	}
	if len(rest) > 0 {
		if rest[0] != '@' {
			return rec, fmt.Sprintf("not an mtrace line: %s (%s)", quote(s), wantLine)
		}
		rec.caller = bytes.TrimSpace(rest[1:])
	}
	var ok bool
	if rec.addr, ok = parseAddr(addrTok); !ok {
		return rec, fmt.Sprintf("bad address %s (want 0x and hex digits, or (nil))", quote(addrTok))
	}
	if sizeTok != nil {
		if rec.size, ok = parseNum(sizeTok); !ok {
			return rec, fmt.Sprintf("bad size %s (want 0x and hex digits)", quote(sizeTok))
		}
	}
	return rec, ""
}

// cutLast splits off the last space-separated field of s.
func cutLast(s []byte) (rest, field []byte) {
	s = bytes.TrimRight(s, " \t")
	i := bytes.LastIndexAny(s, " \t")
	return s[:i+1], s[i+1:]
}

func isOp(tok []byte, ops string) bool {
	return len(tok) == 1 && strings.IndexByte(ops, tok[0]) >= 0
}

// parseAddr reads a %p address: 0x and hex digits, or (nil) for 0.
func parseAddr(tok []byte) (uint64, bool) {
	if string(tok) == "(nil)" {
		return 0, true
	}
	if len(tok) < 3 || tok[0] != '0' || (tok[1] != 'x' && tok[1] != 'X') {
		return 0, false
	}
	return parseNum(tok)
}

// parseNum reads a %#lx number: 0x and hex digits, or a decimal (glibc
// prints zero as "0").
func parseNum(tok []byte) (uint64, bool) {
	base, digits := 10, tok
	if len(tok) > 2 && tok[0] == '0' && (tok[1] == 'x' || tok[1] == 'X') {
		base, digits = 16, tok[2:]
	}
	if len(digits) == 0 || digits[0] == '+' || digits[0] == '-' || bytes.IndexByte(digits, '_') >= 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(digits), base, 64)
	return n, err == nil
}

// quote quotes text for an error message, shortened if long.
func quote(b []byte) string {
	const maxQuoted = 60
	if len(b) > maxQuoted {
		return strconv.Quote(string(b[:maxQuoted])) + "..."
	}
	return strconv.Quote(string(b))
}
