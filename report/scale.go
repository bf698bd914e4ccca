package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/bfcsim/bfcsim/internal/sticky"
	"github.com/bfcsim/bfcsim/search"
	"github.com/bfcsim/bfcsim/search/scale"
)

// ScaleFormats are the formats of bfcsim scale's answer.
var ScaleFormats = []string{"table", "markdown", "json"}

// Scale is bfcsim scale's answer, as JSON writes it.
type Scale struct {
	Version   int          `json:"bfcsim_scale"`
	Name      string       `json:"name"`
	StartSite string       `json:"start_site"`
	Steps     []ScaleStep  `json:"steps"`
	Model     ScaleModel   `json:"model"`
	HeldOut   []ScaleHeld  `json:"held_out"`
	Program   *ScaleOut    `json:"program"`
	Largest   *ScaleAnswer `json:"largest"`
	// LargestAdvised is the largest value with the settings advise
	// searches, changed one at a time as advise does.
	LargestAdvised *ScaleAnswer `json:"largest_advised"`
	// FitInBytes is the capacity --fit-in asked about, or 0.
	FitInBytes uint64 `json:"fit_in_bytes"`
}

// ScaleStep is a recorded step; Value is null for a step left out.
type ScaleStep struct {
	Value         *int64 `json:"value"`
	FirstLine     int64  `json:"first_line"`
	Allocs        int    `json:"allocs"`
	PeakLiveBytes uint64 `json:"peak_live_bytes"`
}

// ScaleModel counts the reference step's allocations by the form of their
// size.
type ScaleModel struct {
	AllocsPerStep int `json:"allocs_per_step"`
	Constant      int `json:"constant"`
	Affine        int `json:"affine"`
	Quadratic     int `json:"quadratic"`
	// Local sizes follow no polynomial through every recorded size: each
	// is taken, at a value, from the two recorded values nearest it.
	Local       int `json:"local"`
	Unexplained int `json:"unexplained"`
	// ReferenceStep is the step the others are matched to (from 0).
	ReferenceStep int `json:"reference_step"`
}

// ScaleHeld compares a step the model left out with the program's.
type ScaleHeld struct {
	Step      int   `json:"step"`
	Value     int64 `json:"value"`
	Allocs    int   `json:"allocs"`
	SameSize  int   `json:"same_size"`
	SameBlock int   `json:"same_block"`
}

// ScaleOut is the program written.
type ScaleOut struct {
	Path   string  `json:"path"`
	Values []int64 `json:"values"`
	Events int     `json:"events"`
	// UnexplainedAllocs are the steps' allocations written at their
	// template's size.
	UnexplainedAllocs int `json:"unexplained_allocs"`
}

// ScaleAnswer is the largest value that fits.
type ScaleAnswer struct {
	Value            *int64            `json:"value"`
	AtMax            bool              `json:"at_max"`
	MinCapacityBytes *uint64           `json:"min_capacity_bytes"`
	Settings         map[string]string `json:"settings"`
	Env              string            `json:"env"`
	// Checks counts the programs tried; Replays, their replays (probes
	// under the capacity, and the answer's fit). LargestAdvised's counts
	// include Largest's.
	Checks  int `json:"checks"`
	Replays int `json:"replays"`
}

// NewScale builds the answer; out is where the program was written.
func NewScale(res *scale.Result, fitIn uint64, out string) Scale {
	s := Scale{Version: 1, Name: res.Name, StartSite: res.StartSite, HeldOut: []ScaleHeld{}, FitInBytes: fitIn}
	for _, st := range res.Steps {
		one := ScaleStep{FirstLine: st.FirstLine, Allocs: st.Allocs, PeakLiveBytes: st.PeakLiveBytes}
		if st.Known {
			v := st.Value
			one.Value = &v
		}
		s.Steps = append(s.Steps, one)
	}
	m := res.Model
	s.Model = ScaleModel{AllocsPerStep: len(m.Steps[m.Ref].Allocs), Constant: m.Count[scale.Constant], Affine: m.Count[scale.Affine],
		Quadratic: m.Count[scale.Quadratic], Local: m.Count[scale.Local], Unexplained: m.Count[scale.Unexplained], ReferenceStep: m.Ref}
	for _, h := range res.Held {
		s.HeldOut = append(s.HeldOut, ScaleHeld{Step: h.Step, Value: h.Value, Allocs: h.Allocs, SameSize: h.Same, SameBlock: h.SameBlock})
	}
	if p := res.Program; p != nil {
		o := &ScaleOut{Path: out, Events: len(p.Events), UnexplainedAllocs: p.Unexplained}
		for _, ps := range p.Steps {
			o.Values = append(o.Values, ps.Value)
		}
		s.Program = o
	}
	answer := func(l *scale.Largest) *ScaleAnswer {
		if l == nil {
			return nil
		}
		a := &ScaleAnswer{AtMax: l.AtMax, Settings: l.Settings, Checks: l.Checks, Replays: l.Replays}
		if a.Settings == nil {
			a.Settings = map[string]string{}
		}
		if l.Fits {
			v, c := l.Value, l.MinCapacityBytes
			a.Value, a.MinCapacityBytes = &v, &c
		}
		a.Env = search.Env(res.Allocator, l.Settings)
		return a
	}
	s.Largest, s.LargestAdvised = answer(res.Largest), answer(res.Advised)
	return s
}

// RenderScale writes s in the named format.
func RenderScale(w io.Writer, s Scale, format string) error {
	switch format {
	case "json":
		return writeIndentedJSON(w, s)
	case "table", "markdown":
		return writeScaleText(w, s, format == "markdown")
	}
	return fmt.Errorf("unknown format %q (want one of %s)", format, strings.Join(ScaleFormats, ", "))
}

func writeScaleText(w io.Writer, s Scale, md bool) error {
	ew := &sticky.Writer{W: w}
	head, row := "%-5s  %-6s  %-10s  %-7s  %s\n", "%-5d  %-6s  %-10s  %-7s  %s\n"
	if md {
		ew.Printf("## %s: %d steps\n\n", s.Name, len(s.Steps))
		head, row = "| %s | %s | %s | %s | %s |\n", "| %d | %s | %s | %s | %s |\n"
	} else {
		ew.Printf("%s: %d steps, each beginning at %s\n", s.Name, len(s.Steps), s.StartSite)
	}
	ew.Printf(head, "STEP", "VALUE", "FIRST LINE", "ALLOCS", "PEAK LIVE")
	if md {
		ew.Printf("|---|---|---|---|---|\n")
	}
	for i, st := range s.Steps {
		v := "_"
		if st.Value != nil {
			v = fmt.Sprint(*st.Value)
		}
		ew.Printf(row, i, v, Count(st.FirstLine), Count(int64(st.Allocs)), Bytes(st.PeakLiveBytes))
	}
	if md {
		ew.Printf("\n")
	}
	m := s.Model
	ew.Printf("model: %s allocations per step (step %d's): %s constant, %s affine, %s quadratic in the value, %s local (from the nearest values), %s unexplained\n",
		Count(int64(m.AllocsPerStep)), m.ReferenceStep, Count(int64(m.Constant)), Count(int64(m.Affine)), Count(int64(m.Quadratic)),
		Count(int64(m.Local)), Count(int64(m.Unexplained)))
	for _, h := range s.HeldOut {
		ew.Printf("step %d, left out, at %d: the program has %s of its %s allocations at the recorded size (%s), %s in the same 512-byte block (%s)\n",
			h.Step, h.Value, Count(int64(h.SameSize)), Count(int64(h.Allocs)), Percent(ratio(h.SameSize, h.Allocs)),
			Count(int64(h.SameBlock)), Percent(ratio(h.SameBlock, h.Allocs)))
	}
	if p := s.Program; p != nil {
		vals := make([]string, len(p.Values))
		for i, v := range p.Values {
			vals[i] = fmt.Sprint(v)
		}
		where := ""
		if p.Path != "" {
			where = " to " + p.Path
		}
		ew.Printf("wrote the program%s: %s events, steps at %s; %s of the steps' allocations at their recorded size, which the model does not explain\n",
			where, Count(int64(p.Events)), strings.Join(vals, ","), Count(int64(p.UnexplainedAllocs)))
	}
	answer := func(what string, a *ScaleAnswer) {
		if a == nil {
			return
		}
		if a.Value == nil {
			ew.Printf("%s: no value fits %s (%d programs tried, %d replays)\n", what, Bytes(s.FitInBytes), a.Checks, a.Replays)
			return
		}
		more := ""
		if a.AtMax {
			more = " (the largest tried: it may go higher)"
		}
		ew.Printf("%s: %d fits %s%s, its program needs %s (%d programs tried, %d replays)\n  %s\n",
			what, *a.Value, Bytes(s.FitInBytes), more, Bytes(*a.MinCapacityBytes), a.Checks, a.Replays, a.Env)
	}
	answer("largest value, settings as recorded", s.Largest)
	answer("largest value, advise's best settings", s.LargestAdvised)
	return ew.Err
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
