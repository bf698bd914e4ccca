package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/bfcsim/bfcsim/trace"
)

// WriteValidation writes what `bfcsim validate` says of the trace at path:
// valid or not, its header, its events by kind, its live bytes, and the
// invalid lines skipped (those s counts; skipped are the first of them).
func WriteValidation(w io.Writer, path string, h trace.Header, s trace.Summary, skipped []*trace.SyntaxError) {
	status := "valid"
	if s.Skipped > 0 {
		status = fmt.Sprintf("invalid: %d bad lines", s.Skipped)
	}
	fmt.Fprintf(w, "%s: %s\n", path, status)
	if h.Version != 0 {
		parts := []string{"version=1"}
		if h.Name != "" {
			parts = append(parts, fmt.Sprintf("name=%q", h.Name))
		}
		if h.Source != "" {
			parts = append(parts, "source="+h.Source)
		}
		if h.CapacityBytes != 0 {
			parts = append(parts, "capacity="+Bytes(h.CapacityBytes))
		}
		if h.TimeUnit != "" {
			parts = append(parts, "time_unit="+h.TimeUnit)
		}
		for _, k := range slices.Sorted(maps.Keys(h.Meta)) {
			parts = append(parts, k+"="+h.Meta[k])
		}
		fmt.Fprintf(w, "  header   %s\n", strings.Join(parts, " "))
	} else {
		fmt.Fprintf(w, "  header   none\n")
	}
	fmt.Fprintf(w, "  events   %s: %s alloc (%s of size 0), %s free, %s step, %s mark, %s reserve, %s release\n",
		Count(s.Events), Count(s.Allocs), Count(s.ZeroSizeAllocs), Count(s.Frees),
		Count(s.Steps), Count(s.Marks), Count(s.Reserves), Count(s.Releases))
	fmt.Fprintf(w, "  live     peak %s in %s allocations; largest allocation %s; %s allocated in total\n",
		Bytes(s.PeakLiveBytes), Count(s.PeakLiveAllocs), Bytes(s.MaxAllocBytes),
		Bytes(s.TotalAllocBytes))
	fmt.Fprintf(w, "  at end   %s allocations live (%s)\n", Count(s.LiveAllocs), Bytes(s.LiveBytes))
	if s.HasT {
		unit := h.TimeUnit
		if unit == "" {
			unit = "(no unit)"
		}
		fmt.Fprintf(w, "  time     %g .. %g %s\n", s.FirstT, s.LastT, unit)
	}
	for _, e := range skipped {
		fmt.Fprintf(w, "  %v\n", e)
	}
	if n := s.Skipped - int64(len(skipped)); n > 0 {
		fmt.Fprintf(w, "  ... and %d more\n", n)
	}
}
