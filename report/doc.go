// Package report owns bfcsim's report: one plain data model, built once from
// the replay results, and renderers that write it as an aligned terminal
// table, JSON (report.json, SPEC §7), Markdown and CSV.
//
// Build turns trace summaries and sim.Results into a Report; every renderer
// reads only the Report, so all formats agree. Derived numbers
// (fragmentation, utilization, events per second) are computed in Build, once.
// Map keys are sorted wherever they are printed, so output is deterministic
// apart from the timing fields.
package report
