package trace

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression is a trace file's compression.
type Compression int

// The compressions a trace may use.
const (
	None Compression = iota
	Gzip
	Zstd
)

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// maxZstdWindow bounds the zstd window a trace may use. The zstd command line
// uses at most 8 MiB below --long and 128 MiB with --long; anything larger
// would make a "streaming" reader hold gigabytes.
const maxZstdWindow = 128 << 20

// CompressionForPath returns the compression implied by a file name's
// extension: ".gz" is Gzip, ".zst" is Zstd, anything else None.
func CompressionForPath(path string) Compression {
	switch {
	case strings.HasSuffix(path, ".gz"):
		return Gzip
	case strings.HasSuffix(path, ".zst"):
		return Zstd
	}
	return None
}

// decompress sniffs the first bytes of r and returns a reader of the
// decompressed stream, with a function that releases the decompressor.
func decompress(r io.Reader) (io.Reader, func(), error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, _ := br.Peek(4) // a short or failing peek just means "not compressed"
	switch {
	case bytes.HasPrefix(magic, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("opening gzip stream: %w", err)
		}
		ra := newReadAhead(zr)
		return ra, func() { ra.closeAfter(func() { zr.Close() }) }, nil
	case bytes.HasPrefix(magic, zstdMagic):
		zr, err := zstd.NewReader(br,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(maxZstdWindow))
		if err != nil {
			return nil, nil, fmt.Errorf("opening zstd stream: %w", err)
		}
		ra := newReadAhead(zr)
		return ra, func() { ra.closeAfter(zr.Close) }, nil
	}
	return br, func() {}, nil
}

// NewDecompressReader returns a reader of r's content, decompressed if it
// starts with the gzip or zstd magic bytes. Close releases the decompressor;
// it does not close r.
func NewDecompressReader(r io.Reader) (io.ReadCloser, error) {
	dec, closeFn, err := decompress(r)
	if err != nil {
		return nil, err
	}
	return readCloser{dec, closeFn}, nil
}

type readCloser struct {
	io.Reader
	close func()
}

func (r readCloser) Close() error {
	r.close()
	return nil
}

// NewCompressWriter returns a writer that compresses into w. Closing it
// flushes the compressor; it does not close w. None returns a writer that
// passes bytes through. zstd compresses each block on a goroutine of its
// own, overlapping the work that writes (a quarter of a snapshot import's
// time); the bytes are the same as compressing on the writer's.
func NewCompressWriter(w io.Writer, c Compression) (io.WriteCloser, error) {
	switch c {
	case Gzip:
		return gzip.NewWriter(w), nil
	case Zstd:
		zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(2))
		if err != nil {
			return nil, fmt.Errorf("starting zstd: %w", err)
		}
		return zw, nil
	}
	return nopCloser{w}, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
