package report

// Sweeps: one report for a grid of option values × traces × allocators.
//
// A sweep replays every trace at every point of a grid of allocator or
// space options (search.Grid: its points, its jobs and its shards), and may
// be split into shards that run on different machines and are merged
// afterwards:
//
//  1. A sweep report is a report.json (docs/metrics.md) with a "sweep" key that
//     describes the sweep (its traces, allocators, axes, other options, the
//     number of jobs and, for a shard, which jobs it ran), and one "traces"
//     entry per job, in job order, each with the usual keys plus "job" and
//     "point" (the option values of its grid point).
//  2. MergeSweeps joins the reports of the shards of one sweep into the
//     report the whole sweep, run at once, would have written. It checks
//     that the reports describe the same sweep and that every job is there
//     exactly once.
//
// Results are placed by job number, never by the order in which jobs
// finish, so a report is the same whatever the parallelism or sharding,
// apart from the wall-clock timing fields (SweepWithoutTimings).

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/bfcsim/bfcsim/search"
)

// Sweep is the report of a sweep, or of one shard of it: report.json with
// a "sweep" key and a "job" and "point" on each trace.
type Sweep struct {
	Version int         `json:"bfcsim_report"`
	Sweep   search.Grid `json:"sweep"`
	// Traces are the jobs this report holds, in job order.
	Traces []SweepTrace `json:"traces"`
}

// SweepTrace is one job of a sweep: a trace replayed at one grid point.
// Its JSON is a report.json trace with "job" and "point" added.
type SweepTrace struct {
	Job int `json:"job"`
	// Point maps each axis's name to its value at this job's point.
	Point map[string]string `json:"point"`
	Trace
}

// NewSweepTrace makes job k's entry of a sweep report from its replay's
// trace report (Build's, of one TraceRun).
func NewSweepTrace(info *search.Grid, k int, tr Trace) SweepTrace {
	_, p := info.JobOf(k)
	return SweepTrace{Job: k, Point: info.Point(p), Trace: tr}
}

// SweepWithoutTimings returns a copy of s whose wall-clock measurements
// are zero, as WithoutTimings does for a report: the part of a sweep report
// that is the same from run to run, whatever the parallelism or sharding.
func SweepWithoutTimings(s Sweep) Sweep {
	out := s
	rep := Report{Traces: make([]Trace, len(s.Traces))}
	for i := range s.Traces {
		rep.Traces[i] = s.Traces[i].Trace
	}
	rep = WithoutTimings(rep)
	out.Traces = make([]SweepTrace, len(s.Traces))
	for i := range s.Traces {
		out.Traces[i] = s.Traces[i]
		out.Traces[i].Trace = rep.Traces[i]
	}
	return out
}

// MergeSweeps joins the reports of shards of one sweep, named by names in
// errors, into one report: the report of the whole sweep, with no shard,
// its jobs in order. It refuses reports of different sweeps, a shard given
// twice, shards of different splits, a job in two reports, a report that
// lacks jobs of its own shard, and, unless allowPartial, a sweep with jobs
// missing; a partial merge lists them in "missing_jobs". A report may itself
// be a merge, partial or not.
func MergeSweeps(parts []Sweep, names []string, allowPartial bool) (Sweep, error) {
	if len(parts) == 0 {
		return Sweep{}, fmt.Errorf("no reports to merge")
	}
	ref := &parts[0].Sweep
	for i := range parts {
		p := &parts[i]
		if p.Version != Version {
			return Sweep{}, fmt.Errorf("%s is a version %d report, and this bfcsim reads version %d", names[i], p.Version, Version)
		}
		if p.Sweep.Jobs != len(p.Sweep.Paths)*p.Sweep.Points() {
			return Sweep{}, fmt.Errorf("%s: %d jobs, but %d traces × %d grid points", names[i],
				p.Sweep.Jobs, len(p.Sweep.Paths), p.Sweep.Points())
		}
		if why := search.Differ(ref, &p.Sweep); why != "" {
			return Sweep{}, fmt.Errorf("%s and %s are not parts of one sweep: %s", names[0], names[i], why)
		}
	}
	total := ref.Jobs
	owner := make([]int, total) // the part that holds each job, or -1
	at := make([]int, total)    // and where in its Traces
	for k := range owner {
		owner[k] = -1
	}
	shardOf := map[[2]int]int{} // (index, count) → part
	split := -1                 // a part that is a shard, for the count
	for i := range parts {
		info := &parts[i].Sweep
		if sh := info.Shard; sh != nil {
			if sh.Count < 1 || sh.Index < 1 || sh.Index > sh.Count {
				return Sweep{}, fmt.Errorf("%s: shard %d/%d is not one", names[i], sh.Index, sh.Count)
			}
			if !slices.Equal(sh.Jobs, search.ShardJobs(total, sh.Index, sh.Count)) {
				return Sweep{}, fmt.Errorf("%s: the jobs of shard %d/%d are not those it lists", names[i], sh.Index, sh.Count)
			}
			if j, dup := shardOf[[2]int{sh.Index, sh.Count}]; dup {
				return Sweep{}, fmt.Errorf("shard %d/%d is given twice: %s and %s", sh.Index, sh.Count, names[j], names[i])
			}
			shardOf[[2]int{sh.Index, sh.Count}] = i
			if split >= 0 && parts[split].Sweep.Shard.Count != sh.Count {
				return Sweep{}, fmt.Errorf("%s is shard %d/%d and %s shard %d/%d: the shards of one sweep split it alike (one n in --shard i/n)",
					names[split], parts[split].Sweep.Shard.Index, parts[split].Sweep.Shard.Count, names[i], sh.Index, sh.Count)
			}
			split = i
		}
		want := info.JobSet()
		got := make([]int, 0, len(parts[i].Traces))
		for j := range parts[i].Traces {
			tr := &parts[i].Traces[j]
			k := tr.Job
			if k < 0 || k >= total {
				return Sweep{}, fmt.Errorf("%s: job %d is not one of the sweep's %d", names[i], k, total)
			}
			t, p := ref.JobOf(k)
			if tr.Path != ref.Paths[t] || !maps.Equal(tr.Point, ref.Point(p)) {
				return Sweep{}, fmt.Errorf("%s: job %d is %s at %s, not %s at %s", names[i], k,
					tr.Path, ref.PointLabel(tr.Point), ref.Paths[t], ref.PointLabel(ref.Point(p)))
			}
			if o := owner[k]; o >= 0 {
				if o == i {
					return Sweep{}, fmt.Errorf("%s holds job %d twice", names[i], k)
				}
				return Sweep{}, fmt.Errorf("job %d (%s at %s) is in both %s and %s", k, tr.Path, ref.PointLabel(tr.Point), names[o], names[i])
			}
			owner[k], at[k] = i, j
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return Sweep{}, fmt.Errorf("%s holds %d jobs, not the %d it should (%s): an incomplete report?",
				names[i], len(got), len(want), describeJobs(info))
		}
	}
	var missing []int
	for k, o := range owner {
		if o < 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 && !allowPartial {
		verb := "are"
		if len(missing) == 1 {
			verb = "is"
		}
		return Sweep{}, fmt.Errorf("%d of the sweep's %d jobs %s missing: %s (--allow-partial merges what there is)",
			len(missing), total, verb, missingWhy(missing, parts, split))
	}
	out := Sweep{Version: Version, Sweep: *ref, Traces: make([]SweepTrace, 0, total-len(missing))}
	out.Sweep.Shard, out.Sweep.Missing = nil, missing
	for k, o := range owner {
		if o < 0 {
			continue
		}
		out.Traces = append(out.Traces, parts[o].Traces[at[k]])
	}
	return out, nil
}

// describeJobs says which jobs a report should hold: "shard 2/3", "all 12
// jobs", "12 jobs but 3 missing".
func describeJobs(s *search.Grid) string {
	switch {
	case s.Shard != nil:
		return fmt.Sprintf("shard %d/%d", s.Shard.Index, s.Shard.Count)
	case len(s.Missing) > 0:
		return fmt.Sprintf("%d jobs, %d missing", s.Jobs, len(s.Missing))
	}
	return fmt.Sprintf("all %d jobs", s.Jobs)
}

// missingWhy says which shards missing jobs belong to, when the reports
// are shards and whole shards are missing, else which jobs: "shards 2/3
// and 3/3 not given", "jobs 1, 4, 7".
func missingWhy(missing []int, parts []Sweep, split int) string {
	if split >= 0 {
		n := parts[split].Sweep.Shard.Count
		total := parts[split].Sweep.Jobs
		var shards []string
		whole := true
		for i := 1; i <= n; i++ {
			jobs := search.ShardJobs(total, i, n)
			in := 0
			for _, k := range jobs {
				if slices.Contains(missing, k) {
					in++
				}
			}
			switch {
			case in > 0 && in == len(jobs):
				shards = append(shards, fmt.Sprintf("%d/%d", i, n))
			case in > 0:
				whole = false
			}
		}
		if whole && len(shards) > 0 {
			return pluralWord(len(shards), "shard") + " " + joinAnd(shards) + " not given"
		}
	}
	const show = 10
	list := make([]string, 0, show)
	for _, k := range missing[:min(show, len(missing))] {
		list = append(list, strconv.Itoa(k))
	}
	s := pluralWord(len(missing), "job") + " " + strings.Join(list, ", ")
	if len(missing) > show {
		s += fmt.Sprintf(" and %d more", len(missing)-show)
	}
	return s
}

// pluralWord writes noun for one and nouns for more, without the count.
func pluralWord(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// joinAnd writes "a", "a and b", "a, b and c".
func joinAnd(items []string) string {
	if len(items) <= 1 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
