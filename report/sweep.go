package report

// Sweeps: one report for a grid of option values × traces × allocators.
//
// A sweep replays every trace at every point of a grid of allocator or
// space options, and may be split into shards that run on different
// machines and are merged afterwards:
//
//  1. The grid is the cartesian product of its axes, each an option
//     (NAME.KEY, as --set names it) with a list of values. Points are
//     numbered in row-major order of the axes as given: the last axis
//     varies fastest. A grid of no axes has one point, with no options.
//  2. A job is one trace at one point: job k replays trace k / P at point
//     k mod P, P being the number of points. Jobs are numbered 0 to
//     len(paths)·P − 1, so every machine numbers them alike.
//  3. Shard i of n (1 ≤ i ≤ n) runs the jobs k with k mod n = i − 1: a
//     round robin, so that each shard gets a share of every trace.
//  4. A sweep report is a report.json (docs/metrics.md) with a "sweep" key that
//     describes the sweep (its traces, allocators, axes, other options, the
//     number of jobs and, for a shard, which jobs it ran), and one "traces"
//     entry per job, in job order, each with the usual keys plus "job" and
//     "point" (the option values of its grid point).
//  5. MergeSweeps joins the reports of the shards of one sweep into the
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
)

// Sweep is the report of a sweep, or of one shard of it: report.json with
// a "sweep" key and a "job" and "point" on each trace.
type Sweep struct {
	Version int       `json:"bfcsim_report"`
	Sweep   SweepInfo `json:"sweep"`
	// Traces are the jobs this report holds, in job order.
	Traces []SweepTrace `json:"traces"`
}

// SweepInfo describes a sweep: what every one of its shards replays.
type SweepInfo struct {
	// Paths are the traces, in the order given.
	Paths []string `json:"paths"`
	// Allocators are replayed at every point, in report order.
	Allocators []string `json:"allocators"`
	// Axes are the grid's axes, in the order given.
	Axes []SweepAxis `json:"axes"`
	// Sets are the options every point shares (--set NAME.KEY=VALUE).
	Sets []string `json:"sets"`
	// Capacity is --capacity as given; "" is each trace header's, else 80GiB.
	Capacity    string `json:"capacity,omitempty"`
	Space       string `json:"space"`
	Touch       bool   `json:"touch,omitempty"`
	SkipInvalid bool   `json:"skip_invalid,omitempty"`
	StopOnOOM   bool   `json:"stop_on_oom,omitempty"`
	Check       bool   `json:"check,omitempty"`
	// Jobs is the number of jobs of the whole sweep: len(Paths) × points.
	Jobs int `json:"jobs"`
	// Shard says which part of the sweep a shard's report holds; nil for a
	// whole sweep, or shards merged.
	Shard *Shard `json:"shard,omitempty"`
	// Missing lists the jobs a partial merge lacks (merge --allow-partial).
	Missing []int `json:"missing_jobs,omitempty"`
}

// SweepAxis is one axis of a sweep's grid.
type SweepAxis struct {
	// Name is the option, NAME.KEY: "bfc.allow_growth", "space.reserve_cost".
	Name string `json:"name"`
	// Values are the option's values, as text, in the order given.
	Values []string `json:"values"`
}

// Shard is one slice of a sweep's jobs.
type Shard struct {
	Index int `json:"index"` // 1 to Count
	Count int `json:"count"`
	// Jobs are the jobs of the shard, ascending: ShardJobs(jobs, Index, Count).
	Jobs []int `json:"jobs"`
}

// SweepTrace is one job of a sweep: a trace replayed at one grid point.
// Its JSON is a report.json trace with "job" and "point" added.
type SweepTrace struct {
	Job int `json:"job"`
	// Point maps each axis's name to its value at this job's point.
	Point map[string]string `json:"point"`
	Trace
}

// ParseSweepAxis parses one grid axis, NAME.KEY=V1,V2,...: an option and
// its values. It checks the form only; whether NAME and KEY exist and the
// values are good is the allocators' to say.
func ParseSweepAxis(s string) (SweepAxis, error) {
	name, list, ok := strings.Cut(s, "=")
	alloc, key, ok2 := strings.Cut(name, ".")
	if !ok || !ok2 || alloc == "" || key == "" {
		return SweepAxis{}, fmt.Errorf("%q: want NAME.KEY=V1,V2,..., e.g. bfc.allow_growth=true,false", s)
	}
	if list == "" {
		return SweepAxis{}, fmt.Errorf("%q: no values after '='", s)
	}
	ax := SweepAxis{Name: name, Values: strings.Split(list, ",")}
	for i, v := range ax.Values {
		if v == "" {
			return SweepAxis{}, fmt.Errorf("%q: value %d is empty", s, i+1)
		}
		if slices.Contains(ax.Values[:i], v) {
			return SweepAxis{}, fmt.Errorf("%q: %s is listed twice", s, v)
		}
	}
	return ax, nil
}

// Points returns the number of points of the grid: the product of the
// axes' lengths, 1 for no axes.
func (s *SweepInfo) Points() int {
	n := 1
	for _, ax := range s.Axes {
		n *= len(ax.Values)
	}
	return n
}

// pointValues returns the value of each axis at point p, in axis order.
func (s *SweepInfo) pointValues(p int) []string {
	vals := make([]string, len(s.Axes))
	for i := len(s.Axes) - 1; i >= 0; i-- {
		n := len(s.Axes[i].Values)
		vals[i] = s.Axes[i].Values[p%n]
		p /= n
	}
	return vals
}

// Point returns point p's option values by axis name.
func (s *SweepInfo) Point(p int) map[string]string {
	m := make(map[string]string, len(s.Axes))
	for i, v := range s.pointValues(p) {
		m[s.Axes[i].Name] = v
	}
	return m
}

// PointSets returns point p as options, NAME.KEY=VALUE in axis order, as
// --set takes them.
func (s *SweepInfo) PointSets(p int) []string {
	vals := s.pointValues(p)
	sets := make([]string, len(vals))
	for i, v := range vals {
		sets[i] = s.Axes[i].Name + "=" + v
	}
	return sets
}

// PointLabel writes a point's options in axis order, "bfc.allow_growth=false
// bfc.fragmentation_fraction=0", or "(no grid)" for a grid of no axes.
func (s *SweepInfo) PointLabel(point map[string]string) string {
	if len(s.Axes) == 0 {
		return "(no grid)"
	}
	parts := make([]string, len(s.Axes))
	for i, ax := range s.Axes {
		parts[i] = ax.Name + "=" + point[ax.Name]
	}
	return strings.Join(parts, " ")
}

// JobOf returns the trace (an index into Paths) and point job k replays.
func (s *SweepInfo) JobOf(k int) (trace, point int) {
	p := s.Points()
	return k / p, k % p
}

// ParseShard parses --shard i/n, 1 ≤ i ≤ n.
func ParseShard(s string) (index, count int, err error) {
	a, b, ok := strings.Cut(s, "/")
	i, errI := strconv.Atoi(a)
	n, errN := strconv.Atoi(b)
	if !ok || errI != nil || errN != nil {
		return 0, 0, fmt.Errorf("%q: want i/n, shard i of n, e.g. 1/4", s)
	}
	if n < 1 || i < 1 || i > n {
		return 0, 0, fmt.Errorf("%q: want i/n with 1 ≤ i ≤ n", s)
	}
	return i, n, nil
}

// ShardJobs returns the jobs of shard index of count, of a sweep of total
// jobs: those k with k mod count = index − 1, ascending. It is never nil.
func ShardJobs(total, index, count int) []int {
	jobs := []int{}
	for k := index - 1; k < total; k += count {
		jobs = append(jobs, k)
	}
	return jobs
}

// NewSweepTrace makes job k's entry of a sweep report from its replay's
// trace report (Build's, of one TraceRun).
func NewSweepTrace(info *SweepInfo, k int, tr Trace) SweepTrace {
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

// jobSet returns the jobs a report says it holds: its shard's, or every
// job but the missing ones.
func (s *SweepInfo) jobSet() []int {
	if s.Shard != nil {
		return s.Shard.Jobs
	}
	var jobs []int
	for k := range s.Jobs {
		if !slices.Contains(s.Missing, k) {
			jobs = append(jobs, k)
		}
	}
	return jobs
}

// sameSweep says how two reports' sweeps differ, or "" when they are the
// same sweep (shards and missing jobs aside).
func sameSweep(a, b *SweepInfo) string {
	axes := func(s *SweepInfo) string {
		if len(s.Axes) == 0 {
			return "none"
		}
		parts := make([]string, len(s.Axes))
		for i, ax := range s.Axes {
			parts[i] = ax.Name + "=" + strings.Join(ax.Values, ",")
		}
		return strings.Join(parts, " ")
	}
	list := func(l []string) string {
		if len(l) == 0 {
			return "none"
		}
		return strings.Join(l, " ")
	}
	flags := func(s *SweepInfo) string {
		var f []string
		for _, x := range []struct {
			on   bool
			flag string
		}{{s.Touch, "--touch"}, {s.SkipInvalid, "--skip-invalid"}, {s.StopOnOOM, "--stop-on-oom"}, {s.Check, "--check"}} {
			if x.on {
				f = append(f, x.flag)
			}
		}
		return list(f)
	}
	capacity := func(s *SweepInfo) string {
		if s.Capacity == "" {
			return "the traces'"
		}
		return s.Capacity
	}
	for _, d := range []struct{ what, a, b string }{
		{"traces", list(a.Paths), list(b.Paths)},
		{"allocators", list(a.Allocators), list(b.Allocators)},
		{"grids", axes(a), axes(b)},
		{"--set options", list(a.Sets), list(b.Sets)},
		{"capacities", capacity(a), capacity(b)},
		{"spaces", a.Space, b.Space},
		{"flags", flags(a), flags(b)},
		{"job counts", strconv.Itoa(a.Jobs), strconv.Itoa(b.Jobs)},
	} {
		if d.a != d.b {
			return fmt.Sprintf("the %s differ (%s, and %s)", d.what, d.a, d.b)
		}
	}
	return ""
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
		if why := sameSweep(ref, &p.Sweep); why != "" {
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
			if !slices.Equal(sh.Jobs, ShardJobs(total, sh.Index, sh.Count)) {
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
		want := info.jobSet()
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
func describeJobs(s *SweepInfo) string {
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
			jobs := ShardJobs(total, i, n)
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
