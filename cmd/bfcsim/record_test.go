package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/mtrace"
)

// requireRecorder skips the test where bfcsim record cannot work (no C
// compiler, no sort), except in CI, where every
// test must run.
func requireRecorder(t *testing.T) {
	t.Helper()
	_, err := mtrace.FindCompiler()
	if err == nil {
		_, err = exec.LookPath("sort")
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("bfcsim record must work in CI: %v", err)
		}
		t.Skipf("skipping bfcsim record tests: %v", err)
	}
	t.Setenv("LC_ALL", "C")
}

// numbers writes n numbers, one a line, in a scrambled order.
func numbers(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%d\n", (i*7919)%n)
	}
	return writeFile(t, "numbers.txt", b.String())
}

// tagsOf returns how many allocs carry each tag.
func tagsOf(evs []trace.Event) map[string]int {
	tags := map[string]int{}
	for _, ev := range evs {
		if ev.Op == trace.OpAlloc {
			tags[ev.Tag]++
		}
	}
	return tags
}

// hasTagPrefix reports whether a tag starts with prefix.
func hasTagPrefix(tags map[string]int, prefix string) bool {
	for tag := range tags {
		if strings.HasPrefix(tag, prefix) {
			return true
		}
	}
	return false
}

func TestRecordSort(t *testing.T) {
	requireRecorder(t)
	in := numbers(t, 2000)
	dir := t.TempDir()
	out := filepath.Join(dir, "sort.jsonl")
	log := filepath.Join(dir, "sort.mtrace.gz")
	code, stdout, stderr := cli(t, "", "record", "-o", out, "--log", log, "--", "sort", "-n", in)
	require.Equal(t, 0, code, stderr)

	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 2000, "the program's output is passed through")
	assert.Equal(t, "0", lines[0])
	assert.Equal(t, "1999", lines[1999])
	assert.Regexp(t, `^recorded [\d,]+ events \([\d,]+ allocs, [\d,]+ frees[;)].*, peak live .*, to `+out+"\n$", stderr)

	h, evs, sum := readTrace(t, out)
	assert.Equal(t, "sort", h.Name)
	assert.Equal(t, "mtrace", h.Source)
	assert.Equal(t, fmt.Sprintf(`["sort","-n",%q]`, in), h.Meta["command"])
	assert.Greater(t, sum.Allocs, int64(5))
	assert.Positive(t, sum.Frees)
	tags := tagsOf(evs)
	assert.True(t, hasTagPrefix(tags, "sort+0x"), "sort's own call sites are tags: %v", tags)
	for _, ev := range evs {
		if ev.Op == trace.OpAlloc {
			require.NotZero(t, ev.Flags&trace.HasAddr, "allocs carry the recorded address")
		}
	}

	// The kept log converts to the same trace.
	again := filepath.Join(dir, "again.jsonl")
	code, _, stderr = cli(t, "", "import", "mtrace", log, "-o", again, "--name", "sort")
	require.Equal(t, 0, code, stderr)
	_, evs2, _ := readTrace(t, again)
	assert.Equal(t, len(evs), len(evs2))

	// And it replays with every allocator.
	code, _, stderr = cli(t, "", "replay", out, "-a", "bfc,arena,aligned,naive")
	assert.Equal(t, 0, code, stderr)
}

// Only the process started is traced: through exec, and not into children.
func TestRecordFollowsExecNotChildren(t *testing.T) {
	requireRecorder(t)
	in := numbers(t, 100)
	dir := t.TempDir()

	out := filepath.Join(dir, "exec.jsonl")
	code, stdout, stderr := cli(t, "", "record", "-o", out, "--", "sh", "-c", `exec sort -n "$0"`, in)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, 100, strings.Count(stdout, "\n"))
	h, evs, _ := readTrace(t, out)
	assert.Equal(t, "sh", h.Name)
	assert.True(t, hasTagPrefix(tagsOf(evs), "sort+0x"), "sort, which sh became, is recorded")

	out = filepath.Join(dir, "child.jsonl")
	code, stdout, stderr = cli(t, "", "record", "-o", out, "--", "sh", "-c", `sort -n "$0"; true`, in)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, 100, strings.Count(stdout, "\n"))
	_, evs, _ = readTrace(t, out)
	assert.False(t, hasTagPrefix(tagsOf(evs), "sort+0x"), "sort, a child of sh, is not recorded")
}

func TestRecordFailingProgram(t *testing.T) {
	requireRecorder(t)
	out := filepath.Join(t.TempDir(), "fail.jsonl.zst")
	missing := filepath.Join(t.TempDir(), "missing.txt")
	code, stdout, stderr := cli(t, "", "record", "-o", out, "--", "sort", missing)
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Regexp(t, "(?m)^sort: .*"+regexp.QuoteMeta(missing), stderr, "the program's own error is passed through")
	assert.Contains(t, stderr, "bfcsim: sort failed (exit status 2); the trace of its run was written to "+out+"\n")
	_, _, sum := readTrace(t, out)
	assert.Positive(t, sum.Allocs, "what it allocated before failing is kept")
}

func TestRecordUsageErrors(t *testing.T) {
	assertUsageError(t, []string{"record"}, "record needs a command to run: bfcsim record [-o OUTPUT] -- COMMAND [ARGS...]")
	assertUsageError(t, []string{"record", "-o", "-", "--", "true"}, "record writes the trace to a file (-o), not to standard output")
	assertUsageError(t, []string{"record", "-o", t.TempDir(), "--", "true"}, "is a directory")
	assertUsageError(t, []string{"record", "-o", filepath.Join(t.TempDir(), "x.jsonl"), "--", "no-such-program-bfcsim"},
		`cannot run no-such-program-bfcsim: exec: "no-such-program-bfcsim": executable file not found in $PATH`)
}

func TestRecordWithoutCompiler(t *testing.T) {
	t.Setenv("CC", filepath.Join(t.TempDir(), "no-cc"))
	assertUsageError(t, []string{"record", "-o", filepath.Join(t.TempDir(), "x.jsonl"), "--", "true"}, "$CC is ")
}

// The recorded bundled traces are what the commands in traces/README.md
// record, byte for byte, on the system they were recorded on: Debian 12, with
// glibc 2.36 and the sqlite3 shell 3.40.1 (Debian 12's package sqlite3). The
// versions matter because the trace is the heap of that very build: another
// SQLite allocates other sizes in another order, and another glibc (its
// startup, stdio and mtrace) adds or moves allocations, so the trace would
// differ though both were right. Elsewhere the test is skipped; in CI
// (where $CI is set) it fails instead, since CI must run it.
func TestBundledRecordingsAreReproducible(t *testing.T) {
	requireRecorder(t)
	unavailable := func(t *testing.T, format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") != "" {
			t.Fatalf("the bundled recordings must be checked in CI: %s", msg)
		}
		t.Skipf("skipping: %s", msg)
	}
	readme, err := os.ReadFile(bundled + "README.md")
	require.NoError(t, err)
	cmds := regexp.MustCompile("`bfcsim (record -o traces/([a-z-]+\\.jsonl) [^`]+)`").FindAllStringSubmatch(string(readme), -1)
	require.Len(t, cmds, 1)
	// The program each recording ran, how to ask its version, and the
	// version it was recorded with.
	versions := map[string]struct{ cmd, want, install string }{
		"sqlite-orders.jsonl": {"sqlite3 --version", "3.40.1 ", "Debian 12's package sqlite3 (3.40.1)"},
	}
	libc, err := exec.Command("getconf", "GNU_LIBC_VERSION").Output()
	if err != nil || strings.TrimSpace(string(libc)) != "glibc 2.36" {
		unavailable(t, "the recordings were made with glibc 2.36 (Debian 12); this system has %q", strings.TrimSpace(string(libc)))
	}
	t.Chdir("../..") // the commands run from the repository's root
	for _, m := range cmds {
		args, name := strings.Fields(m[1]), m[2]
		t.Run(name, func(t *testing.T) {
			v, ok := versions[name]
			require.True(t, ok, "the test knows which program version recorded %s", name)
			fields := strings.Fields(v.cmd)
			got, err := exec.Command(fields[0], fields[1:]...).Output()
			if err != nil || !strings.HasPrefix(string(got), v.want) {
				have := fmt.Sprintf("this system has %q", strings.TrimSpace(string(got)))
				if err != nil {
					have = fmt.Sprintf("%s: %v", v.cmd, err)
				}
				unavailable(t, "%s was recorded with %s %s; %s: install %s",
					name, fields[0], strings.TrimSpace(v.want), have, v.install)
			}
			out := filepath.Join(t.TempDir(), name)
			args[2] = out // -o
			code, _, stderr := cli(t, "", args...)
			require.Equal(t, 0, code, stderr)
			want, err := os.ReadFile("traces/" + name)
			require.NoError(t, err)
			have, err := os.ReadFile(out)
			require.NoError(t, err)
			if n, w, h := firstDiff(string(want), string(have)); n > 0 {
				t.Errorf("traces/%s differs from `bfcsim %s` at line %d:\nbundled:  %s\nrecorded: %s", name, m[1], n, w, h)
			}
			assert.Less(t, len(want), 2<<20, "bundled traces stay under 2 MB")
		})
	}
}

// firstDiff returns the first line (1-based) where a and b differ, and the
// two lines; 0 if they are equal.
func firstDiff(a, b string) (int, string, string) {
	if a == b {
		return 0, "", ""
	}
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(la), len(lb)) {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y || i >= len(la) || i >= len(lb) {
			return i + 1, x, y
		}
	}
	return 1, "", "" // unreachable: a != b
}

// TestRecordPassesOverRuntimeWrappers: what strdup and operator new
// allocate is tagged with the program's own code that called them, not
// with the C and C++ runtime's functions glibc's mtrace names.
// buildAndRecord compiles src (file name, in the language its extension
// says) with compiler and flags into a program called prog, records it, and
// returns the trace's path and bfcsim's standard error.
func buildAndRecord(t *testing.T, compiler, prog, file, src string, flags ...string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	exe := filepath.Join(dir, prog)
	args := append(append([]string{"-O1"}, flags...), "-o", exe, writeFile(t, file, src))
	out, err := exec.Command(compiler, args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	trc := filepath.Join(dir, prog+".jsonl")
	code, _, stderr := cli(t, "", "record", "-o", trc, "--", exe)
	require.Equal(t, 0, code, stderr)
	return trc, stderr
}

func TestRecordPassesOverRuntimeWrappers(t *testing.T) {
	requireRecorder(t)
	cc, err := mtrace.FindCompiler()
	require.NoError(t, err)
	trc, _ := buildAndRecord(t, cc, "wrap", "wrap.c", `#include <stdlib.h>
#include <string.h>
char *keep[100];
__attribute__((noinline)) void make_names(void) {
	for (int i = 0; i < 50; i++) keep[i] = strdup("a name that is copied");
}
__attribute__((noinline)) void make_buffers(void) {
	for (int i = 50; i < 100; i++) keep[i] = malloc(1000 + i);
}
int main(void) { make_names(); make_buffers(); for (int i = 0; i < 100; i++) free(keep[i]); return 0; }
`)
	_, evs, sum := readTrace(t, trc)
	assert.EqualValues(t, sum.Allocs, sum.Frees, "every allocation freed, the ones libc frees at exit included")
	tags := tagsOf(evs)
	assert.False(t, hasTagPrefix(tags, "__strdup"), "not strdup's own call: %v", tags)
	var sites []string
	for tag, n := range tags {
		if strings.HasPrefix(tag, "wrap+0x") && n == 50 {
			sites = append(sites, tag)
		}
	}
	assert.Len(t, sites, 2, "the 50 strdups and the 50 mallocs each at their own line of the program: %v", tags)

	if cxx, err := exec.LookPath("g++"); err == nil {
		trc, _ := buildAndRecord(t, cxx, "wrapxx", "wrap.cc", `#include <string>
#include <vector>
__attribute__((noinline)) std::vector<std::string*> *make() {
	auto *v = new std::vector<std::string*>();
	for (int i = 0; i < 30; i++) v->push_back(new std::string(100, 'x'));
	return v;
}
int main() { auto *v = make(); for (auto *s : *v) delete s; delete v; }
`)
		_, evs, _ := readTrace(t, trc)
		tags := tagsOf(evs)
		assert.False(t, hasTagPrefix(tags, "_Znwm"), "not operator new: %v", tags)
		assert.True(t, hasTagPrefix(tags, "wrapxx+0x"), "the program's own code: %v", tags)
	}
}

// TestRecordThreads: eight threads allocating, reallocating and freeing at
// once leave a log whose every line converts: a realloc's two lines are
// written together, and an address realloc frees is logged before another
// thread's malloc of it.
func TestRecordThreads(t *testing.T) {
	requireRecorder(t)
	cc, err := mtrace.FindCompiler()
	require.NoError(t, err)
	trc, stderr := buildAndRecord(t, cc, "thr", "thr.c", `#include <pthread.h>
#include <stdlib.h>
#include <string.h>
static void *work(void *arg) {
	(void)arg;
	for (int i = 0; i < 5000; i++) {
		char *p = strdup("threaded");
		void *q = malloc(64 + i % 512);
		free(p);
		q = realloc(q, 2000);
		free(q);
	}
	return NULL;
}
int main(void) {
	pthread_t t[8];
	for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, work, NULL);
	for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
	return 0;
}
`, "-pthread")
	assert.NotContains(t, stderr, "invalid line", "every line of the log converts")
	assert.NotContains(t, stderr, "of live addresses")
	_, _, sum := readTrace(t, trc)
	assert.GreaterOrEqual(t, sum.Allocs, int64(8*5000*3), "the strdups, the mallocs and the reallocs' new blocks")
}
