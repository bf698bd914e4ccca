package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// grown writes a copy of the trace at src with every allocation of the
// call site tag grown by add bytes: two traces that differ in one call
// site's sizes alone.
func grown(t *testing.T, src, tag string, add uint64) string {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	path := filepath.Join(t.TempDir(), "after.jsonl")
	out, err := os.Create(path)
	require.NoError(t, err)
	defer out.Close()
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		var ev map[string]any
		if strings.Contains(line, `"op":"alloc"`) && strings.Contains(line, `"tag":"`+tag+`"`) {
			require.NoError(t, json.Unmarshal([]byte(line), &ev))
			ev["size"] = ev["size"].(float64) + float64(add)
			b, err := json.Marshal(ev)
			require.NoError(t, err)
			line = string(b)
			n++
		}
		_, err := out.WriteString(line + "\n")
		require.NoError(t, err)
	}
	require.NoError(t, sc.Err())
	require.Positive(t, n, "no allocation of %s", tag)
	return path
}

type diffJSON struct {
	Before, After struct {
		Trace         string
		PeakLiveBytes int64  `json:"peak_live_bytes"`
		PeakStep      *int64 `json:"peak_step"`
	}
	PeakDelta  int64 `json:"peak_delta_bytes"`
	Allocators []struct {
		Allocator         string
		PeakReservedBytes [2]*uint64 `json:"peak_reserved_bytes"`
		MinCapacityBytes  [2]*uint64 `json:"min_capacity_bytes"`
	}
	CallSites []struct {
		CallSite    string `json:"call_site"`
		BeforeBytes int64  `json:"before_bytes"`
		AfterBytes  int64  `json:"after_bytes"`
		DeltaBytes  int64  `json:"delta_bytes"`
		BeforeCount int64  `json:"before_count"`
		AfterCount  int64  `json:"after_count"`
		Status      string
	} `json:"call_sites"`
	Exceeded []string
}

func runDiffJSON(t *testing.T, args ...string) (int, diffJSON, string) {
	t.Helper()
	code, stdout, stderr := cli(t, "", append([]string{"diff", "-q", "-f", "json", "-j", "2"}, args...)...)
	var d diffJSON
	if code != 2 {
		require.NoError(t, json.Unmarshal([]byte(stdout), &d), stdout)
	}
	return code, d, stderr
}

// Two traces that differ only in one call site's sizes: diff names that
// call site first, with what it grew by at the peak, and the call sites'
// differences add up to the difference of the peaks.
func TestDiffNamesTheCallSiteThatGrew(t *testing.T) {
	before := bundled + "transformer-train.jsonl"
	after := grown(t, before, "loss.log_softmax", 3<<20)
	code, d, stderr := runDiffJSON(t, before, after)
	require.Equal(t, 0, code, stderr)
	require.NotEmpty(t, d.CallSites)
	first := d.CallSites[0]
	assert.Equal(t, "loss.log_softmax", first.CallSite)
	assert.Equal(t, int64(3<<20)*first.AfterCount, first.DeltaBytes, "3 MiB more for each of its allocations live at the peak")
	assert.Equal(t, first.BeforeCount, first.AfterCount)
	var sum int64
	for _, c := range d.CallSites {
		sum += c.DeltaBytes
		assert.Equal(t, c.AfterBytes-c.BeforeBytes, c.DeltaBytes, c.CallSite)
	}
	assert.Equal(t, d.After.PeakLiveBytes-d.Before.PeakLiveBytes, d.PeakDelta)
	assert.Equal(t, d.PeakDelta, sum, "the call sites' differences add up to the peaks'")
	assert.Positive(t, d.PeakDelta)
	require.NotNil(t, d.Before.PeakStep, "the bundled trace marks its steps")
	require.NotEmpty(t, d.Allocators)
	for _, a := range d.Allocators {
		assert.NotNil(t, a.PeakReservedBytes[0], a.Allocator)
		assert.NotNil(t, a.MinCapacityBytes[1], a.Allocator)
	}

	// Beyond --max-growth: exit 1, and the Markdown names the call site.
	code, stdout, stderr := cli(t, "", "diff", "-q", "-f", "markdown", before, after, "--max-growth", "0.01%")
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "grew beyond --max-growth 0.01%: peak live bytes")
	assert.Contains(t, stdout, "**Grew beyond `--max-growth 0.01%`:**")
	assert.Contains(t, stdout, "| `loss.log_softmax` |")
	// Within it: exit 0.
	code, _, stderr = runDiffJSON(t, before, after, "--max-growth", "64MiB")
	assert.Equal(t, 0, code, stderr)
}

// The same trace twice: no difference anywhere, and exit 0 under any
// --max-growth.
func TestDiffOfIdenticalTraces(t *testing.T) {
	tr := bundled + "cnn-infer.jsonl"
	code, d, stderr := runDiffJSON(t, tr, tr, "--max-growth", "0%")
	require.Equal(t, 0, code, stderr)
	assert.Zero(t, d.PeakDelta)
	assert.Empty(t, d.Exceeded)
	require.NotEmpty(t, d.CallSites)
	for _, c := range d.CallSites {
		assert.Zero(t, c.DeltaBytes, c.CallSite)
		assert.Empty(t, c.Status, c.CallSite)
	}
	for _, a := range d.Allocators {
		assert.Equal(t, *a.PeakReservedBytes[0], *a.PeakReservedBytes[1], a.Allocator)
		assert.Equal(t, *a.MinCapacityBytes[0], *a.MinCapacityBytes[1], a.Allocator)
	}
	code, stdout, _ := cli(t, "", "diff", "-q", tr, tr)
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "no call site holds more or less at the peak")
}

// A call site live at one peak alone is new, or vanished; -o writes the
// report, the Markdown and the page, with each call site's stack.
func TestDiffNewAndVanishedSitesAndItsDirectory(t *testing.T) {
	dir := t.TempDir()
	// The same run but for one buffer, live at the peak: of its call
	// site and size.
	write := func(name, buffer string) string {
		p := filepath.Join(dir, name)
		text := `{"bfcsim_trace":1,"name":"run","capacity":1073741824}
{"op":"frame","id":1,"name":"forward","file":"model.py","line":12}
{"op":"stack","id":1,"frames":[1]}
{"op":"alloc","id":1,"size":1048576,"tag":"weights"}
{"op":"step","name":"1"}
` + buffer + `
{"op":"alloc","id":3,"size":2097152,"stack":1}
{"op":"free","id":2}
{"op":"free","id":3}
`
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	before := write("before.jsonl", `{"op":"alloc","id":2,"size":4096,"tag":"old_buffer"}`)
	after := write("after.jsonl", `{"op":"alloc","id":2,"size":8192,"tag":"kv_cache"}`)
	out := filepath.Join(dir, "out")
	code, d, stderr := runDiffJSON(t, before, after, "-a", "bfc,naive", "-o", out)
	require.Equal(t, 0, code, stderr)
	status := map[string]string{}
	for _, c := range d.CallSites {
		status[c.CallSite] = c.Status
	}
	assert.Equal(t, "new", status["kv_cache"])
	assert.Equal(t, "vanished", status["old_buffer"])
	assert.Equal(t, "kv_cache", d.CallSites[0].CallSite)
	assert.Equal(t, "old_buffer", d.CallSites[len(d.CallSites)-1].CallSite)
	assert.Equal(t, int64(4096), d.PeakDelta)
	require.NotNil(t, d.After.PeakStep)
	assert.Equal(t, int64(1), *d.After.PeakStep)

	for _, f := range []string{"report.json", "report.md", "index.html", "timeline.svg", "timeline.png"} {
		assert.FileExists(t, filepath.Join(out, f))
	}
	page, err := os.ReadFile(filepath.Join(out, "index.html"))
	require.NoError(t, err)
	assert.Contains(t, string(page), `title="forward (model.py:12)"`, "the stack on hover")
	assert.Contains(t, string(page), "data:image/svg+xml;base64,", "the plot")
	saved, err := os.ReadFile(filepath.Join(out, "report.json"))
	require.NoError(t, err)
	assert.Contains(t, string(saved), `"bfcsim_diff": 1`)
}

func TestDiffRefusals(t *testing.T) {
	tr := bundled + "cnn-infer.jsonl"
	assertUsageError(t, []string{"diff", tr}, "accepts 2 arg(s)")
	assertUsageError(t, []string{"diff", tr, tr, "--max-growth", "lots"}, "--max-growth")
	assertUsageError(t, []string{"diff", tr, "-"}, "give files")
	assertUsageError(t, []string{"diff", tr, tr, "-f", "yaml"}, "unknown format")
}

// compare --baseline names the call sites that grew at the peak when its
// baseline holds peak_call_sites, as diff does.
func TestCompareNamesTheCallSitesThatGrew(t *testing.T) {
	before := bundled + "transformer-train.jsonl"
	after := grown(t, before, "loss.log_softmax", 3<<20)
	base := filepath.Join(t.TempDir(), "base.json")
	code, _, stderr := cli(t, "", "replay", "-q", before, "-a", "bfc", "-o", filepath.Dir(base)+"/out")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, os.Rename(filepath.Dir(base)+"/out/report.json", base))
	code, stdout, stderr := cli(t, "", "compare", "-q", after, "-a", "bfc", "--baseline", base)
	require.Contains(t, []int{0, 1}, code, stderr)
	assert.Contains(t, stdout, "Live at the peak, by call site, against")
	assert.Contains(t, stdout, "| `loss.log_softmax` | 484.38 MiB | 487.38 MiB | **+3.00 MiB** | 1 → 1 |")
	code, stdout, _ = cli(t, "", "compare", "-q", before, "-a", "bfc", "--baseline", base)
	assert.Equal(t, 0, code)
	assert.NotContains(t, stdout, "Live at the peak", "nothing changed")
}

// Two H100 recordings of one script under two settings: the same call
// sites at the same peak, which falls after the optimizer's zero_grad
// (the recording's external_annotations), and the expandable segments'
// smaller fit.
func TestDiffOfTwoRecordings(t *testing.T) {
	code, stdout, stderr := cli(t, "", "diff", "-q", "-a", "pytorch", "-f", "json",
		bundled+"h100/train-default.pickle.gz", bundled+"h100/train-expandable.pickle.gz")
	require.Equal(t, 0, code, stderr)
	var d struct {
		Before, After struct {
			PeakMark string `json:"peak_mark"`
		}
		Allocators []struct {
			MinCapacityBytes [2]uint64 `json:"min_capacity_bytes"`
		}
		CallSites []struct {
			DeltaBytes int64 `json:"delta_bytes"`
		} `json:"call_sites"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &d))
	assert.Equal(t, "Optimizer.zero_grad#AdamW.zero_grad (end)", d.Before.PeakMark)
	assert.Equal(t, d.Before.PeakMark, d.After.PeakMark)
	require.Len(t, d.Allocators, 1)
	assert.Equal(t, [2]uint64{14615052288, 14556332032}, d.Allocators[0].MinCapacityBytes, "the H100's smallest limits, as fit finds them")
	require.NotEmpty(t, d.CallSites)
	for _, c := range d.CallSites {
		assert.Zero(t, c.DeltaBytes)
	}
}
