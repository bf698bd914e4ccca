package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/bfcsim/bfcsim/internal/browsertest"
	"github.com/bfcsim/bfcsim/report"
)

// cppStacks is the H100 recording made with PyTorch's default stacks, C++
// and Python frames (traces/h100/README.md).
const cppStacks = bundled + "h100/train-cppstacks.pickle.gz"

// TestPeakCallSitesOnCppStacks: on a recording whose every stack starts in
// the unwinder and runs through PyTorch, transformers and the interpreter,
// the call site holding the most at the peak is a line of the training
// script, the rows add up to the peak, and the pytorch model's reserved
// bytes at their peak match what the GPU measured.
func TestPeakCallSitesOnCppStacks(t *testing.T) {
	code, out, stderr := cli(t, "", "replay", cppStacks, "-a", "pytorch", "-f", "json", "-q")
	require.Equal(t, 0, code, stderr)
	var rep report.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	tr := rep.Traces[0]
	require.NotEmpty(t, tr.PeakCallSites)
	top := tr.PeakCallSites[0]
	assert.Contains(t, top.CallSite, "(torch_worker.py:", "the training script's own line holds the most at the peak")
	assert.NotContains(t, top.CallSite, "unwind")
	require.NotEmpty(t, top.Stack, "the call site comes with its stack")
	assert.Contains(t, top.Stack[0], "torch::unwind::unwind()", "innermost first")
	var sum uint64
	for _, c := range tr.PeakCallSites {
		sum += c.Bytes
		assert.NotContains(t, c.CallSite, "torch::unwind", "no call site is the unwinder")
	}
	assert.Equal(t, tr.PeakLiveBytes, sum)

	var truth struct {
		Stats map[string]uint64 `json:"memory_stats_at_end_of_recorded_run"`
	}
	data, err := os.ReadFile(bundled + "h100/train-cppstacks.truth.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &truth))
	h := tr.Results[0].ReservedAtPeak
	require.NotNil(t, h)
	assert.Equal(t, truth.Stats["reserved_bytes.all.peak"], h.ReservedBytes, "reserved at the peak, as the H100 measured")
	assert.Equal(t, truth.Stats["requested_bytes.all.peak"], tr.PeakLiveBytes, "requested bytes at the peak, as the H100 measured")
	assert.Equal(t, h.ReservedBytes, h.InUseBytes+h.CachedFreeBytes)
	require.NotEmpty(t, h.FreeRanges)

	// --frames names other code as the user's: here transformers' own
	// modules, whose lines then stand for the forward pass.
	code, out, stderr = cli(t, "", "replay", cppStacks, "-a", "pytorch", "-f", "json", "-q", "--frames", "transformers/models/")
	require.Equal(t, 0, code, stderr)
	rep = report.Report{}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	names := []string{}
	for _, c := range rep.Traces[0].PeakCallSites {
		names = append(names, c.CallSite)
	}
	assert.True(t, strings.Contains(strings.Join(names, "\n"), "(modeling_gpt2.py:"), "with --frames the model's file is the user's: %v", names)
}

// TestImportKeepsStacks: import writes the stack table, and tags each
// allocation with its call site.
func TestImportKeepsStacks(t *testing.T) {
	out := filepath.Join(t.TempDir(), "t.jsonl")
	code, _, stderr := cli(t, "", "import", "pytorch", cppStacks, "-o", out, "-q")
	require.Equal(t, 0, code, stderr)
	text := readTraceText(t, out)
	assert.Contains(t, text, `{"op":"frame","id":1,`)
	assert.Contains(t, text, `{"op":"stack","id":1,"frames":[`)
	assert.NotContains(t, text, `"tag":"torch::unwind::unwind()`)
	assert.Contains(t, text, `"tag":"run (torch_worker.py:46)","stack":`)
}

// TestExploreStacksInBrowser hovers the largest block of the C++-stack
// recording in a real browser: the tooltip shows its call site and whole
// stack, the legend names the call sites the colours stand for, and the
// page has the peak's call-site table.
func TestExploreStacksInBrowser(t *testing.T) {
	out := t.TempDir()
	code, _, stderr := cli(t, "", "replay", cppStacks, "-a", "pytorch", "-q", "-o", out)
	require.Equal(t, 0, code, stderr)
	index := filepath.Join(out, "index.html")
	html := readTraceText(t, index)
	assert.Contains(t, html, "Live at the peak (13.43 GiB), by call site")
	assert.Contains(t, html, "Reserved at its peak")
	var data struct {
		Traces []struct {
			ID         string   `json:"id"`
			Frames     []string `json:"frames"`
			Stacks     [][]int  `json:"stacks"`
			Allocators []struct {
				Blocks struct {
					S, I []uint64
					B, E []int64
					G, K []int
					Tags []string
				} `json:"blocks"`
			} `json:"allocators"`
		} `json:"traces"`
	}
	const open = `<script type="application/json" id="bfcsim-data">`
	rest := html[strings.Index(html, open)+len(open):]
	require.NoError(t, json.Unmarshal([]byte(rest[:strings.Index(rest, "</script>")]), &data))
	tr := data.Traces[0]
	b := tr.Allocators[0].Blocks
	k := 0
	for i := range b.S {
		if b.S[i]*uint64(b.E[i]-b.B[i]) > b.S[k]*uint64(b.E[k]-b.B[k]) {
			k = i
		}
	}
	require.GreaterOrEqual(t, b.K[k], 0, "the block has its stack")
	stack := tr.Stacks[b.K[k]]
	site := b.Tags[b.G[k]]

	shot := filepath.Join(t.TempDir(), "explore-stacks.png")
	if dir := os.Getenv("BFCSIM_ARTIFACTS"); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		shot = filepath.Join(dir, "explore-stacks.png")
	}
	view := `bfcsimView.find("` + tr.ID + `")`
	type point struct{ X, Y float64 }
	browsertest.Drive(t, index, func(ctx context.Context) error {
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("`+tr.ID+`-explore").scrollIntoView(); true`)); err != nil {
			return err
		}
		p, err := chromedp.Run(ctx, chromedp.Evaluate[point](`(() => { const c = `+view+`.blockCenter(`+jsonOf(b.I[k])+`); return {X: c.x, Y: c.y}; })()`))
		if err != nil {
			return err
		}
		if err := chromedp.Do(ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, p.X, p.Y)); err != nil {
			return err
		}
		tip, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const t = document.querySelector("#`+tr.ID+`-explore .x-tip"); return t.hidden ? "" : t.textContent; })()`))
		if err != nil {
			return err
		}
		assert.Contains(t, tip, site, "the tooltip names the call site")
		assert.Contains(t, tip, "stack, innermost first (")
		assert.Contains(t, tip, tr.Frames[stack[0]], "and shows the stack")
		assert.Contains(t, tip, "→ "+site, "with the call site's frame marked, however far out it lies")
		png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS("#"+tr.ID+"-explore")))
		if err != nil {
			return err
		}
		if err := os.WriteFile(shot, png, 0o644); err != nil {
			return err
		}
		legend, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#`+tr.ID+`-explore .x-legend").textContent`))
		if err != nil {
			return err
		}
		assert.Contains(t, legend, "(torch_worker.py:", "the legend names the call sites coloured")
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](view+`.setColour("size"); true`)); err != nil {
			return err
		}
		legend, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#`+tr.ID+`-explore .x-legend").textContent`))
		if err != nil {
			return err
		}
		assert.Empty(t, legend, "coloured by size, no call-site legend")
		return nil
	})
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestEmptyReplayWarns: a trace with no allocation replays to a report of
// zeros, and says so, even with -q.
func TestEmptyReplayWarns(t *testing.T) {
	code, _, stderr := cli(t, `{"op":"mark","name":"x"}`+"\n", "replay", "-", "-a", "bfc", "-q")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "warning: standard input has no allocations")
}

// TestInspectH100MessagesWithSnapshots reads each real out-of-memory
// message the H100 raised (cut at 300 characters by the recording script)
// with the snapshot of the same failing run: the pytorch model, under the
// limit the message gives or implies, fails the very allocation the
// program failed, and the limit inferred from a message that does not
// print one brackets the limit the run was given.
func TestInspectH100MessagesWithSnapshots(t *testing.T) {
	for _, name := range []string{"train-default", "train-expandable", "resnet-default", "resnet-expandable"} {
		t.Run(name, func(t *testing.T) {
			msg := "../../diagnose/pytorchoom/testdata/h100-" + name + ".txt"
			code, out, stderr := cli(t, "", "inspect", msg, "--snapshot", bundled+"h100/"+name+"-oom.pickle.gz", "-f", "json")
			require.Equal(t, 0, code, stderr)
			var rep struct {
				Explanation struct {
					Verdict string `json:"verdict"`
				} `json:"explanation"`
				Snapshot struct {
					LimitBytes     uint64 `json:"limit_bytes"`
					LimitFrom      string `json:"limit_from"`
					Reproduced     bool   `json:"reproduced"`
					SameAllocation bool   `json:"same_allocation"`
					Failed         struct {
						RequestBytes uint64           `json:"request_bytes"`
						CallSites    []map[string]any `json:"call_sites"`
					} `json:"failed"`
					WhatIfs []struct {
						Settings string `json:"settings"`
						Served   bool   `json:"served"`
					} `json:"what_ifs"`
				} `json:"snapshot"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &rep))
			assert.Equal(t, "limit", rep.Explanation.Verdict)
			s := rep.Snapshot
			assert.True(t, s.Reproduced, "the model fails too")
			assert.True(t, s.SameAllocation, "at the allocation the program failed, and no other")
			require.NotEmpty(t, s.Failed.CallSites)
			assert.Contains(t, s.Failed.CallSites[0]["call_site"], "torch_worker.py:", "the script holds the most at the failure")
			require.NotEmpty(t, s.WhatIfs)
			for _, w := range s.WhatIfs {
				if strings.HasSuffix(name, "expandable") {
					assert.NotContains(t, w.Settings, "expandable_segments", "not tried again: the run had it")
				}
			}

			var truth struct {
				Limit uint64 `json:"oom_recording_limit"`
			}
			data, err := os.ReadFile(bundled + "h100/" + name + ".truth.json")
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(data, &truth))
			// The limit printed ("4.44 GiB") is good to its rounding; an
			// inferred one lies between what was reserved and that plus
			// the request, and bfcsim takes the top: within a request.
			assert.InDelta(t, float64(truth.Limit), float64(s.LimitBytes), float64(max(s.Failed.RequestBytes, 6<<20)), s.LimitFrom)

			// The H100 ran the same program with expandable segments under
			// less than the limit this run failed at: the what-if says it
			// would have served, as the hardware did.
			if base, ok := strings.CutSuffix(name, "-default"); ok {
				var other struct {
					Ran uint64 `json:"smallest_limit_that_ran"`
				}
				data, err := os.ReadFile(bundled + "h100/" + base + "-expandable.truth.json")
				require.NoError(t, err)
				require.NoError(t, json.Unmarshal(data, &other))
				require.Less(t, other.Ran, truth.Limit)
				assert.Equal(t, "expandable_segments:True", s.WhatIfs[0].Settings)
				assert.True(t, s.WhatIfs[0].Served, "expandable segments ran in %d bytes on the H100, under this run's failing %d", other.Ran, truth.Limit)
			}
		})
	}
}
