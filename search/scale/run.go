package scale

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/internal/outfile"
	"github.com/bfcsim/bfcsim/search"
	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
)

// ParseValues reads a comma-separated list of step values; with blanks,
// "_" leaves a step out (known false).
func ParseValues(s string, blanks bool) (values []int64, known []bool, err error) {
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "_" && blanks {
			values, known = append(values, 0), append(known, false)
			continue
		}
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 1 {
			want := "a whole number of at least 1"
			if blanks {
				want += ", or _ to leave the step out"
			}
			return nil, nil, fmt.Errorf("value %d, %q: want %s", i+1, f, want)
		}
		values, known = append(values, v), append(known, true)
	}
	return values, known, nil
}

// ParseRequest reads bfcsim scale's values: --steps, --to (with -o), and the
// capacity of --fit-in or of --gpu's usable memory (its driver's total less
// reserve).
func ParseRequest(steps, to, out, fitIn, gpu, reserve string) (Request, error) {
	var req Request
	var err error
	if (to != "") != (out != "") {
		return req, fmt.Errorf("--to and -o go together: the values to write the program at, and the file to write it to")
	}
	req.Out = out
	if req.Values, req.Known, err = ParseValues(steps, true); err != nil {
		return req, fmt.Errorf("--steps: %w", err)
	}
	if to != "" {
		if req.To, _, err = ParseValues(to, false); err != nil {
			return req, fmt.Errorf("--to: %w", err)
		}
	}
	switch {
	case fitIn != "":
		if req.FitIn, err = allocators.ParseSize(fitIn); err != nil || req.FitIn == 0 {
			return req, fmt.Errorf("--fit-in %q: want a size such as 24GiB", fitIn)
		}
	case gpu != "":
		g, err := search.LookupGPU(gpu)
		if err != nil {
			return req, fmt.Errorf("--gpu: %w", err)
		}
		r, err := allocators.ParseSize(reserve)
		if err != nil || r >= g.TotalBytes {
			return req, fmt.Errorf("--context-reserve %q: want a size below the GPU's %d bytes", reserve, g.TotalBytes)
		}
		req.FitIn = g.TotalBytes - r
	}
	return req, nil
}

// Request is what a scale run asks.
type Request struct {
	// Values are the recorded steps' values, one per step; Known says
	// which the model uses.
	Values []int64
	Known  []bool
	// StepStart names the call site a step begins at ("": found).
	StepStart string
	// To are the values to write the program at: one per step, or one for
	// all; Out is the trace file to write it to, whole or not at all.
	To  []int64
	Out string
	// FitIn is the capacity to find the largest value for (0: none), with
	// Spec's allocator (empty: the recording's, else pytorch) and settings;
	// Advise searches again, changing advise's settings (FitInAdvised).
	FitIn  uint64
	Spec   sim.AllocatorSpec
	Advise bool
	Search search.Options
	// Checked, if set, is told of each value FitIn tries.
	Checked func(value int64, fits bool)
}

// StepInfo is a recorded step, for reports.
type StepInfo struct {
	Value         int64
	Known         bool
	FirstLine     int64
	Allocs        int
	PeakLiveBytes uint64
}

// Result is what a scale run found.
type Result struct {
	Name string
	// Allocator is the allocator --fit-in replayed.
	Allocator string
	StartSite string
	Steps     []StepInfo
	Model     *Model
	// Held compares each step the model left out that To gives a value
	// for with the program's step.
	Held    []Held
	Program *Program
	// Largest is FitIn's answer with Spec's settings; Advised,
	// FitInAdvised's, when asked.
	Largest, Advised *Largest
}

// Run finds the steps, models them, and does what req asks.
func Run(ctx context.Context, rec *Recording, req Request) (*Result, error) {
	if req.Spec.Name == "" {
		req.Spec.Name = "pytorch"
		if s, err := sim.SetupOf(rec.Header); err == nil && s.Recorded.Allocator != "" {
			req.Spec.Name = s.Recorded.Allocator
		}
	}
	steps, err := FindSteps(rec, len(req.Values), req.StepStart)
	if err != nil {
		return nil, err
	}
	m, err := NewModel(rec, steps, req.Values, req.Known)
	if err != nil {
		return nil, err
	}
	res := &Result{Name: rec.Name, Allocator: req.Spec.Name, Model: m, StartSite: rec.Events[steps[0].Start].Tag}
	if res.StartSite == "" {
		res.StartSite = rec.siteLabel(siteOf(&rec.Events[steps[0].Start]))
	}
	peaks := stepPeaks(rec, steps)
	for s, st := range steps {
		res.Steps = append(res.Steps, StepInfo{Value: req.Values[s], Known: req.Known[s],
			FirstLine: rec.Events[st.Start].Line, Allocs: len(st.Allocs), PeakLiveBytes: peaks[s]})
	}
	if len(req.To) > 0 {
		to := req.To
		if len(to) == 1 && len(steps) > 1 {
			to = make([]int64, len(steps))
			for i := range to {
				to[i] = req.To[0]
			}
		}
		if res.Program, err = m.Write(rec, to); err != nil {
			return nil, err
		}
		if req.Out != "" {
			if err := outfile.Write(req.Out, func(w io.Writer) error { return res.Program.WriteTo(trace.NewWriter(w)) }); err != nil {
				return nil, err
			}
		}
		if len(to) == len(steps) {
			for s := range steps {
				if !req.Known[s] {
					res.Held = append(res.Held, res.Program.Compare(rec, m, s, s))
				}
			}
		}
	}
	if req.FitIn > 0 {
		opt := FitInOptions{Capacity: req.FitIn, Spec: req.Spec, Search: req.Search, Checked: req.Checked}
		l, err := m.FitIn(ctx, rec, opt)
		if err != nil {
			return nil, err
		}
		res.Largest = &l
		if req.Advise {
			a, err := m.FitInAdvised(ctx, rec, opt, l)
			if err != nil {
				return nil, err
			}
			res.Advised = &a
		}
	}
	return res, nil
}

// stepPeaks is the most bytes live within each step.
func stepPeaks(rec *Recording, steps []Step) []uint64 {
	peaks := make([]uint64, len(steps))
	live, size := uint64(0), map[uint64]uint64{}
	k := 0
	for i := range rec.Events {
		for k < len(steps) && i >= steps[k].End {
			k++
		}
		switch e := &rec.Events[i]; e.Op {
		case trace.OpAlloc:
			live += e.Size
			size[e.ID] = e.Size
		case trace.OpFree:
			live -= size[e.ID]
			delete(size, e.ID)
		}
		if k < len(steps) && i >= steps[k].Start {
			peaks[k] = max(peaks[k], live)
		}
	}
	return peaks
}

// siteLabel names a call site for reports: its tag, or its stack's
// innermost frame.
func (rec *Recording) siteLabel(s site) string {
	if s.stack == 0 {
		return s.tag
	}
	if f := rec.Stacks.Frames(s.stack); len(f) > 0 {
		return f[0].String()
	}
	return fmt.Sprintf("stack %d", s.stack)
}
