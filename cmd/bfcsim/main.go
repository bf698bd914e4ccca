// Command bfcsim replays memory allocation traces against allocator designs
// and reports fragmentation, peak usage and latency.
//
// The command is thin: it parses flags, calls the trace, allocators, sim,
// search, report and diagnose packages (docs/architecture.md), draws
// progress bars on a terminal, and maps errors to exit codes:
// 0 success, 1 a comparison or regression check failed, 2 bad usage or bad
// input. Every error is printed once, as one line: "bfcsim: <what went wrong>".
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/term"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first Ctrl-C or SIGTERM asks the command to stop, and it
		// does, within a second, leaving no output behind; a second one is
		// not caught and ends the process at once.
		<-ctx.Done()
		stop()
		// A command that has not stopped a second later is held where
		// nothing wakes it (a write to a pipe nobody reads): it ends here.
		time.Sleep(interruptGrace)
		fmt.Fprintln(os.Stderr, "bfcsim: interrupted")
		os.Exit(exitBadInput)
	}()
	e := &env{
		stdin:    os.Stdin,
		stdout:   os.Stdout,
		stderr:   os.Stderr,
		progress: term.IsTerminal(int(os.Stderr.Fd())) && os.Getenv("CI") == "",
	}
	code := run(ctx, e, os.Args[1:])
	stop()
	os.Exit(code)
}

// interruptGrace is how long a command has to stop after an interrupt
// before the process ends regardless.
const interruptGrace = time.Second

// env is what a command may touch of the process: its standard streams and
// whether a progress bar may be drawn on stderr (a terminal, outside CI).
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	progress       bool
	// redraw is how often a progress bar is redrawn; 0 is every 100 ms.
	redraw time.Duration
}

// Exit codes.
const (
	exitOK       = 0
	exitFailed   = 1 // a comparison or regression check failed
	exitBadInput = 2 // bad usage or bad input
)

// exitError carries an exit code other than exitBadInput.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// run executes one command line and returns the exit code.
func run(ctx context.Context, e *env, args []string) int {
	root, endProfiles := newRootCmd(e)
	root.SetArgs(args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	err := root.ExecuteContext(ctx)
	if perr := endProfiles(); err == nil {
		err = perr
	}
	if err == nil {
		return exitOK
	}
	if errors.Is(err, context.Canceled) {
		err = errors.New("interrupted")
	}
	fmt.Fprintf(e.stderr, "bfcsim: %v\n", err)
	var xe *exitError
	if errors.As(err, &xe) {
		return xe.code
	}
	return exitBadInput
}
