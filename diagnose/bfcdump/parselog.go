package bfcdump

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
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
// or any other prefix may come before them. Spaces may be tabs or runs of
// spaces: pasting changes both.
var (
	// TensorFlow's human-readable size, "256B", "1.2KiB", "3.72GiB".
	humanSizePat = `\d+(?:\.\d+)?(?:[KMGTPE]i)?B`

	headlineRE = regexp.MustCompile(`Allocator \((.*?)\) ran out of memory trying to allocate (` + humanSizePat + `)(.*)$`)
	roundedRE  = regexp.MustCompile(`^\s*\(rounded to (\d+)\)(?:\s*from the \w+ end)?\s*(?:requested by op\b\s*(.*?))?\s*(?:\.?\s*Current allocation summary follows\.?)?\s*$`)
	oldHeadRE  = regexp.MustCompile(`Ran out of memory trying to allocate (` + humanSizePat + `)\.?\s*(See logs for memory state)?`)
	dumpForRE  = regexp.MustCompile(`BFCAllocator dump for (.*?)\s*$`)
	binLineRE  = regexp.MustCompile(`Bin \((\d+)\):\s*Total Chunks:\s*(\d+),\s*Chunks in use:\s*(\d+)(\.?)(.*)$`)
	binFieldRE = regexp.MustCompile(`(` + humanSizePat + `) (allocated for chunks|client-requested for chunks|in use in bin|client-requested in use in bin)`)
	binForRE   = regexp.MustCompile(`Bin for (` + humanSizePat + `) was (` + humanSizePat + `), Chunk State:`)
	stateRE    = regexp.MustCompile(`Size: (` + humanSizePat + `)\s*\|\s*Requested Size: (` + humanSizePat + `)\s*\|\s*in_use: (\d|true|false)`)
	regionRE   = regexp.MustCompile(`Next region of size (\d+)`)
	chunkOpRE  = regexp.MustCompile(`\bby op (\S*) action_count (\d+) step (\d+)`)
	freedAtRE  = regexp.MustCompile(`\bfreed_at_count (\d+)`)
	bySizeRE   = regexp.MustCompile(`(\d+) Chunks of size (\d+) totalling (` + humanSizePat + `)`)
	sumTotalRE = regexp.MustCompile(`Sum Total of in-use chunks: (` + humanSizePat + `)`)
	poolLineRE = regexp.MustCompile(`(?:Total bytes in pool|total_region_allocated_bytes_): (\d+) memory_limit_: (\d+) available bytes: -?\d+ curr_region_allocation_bytes_: (\d+)`)
	poolSizeRE = regexp.MustCompile(`Allocator memory summary:.*\bpool size (` + humanSizePat + `)`)
	poolLimRE  = regexp.MustCompile(`Allocator memory summary:.*\bpool limit (` + humanSizePat + `)`)
	usableRE   = regexp.MustCompile(`Allocator memory summary:.*\blargest free chunk usable by \w+ end (` + humanSizePat + `)`)
	growthRE   = regexp.MustCompile(`next region allocation target (` + humanSizePat + `)`)
	statsRE    = regexp.MustCompile(`(?:^|[\s\]])Stats:(.*)$`)
	statKVRE   = regexp.MustCompile(`\b(Limit|InUse|MaxInUse|NumAllocs|MaxAllocSize|Reserved|PeakReserved|LargestFreeBlock):\s*(\S+)`)
	statOnlyRE = regexp.MustCompile(`^\s*(?:(?:Limit|InUse|MaxInUse|NumAllocs|MaxAllocSize|Reserved|PeakReserved|LargestFreeBlock):\s*\S+\s*)+$`)
	quoteRE    = regexp.MustCompile(`^[ \t]*(?:>[ \t]?)+`)
)

// recordMarks are the words that start each line ParseLog reads (the
// chunk lines' are found by hasChunkStart).
var recordMarks = []string{"Bin (", "Bin for ", "Next region of", "Total bytes in pool", "total_region_allocated_bytes_",
	" Chunks of size", "Sum Total of", "Allocator (", "an out of memory trying", "Size: "}

// recordStart returns where the first of the lines ParseLog reads starts in
// text, or -1: it tells when a line a terminal wrapped continues on the
// next. Plain string searches: this runs on every line.
func recordStart(text string) int {
	best := -1
	first := func(i int) {
		if i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	first(chunkStartIndex(text))
	for _, m := range recordMarks {
		i := strings.Index(text, m)
		switch {
		case i < 0:
			continue
		case m == " Chunks of size":
			// "N Chunks of size": the count starts the line.
			j := i
			for j > 0 && text[j-1] >= '0' && text[j-1] <= '9' {
				j--
			}
			if j == i {
				continue
			}
			i = j
		case m == "an out of memory trying" && i > 0:
			i-- // "ran" or "Ran"
		case m == "Size: " && !strings.Contains(text[i:], "|"):
			continue
		case m == "Bin (" && (i+5 >= len(text) || text[i+5] < '0' || text[i+5] > '9'):
			continue
		}
		first(i)
	}
	return best
}

// chunkStartIndex returns where "InUse at", "Free at" (one space or more)
// or "Chunk at" first starts in text, or -1.
func chunkStartIndex(text string) int {
	best := -1
	for _, w := range []string{"InUse", "Free", "Chunk"} {
		for off := 0; ; {
			i := strings.Index(text[off:], w)
			if i < 0 {
				break
			}
			i += off
			j := i + len(w)
			k := j
			for k < len(text) && (text[k] == ' ' || text[k] == '\t') {
				k++
			}
			boundary := i == 0 || !isWordByte(text[i-1])
			if boundary && k > j && strings.HasPrefix(text[k:], "at") && k+2 < len(text) && (text[k+2] == ' ' || text[k+2] == '\t') {
				if best < 0 || i < best {
					best = i
				}
				break
			}
			off = i + 1
		}
	}
	return best
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// matchChunk splits a chunk line as chunkRE does, by hand: this is the
// line a whole dump is made of. m[1] is the word (InUse, Free, Chunk), m[2]
// the address's hex digits, m[3] the "next H" handle of TF 1.14–2.0 (or
// ""), m[4] the size and m[5] the rest of the line; nil if text holds no
// whole chunk line.
func matchChunk(text string) []string {
	i := chunkStartIndex(text)
	if i < 0 {
		return nil
	}
	t := text[i:]
	m := make([]string, 6)
	m[0] = t
	word := 0
	for word < len(t) && isWordByte(t[word]) {
		word++
	}
	m[1], t = t[:word], skipBlanks(t[word:])
	t, ok := cutWord(t, "at")
	if !ok {
		return nil
	}
	t = strings.TrimPrefix(t, "0x")
	n := 0
	for n < len(t) && isHexByte(t[n]) {
		n++
	}
	if n == 0 {
		return nil
	}
	m[2], t = t[:n], skipBlanks(t[n:])
	if rest, ok := cutWord(t, "next"); ok {
		d := digits(rest)
		if d == "" {
			return nil
		}
		m[3], t = d, skipBlanks(rest[len(d):])
	}
	if t, ok = cutWord(t, "of"); !ok {
		return nil
	}
	if t, ok = cutWord(t, "size"); !ok {
		return nil
	}
	if m[4] = digits(t); m[4] == "" {
		return nil
	}
	m[5] = t[len(m[4]):]
	if m[5] != "" && m[5][0] != ' ' && m[5][0] != '\t' {
		return nil // "of size 12ab": not a size
	}
	return m
}

// cutWord removes word and the blanks after it from the start of t; the
// word must be followed by a blank (or, for the last, anything but a
// letter).
func cutWord(t, word string) (string, bool) {
	if !strings.HasPrefix(t, word) {
		return t, false
	}
	rest := t[len(word):]
	if rest == "" || rest[0] != ' ' && rest[0] != '\t' {
		return t, false
	}
	return skipBlanks(rest), true
}

func skipBlanks(t string) string { return strings.TrimLeft(t, " \t") }

// digits is the run of decimal digits t starts with.
func digits(t string) string {
	n := 0
	for n < len(t) && t[n] >= '0' && t[n] <= '9' {
		n++
	}
	return t[:n]
}

func isHexByte(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}

// nextHandle finds " next H" in the rest of a TF ≥ 2.1 chunk line.
func nextHandle(rest string) (string, bool) {
	for off := 0; ; {
		i := strings.Index(rest[off:], "next ")
		if i < 0 {
			return "", false
		}
		i += off
		if i == 0 || rest[i-1] == ' ' || rest[i-1] == '\t' {
			if d := digits(rest[i+5:]); d != "" && (i+5+len(d) == len(rest) || !isWordByte(rest[i+5+len(d)])) {
				return d, true
			}
		}
		off = i + 1
	}
}

func hasNext(rest string) bool { _, ok := nextHandle(rest); return ok }

// hasChunkStart reports whether text holds the start of a chunk line.
func hasChunkStart(text string) bool { return chunkStartIndex(text) >= 0 }

// ParseLog reads the text TensorFlow's BFC allocator logs when it runs out
// of memory (the headline and DumpMemoryLog), as users paste it from stderr
// into an issue: whole or in part, from any TensorFlow release since 2015.
// name is used in errors. It keeps the first dump of the log and ignores
// every line it does not know, so prefixes, interleaved output from other
// loggers and the like do no harm.
//
// Pasting damage it undoes: lines ending in "\n", "\r\n" or "\r"; glog or
// TF prefixes or none; "> " quote markers; tabs turned into spaces and runs
// of spaces; long lines a terminal wrapped (a line that starts one of the
// dump's lines but stops short is joined with the lines after it, as long
// as the join reads as one line).
//
// Every format TensorFlow printed is read (FormatSeen lists them; the
// snapshot's Log.Formats says which were seen):
//
//   - the headline: "Allocator (A) ran out of memory trying to allocate X
//     (rounded to N)requested by op OP" (TF 2.x), "... allocate X.  Current
//     allocation summary follows." (TF 1.x) and "Ran out of memory trying
//     to allocate X.  See logs for memory state." (TF ≤ 1.2, printed after
//     its dump); Request.Rounded is N when printed, else X rounded up to 256
//     bytes (X is approximate above 1 KiB);
//   - the bin lines, new and old (pre-2018 lines count only free chunks);
//   - "Bin for X was Y, Chunk State:" and the chunks under it;
//   - regions, from "Next region of size N", starting at the address of the
//     chunk line that follows;
//   - chunks: "Chunk at ADDR of size N" (in use) and "Free  at ADDR of size N"
//     (TF ≤ 1.13), "InUse at ADDR next H of size N" (TF 1.14–2.1) and
//     "InUse at ADDR of size N next H" (TF ≥ 2.2, with newer XLA's " tag
//     lower" and annotations), with or without "0x" (Windows prints 16
//     upper-case digits); a free chunk gets Bin = BinNumForSize(size), an
//     in-use one -1; Requested stays 0, as a log does not print it;
//   - "N Chunks of size S totalling X" and "Sum Total of in-use chunks";
//   - the pool line "Total bytes in pool: ..." (or total_region_allocated_bytes_),
//     or approximately newer XLA's "Allocator memory summary";
//   - the "Stats:" block, one line or several, in integers or
//     human-readable sizes.
//
// Each printed figure is kept with its line in Snapshot.Log; Snapshot.Stats
// holds the best figure for each counter (an exact one over TF's rounded
// human-readable form). A line that starts a chunk line but cannot be read
// is skipped and counted in Log.Skipped. A log with none of these lines
// fails with ErrNoDump, saying what it saw; a chunk overlapping another or a
// region smaller than its chunks fails with a *SyntaxError.
func ParseLog(r io.Reader, name string) (*Snapshot, error) {
	p := &logParser{name: name, s: &Snapshot{}, ev: &LogEvidence{}}
	p.s.Log = p.ev
	lr := newLineReader(r)
	var held heldLine
	// prev is the segment before, and prevLine its line, for a line whose
	// first words a terminal put on the line before.
	prev, prevLine := "", 0
	for {
		seg, line, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		p.ev.Lines = line
		if held.text != "" {
			joined, st := p.join(&held, seg)
			if st == wrapMore {
				continue
			}
			text, at := joined, held.line
			if st == wrapNone { // seg is not a continuation: read held as it is
				text = normalize(held.text)
			}
			held = heldLine{}
			prev = ""
			if err := p.parseLine(text, at); err != nil {
				return nil, err
			}
			if p.done {
				break
			}
			if st == wrapJoined {
				continue
			}
		}
		at := line
		if j, ok := joinPrefix(prev, seg); ok {
			// A terminal cut the line inside its first words: the piece
			// before holds its start.
			seg, at = j, prevLine
		}
		prev, prevLine = seg, line
		if text := normalize(seg); recordStart(text) >= 0 && !p.complete(text) {
			held = heldLine{text: stripQuote(seg), line: at, width: len(seg)}
			prev = ""
			continue
		}
		if err := p.parseLine(normalize(seg), at); err != nil {
			return nil, err
		}
		if p.done {
			break
		}
	}
	if held.text != "" && !p.done {
		if err := p.parseLine(normalize(held.text), held.line); err != nil {
			return nil, err
		}
	}
	return p.finish()
}

// heldLine is a line that starts one of the dump's lines but stops short,
// waiting for the rest a terminal wrapped onto the next lines.
type heldLine struct {
	text  string
	line  int
	width int // the first piece's length: a wrapping terminal's width
	parts int
}

// maxWrapParts bounds how many pieces a wrapped line is joined from.
const maxWrapParts = 4

// minWrapWidth is the narrowest terminal joinPrefix believes wrapped a line.
const minWrapWidth = 60

// joinPrefix joins prev and seg when a terminal cut one of the dump's lines
// inside its first words ("...bfc_allocator.cc:1095] InU" / "se at ..."):
// prev is wide, holds no line ParseLog reads, and joined to seg makes one
// that starts inside prev.
func joinPrefix(prev, seg string) (string, bool) {
	if len(prev) < minWrapWidth || recordStart(normalize(prev)) >= 0 {
		return "", false
	}
	j := prev + stripQuote(seg)
	if at := recordStart(j); at < 0 || at >= len(prev) {
		return "", false
	}
	return j, true
}

// Outcomes of join.
const (
	wrapNone   = iota // not a continuation
	wrapJoined        // joined into a whole line
	wrapMore          // a middle piece: more is to come
)

// join tries seg as the continuation of held: joined directly (a wrap in
// the middle of a word) or with a space, and returns the joined line when
// that reads as a whole line. A piece as wide as the first is taken as a
// middle piece of a line wrapped more than once, appended to held. Anything
// else is not a continuation.
func (p *logParser) join(held *heldLine, seg string) (string, int) {
	cont := stripQuote(seg)
	startsRecord := recordStart(normalize(cont)) >= 0 && !strings.HasPrefix(cont, " ")
	if startsRecord && strings.Contains(held.text, "Allocator (") && !strings.Contains(held.text, "an out of memory") {
		startsRecord = false // "Allocator (A) " / "ran out of memory ...": one headline
	}
	if strings.TrimSpace(cont) == "" || startsRecord {
		return "", wrapNone
	}
	for _, j := range []string{held.text + cont, held.text + " " + cont} {
		if n := normalize(j); p.complete(n) {
			return n, wrapJoined
		}
	}
	if held.parts+1 < maxWrapParts && len(seg) == held.width {
		held.text += cont
		held.parts++
		return "", wrapMore
	}
	return "", wrapNone
}

// stripQuote removes e-mail and Markdown quote markers ("> ", "> > ").
func stripQuote(s string) string {
	if m := quoteRE.FindStringIndex(s); m != nil && strings.Contains(s[:m[1]], ">") {
		return s[m[1]:]
	}
	return s
}

// normalize undoes pasting damage within a line: quote markers and
// surrounding blanks.
func normalize(s string) string { return strings.TrimSpace(stripQuote(s)) }

// complete reports whether text, which starts one of the dump's lines,
// holds all of it: false for a line a terminal cut short.
func (p *logParser) complete(text string) bool {
	switch {
	case hasChunkStart(text):
		m := matchChunk(text)
		if m == nil {
			return false
		}
		if m[1] == "Chunk" || m[3] != "" {
			return true // TF ≤ 2.1: the size ends the line
		}
		if _, ok := nextHandle(m[5]); ok {
			return true
		}
		// "InUse at A of size N" without its " next H": cut short, unless
		// this is a TF ≤ 1.13 "Free  at" line.
		return m[1] == "Free" && p.sawOldChunks
	case strings.Contains(text, "Bin ("):
		return binLineRE.MatchString(text) && strings.HasSuffix(text, "in use in bin.")
	case strings.Contains(text, "Bin for "):
		// A chunk state a paste joined onto the line must be whole too.
		loc := binForRE.FindStringIndex(text)
		return loc != nil && (!strings.Contains(text[loc[1]:], "Size:") || stateRE.MatchString(text[loc[1]:]))
	case strings.Contains(text, "an out of memory trying") || strings.Contains(text, "Allocator ("):
		if m := headlineRE.FindStringSubmatch(text); m != nil {
			rest := m[3]
			return roundedRE.MatchString(rest) || strings.Contains(rest, "summary follows") ||
				strings.Contains(rest, "not a failure") || strings.Contains(rest, "freed_by_count")
		}
		if m := oldHeadRE.FindStringSubmatch(text); m != nil {
			return m[2] != ""
		}
		return false
	case strings.Contains(text, "Next region of"):
		return regionRE.MatchString(text)
	case strings.Contains(text, "Total bytes in pool") || strings.Contains(text, "total_region_allocated_bytes_"):
		return poolLineRE.MatchString(text)
	case strings.Contains(text, "Chunks of size"):
		return bySizeRE.MatchString(text) && strings.HasSuffix(text, "B")
	case strings.Contains(text, "Sum Total of"):
		return sumTotalRE.MatchString(text) && strings.HasSuffix(text, "B")
	case strings.Contains(text, "Size: "):
		return stateRE.MatchString(text)
	}
	return true
}

// logParser is ParseLog's state.
type logParser struct {
	name string
	s    *Snapshot
	ev   *LogEvidence

	chunkLines  []int // line of each chunk in s.Chunks
	regionLines []int // line of each region's header in s.Regions
	// pending is the size and line of a "Next region" header whose first
	// chunk has not been seen yet.
	pending *pendingRegion
	// stage is how far into a dump the lines have gone: a line of an
	// earlier stage after a later one starts the next dump.
	stage int
	// closed: TF ≤ 1.2's headline, printed after its dump, was seen.
	closed bool
	// inStats: the lines after "Stats:" are its key-value lines.
	inStats bool
	// inBinFor: the lines after "Bin for" are its chunk states.
	inBinFor     bool
	sawOldChunks bool
	oldBins      bool
	// nonFatal counts TF's warnings for allocations it may retry, which
	// print no dump.
	nonFatal int
	// oldestHeadline: TF 0.5–0.7's headline, without its final period.
	oldestHeadline bool
	done           bool
	// regionOf is the region index of each chunk, -1 before any header.
	regionOf []int
	// skipped are lines that start a chunk line but cannot be read.
	skipped []string
	formats map[string]bool
}

// Stages of a dump, in the order DumpMemoryLog prints them.
const (
	stageNone = iota
	stageHeadline
	stageBins
	stageBinFor
	stageChunks
	stageSummary
	stageStats
)

type pendingRegion struct {
	size uint64
	line int
}

func (p *logParser) syntaxErr(line int, format string, args ...any) error {
	return &SyntaxError{File: p.name, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// enter moves the parser to stage st for a line of that stage, and reports
// false (ending the parse) when the line belongs to a later dump.
func (p *logParser) enter(st int) bool {
	if p.closed || st < p.stage {
		p.done = true
		return false
	}
	p.stage = st
	return true
}

// seen records that a line of format f was read at line.
func (p *logParser) seen(f FormatSeen, line int) {
	key := f.Kind + "\x00" + f.Form
	if p.formats == nil {
		p.formats = map[string]bool{}
	}
	if p.formats[key] {
		return
	}
	p.formats[key] = true
	f.Line = line
	p.ev.Formats = append(p.ev.Formats, f)
}

func (p *logParser) parseLine(text string, line int) error {
	if p.inStats {
		if statOnlyRE.MatchString(text) {
			p.stats(text, line)
			return nil
		}
		if text != "" {
			p.inStats = false
		}
	}
	if p.inBinFor {
		if p.stateChunk(text, line) {
			return nil
		}
		if text != "" {
			p.inBinFor = false
		}
	}
	switch {
	case strings.Contains(text, "an out of memory trying to allocate"):
		return p.headline(text, line)
	case strings.Contains(text, "BFCAllocator dump for"):
		if m := dumpForRE.FindStringSubmatch(text); m != nil {
			if p.stage > stageHeadline || p.closed {
				p.done = true
				return nil
			}
			p.s.AllocatorName = m[1]
			p.ev.DumpForLine = line
		}
		return nil
	case strings.Contains(text, "Bin ("):
		if m := binLineRE.FindStringSubmatch(text); m != nil {
			if !p.enter(stageBins) {
				return nil
			}
			p.bin(m, line)
		}
		return nil
	case strings.Contains(text, "Bin for "):
		if m := binForRE.FindStringSubmatchIndex(text); m != nil {
			if !p.enter(stageBinFor) {
				return nil
			}
			req, _ := humanFig(text[m[2]:m[3]], line)
			bin, _ := humanFig(text[m[4]:m[5]], line)
			p.ev.BinFor = &BinFor{Request: req, BinSize: bin, Line: line}
			p.inBinFor = true
			p.seen(formatBinFor, line)
			// The first chunk state may follow on the same line, where a
			// paste joined the lines or a release printed it so.
			p.stateChunk(text[m[1]:], line)
		}
		return nil
	case strings.Contains(text, "Next region of size"):
		m := regionRE.FindStringSubmatch(text)
		if m == nil {
			return nil
		}
		if !p.enter(stageChunks) {
			return nil
		}
		size, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil || size == 0 {
			return p.syntaxErr(line, "bad region size %q", m[1])
		}
		p.pending = &pendingRegion{size: size, line: line}
		p.ev.RegionHeaders++
		return nil
	case hasChunkStart(text):
		m := matchChunk(text)
		if m == nil {
			p.skip(line, "not a whole chunk line: %q", clip(text))
			return nil
		}
		if !p.enter(stageChunks) {
			return nil
		}
		return p.chunk(m, line)
	case strings.Contains(text, "Chunks of size"):
		if m := bySizeRE.FindStringSubmatch(text); m != nil {
			if !p.enter(stageSummary) {
				return nil
			}
			n, err1 := strconv.ParseInt(m[1], 10, 64)
			size, err2 := strconv.ParseUint(m[2], 10, 64)
			if err1 == nil && err2 == nil {
				p.ev.BySize = append(p.ev.BySize, SizeCount{Count: n, Size: size, Line: line})
				p.seen(formatSummary, line)
			}
		}
		return nil
	case strings.Contains(text, "Sum Total of in-use chunks"):
		if m := sumTotalRE.FindStringSubmatch(text); m != nil {
			if !p.enter(stageSummary) {
				return nil
			}
			p.ev.SumTotal, _ = humanFig(m[1], line)
			p.seen(formatSummary, line)
		}
		return nil
	}
	if !strings.Contains(text, "Stats:") && !strings.Contains(text, "Allocator ") && !strings.Contains(text, "pool") &&
		!strings.Contains(text, "allocated_bytes") && !strings.Contains(text, "allocation target") {
		return nil // none of the lines below: skip their patterns
	}
	if m := poolLineRE.FindStringSubmatch(text); m != nil {
		pool, err1 := strconv.ParseUint(m[1], 10, 64)
		limit, err2 := strconv.ParseUint(m[2], 10, 64)
		next, err3 := strconv.ParseUint(m[3], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return p.syntaxErr(line, "reading the pool line: %v", err)
		}
		if !p.enter(stageSummary) {
			return nil
		}
		p.ev.Pool = Fig{V: pool, Exact: true, Line: line}
		p.ev.PoolLimit = Fig{V: limit, Exact: true, Line: line}
		p.ev.NextRegion = Fig{V: next, Exact: true, Line: line}
		p.seen(formatPoolLine, line)
		return nil
	}
	if strings.Contains(text, "Allocator memory summary:") {
		if !p.enter(stageSummary) {
			return nil
		}
		if m := poolSizeRE.FindStringSubmatch(text); m != nil {
			f, _ := humanFig(m[1], line)
			p.ev.Pool.set(f)
		}
		if m := poolLimRE.FindStringSubmatch(text); m != nil {
			f, _ := humanFig(m[1], line)
			p.ev.PoolLimit.set(f)
		}
		if m := usableRE.FindStringSubmatch(text); m != nil {
			p.ev.LargestUsable, _ = humanFig(m[1], line)
		}
		p.seen(formatPoolXLA, line)
		return nil
	}
	if m := growthRE.FindStringSubmatch(text); m != nil {
		f, _ := humanFig(m[1], line)
		p.ev.NextRegion.set(f)
		return nil
	}
	if m := statsRE.FindStringSubmatch(text); m != nil {
		if !p.enter(stageStats) {
			return nil
		}
		p.ev.StatsLine = line
		p.inStats = true
		p.seen(formatStats, line)
		p.stats(m[1], line)
	}
	return nil
}

// stateChunk reads the chunk Chunk::DebugString prints under "Bin for" from
// text, where stateRE finds it first (its "prev:" and "next:" neighbours
// follow it), and reports whether it found one.
func (p *logParser) stateChunk(text string, line int) bool {
	m := stateRE.FindStringSubmatch(text)
	if m == nil {
		return false
	}
	size, _ := humanFig(m[1], line)
	req, _ := humanFig(m[2], line)
	inUse := m[3] != "0" && m[3] != "false"
	p.ev.BinFor.Chunks = append(p.ev.BinFor.Chunks, StateChunk{Size: size, Requested: req, InUse: inUse, Line: line})
	return true
}

// skip notes a line that looks like one of the dump's lines but cannot be
// read.
func (p *logParser) skip(line int, format string, args ...any) {
	p.skipped = append(p.skipped, fmt.Sprintf("line %d: ", line)+fmt.Sprintf(format, args...))
}

// headline reads an out-of-memory headline, in any of its forms.
func (p *logParser) headline(text string, line int) error {
	var req Request
	var rounded bool
	name := ""
	if m := headlineRE.FindStringSubmatch(text); m != nil {
		rest := m[3]
		if strings.Contains(rest, "not a failure") || strings.Contains(rest, "freed_by_count") {
			p.nonFatal++
			return nil // TF's non-fatal warning: no dump follows
		}
		name = m[1]
		bytes, _, _ := parseHumanBytes(m[2])
		if rm := roundedRE.FindStringSubmatch(rest); rm != nil {
			n, err := strconv.ParseUint(rm[1], 10, 64)
			if err != nil {
				return p.syntaxErr(line, "reading the rounded size %q: %v", rm[1], err)
			}
			if bytes == 0 || roundedBytes(bytes) != n {
				bytes = n // X is only approximate above 1 KiB
			}
			req = Request{Bytes: bytes, Rounded: n, Op: rm[2]}
			rounded = true
			p.seen(formatHeadlineRounded, line)
		} else {
			req = Request{Bytes: bytes, Rounded: roundedBytes(bytes)}
			p.seen(formatHeadlineSummary, line)
		}
	} else if strings.Contains(text, "not a failure") {
		p.nonFatal++
		return nil
	} else if m := oldHeadRE.FindStringSubmatch(text); m != nil {
		bytes, _, _ := parseHumanBytes(m[1])
		// TF 0.5–0.7 end the line without a period; they list every
		// chunk, free ones too, as "Chunk at".
		p.oldestHeadline = m[2] != "" && !strings.HasSuffix(strings.TrimSpace(text), ".")
		req = Request{Bytes: bytes, Rounded: roundedBytes(bytes)}
		p.seen(formatHeadlineOld, line)
		// Printed after its dump: it names that dump's request and closes it.
		p.s.Request = &req
		p.ev.HeadlineLine, p.ev.HeadlineRounded = line, false
		if p.stage > stageHeadline {
			p.closed = true
		}
		return nil
	} else {
		return nil
	}
	if p.stage > stageHeadline || p.closed {
		p.done = true // the next failure's dump
		return nil
	}
	if name != "" && p.s.AllocatorName == "" {
		p.s.AllocatorName = name
	}
	p.s.Request = &req
	p.ev.HeadlineLine, p.ev.HeadlineRounded = line, rounded
	p.stage = stageHeadline
	return nil
}

// bin reads one bin line, matched by binLineRE.
func (p *logParser) bin(m []string, line int) {
	size, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil || size < 1<<minAllocationBits {
		return
	}
	// TF 0.5–0.6 kept bins up to twice the memory, beyond bin 20.
	b := PrintedBin{Bin: bits.Len64(size>>minAllocationBits) - 1, Line: line}
	b.Total, _ = strconv.ParseInt(m[2], 10, 64)
	b.InUse, _ = strconv.ParseInt(m[3], 10, 64)
	old := m[4] == "" || strings.Contains(m[5], "client-requested for chunks")
	for _, f := range binFieldRE.FindAllStringSubmatch(m[5], -1) {
		v, _ := humanFig(f[1], line)
		switch f[2] {
		case "allocated for chunks":
			b.BytesInBin = v
		case "in use in bin":
			b.BytesInUse = v
		case "client-requested in use in bin":
			b.RequestedInUse = v
		}
	}
	if old {
		p.oldBins = true
		p.seen(formatBinsFree, line)
	} else {
		p.seen(formatBinsAll, line)
	}
	p.ev.Bins = append(p.ev.Bins, b)
}

// humanFig reads a size as TF prints it into a Fig.
func humanFig(s string, line int) (Fig, bool) {
	v, exact, ok := parseHumanBytes(s)
	if !ok {
		return Fig{}, false
	}
	return Fig{V: v, Exact: exact, Line: line}, true
}

// chunk reads one chunk line, matched by chunkRE.
func (p *logParser) chunk(m []string, line int) error {
	addr, err := strconv.ParseUint(m[2], 16, 64)
	if err != nil {
		p.skip(line, "bad chunk address %q", m[2])
		return nil
	}
	size, err := strconv.ParseUint(m[4], 10, 64)
	if err != nil || size == 0 {
		p.skip(line, "bad chunk size %q", m[4])
		return nil
	}
	if addr+size < addr {
		p.skip(line, "chunk at %#x of size %d runs past the end of the address space", addr, size)
		return nil
	}
	c := Chunk{Addr: addr, Size: size, InUse: m[1] != "Free", Bin: -1}
	if !c.InUse {
		c.Bin = BinNumForSize(size)
	}
	next := m[3]
	switch {
	case m[1] == "Chunk" || (m[3] == "" && !hasNext(m[5])):
		p.sawOldChunks = true
		p.seen(formatChunksOld, line)
	case m[3] != "":
		p.seen(formatChunksMid, line)
	default:
		p.seen(formatChunksNew, line)
		if h, ok := nextHandle(m[5]); ok {
			next = h
		}
	}
	if next == strconv.FormatUint(invalidChunkHandle, 10) {
		p.ev.RegionEnds++
	}
	if !strings.Contains(m[5], "by op ") {
		// nothing: TENSORFLOW_MEM_DEBUG builds only
	} else if om := chunkOpRE.FindStringSubmatch(m[5]); om != nil {
		c.OpName = om[1]
		c.ActionCount, _ = strconv.ParseUint(om[2], 10, 64)
		c.StepID, _ = strconv.ParseUint(om[3], 10, 64)
	}
	if !strings.Contains(m[5], "freed_at_count") {
		// nothing: only with TF's timing counter
	} else if fm := freedAtRE.FindStringSubmatch(m[5]); fm != nil {
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
	ev := p.ev
	ev.ChunkLines++
	if c.InUse {
		ev.InUseChunkLines++
	} else {
		ev.FreeChunkLines++
	}
	if ev.FirstChunkLine == 0 {
		ev.FirstChunkLine = line
	}
	ev.LastChunkLine = line
	return nil
}

// stats reads the key-value pairs of AllocatorStats::DebugString in text.
func (p *logParser) stats(text string, line int) {
	for _, kv := range statKVRE.FindAllStringSubmatch(text, -1) {
		f, ok := humanFig(kv[2], line)
		if !ok {
			continue
		}
		ev := p.ev
		switch kv[1] {
		case "Limit":
			if f.V > 0 { // classic TF prints 0 for an allocator without a limit
				ev.Limit.set(f)
			}
		case "InUse":
			ev.InUse.set(f)
		case "MaxInUse":
			ev.MaxInUse.set(f)
		case "NumAllocs":
			ev.NumAllocs.set(f)
		case "MaxAllocSize":
			ev.MaxAllocSize.set(f)
		case "LargestFreeBlock":
			if f.V > 0 {
				ev.LargestFreeBlock.set(f)
			}
		}
	}
}

// finish checks the chunks and regions and fills the stats.
func (p *logParser) finish() (*Snapshot, error) {
	s, ev := p.s, p.ev
	if len(s.Chunks) == 0 && len(ev.Bins) == 0 && s.Request == nil && ev.BinFor == nil &&
		len(ev.BySize) == 0 && !ev.SumTotal.Known() && !ev.Pool.Known() && ev.StatsLine == 0 {
		return nil, p.noDump()
	}
	ev.Skipped = p.skipped
	ev.ChunkAtAll = p.oldestHeadline && ev.FreeChunkLines == 0 && ev.InUseChunkLines > 0
	if ev.ChunkAtAll {
		for i, f := range ev.Formats {
			if f == formatChunksOld.withLine(f.Line) {
				ev.Formats[i] = formatChunksAll.withLine(f.Line)
			}
		}
	}
	ev.BinsFreeOnly = p.oldBins && !slices.ContainsFunc(ev.Bins, func(b PrintedBin) bool { return b.InUse > 0 })
	if err := p.checkRegions(); err != nil {
		return nil, err
	}
	// Order chunks by address. A chunk overlapping one listed before it
	// comes from another dump pasted in: it is left out, with a note.
	idx := make([]int, len(s.Chunks))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return byAddr(s.Chunks[a], s.Chunks[b]) })
	chunks := make([]Chunk, 0, len(idx))
	lineOf := make([]int, 0, len(idx))
	for _, i := range idx {
		c := s.Chunks[i]
		if n := len(chunks); n > 0 && c.Addr < chunks[n-1].Addr+chunks[n-1].Size {
			prev := chunks[n-1]
			ev.Damage = append(ev.Damage, fmt.Sprintf("The chunk at %#x of size %d (line %d) overlaps the chunk at %#x of size %d (line %d): the paste mixes lines of two dumps, so line %d is left out.",
				c.Addr, c.Size, p.chunkLines[i], prev.Addr, prev.Size, lineOf[n-1], p.chunkLines[i]))
			s.Regions = nil
			ev.ChunkLines--
			if c.InUse {
				ev.InUseChunkLines--
			} else {
				ev.FreeChunkLines--
			}
			continue
		}
		chunks = append(chunks, c)
		lineOf = append(lineOf, p.chunkLines[i])
	}
	s.Chunks = chunks
	slices.SortStableFunc(s.Regions, func(a, b Region) int {
		return byAddr(Chunk{Addr: a.Addr}, Chunk{Addr: b.Addr})
	})
	if s.Request == nil && ev.BinFor != nil && ev.BinFor.Request.V > 0 {
		// No headline in the paste: the "Bin for" line still names the
		// rounded request.
		s.Request = &Request{Bytes: ev.BinFor.Request.V, Rounded: roundedBytes(ev.BinFor.Request.V)}
	}
	s.Stats = p.stats0()
	if s.Stats.PoolBytes > 0 && !ev.Pool.Exact && len(s.Regions) > 0 {
		s.Stats.PoolBytes = 0 // the regions' exact total stands in
	}
	sum := s.Summarize()
	s.Stats.Fragmentation = sum.TFFragmentation
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	return s, nil
}

// stats0 fills Snapshot.Stats with the best figure the log gives for each
// counter: an exact figure over an approximate one, and for the bytes in
// use the Stats block over the in-use chunk lines' total (which a partial
// paste makes too small) unless the two agree within TF's rounding.
func (p *logParser) stats0() Stats {
	ev := p.ev
	limit := ev.PoolLimit
	if !limit.Exact && ev.Limit.Known() {
		limit.set(ev.Limit)
	}
	var inUseSum uint64
	for _, c := range p.s.Chunks {
		if c.InUse {
			inUseSum += c.Size
		}
	}
	inUse := ev.InUse
	if !inUse.Known() {
		inUse = printedInUse(ev)
	}
	if len(p.s.Chunks) > 0 && (!inUse.Known() || !inUse.Exact && approxEqual(inUse, inUseSum)) {
		inUse = Fig{V: inUseSum, Exact: true}
	}
	return Stats{
		NumAllocs:                 clampInt64(ev.NumAllocs.V),
		BytesInUse:                clampInt64(inUse.V),
		PeakBytesInUse:            clampInt64(ev.MaxInUse.V),
		LargestAllocSize:          clampInt64(ev.MaxAllocSize.V),
		BytesLimit:                clampInt64(limit.V),
		PoolBytes:                 clampInt64(ev.Pool.V),
		CurrRegionAllocationBytes: clampInt64(ev.NextRegion.V),
	}
}

// noDump is ErrNoDump with what the input held instead.
func (p *logParser) noDump() error {
	msg := fmt.Sprintf("%s: %v in %d lines", p.name, ErrNoDump, p.ev.Lines)
	switch {
	case p.nonFatal > 0:
		msg += fmt.Sprintf(": only %d of TensorFlow's warnings for an allocation it may retry (\"The caller indicates that this is not a failure\"), which come without a dump: the run went on", p.nonFatal)
	case len(p.skipped) > 0:
		msg += ": the lines that look like chunk lines cannot be read: " + strings.Join(p.skipped[:min(3, len(p.skipped))], "; ")
	default:
		msg += ": none is a line TensorFlow's BFC allocator prints on an out-of-memory"
	}
	msg += ` (known: the headline "Allocator (A) ran out of memory trying to allocate X" or "Ran out of memory trying to allocate X", ` +
		`bin lines "Bin (256): Total Chunks: ...", chunk lines "InUse at", "Chunk at" or "Free  at ADDR ... of size N", ` +
		`"Sum Total of in-use chunks", "Stats:"; docs/allocators/bfc.md lists every TensorFlow version's form)`
	return &noDumpError{msg: msg}
}

type noDumpError struct{ msg string }

func (e *noDumpError) Error() string { return e.msg }
func (e *noDumpError) Unwrap() error { return ErrNoDump }

// checkRegions drops the regions when some chunk came before any "Next
// region" header (the log lost lines, so they describe only part of the
// pool), when a chunk lies outside the region its line follows (a header
// was lost), or when regions overlap (lines of two dumps); the regions are
// then inferred from gaps between chunks, and a note says why.
func (p *logParser) checkRegions() error {
	s := p.s
	if len(s.Regions) == 0 {
		return nil
	}
	drop := func(note string) error {
		p.ev.Damage = append(p.ev.Damage, note+" The regions are inferred from gaps between chunks instead.")
		s.Regions, p.regionLines = nil, nil
		return nil
	}
	if slices.Contains(p.regionOf, -1) {
		s.Regions, p.regionLines = nil, nil
		return nil
	}
	for i, c := range s.Chunks {
		r := s.Regions[p.regionOf[i]]
		if c.Addr < r.Addr || c.Addr+c.Size > r.Addr+r.Size || c.Addr+c.Size < c.Addr {
			return drop(fmt.Sprintf("The chunk at %#x (line %d) lies outside the region of line %d (%#x, %s): a \"Next region\" line is missing.",
				c.Addr, p.chunkLines[i], p.regionLines[p.regionOf[i]], r.Addr, ib(r.Size)))
		}
	}
	for i := 1; i < len(s.Regions); i++ {
		a, b := s.Regions[i-1], s.Regions[i]
		if a.Addr > b.Addr {
			a, b = b, a
		}
		if b.Addr < a.Addr+a.Size {
			return drop(fmt.Sprintf("The region of line %d (%#x, %s) overlaps another: the paste mixes lines of two dumps.",
				p.regionLines[i], s.Regions[i].Addr, ib(s.Regions[i].Size)))
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
