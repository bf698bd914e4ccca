package pytorchoom

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
)

// The grammar of the message, on normalised text (lower case, no white
// space), after the device word and "out of memory.":
//
//	tried to allocate SIZE
//	  ( "(GPU N; SIZE total capacity; SIZE already allocated;"
//	    [SIZE free;] [SIZE allowed;]
//	    SIZE ("cached" | "reserved in total by PyTorch") [")"]
//	    [advice] )                                     1.0–2.0, IPEX
//	| ( ". GPU N has a total (capacity|capacty) of SIZE"
//	    (" of which SIZE is free." | ".")
//	    { "Process N has SIZE memory in use."
//	    | "Including non-PyTorch memory, this process has SIZE memory in use."
//	    | SIZE "allowed;" }
//	    "Of the allocated memory SIZE is allocated by PyTorch,"
//	    ["with SIZE allocated in private pools (e.g., CUDA Graphs),"]
//	    "and SIZE is reserved by PyTorch but unallocated." [advice] )  2.1–, XPU
//
// and after "MPS backend out of memory (":
//
//	( "MPS allocated: SIZE, other allocations: SIZE" [", max allowed: SIZE"]
//	| "currently allocated: SIZE, max allowed: SIZE" ) ")."
//	"Tried to allocate SIZE on" ("private" | "shared") "pool."
//	["Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit for
//	  memory allocations (may cause system failure)."]
//
// A partial paste starts inside it: at "Tried to allocate", at the
// parenthesis "(GPU N;", at "GPU N has a total capacity", or at "(MPS
// allocated:". parseBody follows the grammar as far as the text does; a
// paste that stops early gives a Message with the figures before the cut.

// parser walks a body's normalised text.
type parser struct {
	b   *body
	t   []byte
	i   int
	end int // the furthest byte the message is known to reach
}

func (p *parser) lit(s string) bool {
	if hasPrefix(p.t[p.i:], s) {
		p.i += len(s)
		return true
	}
	return false
}

func (p *parser) uint() (uint64, bool) {
	j := p.i
	for j < len(p.t) && isDigit(p.t[j]) && j-p.i < 19 {
		j++
	}
	if j == p.i {
		return 0, false
	}
	n, err := strconv.ParseUint(string(p.t[p.i:j]), 10, 64)
	if err != nil {
		return 0, false
	}
	p.i = j
	return n, true
}

// clause reads lead SIZE trail and returns the figure, with the clause as
// its source; on a mismatch it moves nothing and returns false. na is set
// for NVML's "not available" figure.
func (p *parser) clause(lead, trail string) (f *Figure, na, ok bool) {
	c := p.i
	if !p.lit(lead) {
		return nil, false, false
	}
	s, n, na, ok := parseSize(p.t[p.i:])
	if !ok {
		p.i = c
		return nil, false, false
	}
	p.i += n
	if !p.lit(trail) {
		p.i = c
		return nil, false, false
	}
	p.end = p.i
	return p.figure(c, p.i, s), na, true
}

func (p *parser) figure(a, e int, s Size) *Figure {
	return &Figure{Size: s, From: p.b.span(a, e), Line: p.b.line(a)}
}

// cut marks the message as stopping before what comes next.
func cut(m *Message, after string) {
	m.Truncated = true
	m.Cut = after
}

// parseBody reads the message whose anchor of the kind is at b.norm[at]
// (for a partial paste, at is 0: the body starts with it). It returns nil
// when the grammar reads no figure: a message of the CUDA allocator's
// wording without its request, a partial paste without a figure beyond
// the request. The second result is where the message ends in the body.
func parseBody(b *body, at int, kind anchorKind) (*Message, int) {
	p := &parser{b: b, t: b.norm, i: at}
	m := &Message{GPU: -1, Line: b.line(0)}
	switch kind {
	case anchorOOM:
		if !p.lit("outofmemory.") || !parseRequest(p, m) {
			return nil, 0
		}
		parseAfterRequest(p, m)
	case anchorMPS:
		if !p.lit("outofmemory(") || !parseMPS(p, m) {
			return nil, 0
		}
	case anchorRequest, anchorBlockLimit:
		if kind == anchorBlockLimit {
			if !p.lit(string(ipexBlockLimit)) {
				return nil, 0
			}
			m.BlockLimit, m.Device = true, "XPU"
		} else {
			m.StartsAt = "the request"
		}
		if !parseRequest(p, m) {
			return nil, 0
		}
		switch {
		case hasPrefix(p.t[p.i:], "(gpu"), hasPrefix(p.t[p.i:], ".gpu"):
			parseAfterRequest(p, m)
		default:
			return nil, 0 // the request alone, or in other words
		}
		if m.TotalCapacity == nil {
			return nil, 0
		}
	case anchorParen:
		m.StartsAt = `the parenthesis "(GPU N;"`
		if !p.lit("(") {
			return nil, 0
		}
		parseOld(p, m)
		if m.TotalCapacity == nil {
			return nil, 0
		}
	case anchorCapacity:
		m.StartsAt = `"GPU N has a total capacity"`
		parseNew(p, m)
		if m.TotalCapacity == nil {
			return nil, 0
		}
	case anchorMPSFigures:
		m.StartsAt = `"MPS allocated:"`
		p.lit("(")
		if !parseMPSFigures(p, m) {
			return nil, 0
		}
	}
	derive(m)
	parseAdvice(p, m)
	missing := m.Missing()
	if m.StartsAt != "" {
		// A paste that starts after the request lacks it at its start,
		// not at its end.
		missing = slices.DeleteFunc(missing, func(k string) bool { return k == "request" })
	}
	if !m.Truncated && len(missing) > 0 {
		cut(m, "the last figure read")
	}
	m.EndLine = b.line(p.end - 1)
	m.Text = clip(b.span(0, p.end), maxTextBytes)
	return m, p.end
}

// parseRequest reads "Tried to allocate SIZE".
func parseRequest(p *parser, m *Message) bool {
	req, na, ok := p.clause("triedtoallocate", "")
	if !ok || na {
		return false
	}
	m.Request = req
	return true
}

// parseAfterRequest reads what follows the request in the CUDA
// allocator's wordings.
func parseAfterRequest(p *parser, m *Message) {
	switch {
	case p.lit("("):
		parseOld(p, m)
	case p.lit(".gpu"):
		p.i -= len("gpu")
		parseNew(p, m)
	default:
		// "Tried to allocate X." begins the 2.1 and later wording; with
		// nothing after X the release cannot be told.
		if p.i < len(p.t) && p.t[p.i] == '.' {
			m.Format = FormatCapacity
			m.Notes = append(m.Notes, "the paste stops after the request, before the wording that tells PyTorch 2.1 from 2.2 and later")
		} else {
			m.Notes = append(m.Notes, "the paste stops after the request, before the wording that tells PyTorch's release")
		}
		cut(m, "the request")
	}
}

// parseOld reads the 1.0–2.0 parenthesis, and IPEX's, which has no free
// figure. The closing parenthesis may be cut off.
func parseOld(p *parser, m *Message) {
	m.Format = FormatReserved
	if !p.lit("gpu") {
		cut(m, "the request")
		return
	}
	gpu, ok := p.uint()
	if !ok || !p.lit(";") {
		cut(m, "the request")
		return
	}
	m.GPU = int(gpu)
	const tells = "the paste stops before the figure that tells PyTorch 1.0–1.3 (\"cached\") from 1.4–2.0 (\"reserved in total by PyTorch\")"
	steps := []struct {
		trail string
		dst   **Figure
		name  string
	}{
		{"totalcapacity;", &m.TotalCapacity, "the total capacity"},
		{"alreadyallocated;", &m.Allocated, "the allocated figure"},
	}
	last := "the request"
	for _, st := range steps {
		f, _, ok := p.clause("", st.trail)
		if !ok {
			m.Notes = append(m.Notes, tells)
			cut(m, last)
			return
		}
		*st.dst, last = f, st.name
	}
	if f, _, ok := p.clause("", "free;"); ok {
		m.Free, last = f, "the free figure"
	} else if f, ok := closing(p, "reservedintotalbypytorch"); ok {
		// intel-extension-for-pytorch prints no free figure.
		m.Format, m.Reserved = FormatIPEX, f
		return
	} else {
		m.Notes = append(m.Notes, tells)
		cut(m, last)
		return
	}
	if f, _, ok := p.clause("", "allowed;"); ok {
		m.Allowed, last = f, "the allowed figure"
	}
	if f, ok := closing(p, "cached"); ok {
		m.Format = FormatCached
		m.ReservedUnallocated = f
		return
	}
	if f, ok := closing(p, "reservedintotalbypytorch"); ok {
		m.Reserved = f
		return
	}
	if m.Allowed == nil {
		m.Notes = append(m.Notes, tells)
	}
	cut(m, last)
}

// closing reads the parenthesis's last clause, SIZE trail ")", or, where
// a paste cut the parenthesis off, SIZE trail.
func closing(p *parser, trail string) (*Figure, bool) {
	if f, _, ok := p.clause("", trail+")"); ok {
		return f, true
	}
	f, _, ok := p.clause("", trail)
	return f, ok
}

// parseNew reads the 2.1 and later sentences.
func parseNew(p *parser, m *Message) {
	m.Format = FormatCapacity
	c := p.i
	if !p.lit("gpu") {
		cut(m, "the request")
		return
	}
	gpu, ok := p.uint()
	if !ok {
		cut(m, "the request")
		return
	}
	m.GPU = int(gpu)
	switch {
	case p.lit("hasatotalcapacityof"):
	case p.lit("hasatotalcapactyof"):
		m.Format = FormatCapacty
	default:
		m.Notes = append(m.Notes, "the paste stops before \"has a total capacity\", which tells PyTorch 2.1 (\"capacty\") from 2.2 and later")
		cut(m, "the request")
		return
	}
	s, n, _, ok := parseSize(p.t[p.i:])
	if !ok {
		cut(m, "the request")
		return
	}
	p.i += n
	p.end = p.i
	m.TotalCapacity = p.figure(c, p.i, s)
	last := "the free figure"
	if f, _, ok := p.clause("ofwhich", "isfree."); ok {
		m.Free = f
	} else if m.Format == FormatCapacity && hasPrefix(p.t[p.i:], ".oftheallocatedmemory") {
		// PyTorch's XPU allocator before 2.9 prints no free figure.
		m.Format = FormatXPU
		p.i++
		last = "the total capacity"
	} else {
		cut(m, "the total capacity")
		return
	}
	for {
		c := p.i
		if p.lit("process") {
			pid, ok := p.uint()
			if !ok || !p.lit("has") {
				p.i = c
				break
			}
			f, na, ok := p.clause("", "memoryinuse.")
			if !ok {
				p.i = c
				break
			}
			f.From, f.Line = p.b.span(c, p.i), p.b.line(c)
			pr := Process{PID: int64(pid), InUse: f}
			if na {
				pr.InUse = nil
				m.Notes = append(m.Notes, "NVML could not report process "+strconv.FormatUint(pid, 10)+"'s memory (PyTorch prints that as "+f.Printed+")")
			}
			m.Others = append(m.Others, pr)
			last = "the process lines"
			continue
		}
		if f, na, ok := p.clause("includingnon-pytorchmemory,thisprocesshas", "memoryinuse."); ok {
			m.SelfListed = true
			if na {
				m.Notes = append(m.Notes, "NVML could not report this process's memory (PyTorch prints that as "+f.Printed+")")
			} else {
				m.ProcessInUse = f
			}
			last = "the process lines"
			continue
		}
		if f, _, ok := p.clause("", "allowed;"); ok {
			m.Allowed, last = f, "the allowed figure"
			continue
		}
		break
	}
	f, _, ok := p.clause("oftheallocatedmemory", "isallocatedbypytorch")
	if !ok {
		cut(m, last)
		return
	}
	m.Allocated = f
	p.lit(",")
	c = p.i
	if f, _, ok := p.clause("with", "allocatedinprivatepools(e.g.,"); ok {
		// "(e.g., CUDA Graphs)", "(e.g., HIP Graphs)"
		w := p.i
		for p.i < len(p.t) && 'a' <= p.t[p.i] && p.t[p.i] <= 'z' {
			p.i++
		}
		if strings.HasSuffix(string(p.t[w:p.i]), "graphs") && p.lit("),") {
			f.From, f.Line = p.b.span(c, p.i), p.b.line(c)
			m.PrivatePools = f
			p.end = p.i
		} else {
			p.i = c
		}
	}
	f, _, ok = p.clause("and", "isreservedbypytorchbutunallocated.")
	if !ok {
		cut(m, "the allocated figure")
		return
	}
	m.ReservedUnallocated = f
}

// parseMPS reads the MPS allocator's message after "out of memory (".
func parseMPS(p *parser, m *Message) bool {
	if !hasPrefix(p.t[p.i:], "currentlyallocated:") {
		return parseMPSFigures(p, m)
	}
	m.Format = FormatMPSEarly
	f, ok := mpsFigure(p, m, "currentlyallocated:", "currently allocated")
	if !ok {
		return false
	}
	m.DriverAllocated = f
	if m.Allowed, ok = nextMPSFigure(p, m, "maxallowed:", "max allowed"); !ok {
		cut(m, "the currently allocated figure")
		return true
	}
	parseMPSRequest(p, m, "the max allowed figure")
	return true
}

// nextMPSFigure reads ", lead SIZE"; on a mismatch it moves nothing.
func nextMPSFigure(p *parser, m *Message, lead, name string) (*Figure, bool) {
	c := p.i
	if p.lit(",") {
		if f, ok := mpsFigure(p, m, lead, name); ok {
			return f, true
		}
	}
	p.i = c
	return nil, false
}

// parseMPSFigures reads "MPS allocated: SIZE, other allocations: SIZE[,
// max allowed: SIZE])." and what follows. It returns false when not even
// the first figure is there.
func parseMPSFigures(p *parser, m *Message) bool {
	m.Format = FormatMPS
	f, ok := mpsFigure(p, m, "mpsallocated:", "MPS allocated")
	if !ok {
		return false
	}
	m.Reserved = f
	if m.OtherAllocations, ok = nextMPSFigure(p, m, "otherallocations:", "other allocations"); !ok {
		cut(m, "the MPS allocated figure")
		return true
	}
	last := "the other allocations figure"
	switch {
	case hasPrefix(p.t[p.i:], ")."):
		m.NoLimit = true // PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0
	case hasPrefix(p.t[p.i:], ","):
		if m.Allowed, ok = nextMPSFigure(p, m, "maxallowed:", "max allowed"); !ok {
			cut(m, last)
			return true
		}
		last = "the max allowed figure"
	}
	parseMPSRequest(p, m, last)
	return true
}

// mpsFigure reads lead SIZE, where PyTorch prints lead name: SIZE. A
// figure too large to be true is an unsigned difference that wrapped
// (other allocations are what Metal reports less what MPS allocated, both
// read at once): it is noted, and the figure is unknown.
func mpsFigure(p *parser, m *Message, lead, name string) (*Figure, bool) {
	f, na, ok := p.clause(lead, "")
	if !ok {
		return nil, false
	}
	if strings.HasSuffix(f.Printed, "B") && !strings.HasSuffix(f.Printed, "iB") && f.Printed != "" {
		m.unitsKB = true
	}
	if na {
		m.Notes = append(m.Notes, "PyTorch printed "+name+" as "+f.Printed+", a difference below zero that wrapped around: it is taken as not known")
		return nil, true
	}
	return f, true
}

// parseMPSRequest reads ")." and the request with its pool, and the advice
// on the high-watermark limit.
func parseMPSRequest(p *parser, m *Message, last string) {
	if !p.lit(").") {
		if p.lit(")") {
			p.end = p.i
		}
		cut(m, last)
		return
	}
	p.end = p.i
	c := p.i
	if !parseRequest(p, m) {
		cut(m, last)
		return
	}
	for _, pool := range []string{"private", "shared"} {
		if p.lit("on" + pool + "pool") {
			m.Pool = pool
			p.lit(".")
			m.Request.From, m.Request.Line = p.b.span(c, p.i), p.b.line(c)
			p.end = p.i
			break
		}
	}
	if m.Pool == "" {
		m.Notes = append(m.Notes, "the paste stops before the pool the request was for")
	}
	const advice = "usepytorch_mps_high_watermark_ratio=0.0"
	if hasPrefix(p.t[p.i:], "use") && bytes.HasPrefix([]byte(advice), p.t[p.i:min(len(p.t), p.i+len(advice))]) {
		m.Advice, m.ConfVar = "high_watermark_ratio", "PYTORCH_MPS_HIGH_WATERMARK_RATIO"
		p.i = min(len(p.t), p.i+len(advice))
		p.end = p.i
		const rest = "todisableupperlimitformemoryallocations(maycausesystemfailure)."
		n := 0
		for n < len(rest) && p.i+n < len(p.t) && p.t[p.i+n] == rest[n] {
			n++
		}
		p.i += n
		p.end = p.i
	}
}

// derive fills the figures the format prints only implicitly.
func derive(m *Message) {
	switch m.Format {
	case FormatMPS:
		if m.DriverAllocated == nil && m.Reserved != nil && m.OtherAllocations != nil {
			m.DriverAllocated = derivedIn(spanOf(&m.Reserved.Size).add(spanOf(&m.OtherAllocations.Size)),
				m.Reserved.Bytes+m.OtherAllocations.Bytes, "MPS allocated + other allocations", m.unitsKB)
		}
		return
	case FormatCached, FormatCapacty, FormatCapacity, FormatXPU:
		if m.Reserved == nil && m.Allocated != nil && m.ReservedUnallocated != nil {
			name := "allocated + reserved but unallocated"
			if m.Format == FormatCached {
				name = "allocated + cached"
			}
			m.Reserved = derived(spanOf(&m.Allocated.Size).add(spanOf(&m.ReservedUnallocated.Size)),
				m.Allocated.Bytes+m.ReservedUnallocated.Bytes, name)
		}
	case FormatReserved, FormatIPEX:
		if m.ReservedUnallocated == nil && m.Allocated != nil && m.Reserved != nil {
			if m.Reserved.Max() < m.Allocated.Min() {
				m.Notes = append(m.Notes, "PyTorch printed less reserved than allocated, which its accounting does not allow; reserved but unallocated is taken as 0")
			}
			m.ReservedUnallocated = derived(spanOf(&m.Reserved.Size).sub(spanOf(&m.Allocated.Size)),
				satSub(m.Reserved.Bytes, m.Allocated.Bytes), "reserved − allocated")
		}
	}
}

// derived is a figure computed from printed ones: nominal bytes, the span
// it may lie in, and how it was computed.
func derived(s span, nominal uint64, how string) *Figure {
	return derivedIn(s, nominal, how, false)
}

// derivedIn is derived, printed in KB, MB, GB when kb is set.
func derivedIn(s span, nominal uint64, how string, kb bool) *Figure {
	nominal = min(max(nominal, s.lo), s.hi)
	tol := max(nominal-s.lo, s.hi-nominal)
	return &Figure{Size: Size{Bytes: nominal, Tolerance: tol, Printed: formatSize(nominal, kb)}, Derived: how}
}

// adviceWindow is how far past the figures PyTorch's advice is looked
// for; the longest, 2.x's, is some 250 characters.
const adviceWindow = 400

// parseAdvice reads the advice PyTorch prints after the figures: which
// setting it names and in which environment variable. It must start right
// after them, so a reader's own words later in the paste do not count.
func parseAdvice(p *parser, m *Message) {
	if m.Truncated {
		return
	}
	if !(hasPrefix(p.t[p.i:], "ifreserved") || hasPrefix(p.t[p.i:], "pleaseuse")) {
		return
	}
	w := p.t[p.i:min(len(p.t), p.i+adviceWindow)]
	end := 0
	for _, a := range []string{"max_split_size_mb", "expandable_segments", "empty_cache"} {
		if k := bytes.Index(w, []byte(a)); k >= 0 && m.Advice == "" {
			m.Advice = a
			end = max(end, k+len(a))
		}
	}
	// PYTORCH_CUDA_ALLOC_CONF, PYTORCH_HIP_ALLOC_CONF, PYTORCH_ALLOC_CONF:
	// the text after it may run on without a space once normalised.
	if k := bytes.Index(w, []byte("pytorch_")); k >= 0 {
		if j := bytes.Index(w[k:], []byte("alloc_conf")); j >= 0 && j <= len("pytorch_cuda_") {
			j += k + len("alloc_conf")
			m.ConfVar = strings.ToUpper(string(w[k:j]))
			end = max(end, j)
		}
	}
	if k := bytes.Index(w, []byte("(http")); k >= 0 && k < end+80 {
		if e := bytes.IndexByte(w[k:], ')'); e >= 0 {
			end = max(end, k+e+1)
		}
	}
	if end == 0 {
		return
	}
	// The advice's own last word, to the sentence's end.
	if end < len(w) && w[end] == '.' {
		end++
	}
	p.end = p.i + end
}
