package report

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/bfcsim/bfcsim/diagnose/bfcdump"
	"github.com/bfcsim/bfcsim/internal/outfile"
)

// WriteDir writes into dir, each file atomically: the memory dumps of
// allocators that can describe their pool (TRACE.ALLOCATOR.peak.memdump and,
// after an out-of-memory, .oom.memdump and .oom.log), every plot as PNG and
// SVG, timeline.csv, index.html, report.md and, last, report.json, so that
// a complete report.json means a complete directory. It stops if ctx is
// done, and a directory it did not complete is left as it was.
func WriteDir(ctx context.Context, dir string, rep Report, runs []TraceRun) error {
	return outfile.WithDir(ctx, dir, func(out *outfile.Dir) error { return writeDir(ctx, out, rep, runs) })
}

func writeDir(ctx context.Context, out *outfile.Dir, rep Report, runs []TraceRun) error {
	names := make([]string, len(rep.Traces))
	seen := map[string]int{}
	for i := range rep.Traces {
		name := rep.Traces[i].Name
		if seen[name]++; seen[name] > 1 {
			name = fmt.Sprintf("%s-%d", name, seen[name]) // two traces of one name
		}
		names[i] = name
	}
	// The memory dumps are made beside the plots, on every core: a dump
	// of a large pool is as much work as the plots together.
	var jobs []*rendered
	for i := range runs {
		for j := range runs[i].Results {
			r := &runs[i].Results[j]
			files := []struct {
				kind   string
				snap   *bfcdump.Snapshot
				render func(*bfcdump.Snapshot) ([]byte, error)
			}{
				{"peak.memdump", bfcdump.FromState(r.PeakSnapshot), bfcdump.Marshal},
				{"oom.memdump", bfcdump.FromState(r.OOMSnapshot), bfcdump.Marshal},
				{"oom.log", bfcdump.FromState(r.OOMSnapshot), memoryLog},
			}
			for _, f := range files {
				if f.snap != nil {
					jobs = append(jobs, &rendered{file: DumpFileName(names[i], r.Allocator, f.kind),
						render: func() ([]byte, error) { return f.render(f.snap) }})
				}
			}
		}
	}
	figs, err := writePlots(ctx, out, rep, names, jobs)
	if err != nil {
		return err
	}
	outputs := []struct {
		name string
		fn   func(io.Writer) error
	}{
		{"timeline.csv", func(w io.Writer) error { return WriteTimelineCSV(w, rep) }},
		{"index.html", func(w io.Writer) error { return WriteHTML(w, rep, figs) }},
		{"report.md", func(w io.Writer) error { return WriteMarkdown(w, rep) }},
		{"report.json", func(w io.Writer) error { return WriteJSON(w, rep) }},
	}
	for _, o := range outputs {
		if err := out.Write(o.name, o.fn); err != nil {
			return err
		}
	}
	return nil
}

// plotTitles caption the plots in index.html.
var plotTitles = map[string]string{
	"timeline":      "Bytes live, in use and reserved over the trace",
	"fragmentation": "Fragmentation over the trace",
	"latency":       "Latency by percentile",
	"memmap":        "Every block in address × time",
	"occupancy":     "The address space at the peak of bytes in use",
}

// writePlots draws every kind of plot of every trace, as PNG and SVG, into
// dir and returns them as figures for index.html. A per-allocator plot is
// left out for an allocator that has nothing to draw (an occupancy map
// when nothing was ever allocated). The plots are drawn on every core, a
// plot to a core at a time, after the files of before and beside them;
// the files are written, and the figures listed, in one fixed order.
func writePlots(ctx context.Context, out *outfile.Dir, rep Report, names []string, before []*rendered) ([]HTMLFigure, error) {
	type plot struct {
		trace        int
		alloc, kind  string
		format, file string
		job          *rendered
	}
	var plots []*plot
	for i := range rep.Traces {
		tr := &rep.Traces[i]
		for _, kind := range PlotKinds {
			allocs := []string{""}
			if PerAllocator(kind) {
				allocs = allocs[:0]
				for j := range tr.Results {
					if Plottable(&tr.Results[j], kind) == nil {
						allocs = append(allocs, tr.Results[j].Allocator)
					}
				}
			}
			for _, a := range allocs {
				for _, format := range PlotFormats {
					p := &plot{trace: i, alloc: a, kind: kind, format: format,
						file: PlotFileName(names[i], a, kind, format)}
					p.job = &rendered{file: p.file, render: func() ([]byte, error) {
						var buf bytes.Buffer
						if err := WritePlot(&buf, tr, PlotOptions{Kind: p.kind, Allocator: p.alloc}, p.format); err != nil {
							return nil, fmt.Errorf("plotting %s of %s: %w", p.kind, tr.Name, err)
						}
						return buf.Bytes(), nil
					}}
					plots = append(plots, p)
				}
			}
		}
	}
	jobs := before
	for _, p := range plots {
		jobs = append(jobs, p.job)
	}
	if err := renderAll(ctx, out, jobs); err != nil {
		return nil, err
	}

	var figs []HTMLFigure
	for _, p := range plots {
		// A figure's formats are consecutive: its first starts it.
		if n := len(figs); n == 0 || figs[n-1].Trace != p.trace || figs[n-1].Allocator != p.alloc || figs[n-1].Kind != p.kind {
			figs = append(figs, HTMLFigure{Trace: p.trace, Allocator: p.alloc, Kind: p.kind, Title: plotTitles[p.kind]})
		}
		fig := &figs[len(figs)-1]
		if p.format == "png" {
			fig.PNG, fig.PNGFile = p.job.data, p.file
		} else {
			fig.SVGFile = p.file
		}
	}
	return figs, nil
}

// rendered is an output file that render makes in memory.
type rendered struct {
	file   string
	render func() ([]byte, error)
	data   []byte
	err    error
}

// renderAll renders jobs on every core, a job to a core at a time, in
// order, and then writes their files in that order.
func renderAll(ctx context.Context, out *outfile.Dir, jobs []*rendered) error {
	next := make(chan *rendered)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(jobs)) {
		wg.Go(func() {
			for j := range next {
				if j.err = ctx.Err(); j.err == nil {
					j.data, j.err = j.render()
				}
			}
		})
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	for _, j := range jobs {
		if j.err != nil {
			return j.err
		}
		if err := out.Write(j.file, func(w io.Writer) error {
			_, err := w.Write(j.data)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// memoryLog renders s as TensorFlow's OOM log.
func memoryLog(s *bfcdump.Snapshot) ([]byte, error) {
	var buf bytes.Buffer
	err := bfcdump.WriteMemoryLog(&buf, s)
	return buf.Bytes(), err
}

// WriteSweepDir writes into dir, each file atomically, a plot of metric
// per trace (PNG and SVG), report.md and, last, report.json, so that a
// complete report.json means a complete directory. It stops if ctx is
// done, and a directory it did not complete is left as it was.
func WriteSweepDir(ctx context.Context, dir string, sw Sweep, metric string) error {
	return outfile.WithDir(ctx, dir, func(out *outfile.Dir) error { return writeSweepDir(ctx, out, sw, metric) })
}

func writeSweepDir(ctx context.Context, out *outfile.Dir, sw Sweep, metric string) error {
	seen := map[string]int{}
	for _, g := range SweepGroups(&sw) {
		name := g.Name
		if seen[name]++; seen[name] > 1 {
			name = fmt.Sprintf("%s-%d", name, seen[name]) // two traces of one name
		}
		for _, format := range PlotFormats {
			if err := ctx.Err(); err != nil {
				return err
			}
			var buf bytes.Buffer
			if err := WriteSweepPlot(&buf, &sw, g, metric, format); err != nil {
				return fmt.Errorf("plotting %s of %s: %w", metric, g.Name, err)
			}
			if err := out.Write(SweepPlotFileName(name, metric, format), func(w io.Writer) error {
				_, err := w.Write(buf.Bytes())
				return err
			}); err != nil {
				return err
			}
		}
	}
	outputs := []struct {
		name string
		fn   func(io.Writer) error
	}{
		{"report.md", func(w io.Writer) error { return WriteSweepMarkdown(w, sw, metric) }},
		{"report.json", func(w io.Writer) error { return WriteSweepJSON(w, sw) }},
	}
	for _, o := range outputs {
		if err := out.Write(o.name, o.fn); err != nil {
			return err
		}
	}
	return nil
}
