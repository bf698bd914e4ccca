package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/internal/sticky"
	"github.com/bfcsim/bfcsim/report"
	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/input"
)

func newValidateCmd(e *env) *cobra.Command {
	var tfAllocator string
	cmd := &cobra.Command{
		Use:   "validate TRACE...",
		Short: "Check traces and print their summary",
		Long: `Check every line of each trace against the v1 format (docs/trace-format.md)
and print a summary: events by kind, peak live bytes, sizes, what is still live
at the end. Every invalid line is listed (the first 20 of each trace) as
file:line: reason; the exit code is 2 if any trace is invalid.`,
		Example: "  bfcsim validate traces/*.jsonl\n  zcat run.jsonl.gz | bfcsim validate -",
		Args:    traceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkStdinOnce(args); err != nil {
				return err
			}
			w := &sticky.Writer{W: cmd.OutOrStdout()}
			bad := 0
			for _, path := range args {
				ok, err := validateOne(cmd.Context(), w, e, path, tfAllocator)
				if err != nil {
					return err
				}
				if w.Err != nil {
					return fmt.Errorf("writing the summary: %w", w.Err)
				}
				if !ok {
					bad++
				}
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d traces invalid", bad, len(args))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&tfAllocator, "allocator", "", "a TensorFlow profiler capture's allocator to check, e.g. GPU_0_bfc (needed when it has several)")
	return cmd
}

// validateOne prints the summary of one trace and reports whether it is
// valid. Errors that stop reading (a missing file, a corrupt gzip stream, a
// bad header) are returned.
func validateOne(ctx context.Context, w io.Writer, e *env, path, tfAllocator string) (bool, error) {
	t, err := input.OpenFile(ctx, path, e.stdin, input.Options{SkipInvalid: true, Allocator: tfAllocator})
	if err != nil {
		var serr *trace.SyntaxError
		if errors.As(err, &serr) {
			fmt.Fprintf(w, "%s: invalid\n  %v\n", path, err)
			return false, nil
		}
		return false, err
	}
	defer t.Close()
	for n := 0; t.Next(); n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return false, ctx.Err()
		}
	}
	if err := t.Err(); err != nil {
		return false, err
	}
	s := t.Summary()
	h := t.Header()
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
			parts = append(parts, "capacity="+report.Bytes(h.CapacityBytes))
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
		report.Count(s.Events), report.Count(s.Allocs), report.Count(s.ZeroSizeAllocs), report.Count(s.Frees),
		report.Count(s.Steps), report.Count(s.Marks), report.Count(s.Reserves), report.Count(s.Releases))
	fmt.Fprintf(w, "  live     peak %s in %s allocations; largest allocation %s; %s allocated in total\n",
		report.Bytes(s.PeakLiveBytes), report.Count(s.PeakLiveAllocs), report.Bytes(s.MaxAllocBytes),
		report.Bytes(s.TotalAllocBytes))
	fmt.Fprintf(w, "  at end   %s allocations live (%s)\n", report.Count(s.LiveAllocs), report.Bytes(s.LiveBytes))
	if s.HasT {
		unit := h.TimeUnit
		if unit == "" {
			unit = "(no unit)"
		}
		fmt.Fprintf(w, "  time     %g .. %g %s\n", s.FirstT, s.LastT, unit)
	}
	for _, e := range t.SkippedErrors() {
		fmt.Fprintf(w, "  %v\n", e)
	}
	if n := s.Skipped - int64(len(t.SkippedErrors())); n > 0 {
		fmt.Fprintf(w, "  ... and %d more\n", n)
	}
	return s.Skipped == 0, nil
}
