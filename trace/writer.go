package trace

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Writer writes a v1 trace. Keys are written in a fixed order, so the same
// events always give the same bytes.
//
// A Writer buffers; call Flush when done. After the first error every call
// returns it.
type Writer struct {
	w   *bufio.Writer
	buf []byte
	err error
}

// NewWriter returns a Writer to w. The caller owns w (and any compressor
// wrapped around it).
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 64<<10)}
}

// WriteHeader writes h as the header line. It must be called before the first
// Write, if at all. Meta values must be valid JSON text.
func (w *Writer) WriteHeader(h Header) error {
	b := append(w.buf[:0], `{"bfcsim_trace":`...)
	b = strconv.AppendInt(b, FormatVersion, 10)
	if h.Name != "" {
		b = appendString(append(b, `,"name":`...), h.Name)
	}
	if h.Source != "" {
		b = appendString(append(b, `,"source":`...), h.Source)
	}
	if h.CapacityBytes != 0 {
		b = strconv.AppendUint(append(b, `,"capacity":`...), h.CapacityBytes, 10)
	}
	if h.TimeUnit != "" {
		b = appendString(append(b, `,"time_unit":`...), h.TimeUnit)
	}
	keys := make([]string, 0, len(h.Meta))
	for k := range h.Meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendString(append(b, ','), k)
		b = append(append(b, ':'), h.Meta[k]...)
	}
	return w.writeLine(append(b, '}'))
}

// Write writes one event. Fields that do not belong to the event's op (a
// size on a free, say) are not written; Line and Slot are never written.
func (w *Writer) Write(ev Event) error {
	if ev.Op < OpAlloc || ev.Op > OpRelease {
		return fmt.Errorf("writing event: invalid op %d", ev.Op)
	}
	return w.writeLine(AppendEvent(w.buf[:0], ev))
}

// AppendEvent appends the JSON line of ev, without a newline, to dst.
func AppendEvent(dst []byte, ev Event) []byte {
	b := append(dst, `{"op":"`...)
	b = append(b, ev.Op.String()...)
	b = append(b, '"')
	switch ev.Op {
	case OpAlloc:
		b = strconv.AppendUint(append(b, `,"id":`...), ev.ID, 10)
		b = strconv.AppendUint(append(b, `,"size":`...), ev.Size, 10)
		if ev.Align != 0 {
			b = strconv.AppendUint(append(b, `,"align":`...), ev.Align, 10)
		}
	case OpFree:
		b = strconv.AppendUint(append(b, `,"id":`...), ev.ID, 10)
	case OpReserve:
		b = strconv.AppendUint(append(b, `,"addr":`...), ev.Addr, 10)
		b = strconv.AppendUint(append(b, `,"size":`...), ev.Size, 10)
	case OpRelease:
		b = strconv.AppendUint(append(b, `,"addr":`...), ev.Addr, 10)
		if ev.Size != 0 {
			b = strconv.AppendUint(append(b, `,"size":`...), ev.Size, 10)
		}
	}
	if ev.Flags&HasT != 0 {
		b = appendFloat(append(b, `,"t":`...), ev.T)
	}
	if ev.Flags&HasStream != 0 && (ev.Op == OpAlloc || ev.Op == OpFree || ev.Op == OpReserve) {
		b = strconv.AppendInt(append(b, `,"stream":`...), ev.Stream, 10)
	}
	switch ev.Op {
	case OpAlloc:
		if ev.Tag != "" {
			b = appendString(append(b, `,"tag":`...), ev.Tag)
		}
		if ev.Stack != 0 {
			b = strconv.AppendUint(append(b, `,"stack":`...), uint64(ev.Stack), 10)
		}
		if ev.Flags&HasAddr != 0 {
			b = strconv.AppendUint(append(b, `,"addr":`...), ev.Addr, 10)
		}
		if ev.Flags&HasBlock != 0 {
			b = strconv.AppendUint(append(b, `,"block":`...), ev.Block, 10)
		}
	case OpStep, OpMark:
		if ev.Name != "" || ev.Op == OpMark {
			b = appendString(append(b, `,"name":`...), ev.Name)
		}
	}
	return append(b, '}')
}

// WriteFrame defines frame id of the stack table; frames are numbered 1,
// 2, 3, … in the order they are written.
func (w *Writer) WriteFrame(id uint32, f Frame) error {
	b := strconv.AppendUint(append(w.buf[:0], `{"op":"frame","id":`...), uint64(id), 10)
	if f.Name != "" {
		b = appendString(append(b, `,"name":`...), f.Name)
	}
	if f.File != "" {
		b = appendString(append(b, `,"file":`...), f.File)
	}
	if f.Line > 0 {
		b = strconv.AppendInt(append(b, `,"line":`...), f.Line, 10)
	}
	return w.writeLine(append(b, '}'))
}

// WriteStack defines stack id of the stack table: the frames it lists,
// innermost first, each defined before. Stacks are numbered 1, 2, 3, … in
// the order they are written.
func (w *Writer) WriteStack(id uint32, frames []uint32) error {
	b := strconv.AppendUint(append(w.buf[:0], `{"op":"stack","id":`...), uint64(id), 10)
	b = append(b, `,"frames":[`...)
	for i, f := range frames {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(f), 10)
	}
	return w.writeLine(append(b, "]}"...))
}

func (w *Writer) writeLine(b []byte) error {
	w.buf = b
	if w.err != nil {
		return w.err
	}
	if _, err := w.w.Write(append(b, '\n')); err != nil {
		w.err = fmt.Errorf("writing trace: %w", err)
	}
	return w.err
}

// Flush writes any buffered data to the underlying writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.w.Flush(); err != nil {
		w.err = fmt.Errorf("writing trace: %w", err)
	}
	return w.err
}

// appendFloat writes x in plain decimal notation (5000000, not 5e+06) while
// that stays short, and in exponent form for very large or tiny values.
func appendFloat(b []byte, x float64) []byte {
	// Whole numbers (times in µs or ns are) print as integers, the same
	// text as 'f' gives, several times faster. Zero keeps its sign below.
	if x != 0 && x == math.Trunc(x) && math.Abs(x) < 1<<53 {
		return strconv.AppendInt(b, int64(x), 10)
	}
	if a := math.Abs(x); a == 0 || (a >= 1e-6 && a < 1e21) {
		return strconv.AppendFloat(b, x, 'f', -1, 64)
	}
	return strconv.AppendFloat(b, x, 'g', -1, 64)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD so
// that the output is always valid JSON.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
