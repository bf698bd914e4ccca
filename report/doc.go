// Package report owns bfcsim's report: one plain data model, built once from
// the replay results, and renderers that write it as an aligned terminal
// table, JSON (report.json, docs/metrics.md), Markdown, CSV, timeline.csv, plots
// (PNG and SVG, with gonum/plot) and one self-contained HTML page; Compare,
// which holds a report against a baseline for CI; and sweeps (sweep*.go): a
// grid of options × traces as one report, its shards and their merge.
//
// It also writes a report's files: a directory of them (WriteDir,
// WriteSweepDir: plots and memory dumps rendered on every core, report.json
// last, the directory taken back if anything fails), the per-event results
// of --events-out (EventsFile), and it reads baselines and sweep reports
// back (ReadBaseline, ReadSweep). And it says in words what other parts
// did: a recording's conversion (Conversion), a GPU's calibration
// (WriteCalibration), a trace's validation (WriteValidation). A bfc
// allocator's out-of-memory is explained with diagnose/bfcdump.
//
// Build turns trace summaries and sim.Results into a Report; every renderer
// reads only the Report, so all formats agree. Derived numbers
// (fragmentation, utilization, events per second) are computed in Build, once.
// The series plots are drawn from (sim's timeline, memory map, layout and
// latency curves) ride along in Result.Series, outside report.json.
// Map keys are sorted wherever they are printed, so output is deterministic
// apart from the timing fields.
//
// A plot is made in two steps: a function turns the recorded series into
// plain data (points, rectangles, pixel fractions), which the tests check
// exactly; the figure code draws that data. Figures share one look: a title,
// a note that says when the data was summarised, a legend of swatches, and
// panels stacked below.
package report
