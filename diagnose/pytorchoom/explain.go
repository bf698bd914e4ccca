package pytorchoom

import (
	"fmt"
	"strings"
)

// Verdict names why an allocation failed.
type Verdict string

// The verdicts, in the order Explain tests them (doc.go).
const (
	// Fragmentation: PyTorch's cache holds enough free bytes, but in
	// pieces no block of the request's size can be cut from.
	Fragmentation Verdict = "fragmentation"
	// Limit: a per-process memory limit stops PyTorch from reserving more
	// while the device has room.
	Limit Verdict = "limit"
	// OtherProcess: other processes hold enough of the device that without
	// them the request would fit.
	OtherProcess Verdict = "other-process"
	// NoRoom: the device is full; nothing else explains it.
	NoRoom Verdict = "no-room"
)

// Explanation is the verdict on a message and what it rests on.
type Explanation struct {
	Verdict Verdict
	// Confident is false when a figure the verdict needs is missing, when
	// its deciding comparison is within the figures' rounding, or when an
	// earlier verdict could not be ruled out; CannotKnow then says why.
	Confident bool
	// Reason says why, citing the figures.
	Reason string
	// RestsOn lists the figures the verdict uses and where each comes from.
	RestsOn []string
	// CannotKnow lists what the message does not settle.
	CannotKnow []string
	// Also lists the other verdicts whose test holds too.
	Also []Verdict
	// Advice is what to try, most useful first.
	Advice []string
}

// figs are a message's figures as spans, for the tests.
type figs struct {
	m                                   *Message
	r, t, f, a, rs, u, l, self, outside span
	others                              span
	othersHow                           string // how others was found, for sentences
	listed                              bool   // NVML's list is printed
}

func newFigs(m *Message) figs {
	sp := func(f *Figure) span {
		if f == nil {
			return span{}
		}
		return spanOf(&f.Size)
	}
	x := figs{m: m, r: sp(m.Request), t: sp(m.TotalCapacity), f: sp(m.Free), a: sp(m.Allocated),
		rs: sp(m.Reserved), u: sp(m.ReservedUnallocated), l: sp(m.Allowed), self: sp(m.ProcessInUse)}
	x.outside = x.t.sub(x.f).sub(x.rs)
	x.listed = m.SelfListed || m.Others != nil
	if !x.listed {
		return x
	}
	sum := span{known: true}
	for _, p := range m.Others {
		if p.InUse == nil {
			x.othersHow = "NVML could not report every process's memory"
			return x
		}
		sum = sum.add(spanOf(&p.InUse.Size))
	}
	if m.SelfListed || len(m.Others) == 0 {
		x.others = sum
		return x
	}
	// NVML lists every process on the device, this one included; when no
	// line is this process's by its pid (a container's pid namespace hides
	// it), this process is one of those holding at least what PyTorch
	// reserved. With one such line, that is this process; with several, the
	// others' total lies between the sums without the largest and without
	// the smallest of them.
	var cands []int
	if x.rs.known {
		for i, p := range m.Others {
			if p.InUse.Max() >= x.rs.lo {
				cands = append(cands, i)
			}
		}
	}
	without := func(skip int) span {
		s := span{known: true}
		for i, p := range m.Others {
			if i != skip {
				s = s.add(spanOf(&p.InUse.Size))
			}
		}
		return s
	}
	switch len(cands) {
	case 0:
		x.others = sum
	case 1:
		x.others = without(cands[0])
		x.othersHow = "no process line is this process by its pid (a container hides it), so the one line holding at least what PyTorch reserved is taken for this process"
	default:
		x.others = without(cands[0])
		for _, c := range cands[1:] {
			w := without(c)
			x.others.lo, x.others.hi = min(x.others.lo, w.lo), max(x.others.hi, w.hi)
		}
		x.othersHow = fmt.Sprintf("no process line is this process by its pid, and %d hold at least what PyTorch reserved, so which is this process is uncertain", len(cands))
	}
	return x
}

// Explain gives the verdict on m (doc.go lists the tests and their order).
func Explain(m *Message) Explanation {
	if m.Format.IsMPS() {
		return explainMPS(m)
	}
	if m.BlockLimit {
		return explainBlockLimit(m)
	}
	x := newFigs(m)
	fu := x.f.add(x.u)
	fragCache := geq(x.u, x.r)
	fragSum := and(gt(x.r, x.f), geq(fu, x.r))
	if !m.Format.printsFree() {
		// The allocator prints no free figure (XPU before 2.9, IPEX): the
		// cache alone must cover the request for fragmentation to hold.
		fragSum = no
	}
	frag := or(fragCache, fragSum)
	if x.u.known && x.u.hi == 0 {
		frag = no // nothing reserved but unallocated: nothing to fragment
	}

	var limit tri
	switch {
	case m.Allowed != nil:
		limit = and(gt(x.rs.add(x.r), x.l), geq(x.f, x.r))
		if over := gt(x.rs.add(x.r), x.l); over == maybe && geq(x.f, x.r) == yes {
			// What PyTorch reserved is not known (a paste cut short), but
			// with the request within what the device had free, only the
			// limit can have refused it (see below).
			limit = yes
		}
	case m.Format == FormatCapacty || m.Format == FormatCapacity || m.Format == FormatUnknown:
		// These releases may leave a limit out (2.1 never prints it; a
		// paste may cut it off). PyTorch raises only once the device
		// refuses a new segment or a limit does, after giving its unused
		// cache back: with the request surely within what the device had
		// free, only a limit can have refused it.
		limit = geq(x.f, x.r)
	default:
		limit = no // before 1.8 there are none; from 1.8 to 2.0 one is printed
	}

	var other tri
	if x.others.known {
		other = and(gt(x.r, x.f), geq(x.f.add(x.others), x.r), pos(x.others))
	} else {
		// Unlisted: whatever of the device PyTorch's cache does not hold
		// may be other processes'.
		other = and(gt(x.r, x.f), min(maybe, geq(x.f.add(x.outside), x.r)))
	}
	noRoom := gt(x.r, fu)

	tests := []verdictTest{{Fragmentation, frag}, {Limit, limit}, {OtherProcess, other}, {NoRoom, noRoom}}
	pick, confident := -1, false
	for i, tc := range tests {
		if tc.t == yes {
			pick, confident = i, true
			for _, e := range tests[:i] {
				if e.t != no {
					confident = false
				}
			}
			break
		}
	}
	if pick < 0 {
		for i, tc := range tests {
			if tc.t == maybe {
				pick = i
				break
			}
		}
	}
	if m.Request == nil {
		return explainNoRequest(m, x, tests[:])
	}
	e := Explanation{Confident: confident}
	unexplained := pick < 0
	if unexplained {
		pick = len(tests) - 1
	}
	e.Verdict = tests[pick].v
	for i, tc := range tests {
		// no-room means nothing else explains it, so it never holds beside
		// another verdict.
		if i != pick && tc.t == yes && tc.v != NoRoom {
			e.Also = append(e.Also, tc.v)
		}
	}

	w := words{m: m, x: x}
	switch {
	case tests[pick].t == maybe && len(w.missingFor(e.Verdict)) > 0:
		e.Reason = w.partial(e.Verdict)
	case unexplained:
		e.Reason = w.unexplained()
	case e.Verdict == Fragmentation:
		e.Reason = w.fragmentation(fragCache)
	case e.Verdict == Limit:
		e.Reason = w.limit()
	case e.Verdict == OtherProcess:
		e.Reason = w.other()
	default:
		e.Reason = w.noRoom()
	}
	// What the message leaves open: the tests before the verdict that could
	// not be ruled out, and the verdict's own if it only may hold.
	for i, tc := range tests[:pick+1] {
		if tc.t == maybe {
			e.CannotKnow = append(e.CannotKnow, w.open(tests[i].v, fragCache))
		}
	}
	if x.a.known && x.t.known && (geq(x.a, x.t) == yes || geq(x.rs, x.t) == yes) {
		e.Confident = false
		e.CannotKnow = append(e.CannotKnow, fmt.Sprintf(
			"PyTorch counts %s reserved on a GPU of %s: on Windows the driver may spill GPU memory to system memory (WDDM), so the figures do not describe one device's memory.",
			describe(m.Reserved), describe(m.TotalCapacity)))
	}
	if unexplained {
		e.CannotKnow = append(e.CannotKnow, "what stopped the allocation: by the message's figures it fits.")
	}
	if m.Truncated {
		e.CannotKnow = append(e.CannotKnow, "the paste stops after "+m.Cut+"; the message's figures after that are not in it.")
	}
	e.RestsOn = w.restsOn(e.Verdict, unexplained)
	e.Advice = w.advice(e.Verdict, unexplained)
	return e
}

// explainBlockLimit gives the verdict on intel-extension-for-pytorch's
// refusal of a single block over 4 GiB: a limit of the platform, which no
// free memory lifts.
func explainBlockLimit(m *Message) Explanation {
	e := Explanation{Verdict: Limit, Confident: true}
	e.Reason = fmt.Sprintf("intel-extension-for-pytorch refuses any single block larger than 4 GiB on this platform, and the %s request is one: "+
		"however much of %s's %s is free, it cannot be served in one piece.", describe(m.Request), words{m: m}.gpu(), describe(m.TotalCapacity))
	if m.Request != nil {
		e.RestsOn = append(e.RestsOn, fmt.Sprintf("%-22s %s", "request", source(m.Request)))
	}
	e.Advice = []string{
		"Keep every tensor under 4 GiB: a smaller batch, or the operation split into chunks.",
		"PyTorch's own XPU backend (torch 2.5 and later, without intel-extension-for-pytorch) has its own allocator; check whether it serves the block.",
	}
	return e
}

// verdictTest is a verdict and whether its test holds.
type verdictTest struct {
	v Verdict
	t tri
}

// explainNoRequest gives the verdict on a paste without the request,
// which every test weighs. Where the paste has the device's free memory,
// what PyTorch holds unallocated and what is in use outside its cache,
// and no limit, the failed request was more than the free memory (less
// would have been served), and the figures split the sizes it may have
// had into one window per verdict: the verdict is that of the widest
// within the GPU's capacity, never confident. Otherwise it is the first
// verdict whose test may hold.
func explainNoRequest(m *Message, x figs, tests []verdictTest) Explanation {
	e := Explanation{}
	w := words{m: m, x: x}
	e.CannotKnow = append(e.CannotKnow, "how large the request was: the paste does not have it, and every explanation weighs it.")
	if m.Truncated {
		e.CannotKnow = append(e.CannotKnow, "the paste stops after "+m.Cut+"; the message's figures after that are not in it.")
	}
	if x.f.known && x.u.known && x.outside.known && x.t.known && m.Allowed == nil {
		f, u, out, t := x.f.nominal(), x.u.nominal(), x.outside.nominal(), x.t.nominal()
		held := fmt.Sprintf("%s in use outside PyTorch's cache: other processes, or this process's CUDA context", sum(x.outside))
		if x.listed && x.others.known {
			// NVML's list says what other processes hold; the rest of
			// what is outside the cache is this process's own.
			out = x.others.nominal()
			held = fmt.Sprintf("%s held by the other processes NVML lists", sum(x.others))
		}
		frag := u
		other := satSub(out, u)
		room := satSub(t, f+max(u, out))
		e.Verdict = Fragmentation
		if other > frag {
			e.Verdict = OtherProcess
		}
		if room > max(frag, other) {
			e.Verdict = NoRoom
		}
		otherWindow := ""
		if other > 0 {
			otherWindow = fmt.Sprintf("one of up to %s (free + %s) from that memory, ", FormatSize(f+out), held)
		}
		e.Reason = fmt.Sprintf("The paste does not have the request. It failed, so it was more than the %s the device had free; "+
			"by the other figures, a request of up to %s (free + %s reserved but unallocated) failed from fragmentation, "+
			"%sand a larger one from a full GPU. %s is the verdict for most of the sizes up to the GPU's %s.",
			describe(m.Free), FormatSize(f+u), describe(m.ReservedUnallocated), otherWindow, e.Verdict, describe(m.TotalCapacity))
		e.RestsOn = w.restsOn(e.Verdict, false)
		e.Advice = w.advice(e.Verdict, false)
		return e
	}
	e.Verdict = NoRoom
	for _, tc := range tests {
		if tc.t != no {
			e.Verdict = tc.v
			break
		}
	}
	e.Reason = fmt.Sprintf("The paste does not have the request, and lacks figures that would bound it (%s); of the explanations, %s is the first its figures leave open.",
		strings.Join(w.missingFor(e.Verdict), ", "), e.Verdict)
	if len(w.missingFor(e.Verdict)) == 0 {
		e.Reason = fmt.Sprintf("The paste does not have the request; of the explanations, %s is the first its figures leave open.", e.Verdict)
	}
	e.RestsOn = w.restsOn(e.Verdict, false)
	e.Advice = w.advice(e.Verdict, false)
	return e
}

// pos is a > 0.
func pos(a span) tri { return gt(a, span{known: true}) }

// words writes the explanation's sentences.
type words struct {
	m *Message
	x figs
}

func (w words) gpu() string {
	if w.m.GPU >= 0 {
		return fmt.Sprintf("GPU %d", w.m.GPU)
	}
	return "the GPU"
}

// sum prints a span computed from figures: "about 1.11 GiB".
func sum(s span) string {
	if !s.known {
		return "unknown"
	}
	if s.lo == s.hi {
		return FormatSize(s.lo)
	}
	return "about " + FormatSize(s.nominal())
}

func (w words) fragmentation(cache tri) string {
	m := w.m
	if cache != no {
		s := fmt.Sprintf("PyTorch holds %s reserved but unallocated, at least the %s it tried to allocate, yet no free block of its cache is that large: "+
			"those bytes are scattered over segments that are partly in use, which PyTorch cannot give back to the driver (fragmentation).",
			describe(m.ReservedUnallocated), describe(m.Request))
		if m.Free != nil {
			s += fmt.Sprintf(" The device had %s free.", describe(m.Free))
		}
		return s
	}
	return fmt.Sprintf("The %s request does not fit in the %s the device had free, but would in that plus the %s PyTorch holds reserved but unallocated (%s): "+
		"those cached bytes are scattered over segments that are partly in use, which PyTorch cannot give back to the driver (fragmentation).",
		describe(m.Request), describe(m.Free), describe(m.ReservedUnallocated), sum(w.x.f.add(w.x.u)))
}

func (w words) limit() string {
	m := w.m
	if m.Allowed == nil {
		reserved := ""
		if m.Reserved != nil {
			reserved = fmt.Sprintf(", and PyTorch had reserved %s", describe(m.Reserved))
		}
		return fmt.Sprintf("The device had %s free, at least the %s request%s. "+
			"PyTorch raises only once the device or a limit refuses a new segment, after giving its unused cache back: "+
			"with room on the device, a per-process memory limit (torch.cuda.set_per_process_memory_fraction, or a framework's) refused it. "+
			"PyTorch %s can leave the limit out of this message (or the paste cut it off), so its size is not known: "+
			"more than what was reserved, less than that plus the request.",
			describe(m.Free), describe(m.Request), reserved, m.versions())
	}
	if m.Reserved == nil {
		return fmt.Sprintf("A per-process memory limit stops it: PyTorch may reserve at most %s (torch.cuda.set_per_process_memory_fraction), "+
			"and the device still had %s free, at least the %s request: PyTorch raises only once the device or a limit refuses a new segment, "+
			"so the limit did. What PyTorch had reserved is not in the paste.",
			describe(m.Allowed), describe(m.Free), describe(m.Request))
	}
	return fmt.Sprintf("A per-process memory limit stops it: PyTorch may reserve at most %s (torch.cuda.set_per_process_memory_fraction), "+
		"had reserved %s, and %s + %s = %s is over that, while the device still had %s free.",
		describe(m.Allowed), describe(m.Reserved), describe(m.Reserved), describe(m.Request),
		sum(w.x.rs.add(w.x.r)), describe(m.Free))
}

func (w words) other() string {
	m, x := w.m, w.x
	if !x.others.known {
		return fmt.Sprintf("The %s request does not fit in the %s the device had free. Of the %s's %s, %s is in use outside PyTorch's cache "+
			"(%s total − %s free − %s reserved by PyTorch): other processes, or this process's CUDA context and libraries; the message does not say which. "+
			"If other processes hold at least %s of it, the request would fit without them.",
			describe(m.Request), describe(m.Free), w.gpu(), describe(m.TotalCapacity), sum(x.outside),
			describe(m.TotalCapacity), describe(m.Free), describe(m.Reserved), sum(x.r.sub(x.f)))
	}
	held := sum(x.others)
	if len(m.Others) == 1 && x.othersHow == "" {
		held = describe(m.Others[0].InUse)
	}
	s := fmt.Sprintf("Other processes hold %s of %s (%s); the %s request does not fit in the %s free, but would without them (%s + %s = %s).",
		held, w.gpu(), w.processList(), describe(m.Request), describe(m.Free), describe(m.Free), held, sum(x.f.add(x.others)))
	if m.ProcessInUse != nil {
		s += fmt.Sprintf(" This process holds %s, of which PyTorch reserved %s.", describe(m.ProcessInUse), describe(m.Reserved))
	}
	if x.othersHow != "" {
		s += " Note: " + x.othersHow + "."
	}
	return s
}

// processList is "pid 12345: 40.00 GiB, pid 678: 1.00 GiB".
func (w words) processList() string {
	var parts []string
	for _, p := range w.m.Others {
		v := "not available"
		if p.InUse != nil {
			v = p.InUse.Printed
		}
		parts = append(parts, fmt.Sprintf("pid %d: %s", p.PID, v))
	}
	if len(parts) > 6 {
		parts = append(parts[:6], fmt.Sprintf("and %d more", len(parts)-6))
	}
	return strings.Join(parts, ", ")
}

func (w words) noRoom() string {
	m, x := w.m, w.x
	s := fmt.Sprintf("The GPU is full: the %s request fits neither in the %s the device had free nor in that plus the %s PyTorch holds reserved but unallocated (%s).",
		describe(m.Request), describe(m.Free), describe(m.ReservedUnallocated), sum(x.f.add(x.u)))
	if m.Allocated != nil && m.TotalCapacity != nil {
		s += fmt.Sprintf(" PyTorch's tensors hold %s of its %s.", describe(m.Allocated), describe(m.TotalCapacity))
	}
	if gt(x.r, x.t) == yes {
		s += fmt.Sprintf(" The request alone is more than the GPU's whole %s: no setting makes it fit.", describe(m.TotalCapacity))
	}
	if !x.listed && x.outside.known && geq(x.f.add(x.outside), x.r) != no {
		s += fmt.Sprintf(" Yet %s of it is in use outside PyTorch's cache, by other processes or by this process's CUDA context and libraries; the message does not say which.",
			sum(x.outside))
	}
	if m.Allowed != nil && gt(x.rs.add(x.r), x.l) == yes {
		s += fmt.Sprintf(" The per-process limit of %s would stop it too.", describe(m.Allowed))
	}
	if x.others.known && len(m.Others) > 0 {
		if x.others.hi == 0 {
			s += " NVML lists no other process on it."
		} else {
			s += fmt.Sprintf(" Other processes hold %s, not enough to make room.", sum(x.others))
		}
		if x.othersHow != "" {
			s += " Note: " + x.othersHow + "."
		}
	}
	return s
}

func (w words) unexplained() string {
	m := w.m
	return fmt.Sprintf("The figures do not explain the failure: the device had %s free, at least the %s request, no per-process limit is printed, "+
		"and PyTorch holds %s reserved but unallocated. The memory may have come free after the failed attempt "+
		"(another process, or PyTorch releasing its cache just before printing), or the driver could not map the request in one piece. "+
		"The verdict no-room is a guess.",
		describe(m.Free), describe(m.Request), describe(m.ReservedUnallocated))
}

// missingFor lists the figures a verdict needs that the message lacks.
func (w words) missingFor(v Verdict) []string {
	m := w.m
	need := map[Verdict][]namedFigure{
		Fragmentation: {{"", "free", m.Free}, {"", "reserved but unallocated", m.ReservedUnallocated}},
		Limit:         {{"", "free", m.Free}, {"", "reserved", m.Reserved}},
		OtherProcess:  {{"", "free", m.Free}, {"", "total capacity", m.TotalCapacity}, {"", "reserved", m.Reserved}},
		NoRoom:        {{"", "free", m.Free}, {"", "reserved but unallocated", m.ReservedUnallocated}},
	}[v]
	var out []string
	for _, nf := range need {
		if nf.f == nil {
			out = append(out, nf.label)
		}
	}
	return out
}

// partial is the reason when the paste lacks figures the verdict needs.
func (w words) partial(v Verdict) string {
	m := w.m
	known := fmt.Sprintf("a %s request", describe(m.Request))
	if m.Free != nil {
		known += fmt.Sprintf(" and %s free on the device", describe(m.Free))
	}
	if m.TotalCapacity != nil {
		known += fmt.Sprintf(" of %s", describe(m.TotalCapacity))
	}
	if !m.Format.printsFree() {
		if m.Reserved != nil {
			known += fmt.Sprintf(", with %s reserved by PyTorch", describe(m.Reserved))
		}
		return fmt.Sprintf("The message does not print the device's free memory (%s never does), which would settle it. It shows %s; "+
			"of the explanations, %s is the first those figures leave open: memory outside PyTorch's cache (other processes, or this process's runtime) may have filled the GPU.",
			m.Format.allocatorName(), known, v)
	}
	return fmt.Sprintf("The paste stops before the figures that would settle it (%s not in it). It shows %s; of the explanations, %s is the first those figures leave open.",
		strings.Join(w.missingFor(v), ", "), known, v)
}

// open says why a test could not be settled.
func (w words) open(v Verdict, fragCache tri) string {
	m, x := w.m, w.x
	switch v {
	case Fragmentation:
		if m.ReservedUnallocated == nil {
			return "whether PyTorch's cache was fragmented: the paste does not show how much it holds reserved but unallocated."
		}
		if fragCache == maybe {
			return fmt.Sprintf("whether the %s reserved but unallocated covers the %s request: they are equal within the rounding of PyTorch's two decimals.",
				describe(m.ReservedUnallocated), describe(m.Request))
		}
		return fmt.Sprintf("whether the %s free plus the %s reserved but unallocated covers the %s request: they are equal within rounding.",
			describe(m.Free), describe(m.ReservedUnallocated), describe(m.Request))
	case Limit:
		if m.Allowed == nil {
			return fmt.Sprintf("whether a per-process memory limit was set: PyTorch %s does not print one in this message.", m.versions())
		}
		return fmt.Sprintf("whether %s reserved plus the %s request exceeds the %s allowed, and whether the %s free covers the request: equal within rounding.",
			describe(m.Reserved), describe(m.Request), describe(m.Allowed), describe(m.Free))
	case OtherProcess:
		switch {
		case !x.f.known && !m.Format.printsFree():
			return fmt.Sprintf("how much of %s's %s was in use outside PyTorch's cache: the message prints neither the device's free memory nor its processes.",
				w.gpu(), describe(m.TotalCapacity))
		case !x.listed:
			return fmt.Sprintf("who holds the %s of the GPU outside PyTorch's cache (%s total − %s free − %s reserved): the message lists no processes "+
				"(PyTorch before 2.1 never does, later releases only where NVML is available). If other processes hold at least %s of it, they stand in the way.",
				sum(x.outside), describe(m.TotalCapacity), describe(m.Free), describe(m.Reserved), sum(x.r.sub(x.f)))
		case !x.others.known:
			return "how much the other processes hold: " + x.othersHow + "."
		case x.othersHow != "":
			return "how much the other processes hold: " + x.othersHow + "."
		}
		return fmt.Sprintf("whether the %s free plus the other processes' %s covers the %s request: equal within rounding.",
			describe(m.Free), sum(x.others), describe(m.Request))
	}
	if m.Free == nil || m.ReservedUnallocated == nil {
		return "whether the request fits in the device's free memory plus PyTorch's reserved but unallocated: the paste does not show both."
	}
	return fmt.Sprintf("whether the %s request exceeds the %s free plus the %s reserved but unallocated: equal within rounding.",
		describe(m.Request), describe(m.Free), describe(m.ReservedUnallocated))
}

// restsOn lists the figures a verdict uses.
func (w words) restsOn(v Verdict, unexplained bool) []string {
	m := w.m
	var keys []string
	switch {
	case unexplained:
		keys = []string{"request", "free", "reserved_unallocated"}
	case v == Fragmentation:
		keys = []string{"request", "reserved_unallocated", "free"}
	case v == Limit:
		keys = []string{"request", "allowed", "reserved", "free"}
	case v == OtherProcess:
		keys = []string{"request", "free", "process_in_use", "reserved"}
		if !w.x.listed {
			keys = []string{"request", "free", "total_capacity", "reserved"}
		}
	default:
		keys = []string{"request", "free", "reserved_unallocated", "allocated", "total_capacity"}
	}
	byKey := map[string]namedFigure{}
	for _, nf := range m.figures() {
		byKey[nf.key] = nf
	}
	var out []string
	for _, k := range keys {
		nf := byKey[k]
		if nf.f == nil {
			if k == "allowed" || k == "process_in_use" {
				continue
			}
			if !m.prints(k) && k != "request" {
				out = append(out, fmt.Sprintf("%-22s not printed by this allocator", strings.TrimSpace(nf.label)))
				continue
			}
			out = append(out, fmt.Sprintf("%-22s not in the paste", strings.TrimSpace(nf.label)))
			continue
		}
		out = append(out, fmt.Sprintf("%-22s %s", strings.TrimSpace(nf.label), source(nf.f)))
	}
	if v == OtherProcess {
		for _, p := range m.Others {
			if p.InUse != nil {
				out = append(out, fmt.Sprintf("%-22s %s", fmt.Sprintf("process %d", p.PID), source(p.InUse)))
			}
		}
	}
	return out
}

// source is "1.02 GiB, line 3: of which 1.02 GiB is free", or how a
// derived figure was computed.
func source(f *Figure) string {
	if f.Derived != "" {
		return fmt.Sprintf("%s (%s)", describe(f), f.Derived)
	}
	return fmt.Sprintf("%s, line %d: %q", f.Printed, f.Line, f.From)
}

// advice is what to try for a verdict, in the user's PyTorch's terms.
func (w words) advice(v Verdict, unexplained bool) []string {
	m := w.m
	env := m.confVar()
	switch {
	case unexplained:
		return []string{
			"Run it again and watch the device (nvidia-smi, or torch.cuda.mem_get_info() just before the allocation): memory that comes and goes points at another process.",
			"Record the allocator's history (torch.cuda.memory._record_memory_history) and read the snapshot with `bfcsim import pytorch` to see the allocations around the failure.",
		}
	case v == Fragmentation:
		var a []string
		switch {
		case m.Device == "XPU":
			a = append(a, "Where your release's XPU allocator reads PYTORCH_XPU_ALLOC_CONF, set expandable_segments:True or max_split_size_mb:<MiB> so that the cache's free bytes can serve large requests; "+
				"otherwise release the cache between phases (torch.xpu.empty_cache()), as PyTorch's own advice says.")
		case m.Format == FormatCapacty || m.Format == FormatCapacity:
			a = append(a, fmt.Sprintf("Set %s=expandable_segments:True: PyTorch then grows its segments instead of cutting new ones, and the scattered free bytes become usable.", env))
		case m.Format == FormatReserved:
			if m.Advice == "max_split_size_mb" {
				a = append(a, fmt.Sprintf("Set %s=max_split_size_mb:<MiB> (try a value just above the usual large request, here %s) so that large cached blocks are not split; PyTorch 2.1 and later also offer expandable_segments:True, which usually does better.", env, describe(m.Request)))
			} else {
				a = append(a, "Upgrade PyTorch: later releases can be told not to split large cached blocks (PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:<MiB>) or to grow segments (expandable_segments:True, 2.1 and later).")
			}
		case m.Format == FormatCached:
			a = append(a, "Upgrade PyTorch: this release (1.0–1.3) has no allocator settings; later ones offer PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:<MiB> and, from 2.1, expandable_segments:True.")
		default:
			a = append(a, fmt.Sprintf("Set %s=expandable_segments:True (PyTorch 2.1 and later), or max_split_size_mb:<MiB> in earlier releases, so that the cache's free bytes can serve large requests.", env))
		}
		a = append(a, "Fewer distinct tensor sizes fragment the cache less: fixed shapes, or lengths padded to a few buckets.",
			"Replay a recorded snapshot with `bfcsim replay -a pytorch` and compare allocator settings with `bfcsim advise`.")
		return a
	case v == Limit:
		return []string{
			"Raise or remove the per-process limit (torch.cuda.set_per_process_memory_fraction), or that of the framework that sets it.",
			"Or make the working set fit under it: a smaller batch, activation checkpointing, lower precision.",
		}
	case v == OtherProcess:
		smi, visible, ctx := "nvidia-smi", "CUDA_VISIBLE_DEVICES", "a CUDA context"
		switch m.Device {
		case "HIP":
			smi, visible, ctx = "rocm-smi", "HIP_VISIBLE_DEVICES", "a HIP context"
		case "XPU":
			smi, visible, ctx = "xpu-smi", "ZE_AFFINITY_MASK", "a context"
		}
		return []string{
			fmt.Sprintf("Free %s: stop the other processes (%s lists them), or run on a GPU of your own (%s).", w.gpu(), smi, visible),
			"If they are this job's own workers (DataLoader workers, other ranks, an evaluation process), make sure each uses its own device and does not create " + ctx + " on this one.",
		}
	}
	var a []string
	if gt(w.x.r, w.x.t) == yes {
		a = append(a, "Check the shape of the tensor being allocated: the request is more than the whole GPU, often a broadcast or a batch of the wrong size.")
	}
	a = append(a, "Make the working set smaller: a smaller batch or sequence length, activation checkpointing, lower precision (bf16/fp16, 8-bit optimiser states), or shard the model over more GPUs.",
		"Replay a recorded snapshot with `bfcsim fit` to find the capacity this workload needs.")
	return a
}
