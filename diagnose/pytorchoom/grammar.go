package pytorchoom

import (
	"bytes"
	"strconv"
	"strings"
)

// The grammar of the message, on normalised text (lower case, no white
// space), after the device word and "out of memory.":
//
//	tried to allocate SIZE
//	  ( "(GPU N; SIZE total capacity; SIZE already allocated; SIZE free;"
//	    [SIZE allowed;] SIZE ("cached)" | "reserved in total by PyTorch)")
//	    [advice] )                                       1.0–2.0
//	| ( ". GPU N has a total (capacity|capacty) of SIZE of which SIZE is free."
//	    { "Process N has SIZE memory in use."
//	    | "Including non-PyTorch memory, this process has SIZE memory in use."
//	    | SIZE "allowed;" }
//	    "Of the allocated memory SIZE is allocated by PyTorch,"
//	    ["with SIZE allocated in private pools (e.g., CUDA Graphs),"]
//	    "and SIZE is reserved by PyTorch but unallocated." [advice] )  2.1–
//
// parseBody follows it as far as the text does; a paste that stops early
// gives a Message with the figures before the cut.

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

// parseBody reads the message whose "out of memory." is at b.norm[at]; it
// returns nil when no request follows.
func parseBody(b *body, at int) *Message {
	p := &parser{b: b, t: b.norm, i: at}
	if !p.lit(string(anchor)) {
		return nil
	}
	m := &Message{GPU: -1, Line: b.line(0)}
	req, na, ok := p.clause("triedtoallocate", "")
	if !ok || na {
		return nil
	}
	m.Request = req
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
	derive(m)
	parseAdvice(p, m)
	if !m.Truncated && len(m.Missing()) > 0 {
		cut(m, "the last figure read")
	}
	m.EndLine = b.line(p.end - 1)
	m.Text = clip(b.span(0, p.end), maxTextBytes)
	return m
}

// parseOld reads the 1.0–2.0 parenthesis.
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
	steps := []struct {
		trail string
		dst   **Figure
		name  string
	}{
		{"totalcapacity;", &m.TotalCapacity, "the total capacity"},
		{"alreadyallocated;", &m.Allocated, "the allocated figure"},
		{"free;", &m.Free, "the free figure"},
	}
	last := "the request"
	for _, st := range steps {
		f, _, ok := p.clause("", st.trail)
		if !ok {
			m.Notes = append(m.Notes, "the paste stops before the figure that tells PyTorch 1.0–1.3 (\"cached\") from 1.4–2.0 (\"reserved in total by PyTorch\")")
			cut(m, last)
			return
		}
		*st.dst, last = f, st.name
	}
	if f, _, ok := p.clause("", "allowed;"); ok {
		m.Allowed, last = f, "the allowed figure"
	}
	if f, _, ok := p.clause("", "cached)"); ok {
		m.Format = FormatCached
		m.ReservedUnallocated = f
		return
	}
	if f, _, ok := p.clause("", "reservedintotalbypytorch)"); ok {
		m.Reserved = f
		return
	}
	if m.Allowed == nil {
		m.Notes = append(m.Notes, "the paste stops before the figure that tells PyTorch 1.0–1.3 (\"cached\") from 1.4–2.0 (\"reserved in total by PyTorch\")")
	}
	cut(m, last)
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
	f, _, ok := p.clause("ofwhich", "isfree.")
	if !ok {
		cut(m, "the total capacity")
		return
	}
	m.Free = f
	last := "the free figure"
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
	f, _, ok = p.clause("oftheallocatedmemory", "isallocatedbypytorch")
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

// derive fills the figures the format prints only implicitly.
func derive(m *Message) {
	switch m.Format {
	case FormatCached, FormatCapacty, FormatCapacity:
		if m.Reserved == nil && m.Allocated != nil && m.ReservedUnallocated != nil {
			name := "allocated + reserved but unallocated"
			if m.Format == FormatCached {
				name = "allocated + cached"
			}
			m.Reserved = derived(spanOf(&m.Allocated.Size).add(spanOf(&m.ReservedUnallocated.Size)),
				m.Allocated.Bytes+m.ReservedUnallocated.Bytes, name)
		}
	case FormatReserved:
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
	nominal = min(max(nominal, s.lo), s.hi)
	tol := max(nominal-s.lo, s.hi-nominal)
	return &Figure{Size: Size{Bytes: nominal, Tolerance: tol, Printed: FormatSize(nominal)}, Derived: how}
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
