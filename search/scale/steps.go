package scale

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/bfcsim/bfcsim/trace"
)

// Step is one recorded step: the events [Start, End) of the recording.
type Step struct {
	Start, End int
	// Allocs are the indexes, in Events, of the step's allocations.
	Allocs []int
}

// FindSteps finds n steps in rec. A step begins at an allocation of a
// call site that allocates exactly n times in the recording, once in each
// step: among such sites, those whose allocations take turns with one
// another's are a step's, and the one that comes first begins it. start,
// when not empty, names that call site instead (an allocation's tag, or a
// frame of its stack, as "forward (model.py:42)" or a part of it). The last
// step is as long as the longest other and a quarter more at most: what
// follows (an evaluation, the end of the run) is the epilogue, kept as
// recorded.
func FindSteps(rec *Recording, n int, start string) ([]Step, error) {
	if n < 2 {
		return nil, fmt.Errorf("a model of the step needs at least 2 steps, not %d", n)
	}
	// Where each call site allocates, and how many allocations come before
	// each event.
	all := map[site][]int{}
	before := make([]int, len(rec.Events)+1)
	for i := range rec.Events {
		before[i+1] = before[i]
		if e := &rec.Events[i]; e.Op == trace.OpAlloc {
			s := siteOf(e)
			all[s] = append(all[s], i)
			before[i+1]++
		}
	}
	if _, unnamed := all[site{}]; unnamed && len(all) == 1 {
		return nil, fmt.Errorf("the recording names no call site for any allocation (a JAX profiler capture names none): scale finds and matches the steps by call site; record with them (a PyTorch snapshot, or tags in a trace)")
	}
	occ := map[site][]int{}
	for s, at := range all {
		if len(at) == n {
			occ[s] = at
		}
	}
	if start != "" {
		var match []site
		for s := range occ {
			if strings.Contains(rec.siteName(s), start) {
				match = append(match, s)
			}
		}
		if len(match) == 0 {
			return nil, fmt.Errorf("no call site named %q allocates exactly once in each of the %d steps", start, n)
		}
		slices.SortFunc(match, func(a, b site) int { return occ[a][0] - occ[b][0] })
		return rec.stepsAt(occ[match[0]]), nil
	}
	// A step's sites cut the recording into steps that hold most of its
	// allocations, none of them far fewer than the others.
	sites := make([]site, 0, len(occ))
	for s, at := range occ {
		if plausible(at, before) {
			sites = append(sites, s)
		}
	}
	if len(sites) == 0 {
		msg := fmt.Sprintf("no call site allocates exactly %d times, once in each of %d steps that hold most of the recording's allocations: the recording does not hold %d steps of one pattern", n, n, n)
		if counts := stepCounts(all, before); len(counts) > 0 {
			msg += fmt.Sprintf(" (it holds steps for --steps with %s values)", counts)
		} else {
			msg += " (check --steps, or name the step's first call site with --step-start)"
		}
		return nil, errors.New(msg)
	}
	slices.SortFunc(sites, func(a, b site) int { return occ[a][0] - occ[b][0] })
	// The earliest sites are enough to tell the step's: comparing every
	// pair of thousands would cost more than the rest.
	const maxSites = 256
	sites = sites[:min(len(sites), maxSites)]
	// The sites of the step take turns: a's k-th allocation comes before
	// b's k-th, which comes before a's k+1-th.
	turns := func(a, b []int) bool {
		for k := range a {
			if a[k] > b[k] || (k+1 < len(a) && b[k] > a[k+1]) {
				return false
			}
		}
		return true
	}
	best, bestScore := -1, -1
	for i, a := range sites {
		score := 0
		for j, b := range sites {
			if i != j && (turns(occ[a], occ[b]) || turns(occ[b], occ[a])) {
				score++
			}
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	// Of the sites that take turns with the best one, the first begins the
	// step.
	first := sites[best]
	for _, s := range sites {
		if s != first && turns(occ[s], occ[first]) {
			first = s
			break
		}
	}
	return rec.stepsAt(occ[first]), nil
}

// stepCounts lists the numbers of steps, up to 64, that some call site
// cuts the recording into plausibly: "4, 8 or 12".
func stepCounts(all map[site][]int, before []int) string {
	seen := map[int]bool{}
	for _, at := range all {
		if len(at) >= 2 && len(at) <= 64 && !seen[len(at)] && plausible(at, before) {
			seen[len(at)] = true
		}
	}
	counts := slices.Sorted(maps.Keys(seen))
	words := make([]string, len(counts))
	for i, c := range counts {
		words[i] = strconv.Itoa(c)
	}
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// plausible says whether steps beginning at the events starts hold at
// least half of the recording's allocations, each at least a quarter of
// their mean. before[i] counts the allocations before event i.
func plausible(starts []int, before []int) bool {
	total, least := 0, -1
	end := len(before) - 1
	longest := 0
	for k := range starts[:len(starts)-1] {
		longest = max(longest, starts[k+1]-starts[k])
	}
	for k, s := range starts {
		e := end
		if k+1 < len(starts) {
			e = starts[k+1]
		} else {
			e = min(e, s+longest+longest/4) // as stepsAt ends the last
		}
		n := before[e] - before[s]
		total += n
		if least < 0 || n < least {
			least = n
		}
	}
	return 2*total >= before[end] && 4*least*len(starts) >= total
}

// stepsAt cuts the recording into steps that begin at the events starts.
func (rec *Recording) stepsAt(starts []int) []Step {
	steps := make([]Step, len(starts))
	for k, s := range starts {
		end := len(rec.Events)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		steps[k] = Step{Start: s, End: end}
	}
	// The last step ends as long as the others do, at most: what follows
	// is the epilogue.
	last := &steps[len(steps)-1]
	longest := 0
	for _, s := range steps[:len(steps)-1] {
		longest = max(longest, s.End-s.Start)
	}
	if last.End-last.Start > longest+longest/4 {
		last.End = last.Start + longest + longest/4
	}
	for k := range steps {
		for i := steps[k].Start; i < steps[k].End; i++ {
			if rec.Events[i].Op == trace.OpAlloc {
				steps[k].Allocs = append(steps[k].Allocs, i)
			}
		}
	}
	return steps
}

// siteName is the call site's name for --step-start: the tag, and the
// stack's frames.
func (rec *Recording) siteName(s site) string {
	if s.stack == 0 {
		return s.tag
	}
	var b strings.Builder
	for _, f := range rec.Stacks.Frames(s.stack) {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return b.String()
}
