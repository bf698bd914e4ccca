package report

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/bfcsim/bfcsim/internal/outfile"
	"github.com/bfcsim/bfcsim/internal/sticky"
)

// EventsFile collects a replay's per-event results (--events-out): each
// allocator's worker writes its own temporary file (Writer, which is
// sim.Config.Events), and Commit joins them, in allocator order, into the
// destination, atomically. Nothing is left behind on failure: Cleanup
// removes the temporary files, and after a failed run the directories
// NewEventsFile made.
type EventsFile struct {
	path      string
	temps     map[string]*os.File
	createdAt string // the outermost directory it created, or ""
	committed bool
}

// NewEventsFile prepares path, making its directory if need be.
func NewEventsFile(path string) (*EventsFile, error) {
	s := &EventsFile{path: path, temps: map[string]*os.File{}}
	dir := filepath.Dir(path)
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		s.createdAt = d
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return s, nil
}

// Writer is sim.Config.Events. It runs before the workers start, one
// allocator at a time.
func (s *EventsFile) Writer(allocator string) io.Writer {
	f, err := os.CreateTemp(filepath.Dir(s.path), ".bfcsim-events-*")
	if err != nil {
		return &sticky.Writer{Err: fmt.Errorf("creating a temporary file for --events-out: %w", err)}
	}
	s.temps[allocator] = f
	return f
}

// Commit writes each allocator's events, in order, to the destination.
func (s *EventsFile) Commit(order []string) error {
	err := outfile.Write(s.path, func(w io.Writer) error {
		for _, name := range order {
			f := s.temps[name]
			if f == nil {
				continue
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return err
			}
			if _, err := io.Copy(w, f); err != nil {
				return fmt.Errorf("writing %s: %w", s.path, err)
			}
		}
		return nil
	})
	s.committed = err == nil
	return err
}

// Cleanup removes the temporary files and, after a failed run, the
// directories NewEventsFile created, so nothing is left behind.
func (s *EventsFile) Cleanup() {
	for _, f := range s.temps {
		f.Close()
		os.Remove(f.Name())
	}
	if !s.committed && s.createdAt != "" {
		for d := filepath.Dir(s.path); ; d = filepath.Dir(d) {
			if os.Remove(d) != nil || d == s.createdAt { // only empty directories go
				break
			}
		}
	}
}
