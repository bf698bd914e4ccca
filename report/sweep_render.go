package report

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// SweepFormats are the names RenderSweep accepts.
var SweepFormats = []string{"table", "json", "markdown"}

// DefaultSweepMetric is the metric a sweep's best row and plots are chosen by.
const DefaultSweepMetric = "peak_reserved_bytes"

// sweepMetric is a metric a sweep can be judged and plotted by.
type sweepMetric struct {
	ComparedMetric
	format func(float64) string
}

// sweepMetrics are footprint_vs_lower_bound and the metrics Compare
// compares, by their report.json keys.
var sweepMetrics = func() []sweepMetric {
	ms := []sweepMetric{{
		ComparedMetric: ComparedMetric{Name: "footprint_vs_lower_bound", Unit: UnitCount,
			value: func(r *Result) (float64, bool) { return r.FootprintVsLowerBound, r.FootprintVsLowerBound > 0 }},
		format: Times,
	}}
	for _, m := range compareMetrics {
		ms = append(ms, sweepMetric{ComparedMetric: m, format: m.Unit.Format})
	}
	return ms
}()

// SweepMetrics returns the names of the metrics a sweep can be judged and
// plotted by: report.json keys, dotted for nested ones.
func SweepMetrics() []string {
	names := make([]string, len(sweepMetrics))
	for i, m := range sweepMetrics {
		names[i] = m.Name
	}
	return names
}

func lookupSweepMetric(name string) (*sweepMetric, error) {
	for i := range sweepMetrics {
		if sweepMetrics[i].Name == name {
			return &sweepMetrics[i], nil
		}
	}
	return nil, fmt.Errorf("unknown metric %q (want one of %s)", name, strings.Join(SweepMetrics(), ", "))
}

// CheckSweepMetric returns an error naming the valid metrics if name is not one.
func CheckSweepMetric(name string) error {
	_, err := lookupSweepMetric(name)
	return err
}

// RenderSweep writes s to w in the named format; metric picks each trace's
// best row.
func RenderSweep(w io.Writer, s Sweep, format, metric string) error {
	switch format {
	case "table":
		return WriteSweepTable(w, s, metric)
	case "json":
		return WriteSweepJSON(w, s)
	case "markdown":
		return WriteSweepMarkdown(w, s, metric)
	}
	return fmt.Errorf("unknown format %q (want one of %s)", format, strings.Join(SweepFormats, ", "))
}

// WriteSweepJSON writes the sweep's report.json, indented.
func WriteSweepJSON(w io.Writer, s Sweep) error { return writeIndentedJSON(w, s) }

// SweepGroup is one trace of a sweep and its entries in the report.
type SweepGroup struct {
	// Trace indexes Sweep.Paths.
	Trace int
	Name  string
	Path  string
	// Entries index Sweep.Traces, in job order.
	Entries []int
}

// SweepGroups returns the sweep's traces that have entries in the report
// (all of them, but for a shard or a partial merge), in trace order.
func SweepGroups(s *Sweep) []SweepGroup {
	var groups []SweepGroup
	for i := range s.Traces {
		t, _ := s.Sweep.JobOf(s.Traces[i].Job)
		if len(groups) == 0 || groups[len(groups)-1].Trace != t {
			groups = append(groups, SweepGroup{Trace: t, Name: s.Traces[i].Name, Path: s.Traces[i].Path})
		}
		g := &groups[len(groups)-1]
		g.Entries = append(g.Entries, i)
	}
	return groups
}

// sweepRow is one row of a trace's table: one allocator at one point.
type sweepRow struct {
	entry *SweepTrace
	r     *Result
}

// sweepRows are a trace's rows, allocator by allocator in the sweep's
// order, each at every grid point in the report, in point order.
func sweepRows(s *Sweep, g SweepGroup) []sweepRow {
	var rows []sweepRow
	for _, name := range s.Sweep.Allocators {
		for _, i := range g.Entries {
			e := &s.Traces[i]
			for j := range e.Results {
				if e.Results[j].Allocator == name {
					rows = append(rows, sweepRow{entry: e, r: &e.Results[j]})
				}
			}
		}
	}
	return rows
}

// bestRow returns the index of the row with the best value of m among the
// rows without failed allocations, the first of equals; -1 when there is none.
func bestRow(rows []sweepRow, m *sweepMetric) int {
	best := -1
	var bv float64
	for i, row := range rows {
		v, ok := m.value(row.r)
		if !ok || row.r.FailedAllocs > 0 {
			continue
		}
		if best < 0 || (m.HigherBetter && v > bv) || (!m.HigherBetter && v < bv) {
			best, bv = i, v
		}
	}
	return best
}

// sweepColumns are the metrics of a sweep's tables, after the allocator and
// the axes; the chosen metric joins them when it is not one.
var sweepColumns = []column{
	{"PEAK RESERVED", func(r *Result) string { return Bytes(r.PeakReservedBytes) }, ""},
	{"×LB", func(r *Result) string { return Times(r.FootprintVsLowerBound) }, "×LB"},
	{"FRAG", func(r *Result) string { return Percent(r.Fragmentation) }, ""},
	{"FAILED", func(r *Result) string { return strconv.FormatInt(r.FailedAllocs, 10) }, ""},
	{"DEVICE CALLS", func(r *Result) string {
		return strconv.FormatInt(r.DeviceReserveCalls+r.DeviceReleaseCalls, 10)
	}, ""},
}

// sweepColumnMetrics are the metrics sweepColumns show.
var sweepColumnMetrics = []string{"peak_reserved_bytes", "footprint_vs_lower_bound", "fragmentation", "failed_allocs"}

func sweepTableColumns(m *sweepMetric) []column {
	cols := slices.Clone(sweepColumns)
	if !slices.Contains(sweepColumnMetrics, m.Name) {
		cols = append(cols, column{strings.ToUpper(m.Name), func(r *Result) string {
			v, ok := m.value(r)
			if !ok {
				return "-"
			}
			return m.format(v)
		}, m.Name})
	}
	return cols
}

// sweepSummary says what a sweep is: its size, allocators, grid and options.
func sweepSummary(sw *Sweep) string {
	info := &sw.Sweep
	grid := "no grid"
	if len(info.Axes) > 0 {
		parts := make([]string, len(info.Axes))
		for i, ax := range info.Axes {
			parts[i] = ax.Name + " = " + strings.Join(ax.Values, ", ")
		}
		grid = "grid " + strings.Join(parts, "; ")
	}
	s := fmt.Sprintf("%s × %s = %s, each replaying %s; %s",
		plural(int64(len(info.Paths)), "trace"), plural(int64(info.Points()), "grid point"),
		plural(int64(info.Jobs), "job"), strings.Join(info.Allocators, ", "), grid)
	if len(info.Sets) > 0 {
		s += "; options " + strings.Join(info.Sets, " ")
	}
	return s
}

// sweepPart says which part of the sweep a report holds, or "" for all of it.
func sweepPart(s *Sweep) string {
	info := &s.Sweep
	switch {
	case info.Shard != nil:
		return fmt.Sprintf("Shard %d/%d: %s of %d", info.Shard.Index, info.Shard.Count,
			plural(int64(len(info.Shard.Jobs)), "job"), info.Jobs)
	case len(info.Missing) > 0:
		return fmt.Sprintf("Partial: %s of %d missing", plural(int64(len(info.Missing)), "job"), info.Jobs)
	}
	return ""
}

// bestRule says how the best row is chosen, the metric's name written by name.
func bestRule(m *sweepMetric, name func(string) string) string {
	way := "lowest"
	if m.HigherBetter {
		way = "highest"
	}
	return fmt.Sprintf("the %s %s without failed allocations", way, name(m.Name))
}

// bestLine says which row is best, and its value.
func bestLine(s *Sweep, rows []sweepRow, best int, m *sweepMetric) string {
	if best < 0 {
		return "none (every row has failed allocations, or no " + m.Name + ")"
	}
	row := rows[best]
	v, _ := m.value(row.r)
	return fmt.Sprintf("%s at %s: %s %s", row.r.Allocator, s.Sweep.PointLabel(row.entry.Point), m.Name, m.format(v))
}

// WriteSweepTable writes an aligned terminal table per trace: one row per
// grid point and allocator, the best row marked with '*'.
func WriteSweepTable(w io.Writer, s Sweep, metric string) error {
	m, err := lookupSweepMetric(metric)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "sweep: %s\n", sweepSummary(&s))
	if part := sweepPart(&s); part != "" {
		fmt.Fprintln(w, part)
	}
	cols := sweepTableColumns(m)
	for _, g := range SweepGroups(&s) {
		rows := sweepRows(&s, g)
		best := bestRow(rows, m)
		fmt.Fprintf(w, "\n%s: %s\n", g.Name, traceSummary(&s.Traces[g.Entries[0]].Trace))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		heads := []string{"", "ALLOCATOR"}
		for _, ax := range s.Sweep.Axes {
			heads = append(heads, ax.Name)
		}
		for _, c := range cols {
			heads = append(heads, c.head)
		}
		fmt.Fprintln(tw, strings.Join(heads, "\t"))
		for i, row := range rows {
			cells := []string{"", row.r.Allocator}
			if i == best {
				cells[0] = "*"
			}
			for _, ax := range s.Sweep.Axes {
				cells = append(cells, row.entry.Point[ax.Name])
			}
			for _, c := range cols {
				cells = append(cells, c.value(row.r))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "* best (%s): %s\n", bestRule(m, func(s string) string { return s }), bestLine(&s, rows, best, m))
	}
	return nil
}

// WriteSweepMarkdown writes the sweep for a CI summary or a README: a table
// per trace with one row per grid point and allocator, the best in bold.
func WriteSweepMarkdown(w io.Writer, s Sweep, metric string) error {
	m, err := lookupSweepMetric(metric)
	if err != nil {
		return err
	}
	b := &strings.Builder{}
	b.WriteString("# bfcsim sweep\n\n")
	info := &s.Sweep
	fmt.Fprintf(b, "%s × %s = %s, each replaying %s.", plural(int64(len(info.Paths)), "trace"),
		plural(int64(info.Points()), "grid point"), plural(int64(info.Jobs), "job"), mdEscape(strings.Join(info.Allocators, ", ")))
	if len(info.Axes) > 0 {
		parts := make([]string, len(info.Axes))
		for i, ax := range info.Axes {
			parts[i] = mdCode(ax.Name) + " = " + mdEscape(strings.Join(ax.Values, ", "))
		}
		fmt.Fprintf(b, " Grid: %s.", strings.Join(parts, "; "))
	}
	if len(info.Sets) > 0 {
		fmt.Fprintf(b, " Options: %s.", mdCode(strings.Join(info.Sets, " ")))
	}
	fmt.Fprintf(b, " In bold, each trace's best row: %s.\n", bestRule(m, mdCode))
	if part := sweepPart(&s); part != "" {
		fmt.Fprintf(b, "\n**%s.**\n", mdEscape(part))
	}
	cols := sweepTableColumns(m)
	for _, g := range SweepGroups(&s) {
		rows := sweepRows(&s, g)
		best := bestRow(rows, m)
		fmt.Fprintf(b, "\n## %s\n\n", mdEscape(g.Name))
		fmt.Fprintf(b, "%s: %s.\n\n", mdCode(g.Path), mdEscape(traceSummary(&s.Traces[g.Entries[0]].Trace)))
		b.WriteString("| allocator |")
		for _, ax := range s.Sweep.Axes {
			fmt.Fprintf(b, " %s |", mdCode(ax.Name))
		}
		for _, c := range cols {
			head := c.md
			if head == "" {
				head = strings.ToLower(c.head)
			} else if head != "×LB" {
				head = mdCode(head)
			}
			fmt.Fprintf(b, " %s |", head)
		}
		b.WriteString("\n|")
		b.WriteString(strings.Repeat("---|", len(s.Sweep.Axes)+1))
		b.WriteString(strings.Repeat("--:|", len(cols)))
		b.WriteString("\n")
		for i, row := range rows {
			cell := func(v string) string {
				v = mdEscape(v)
				if i == best {
					return "**" + v + "**"
				}
				return v
			}
			fmt.Fprintf(b, "| %s |", cell(row.r.Allocator))
			for _, ax := range s.Sweep.Axes {
				fmt.Fprintf(b, " %s |", cell(row.entry.Point[ax.Name]))
			}
			for _, c := range cols {
				fmt.Fprintf(b, " %s |", cell(c.value(row.r)))
			}
			b.WriteString("\n")
		}
		if best < 0 {
			fmt.Fprintf(b, "\nBest: none (every row has failed allocations, or no %s).\n", mdCode(m.Name))
		} else {
			row := rows[best]
			v, _ := m.value(row.r)
			fmt.Fprintf(b, "\nBest: **%s** at %s, %s %s.\n", mdEscape(row.r.Allocator),
				mdCode(info.PointLabel(row.entry.Point)), mdCode(m.Name), mdEscape(m.format(v)))
		}
	}
	_, err = io.WriteString(w, b.String())
	return err
}
