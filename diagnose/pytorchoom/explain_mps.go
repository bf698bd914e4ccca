package pytorchoom

import "fmt"

// explainMPS gives the verdict on a message of the MPS allocator
// (aten/src/ATen/mps/MPSAllocator.mm). It raises after trying a cached
// buffer, a new buffer, the same after releasing the cached buffers the
// request needs, and again after releasing all of them; a new buffer is
// refused when what the process holds from Metal (driver allocated: "MPS
// allocated" + "other allocations") plus the request is over the
// high-watermark limit ("max allowed"), or when Metal cannot create a heap
// for it. So the verdict is limit or no-room: fragmentation is not told
// apart (the room left unused in PyTorch's heaps is part of "other
// allocations"), and other processes do not count against the limit.
func explainMPS(m *Message) Explanation {
	sp := func(f *Figure) span {
		if f == nil {
			return span{}
		}
		return spanOf(&f.Size)
	}
	r, d, l := sp(m.Request), sp(m.DriverAllocated), sp(m.Allowed)
	var limit tri
	switch {
	case m.NoLimit:
		limit = no
	case m.Allowed == nil:
		limit = maybe // cut before it
	default:
		limit = gt(d.add(r), l)
	}

	e := Explanation{}
	total := "unknown"
	if t := d.add(r); t.known {
		total = "about " + formatSize(t.nominal(), m.unitsKB)
	}
	held := fmt.Sprintf("the process held %s from Metal", describe(m.DriverAllocated))
	if m.Reserved != nil && m.OtherAllocations != nil {
		held = fmt.Sprintf("the process held %s from Metal: %s in PyTorch's buffers (MPS allocated) and %s other allocations",
			describe(m.DriverAllocated), describe(m.Reserved), describe(m.OtherAllocations))
	}
	switch limit {
	case yes:
		e.Verdict, e.Confident = Limit, true
		e.Reason = fmt.Sprintf("The high-watermark limit stops it: %s, and %s + the %s request = %s is over the %s max allowed "+
			"(PYTORCH_MPS_HIGH_WATERMARK_RATIO × the GPU's recommended maximum working set size).",
			held, describe(m.DriverAllocated), describe(m.Request), total, describe(m.Allowed))
		if gt(r, l) == yes {
			e.Reason += " The request alone is more than the limit."
		}
	case maybe:
		e.Verdict = Limit
		if m.Allowed == nil {
			e.Reason = fmt.Sprintf("The paste stops before the max allowed figure, which settles it: %s, and the %s request was refused. "+
				"The MPS allocator refuses a request over its high-watermark limit, or one Metal cannot find memory for; the limit is the usual cause.",
				held, describe(m.Request))
			e.CannotKnow = append(e.CannotKnow, "whether the high-watermark limit refused it: the max allowed figure is not in the paste.")
		} else {
			e.Reason = fmt.Sprintf("The high-watermark limit may stop it: %s, and %s + the %s request = %s is the same as the %s max allowed within the rounding of the printed figures.",
				held, describe(m.DriverAllocated), describe(m.Request), total, describe(m.Allowed))
			e.CannotKnow = append(e.CannotKnow, fmt.Sprintf("whether %s + %s is over the %s allowed: equal within rounding.",
				describe(m.DriverAllocated), describe(m.Request), describe(m.Allowed)))
		}
	default:
		e.Verdict, e.Confident = NoRoom, true
		if m.NoLimit {
			e.Reason = fmt.Sprintf("No high-watermark limit is set (PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0), so Metal itself refused the %s request: %s, "+
				"and the system had no memory left for a new heap. On Apple silicon the GPU shares the system's memory with the CPU and every other application.",
				describe(m.Request), held)
		} else {
			e.Reason = fmt.Sprintf("The high-watermark limit did not stop it: %s, and with the %s request that is %s, within the %s max allowed. "+
				"Metal refused a new heap: the system had no memory left for it (on Apple silicon the GPU shares the system's memory with the CPU and every other application).",
				held, describe(m.Request), total, describe(m.Allowed))
		}
	}
	if m.OtherAllocations != nil && m.Reserved != nil && geq(sp(m.OtherAllocations), sp(m.Reserved)) == yes {
		e.CannotKnow = append(e.CannotKnow, fmt.Sprintf(
			"what the %s of other allocations are: room left unused inside PyTorch's own heaps (its fragmentation), MPSGraph's buffers, or other frameworks' Metal memory; "+
				"the message does not separate them (torch.mps.driver_allocated_memory() and torch.mps.current_allocated_memory() at the failure do).",
			describe(m.OtherAllocations)))
	}
	if m.Truncated {
		e.CannotKnow = append(e.CannotKnow, "the paste stops after "+m.Cut+"; the message's figures after that are not in it.")
	}
	if m.Request == nil {
		e.Confident = false
		e.CannotKnow = append(e.CannotKnow, "how large the request was: the paste does not have it.")
	}

	for _, nf := range []namedFigure{
		{"request", "request", m.Request},
		{"reserved", "MPS allocated", m.Reserved},
		{"other_allocations", "other allocations", m.OtherAllocations},
		{"driver_allocated", "driver allocated", m.DriverAllocated},
		{"allowed", "max allowed", m.Allowed},
	} {
		switch {
		case nf.f != nil:
			e.RestsOn = append(e.RestsOn, fmt.Sprintf("%-22s %s", nf.label, source(nf.f)))
		case nf.key == "allowed" && m.NoLimit:
			e.RestsOn = append(e.RestsOn, fmt.Sprintf("%-22s none: the message's form has no limit", nf.label))
		case m.prints(nf.key):
			e.RestsOn = append(e.RestsOn, fmt.Sprintf("%-22s not in the paste", nf.label))
		}
	}

	smaller := "Make the working set smaller: a smaller batch or resolution, lower precision (float16 or bfloat16), or activation checkpointing."
	switch e.Verdict {
	case Limit:
		e.Advice = []string{
			smaller,
			"Or raise the limit: PYTORCH_MPS_HIGH_WATERMARK_RATIO is the share of the GPU's recommended maximum working set size PyTorch may hold (at most 2.0 on unified memory); " +
				"0.0 removes it, which PyTorch warns may make the whole system fail (memory pressure, swapping).",
		}
		if m.OtherAllocations != nil && m.Reserved != nil && geq(sp(m.OtherAllocations), sp(m.Reserved)) == yes {
			e.Advice = append(e.Advice, "Other allocations outweigh PyTorch's own buffers: call torch.mps.empty_cache() between phases, "+
				"and look for other Metal users in the process (another framework, cached MPSGraph graphs).")
		}
	default:
		e.Advice = []string{
			"Free the system's memory: close other applications, and watch memory pressure in Activity Monitor; the GPU has no memory of its own.",
			smaller,
		}
	}
	return e
}
