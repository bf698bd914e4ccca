package search

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/sim"
)

// A Setting is one of an allocator's options that Advise tries, with the
// values worth trying. Values are as --set takes them.
type Setting struct {
	Key    string
	Values []string
	// Needs, when set, names another setting that must not have the value
	// NeedsNot for this one to make a difference.
	Needs, NeedsNot string
}

// AdvisedSettings are, per allocator, the settings Advise searches: those
// of its reference's documented tuning knobs that bfcsim models exactly
// (docs/allocators.md), with the values people set them to.
var AdvisedSettings = map[string][]Setting{
	"pytorch": {
		{"expandable_segments", []string{"false", "true"}, "", ""},
		{"max_split_size_mb", []string{"unlimited", "64", "128", "256", "512"}, "", ""},
		{"roundup_power2_divisions", []string{"0", "4", "8", "16"}, "", ""},
		{"garbage_collection_threshold", []string{"0", "0.6", "0.8"}, "", ""},
		{"max_non_split_rounding_mb", []string{"20", "64", "256"}, "max_split_size_mb", "unlimited"},
	},
	"bfc": {
		{"allow_growth", []string{"true", "false"}, "", ""},
		{"garbage_collection", []string{"false", "true"}, "", ""},
	},
}

// Candidate is one combination of settings and what it needs.
type Candidate struct {
	// Settings are the advised settings' values, every one of them.
	Settings map[string]string
	// Fit is the smallest device it runs the trace on: for a job, the
	// deciding trace's (Job), and Members every trace's in the job's
	// order.
	Fit     FitResult
	Members []FitResult
	// PeakReservedBytes is its peak without a limit (a job's: the most
	// any of its traces reserves).
	PeakReservedBytes uint64
}

// Effect is what one setting of the best candidate did on its own: the
// smallest device with only that setting changed from the recording's.
type Effect struct {
	Key, From, To    string
	MinCapacityBytes uint64
	Fits             bool
	// SavedBytes is the recorded settings' smallest device less this one
	// (the model's figures both; negative when it needs more).
	SavedBytes int64
}

// Advice is what Advise found for one allocator.
type Advice struct {
	Allocator string
	// Recorded are the settings the trace was recorded with (or the
	// defaults), as the recording ran them (following its decisions), and
	// ModelRecorded the same settings decided by the model from the start:
	// the figure the candidates, all what-ifs, compare with.
	Recorded, ModelRecorded Candidate
	// Best has the smallest device, then the smallest peak without a limit.
	Best Candidate
	// Candidates are every combination tried, in the order tried.
	Candidates []Candidate
	// Effects say what each setting in which Best differs from the
	// recording did on its own.
	Effects []Effect
	// JAX says the trace is a JAX capture's and the allocator bfc: its
	// settings are XLA's, set with XLA_PYTHON_CLIENT_* (XLAEnv).
	JAX bool
}

// Advise searches spec's allocator's settings (AdvisedSettings) for the
// smallest device, and among equals the smallest peak without a limit:
//
//  1. The recorded settings (the trace's, over spec's options), replayed
//     as recorded and as the model decides them alone: the candidates are
//     what-ifs, decided by the model from the start, and compare with the
//     second.
//  2. One setting at a time, every value it can take, the others kept;
//     the best change is kept, and the settings are tried again from it,
//     until no change helps (coordinate descent: the settings interact
//     little, and a full grid would be thousands of searches).
//
// Every candidate's smallest device is a Fit. Options spec sets are kept
// fixed.
func (t *Trace) Advise(ctx context.Context, spec sim.AllocatorSpec) (Advice, error) {
	return Job{t}.Advise(ctx, spec)
}

// Advise is Trace.Advise for a job: each candidate is fitted on every
// trace, and weighed by the one that needs the most (Job). The recorded
// settings are the first trace's: the traces of one job share them.
func (j Job) Advise(ctx context.Context, spec sim.AllocatorSpec) (Advice, error) {
	t := j[0]
	free, recorded, err := AdviseStart(t.Setup, spec)
	if err != nil {
		return Advice{}, err
	}
	adv := Advice{Allocator: spec.Name, JAX: spec.Name == "bfc" && t.IsJAX()}
	cache := map[string]*Candidate{}
	eval := func(vals map[string]string, model bool) (*Candidate, error) {
		key := canonical(vals)
		if model {
			key += " model"
		}
		if c, ok := cache[key]; ok {
			return c, nil
		}
		opts := maps.Clone(spec.Options)
		if opts == nil {
			opts = allocators.Options{}
		}
		maps.Copy(opts, vals)
		if model {
			opts["segments"] = allocators.PyTorchSegmentsModel
		}
		c := &Candidate{Settings: vals}
		for _, m := range j {
			f, err := m.FitOne(ctx, sim.AllocatorSpec{Name: spec.Name, Options: opts})
			if err != nil {
				return nil, err
			}
			c.Members = append(c.Members, f)
			c.PeakReservedBytes = max(c.PeakReservedBytes, f.PeakReservedBytes)
		}
		_, _, deciding := weigh(c.Members)
		c.Fit = c.Members[deciding]
		cache[key] = c
		if !model {
			adv.Candidates = append(adv.Candidates, *c)
		}
		return c, nil
	}
	rec, err := eval(recorded, false)
	if err != nil {
		return Advice{}, err
	}
	adv.Recorded = *rec
	adv.ModelRecorded = *rec
	if t.followsDecisions(spec.Name) {
		m, err := eval(recorded, true)
		if err != nil {
			return Advice{}, err
		}
		adv.ModelRecorded = *m
		adv.ModelRecorded.Settings = recorded
	}
	best := &adv.ModelRecorded
	singles := map[string]*Candidate{} // KEY=VALUE changed alone from the recording
	for round := 0; round < 3; round++ {
		improved := false
		for _, ch := range Changes(free, best.Settings) {
			c, err := eval(ch.Settings, false)
			if err != nil {
				return Advice{}, err
			}
			if round == 0 {
				singles[ch.Key+"="+ch.Settings[ch.Key]] = c
			}
			if better(c, best) {
				best, improved = c, true
			}
		}
		if !improved {
			break
		}
	}
	adv.Best = *best
	for _, s := range free {
		from, to := recorded[s.Key], best.Settings[s.Key]
		if from == to {
			continue
		}
		e := Effect{Key: s.Key, From: from, To: to}
		c := singles[s.Key+"="+to]
		if c == nil {
			vals := maps.Clone(recorded)
			vals[s.Key] = to
			if c, err = eval(vals, false); err != nil {
				return Advice{}, err
			}
		}
		e.MinCapacityBytes, e.Fits = c.Fit.MinCapacityBytes, c.Fit.Fits
		if c.Fit.Fits && adv.ModelRecorded.Fit.Fits {
			e.SavedBytes = int64(adv.ModelRecorded.Fit.MinCapacityBytes) - int64(c.Fit.MinCapacityBytes)
		}
		adv.Effects = append(adv.Effects, e)
	}
	return adv, nil
}

// better reports whether a needs a smaller device than b, or as small a
// one and a smaller peak without a limit.
func better(a, b *Candidate) bool {
	switch {
	case a.Fit.Fits != b.Fit.Fits:
		return a.Fit.Fits
	case !a.Fit.Fits:
		return false
	case a.Fit.MinCapacityBytes != b.Fit.MinCapacityBytes:
		return a.Fit.MinCapacityBytes < b.Fit.MinCapacityBytes
	}
	return a.PeakReservedBytes < b.PeakReservedBytes
}

// AdviseStart is where Advise starts for spec on a trace whose header gave
// setup: the settings it may change (those spec leaves free) and the value
// each advised setting was recorded with.
func AdviseStart(setup sim.Setup, spec sim.AllocatorSpec) (free []Setting, recorded map[string]string, err error) {
	if u := setup.Recorded.Options["unmodelled"]; u != "" && setup.Recorded.Allocator == spec.Name {
		return nil, nil, fmt.Errorf("the recording's allocator ran with settings bfcsim does not model (%s): advice from the model would not hold for it", u)
	}
	settings, ok := advisedSettings(setup, spec.Name)
	if !ok {
		return nil, nil, fmt.Errorf("advise has no settings to try for %s (it advises %s)", spec.Name, strings.Join(slices.Sorted(maps.Keys(AdvisedSettings)), ", "))
	}
	for _, s := range settings {
		if _, set := spec.Options[s.Key]; !set {
			free = append(free, s)
		}
	}
	recorded, err = recordedValues(setup, spec, settings)
	return free, recorded, err
}

// A Change is the settings with one of them changed.
type Change struct {
	// Key is the setting changed.
	Key      string
	Settings map[string]string
}

// Changes lists the settings one change away from current: each free
// setting at each other value it can take, where it makes a difference.
func Changes(free []Setting, current map[string]string) []Change {
	var out []Change
	for _, s := range free {
		if s.Needs != "" && current[s.Needs] == s.NeedsNot {
			continue // it changes nothing here
		}
		for _, v := range s.Values {
			if v == current[s.Key] {
				continue
			}
			vals := maps.Clone(current)
			vals[s.Key] = v
			out = append(out, Change{Key: s.Key, Settings: vals})
		}
	}
	return out
}

// recordedValues returns the value of each setting the trace was recorded
// with: spec's, else the recording's, else the default, each as the
// allocator reads it back (its effective options).
func recordedValues(setup sim.Setup, spec sim.AllocatorSpec, settings []Setting) (map[string]string, error) {
	f, err := allocators.Lookup(spec.Name)
	if err != nil {
		return nil, err
	}
	opts := allocators.Options{}
	if setup.Recorded.Allocator == spec.Name {
		for k, v := range setup.Recorded.Options {
			if slices.ContainsFunc(f.Options, func(o allocators.Option) bool { return o.Key == k }) {
				opts[k] = v
			}
		}
	}
	maps.Copy(opts, spec.Options)
	sp := allocators.NewVirtualSpace(setup.Capacity(0), allocators.CostModel{}, allocators.Paged)
	_, eff, err := f.New(sp, opts)
	if err != nil {
		return nil, err
	}
	vals := map[string]string{}
	for _, s := range settings {
		v := fmt.Sprint(eff[s.Key])
		if !slices.Contains(s.Values, v) {
			// A value the search does not list (a recording's own):
			// tried as it is.
			s.Values = append(s.Values, v)
		}
		vals[s.Key] = v
	}
	return vals, nil
}

// followsDecisions reports whether the trace carries segment decisions
// the allocator would follow: then the recorded settings replay as the
// recording ran, and differ from the model's own decisions.
func (t *Trace) followsDecisions(name string) bool {
	f, err := allocators.Lookup(name)
	if err != nil || !slices.ContainsFunc(f.Options, func(o allocators.Option) bool { return o.Key == "segments" }) {
		return false // it has no recorded decisions to follow (bfc)
	}
	for _, r := range t.Unlimited {
		if r.Allocator == name && r.Decisions != nil && r.Decisions.Outcome != "model" {
			return true
		}
	}
	return t.Setup.Recorded.Allocator == name
}

// canonical writes settings as KEY=VALUE, sorted.
func canonical(vals map[string]string) string {
	keys := slices.Sorted(maps.Keys(vals))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + vals[k]
	}
	return strings.Join(parts, " ")
}

// Env returns the shell line that sets an allocator's settings as its
// reference reads them: PYTORCH_CUDA_ALLOC_CONF for pytorch, TensorFlow's
// variables for bfc. Settings at their default are left out; with none
// left it says to leave the variable unset.
func Env(allocator string, settings map[string]string) string {
	switch allocator {
	case "pytorch":
		defaults := map[string]string{"expandable_segments": "false", "max_split_size_mb": "unlimited",
			"roundup_power2_divisions": "0", "garbage_collection_threshold": "0", "max_non_split_rounding_mb": "20"}
		var parts []string
		for _, s := range AdvisedSettings["pytorch"] {
			v, ok := settings[s.Key]
			if !ok || v == defaults[s.Key] {
				continue
			}
			if s.Key == "expandable_segments" {
				v = "True"
			}
			parts = append(parts, s.Key+":"+v)
		}
		if len(parts) == 0 {
			return "unset PYTORCH_CUDA_ALLOC_CONF"
		}
		return "export PYTORCH_CUDA_ALLOC_CONF=" + strings.Join(parts, ",")
	case "bfc":
		var parts []string
		if v, ok := settings["allow_growth"]; ok {
			parts = append(parts, "TF_FORCE_GPU_ALLOW_GROWTH="+v)
		}
		if v, ok := settings["garbage_collection"]; ok {
			parts = append(parts, "TF_ENABLE_GPU_GARBAGE_COLLECTION="+v)
		}
		return "export " + strings.Join(parts, " ")
	}
	return ""
}
