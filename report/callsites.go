package report

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/bfcsim/bfcsim/sim"
	"github.com/bfcsim/bfcsim/trace"
)

// CallSite is what one call site held live: bytes and allocations. Stack
// is the frames of its largest stack, innermost first, when the trace
// carries stacks.
type CallSite struct {
	CallSite string   `json:"call_site"`
	Bytes    uint64   `json:"bytes"`
	Count    int64    `json:"count"`
	Stack    []string `json:"stack,omitempty"`
}

// TopCallSites is how many call sites a report names by name; the rest are
// summed in one more row.
const TopCallSites = 10

// Untagged names the allocations that carry neither tag nor stack (in a
// PyTorch snapshot recorded with Python stacks only, those the autograd
// engine makes on its own thread).
const Untagged = "(no call site recorded)"

// callSites turns what a trace's call sites held at its peak into the
// report's rows: one per call site (the rule names it from each stack, or
// the tag stands when there is none), largest first, the first top by
// name and the rest summed in a last row, so that the bytes add up to the
// peak.
func callSites(sites []trace.SiteBytes, st *trace.StackTable, rule trace.FrameRule, top int) []CallSite {
	if len(sites) == 0 {
		return nil
	}
	type acc struct {
		CallSite
		stack      uint32
		stackBytes uint64
	}
	by := map[string]*acc{}
	var order []*acc
	for _, s := range sites {
		name := siteName(s.Tag, s.Stack, st, rule)
		a := by[name]
		if a == nil {
			a = &acc{CallSite: CallSite{CallSite: name}}
			by[name] = a
			order = append(order, a)
		}
		a.Bytes += s.Bytes
		a.Count += s.Count
		if s.Stack != 0 && s.Bytes >= a.stackBytes {
			a.stack, a.stackBytes = s.Stack, s.Bytes
		}
	}
	slices.SortStableFunc(order, func(a, b *acc) int {
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(a.CallSite.CallSite, b.CallSite.CallSite)
	})
	out := make([]CallSite, 0, min(len(order), top+1))
	for i, a := range order {
		if i == top {
			rest := CallSite{CallSite: fmt.Sprintf("(%d other call sites)", len(order)-top)}
			for _, b := range order[top:] {
				rest.Bytes += b.Bytes
				rest.Count += b.Count
			}
			out = append(out, rest)
			break
		}
		a.Stack = stackText(st, a.stack)
		out = append(out, a.CallSite)
	}
	return out
}

// siteName names the call site of an allocation: from its stack by the
// rule when the trace has it, else its tag.
func siteName(tag string, stack uint32, st *trace.StackTable, rule trace.FrameRule) string {
	if stack != 0 {
		if fr := st.Frames(stack); len(fr) > 0 {
			if s := rule.CallSite(fr); s != "" {
				return s
			}
		}
	}
	if tag == "" {
		return Untagged
	}
	return tag
}

// maxStackText is how many frames a report writes of one stack.
const maxStackText = 64

func stackText(st *trace.StackTable, id uint32) []string {
	fr := st.Frames(id)
	if len(fr) == 0 {
		return nil
	}
	out := make([]string, 0, min(len(fr), maxStackText))
	for i, f := range fr {
		if i == maxStackText {
			out = append(out, fmt.Sprintf("… %d more frames", len(fr)-maxStackText))
			break
		}
		out = append(out, f.String())
	}
	return out
}

// Held is what an allocator's reserved bytes held at one moment: at their
// peak (report.json's reserved_at_peak) or at the first failed allocation
// (oom_explained, which adds the request and a verdict).
type Held struct {
	Event            int64  `json:"event"`
	Line             int64  `json:"line"`
	RequestBytes     uint64 `json:"request_bytes,omitempty"`
	Verdict          string `json:"verdict,omitempty"`
	Explanation      string `json:"explanation,omitempty"`
	ReservedBytes    uint64 `json:"reserved_bytes"`
	InUseBytes       uint64 `json:"in_use_bytes"`
	LiveBytes        uint64 `json:"live_bytes"`
	CachedFreeBytes  uint64 `json:"cached_free_bytes"`
	LargestFreeBytes uint64 `json:"largest_free_bytes"`
	EmptyRegions     int    `json:"empty_regions"`
	EmptyRegionBytes uint64 `json:"empty_region_bytes"`
	// CallSites are the live bytes by call site then.
	CallSites []CallSite `json:"call_sites"`
	// FreeRanges are the largest free ranges, each with the call sites of
	// the live blocks on either side that keep it apart.
	FreeRanges []HeldRange `json:"free_ranges"`
}

// HeldRange is one free range and the live blocks that bound it (null at
// a reservation's edge).
type HeldRange struct {
	Addr  uint64     `json:"addr"`
	Bytes uint64     `json:"bytes"`
	Below *HeldBlock `json:"below"`
	Above *HeldBlock `json:"above"`
}

// HeldBlock is a live block beside a free range: its call site and the
// bytes it was asked for.
type HeldBlock struct {
	CallSite string `json:"call_site"`
	Bytes    uint64 `json:"bytes"`
}

// The verdicts of Held.Verdict, for a failed allocation.
const (
	VerdictTooLarge      = "too-large"     // more than the device holds
	VerdictNoRoom        = "no-room"       // live allocations fill the device
	VerdictFragmentation = "fragmentation" // enough cached free bytes, none in one range
	VerdictPolicy        = "policy"        // a free range large enough, not used by the allocator's rules
	VerdictLimit         = "limit"         // the allocator's memory limit, below the device's size, stopped it
)

// limitOf is the most an allocator's options let it reserve: its
// memory_limit, or its memory_fraction of the device, else the device.
func limitOf(options map[string]any, capacity uint64) uint64 {
	switch v := options["memory_limit"].(type) {
	case uint64:
		if v > 0 {
			return min(v, capacity)
		}
	case int64:
		if v > 0 {
			return min(uint64(v), capacity)
		}
	}
	if f, ok := options["memory_fraction"].(float64); ok && f > 0 && f < 1 {
		return uint64(f * float64(capacity))
	}
	return capacity
}

func buildHeld(h *sim.PeakHeld, st *trace.StackTable, rule trace.FrameRule) *Held {
	if h == nil {
		return nil
	}
	out := &Held{
		Event: h.Event, Line: h.Line,
		ReservedBytes: h.ReservedBytes, InUseBytes: h.InUseBytes, LiveBytes: h.LiveBytes,
		CachedFreeBytes: h.CachedFreeBytes, LargestFreeBytes: h.LargestFreeBytes,
		EmptyRegions: h.EmptyRegions, EmptyRegionBytes: h.EmptyRegionBytes,
		FreeRanges: make([]HeldRange, 0, len(h.FreeRanges)),
	}
	sites := make([]trace.SiteBytes, len(h.Sites))
	for i, s := range h.Sites {
		sites[i] = trace.SiteBytes{Stack: s.Stack, Tag: s.Tag, Bytes: s.Requested, Count: s.Count}
	}
	out.CallSites = callSites(sites, st, rule, TopCallSites)
	if out.CallSites == nil {
		out.CallSites = []CallSite{}
	}
	pin := func(b *sim.HeldBlock) *HeldBlock {
		if b == nil {
			return nil
		}
		return &HeldBlock{CallSite: siteName(b.Tag, b.Stack, st, rule), Bytes: b.Requested}
	}
	for _, r := range h.FreeRanges {
		out.FreeRanges = append(out.FreeRanges, HeldRange{Addr: r.Addr, Bytes: r.Size, Below: pin(r.Below), Above: pin(r.Above)})
	}
	return out
}

// policyOf says why an allocator may leave a free range unused.
func policyOf(allocator string) string {
	switch allocator {
	case "arena":
		return "an arena reuses no freed bytes until it resets"
	case "pytorch":
		return "PyTorch serves a request only from its own pool (small or large) and stream, and does not split a cached block over max_split_size_mb"
	case "bfc":
		return "the BFC allocator's best fit found no chunk for it (bins, alignment, or a region it could not extend)"
	}
	return "the allocator's rules kept it from serving the request"
}

// roomOf names what bounds an allocator's reservations.
func roomOf(limit, capacity uint64) string {
	if limit < capacity {
		return "its limit " + Bytes(limit) + " of the " + Bytes(capacity) + " device"
	}
	return "the device's " + Bytes(capacity)
}

// explainOOM adds to h, what was held at a failed allocation of request
// bytes on a device of capacity bytes, the verdict and what it rests on.
func explainOOM(h *Held, allocator string, options map[string]any, request, capacity uint64) {
	h.RequestBytes = request
	limit := limitOf(options, capacity)
	switch {
	case limit < capacity && h.LargestFreeBytes < request && h.CachedFreeBytes < request && capacity > 0:
		h.Verdict = VerdictLimit
		h.Explanation = fmt.Sprintf("the allocator's memory limit of %s (of the %s device) stopped it: live allocations held %s of the %s reserved, "+
			"with %s cached free, less than the request of %s",
			Bytes(limit), Bytes(capacity), Bytes(h.LiveBytes), Bytes(h.ReservedBytes), Bytes(h.CachedFreeBytes), Bytes(request))
	case capacity > 0 && request > capacity:
		h.Verdict = VerdictTooLarge
		h.Explanation = fmt.Sprintf("the request of %s is more than the whole device (%s)", Bytes(request), Bytes(capacity))
	case h.LargestFreeBytes >= request || allocator == "arena" && h.CachedFreeBytes >= request:
		h.Verdict = VerdictPolicy
		h.Explanation = fmt.Sprintf("%s was reserved and free (the largest range %s), enough for the request of %s, and %s; "+
			"and it could reserve no more (%s reserved, %s)",
			Bytes(h.CachedFreeBytes), Bytes(h.LargestFreeBytes), Bytes(request), policyOf(allocator), Bytes(h.ReservedBytes), roomOf(limit, capacity))
	case h.CachedFreeBytes >= request:
		h.Verdict = VerdictFragmentation
		h.Explanation = fmt.Sprintf("%s was reserved but free, enough for the request of %s, but the largest free range was %s: "+
			"the free bytes lay between live blocks (see the free ranges and the blocks that pin them)",
			Bytes(h.CachedFreeBytes), Bytes(request), Bytes(h.LargestFreeBytes))
	default:
		h.Verdict = VerdictNoRoom
		h.Explanation = fmt.Sprintf("live allocations held %s of the %s reserved, with %s cached free, less than the request of %s, "+
			"and there was no room to reserve more (%s)",
			Bytes(h.LiveBytes), Bytes(h.ReservedBytes), Bytes(h.CachedFreeBytes), Bytes(request), roomOf(limit, capacity))
	}
}
