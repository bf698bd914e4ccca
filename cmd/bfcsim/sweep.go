package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/internal/progress"
	"github.com/bfcsim/bfcsim/internal/textwrap"
	"github.com/bfcsim/bfcsim/report"
	"github.com/bfcsim/bfcsim/search"
	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
)

// sweepOptions are one sweep invocation's flags.
type sweepOptions struct {
	replay replayOptions
	grid   []string
	jobs   int
	shard  string
	format string
	out    string
	metric string
}

func newSweepCmd(e *env) *cobra.Command {
	o := &sweepOptions{}
	cmd := &cobra.Command{
		Use:   "sweep TRACE... --grid NAME.KEY=V1,V2,... [--grid ...] [flags]",
		Short: "Replay traces over a grid of allocator options, in parallel",
		Long: `Replay every trace at every point of a grid of allocator or space options,
against the selected allocators, and report every result in one report.

Each --grid NAME.KEY=V1,V2,... is an axis: an option, as --set names it, and
the values to try. The grid is every combination of the axes' values; with no
--grid it is one point, the options as given. An allocator named by a --grid
joins the default allocators, as with --set, unless -a is given. Every option
value of every point is checked before anything is replayed.

Each trace at each grid point is one job: one replay of the trace against
every allocator. Jobs run in parallel on -j workers. Results are in a fixed
order whatever the parallelism: trace by trace as given, and within a trace
grid point by grid point, the last --grid varying fastest.

--shard i/n runs only every n-th job, starting at the i-th (1 ≤ i ≤ n), so
that n machines (a CI matrix, a Kubernetes Indexed Job, a Slurm array) share
a sweep; 'bfcsim merge' joins their report.json files into the report the
whole sweep would have written. docs/sweeps.md shows how.

The output is a table per trace, one row per grid point and allocator, with
the best row (by --metric, among rows without failed allocations) marked.
With -o DIR, also report.json, report.md and a plot per trace of --metric
against the grid points (PNG and SVG).

Metrics (--metric):
  ` + strings.Join(textwrap.Lines(strings.Join(report.SweepMetrics(), ", ")+".", 76), "\n  "),
		Example: `  bfcsim sweep traces/*.jsonl -a bfc --grid bfc.allow_growth=true,false --grid bfc.fragmentation_fraction=0,0.01
  bfcsim sweep t.jsonl -a pytorch --grid pytorch.max_split_size_mb=64,128,256,unlimited -o out/
  bfcsim sweep t.jsonl --grid bfc.memory_limit=1GiB,2GiB,4GiB --metric failed_allocs -f markdown
  bfcsim sweep traces/*.jsonl --grid arena.chunk=1MiB,4MiB --shard 2/4 -o shard-2/`,
		Args: traceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.replay.allocatorsGiven = cmd.Flags().Changed("allocators")
			return runSweep(cmd, e, o, args)
		},
	}
	o.replay.addFlags(cmd, true)
	f := cmd.Flags()
	f.StringArrayVar(&o.grid, "grid", nil, "a grid axis NAME.KEY=V1,V2,..., repeatable (e.g. bfc.allow_growth=true,false)")
	f.IntVarP(&o.jobs, "jobs", "j", 0, "replays to run at once (default: the number of CPUs)")
	f.StringVar(&o.shard, "shard", "", "run only shard `i/n` of the jobs (1 ≤ i ≤ n): job k belongs to shard (k mod n)+1")
	f.StringVarP(&o.format, "format", "f", "table", "output format: "+strings.Join(report.SweepFormats, ", "))
	f.StringVarP(&o.out, "out", "o", "", "also write report.json, report.md and a plot per trace (PNG and SVG) into this `DIR`")
	f.StringVar(&o.metric, "metric", report.DefaultSweepMetric, "the metric that picks the best row and is plotted")
	_ = cmd.RegisterFlagCompletionFunc("format", fixedCompletion(report.SweepFormats...))
	_ = cmd.RegisterFlagCompletionFunc("metric", fixedCompletion(report.SweepMetrics()...))
	return cmd
}

// sweepPlan is a sweep's checked configuration: the sweep, and the
// allocators and space options of each grid point.
type sweepPlan struct {
	info      search.Grid
	capacity  uint64 // 0: each trace header's, else sim.DefaultCapacity
	specs     [][]sim.AllocatorSpec
	spaceOpts []allocators.Options
	jobs      []int // the jobs to run: all, or the shard's
}

func runSweep(cmd *cobra.Command, e *env, o *sweepOptions, paths []string) error {
	if !slices.Contains(report.SweepFormats, o.format) {
		return fmt.Errorf("unknown format %q (want one of %s)", o.format, strings.Join(report.SweepFormats, ", "))
	}
	if err := report.CheckSweepMetric(o.metric); err != nil {
		return fmt.Errorf("--metric: %w", err)
	}
	if !cmd.Flags().Changed("jobs") {
		o.jobs = runtime.NumCPU()
	}
	if o.jobs < 1 {
		return fmt.Errorf("-j %d: want at least 1 job at a time", o.jobs)
	}
	p, err := o.plan(paths)
	if err != nil {
		return err
	}
	if err := checkOutputs(paths, o.out); err != nil {
		return err
	}
	entries, err := o.run(cmd, e, p)
	if err != nil {
		return err
	}
	sw := report.Sweep{Version: report.Version, Sweep: p.info, Traces: entries}
	if o.out != "" {
		if err := report.WriteSweepDir(cmd.Context(), o.out, sw, o.metric); err != nil {
			return err
		}
	}
	return report.RenderSweep(cmd.OutOrStdout(), sw, o.format, o.metric)
}

// plan checks everything that can be checked before a replay: the grid,
// the shard, every option value of every grid point, and that each trace
// can be opened.
func (o *sweepOptions) plan(paths []string) (*sweepPlan, error) {
	if strings.HasPrefix(o.replay.space, "cuda") {
		return nil, fmt.Errorf("--space %s: sweep runs many replays at once, which would share the GPU's memory; replay one allocator at a time on a GPU instead", o.replay.space)
	}
	for _, path := range paths {
		if path == "-" {
			return nil, fmt.Errorf("sweep reads each trace once per grid point, and - (standard input) can be read only once; save it to a file")
		}
	}
	info := search.Grid{
		Paths: paths, Axes: []search.Axis{}, Sets: append([]string{}, o.replay.sets...),
		Capacity: o.replay.capacity, Space: o.replay.space, Touch: o.replay.touch,
		SkipInvalid: o.replay.skipInvalid, StopOnOOM: o.replay.stopOnOOM, Check: o.replay.check,
	}
	for _, g := range o.grid {
		if err := info.AddAxis(g, o.replay.allocators, o.replay.allocatorsGiven); err != nil {
			return nil, fmt.Errorf("--grid %w", err)
		}
	}
	// The replay's own checks, with each axis at its first value: an
	// allocator named by --grid joins the allocators, as with --set.
	first := slices.Clone(o.replay.sets)
	for _, ax := range info.Axes {
		first = append(first, ax.Name+"="+ax.Values[0])
	}
	o.replay.sets = first
	rp, err := o.replay.plan(paths)
	o.replay.sets = info.Sets
	if err != nil {
		return nil, err
	}
	info.Allocators = slices.Clone(o.replay.allocators)
	points := info.Points()
	info.Jobs = len(paths) * points
	p := &sweepPlan{capacity: rp.capacity}
	for pt := range points {
		specs, spaceOpts, err := o.pointSpecs(&info, pt)
		if err != nil {
			if len(info.Axes) > 0 {
				return nil, fmt.Errorf("grid point %s: %w", info.PointLabel(info.Point(pt)), err)
			}
			return nil, err
		}
		p.specs = append(p.specs, specs)
		p.spaceOpts = append(p.spaceOpts, spaceOpts)
	}
	if o.shard != "" {
		i, n, err := search.ParseShard(o.shard)
		if err != nil {
			return nil, fmt.Errorf("--shard %w", err)
		}
		info.Shard = &search.Shard{Index: i, Count: n, Jobs: search.ShardJobs(info.Jobs, i, n)}
		p.jobs = info.Shard.Jobs
	} else {
		p.jobs = search.ShardJobs(info.Jobs, 1, 1)
	}
	// A missing trace fails now, not after the jobs before it.
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		f.Close()
	}
	p.info = info
	return p, nil
}

// pointSpecs returns the allocators and space options of grid point pt,
// each option value checked by building the allocator over a scratch
// virtual space, as the replay will.
func (o *sweepOptions) pointSpecs(info *search.Grid, pt int) ([]sim.AllocatorSpec, allocators.Options, error) {
	sets := append(slices.Clone(info.Sets), info.PointSets(pt)...)
	per, spaceOpts, err := allocators.ParseSets(sets, info.Allocators)
	if err != nil {
		return nil, nil, err
	}
	if _, err := (allocators.SpaceConfig{Kind: o.replay.space, Capacity: 1, Options: spaceOpts}).Validate(); err != nil {
		return nil, nil, err
	}
	specs := make([]sim.AllocatorSpec, len(info.Allocators))
	for i, name := range info.Allocators {
		specs[i] = sim.AllocatorSpec{Name: name, Options: per[name]}
	}
	if err := search.CheckSpecs(specs); err != nil {
		return nil, nil, err
	}
	return specs, spaceOpts, nil
}

// run replays the plan's jobs on o.jobs workers and returns their entries
// in job order. The first job to fail (in job order) cancels the rest,
// and its error is returned.
func (o *sweepOptions) run(cmd *cobra.Command, e *env, p *sweepPlan) ([]report.SweepTrace, error) {
	// Each job replays as replay does, quietly: the bar counts jobs.
	jobOpts := o.replay
	jobOpts.quiet, jobOpts.out, jobOpts.eventsOut, jobOpts.record = true, "", "", nil
	// The grid's allocators are every job's, a recording's own or not.
	jobOpts.allocatorsGiven = true

	var bar *progressbar.ProgressBar
	if e.progress && !o.replay.quiet {
		bar = progress.Jobs(e.stderr, len(p.jobs))
	}
	entries := make([]report.SweepTrace, len(p.jobs))
	index := make(map[int]int, len(p.jobs)) // job → its place in entries
	for i, k := range p.jobs {
		index[k] = i
	}
	parent := cmd.Context()
	defer cmd.SetContext(parent)
	// Every job gets the same context, which the first failure cancels:
	// replayOne replays under cmd.Context().
	var once sync.Once
	err := search.RunJobs(parent, p.jobs, o.jobs, func(ctx context.Context, k int) error {
		once.Do(func() { cmd.SetContext(ctx) })
		var err error
		entries[index[k]], err = runSweepJob(cmd, e, &jobOpts, p, k)
		return err
	}, func() {
		if bar != nil {
			_ = bar.Add(1)
		}
	})
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		return nil, err
	}
	return entries, nil
}

// runSweepJob replays job k and returns its report entry.
func runSweepJob(cmd *cobra.Command, e *env, o *replayOptions, p *sweepPlan, k int) (report.SweepTrace, error) {
	t, pt := p.info.JobOf(k)
	run, _, err := replayOne(cmd, e, o, p.info.Paths[t], o.recordingDevice, p.specs[pt], p.capacity, p.spaceOpts[pt])
	if err != nil {
		var syntax *trace.SyntaxError
		if len(p.info.Axes) == 0 || errors.As(err, &syntax) || errors.Is(err, context.Canceled) {
			return report.SweepTrace{}, err // the same at every point
		}
		return report.SweepTrace{}, fmt.Errorf("%s at grid point %s: %w", p.info.Paths[t], p.info.PointLabel(p.info.Point(pt)), err)
	}
	tr := report.Build([]report.TraceRun{run}).Traces[0]
	for i := range tr.Results {
		tr.Results[i].Series = nil // nothing is plotted from them; let them go
	}
	return report.NewSweepTrace(&p.info, k, tr), nil
}
