package pytorchoom

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrNoMessage is returned by Read when the input holds no PyTorch
// out-of-memory message.
var ErrNoMessage = errors.New("no PyTorch out-of-memory message")

const (
	// maxLineBytes caps a line; the rest of a longer one is skipped. A
	// message is some 700 bytes, and a log line that carries one inside a
	// JSON record or a Python repr is rarely longer than a few KiB.
	maxLineBytes = 64 << 10
	// maxBodyLines is how many lines after its first a message may span: an
	// unwrapped 2.x message with its advice is about 600 characters, 10
	// lines at 60 columns, and a paste may interleave blank lines.
	maxBodyLines = 40
	// maxBodyBytes caps a message's normalised text.
	maxBodyBytes = 16 << 10
	// maxTextBytes caps Message.Text.
	maxTextBytes = 4 << 10
	// maxListed caps Input.MessageLines.
	maxListed = 20
)

// anchorKind is what a find in the normalised stream starts: a message, or
// a paste that leaves out the message's start.
type anchorKind int8

const (
	// anchorOOM is "out of memory.", which every message of the CUDA
	// allocator and its kin (HIP, XPU, MUSA) says before the request.
	anchorOOM anchorKind = iota
	// anchorMPS is "out of memory (", which the MPS allocator says after
	// "MPS backend" and before its figures.
	anchorMPS
	// anchorRequest is "Tried to allocate": a paste that starts at the
	// request.
	anchorRequest
	// anchorParen is "(GPU": a paste of the 1.x and IPEX wordings'
	// parenthesis alone.
	anchorParen
	// anchorCapacity is "has a total capacity": a paste of the 2.x
	// wording that starts at "GPU N has a total capacity of".
	anchorCapacity
	// anchorMPSFigures is "MPS allocated:": a paste that starts at the MPS
	// allocator's figures.
	anchorMPSFigures
	// anchorBlockLimit is intel-extension-for-pytorch's refusal of a block
	// over 4 GiB, which it says before "Tried to allocate".
	anchorBlockLimit
)

// outOfMemory is what every message says, normalised; the character after
// it tells the CUDA allocator's wording ('.') from the MPS allocator's
// ('(').
var outOfMemory = []byte("outofmemory")

// anchors are what the scan looks for, normalised. A find starts a
// message only if the grammar reads figures after it (parseBody); the
// partial ones are each part of PyTorch's message alone: "(GPU" must go
// on "N; T total capacity;", "has a total capacity" must follow "GPU N",
// "Tried to allocate" must go on with a size and the device's figures, so
// that other text that speaks of capacity or allocation is no message.
var anchors = []struct {
	kind anchorKind
	text []byte
}{
	{anchorOOM, outOfMemory}, // anchorMPS too, by the next character
	{anchorRequest, []byte("triedtoallocate")},
	{anchorParen, []byte("(gpu")},
	{anchorCapacity, []byte("hasatotalcapac")}, // "capacity", and 2.1's "capacty"
	{anchorMPSFigures, []byte("mpsallocated:")},
	{anchorBlockLimit, ipexBlockLimit[:len("currentplatformcannotallocatememoryblock")]},
}

// maxAnchorLen is the longest anchor.
const maxAnchorLen = len("currentplatformcannotallocatememoryblock")

// devices are the device APIs whose caching allocators print the message
// in PyTorch's words, as they appear (lower case) before "out of memory".
var devices = []string{"cuda", "hip", "xpu", "musa"}

// mpsDevice is what the MPS allocator says before "out of memory (".
const mpsDevice = "mpsbackend"

// ipexBlockLimit is what intel-extension-for-pytorch says, normalised,
// before "Tried to allocate" and the device's figures when it refuses a
// block larger than 4 GiB (csrc/gpu/runtime/CachingDeviceAllocator.cpp).
var ipexBlockLimit = []byte("currentplatformcannotallocatememoryblockwithsizelargerthan4gb!")

// exceptionRE finds the Python exception named just before the message on
// its first line: "torch.OutOfMemoryError: ".
// The name must start a word: ".OutOfMemoryError" is the tail of a name a
// wrap cut.
var exceptionRE = regexp.MustCompile(`(?:^|[\s>#\]\):|])([A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception))\s*:\s*$`)

// srcLine is an input line and its normalised form, for searching.
type srcLine struct {
	num  int
	text string
	norm []byte  // from the first character after quote markers
	off  []int32 // norm[i] is text[off[i]]; made when first needed
}

func newLine(num int, text string) *srcLine {
	l := &srcLine{num: num, text: text}
	l.norm, _ = normalize(text, quoteEnd(text, 0), make([]byte, 0, len(text)), nil)
	return l
}

// offsets is where each byte of norm is in text.
func (l *srcLine) offsets() []int32 {
	if l.off == nil {
		_, l.off = normalize(l.text, quoteEnd(l.text, 0), nil, make([]int32, 0, len(l.norm)))
	}
	return l.off
}

// normalize appends text[from:] without white space, in lower case, to
// norm, and when off is not nil each byte's offset in text to off.
func normalize(text string, from int, norm []byte, off []int32) ([]byte, []int32) {
	track := off != nil
	for i := from; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c == ' ', c == '\t', c == '\r', c == '\n', c == '\v', c == '\f':
				continue
			case 'A' <= c && c <= 'Z':
				c += 'a' - 'A'
			}
			norm = append(norm, c)
			if track {
				off = append(off, int32(i-1))
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(text[i:])
		if unicode.IsSpace(r) || r == '\u200b' || r == '\u200c' || r == '\u200d' || r == '\ufeff' {
			i += n
			continue
		}
		for k := range n {
			norm = append(norm, text[i+k])
			if track {
				off = append(off, int32(i+k))
			}
		}
		i += n
	}
	return norm, off
}

// quoteEnd skips white space and quote markers from text[i:]: "> ", ">>",
// "> > ", and "# " (a paste inside Python comments).
func quoteEnd(text string, i int) int {
	for {
		for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
			i++
		}
		if i < len(text) && (text[i] == '>' || text[i] == '#') {
			i++
			continue
		}
		return i
	}
}

// literalJoin says whether line prev ends a string literal that line next,
// from byte from, continues, as in source code that splits a message over
// literals the language joins ("... other " / "allocations: ..."), with
// a "+" or "\" between them or none. It returns the normalised tail of
// prev to drop (the closing quote and the operator) and where next's text
// starts, after its opening quote.
func literalJoin(prev, next string, from int) (string, int, bool) {
	p := strings.TrimRight(prev, " \t\r")
	op := ""
	if n := len(p); n > 0 && (p[n-1] == '+' || p[n-1] == '\\') {
		op = p[n-1:]
		p = strings.TrimRight(p[:n-1], " \t")
	}
	if p == "" || (p[len(p)-1] != '"' && p[len(p)-1] != '\'') {
		return "", 0, false
	}
	q := p[len(p)-1]
	// The opening quote begins next's text; a log prefix shared with prev
	// may already have taken it.
	i := from
	if i > 0 && i <= len(next) && next[i-1] == q {
		i--
	}
	for i < len(next) && (next[i] == ' ' || next[i] == '\t') {
		i++
	}
	if i < len(next) && strings.IndexByte("fFrRbBuU", next[i]) >= 0 && i+1 < len(next) && next[i+1] == q {
		i++ // f"...", r"..."
	}
	if i >= len(next) || next[i] != q {
		return "", 0, false
	}
	return string(q) + op, i + 1, true
}

// Scanner finds PyTorch out-of-memory messages in text, like bufio.Scanner:
//
//	s := NewScanner(r)
//	for s.Scan() {
//		m := s.Message()
//	}
//	err := s.Err()
//
// It reads a line at a time and holds at most a message's worth of lines,
// so its memory does not grow with the input.
type Scanner struct {
	br   *bufio.Reader
	win  []*srcLine // lines read and still needed, in order
	eof  bool
	err  error
	read int // lines read

	// The search resumes at win[li].norm[off:].
	li, off int

	msg *Message

	nearLine int
	nearText string
	partLine int
	partText string

	buf []byte // readLine's, reused
}

// NewScanner returns a Scanner reading r.
func NewScanner(r io.Reader) *Scanner {
	return &Scanner{br: bufio.NewReaderSize(r, 64<<10)}
}

// Scan advances to the next message, which Message then returns. It
// returns false at the end of the input or on a read error (Err).
func (s *Scanner) Scan() bool {
	s.msg = nil
	for {
		li, at, kind, ok := s.findAnchor()
		if !ok {
			return false
		}
		m, endLi, endOff := s.parseAt(li, at, kind)
		if m != nil {
			// Go on after the message, so that its own words ("Tried to
			// allocate", "(GPU 0;") start no paste of their own.
			s.li, s.off = endLi, endOff
			s.msg = m
			return true
		}
		s.li, s.off = li, at+1
	}
}

// Message is the message Scan found. The caller owns it.
func (s *Scanner) Message() *Message { return s.msg }

// Err is the first read error, if any; the end of the input is not one.
func (s *Scanner) Err() error { return s.err }

// Lines is the number of lines read so far.
func (s *Scanner) Lines() int { return s.read }

// NearMiss is the first line that speaks of running out of memory without
// being a caching allocator message ("CUDA error: out of memory", or a
// message cut before its request), and its number; 0 and "" when none.
func (s *Scanner) NearMiss() (int, string) { return s.nearLine, s.nearText }

// Partial is the first line that holds part of PyTorch's message (its
// request, its parenthesis, its capacity sentence or the MPS figures) but
// not enough of it to read; 0 when none does.
func (s *Scanner) Partial() (int, string) { return s.partLine, s.partText }

// notePartial remembers a line with part of PyTorch's message: one whose
// anchor of the kind at norm[at:] goes on in PyTorch's words.
func (s *Scanner) notePartial(l *srcLine, at int, kind anchorKind) {
	if s.partLine != 0 {
		return
	}
	t := l.norm[at:]
	switch kind {
	case anchorRequest:
		// A size after it, where the line holds the whole anchor (it may
		// go on on the next line).
		if rest := t[min(len(t), len("triedtoallocate")):]; len(rest) > 0 {
			if _, _, _, ok := parseSize(rest); !ok {
				return
			}
		}
	case anchorParen:
		// "(GPU 0;", not TensorFlow's "Allocator (GPU_0_bfc)".
		j := len("(gpu")
		for j < len(t) && isDigit(t[j]) {
			j++
		}
		if j == len("(gpu") || j >= len(t) || t[j] != ';' {
			return
		}
	case anchorCapacity, anchorMPSFigures:
	default:
		return
	}
	s.partLine, s.partText = l.num, clip(collapse(l.text), 120)
}

// fill reads lines until win[k] exists or the input ends.
func (s *Scanner) fill(k int) {
	for len(s.win) <= k && !s.eof {
		text, ok := s.readLine()
		if !ok {
			return
		}
		s.read++
		l := newLine(s.read, text)
		s.win = append(s.win, l)
		if s.partLine == 0 {
			for _, p := range pytorchPhrases {
				if bytes.Contains(l.norm, p) {
					s.partLine, s.partText = l.num, clip(collapse(l.text), 120)
					break
				}
			}
		}
	}
}

// pytorchPhrases are words of PyTorch's message, normalised, that no
// other tool's log says: a line with one holds part of the message even
// where no anchor starts it.
var pytorchPhrases = [][]byte{
	[]byte("reservedintotalbypytorch"),
	[]byte("isallocatedbypytorch"),
	[]byte("isreservedbypytorchbutunallocated"),
}

// readLine reads one line without its line end, capped at maxLineBytes.
func (s *Scanner) readLine() (string, bool) {
	buf := s.buf[:0]
	defer func() { s.buf = buf[:0] }()
	got := false
	for {
		frag, err := s.br.ReadSlice('\n')
		if len(frag) > 0 {
			got = true
			if room := maxLineBytes - len(buf); room > 0 {
				buf = append(buf, frag[:min(len(frag), room)]...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			s.eof = true
			if err != io.EOF {
				s.err = err
				return "", false
			}
			if !got {
				return "", false
			}
		}
		break
	}
	buf = bytes.TrimSuffix(buf, []byte("\n"))
	buf = bytes.TrimSuffix(buf, []byte("\r"))
	return string(buf), true
}

// findAnchor finds the next anchor from the search position, across line
// ends, and returns its line's index in win, its offset in that line's
// norm, and its kind.
func (s *Scanner) findAnchor() (int, int, anchorKind, bool) {
	for {
		s.fill(s.li + 3)
		if s.err != nil || s.li >= len(s.win) {
			return 0, 0, 0, false
		}
		// Keep one line before the search position: a message's device
		// word may end the line before.
		if s.li > 1 {
			s.win = append(s.win[:0], s.win[s.li-1:]...)
			s.li = 1
		}
		l := s.win[s.li]
		n := l.norm
		if s.off < len(n) {
			t := n[s.off:]
			if endsInAnchor(n) {
				// An anchor that begins near the end of this line and
				// ends on the next ones: search this line's rest with the
				// next lines' starts, without the log prefix they share
				// with this one.
				t = append([]byte(nil), t...)
				for j := s.li + 1; j < len(s.win) && j <= s.li+3 && len(t) < len(n)-s.off+2*maxAnchorLen; j++ {
					u := s.win[j].text
					from := quoteEnd(u, sharedLogPrefix(l.text, u))
					t, _ = normalize(u[:min(len(u), from+4*maxAnchorLen)], from, t, nil)
				}
			}
			if k, kind, ok := s.firstAnchor(l, t, len(n)-s.off); ok {
				return s.li, s.off + k, kind, true
			}
		}
		s.li++
		s.off = 0
	}
}

// firstAnchor finds the first anchor that starts in t[:limit] and whose
// kind t tells. An "out of memory" followed by neither '.' nor '(' is a
// near miss (CUDA's own "CUDA error: out of memory").
func (s *Scanner) firstAnchor(l *srcLine, t []byte, limit int) (int, anchorKind, bool) {
	for from := 0; from < limit; {
		best, kind := -1, anchorOOM
		for _, a := range anchors {
			if k := bytes.Index(t[from:], a.text); k >= 0 && from+k < limit && (best < 0 || from+k < best) {
				best, kind = from+k, a.kind
			}
		}
		if best < 0 {
			return 0, 0, false
		}
		if kind != anchorOOM {
			return best, kind, true
		}
		next := best + len(outOfMemory)
		switch {
		case next < len(t) && t[next] == '.':
			return best, anchorOOM, true
		case next < len(t) && t[next] == '(':
			return best, anchorMPS, true
		default:
			// Another character, or none: t holds the next lines'
			// starts, so nothing follows in the input.
			s.noteNearMiss(l)
		}
		from = best + 1
	}
	return 0, 0, false
}

// endsInAnchor is whether n ends with the start of an anchor, or with
// "outofmemory" whose next character tells its kind: the anchor may go on
// on the next line.
func endsInAnchor(n []byte) bool {
	for _, a := range anchors {
		text := a.text
		from := len(n) - len(text) + 1 // a proper start of the anchor
		if a.kind == anchorOOM {
			from-- // or all of it: the next character tells its kind
		}
		for k := max(from, 0); k < len(n); k++ {
			if n[k] == text[0] && bytes.HasPrefix(text, n[k:]) {
				return true
			}
		}
	}
	return false
}

// noteNearMiss remembers the first line that says "out of memory" in
// another way than the caching allocator.
func (s *Scanner) noteNearMiss(l *srcLine) {
	if s.nearLine == 0 {
		s.nearLine, s.nearText = l.num, clip(collapse(l.text), 120)
	}
}

// body is a message's normalised text, built from its lines.
type body struct {
	norm []byte
	pos  []bpos
	segs []seg
	// hardWidth is the column a terminal cut the lines at, when the first
	// two are as long as each other: such lines join without a space. 0
	// when the lines look wrapped between words.
	hardWidth int
}

// seg is one line of a body: the text from its first character after
// quote markers and the message's prefix.
type seg struct {
	l    *srcLine
	from int
}

// bpos is where a byte of a body came from: segs[seg].l.text[off].
type bpos struct{ seg, off int32 }

func (b *body) add(l *srcLine, from int) {
	si := int32(len(b.segs))
	b.segs = append(b.segs, seg{l, from})
	off := make([]int32, 0, len(l.text)-from)
	b.norm, off = normalize(l.text, from, b.norm, off)
	for _, o := range off {
		b.pos = append(b.pos, bpos{si, o})
	}
}

// span is the input text of body bytes [a, b), white space collapsed.
func (b *body) span(a, e int) string {
	if a >= e || e > len(b.pos) {
		return ""
	}
	pa, pe := b.pos[a], b.pos[e-1]
	end := int(pe.off) + 1
	last := b.segs[pe.seg].l.text
	for end < len(last) && !utf8.RuneStart(last[end]) {
		end++
	}
	if pa.seg == pe.seg {
		return collapse(last[pa.off:end])
	}
	var sb strings.Builder
	sb.WriteString(b.segs[pa.seg].l.text[pa.off:])
	for si := pa.seg + 1; si <= pe.seg; si++ {
		if len(b.segs[si-1].l.text) != b.hardWidth {
			sb.WriteByte(' ')
		}
		t := b.segs[si].l.text
		if si == pe.seg {
			t = t[:end]
		}
		// Keep the white space a cut left at the line's start.
		from := min(b.segs[si].from, len(t))
		for from > 0 && (t[from-1] == ' ' || t[from-1] == '\t') {
			from--
		}
		sb.WriteString(t[from:])
	}
	return collapse(sb.String())
}

// line is the input line of body byte i.
func (b *body) line(i int) int {
	if len(b.pos) == 0 {
		return 0
	}
	i = min(max(i, 0), len(b.pos)-1)
	return b.segs[b.pos[i].seg].l.num
}

// parseAt reads the message whose anchor of the kind is at
// win[li].norm[at]. It returns the message, or nil, and where the message
// ends: the line's index in win and the offset in its norm.
func (s *Scanner) parseAt(li, at int, kind anchorKind) (*Message, int, int) {
	s.fill(li + maxBodyLines)
	l := s.win[li]

	// Where the message starts: the device word before the anchor (on this
	// line or, wrapped, on the one before, or across the two), or the
	// start of what a partial paste holds.
	device, startLine, startNorm := "", li, at
	switch kind {
	case anchorOOM, anchorMPS:
		run := trailingLetters(l.norm[:at])
		var prev []byte
		if li > 0 && len(run) == at {
			prev = s.win[li-1].norm
			run = trailingLetters(prev) + run
		}
		words := devices
		if kind == anchorMPS {
			words = []string{mpsDevice}
		}
		for _, d := range words {
			if strings.HasSuffix(run, d) {
				device = strings.ToUpper(d)
				if at >= len(d) {
					startNorm = at - len(d)
				} else {
					startLine, startNorm = li-1, len(prev)-(len(d)-at)
				}
				break
			}
		}
		if kind == anchorMPS {
			if device == "" {
				s.noteNearMiss(l)
				return nil, 0, 0
			}
			device = "MPS"
		}
	case anchorBlockLimit:
		device = "XPU"
	case anchorCapacity:
		// "GPU N has a total capacity": the device's number and "GPU"
		// before the anchor, perhaps wrapped onto the line before.
		before := l.norm[:at]
		var prev []byte
		if li > 0 {
			prev = s.win[li-1].norm
		}
		j := at
		for j > 0 && isDigit(before[j-1]) {
			j--
		}
		switch {
		case j < at && j >= len("gpu") && string(before[j-len("gpu"):j]) == "gpu":
			startNorm = j - len("gpu")
		case j == 0 && len(prev) > 0:
			// "GPU" and perhaps the number end the line before.
			joined := append(append([]byte(nil), prev...), before...)
			k := len(prev) + j
			for k > 0 && isDigit(joined[k-1]) {
				k--
			}
			if k == len(joined) || k < len("gpu") || string(joined[k-len("gpu"):k]) != "gpu" {
				return nil, 0, 0
			}
			startLine, startNorm = li-1, k-len("gpu")
		default:
			return nil, 0, 0
		}
	case anchorMPSFigures:
		if at > 0 && l.norm[at-1] == '(' {
			startNorm = at - 1
		}
		device = "MPS"
	}
	first := s.win[startLine]
	rawStart := len(first.text)
	if off := first.offsets(); startNorm < len(off) {
		rawStart = int(off[startNorm])
	}

	// The exception named before the message, and what precedes both: a
	// log prefix that wrapped lines may repeat. A wrap may have left the
	// exception at the end of the line before.
	exception := ""
	prefixLine, prefixEnd := first, rawStart
	if m := exceptionRE.FindStringSubmatchIndex(first.text[:rawStart]); m != nil {
		exception = first.text[m[2]:m[3]]
		prefixEnd = m[0]
	} else if quoteEnd(first.text, 0) >= rawStart && startLine > 0 {
		before := s.win[startLine-1]
		if m := exceptionRE.FindStringSubmatchIndex(before.text); m != nil {
			exception = before.text[m[2]:m[3]]
			prefixLine, prefixEnd = before, m[0]
		}
	}
	if exception != "" {
		// prefixEnd is at the delimiter before the name; keep it.
		if c := prefixLine.text[prefixEnd]; c != ' ' && c != '\t' && !strings.HasPrefix(prefixLine.text[prefixEnd:], exception) {
			prefixEnd++
		}
	}
	logPrefix := prefixLine.text[:prefixEnd]
	prefix := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(logPrefix), ">#"))
	if len(prefix) > 200 {
		prefix = ""
	}
	// contFrom is where a continuation line's text starts: after the first
	// line's prefix if it repeats it (whole, or a log prefix it shares up to
	// a delimiter), and after quote markers.
	contFrom := func(t string) int {
		rest := strings.TrimLeft(t, " \t")
		if prefix != "" && strings.HasPrefix(rest, prefix) {
			return quoteEnd(t, len(t)-len(rest)+len(prefix))
		}
		if n := sharedLogPrefix(logPrefix, t); n > 0 {
			return quoteEnd(t, n)
		}
		return quoteEnd(t, 0)
	}

	var b body
	b.segs = append(b.segs, seg{first, rawStart})
	for i, off := startNorm, first.offsets(); i < len(first.norm); i++ {
		b.norm = append(b.norm, first.norm[i])
		b.pos = append(b.pos, bpos{0, off[i]})
	}
	for j := startLine + 1; j < len(s.win) && j <= li+maxBodyLines && len(b.norm) < maxBodyBytes; j++ {
		from := contFrom(s.win[j].text)
		if tail, at, ok := literalJoin(s.win[j-1].text, s.win[j].text, from); ok && bytes.HasSuffix(b.norm, []byte(tail)) {
			// A message in source code, split into string literals that
			// the language joins: drop the quotes between them.
			b.norm, b.pos = b.norm[:len(b.norm)-len(tail)], b.pos[:len(b.pos)-len(tail)]
			from = at
		}
		b.add(s.win[j], from)
	}
	if len(b.segs) >= 2 && len(b.segs[0].l.text) >= 60 && len(b.segs[0].l.text) == len(b.segs[1].l.text) {
		b.hardWidth = len(b.segs[0].l.text)
	}

	// The grammar starts at "out of memory" after the device word, or at
	// the start of a partial paste.
	parseFrom := 0
	if kind == anchorOOM || kind == anchorMPS {
		parseFrom = at - startNorm
		if startLine != li {
			// The device word ends the line before; the anchor is on this
			// line, which the body holds cleaned of the message's prefix.
			base := len(s.win[startLine].norm) - startNorm
			k := bytes.Index(b.norm[base:], outOfMemory)
			if k < 0 {
				return nil, 0, 0
			}
			parseFrom = base + k
		}
		if !hasPrefix(b.norm[parseFrom:], string(outOfMemory)) {
			return nil, 0, 0 // a prefix on the next line hid part of it
		}
	}
	// This message ends where the next begins.
	if end := nextMessage(b.norm, parseFrom+1); end >= 0 {
		b.norm, b.pos = b.norm[:end], b.pos[:end]
	}

	m, end := parseBody(&b, parseFrom, kind)
	if m == nil {
		if kind == anchorOOM {
			s.noteNearMiss(l)
		}
		s.notePartial(l, at, kind)
		return nil, 0, 0
	}
	if device != "" {
		m.Device = device
	}
	m.Exception = exception

	// Where the message ends, in the window.
	endLi, endOff := li, at+1
	if end > 0 {
		pe := b.pos[end-1]
		el := b.segs[pe.seg].l
		off := el.offsets()
		j, _ := slices.BinarySearch(off, pe.off)
		if wi := el.num - s.win[0].num; wi > li || (wi == li && j+1 > endOff) {
			endLi, endOff = wi, j+1
		}
	}
	return m, endLi, endOff
}

// nextMessage is where the next message's "out of memory" starts in a
// body's normalised text from, or -1: a message ends where the next
// begins.
func nextMessage(t []byte, from int) int {
	for from < len(t) {
		k := bytes.Index(t[from:], outOfMemory)
		if k < 0 {
			return -1
		}
		k += from
		if next := k + len(outOfMemory); next < len(t) && (t[next] == '.' || t[next] == '(') {
			return k
		}
		from = k + 1
	}
	return -1
}

// sharedLogPrefix is the length of the log prefix line shares with the
// text before a message, such as "[rank3]: " before a wrap cut the rest of
// that text off: their common start, up to its last ':', ']', ')' or '|',
// or the whole of it when it is one character and white space (pytest's
// "E   "). 0 when they share none.
func sharedLogPrefix(before, line string) int {
	n := 0
	for n < len(before) && n < len(line) && before[n] == line[n] {
		n++
	}
	for k := n; k > 1; k-- {
		switch line[k-1] {
		case ':', ']', ')', '|':
			return k
		}
	}
	// pytest's "E   ", and other one-character markers before white space.
	if n >= 2 && line[0] != ' ' && line[0] != '\t' && (line[1] == ' ' || line[1] == '\t') {
		k := 1
		for k < n && (line[k] == ' ' || line[k] == '\t') {
			k++
		}
		return k
	}
	return 0
}

// trailingLetters is the run of letters a–z that ends n.
func trailingLetters(n []byte) string {
	j := len(n)
	for j > 0 && 'a' <= n[j-1] && n[j-1] <= 'z' {
		j--
	}
	return string(n[j:])
}

// clip cuts s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Input is what Read found in an input.
type Input struct {
	// Name names the input in reports and errors.
	Name string
	// Lines is the number of lines read.
	Lines int
	// Count is the number of messages found; Last is the last of them,
	// the one a report is about.
	Count int
	Last  *Message
	// MessageLines are the first lines of the first maxListed messages.
	MessageLines []int
}

// Add records a message found, making it the last.
func (in *Input) Add(m *Message) {
	in.Count++
	in.Last = m
	if len(in.MessageLines) < maxListed {
		in.MessageLines = append(in.MessageLines, m.Line)
	}
}

// Read reads r to its end and returns its messages' summary, with the last
// message. name is used in errors. Input without a message is an error
// wrapping ErrNoMessage that says what came closest; a read error (such as
// a cancelled context) is returned wrapped.
func Read(r io.Reader, name string) (*Input, error) {
	s := NewScanner(r)
	in := &Input{Name: name}
	for s.Scan() {
		in.Add(s.Message())
	}
	in.Lines = s.Lines()
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if in.Last == nil {
		return nil, NoMessageError(name, s)
	}
	return in, nil
}

// NoMessageError is the error for input s found no message in: it wraps
// ErrNoMessage and quotes the line that held part of the message, or the
// near miss, if any.
func NoMessageError(name string, s *Scanner) error {
	if n, text := s.Partial(); n > 0 {
		return fmt.Errorf("%s: %w in %d lines (line %d, %q, holds part of PyTorch's out-of-memory message but not enough to read: "+
			"a paste needs the request with the figures after it, the parenthesis \"(GPU N; T total capacity; ...\", "+
			"\"GPU N has a total capacity of T ...\" or \"MPS allocated: ...\")",
			name, ErrNoMessage, s.Lines(), n, text)
	}
	if n, text := s.NearMiss(); n > 0 {
		return fmt.Errorf("%s: %w in %d lines (line %d, %q, speaks of running out of memory but is not the caching allocator's message, which says \"out of memory. Tried to allocate\" and the device's figures)",
			name, ErrNoMessage, s.Lines(), n, text)
	}
	return fmt.Errorf("%s: %w in %d lines (no \"out of memory. Tried to allocate\")", name, ErrNoMessage, s.Lines())
}
