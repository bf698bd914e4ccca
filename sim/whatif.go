package sim

import (
	"fmt"
	"maps"
	"slices"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/trace"
)

// What-ifs. A recording carries the decisions its allocator made (where
// each segment went, and when), and an allocator that models it can follow
// them (allocators.DecisionFollower) as long as they are the decisions it
// makes itself. With other settings than the recording's, the program
// would have decided otherwise from its first allocation: following the
// recorded decisions then replays the recorded program's choices under
// settings that would not have made them. So:
//
//  1. Settings equal to the recording's, or differing only in what bounds
//     the memory (allocators.Factory.Bounds: a memory limit, a smaller
//     device): the allocator follows the recorded decisions up to the
//     first it does not make itself, or cannot honour, and decides alone
//     from there (its own rule, segments=auto).
//  2. Any other setting that differs from the recording's: the allocator
//     decides alone from the start (segments=model), its start state
//     included, and Result.Decisions names the settings.
//  3. An explicit segments option is the user's choice, and is kept.
//
// Settings are compared by their effective values, so that a value given
// in another spelling, or equal to the default the recording also had,
// is no what-if.

// whatIfOptions returns, as KEY=VALUE, the options of spec that make its
// replay of a recording made with rec a what-if of other settings: those
// whose effective values differ from the recording's own, bounds aside.
// opts are spec's options over the recorded ones (withRecorded).
func whatIfOptions(spec AllocatorSpec, rec trace.RecordedSettings, opts allocators.Options, capacity uint64) ([]string, error) {
	if rec.Allocator != spec.Name {
		return nil, nil
	}
	if _, set := spec.Options["segments"]; set {
		return nil, nil
	}
	f, err := allocators.Lookup(spec.Name)
	if err != nil || !slices.ContainsFunc(f.Options, func(o allocators.Option) bool { return o.Key == "segments" }) {
		return nil, nil
	}
	recorded := allocators.Options{}
	for k, v := range rec.Options {
		if slices.ContainsFunc(f.Options, func(o allocators.Option) bool { return o.Key == k }) {
			recorded[k] = v
		}
	}
	if capacity == 0 {
		capacity = DefaultCapacity
	}
	effective := func(o allocators.Options) (map[string]any, error) {
		sp := allocators.NewVirtualSpace(capacity, allocators.CostModel{}, allocators.Paged)
		_, eff, err := f.New(sp, o)
		return eff, err
	}
	want, err := effective(opts)
	if err != nil {
		return nil, nil // the replay reports it, with where the values came from
	}
	had, err := effective(recorded)
	if err != nil {
		return nil, fmt.Errorf("the recording's own settings: %w", err)
	}
	var diff []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if slices.Contains(f.Bounds, k) {
			continue
		}
		if a, b := fmt.Sprint(want[k]), fmt.Sprint(had[k]); a != b {
			diff = append(diff, fmt.Sprintf("%s=%s where the recording had %s", k, a, b))
		}
	}
	return diff, nil
}

// finishDecisions fills in Result.Decisions from the allocator's account,
// or drops it when the trace recorded no decisions to follow.
func (r *runner) finishDecisions() {
	d := r.result.Decisions
	if d == nil {
		return
	}
	if r.recordedCalls == 0 && !r.sawStartState {
		r.result.Decisions = nil
		return
	}
	a := r.follower.Decisions()
	d.Mode, d.Followed = a.Mode, a.Followed
	switch {
	case len(d.WhatIf) > 0:
		d.Outcome, d.Reason = "model", "a what-if: "+joinList(d.WhatIf)
	case a.Mode == allocators.PyTorchSegmentsModel:
		d.Outcome, d.Reason = "model", "segments=model"
	case a.Mode == allocators.PyTorchSegmentsRecorded:
		d.Outcome = "adopted"
	case a.Diverged:
		d.Outcome, d.Reason = "diverged", a.Reason
	default:
		d.Outcome = "followed"
	}
}

// joinList joins items as "a, b and c".
func joinList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	out := ""
	for i, it := range items[:len(items)-1] {
		if i > 0 {
			out += ", "
		}
		out += it
	}
	return out + " and " + items[len(items)-1]
}
