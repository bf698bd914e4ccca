package search

// Sweeps: every trace at every point of a grid of option values, split
// into jobs that shards of the sweep run on different machines.
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
//
// The report of a sweep, and the merging of its shards' reports, are
// report's (report.Sweep, report.MergeSweeps).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/sim"
)

// Grid describes a sweep: what every one of its shards replays.
type Grid struct {
	// Paths are the traces, in the order given.
	Paths []string `json:"paths"`
	// Allocators are replayed at every point, in report order.
	Allocators []string `json:"allocators"`
	// Axes are the grid's axes, in the order given.
	Axes []Axis `json:"axes"`
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

// Axis is one axis of a sweep's grid.
type Axis struct {
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

// ParseAxis parses one grid axis, NAME.KEY=V1,V2,...: an option and
// its values. It checks the form only; whether NAME and KEY exist and the
// values are good is the allocators' to say.
func ParseAxis(s string) (Axis, error) {
	name, list, ok := strings.Cut(s, "=")
	alloc, key, ok2 := strings.Cut(name, ".")
	if !ok || !ok2 || alloc == "" || key == "" {
		return Axis{}, fmt.Errorf("%q: want NAME.KEY=V1,V2,..., e.g. bfc.allow_growth=true,false", s)
	}
	if list == "" {
		return Axis{}, fmt.Errorf("%q: no values after '='", s)
	}
	ax := Axis{Name: name, Values: strings.Split(list, ",")}
	for i, v := range ax.Values {
		if v == "" {
			return Axis{}, fmt.Errorf("%q: value %d is empty", s, i+1)
		}
		if slices.Contains(ax.Values[:i], v) {
			return Axis{}, fmt.Errorf("%q: %s is listed twice", s, v)
		}
	}
	return ax, nil
}

// AddAxis parses the axis s (ParseAxis) and adds it to the grid: it must
// name the space or an allocator (one of replayed, when given says they
// were named; any other joins them), have no axis yet, and not be set by
// the grid's Sets too.
func (s *Grid) AddAxis(spec string, replayed []string, given bool) error {
	ax, err := ParseAxis(spec)
	if err != nil {
		return err
	}
	name, _, _ := strings.Cut(ax.Name, ".")
	if name != "space" {
		if _, err := allocators.Lookup(name); err != nil {
			return fmt.Errorf("%s: %w", spec, err)
		}
		if given && !slices.Contains(replayed, name) {
			return fmt.Errorf("%s: %s is not being replayed (-a %s)", spec, name, strings.Join(replayed, ","))
		}
	}
	if slices.ContainsFunc(s.Axes, func(a Axis) bool { return a.Name == ax.Name }) {
		return fmt.Errorf("%s: %s has two axes; list its values in one --grid", spec, ax.Name)
	}
	for _, set := range s.Sets {
		if key, _, _ := strings.Cut(set, "="); key == ax.Name {
			return fmt.Errorf("%s: %s is also set by --set %s; give it one way", spec, ax.Name, set)
		}
	}
	s.Axes = append(s.Axes, ax)
	return nil
}

// Points returns the number of points of the grid: the product of the
// axes' lengths, 1 for no axes.
func (s *Grid) Points() int {
	n := 1
	for _, ax := range s.Axes {
		n *= len(ax.Values)
	}
	return n
}

// PointValues returns the value of each axis at point p, in axis order.
func (s *Grid) PointValues(p int) []string {
	vals := make([]string, len(s.Axes))
	for i := len(s.Axes) - 1; i >= 0; i-- {
		n := len(s.Axes[i].Values)
		vals[i] = s.Axes[i].Values[p%n]
		p /= n
	}
	return vals
}

// Point returns point p's option values by axis name.
func (s *Grid) Point(p int) map[string]string {
	m := make(map[string]string, len(s.Axes))
	for i, v := range s.PointValues(p) {
		m[s.Axes[i].Name] = v
	}
	return m
}

// PointSets returns point p as options, NAME.KEY=VALUE in axis order, as
// --set takes them.
func (s *Grid) PointSets(p int) []string {
	vals := s.PointValues(p)
	sets := make([]string, len(vals))
	for i, v := range vals {
		sets[i] = s.Axes[i].Name + "=" + v
	}
	return sets
}

// PointLabel writes a point's options in axis order, "bfc.allow_growth=false
// bfc.fragmentation_fraction=0", or "(no grid)" for a grid of no axes.
func (s *Grid) PointLabel(point map[string]string) string {
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
func (s *Grid) JobOf(k int) (trace, point int) {
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

// JobSet returns the jobs a report says it holds: its shard's, or every
// job but the missing ones.
func (s *Grid) JobSet() []int {
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

// Differ says how two reports' sweeps differ, or "" when they are the
// same sweep (shards and missing jobs aside).
func Differ(a, b *Grid) string {
	axes := func(s *Grid) string {
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
	flags := func(s *Grid) string {
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
	capacity := func(s *Grid) string {
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

// CheckSpecs builds each allocator of specs, with its options, over a
// scratch virtual space, as a replay will build it, so that a bad option
// value is refused before any job runs. The error names the allocator.
func CheckSpecs(specs []sim.AllocatorSpec) error {
	for _, s := range specs {
		// A virtual space of the largest capacity costs nothing and fits
		// any up-front reservation.
		sp, err := allocators.NewSpace(allocators.SpaceConfig{Kind: "virtual", Capacity: allocators.MaxCapacity})
		if err != nil {
			return err
		}
		if _, _, err := allocators.New(s.Name, sp, s.Options); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
	}
	return nil
}

// RunJobs runs run for each of jobs on workers goroutines, in job order as
// workers free up. The first job to fail, in job order, cancels the rest,
// and its error is returned; a job that fails because another's failure
// cancelled it does not count. done, if set, is called after each job
// that succeeds.
func RunJobs(parent context.Context, jobs []int, workers int, run func(ctx context.Context, k int) error, done func()) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(max(workers, 1), len(jobs)) {
		wg.Go(func() {
			for i := range next {
				if ctx.Err() != nil {
					errs[i] = ctx.Err()
					continue
				}
				if errs[i] = run(ctx, jobs[i]); errs[i] != nil {
					cancel()
					continue
				}
				if done != nil {
					done()
				}
			}
		})
	}
feed:
	for i := range jobs {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	if err := parent.Err(); err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
