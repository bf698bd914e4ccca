package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/mtrace"
)

// How `bfcsim record` works (docs/recording.md explains it for users):
//
//  1. Find a C compiler and compile recordStarter (record/starter.c) into
//     a shared object in a temporary directory (a few hundred lines of C,
//     so that bfcsim ships no binary; it takes a fraction of a second).
//  2. Run the command with it preloaded and MALLOC_TRACE naming a log in
//     the temporary directory, its standard streams bfcsim's own. The
//     starter replaces malloc, free and the rest with functions that call
//     glibc's own (__libc_malloc, ...) and write each call to the log in
//     glibc's mtrace format, with the caller in the program: the first
//     frame outside the C and C++ runtime's libraries, so that what
//     strdup or operator new allocates is the program's line that called
//     them, not theirs.
//  3. Convert the log with trace/mtrace, leniently (a program that crashes
//     leaves a torn last line), to the output trace.
//
// Only the started process is traced: its children would otherwise open the
// same log and truncate it. The starter traces only in a process whose
// parent is bfcsim, which also follows the process through exec (a launcher
// script that execs the real program, like pyenv's shims, is recorded as
// the program); a child it forks stops tracing before it can write into
// the parent's log.

// recordStarter is the C source of the preloaded starter.
//
//go:embed record/starter.c
var recordStarter string

// recordStopGrace is how long a program has to exit after bfcsim passes on
// an interrupt, before it is killed.
const recordStopGrace = 10 * time.Second

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
	cc, err := findCompiler()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bfcsim-record-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if strings.ContainsAny(dir, " \t\n:") {
		return fmt.Errorf("the temporary directory %s has a space or colon in its path, which LD_PRELOAD cannot name: set TMPDIR to another directory", dir)
	}
	starter, err := buildStarter(cc, dir)
	if err != nil {
		return err
	}
	logPath := filepath.Join(dir, "mtrace.log")

	// Run the program.
	ctx := cmd.Context()
	run := exec.CommandContext(ctx, path, argv[1:]...)
	run.Args[0] = argv[0]
	run.Stdin, run.Stdout, run.Stderr = e.stdin, e.stdout, e.stderr
	run.Env = recordEnv(os.Environ(), starter, logPath)
	run.Cancel = func() error { return run.Process.Signal(os.Interrupt) }
	run.WaitDelay = recordStopGrace
	runErr := run.Run()
	if run.ProcessState == nil { // it never started
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("running %s: %w", argv[0], runErr)
	}

	// Convert its log, whatever its exit.
	if o.log != "" {
		if err := copyFile(logPath, o.log); err != nil && !errors.Is(err, os.ErrNotExist) {
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

// recordEnv returns env with the starter preloaded, MALLOC_TRACE and the
// starter's parent pid set.
func recordEnv(env []string, starter, logPath string) []string {
	preload := starter
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "LD_PRELOAD":
			if v != "" {
				preload += " " + v
			}
		case "MALLOC_TRACE", "BFCSIM_RECORD_PARENT":
		default:
			out = append(out, kv)
		}
	}
	return append(out,
		"LD_PRELOAD="+preload,
		"MALLOC_TRACE="+logPath,
		"BFCSIM_RECORD_PARENT="+strconv.Itoa(os.Getpid()))
}

// convertRecording converts the log at logPath to o.out.
func convertRecording(logPath string, o *recordOptions, prog string, argv []string) (importResult, error) {
	f, err := os.Open(logPath)
	if errors.Is(err, os.ErrNotExist) {
		return importResult{}, fmt.Errorf("%s left no mtrace log: is it statically linked (Go programs often are), setuid, or not using glibc's malloc?", prog)
	}
	if err != nil {
		return importResult{}, err
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
	err = writeFileAtomic(o.out, func(w io.Writer) error {
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
		return importResult{}, err
	}
	return mtraceResult(st), nil
}

// findCompiler returns the C compiler to build the starter with: $CC, or
// the first of cc, gcc and clang on the PATH.
func findCompiler() (string, error) {
	if cc := os.Getenv("CC"); cc != "" {
		path, err := exec.LookPath(cc)
		if err != nil {
			return "", fmt.Errorf("$CC is %q, which cannot be run: %w", cc, err)
		}
		return path, nil
	}
	for _, cc := range []string{"cc", "gcc", "clang"} {
		if path, err := exec.LookPath(cc); err == nil {
			return path, nil
		}
	}
	return "", errors.New("record needs a C compiler (cc, gcc or clang on the PATH, or $CC) to build the library it preloads; install one, or record by hand as docs/recording.md shows")
}

// buildStarter compiles recordStarter into dir and returns the shared
// object's path.
func buildStarter(cc, dir string) (string, error) {
	src := filepath.Join(dir, "bfcsim-record.c")
	so := filepath.Join(dir, "bfcsim-record.so")
	if err := os.WriteFile(src, []byte(recordStarter), 0o644); err != nil {
		return "", err
	}
	out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", so, src).CombinedOutput()
	if err != nil {
		msg, _, _ := strings.Cut(strings.TrimSpace(string(bytes.ToValidUTF8(out, nil))), "\n")
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("building the recording library with %s: %s", cc, msg)
	}
	return so, nil
}

// copyFile copies src to dst, atomically, compressed if dst ends in .gz or
// .zst.
func copyFile(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	return writeFileAtomic(dst, func(w io.Writer) error {
		if _, err := io.Copy(w, f); err != nil {
			return fmt.Errorf("writing %s: %w", dst, err)
		}
		return nil
	})
}
