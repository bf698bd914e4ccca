package input

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/bfcsim/bfcsim/trace"
)

// Raw is an input opened for reading, before its format is known: a file,
// or standard input. Its reads end as soon as the context it was opened
// with is done, a read waiting for input included (trace.InterruptReader).
type Raw struct {
	io.Reader
	// Name is what messages call the input: its path, or "stdin".
	Name string
	// Size is its bytes on disk, or -1 when that is not known (standard
	// input, a pipe, a device).
	Size int64
	file *os.File // nil for standard input
	stop func()
}

// OpenRaw opens path for reading; "-" is stdin, which Close leaves open.
// A directory is refused. Opening a FIFO waits for a writer: when ctx is
// done first, OpenRaw returns ctx's error at once.
func OpenRaw(ctx context.Context, path string, stdin io.Reader) (*Raw, error) {
	if path == "-" {
		r, stop := trace.InterruptReader(ctx, stdin)
		return &Raw{Reader: r, Name: "stdin", Size: -1, stop: stop}, nil
	}
	f, err := openFile(ctx, path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is a directory", path)
	}
	r, stop := trace.InterruptReader(ctx, f)
	raw := &Raw{Reader: r, Name: path, Size: -1, file: f, stop: stop}
	if st.Mode().IsRegular() {
		raw.Size = st.Size()
	}
	return raw, nil
}

// openFile opens path, returning ctx's error as soon as ctx is done while
// the open waits (a FIFO without a writer): the file opened later, if
// ever, is closed then.
func openFile(ctx context.Context, path string) (*os.File, error) {
	type opened struct {
		f   *os.File
		err error
	}
	done := make(chan opened, 1)
	go func() {
		f, err := os.Open(path)
		done <- opened{f, err}
	}()
	select {
	case o := <-done:
		return o.f, o.err
	case <-ctx.Done():
		go func() {
			if o := <-done; o.f != nil {
				o.f.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// Close closes the file; standard input stays open.
func (r *Raw) Close() error {
	r.stop()
	if r.file != nil {
		return r.file.Close()
	}
	return nil
}

// File is a file, or standard input, opened as a trace: a Stream, with
// where it came from.
type File struct {
	*Stream
	// Path is as it was given: a file's, or "-" for standard input.
	Path string
	// Size is the bytes on disk, or -1 when that is not known.
	Size int64
	raw  *Raw
}

// OpenFile opens path ("-" for stdin) as a trace, recognising a recording
// by its content and converting it on the fly (Open). A converted
// recording's trace is named after the file (NameOf): opt's Name is set
// so. opt.Device picks a PyTorch snapshot's device, as Open takes it: -1
// for the one with the most trace entries. Close closes the Stream and the
// file.
func OpenFile(ctx context.Context, path string, stdin io.Reader, opt Options) (*File, error) {
	raw, err := OpenRaw(ctx, path, stdin)
	if err != nil {
		return nil, err
	}
	opt.Name = NameOf(path, "stdin")
	s, err := Open(ctx, raw, raw.Name, opt)
	if err != nil {
		raw.Close()
		return nil, err
	}
	return &File{Stream: s, Path: path, Size: raw.Size, raw: raw}, nil
}

// Close stops the conversion and closes the file.
func (f *File) Close() error {
	f.Stream.Close()
	return f.raw.Close()
}

// NameOf names a trace after its input file: the base name without
// compression and format extensions ("runs/sort.mtrace.gz" → "sort"), or
// fallback for standard input ("-") and a name that would be empty.
func NameOf(path, fallback string) string {
	if path == "-" {
		return fallback
	}
	name := filepath.Base(path)
	for _, ext := range []string{".gz", ".zst", ".jsonl", ".json", ".pickle", ".pkl", ".log", ".txt", ".mtrace", ".rep"} {
		name = strings.TrimSuffix(name, ext)
	}
	if name == "" || name == "." {
		return fallback
	}
	return name
}

// EachDevice reads a recording device by device: fn on device (-1: the one
// with the most trace entries) and, when device is -1, on each other device
// with allocations after it, as fn reports them (File.OtherDevices, once it
// has read the stream to its end), in ascending order. A recording of one
// device, and a trace, is read once.
func EachDevice(device int, fn func(device int) (others []int, err error)) error {
	devices := []int{device}
	for i := 0; i < len(devices); i++ {
		others, err := fn(devices[i])
		if err != nil {
			return err
		}
		if i == 0 && device < 0 {
			devices = append(devices, others...)
		}
	}
	return nil
}

// DeviceName names the trace of one device of a recording of several:
// NAME-deviceN.
func DeviceName(name string, device int) string { return fmt.Sprintf("%s-device%d", name, device) }
