package main

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/internal/outfile"
	"github.com/bfcsim/bfcsim/report"
	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/mtrace"
)

type recordOptions struct {
	out    string
	name   string
	log    string
	noAddr bool
}

func newRecordCmd(e *env) *cobra.Command {
	o := &recordOptions{}
	cmd := &cobra.Command{
		Use:   "record [-o OUTPUT] -- COMMAND [ARGS...]",
		Short: "Run a program and record its heap allocations as a trace",
		Long: `Run a program and convert what it allocated and freed to a trace: every
malloc, calloc, realloc, memalign (and the rest of the family) and free, in
order, with the address it returned and, as tag, the calling function in
the program: past the C and C++ runtime's own allocating functions, so that
a strdup or a new is tagged with the line that called it.

It needs glibc and a C compiler (cc, gcc or clang, or $CC) to build the
small library it preloads, which logs each call in glibc's mtrace format. The program's own standard input, output
and error are bfcsim's; the summary goes to standard error.

Only the process started is recorded, also across exec (a launcher script
that execs the real program records the program); the programs it starts
are not. A statically linked program (Go programs often are), or one that does
not use glibc's malloc, leaves nothing to record: that is an error.

If the program exits with a failure or is interrupted (Ctrl-C is passed on
to it), its trace up to then is still written, and bfcsim exits 2 saying
so. See docs/recording.md to record by hand.`,
		Example: `  bfcsim record -- sort -n numbers.txt
  bfcsim record -o jq.jsonl.zst -- jq . data.json
  bfcsim record -o py.jsonl --log py.mtrace -- python3 -c 'print(sum(range(10**6)))'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("record needs a command to run: bfcsim record [-o OUTPUT] -- COMMAND [ARGS...] (see '%s --help')",
					cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRecord(cmd, e, o, args)
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false) // flags after COMMAND are the command's
	f.StringVarP(&o.out, "out", "o", "", "output trace, .gz or .zst to compress (default COMMAND.jsonl.zst)")
	f.StringVar(&o.name, "name", "", "trace name for the header (default: the command's name)")
	f.StringVar(&o.log, "log", "", "also keep the raw log (glibc's mtrace format) in this file, compressed if .gz or .zst (bfcsim import mtrace reads it)")
	f.BoolVar(&o.noAddr, "no-addr", false, "leave the recorded addresses out of the trace")
	return cmd
}

func runRecord(cmd *cobra.Command, e *env, o *recordOptions, argv []string) error {
	prog := filepath.Base(argv[0])
	if o.out == "" {
		o.out = prog + ".jsonl.zst"
	}
	if o.out == "-" {
		return errors.New("record writes the trace to a file (-o), not to standard output, which is the program's")
	}
	if err := checkOutputs(nil, "", o.out, o.log); err != nil {
		return err
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("cannot run %s: %w", argv[0], err)
	}
	rec, err := mtrace.NewRecorder()
	if err != nil {
		return err
	}
	defer rec.Close()
	logPath := rec.Log()

	// Run the program.
	ctx := cmd.Context()
	run := rec.Command(ctx, path, argv)
	run.Stdin, run.Stdout, run.Stderr = e.stdin, e.stdout, e.stderr
	runErr := run.Run()
	if run.ProcessState == nil { // it never started
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("running %s: %w", argv[0], runErr)
	}

	// Convert its log, whatever its exit.
	if o.log != "" {
		if err := outfile.Copy(logPath, o.log); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	res, err := convertRecording(logPath, o, prog, argv)
	if err != nil {
		return err
	}
	printImportSummary(e.stderr, "recorded", res, o.out)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted: %s was stopped; the trace of its run until then was written to %s", prog, o.out)
	case runErr != nil:
		return fmt.Errorf("%s failed (%v); the trace of its run was written to %s", prog, runErr, o.out)
	}
	return nil
}

// convertRecording converts the log at logPath to o.out.
func convertRecording(logPath string, o *recordOptions, prog string, argv []string) (report.Conversion, error) {
	f, err := os.Open(logPath)
	if errors.Is(err, os.ErrNotExist) {
		return report.Conversion{}, fmt.Errorf("%s left no mtrace log: is it statically linked (Go programs often are), setuid, or not using glibc's malloc?", prog)
	}
	if err != nil {
		return report.Conversion{}, err
	}
	defer f.Close()
	name := o.name
	if name == "" {
		name = prog
	}
	command, _ := json.Marshal(argv) // a []string always marshals
	logName := o.log                 // what messages call the log
	if logName == "" {
		logName = "mtrace log"
	}
	var st mtrace.Stats
	err = outfile.Write(o.out, func(w io.Writer) error {
		var err error
		st, err = mtrace.Convert(f, logName, trace.NewWriter(w), mtrace.Options{
			Name:    name,
			Meta:    map[string]string{"command": string(command)},
			Lenient: true,
			NoAddr:  o.noAddr,
		})
		if err == nil && st.Starts == 0 {
			err = fmt.Errorf("%s left an empty mtrace log: was it killed before it started?", prog)
		}
		return err
	})
	if err != nil {
		return report.Conversion{}, err
	}
	res, _ := report.NewConversion(st)
	return res, nil
}
