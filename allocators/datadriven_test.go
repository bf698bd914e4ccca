package allocators

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the scripts in testdata/. Commands:
//
//	new name=bfc capacity=1GiB [space=virtual] [space.KEY=VALUE ...] [KEY=VALUE ...]
//	                                  options as for --set space.KEY=VALUE and --set name.KEY=VALUE
//	alloc id=N size=BYTES [align=N]   prints the block, addresses relative to the space's base
//	free id=N
//	step
//	stats                             the allocator's own counters and the space's
//	chunks                            the pool chunk by chunk (ChunkWalker allocators)
//
// Rewrite the expected output with: go test ./allocators -run DataDriven -rewrite
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

type harness struct {
	a      Allocator
	sp     Space
	base   uint64
	blocks map[uint64]Block
}

func (h *harness) rel(addr uint64) string { return fmt.Sprintf("+%#x", addr-h.base) }

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "new":
		var name, capText string
		d.ScanArgs(t, "name", &name)
		d.ScanArgs(t, "capacity", &capText)
		capacity, err := ParseSize(capText)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		kind := "virtual"
		d.MaybeScanArgs(t, "space", &kind)
		opts, spaceOpts := Options{}, Options{}
		for _, arg := range d.CmdArgs {
			switch {
			case arg.Key == "name" || arg.Key == "capacity" || arg.Key == "space":
			case strings.HasPrefix(arg.Key, "space."):
				spaceOpts[strings.TrimPrefix(arg.Key, "space.")] = strings.Join(arg.Vals, ",")
			default:
				opts[arg.Key] = strings.Join(arg.Vals, ",")
			}
		}
		sp, err := NewSpace(SpaceConfig{Kind: kind, Capacity: capacity, Options: spaceOpts})
		if err != nil {
			return "error: " + err.Error()
		}
		a, eff, err := New(name, sp, opts)
		if err != nil {
			return "error: " + err.Error()
		}
		h.a, h.sp, h.blocks = a, sp, map[uint64]Block{}
		h.base, _ = sp.Bounds()
		return "options: " + formatMap(eff)

	case "alloc":
		var id, align uint64
		var sizeText string
		d.ScanArgs(t, "id", &id)
		d.ScanArgs(t, "size", &sizeText)
		d.MaybeScanArgs(t, "align", &align)
		size, err := ParseSize(sizeText)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		b, err := h.a.Allocate(size, align)
		if err != nil {
			if errors.Is(err, ErrOutOfMemory) {
				return "out of memory"
			}
			return "error: " + err.Error()
		}
		h.blocks[id] = b
		return fmt.Sprintf("id=%d addr=%s size=%d", id, h.rel(b.Addr), b.Size)

	case "free":
		var id uint64
		d.ScanArgs(t, "id", &id)
		b, ok := h.blocks[id]
		if !ok {
			d.Fatalf(t, "id %d is not allocated", id)
		}
		delete(h.blocks, id)
		if err := h.a.Free(b); err != nil {
			return "error: " + err.Error()
		}
		return "ok"

	case "reserve", "release":
		// A recorded program's segment_alloc/segment_map (reserve) or
		// segment_free/segment_unmap (release), at an offset from the base.
		o, ok := h.a.(SegmentObserver)
		if !ok {
			d.Fatalf(t, "%T does not observe recorded segments", h.a)
		}
		var offText, sizeText string
		d.ScanArgs(t, "at", &offText)
		d.MaybeScanArgs(t, "size", &sizeText)
		off, err := ParseSize(offText)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		var size uint64
		if sizeText != "" {
			if size, err = ParseSize(sizeText); err != nil {
				d.Fatalf(t, "%v", err)
			}
		}
		if d.Cmd == "reserve" {
			o.RecordedReserve(h.base+off, size, 0)
		} else {
			o.RecordedRelease(h.base+off, size)
		}
		return "ok"

	case "mark":
		// A mark of the trace: "start state", "recording starts", or
		// "oom: ..." before an allocation the recording failed.
		var name string
		d.ScanArgs(t, "name", &name)
		if r, ok := h.a.(Replayer); ok {
			r.Mark(strings.ReplaceAll(name, "_", " "))
		}
		return "ok"

	case "decisions":
		f, ok := h.a.(DecisionFollower)
		if !ok {
			d.Fatalf(t, "%T does not follow recorded decisions", h.a)
		}
		dec := f.Decisions()
		out := fmt.Sprintf("mode=%s following=%v followed=%d", dec.Mode, f.Following(), dec.Followed)
		if dec.Diverged {
			out += "\nreason: " + dec.Reason
		}
		return out

	case "step":
		if s, ok := h.a.(Stepper); ok {
			s.Step()
		}
		return "ok"

	case "stats":
		var sb strings.Builder
		if r, ok := h.a.(StatsReporter); ok {
			st := r.Stats()
			for _, k := range slices.Sorted(maps.Keys(st)) {
				fmt.Fprintf(&sb, "%s: %d\n", k, st[k])
			}
		}
		ss := h.sp.Stats()
		fmt.Fprintf(&sb, "space: reserved=%d peak=%d reserve_calls=%d failed=%d release_calls=%d\n",
			ss.ReservedBytes, ss.PeakReservedBytes, ss.ReserveCalls, ss.FailedReserves, ss.ReleaseCalls)
		if r, ok := h.a.(LargestFreeReporter); ok {
			fmt.Fprintf(&sb, "largest_free: %d\n", r.LargestFreeBytes())
		}
		return sb.String()

	case "chunks":
		w, ok := h.a.(ChunkWalker)
		if !ok {
			d.Fatalf(t, "%T cannot list chunks", h.a)
		}
		var sb strings.Builder
		w.WalkChunks(func(c Chunk) {
			state := "free bin=" + strconv.Itoa(c.Bin)
			if c.InUse {
				state = fmt.Sprintf("in use requested=%d", c.Requested)
			}
			fmt.Fprintf(&sb, "region %d %s size=%d %s\n", c.Region, h.rel(c.Addr), c.Size, state)
		})
		return sb.String()
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func formatMap(m map[string]any) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, " ")
}
