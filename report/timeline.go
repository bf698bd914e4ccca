package report

import (
	"encoding/csv"
	"io"
	"strconv"
)

// TimelineColumns are the columns of timeline.csv.
var TimelineColumns = []string{
	"trace", "allocator", "event", "events",
	"live_bytes", "in_use_bytes", "reserved_bytes",
	"tf_fragmentation_max", "tf_fragmentation_mean", "failed_allocs",
}

// WriteTimelineCSV writes timeline.csv: for every trace and allocator whose
// replay recorded a timeline, one row per timeline point. A row covers the
// events [event, event+events) and holds the most bytes live, in use and
// reserved after any of them, TensorFlow's fragmentation metric (largest
// and mean) and the allocations that failed. Short traces have a row per
// event; longer ones are summarised to a bounded number of rows.
func WriteTimelineCSV(w io.Writer, rep Report) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(TimelineColumns); err != nil {
		return err
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	for _, tr := range rep.Traces {
		for _, r := range tr.Results {
			if r.Series == nil || r.Series.Timeline == nil {
				continue
			}
			for _, p := range r.Series.Timeline.Points {
				row := []string{
					tr.Name, r.Allocator, i(p.Event), i(p.Events),
					u(p.Live), u(p.InUse), u(p.Reserved),
					f(p.TFFragMax), f(p.TFFragMean()), i(p.Failed),
				}
				if err := cw.Write(row); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// PlotFileName names the image -o DIR holds for one plot: "T.timeline.png"
// for a plot of the whole trace T, "T.bfc.memmap.svg" for one allocator's.
func PlotFileName(traceName, allocator, kind, format string) string {
	if allocator == "" {
		return traceFilePrefix(traceName) + "." + kind + "." + format
	}
	return DumpFileName(traceName, allocator, kind+"."+format)
}
