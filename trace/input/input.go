// Package input opens whatever a user hands bfcsim as a trace: a bfcsim
// trace, or a recording in another format that is converted on the fly — a
// PyTorch memory snapshot (pickle or JSON), a glibc mtrace log, a CMU
// malloc-lab trace — each optionally gzip- or zstd-compressed.
//
// The format is recognised by content, not by the file's name:
//
//  1. The input is decompressed if it starts with the gzip or zstd magic
//     bytes, and its first bytes (up to sniffBytes) are looked at.
//  2. Detect names the format: a pickle's PROTO opcode, a JSON object whose
//     first key is a snapshot's, a TensorFlow profiler capture (an XSpace
//     protobuf whose first plane has a plane's name, or the JSON of
//     TensorBoard's memory profile), mtrace's "= Start" and "@ " lines,
//     malloc-lab's four header numbers and its a, f and r lines, and
//     anything else that starts like JSON is a trace. Input that is none of
//     these (binary data, a pickle of something else, plain text) is an
//     error that says what it looks like and what was expected.
//  3. A trace is read directly. A recording is converted by its importer in
//     a goroutine writing the trace into a pipe that a trace.Reader reads:
//     the same bytes `bfcsim import` would write, so replaying a recording
//     gives the same report as importing it and replaying the result.
//
// Memory stays flat: mtrace and malloc-lab convert line by line, and a
// snapshot's importer spools its trace (trace/pytorch). Closing a Stream
// stops its conversion.
package input

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync/atomic"
	"unicode/utf8"

	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/malloclab"
	"github.com/bfcsim/bfcsim/trace/mtrace"
	"github.com/bfcsim/bfcsim/trace/pytorch"
	"github.com/bfcsim/bfcsim/trace/tensorflow"
)

// Format is a kind of input.
type Format int

// The formats bfcsim reads.
const (
	Trace      Format = iota // a bfcsim trace: JSON Lines
	PyTorch                  // a PyTorch memory snapshot: pickle or JSON
	Mtrace                   // a glibc mtrace log
	Malloclab                // a CMU malloc-lab trace (.rep)
	TensorFlow               // a TensorFlow profiler capture: XSpace or memory profile
)

// Formats lists every format, trace first.
var Formats = []Format{Trace, PyTorch, Mtrace, Malloclab, TensorFlow}

var formatNames = [...]string{Trace: "trace", PyTorch: "pytorch", Mtrace: "mtrace", Malloclab: "malloclab", TensorFlow: "tensorflow"}

var formatDescriptions = [...]string{
	Trace:      "a bfcsim trace",
	PyTorch:    "a PyTorch memory snapshot",
	Mtrace:     "a glibc mtrace log",
	Malloclab:  "a malloc-lab trace",
	TensorFlow: "a TensorFlow profiler capture",
}

// Name is the format's name as `bfcsim import` spells it ("pytorch").
func (f Format) Name() string { return formatNames[f] }

// String describes the format for people ("a PyTorch memory snapshot").
func (f Format) String() string { return formatDescriptions[f] }

// expected is what an input that is none of the formats is told.
const expected = "expected a bfcsim trace (JSON Lines), a PyTorch memory snapshot (pickle or JSON), a TensorFlow profiler capture (*.xplane.pb or *.memory_profile.json.gz), a glibc mtrace log or a malloc-lab trace"

// sniffBytes is how much of an input Detect may look at: enough for the
// first lines of any format.
const sniffBytes = 4 << 10

// Options say how to read an input.
type Options struct {
	// Name names a converted recording's trace in its header ("" leaves
	// it out); a trace keeps its own.
	Name string
	// SkipInvalid counts and skips invalid lines instead of stopping at
	// the first one: in the trace (trace.SkipInvalid) and, for mtrace and
	// malloc-lab, in the recording.
	SkipInvalid bool
	// Device is the PyTorch device to import; -1 picks the one with the
	// most trace entries.
	Device int
	// NoAddr leaves mtrace's recorded addresses out of the trace.
	NoAddr bool
	// TempDir is where a large snapshot spools its trace while it is
	// converted ("": the system's).
	TempDir string
	// Allocator picks the allocator of a TensorFlow capture ("GPU_0_bfc");
	// "" takes the only one.
	Allocator string
	// Frames says which frames of a recorded stack are the program's own,
	// for the call site an allocation is tagged with.
	Frames trace.FrameRule
	// CallSites has the Reader count the bytes live at the peak by call
	// site (trace.TrackCallSites).
	CallSites bool
}

// Detect names the format of an input from its first bytes (decompressed),
// or says what the input looks like when it is none of the formats. eof
// says head is the whole input.
func Detect(head []byte, eof bool) (Format, error) {
	if tensorflow.LooksLikeXSpace(head) {
		return TensorFlow, nil // before the whitespace trim: the XSpace's first byte is '\n'
	}
	head = bytes.TrimPrefix(head, []byte{0xef, 0xbb, 0xbf}) // a UTF-8 BOM
	text := bytes.TrimLeft(head, " \t\r\n")
	if len(text) == 0 {
		return Trace, nil // empty: a trace with no events
	}
	switch c := text[0]; {
	case head[0] == 0x80 && len(head) > 1 && head[1] >= 2 && head[1] <= 5:
		return PyTorch, nil // a pickle of protocol 2 or later; the importer says if it is no snapshot
	case isOldPickle(head):
		return PyTorch, nil
	case c == '{':
		if k, ok := firstKey(text); ok && snapshotKeys[k] {
			return PyTorch, nil
		} else if ok && tensorflow.MemoryProfileKeys[k] {
			return TensorFlow, nil
		}
		return Trace, nil
	case c == '[':
		return 0, errors.New("a JSON array, not a trace (JSON Lines of objects) or a memory snapshot (an object); " + expected)
	}
	if !utf8.Valid(trimPartialRune(head, eof)) || bytes.IndexByte(head, 0) >= 0 {
		return 0, fmt.Errorf("%s, not a trace; %s", binaryKind(head), expected)
	}
	line := firstLine(text)
	switch {
	case bytes.HasPrefix(line, []byte("= Start")) || bytes.HasPrefix(line, []byte("= End")) || bytes.HasPrefix(line, []byte("@ ")):
		return Mtrace, nil
	case looksMalloclab(text):
		return Malloclab, nil
	}
	if len(line) > 60 {
		line = append(line[:60:60], "..."...)
	}
	return 0, fmt.Errorf("text that is not a trace (its first line is %s); %s", strconv.Quote(string(line)), expected)
}

// snapshotKeys are the keys a memory snapshot's top-level dict starts with.
var snapshotKeys = map[string]bool{"segments": true, "device_traces": true, "allocator_settings": true, "external_annotations": true}

// isOldPickle recognises a pickle of protocol 0 or 1 holding a dict or a
// list: MARK DICT or LIST, or EMPTY_DICT or EMPTY_LIST and a memo write.
func isOldPickle(b []byte) bool {
	if len(b) < 2 {
		return false
	}
	switch {
	case b[0] == '(' && (b[1] == 'd' || b[1] == 'l'):
		return true
	case (b[0] == '}' || b[0] == ']') && (b[1] == 'q' || b[1] == 'r' || b[1] == '(' || b[1] == 'p'):
		return true
	}
	return false
}

// firstKey returns the first key of the JSON object b starts with.
func firstKey(b []byte) (string, bool) {
	b = bytes.TrimLeft(b[1:], " \t\r\n")
	if len(b) == 0 || b[0] != '"' {
		return "", false
	}
	end := bytes.IndexByte(b[1:], '"')
	if end < 0 {
		return "", false
	}
	return string(b[1 : 1+end]), true
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	return bytes.TrimRight(b, "\r")
}

// trimPartialRune drops what may be a rune cut off at the end of a head
// that is not the whole input.
func trimPartialRune(b []byte, eof bool) []byte {
	if !eof && len(b) > utf8.UTFMax {
		return b[:len(b)-utf8.UTFMax]
	}
	return b
}

// looksMalloclab recognises malloc-lab's header: four whole numbers (on
// one line or several, comments aside), then op lines.
func looksMalloclab(text []byte) bool {
	numbers := 0
	for _, line := range bytes.Split(text, []byte("\n")) {
		fields := bytes.Fields(line)
		if len(fields) == 0 || fields[0][0] == '#' {
			continue
		}
		if numbers < 4 {
			for _, f := range fields {
				if _, err := strconv.ParseInt(string(f), 10, 64); err != nil {
					return false
				}
				numbers++
			}
			continue
		}
		op := string(fields[0])
		return numbers == 4 && (op == "a" || op == "f" || op == "r")
	}
	return numbers == 4
}

// binaryKind names binary data by its magic bytes where they are well
// known.
func binaryKind(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("PK\x03\x04")):
		return "a zip archive (torch.save writes these; a memory snapshot is what torch.cuda.memory._dump_snapshot writes)"
	case bytes.HasPrefix(b, []byte("\x7fELF")):
		return "an ELF executable"
	case bytes.HasPrefix(b, []byte("%PDF")):
		return "a PDF document"
	case bytes.HasPrefix(b, []byte("\x89PNG")):
		return "a PNG image"
	case b[0] == 0x80:
		return fmt.Sprintf("binary data (a pickle of protocol %d?)", b[min(1, len(b)-1)])
	}
	return "binary data"
}

// Peeked is an input whose format has been looked at.
type Peeked struct {
	// Reader reads the whole input, decompressed, from its start.
	io.Reader
	// Format is the input's format, when Unknown is nil.
	Format Format
	// Unknown says what the input looks like when it is none of the
	// formats ("binary data, not a trace; expected ...").
	Unknown error
	dec     io.Closer
}

// Close releases the decompressor; it does not close the input.
func (p *Peeked) Close() error { return p.dec.Close() }

// Peek decompresses r if it is compressed and detects the format of its
// content, consuming nothing of it. Errors are read or decompression
// errors; an input of no known format is not an error (see Unknown).
func Peek(r io.Reader) (*Peeked, error) {
	dec, err := trace.NewDecompressReader(r)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(dec, 64<<10)
	head, err := br.Peek(sniffBytes)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		dec.Close()
		return nil, err
	}
	p := &Peeked{Reader: br, dec: dec}
	p.Format, p.Unknown = Detect(head, err == io.EOF)
	return p, nil
}

// Stream is an input being read as a trace: directly, or converted from a
// recording as it is read.
type Stream struct {
	*trace.Reader
	// Format is the input's format.
	Format Format

	raw     *Counter
	closeIn func() error // releases the decompressor of a trace read directly
	pr      *io.PipeReader
	parent  context.Context    // the caller's: when done, nothing is waited for
	cancel  context.CancelFunc // stops the conversion
	unwatch func() bool        // stops watching parent
	done    chan struct{}      // closed when the conversion has ended
	ended   bool               // Next has returned false
	stats   any                // the importer's statistics (pytorch.Stats, ...)
	convErr error
}

// Open reads r (named file in messages) as a trace, converting it on the
// fly if it is a recording. ctx stops a conversion. The caller keeps
// ownership of r and must Close the Stream.
func Open(ctx context.Context, r io.Reader, file string, opt Options) (*Stream, error) {
	s := &Stream{raw: &Counter{R: r}}
	in, err := Peek(s.raw)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	if in.Unknown != nil {
		in.Close()
		return nil, fmt.Errorf("%s: %w", file, in.Unknown)
	}
	s.Format = in.Format
	var ropts []trace.ReaderOption
	if opt.SkipInvalid {
		ropts = append(ropts, trace.SkipInvalid())
	}
	if opt.CallSites {
		ropts = append(ropts, trace.TrackCallSites())
	}
	if s.Format == Trace {
		if s.Reader, err = trace.NewReader(in, file, ropts...); err != nil {
			in.Close()
			return nil, err
		}
		s.closeIn = in.Close
		return s, nil
	}
	s.parent = ctx
	ctx, s.cancel = context.WithCancel(ctx)
	pr, pw := io.Pipe()
	s.pr, s.done = pr, make(chan struct{})
	// An interrupt ends the trace at once, even while the conversion is
	// blocked reading an input that does not come (a pipe nobody writes):
	// the reader, not the conversion, is closed.
	s.unwatch = context.AfterFunc(s.parent, func() { pr.CloseWithError(s.parent.Err()) })
	go func() {
		defer close(s.done)
		defer in.Close() // the decompressor: released when the conversion ends
		w := trace.NewWriter(pw)
		s.stats, s.convErr = Convert(ctx, s.Format, in, file, w, opt)
		pw.CloseWithError(s.convErr) // nil: the trace ends
	}()
	if s.Reader, err = trace.NewReader(pr, file, ropts...); err != nil {
		s.Close()
		if cerr := s.conversionErr(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	return s, nil
}

// conversionErr waits for the conversion to end, once the trace's pipe has
// failed or been closed, and returns its error. It does not wait after an
// interrupt: the conversion may be blocked reading an input that does not
// come, and the interrupt is the error.
func (s *Stream) conversionErr() error {
	select {
	case <-s.done:
		return s.convErr
	default:
	}
	select {
	case <-s.done:
		return s.convErr
	case <-s.parent.Done():
		return s.parent.Err()
	}
}

// Err returns what stopped the stream: the conversion's error, if the
// recording could not be converted, else the trace's.
func (s *Stream) Err() error {
	err := s.Reader.Err()
	if err == nil || s.done == nil {
		return err
	}
	var serr *trace.SyntaxError
	if errors.As(err, &serr) {
		s.Close() // the converted trace is bad: stop the conversion
		return err
	}
	if cerr := s.conversionErr(); cerr != nil { // the pipe failed
		return cerr
	}
	return err
}

// Next advances to the next event; see trace.Reader.
func (s *Stream) Next() bool {
	ok := s.Reader.Next()
	if !ok {
		s.ended = true
	}
	return ok
}

// NextBatch is trace.Reader.NextBatch, noting the end as Next does.
func (s *Stream) NextBatch(dst []trace.Event) []trace.Event {
	dst = s.Reader.NextBatch(dst)
	if len(dst) < cap(dst) { // fewer than asked: the end, or an error
		s.ended = true
	}
	return dst
}

// NextLent is trace.Reader.NextLent, noting the end as Next does.
func (s *Stream) NextLent() trace.Lent {
	l := s.Reader.NextLent()
	if len(l.Events) == 0 {
		s.ended = true
	}
	return l
}

// Stats returns what the importer reported of a converted recording
// (pytorch.Stats, mtrace.Stats or malloclab.Stats) once the stream has been
// read to its end without an error, else nil.
func (s *Stream) Stats() any {
	if s.done == nil || !s.ended || s.Reader.Err() != nil {
		return nil
	}
	<-s.done // the trace has ended: the conversion has, or is about to
	return s.stats
}

// OtherDevices returns, once the stream has been read to its end, the
// devices of a recording of several that hold allocations besides the one
// converted, in ascending order: none when the device was asked for
// (Options.Device), for a recording of one device, and for a trace.
func (s *Stream) OtherDevices() []int {
	st, ok := s.Stats().(pytorch.Stats)
	if !ok || st.DeviceChoice.Asked {
		return nil
	}
	return slices.Sorted(slices.Values(st.DeviceChoice.Others))
}

// BytesRead returns how many bytes of the input, as stored (compressed),
// have been read; it is safe to call from another goroutine.
func (s *Stream) BytesRead() int64 { return s.raw.N() }

// Close stops the conversion, if any: its next read or write fails. It
// does not wait for it, so that an input that blocks (a pipe nobody
// writes) cannot hold Close. It does not close the input; the caller
// closes it after Close.
func (s *Stream) Close() error {
	if s.pr != nil {
		s.unwatch()
		s.cancel()
		s.pr.CloseWithError(errClosed)
	}
	if s.Reader != nil {
		s.Reader.Close()
	}
	if s.closeIn != nil {
		return s.closeIn()
	}
	return nil
}

var errClosed = errors.New("the trace was closed before its end")

// Convert converts a recording of format f from r to a trace written to w,
// header first, and flushes w. It returns the importer's statistics.
// Errors in r name it by file.
func Convert(ctx context.Context, f Format, r io.Reader, file string, w *trace.Writer, opt Options) (any, error) {
	r = trace.ContextReader(ctx, r)
	switch f {
	case PyTorch:
		st, err := pytorch.Convert(ctx, r, w, pytorch.Options{Name: opt.Name, Device: opt.Device, TempDir: opt.TempDir, Frames: opt.Frames})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		return st, nil
	case Mtrace:
		st, err := mtrace.Convert(r, file, w, mtrace.Options{Name: opt.Name, Lenient: opt.SkipInvalid, NoAddr: opt.NoAddr})
		return st, err
	case Malloclab:
		st, err := malloclab.Convert(r, file, w, malloclab.Options{Name: opt.Name, Lenient: opt.SkipInvalid})
		return st, err
	case TensorFlow:
		st, err := tensorflow.ConvertAny(ctx, r, file, w, tensorflow.Options{Name: opt.Name, Allocator: opt.Allocator})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	return nil, fmt.Errorf("%s: %s is not a recording to convert", file, f)
}

// Counter counts the bytes read through it, for progress reports drawn
// from another goroutine.
type Counter struct {
	R io.Reader
	n atomic.Int64
}

func (c *Counter) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// N returns the bytes read so far; it is safe to call concurrently with
// Read.
func (c *Counter) N() int64 { return c.n.Load() }
