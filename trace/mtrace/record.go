package mtrace

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// How a Recorder records (docs/recording.md explains `bfcsim record` for
// users):
//
//  1. Find a C compiler and compile recordStarter (record/starter.c) into
//     a shared object in a temporary directory (a few hundred lines of C,
//     so that bfcsim ships no binary; it takes a fraction of a second).
//  2. Run the command (Command) with it preloaded and MALLOC_TRACE naming
//     a log in the temporary directory; its standard streams are the
//     caller's to set (bfcsim record passes on its own). The starter
//     replaces malloc, free and the rest with functions that call glibc's
//     own (__libc_malloc, ...) and write each call to the log in glibc's
//     mtrace format, with the caller in the program: the first frame
//     outside the C and C++ runtime's libraries, so that what strdup or
//     operator new allocates is the program's line that called them, not
//     theirs.
//  3. The caller converts the log (Convert, with Options.Lenient: a
//     program that crashes leaves a torn last line).
//
// Only the started process is traced: its children would otherwise open
// the same log and truncate it. The starter traces only in a process whose
// parent is the one that ran Command (BFCSIM_RECORD_PARENT), and follows
// that process through exec (a launcher script that execs the real
// program, like pyenv's shims, is recorded as the program); a child it
// forks stops tracing before it can write into the parent's log.

// recordStarter is the C source of the preloaded starter.
//
//go:embed record/starter.c
var recordStarter string

// recordStopGrace is how long a program has to exit after the recorder
// passes on an interrupt, before it is killed.
const recordStopGrace = 10 * time.Second

// Recorder runs programs with the recording library preloaded: each
// writes its heap calls, in glibc's mtrace format, to Log.
type Recorder struct {
	dir     string // a temporary directory: the library and the log
	starter string // the library
}

// NewRecorder finds a C compiler (FindCompiler) and builds the recording
// library in a temporary directory, which Close removes.
func NewRecorder() (*Recorder, error) {
	cc, err := FindCompiler()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bfcsim-record-")
	if err != nil {
		return nil, err
	}
	r := &Recorder{dir: dir}
	if strings.ContainsAny(dir, " \t\n:") {
		r.Close()
		return nil, fmt.Errorf("the temporary directory %s has a space or colon in its path, which LD_PRELOAD cannot name: set TMPDIR to another directory", dir)
	}
	if r.starter, err = buildStarter(cc, dir); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Log is the path of the log a recorded program writes; it exists once the
// program has started.
func (r *Recorder) Log() string { return filepath.Join(r.dir, "mtrace.log") }

// Command returns the command that runs the program at path, as argv (its
// argv[0] is kept), recorded. The caller sets its standard streams and
// runs it; an interrupt (ctx done) is passed on to it, and it is killed if
// it has not exited recordStopGrace later.
func (r *Recorder) Command(ctx context.Context, path string, argv []string) *exec.Cmd {
	run := exec.CommandContext(ctx, path, argv[1:]...)
	run.Args[0] = argv[0]
	run.Env = recordEnv(os.Environ(), r.starter, r.Log())
	run.Cancel = func() error { return run.Process.Signal(os.Interrupt) }
	run.WaitDelay = recordStopGrace
	return run
}

// Close removes the library and the log.
func (r *Recorder) Close() error { return os.RemoveAll(r.dir) }

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

// FindCompiler returns the C compiler to build the starter with: $CC, or
// the first of cc, gcc and clang on the PATH.
func FindCompiler() (string, error) {
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
