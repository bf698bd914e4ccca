// Package sticky holds Writer, the one writer bfcsim's renderers write
// through when they make many small writes: it keeps the first error and
// drops every write after it, so that a long run of Printf calls is
// checked once, at its end.
package sticky

import (
	"fmt"
	"io"
)

// Writer writes to W until a write fails, then keeps that error in Err and
// writes nothing more. A Writer made with Err already set fails every
// write with it: a destination that could not be opened.
type Writer struct {
	W   io.Writer
	Err error
}

// Write writes p to W, unless an earlier write failed; then it returns
// that error and writes nothing.
func (w *Writer) Write(p []byte) (int, error) {
	if w.Err != nil {
		return 0, w.Err
	}
	n, err := w.W.Write(p)
	w.Err = err
	return n, err
}

// Printf formats as fmt.Fprintf does and writes the result; its error is
// kept in Err.
func (w *Writer) Printf(format string, args ...any) {
	if w.Err == nil {
		_, w.Err = fmt.Fprintf(w.W, format, args...)
	}
}
