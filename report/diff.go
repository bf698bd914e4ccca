package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/search"
	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
)

// DiffFormats are the formats of bfcsim diff's answer.
var DiffFormats = []string{"table", "markdown", "json"}

// Diff is what changed between two runs, as bfcsim diff reports it (JSON
// key bfcsim_diff): the peak of live bytes, each allocator's peak and
// fit, and what each call site held at the peak.
type Diff struct {
	Version int      `json:"bfcsim_diff"`
	Before  DiffSide `json:"before"`
	After   DiffSide `json:"after"`
	// PeakDeltaBytes is After's peak of live bytes less Before's; the
	// call sites' DeltaBytes add up to it.
	PeakDeltaBytes int64           `json:"peak_delta_bytes"`
	Allocators     []DiffAllocator `json:"allocators"`
	// CallSites are every call site live at either peak, matched by name,
	// the largest growth first.
	CallSites []DiffCallSite `json:"call_sites"`
	// MaxGrowth is --max-growth as given ("" without), and Exceeded what
	// grew beyond it.
	MaxGrowth string   `json:"max_growth,omitempty"`
	Exceeded  []string `json:"exceeded"`
	Notes     []string `json:"notes"`
}

// DiffSide is one run: its trace, its peak of live bytes and where it
// falls.
type DiffSide struct {
	Trace         string `json:"trace"`
	Path          string `json:"path"`
	Device        *int   `json:"device,omitempty"`
	Events        int64  `json:"events"`
	Allocs        int64  `json:"allocs"`
	PeakLiveBytes uint64 `json:"peak_live_bytes"`
	// PeakEvent is the event, from 0, at which live bytes first peak;
	// PeakStep the step it falls in (from 1; 0 before the first), null
	// when the trace has no steps; PeakStepName that step's name;
	// PeakMark the last annotation before it, "" if none.
	PeakEvent    int64  `json:"peak_event"`
	PeakStep     *int64 `json:"peak_step"`
	PeakStepName string `json:"peak_step_name,omitempty"`
	PeakMark     string `json:"peak_mark,omitempty"`
}

// DiffAllocator is one allocator's peak of reserved bytes and fit's
// smallest device, before and after: null where that run did not replay
// it, and MinCapacityBytes null where it fits on no device.
type DiffAllocator struct {
	Allocator         string     `json:"allocator"`
	PeakReservedBytes [2]*uint64 `json:"peak_reserved_bytes"`
	MinCapacityBytes  [2]*uint64 `json:"min_capacity_bytes"`
	Fits              [2]bool    `json:"fits"`
}

// DiffCallSite is what one call site held live at each run's peak.
type DiffCallSite struct {
	CallSite    string `json:"call_site"`
	BeforeBytes uint64 `json:"before_bytes"`
	AfterBytes  uint64 `json:"after_bytes"`
	DeltaBytes  int64  `json:"delta_bytes"`
	BeforeCount int64  `json:"before_count"`
	AfterCount  int64  `json:"after_count"`
	// Status is "new" for a call site live at After's peak alone,
	// "vanished" for one live at Before's alone, else "".
	Status string `json:"status,omitempty"`
	// Stack is the frames of its largest stack, innermost first (After's
	// when it has one), when the traces carry stacks.
	Stack []string `json:"stack,omitempty"`
}

// DiffRun is one run of a diff as loaded: a recording (search.LoadJob,
// with its call sites), fit's answer for each of its allocators, and the
// rule that names call sites.
type DiffRun struct {
	Rec    search.Recording
	Fits   []search.FitResult
	Frames trace.FrameRule
}

// Growth is a bound on growth: a fraction of the value before, or, with
// IsBytes, a number of bytes.
type Growth struct {
	Fraction float64
	Bytes    uint64
	IsBytes  bool
	Text     string
}

// ParseGrowth reads --max-growth: a percentage (2%), a fraction (0.02) or
// a size (256MiB).
func ParseGrowth(s string) (Growth, error) {
	if f, err := ParseTolerance(s); err == nil {
		return Growth{Fraction: f, Text: s}, nil
	}
	b, err := allocators.ParseSize(s)
	if err != nil {
		return Growth{}, fmt.Errorf("%q: want a percentage (2%%), a fraction (0.02) or a size (256MiB)", s)
	}
	return Growth{Bytes: b, IsBytes: true, Text: s}, nil
}

// exceeds says whether after is more than before by more than g allows.
func (g Growth) exceeds(before, after uint64) bool {
	if after <= before {
		return false
	}
	if g.IsBytes {
		return after-before > g.Bytes
	}
	return before == 0 || float64(after-before)/float64(before) > g.Fraction
}

// NewDiff compares before with after; growth, if set, is --max-growth.
func NewDiff(before, after DiffRun, growth *Growth) Diff {
	d := Diff{Version: 1, Before: diffSide(before), After: diffSide(after), Exceeded: []string{}, Notes: []string{}}
	d.PeakDeltaBytes = int64(d.After.PeakLiveBytes) - int64(d.Before.PeakLiveBytes)
	d.Allocators = diffAllocators(before, after)
	d.CallSites = DiffCallSites(allCallSites(before), allCallSites(after))
	if len(before.Rec.CallSites) == 0 && len(after.Rec.CallSites) == 0 && (d.Before.PeakLiveBytes > 0 || d.After.PeakLiveBytes > 0) {
		d.Notes = append(d.Notes, "neither trace names the call sites of its allocations (no tags or stacks): the peak's bytes are not split by call site")
	}
	if growth != nil {
		d.MaxGrowth = growth.Text
		d.Exceeded = d.exceeded(*growth)
	}
	return d
}

func diffSide(r DiffRun) DiffSide {
	s := r.Rec.Summary
	out := DiffSide{Trace: r.Rec.Name, Path: r.Rec.Path, Device: r.Rec.Device, Events: s.Events, Allocs: s.Allocs,
		PeakLiveBytes: s.PeakLiveBytes, PeakEvent: s.PeakLiveEvent, PeakMark: s.PeakMark}
	if s.Steps > 0 {
		step := s.PeakStep
		out.PeakStep, out.PeakStepName = &step, s.PeakStepName
	}
	return out
}

// diffAllocators lines up the allocators of both runs: before's in its
// order, then those after alone replayed.
func diffAllocators(before, after DiffRun) []DiffAllocator {
	var out []DiffAllocator
	index := map[string]int{}
	for side, r := range []DiffRun{before, after} {
		for i, u := range r.Rec.Unlimited {
			k, ok := index[u.Allocator]
			if !ok {
				k = len(out)
				index[u.Allocator] = k
				out = append(out, DiffAllocator{Allocator: u.Allocator})
			}
			a := &out[k]
			peak := u.PeakReservedBytes
			a.PeakReservedBytes[side] = &peak
			if i < len(r.Fits) && r.Fits[i].Fits {
				c := r.Fits[i].MinCapacityBytes
				a.MinCapacityBytes[side], a.Fits[side] = &c, true
			}
		}
	}
	return out
}

// allCallSites names every call site live at the run's peak, from its
// stacks by the run's rule, as peak_call_sites does, none left out.
func allCallSites(r DiffRun) []CallSite {
	return callSites(r.Rec.CallSites, r.Rec.Stacks, r.Frames, len(r.Rec.CallSites))
}

// DiffCallSites matches two lists of call sites by name and sorts them by
// growth, the largest first (then by name). A row that sums the sites a
// report left out ("(N other call sites)") matches its like in the other.
func DiffCallSites(before, after []CallSite) []DiffCallSite {
	by := map[string]*DiffCallSite{}
	var out []*DiffCallSite
	get := func(name string) *DiffCallSite {
		if strings.HasSuffix(name, " other call sites)") {
			name = "(other call sites)"
		}
		d := by[name]
		if d == nil {
			d = &DiffCallSite{CallSite: name}
			by[name] = d
			out = append(out, d)
		}
		return d
	}
	for _, c := range before {
		d := get(c.CallSite)
		d.BeforeBytes += c.Bytes
		d.BeforeCount += c.Count
		d.Stack = c.Stack
	}
	for _, c := range after {
		d := get(c.CallSite)
		d.AfterBytes += c.Bytes
		d.AfterCount += c.Count
		if len(c.Stack) > 0 {
			d.Stack = c.Stack
		}
	}
	rows := make([]DiffCallSite, len(out))
	for i, d := range out {
		d.DeltaBytes = int64(d.AfterBytes) - int64(d.BeforeBytes)
		switch {
		case d.BeforeCount == 0 && d.AfterCount > 0:
			d.Status = "new"
		case d.AfterCount == 0 && d.BeforeCount > 0:
			d.Status = "vanished"
		}
		rows[i] = *d
	}
	slices.SortStableFunc(rows, func(a, b DiffCallSite) int {
		if c := cmp.Compare(b.DeltaBytes, a.DeltaBytes); c != 0 {
			return c
		}
		return cmp.Compare(a.CallSite, b.CallSite)
	})
	return rows
}

// exceeded lists what grew beyond g: the peak of live bytes, and each
// allocator's fit (a run that no longer fits at all among them).
func (d *Diff) exceeded(g Growth) []string {
	out := []string{}
	if g.exceeds(d.Before.PeakLiveBytes, d.After.PeakLiveBytes) {
		out = append(out, "peak live bytes "+change(d.Before.PeakLiveBytes, d.After.PeakLiveBytes))
	}
	for _, a := range d.Allocators {
		b, n := a.MinCapacityBytes[0], a.MinCapacityBytes[1]
		switch {
		case a.PeakReservedBytes[0] == nil || a.PeakReservedBytes[1] == nil:
		case a.Fits[0] && !a.Fits[1]:
			out = append(out, a.Allocator+" fit: no device fits after")
		case a.Fits[0] && g.exceeds(*b, *n):
			out = append(out, a.Allocator+" fit "+change(*b, *n))
		}
	}
	return out
}

// change writes a change in bytes: "+170.00 MiB (+13.8%)".
func change(before, after uint64) string {
	if before == after {
		return "0 B"
	}
	s := SignedBytes(int64(after) - int64(before))
	if before > 0 {
		s += " (" + FormatChange(float64(int64(after)-int64(before))/float64(before)) + ")"
	}
	return s
}

// SignedBytes formats a change in bytes: "+1.50 MiB", "-512 B", "0 B".
func SignedBytes(n int64) string {
	switch {
	case n > 0:
		return "+" + Bytes(uint64(n))
	case n < 0:
		return "-" + Bytes(uint64(-n))
	}
	return "0 B"
}

// Phase says where a run's live bytes peak, in words: "step 3 (\"train\")",
// "before the first step", "after \"forward\"", or "" when the trace says
// nothing of its phases.
func (s DiffSide) Phase() string {
	var parts []string
	if s.PeakStep != nil {
		switch {
		case *s.PeakStep == 0:
			parts = append(parts, "before the first step")
		case s.PeakStepName != "" && s.PeakStepName != fmt.Sprint(*s.PeakStep):
			parts = append(parts, fmt.Sprintf("step %d (%q)", *s.PeakStep, s.PeakStepName))
		default:
			parts = append(parts, fmt.Sprintf("step %d", *s.PeakStep))
		}
	}
	if s.PeakMark != "" {
		parts = append(parts, fmt.Sprintf("after %q", s.PeakMark))
	}
	return strings.Join(parts, ", ")
}

// timelineOf is a run's timeline for the plot: its first allocator's (the
// recording's own, or -a's first), nil when the replay kept none.
func timelineOf(r DiffRun) (*sim.Timeline, string) {
	if len(r.Rec.Unlimited) == 0 || r.Rec.Unlimited[0].Timeline == nil {
		return nil, ""
	}
	return r.Rec.Unlimited[0].Timeline, r.Rec.Unlimited[0].Allocator
}

// DiffDevice picks the recording of a job a diff compares: the one alone,
// else the device with the most bytes live at its peak, the one most
// likely to decide whether the job fits. note says so, naming the others,
// when there was a choice.
func DiffDevice(job []search.Recording, path string) (pick int, note string) {
	if len(job) < 2 {
		return 0, ""
	}
	var names []string
	for i, r := range job {
		if r.Summary.PeakLiveBytes > job[pick].Summary.PeakLiveBytes {
			pick = i
		}
		names = append(names, r.Name)
	}
	return pick, fmt.Sprintf("%s holds %d devices (%s): compared is %s, the one with the most live at its peak; --device N compares another",
		path, len(job), strings.Join(names, ", "), job[pick].Name)
}
