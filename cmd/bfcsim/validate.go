package main

import (
	"context"
	"errors"
	"fmt"
	"io"

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
	t, err := input.OpenFile(ctx, path, e.stdin, input.Options{SkipInvalid: true, Allocator: tfAllocator, Device: -1})
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
	report.WriteValidation(w, path, t.Header(), s, t.SkippedErrors())
	return s.Skipped == 0, nil
}
