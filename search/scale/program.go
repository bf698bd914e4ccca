package scale

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/bfcsim/bfcsim/trace"
)

// Program is the recording with its steps at other values: what comes
// before the first step and after the last as recorded, and each step
// after the recorded step of the nearest value (its template), its
// allocations sized by the model.
type Program struct {
	Header trace.Header
	Stacks *trace.StackTable
	Events []trace.Event
	// Steps are the program's steps: their value, template and where they
	// begin in Events.
	Steps []ProgramStep
	// Unexplained counts the allocations of the steps written at their
	// template's size, which the model does not explain.
	Unexplained int
}

// ProgramStep is one step of a Program.
type ProgramStep struct {
	Value    int64
	Template int
	// Start and End delimit the step's events in Program.Events.
	Start, End int
	// Allocs are the step's allocations, indexes into Program.Events, and
	// Ref the reference allocation each was sized as, or -1.
	Allocs []int
	Ref    []int
}

// headerKeysOfTheRun are header keys that describe where the recorded run
// put its memory; a program at other values has no recorded layout, and
// the allocator model decides every segment itself.
var headerKeysOfTheRun = []string{"address_map", "space_settings", "expandable_ranges", "segments_at_start", "oom"}

// template is the recorded step a step of value x follows: the first step
// follows the first (it creates what later steps keep: the optimizer's
// state, a cache), any other the one of the nearest value, the step at the
// same position first, then the nearest in position.
func (m *Model) template(pos int, x int64) int {
	if pos == 0 {
		return 0
	}
	best := -1
	dist := func(s int) int64 {
		d := m.Values[s] - x
		if d < 0 {
			d = -d
		}
		return d
	}
	for s := range m.Steps {
		if !m.Known[s] {
			continue
		}
		if best < 0 || dist(s) < dist(best) ||
			(dist(s) == dist(best) && (s == pos || (best != pos && abs(s-pos) < abs(best-pos)))) {
			best = s
		}
	}
	return best
}

func abs[T int | int64](x T) T {
	if x < 0 {
		return -x
	}
	return x
}

// timed is an event of the program at its place: the step it falls in (or
// -1 before the steps, len(steps) after them) and its position there, 0
// to 1; order (the event's index in events) breaks ties, as added.
type timed struct {
	at    float64
	order int32
}

// placed is an event of the program, with the program step an allocation
// belongs to (or -1) and the reference allocation it was sized as.
type placed struct {
	ev        trace.Event
	step, ref int32
}

// Write builds the program, from rec (the recording m was built from),
// with the steps at targets: one value per step of the program, which may
// be more or fewer than the recording's. Each allocation of a step keeps
// its lifetime as recorded, in steps and the place within the step it is
// freed at.
func (m *Model) Write(rec *Recording, targets []int64) (*Program, error) {
	if len(targets) == 0 {
		return nil, fmt.Errorf("no values to write the steps at")
	}
	steps := m.Steps
	if m.place == nil {
		m.place = placesOf(rec, steps)
	}
	stepOf, placeOf, freeOf, allocOf := m.place.step, m.place.at, m.place.freeOf, m.place.allocOf

	guess := len(rec.Events) * max(len(targets), len(steps)) / len(steps)
	out := make([]timed, 0, guess)
	events := make([]placed, 0, guess)
	add := func(at float64, ev trace.Event, step, ref int) {
		ev.Flags &^= trace.HasT | trace.HasAddr
		ev.T, ev.Addr = 0, 0
		out = append(out, timed{at: at, order: int32(len(events))})
		events = append(events, placed{ev: ev, step: int32(step), ref: int32(ref)})
	}
	// The place, in the program, of the recorded event i, for an event of
	// the prologue or the epilogue.
	outside := func(i int) float64 {
		if stepOf[i] < 0 {
			return -1 + placeOf[i]
		}
		return float64(len(targets)) + placeOf[i]
	}
	nextID := uint64(0)
	for i := range rec.Events {
		nextID = max(nextID, rec.Events[i].ID+1)
	}
	p := &Program{Header: programHeader(rec.Header), Stacks: rec.Stacks}
	// The prologue and the epilogue, as recorded; a free of one of their
	// allocations inside the steps stays at its place in the step of the
	// same position (or the last).
	for i := range rec.Events {
		e := rec.Events[i]
		if stepOf[i] >= 0 && stepOf[i] < len(steps) {
			continue
		}
		switch e.Op {
		case trace.OpReserve, trace.OpRelease:
			continue
		case trace.OpMark:
			if trace.IsRecordedOOMMark(e.Name) {
				continue // the recorded failure is no program's
			}
		case trace.OpAlloc:
			if f := freeOf[i]; f >= 0 && stepOf[f] >= 0 && stepOf[f] < len(steps) {
				fe := rec.Events[f]
				add(float64(min(stepOf[f], len(targets)-1))+placeOf[f], fe, -1, -1)
			}
		case trace.OpFree:
			if a := allocOf[i]; a >= 0 && stepOf[a] >= 0 && stepOf[a] < len(steps) {
				continue // a step's allocation: its free is the step's
			}
		}
		add(outside(i), e, -1, -1)
	}
	// The steps; each value's sizes computed once.
	sized := map[int64][]uint64{} // 0: not explained
	for k, x := range targets {
		t := m.template(k, x)
		if sized[x] == nil {
			sz := make([]uint64, len(m.sizes))
			for r := range sz {
				if y, ok := m.Predict(r, x); ok {
					sz[r] = y
				}
			}
			sized[x] = sz
		}
		if t < 0 {
			return nil, fmt.Errorf("no step with a value to follow")
		}
		refs := m.refOf(t)
		st := steps[t]
		for j, ai := range st.Allocs {
			e := rec.Events[ai]
			r := refs[j]
			size := uint64(0)
			if r >= 0 {
				size = sized[x][r]
			}
			if size == 0 {
				size = e.Size
				p.Unexplained++
				r = -1
			}
			id := nextID // a template may serve several steps
			nextID++
			ev := e
			ev.ID, ev.Size = id, size
			ev.Block, ev.Flags = 0, ev.Flags&^trace.HasBlock
			add(float64(k)+placeOf[ai], ev, k, r)
			if f := freeOf[ai]; f >= 0 {
				fe := rec.Events[f]
				fe.ID = id
				var at float64
				switch d := stepOf[f] - t; {
				case stepOf[f] >= len(steps):
					at = outside(f)
				case k+d < len(targets):
					at = float64(k+d) + placeOf[f]
				default:
					at = float64(len(targets)) // freed after the program's last step
				}
				add(at, fe, -1, -1)
			}
		}
		add(float64(k)+1-1e-9, trace.Event{Op: trace.OpStep, Name: fmt.Sprintf("scale:%d", x)}, -1, -1)
	}
	slices.SortFunc(out, func(a, b timed) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.order, b.order)
	})
	p.Steps = make([]ProgramStep, len(targets))
	for k, x := range targets {
		p.Steps[k] = ProgramStep{Value: x, Template: m.template(k, x), Start: -1}
	}
	p.Events = make([]trace.Event, 0, len(out))
	for i, o := range out {
		e := &events[o.order]
		p.Events = append(p.Events, e.ev)
		if e.step >= 0 {
			ps := &p.Steps[e.step]
			if ps.Start < 0 {
				ps.Start = i
			}
			ps.End = i + 1
			ps.Allocs = append(ps.Allocs, i)
			ps.Ref = append(ps.Ref, int(e.ref))
		}
	}
	return p, nil
}

// places says where each recorded event is, for writing programs: its step
// (-1 in the prologue, len(steps) in the epilogue) and its place there, 0
// to 1; and each allocation's free and each free's allocation, -1 for none.
type places struct {
	step            []int
	at              []float64
	freeOf, allocOf []int
}

func placesOf(rec *Recording, steps []Step) *places {
	n := len(rec.Events)
	pl := &places{step: make([]int, n), at: make([]float64, n)}
	first, last := steps[0].Start, steps[len(steps)-1].End
	for i := range rec.Events {
		switch {
		case i < first:
			pl.step[i], pl.at[i] = -1, float64(i)/float64(max(first, 1))
		case i >= last:
			pl.step[i], pl.at[i] = len(steps), float64(i-last)/float64(max(n-last, 1))
		}
	}
	for s, st := range steps {
		for i := st.Start; i < st.End; i++ {
			pl.step[i], pl.at[i] = s, float64(i-st.Start)/float64(st.End-st.Start)
		}
	}
	// An ID is unique among live allocations only.
	pl.freeOf, pl.allocOf = pairs(rec.Events)
	return pl
}

// pairs matches allocations and frees: freeOf[i] is the free of the
// allocation at i, allocOf[f] the allocation the free at f frees, -1 where
// there is none.
func pairs(events []trace.Event) (freeOf, allocOf []int) {
	freeOf = make([]int, len(events))
	allocOf = make([]int, len(events))
	live := map[uint64]int{}
	for i := range events {
		freeOf[i], allocOf[i] = -1, -1
		switch e := &events[i]; e.Op {
		case trace.OpAlloc:
			live[e.ID] = i
		case trace.OpFree:
			if a, ok := live[e.ID]; ok {
				freeOf[a], allocOf[i] = i, a
				delete(live, e.ID)
			}
		}
	}
	return freeOf, allocOf
}

// programHeader is the recording's header without what describes the
// recorded run's layout.
func programHeader(h trace.Header) trace.Header {
	h.Meta = maps.Clone(h.Meta)
	for _, k := range headerKeysOfTheRun {
		delete(h.Meta, k)
	}
	h.TimeUnit = ""
	if h.Name != "" {
		h.Name += "-scaled"
	}
	return h
}

// WriteTo writes the program as a trace.
func (p *Program) WriteTo(w *trace.Writer) error {
	if err := w.WriteHeader(p.Header); err != nil {
		return err
	}
	if err := p.Stacks.WriteTo(w); err != nil {
		return err
	}
	for _, e := range p.Events {
		if err := w.Write(e); err != nil {
			return err
		}
	}
	return w.Flush()
}

// Held is how a step of the program compares with a recorded step at the
// same value that the model left out: how many of the recorded step's
// allocations the program's step has at the same size (matched in order
// by call site, as the steps are), and at the same size rounded up to
// 512 bytes, PyTorch's block.
type Held struct {
	Step, Recorded          int
	Value                   int64
	Allocs, Same, SameBlock int
}

// Compare compares the program's step k with the recording's step s.
func (p *Program) Compare(rec *Recording, m *Model, k, s int) Held {
	h := Held{Step: k, Recorded: s, Value: p.Steps[k].Value, Allocs: len(m.Steps[s].Allocs)}
	match := align(rec.Events, p.Events, m.Steps[s].Allocs, p.Steps[k].Allocs, 1)
	for i, j := range match {
		if j < 0 {
			continue
		}
		got, want := p.Events[p.Steps[k].Allocs[j]].Size, rec.Events[m.Steps[s].Allocs[i]].Size
		if got == want {
			h.Same++
		}
		if (got+511)/512 == (want+511)/512 {
			h.SameBlock++
		}
	}
	return h
}
