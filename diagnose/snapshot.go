package diagnose

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/diagnose/pytorchoom"
	"github.com/bfcsim/bfcsim/report"
	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/input"
)

// SnapshotCheck is what `inspect MESSAGE --snapshot SNAPSHOT` adds to the
// reading of a PyTorch out-of-memory message: the snapshot of the same run
// replayed by the pytorch model under the limit the message describes,
// the call sites live at the failure, and whether other settings would
// have served the request.
type SnapshotCheck struct {
	Path string `json:"path"`
	// LimitBytes is what the model may reserve: the message's allowed
	// bytes, else the snapshot's own (held at the failure + free on the
	// device), else reserved + free from the message. LimitFrom says which.
	LimitBytes uint64 `json:"limit_bytes"`
	LimitFrom  string `json:"limit_from"`
	// Reproduced: the model under the recorded settings fails too;
	// SameAllocation: its only failure is the allocation the program
	// failed (the snapshot's oom entry).
	Reproduced     bool `json:"reproduced"`
	SameAllocation bool `json:"same_allocation"`
	// Failed is the model's first failed allocation under the recorded
	// settings: the request, why, and what was live, by call site.
	Failed *report.Held `json:"failed"`
	// WhatIfs are the same program and limit under other settings.
	WhatIfs []WhatIfCheck `json:"what_ifs"`
}

// WhatIfCheck is one setting tried: Served says every allocation was
// served, the one the program failed included.
type WhatIfCheck struct {
	Settings          string `json:"settings"`
	Served            bool   `json:"served"`
	FailedAllocs      int64  `json:"failed_allocs"`
	PeakReservedBytes uint64 `json:"peak_reserved_bytes"`
}

// snapshotWhatIfs are the settings tried against the failure, as
// PYTORCH_CUDA_ALLOC_CONF writes them and as --set takes them: the one
// PyTorch's message advises, and the two others that act on
// fragmentation.
var snapshotWhatIfs = []struct{ conf, key, value string }{
	{"expandable_segments:True", "expandable_segments", "true"},
	{"max_split_size_mb:128", "max_split_size_mb", "128"},
	{"garbage_collection_threshold:0.6", "garbage_collection_threshold", "0.6"},
}

// CheckSnapshot replays the snapshot at path ("-" for stdin) against the
// message rep: under the limit the message describes, with the recorded
// settings and then with each of snapshotWhatIfs.
func CheckSnapshot(ctx context.Context, path string, stdin io.Reader, rep *pytorchoom.Report) (*SnapshotCheck, error) {
	t, err := input.OpenFile(ctx, path, stdin, input.Options{CallSites: true, Device: -1})
	if err != nil {
		return nil, err
	}
	defer t.Close()
	if t.Format != input.PyTorch && t.Format != input.Trace {
		return nil, fmt.Errorf("--snapshot %s: a PyTorch memory snapshot (or a trace imported from one) is needed, not %s", path, t.Format)
	}
	h := t.Header()
	setup, err := sim.SetupOf(h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c := &SnapshotCheck{Path: path}
	p := rep.PyTorch
	capacity := setup.Capacity(0)
	deviceHadRoom := rep.Figures["free"] != nil && rep.Figures["request"] != nil &&
		rep.Figures["free"].Bytes >= rep.Figures["request"].Bytes+rep.Figures["free"].Tolerance+rep.Figures["request"].Tolerance
	switch {
	case p.Allowed != nil:
		c.LimitBytes, c.LimitFrom = *p.Allowed, "the message's allowed bytes (a per-process memory limit)"
	case deviceHadRoom:
		// The device had room for the request, so what refused it was a
		// limit of the process's own, which the message does not print
		// (or the paste cut off): more than what PyTorch held reserved
		// at the failure, less than that plus the request. The top of
		// that range refuses the fewest other allocations.
		held, ok, err := reservedAtRecordedOOM(ctx, path, stdin)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("--snapshot %s: the device had %s free for a request of %s, so a per-process limit refused it; the message does not print it, and the snapshot has no out-of-memory entry to infer it from",
				path, rep.Figures["free"].Printed, rep.Figures["request"].Printed)
		}
		c.LimitBytes = held + rep.Figures["request"].Bytes - rep.Figures["request"].Tolerance - 1
		c.LimitFrom = fmt.Sprintf("inferred: the device had %s free, so a per-process limit refused the request; at most the %s the snapshot holds reserved at the failure plus the request",
			rep.Figures["free"].Printed, report.Bytes(held))
	case setup.CapacityBytes > 0:
		c.LimitBytes, c.LimitFrom = setup.CapacityBytes, "the snapshot: what PyTorch held at its failure plus the free device memory it was told of"
	case p.Reserved != nil && p.Free != nil:
		c.LimitBytes, c.LimitFrom = *p.Reserved+*p.Free, "the message: reserved by PyTorch plus free on the device"
	default:
		return nil, fmt.Errorf("--snapshot %s: neither the message nor the snapshot says how much the program could reserve (no allowed bytes, no free memory, no out-of-memory entry in the snapshot)", path)
	}
	if p.TotalCapacity != nil && *p.TotalCapacity > capacity {
		capacity = *p.TotalCapacity
	}
	if c.LimitBytes > capacity {
		capacity = c.LimitBytes
	}
	limit := strconv.FormatUint(c.LimitBytes, 10)
	// The recorded settings first, on the trace open already, then each
	// what-if on the snapshot read again (an allocator runs once per
	// replay).
	replayWith := func(t *input.File, opts allocators.Options) (report.Result, report.Trace, error) {
		opts["memory_limit"] = limit
		cfg := sim.Config{
			Allocators: []sim.AllocatorSpec{{Name: "pytorch", Options: opts}},
			Space:      allocators.SpaceConfig{Kind: "virtual", Capacity: capacity},
		}
		setup.Apply(&cfg)
		results, err := sim.Replay(ctx, t, cfg)
		if err != nil {
			return report.Result{}, report.Trace{}, err
		}
		run := report.TraceRun{Name: path, Path: path, Header: h, Summary: t.Summary(), CapacityBytes: capacity, Space: "virtual",
			Results: results, CallSites: t.PeakCallSites(), Stacks: t.Stacks()}
		tr := report.Build([]report.TraceRun{run}).Traces[0]
		return tr.Results[0], tr, nil
	}
	recorded, _, err := replayWith(t, allocators.Options{})
	if err != nil {
		return nil, err
	}
	c.Reproduced = recorded.FailedAllocs > 0
	c.Failed = recorded.OOMExplained
	if m := recorded.RecordedOOMMatch; m != nil && m.Matched > 0 && recorded.FailedAllocs == m.Matched {
		c.SameAllocation = true
	}
	for _, w := range snapshotWhatIfs {
		if v, ok := setup.Recorded.Options[w.key]; ok && strings.EqualFold(v, w.value) {
			continue // the run had it already
		}
		again, err := input.OpenFile(ctx, path, stdin, input.Options{Device: -1})
		if err != nil {
			return nil, err
		}
		r, _, err := replayWith(again, allocators.Options{w.key: w.value})
		again.Close()
		if err != nil {
			return nil, err
		}
		c.WhatIfs = append(c.WhatIfs, WhatIfCheck{Settings: w.conf, Served: r.FailedAllocs == 0,
			FailedAllocs: r.FailedAllocs, PeakReservedBytes: r.PeakReservedBytes})
	}
	return c, nil
}

// WriteSnapshotCheck writes c as text, to follow the message's reading.
func WriteSnapshotCheck(w io.Writer, c *SnapshotCheck) {
	fmt.Fprintf(w, "\nwith the snapshot %s, replayed by the pytorch model under a limit of %s (%s):\n",
		c.Path, report.Bytes(c.LimitBytes), c.LimitFrom)
	if !c.Reproduced || c.Failed == nil {
		fmt.Fprintln(w, "  the recorded settings serve every allocation here: the failure is not reproduced (the snapshot may")
		fmt.Fprintln(w, "  not hold the failing run, or the limit may differ from what the program met)")
	} else {
		f := c.Failed
		which := "an allocation"
		if c.SameAllocation {
			which = "the allocation the program failed, and no other:"
		}
		fmt.Fprintf(w, "  the recorded settings fail too, %s %s at line %d (PyTorch's message names the size it asked the\n", which, report.Bytes(f.RequestBytes), f.Line)
		fmt.Fprintf(w, "  device for, the request rounded up to its block): %s\n", f.Verdict)
		fmt.Fprintf(w, "    %s.\n", f.Explanation)
		fmt.Fprintf(w, "  then %s reserved, %s live, %s cached free, the largest free range %s\n",
			report.Bytes(f.ReservedBytes), report.Bytes(f.LiveBytes), report.Bytes(f.CachedFreeBytes), report.Bytes(f.LargestFreeBytes))
		fmt.Fprintln(w, "  live at the failure, by call site:")
		for _, s := range f.CallSites {
			fmt.Fprintf(w, "    %10s  %s (%s)\n", report.Bytes(s.Bytes), s.CallSite, report.Plural(s.Count, "allocation", "allocations"))
		}
	}
	fmt.Fprintln(w, "  the same program under the same limit, with:")
	for _, wi := range c.WhatIfs {
		verdict := fmt.Sprintf("still fails (%s)", report.Plural(wi.FailedAllocs, "failed allocation", "failed allocations"))
		if wi.Served {
			verdict = "serves every allocation, the failed one included"
		}
		fmt.Fprintf(w, "    PYTORCH_CUDA_ALLOC_CONF=%-34s %s; peak reserved %s\n", wi.Settings, verdict, report.Bytes(wi.PeakReservedBytes))
	}
}

// reservedAtRecordedOOM reads the snapshot's trace up to the allocation
// the program failed (its trace.RecordedOOMMark) and returns the bytes its
// recorded segments held then; ok is false when it has no such mark.
func reservedAtRecordedOOM(ctx context.Context, path string, stdin io.Reader) (held uint64, ok bool, err error) {
	t, err := input.OpenFile(ctx, path, stdin, input.Options{Device: -1})
	if err != nil {
		return 0, false, err
	}
	defer t.Close()
	segs := map[uint64]uint64{}
	for t.Next() {
		ev := t.Event()
		switch ev.Op {
		case trace.OpReserve:
			segs[ev.Addr] = ev.Size
			held += ev.Size
		case trace.OpRelease:
			n := ev.Size
			if n == 0 {
				n = segs[ev.Addr]
			}
			delete(segs, ev.Addr)
			held -= min(n, held)
		case trace.OpMark:
			if trace.IsRecordedOOMMark(ev.Name) {
				return held, true, nil
			}
		}
	}
	return 0, false, t.Err()
}
