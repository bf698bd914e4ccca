package pytorch

import (
	"context"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/bfcsim/bfcsim/trace"
)

// The importer's benchmarks read synthetic snapshots of the shape torch
// writes (WriteSynthetic), generated when the benchmark starts, never
// committed. -snapshot-entries sets their size: 20000000 is a 1.2 GB
// pickle, the size of a long training run's recording.
var benchEntries = flag.Int("snapshot-entries", 1_000_000, "trace entries in the synthetic snapshots BenchmarkImport reads (20000000: about 1.2 GB)")

// benchShapes are the snapshots measured: torch's shape with shared stacks
// (the target), with a list per allocation (what torch itself writes for
// unique stacks), and JSON.
func benchShapes(n int) []struct {
	name string
	opt  SyntheticOptions
} {
	perAlloc := DefaultSynthetic(n)
	perAlloc.SharedStacks = false
	js := DefaultSynthetic(n / 10) // JSON spells out every frame: keep it a tenth of the size
	js.JSON, js.Frames = true, 8
	return []struct {
		name string
		opt  SyntheticOptions
	}{
		{"shared-stacks", DefaultSynthetic(n)},
		{"per-alloc-stacks", perAlloc},
		{"json", js},
	}
}

// synthFile writes a synthetic snapshot into dir.
func synthFile(b *testing.B, dir string, opt SyntheticOptions) (string, int64) {
	b.Helper()
	path := filepath.Join(dir, "snapshot")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := WriteSynthetic(f, opt); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return path, st.Size()
}

// BenchmarkImport converts synthetic snapshots to a trace (written to
// io.Discard). MB/s is of the snapshot; peak-RSS-MB is the process's peak
// resident memory after the runs, generation included (it streams).
//
//	go test ./trace/pytorch -run XXX -bench Import -benchtime 1x -snapshot-entries 20000000
func BenchmarkImport(b *testing.B) {
	for _, shape := range benchShapes(*benchEntries) {
		b.Run(shape.name, func(b *testing.B) {
			path, size := synthFile(b, b.TempDir(), shape.opt)
			b.SetBytes(size)
			b.ResetTimer()
			for b.Loop() {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				st, err := Convert(context.Background(), f, trace.NewWriter(io.Discard), Options{Device: -1, TempDir: b.TempDir()})
				f.Close()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(st.Events)/float64(shape.opt.Entries), "events/entry")
			}
			b.ReportMetric(peakRSSMB(syscall.RUSAGE_SELF), "peak-RSS-MB")
		})
	}
}

// BenchmarkCPythonPickleLoad is the reference the importer is measured
// against: CPython's pickle.load of the same snapshots (pickle only),
// timed as a whole process, with its peak resident memory. It is skipped
// without python3.
func BenchmarkCPythonPickleLoad(b *testing.B) {
	python, err := exec.LookPath("python3")
	if err != nil {
		b.Skip("python3 not found")
	}
	for _, shape := range benchShapes(*benchEntries) {
		if shape.opt.JSON {
			continue
		}
		b.Run(shape.name, func(b *testing.B) {
			path, size := synthFile(b, b.TempDir(), shape.opt)
			b.SetBytes(size)
			var rss float64
			b.ResetTimer()
			for b.Loop() {
				cmd := exec.Command(python, "-c", "import pickle, sys; pickle.load(open(sys.argv[1], 'rb'))", path)
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
				if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
					rss = max(rss, float64(ru.Maxrss)/1024)
				}
			}
			b.ReportMetric(rss, "peak-RSS-MB")
		})
	}
}

// peakRSSMB is the peak resident memory of this process (or its waited-for
// children), in MiB.
func peakRSSMB(who int) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024 // Linux reports KiB
}
