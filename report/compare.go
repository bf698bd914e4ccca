package report

// Comparing a run with a baseline, for CI memory-regression checks.
//
// Compare matches the run's traces with the baseline's and, within each
// trace, results by allocator, then compares a fixed list of metrics:
//
//  1. Traces are matched by name. Where names repeat, a trace whose path is
//     also the same is matched first; the rest are matched in order.
//  2. Results are matched by allocator name.
//  3. Each metric's relative change is (now − baseline) / |baseline|. It is
//     "worse" when a lower-is-better metric grew or a higher-is-better one
//     shrank. Worse by more than the tolerance is a regression, better by
//     more than the tolerance is better, anything else (equal included) ok.
//     From a zero baseline any worsening is a regression and any improvement
//     better; the change is then infinite.
//  4. Wall-clock metrics (latency, replay time, events per second) vary from
//     machine to machine and run to run: they are shown but not compared
//     unless CompareOptions.Timings is set.
//
// Nothing here fails: a trace or allocator without a baseline, or a baseline
// the run did not replay, is a note, and the caller decides what the verdicts
// mean (bfcsim compare exits 1 on any regression).

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// DefaultTolerance is bfcsim compare's tolerance: a 2% change is noise in a
// CI check, a bigger one is worth a look.
const DefaultTolerance = 0.02

// CompareOptions say how Compare judges a change.
type CompareOptions struct {
	// Tolerance is the largest relative change, as a fraction (0.02 is 2%),
	// that is still "ok". 0 makes every change a verdict.
	Tolerance float64
	// Timings compares the wall-clock metrics too; otherwise their verdict
	// is "not compared".
	Timings bool
	// BaselineName names the baseline in notes, e.g. its file name; "" is
	// "the baseline".
	BaselineName string
}

// Verdict is what a compared metric's change means.
type Verdict string

// The verdicts, from worst to best.
const (
	// Regression: worse than the baseline by more than the tolerance.
	Regression Verdict = "regression"
	// Better: better than the baseline by more than the tolerance.
	Better Verdict = "better"
	// OK: within the tolerance of the baseline, equal included.
	OK Verdict = "ok"
	// NotCompared: a wall-clock metric, shown but not judged.
	NotCompared Verdict = "not compared"
	// NoBaseline: the baseline has no value for this metric.
	NoBaseline Verdict = "no baseline"
)

// Unit says how a metric's values are written.
type Unit int

// Units of compared metrics.
const (
	UnitCount    Unit = iota // a plain count: 1,234
	UnitBytes                // Bytes: 1.50 GiB
	UnitFraction             // Percent: 43.9%
	UnitSeconds              // Seconds: 2.1ms
	UnitNanos                // Nanos: 850ns
	UnitRate                 // Rate: 3.44M/s
)

// Format writes a value of this unit the way the report does.
func (u Unit) Format(v float64) string {
	switch u {
	case UnitBytes:
		if v < 0 {
			return "-" + Bytes(uint64(-v))
		}
		return Bytes(uint64(v))
	case UnitFraction:
		return Percent(v)
	case UnitSeconds:
		return Seconds(v)
	case UnitNanos:
		return Nanos(v)
	case UnitRate:
		return Rate(v)
	}
	if v == math.Trunc(v) && math.Abs(v) < 1<<62 {
		return Count(int64(v))
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Comparison is a run compared with a baseline.
type Comparison struct {
	Tolerance float64
	Timings   bool
	// Baseline names the baseline, as CompareOptions.BaselineName.
	Baseline string
	// Traces are the run's traces, in the run's order.
	Traces []TraceComparison
	// NotReplayed names the baseline's traces that the run has no match
	// for, in the baseline's order.
	NotReplayed []string
}

// TraceComparison is one of the run's traces compared with its baseline.
type TraceComparison struct {
	Name string
	Path string
	// BaselinePath is the matched baseline trace's path; "" when
	// HasBaseline is false.
	BaselinePath string
	// HasBaseline says whether the baseline has this trace; without one
	// there are no rows and every allocator is in NoBaseline.
	HasBaseline bool
	// Rows are the compared metrics: allocators in the run's order, each
	// with every metric in the fixed order of CompareMetrics.
	Rows []MetricChange
	// NoBaseline names the run's allocators the baseline lacks for this
	// trace; NotReplayed the baseline's allocators the run lacks.
	NoBaseline  []string
	NotReplayed []string
	// Warnings say where the comparison may not be like with like: options,
	// device or trace differ from the baseline's.
	Warnings []string
	// CallSites are what each call site held at the peak, the baseline's
	// and now, the largest growth first (as bfcsim diff lists them), when
	// both reports hold peak_call_sites and the peak changed.
	CallSites []DiffCallSite
}

// MetricChange is one metric of one allocator on one trace.
type MetricChange struct {
	Allocator string
	// Metric is the report.json key, with a dot for nested keys
	// ("tf_fragmentation.max", "latency_ns.alloc.p99").
	Metric   string
	Unit     Unit
	Baseline float64
	Now      float64
	// Change is (Now − Baseline) / |Baseline|: 0.1 is 10% more. It is
	// ±Inf from a zero baseline and 0 when the values are equal.
	Change  float64
	Verdict Verdict
}

// ComparedMetric is one metric Compare compares: a row of each allocator.
type ComparedMetric struct {
	// Name is the report.json key, with a dot for nested keys.
	Name string
	Unit Unit
	// HigherBetter says the metric improves as it grows (utilization);
	// most improve as they shrink.
	HigherBetter bool
	// Timing says the metric is wall-clock, compared only with
	// CompareOptions.Timings.
	Timing bool
	// value returns the metric's value in r, false when r has none.
	value func(r *Result) (float64, bool)
}

func always(f func(r *Result) float64) func(r *Result) (float64, bool) {
	return func(r *Result) (float64, bool) { return f(r), true }
}

// compareMetrics is the fixed order of the rows of each allocator.
var compareMetrics = []ComparedMetric{
	{Name: "peak_reserved_bytes", Unit: UnitBytes, value: always(func(r *Result) float64 { return float64(r.PeakReservedBytes) })},
	{Name: "peak_in_use_bytes", Unit: UnitBytes, value: always(func(r *Result) float64 { return float64(r.PeakInUseBytes) })},
	{Name: "final_reserved_bytes", Unit: UnitBytes, value: always(func(r *Result) float64 { return float64(r.FinalReservedBytes) })},
	{Name: "fragmentation", Unit: UnitFraction, value: always(func(r *Result) float64 { return r.Fragmentation })},
	{Name: "utilization", Unit: UnitFraction, HigherBetter: true, value: always(func(r *Result) float64 { return r.Utilization })},
	{Name: "internal_waste_at_peak_bytes", Unit: UnitBytes, value: always(func(r *Result) float64 { return float64(r.InternalWasteAtPeakBytes) })},
	{Name: "tf_fragmentation.max", Unit: UnitFraction, value: always(func(r *Result) float64 { return r.TFFragmentation.Max })},
	{Name: "tf_fragmentation.mean", Unit: UnitFraction, value: always(func(r *Result) float64 { return r.TFFragmentation.Mean })},
	{Name: "ok_allocs", Unit: UnitCount, HigherBetter: true, value: always(func(r *Result) float64 { return float64(r.OKAllocs) })},
	{Name: "failed_allocs", Unit: UnitCount, value: always(func(r *Result) float64 { return float64(r.FailedAllocs) })},
	{Name: "device_reserve_calls", Unit: UnitCount, value: always(func(r *Result) float64 { return float64(r.DeviceReserveCalls) })},
	{Name: "device_release_calls", Unit: UnitCount, value: always(func(r *Result) float64 { return float64(r.DeviceReleaseCalls) })},
	{Name: "modeled_device_seconds", Unit: UnitSeconds, value: always(func(r *Result) float64 { return r.ModeledDeviceSeconds })},
	{Name: "recorded_address_match.matched", Unit: UnitCount, HigherBetter: true, value: func(r *Result) (float64, bool) {
		if r.RecordedAddressMatch == nil {
			return 0, false
		}
		return float64(r.RecordedAddressMatch.Matched), true
	}},
	{Name: "recorded_block_match.matched", Unit: UnitCount, HigherBetter: true, value: func(r *Result) (float64, bool) {
		if r.RecordedBlockMatch == nil {
			return 0, false
		}
		return float64(r.RecordedBlockMatch.Matched), true
	}},
	{Name: "latency_ns.alloc.p50", Unit: UnitNanos, Timing: true, value: always(func(r *Result) float64 { return float64(r.LatencyNs.Alloc.P50) })},
	{Name: "latency_ns.alloc.p99", Unit: UnitNanos, Timing: true, value: always(func(r *Result) float64 { return float64(r.LatencyNs.Alloc.P99) })},
	{Name: "latency_ns.free.p50", Unit: UnitNanos, Timing: true, value: always(func(r *Result) float64 { return float64(r.LatencyNs.Free.P50) })},
	{Name: "latency_ns.free.p99", Unit: UnitNanos, Timing: true, value: always(func(r *Result) float64 { return float64(r.LatencyNs.Free.P99) })},
	{Name: "events_per_second", Unit: UnitRate, HigherBetter: true, Timing: true, value: always(func(r *Result) float64 { return r.EventsPerSecond })},
	{Name: "replay_seconds", Unit: UnitSeconds, Timing: true, value: always(func(r *Result) float64 { return r.ReplaySeconds })},
}

// CompareMetrics returns the metrics Compare compares, in row order.
func CompareMetrics() []ComparedMetric { return slices.Clone(compareMetrics) }

// Compare compares the run now with baseline. See the top of compare.go
// for the rules.
func Compare(baseline, now Report, opts CompareOptions) Comparison {
	c := Comparison{Tolerance: opts.Tolerance, Timings: opts.Timings, Baseline: opts.BaselineName}
	if c.Baseline == "" {
		c.Baseline = "the baseline"
	}
	match := matchTraces(baseline.Traces, now.Traces)
	used := make([]bool, len(baseline.Traces))
	for i := range now.Traces {
		tr := &now.Traces[i]
		tc := TraceComparison{Name: tr.Name, Path: tr.Path}
		if b := match[i]; b >= 0 {
			used[b] = true
			compareTrace(&tc, &baseline.Traces[b], tr, opts)
		} else {
			for j := range tr.Results {
				tc.NoBaseline = append(tc.NoBaseline, tr.Results[j].Allocator)
			}
		}
		c.Traces = append(c.Traces, tc)
	}
	for b := range baseline.Traces {
		if !used[b] {
			c.NotReplayed = append(c.NotReplayed, baseline.Traces[b].Name)
		}
	}
	return c
}

// matchTraces returns, for each of now's traces, the index of its baseline
// trace or -1: first the pairs whose name and path agree, then the rest by
// name, in order.
func matchTraces(baseline, now []Trace) []int {
	match := make([]int, len(now))
	used := make([]bool, len(baseline))
	for i := range match {
		match[i] = -1
	}
	for _, samePath := range []bool{true, false} {
		for i := range now {
			if match[i] >= 0 {
				continue
			}
			for b := range baseline {
				if !used[b] && baseline[b].Name == now[i].Name && (!samePath || baseline[b].Path == now[i].Path) {
					match[i], used[b] = b, true
					break
				}
			}
		}
	}
	return match
}

func compareTrace(tc *TraceComparison, base, now *Trace, opts CompareOptions) {
	tc.HasBaseline = true
	tc.BaselinePath = base.Path
	if base.Events != now.Events || base.PeakLiveBytes != now.PeakLiveBytes {
		tc.Warnings = append(tc.Warnings, fmt.Sprintf(
			"the trace differs from the baseline's: %s with a peak live of %s now, %s with %s in the baseline",
			plural(now.Events, "event"), Bytes(now.PeakLiveBytes), plural(base.Events, "event"), Bytes(base.PeakLiveBytes)))
	}
	if base.CapacityBytes != now.CapacityBytes || base.Space != now.Space {
		tc.Warnings = append(tc.Warnings, fmt.Sprintf("the device differs from the baseline's: a %s %s device now, a %s %s device in the baseline",
			Bytes(now.CapacityBytes), now.Space, Bytes(base.CapacityBytes), base.Space))
	}
	if len(base.PeakCallSites) > 0 && len(now.PeakCallSites) > 0 && base.PeakLiveBytes != now.PeakLiveBytes {
		tc.CallSites = DiffCallSites(base.PeakCallSites, now.PeakCallSites)
	}
	spaceChecked := false
	for j := range now.Results {
		r := &now.Results[j]
		b := findResult(base.Results, r.Allocator)
		if b == nil {
			tc.NoBaseline = append(tc.NoBaseline, r.Allocator)
			continue
		}
		if !spaceChecked { // every allocator of a run shares the space's options
			spaceChecked = true
			if d := optionsDiff(b.SpaceOptions, r.SpaceOptions); d != "" {
				tc.Warnings = append(tc.Warnings, "space options differ from the baseline's: "+d)
			}
		}
		if d := optionsDiff(b.Options, r.Options); d != "" {
			tc.Warnings = append(tc.Warnings, fmt.Sprintf("%s: options differ from the baseline's: %s", r.Allocator, d))
		}
		for _, m := range compareMetrics {
			nv, ok := m.value(r)
			if !ok {
				continue
			}
			row := MetricChange{Allocator: r.Allocator, Metric: m.Name, Unit: m.Unit, Now: nv}
			bv, ok := m.value(b)
			if !ok {
				row.Verdict = NoBaseline
				tc.Rows = append(tc.Rows, row)
				continue
			}
			row.Baseline = bv
			row.Change = relativeChange(bv, nv)
			row.Verdict = judge(row.Change, m.HigherBetter, opts.Tolerance)
			if m.Timing && !opts.Timings {
				row.Verdict = NotCompared
			}
			tc.Rows = append(tc.Rows, row)
		}
	}
	for j := range base.Results {
		if findResult(now.Results, base.Results[j].Allocator) == nil {
			tc.NotReplayed = append(tc.NotReplayed, base.Results[j].Allocator)
		}
	}
}

func findResult(results []Result, allocator string) *Result {
	for i := range results {
		if results[i].Allocator == allocator {
			return &results[i]
		}
	}
	return nil
}

// optionsDiff describes how two option maps, as report.json holds them,
// differ, key by key in key order ("allow_growth false now, true in the
// baseline"), or returns "" when they agree. Values are compared as JSON, so
// that a run's ints and a baseline's float64s read from JSON are equal.
func optionsDiff(base, now map[string]any) string {
	keys := slices.Collect(maps.Keys(now))
	for k := range base {
		if _, ok := now[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var diffs []string
	for _, k := range keys {
		b, inBase := base[k]
		n, inNow := now[k]
		bs, ns := jsonText(b), jsonText(n)
		switch {
		case !inBase:
			diffs = append(diffs, fmt.Sprintf("%s %s now, unset in the baseline", k, ns))
		case !inNow:
			diffs = append(diffs, fmt.Sprintf("%s unset now, %s in the baseline", k, bs))
		case bs != ns:
			diffs = append(diffs, fmt.Sprintf("%s %s now, %s in the baseline", k, ns, bs))
		}
	}
	return strings.Join(diffs, "; ")
}

// jsonText is v as report.json would hold it after a round trip through
// json.Unmarshal: 1 and 1.0 write the same.
func jsonText(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var back any
	if json.Unmarshal(data, &back) == nil {
		if again, err := json.Marshal(back); err == nil {
			return string(again)
		}
	}
	return string(data)
}

// relativeChange is (now − base) / |base|: 0 when equal, ±Inf from a zero base.
func relativeChange(base, now float64) float64 {
	switch {
	case now == base:
		return 0
	case base == 0:
		return math.Inf(int(math.Copysign(1, now)))
	}
	return (now - base) / math.Abs(base)
}

// changeEpsilon absorbs floating-point error in a change that sits exactly
// on the tolerance (102 against 100 with a 2% tolerance is ok).
const changeEpsilon = 1e-9

// judge gives the verdict for a relative change.
func judge(change float64, higherBetter bool, tolerance float64) Verdict {
	worse := change
	if higherBetter {
		worse = -change
	}
	switch {
	case worse > tolerance+changeEpsilon:
		return Regression
	case -worse > tolerance+changeEpsilon:
		return Better
	}
	return OK
}

// Count returns how many rows have the verdict v.
func (c *Comparison) Count(v Verdict) int {
	n := 0
	for i := range c.Traces {
		for j := range c.Traces[i].Rows {
			if c.Traces[i].Rows[j].Verdict == v {
				n++
			}
		}
	}
	return n
}

// Matched returns how many of the run's results were compared with a
// baseline result: 0 means the baseline and the run have nothing in common.
func (c *Comparison) Matched() int {
	n := 0
	for i := range c.Traces {
		allocs := map[string]bool{}
		for _, r := range c.Traces[i].Rows {
			allocs[r.Allocator] = true
		}
		n += len(allocs)
	}
	return n
}

// NoBaseline returns how many of the run's results have no baseline.
func (c *Comparison) NoBaseline() int {
	n := 0
	for i := range c.Traces {
		n += len(c.Traces[i].NoBaseline)
	}
	return n
}

// Regressions describes every regression, in row order, as
// "TRACE/ALLOCATOR METRIC CHANGE", e.g. "transformer-train/bfc fragmentation +11.1%".
func (c *Comparison) Regressions() []string {
	var out []string
	for i := range c.Traces {
		tc := &c.Traces[i]
		for _, r := range tc.Rows {
			if r.Verdict == Regression {
				out = append(out, fmt.Sprintf("%s/%s %s %s", tc.Name, r.Allocator, r.Metric, FormatChange(r.Change)))
			}
		}
	}
	return out
}

// Summary is the comparison in one line, e.g.
// "2 regressions, 1 better, 40 ok, 8 not compared (tolerance 2%)".
func (c *Comparison) Summary() string {
	parts := []string{
		countNoun(c.Count(Regression), "regression", "regressions"),
		fmt.Sprintf("%d better", c.Count(Better)),
		fmt.Sprintf("%d ok", c.Count(OK)),
	}
	if n := c.Count(NotCompared); n > 0 {
		parts = append(parts, fmt.Sprintf("%d not compared", n))
	}
	if n := c.Count(NoBaseline); n > 0 {
		parts = append(parts, fmt.Sprintf("%d without a baseline value", n))
	}
	if n := c.NoBaseline(); n > 0 {
		parts = append(parts, countNoun(n, "result", "results")+" without a baseline")
	}
	if n := len(c.NotReplayed); n > 0 {
		parts = append(parts, countNoun(n, "baseline trace", "baseline traces")+" not replayed")
	}
	return strings.Join(parts, ", ") + " (tolerance " + FormatTolerance(c.Tolerance) + ")"
}

func countNoun(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// Failure is the one-line error of a comparison with regressions beyond
// tol, naming the first few; nil without any.
func (c *Comparison) Failure(tol float64) error {
	regs := c.Regressions()
	if len(regs) == 0 {
		return nil
	}
	const show = 5 // the error is one line
	list := strings.Join(regs[:min(show, len(regs))], ", ")
	if len(regs) > show {
		list += fmt.Sprintf(" and %d more", len(regs)-show)
	}
	return fmt.Errorf("%s beyond %s: %s", Plural(int64(len(regs)), "regression", "regressions"), FormatTolerance(tol), list)
}

// FormatChange writes a relative change: "+10.3%", "-2.0%", "0" when
// nothing changed, "+<0.1%" for a change too small to show, "+inf" from a
// zero baseline.
func FormatChange(change float64) string {
	switch {
	case change == 0:
		return "0"
	case math.IsInf(change, 1):
		return "+inf"
	case math.IsInf(change, -1):
		return "-inf"
	}
	s := fmt.Sprintf("%+.1f%%", 100*change)
	if s == "+0.0%" || s == "-0.0%" {
		return s[:1] + "<0.1%"
	}
	return s
}

// FormatTolerance writes a tolerance as a percentage: "2%", "0.5%".
func FormatTolerance(tol float64) string {
	return strconv.FormatFloat(math.Round(tol*100*1e6)/1e6, 'f', -1, 64) + "%"
}

// ParseTolerance reads a tolerance: a percentage ("2%", "0.5%") or a
// fraction below 1 ("0.02"). It returns the fraction.
func ParseTolerance(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	num := strings.TrimSpace(strings.TrimSuffix(t, "%"))
	v, err := strconv.ParseFloat(num, 64)
	switch {
	case err != nil || num == "" || math.IsNaN(v) || math.IsInf(v, 0):
		return 0, fmt.Errorf("bad tolerance %q: want a percentage such as 2%% or 0.5%%, or a fraction such as 0.02", s)
	case v < 0:
		return 0, fmt.Errorf("bad tolerance %q: it cannot be negative", s)
	case !pct && v >= 1:
		return 0, fmt.Errorf("bad tolerance %q: a number without %% is a fraction (0.02 is 2%%); write %s%% for %s percent", s, num, num)
	}
	if pct {
		v /= 100
	}
	return v, nil
}

// WriteComparisonMarkdown writes the comparison as Markdown fit for a CI
// summary ($GITHUB_STEP_SUMMARY): a heading, the summary line, then a table
// per trace with its notes.
func WriteComparisonMarkdown(w io.Writer, c Comparison) error {
	b := &strings.Builder{}
	b.WriteString("# bfcsim compare\n\n")
	summary := mdEscape(c.Summary())
	if n := c.Count(Regression); n > 0 {
		// Bold the regressions count, which leads the line.
		head, rest, _ := strings.Cut(summary, ", ")
		summary = "**" + head + "**, " + rest
	}
	fmt.Fprintf(b, "%s against %s.\n", summary, mdCode(c.Baseline))
	if !c.Timings {
		b.WriteString("\nWall-clock metrics (latency, events per second, replay time) are shown but not compared; `--compare-latency` compares them.\n")
	}
	for i := range c.Traces {
		tc := &c.Traces[i]
		fmt.Fprintf(b, "\n## %s\n\n", mdEscape(tc.Name))
		if !tc.HasBaseline {
			fmt.Fprintf(b, "%s: no baseline: %s has no trace named %s.\n", mdCode(tc.Path), mdEscape(c.Baseline), mdCode(tc.Name))
		} else if tc.BaselinePath == tc.Path {
			fmt.Fprintf(b, "%s against the baseline.\n", mdCode(tc.Path))
		} else {
			fmt.Fprintf(b, "%s against the baseline's %s.\n", mdCode(tc.Path), mdCode(tc.BaselinePath))
		}
		if len(tc.Rows) > 0 {
			b.WriteString("\n| allocator | metric | baseline | now | change | verdict |\n|---|---|--:|--:|--:|---|\n")
			for _, r := range tc.Rows {
				base, change, verdict := r.Unit.Format(r.Baseline), FormatChange(r.Change), string(r.Verdict)
				if r.Verdict == NoBaseline {
					base, change = "-", "-"
				}
				if r.Verdict == Regression {
					change, verdict = "**"+change+"**", "**"+verdict+"**"
				}
				fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", mdEscape(r.Allocator), mdCode(r.Metric),
					mdEscape(base), mdEscape(r.Unit.Format(r.Now)), change, verdict)
			}
		}
		writeCallSiteChanges(b, tc, c.Baseline)
		var notes []string
		for _, w := range tc.Warnings {
			notes = append(notes, "**warning**: "+mdEscape(w)+"; if that is intended, run with `--update-baseline`")
		}
		if tc.HasBaseline {
			for _, a := range tc.NoBaseline {
				notes = append(notes, mdEscape(a)+": no baseline (not in "+mdEscape(c.Baseline)+"); `--update-baseline` adds it")
			}
		}
		for _, a := range tc.NotReplayed {
			notes = append(notes, mdEscape(a)+": not replayed (in the baseline, not in this run)")
		}
		if len(notes) > 0 {
			b.WriteString("\n")
			for _, n := range notes {
				fmt.Fprintf(b, "- %s\n", n)
			}
		}
	}
	if len(c.NotReplayed) > 0 {
		b.WriteString("\n## Not replayed\n\nIn the baseline, not in this run:\n\n")
		for _, name := range c.NotReplayed {
			fmt.Fprintf(b, "- %s\n", mdEscape(name))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeCallSiteChanges writes the call sites that hold more or less at the
// peak than in the baseline, as bfcsim diff's Markdown does: a report
// names its largest call sites only, the rest summed in one row.
func writeCallSiteChanges(b *strings.Builder, tc *TraceComparison, baseline string) {
	var rows []DiffCallSite
	for _, c := range tc.CallSites {
		if c.DeltaBytes != 0 {
			rows = append(rows, c)
		}
	}
	if len(rows) == 0 {
		return
	}
	var sum int64
	for _, c := range rows {
		sum += c.DeltaBytes
	}
	fmt.Fprintf(b, "\nLive at the peak, by call site, against %s (the largest growth first):\n\n", mdCode(baseline))
	writeCallSiteTable(b, rows, "baseline", "now", "total", sum)
}
