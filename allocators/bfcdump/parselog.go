package bfcdump

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// SyntaxError is a line of a log that ParseLog recognised but could not read.
type SyntaxError struct {
	File string // the name given to ParseLog
	Line int    // 1-based
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// ErrNoDump is the error (wrapped with the input's name) for a log that holds
// no BFC allocator dump: no chunk lines and no bin lines.
var ErrNoDump = errors.New("no BFC allocator dump found")

// maxLogLine bounds one line of a log; the rest of a longer line is skipped.
// TF's own lines are a few hundred bytes, but a progress bar that redraws
// itself with '\r' can make a "line" of megabytes.
const maxLogLine = 1 << 20

// The lines ParseLog reads. None is anchored at the start of the line, so
// glog's "I0102 10:11:12.123456 12345 bfc_allocator.cc:1034] ", TF's
// "2026-01-02 10:11:12.123456: W tensorflow/tsl/framework/bfc_allocator.cc:485] "
// or any other prefix may come before them.
var (
	headlineRE = regexp.MustCompile(`Allocator \((.*?)\) ran out of memory trying to allocate (\S+) \(rounded to (\d+)\)(?:\s*from the \w+ end)?\s*(?:requested by op\b\s*(.*?))?\s*$`)
	dumpForRE  = regexp.MustCompile(`BFCAllocator dump for (.*?)\s*$`)
	binLineRE  = regexp.MustCompile(`Bin \((\d+)\):\s*Total Chunks: (\d+), Chunks in use: (\d+)\.`)
	regionRE   = regexp.MustCompile(`Next region of size (\d+)`)
	chunkRE    = regexp.MustCompile(`\b(InUse|Free)\s+at\s+(?:0x)?([0-9a-fA-F]+) of size (\d+)(.*)$`)
	chunkOpRE  = regexp.MustCompile(`\bby op (\S*) action_count (\d+) step (\d+)`)
	freedAtRE  = regexp.MustCompile(`\bfreed_at_count (\d+)`)
	poolLineRE = regexp.MustCompile(`(?:Total bytes in pool|total_region_allocated_bytes_): (\d+) memory_limit_: (\d+) available bytes: -?\d+ curr_region_allocation_bytes_: (\d+)`)
	poolSizeRE = regexp.MustCompile(`Allocator memory summary:.*\bpool size (\S+?),`)
	poolLimRE  = regexp.MustCompile(`Allocator memory summary:.*\bpool limit (\S+?)\.?\s*$`)
	growthRE   = regexp.MustCompile(`next region allocation target (\S+)`)
	statsRE    = regexp.MustCompile(`(?:^|[\s\]])Stats:\s*$`)
	statLineRE = regexp.MustCompile(`(?:^|[\s\]])(Limit|InUse|MaxInUse|NumAllocs|MaxAllocSize|Reserved|PeakReserved|LargestFreeBlock):\s+(\S+)\s*$`)
)

// ParseLog reads the text TensorFlow's BFC allocator logs when it runs out of
// memory (DumpMemoryLog and the OOM headline before it), as users paste it
// from stderr. name is used in errors. It keeps the first dump of the log and
// ignores every line it does not know, so prefixes, interleaved Python output
// and the like do no harm; lines may end in "\n", "\r\n" or "\r".
//
// From the log it takes:
//
//   - the allocator name, from "BFCAllocator dump for NAME" or the headline;
//   - the failed request, from "ran out of memory trying to allocate X
//     (rounded to N)requested by op OP": Rounded is N, Bytes is X read back
//     from TF's human-readable form when that rounds to N and N otherwise
//     (X is only approximate above 1 KiB);
//   - regions, from "Next region of size N", starting at the address of the
//     chunk line that follows;
//   - chunks, from "InUse at ADDR of size N ..." and "Free  at ...", in
//     either the classic form or newer XLA's (" tag lower", an allocation
//     annotation); a free chunk gets Bin = BinNumForSize(size), an in-use one
//     -1. A log does not print the requested size: Requested stays 0.
//   - the pool size, memory limit and next region size, from "Total bytes in
//     pool: ..." (or its older name total_region_allocated_bytes_), or
//     approximately from newer XLA's "Allocator memory summary: ... pool
//     size X, pool limit Y" and "next region allocation target Z";
//   - the counters, from the "Stats:" block: Limit, InUse, MaxInUse,
//     NumAllocs, MaxAllocSize, as integers or human-readable sizes (then
//     approximate, unless an exact figure is elsewhere in the log: the pool
//     line's limit, the in-use chunks' total).
//
// Stats.Fragmentation, which no log prints, is TF's metric computed over the
// chunks. A log with neither chunk nor bin lines fails with ErrNoDump; a
// chunk line that cannot be read, a chunk overlapping another, or a region
// smaller than its chunks fails with a *SyntaxError.
func ParseLog(r io.Reader, name string) (*Snapshot, error) {
	p := &logParser{name: name, s: &Snapshot{}}
	lr := newLineReader(r)
	for {
		seg, line, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		if err := p.parseLine(seg, line); err != nil {
			return nil, err
		}
		if p.done {
			break
		}
	}
	return p.finish()
}

// An estimate is a figure known with some confidence; a higher rank wins.
type estimate struct {
	v    int64
	rank int
}

// Ranks of estimates: from a human-readable size, from a sum over chunks or
// regions, and exact from an integer in the log.
const (
	rankHuman = 1 + iota
	rankSum
	rankExact
)

func (e *estimate) set(v int64, rank int) {
	if rank > e.rank {
		e.v, e.rank = v, rank
	}
}

// logParser is ParseLog's state.
type logParser struct {
	name string
	s    *Snapshot

	chunkLines  []int // line of each chunk in s.Chunks
	regionLines []int // line of each region's header in s.Regions
	// pending is the size and line of a "Next region" header whose first
	// chunk has not been seen yet.
	pending     *pendingRegion
	sawBins     bool
	inStats     bool
	poolLineSet bool
	done        bool
	// regionOf is the region index of each chunk, -1 before any header.
	regionOf []int

	limit, pool, inUse, peak, numAllocs, largest, nextRegion estimate
}

type pendingRegion struct {
	size uint64
	line int
}

func (p *logParser) syntaxErr(line int, format string, args ...any) error {
	return &SyntaxError{File: p.name, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// dumpStarted reports whether the first dump's chunk lines have begun: a
// new headline or dump after that belongs to a later failure.
func (p *logParser) dumpStarted() bool { return len(p.s.Chunks) > 0 || p.poolLineSet }

func (p *logParser) parseLine(text string, line int) error {
	if p.inStats {
		if m := statLineRE.FindStringSubmatch(text); m != nil {
			p.stat(m[1], m[2])
			return nil
		}
		p.inStats = false
	}
	if strings.Contains(text, "ran out of memory") {
		m := headlineRE.FindStringSubmatch(text)
		if m == nil {
			return nil // TF's non-fatal variant, without "rounded to"
		}
		if p.dumpStarted() {
			p.done = true
			return nil
		}
		rounded, err := strconv.ParseUint(m[3], 10, 64)
		if err != nil {
			return p.syntaxErr(line, "reading the rounded size %q: %v", m[3], err)
		}
		bytes := rounded
		if v, _, ok := parseHumanBytes(m[2]); ok && v > 0 && roundedBytes(v) == rounded {
			bytes = v
		}
		if p.s.AllocatorName == "" {
			p.s.AllocatorName = m[1]
		}
		p.s.Request = &Request{Bytes: bytes, Rounded: rounded, Op: m[4]}
		return nil
	}
	if m := dumpForRE.FindStringSubmatch(text); m != nil {
		if p.dumpStarted() {
			p.done = true
			return nil
		}
		p.s.AllocatorName = m[1]
		return nil
	}
	if binLineRE.MatchString(text) {
		p.sawBins = true
		return nil
	}
	if m := regionRE.FindStringSubmatch(text); m != nil {
		size, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil || size == 0 {
			return p.syntaxErr(line, "bad region size %q", m[1])
		}
		p.pending = &pendingRegion{size: size, line: line}
		return nil
	}
	if m := chunkRE.FindStringSubmatch(text); m != nil {
		return p.chunk(m, line)
	}
	if strings.Contains(text, "InUse at ") || strings.Contains(text, "Free  at ") {
		return p.syntaxErr(line, "malformed chunk line (want \"InUse at ADDR of size N next H\" or \"Free  at ...\"): %q", clip(text))
	}
	if m := poolLineRE.FindStringSubmatch(text); m != nil {
		pool, err1 := strconv.ParseInt(m[1], 10, 64)
		limit, err2 := strconv.ParseInt(m[2], 10, 64)
		next, err3 := strconv.ParseInt(m[3], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return p.syntaxErr(line, "reading the pool line: %v", err)
		}
		p.pool.set(pool, rankExact)
		p.limit.set(limit, rankExact)
		p.nextRegion.set(next, rankExact)
		p.poolLineSet = true
		return nil
	}
	if strings.Contains(text, "Allocator memory summary:") {
		if m := poolSizeRE.FindStringSubmatch(text); m != nil {
			if v, _, ok := parseHumanBytes(m[1]); ok {
				p.pool.set(clampInt64(v), rankHuman)
			}
		}
		if m := poolLimRE.FindStringSubmatch(text); m != nil {
			if v, _, ok := parseHumanBytes(m[1]); ok {
				p.limit.set(clampInt64(v), rankHuman)
			}
		}
		p.poolLineSet = true
		return nil
	}
	if m := growthRE.FindStringSubmatch(text); m != nil {
		if v, _, ok := parseHumanBytes(strings.TrimSuffix(m[1], ".")); ok {
			p.nextRegion.set(clampInt64(v), rankHuman)
		}
		return nil
	}
	if statsRE.MatchString(text) {
		p.inStats = true
	}
	return nil
}

// chunk reads one "InUse at"/"Free  at" line, matched by chunkRE.
func (p *logParser) chunk(m []string, line int) error {
	addr, err := strconv.ParseUint(m[2], 16, 64)
	if err != nil {
		return p.syntaxErr(line, "bad chunk address %q", m[2])
	}
	size, err := strconv.ParseUint(m[3], 10, 64)
	if err != nil || size == 0 {
		return p.syntaxErr(line, "bad chunk size %q", m[3])
	}
	if addr+size < addr {
		return p.syntaxErr(line, "chunk at %#x of size %d runs past the end of the address space", addr, size)
	}
	c := Chunk{Addr: addr, Size: size, InUse: m[1] == "InUse", Bin: -1}
	if !c.InUse {
		c.Bin = BinNumForSize(size)
	}
	if om := chunkOpRE.FindStringSubmatch(m[4]); om != nil {
		c.OpName = om[1]
		c.ActionCount, _ = strconv.ParseUint(om[2], 10, 64)
		c.StepID, _ = strconv.ParseUint(om[3], 10, 64)
	}
	if fm := freedAtRE.FindStringSubmatch(m[4]); fm != nil {
		c.FreedAtCount, _ = strconv.ParseUint(fm[1], 10, 64)
	}
	if p.pending != nil {
		p.s.Regions = append(p.s.Regions, Region{Addr: addr, Size: p.pending.size})
		p.regionLines = append(p.regionLines, p.pending.line)
		p.pending = nil
	}
	p.s.Chunks = append(p.s.Chunks, c)
	p.chunkLines = append(p.chunkLines, line)
	p.regionOf = append(p.regionOf, len(p.s.Regions)-1)
	return nil
}

// stat reads one line of AllocatorStats::DebugString.
func (p *logParser) stat(key, val string) {
	v, exact, ok := parseHumanBytes(val)
	if !ok {
		return
	}
	rank := rankHuman
	if exact {
		rank = rankExact
	}
	n := clampInt64(v)
	switch key {
	case "Limit":
		if n > 0 { // classic TF prints 0 for an allocator without a limit
			p.limit.set(n, rank)
		}
	case "InUse":
		p.inUse.set(n, rank)
	case "MaxInUse":
		p.peak.set(n, rank)
	case "NumAllocs":
		p.numAllocs.set(n, rank)
	case "MaxAllocSize":
		p.largest.set(n, rank)
	}
}

// finish checks the chunks and regions and fills the stats.
func (p *logParser) finish() (*Snapshot, error) {
	s := p.s
	if len(s.Chunks) == 0 && !p.sawBins {
		return nil, fmt.Errorf("%s: %w", p.name, ErrNoDump)
	}
	if err := p.checkRegions(); err != nil {
		return nil, err
	}
	// Order chunks by address, keeping their lines for error messages.
	idx := make([]int, len(s.Chunks))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return byAddr(s.Chunks[a], s.Chunks[b]) })
	chunks := make([]Chunk, len(idx))
	for k, i := range idx {
		chunks[k] = s.Chunks[i]
		if k > 0 {
			prev := chunks[k-1]
			if chunks[k].Addr < prev.Addr+prev.Size {
				return nil, p.syntaxErr(max(p.chunkLines[i], p.chunkLines[idx[k-1]]),
					"chunk at %#x overlaps the chunk at %#x of size %d (line %d)",
					chunks[k].Addr, prev.Addr, prev.Size, min(p.chunkLines[i], p.chunkLines[idx[k-1]]))
			}
		}
	}
	s.Chunks = chunks
	slices.SortStableFunc(s.Regions, func(a, b Region) int {
		return byAddr(Chunk{Addr: a.Addr}, Chunk{Addr: b.Addr})
	})

	var inUseSum uint64
	for _, c := range s.Chunks {
		if c.InUse {
			inUseSum += c.Size
		}
	}
	if len(s.Chunks) > 0 {
		p.inUse.set(clampInt64(inUseSum), rankSum)
	}
	s.Stats = Stats{
		NumAllocs:                 p.numAllocs.v,
		BytesInUse:                p.inUse.v,
		PeakBytesInUse:            p.peak.v,
		LargestAllocSize:          p.largest.v,
		BytesLimit:                p.limit.v,
		PoolBytes:                 p.pool.v,
		CurrRegionAllocationBytes: p.nextRegion.v,
	}
	if p.pool.rank == rankHuman && len(s.Regions) > 0 {
		s.Stats.PoolBytes = 0 // the regions' exact total stands in
	}
	sum := s.Summarize()
	s.Stats.Fragmentation = sum.TFFragmentation
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	return s, nil
}

// checkRegions drops the regions when some chunk came before any "Next
// region" header (the log lost lines, so they describe only part of the
// pool), and otherwise checks that each region holds its chunks.
func (p *logParser) checkRegions() error {
	s := p.s
	if len(s.Regions) == 0 {
		return nil
	}
	if slices.Contains(p.regionOf, -1) {
		s.Regions, p.regionLines = nil, nil
		return nil
	}
	for i, c := range s.Chunks {
		r := s.Regions[p.regionOf[i]]
		if c.Addr < r.Addr || c.Addr+c.Size > r.Addr+r.Size || c.Addr+c.Size < c.Addr {
			return p.syntaxErr(p.chunkLines[i], "chunk at %#x of size %d lies outside its region at %#x of size %d (line %d)",
				c.Addr, c.Size, r.Addr, r.Size, p.regionLines[p.regionOf[i]])
		}
	}
	for i := 1; i < len(s.Regions); i++ {
		a, b := s.Regions[i-1], s.Regions[i]
		if a.Addr > b.Addr {
			a, b = b, a
		}
		if b.Addr < a.Addr+a.Size {
			return p.syntaxErr(p.regionLines[i], "region at %#x of size %d overlaps the region at %#x of size %d",
				b.Addr, b.Size, a.Addr, a.Size)
		}
	}
	return nil
}

func clampInt64(v uint64) int64 { return int64(min(v, math.MaxInt64)) }

// clip shortens a line for an error message.
func clip(s string) string {
	const n = 120
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// lineReader splits its input at '\n', '\r\n' and lone '\r', numbering
// lines by '\n' as an editor does. Segments longer than maxLogLine are cut
// there and the rest skipped.
type lineReader struct {
	br   *bufio.Reader
	line int  // number of the line the next segment belongs to
	cr   bool // the previous segment ended at '\r'
	buf  []byte
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10), line: 1}
}

// next returns the next segment without its terminator, and its line.
func (lr *lineReader) next() (string, int, error) {
	lr.buf = lr.buf[:0]
	for {
		b, err := lr.br.ReadByte()
		if err == io.EOF && len(lr.buf) > 0 {
			return string(lr.buf), lr.line, nil
		}
		if err != nil {
			return "", lr.line, err
		}
		switch b {
		case '\n':
			line := lr.line
			lr.line++
			if lr.cr && len(lr.buf) == 0 {
				lr.cr = false
				continue // the '\n' of "\r\n"
			}
			lr.cr = false
			return string(lr.buf), line, nil
		case '\r':
			lr.cr = true
			return string(lr.buf), lr.line, nil
		}
		lr.cr = false
		if len(lr.buf) < maxLogLine {
			lr.buf = append(lr.buf, b)
		}
		// Fast path: take the run of ordinary bytes that follows at once.
		if peek, _ := lr.br.Peek(lr.br.Buffered()); len(peek) > 0 {
			n := bytes.IndexAny(peek, "\r\n")
			if n < 0 {
				n = len(peek)
			}
			if room := maxLogLine - len(lr.buf); room > 0 {
				lr.buf = append(lr.buf, peek[:min(n, room)]...)
			}
			_, _ = lr.br.Discard(n)
		}
	}
}
