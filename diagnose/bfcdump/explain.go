package bfcdump

import (
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
)

// Verdicts: Explanation.Verdict names the cause of a failed allocation in one
// word, or VerdictState for a snapshot without one.
const (
	// VerdictFragmentation: the request would fit in the free memory (free
	// in the pool plus the headroom the pool may still grow into) but no
	// free chunk is large enough, nor is the headroom.
	VerdictFragmentation = "fragmentation"
	// VerdictOutOfMemory: what is in use plus the request exceeds the
	// memory limit (or, with the limit unknown, the request exceeds the
	// pool's free bytes): not enough memory, whatever the layout.
	VerdictOutOfMemory = "out-of-memory"
	// VerdictTooLarge: the request alone exceeds the memory limit.
	VerdictTooLarge = "too-large"
	// VerdictDeviceFull: the headroom under the memory limit could hold the
	// request, so BFC would have grown the pool, but the allocation failed:
	// the device refused the new region.
	VerdictDeviceFull = "device-full"
	// VerdictUnexplained: a free chunk in the snapshot is large enough for
	// the request; the failure is not visible in this state.
	VerdictUnexplained = "unexplained"
	// VerdictState: no failed allocation; the text describes the pool.
	VerdictState = "state"
	// VerdictUndetermined: a failed allocation whose cause the input does
	// not hold enough figures to tell (a pasted log without the Stats
	// block, say); the text says what is missing.
	VerdictUndetermined = "undetermined"
)

// significantWaste is the share of the bytes in use above which Explain
// mentions internal waste: 10%.
const significantWaste = 0.10

// Explanation says in plain language why an allocation failed, or describes
// the pool when none did.
type Explanation struct {
	Verdict string `json:"verdict"`
	Text    string `json:"text"`
	// RestsOn names the lines of a pasted log the verdict follows from,
	// as "Stats InUse (line 57)"; empty for other sources.
	RestsOn []string `json:"rests_on,omitempty"`
	// CannotKnow says what the input leaves out that bears on the verdict.
	CannotKnow []string `json:"cannot_know,omitempty"`
}

// Explain reasons about s the way one reads a TF OOM dump:
//
//  1. Without a request, the verdict is "state": free bytes in the pool, the
//     largest free chunk, TF's fragmentation.
//  2. With the memory limit known: a request above the limit is
//     "too-large"; one that, with what is in use, exceeds the limit is
//     "out-of-memory"; one larger than the largest free chunk and than the
//     headroom the pool may still grow into (limit − pool, as TF's Extend
//     computes it) is "fragmentation"; one the headroom could hold means
//     the device refused to grow the pool ("device-full"); one a free chunk
//     could hold is "unexplained".
//  3. With the limit unknown (a MemoryDump), the text says so and reasons
//     about the pool alone: a request above the pool's free bytes is
//     "out-of-memory", one above the largest free chunk "fragmentation".
//  4. A fragmentation verdict says what keeps the free memory apart: region
//     boundaries, when joining the regions end to end would make a free run
//     large enough (then it names garbage_collection, coalescing regions and
//     cuda_malloc_async), else chunks in use between the free ones.
//  5. Whenever the slack inside in-use chunks is at least 10% of the bytes
//     in use, a sentence explains BFC's split rule. It needs requested
//     sizes, which a log does not record.
//
// A snapshot read from a pasted log (s.Log set) is explained from TF's
// printed figures first (explainLog).
func Explain(s *Snapshot) Explanation {
	if s.Log != nil {
		return explainLog(s, s.read())
	}
	sum := s.Summarize()
	var verdict string
	var text []string
	limitKnown := sum.MemoryLimit > 0
	if !limitKnown {
		text = append(text, "The memory limit is unknown (a MemoryDump does not record it), so this reasons about the pool alone.")
	}
	if s.Request == nil {
		verdict = VerdictState
		t := fmt.Sprintf("No failed allocation: %s free in the pool of %s; the largest free chunk is %s; TF fragmentation %.1f%%.",
			ib(sum.FreeInPool), ib(sum.PoolBytes), ib(sum.LargestFreeChunk), 100*sum.TFFragmentation)
		if limitKnown {
			t += fmt.Sprintf(" The pool may still grow by %s up to its %s limit.", ib(sum.Unreserved), ib(sum.MemoryLimit))
		}
		text = append(text, t)
	} else {
		verdict, text = explainRequest(sum, requestSizes(s.Request), limitKnown, s.largestFreeRunAcrossRegions(), text)
	}
	if sum.BytesInUse > 0 && float64(sum.InternalWaste) >= significantWaste*float64(sum.BytesInUse) {
		text = append(text, fmt.Sprintf(
			"%s (%.0f%%) of the bytes in use is slack inside in-use chunks: BFC hands out a free chunk whole, without splitting it, when the chunk is less than twice the rounded request and the slack is under 128 MiB.",
			ib(sum.InternalWaste), 100*float64(sum.InternalWaste)/float64(sum.BytesInUse)))
	}
	return Explanation{Verdict: verdict, Text: strings.Join(text, " ")}
}

// explainRequest picks the verdict for a failed request and appends its
// sentences to text.
// acrossRegions is the largest free run were adjacent regions joined end to
// end, as a coalescing sub-allocator joins them.
func explainRequest(sum Summary, req Request, limitKnown bool, acrossRegions uint64, text []string) (string, []string) {
	need := req.Rounded
	asked := fmt.Sprintf("the request for %s (%d bytes rounded)", ib(req.Bytes), need)
	headroom := sum.Unreserved &^ (1<<minAllocationBits - 1) // Extend rounds it down to 256
	switch {
	case limitKnown && need > sum.MemoryLimit:
		return VerdictTooLarge, append(text, fmt.Sprintf(
			"Too large: %s exceeds the whole memory limit of %s; it cannot fit however the pool is laid out.",
			asked, ib(sum.MemoryLimit)))
	case limitKnown && satAdd(sum.BytesInUse, need) > sum.MemoryLimit:
		return VerdictOutOfMemory, append(text, fmt.Sprintf(
			"Not enough memory: %s is in use of the %s limit, and %s overshoots the limit by %s. Only using less memory helps (smaller batches, fewer live tensors) or a larger limit.",
			ib(sum.BytesInUse), ib(sum.MemoryLimit), asked, ib(sum.BytesInUse+need-sum.MemoryLimit)))
	case !limitKnown && need > sum.FreeInPool:
		return VerdictOutOfMemory, append(text, fmt.Sprintf(
			"Not enough memory in the pool: %s is free in it and %s needs more; whether the pool could have grown is unknown.",
			ib(sum.FreeInPool), asked))
	case need <= sum.LargestFreeChunk:
		return VerdictUnexplained, append(text, fmt.Sprintf(
			"The largest free chunk (%s) could hold %s, so the pool as shown should have served it: the snapshot was probably taken at another moment than the failure, or TF held freed chunks back (its timing counter).",
			ib(sum.LargestFreeChunk), asked))
	case limitKnown && need <= headroom:
		return VerdictDeviceFull, append(text, fmt.Sprintf(
			"The pool could still grow by %s under its %s limit, enough for %s, yet the allocation failed: the device refused the new region. Either the memory limit overstates what the device had free (memory held by another process or outside the allocator), or the device's own address space is too fragmented for one region that large.",
			ib(sum.Unreserved), ib(sum.MemoryLimit), asked))
	}
	// Fragmentation: enough free memory in total, no piece large enough.
	var t string
	if limitKnown && sum.Unreserved > 0 {
		t = fmt.Sprintf("%s free (%s in the pool, %s not yet reserved) but the largest free chunk is %s and the pool can grow by only %s: fragmentation, not lack of memory; %s needs one contiguous chunk.",
			ib(sum.FreeInPool+sum.Unreserved), ib(sum.FreeInPool), ib(sum.Unreserved), ib(sum.LargestFreeChunk), ib(headroom), asked)
	} else {
		t = fmt.Sprintf("%s free in the pool but the largest free chunk is %s: fragmentation, not lack of memory; %s needs one contiguous chunk.",
			ib(sum.FreeInPool), ib(sum.LargestFreeChunk), asked)
	}
	text = append(text, t)
	if sum.Regions > 1 && acrossRegions >= need {
		text = append(text, fmt.Sprintf(
			"Region boundaries are the cause: the pool is %d regions, and chunks never coalesce across a region boundary; joined end to end, the free chunks at the boundaries would make a %s run, enough. The usual remedies are garbage_collection (TF releases wholly free regions and reserves a larger one), a sub-allocator that coalesces regions (TF's virtual-memory GPU allocator), or TF_GPU_ALLOCATOR=cuda_malloc_async.",
			sum.Regions, ib(acrossRegions)))
	} else {
		text = append(text, fmt.Sprintf(
			"The free memory lies in %d free chunks kept apart by chunks in use, and BFC never moves a live allocation, so coalescing cannot help. Allocating large, long-lived tensors first, or freeing tensors sooner, helps; so may TF_GPU_ALLOCATOR=cuda_malloc_async.",
			sum.FreeChunks))
	}
	return VerdictFragmentation, text
}

// largestFreeRunAcrossRegions returns the largest run of free chunks
// adjacent within a region, or across the boundary between one region and
// the next: what a sub-allocator that joins regions end to end (TF's
// virtual-memory GPU allocator) would let coalesce.
func (s *Snapshot) largestFreeRunAcrossRegions() uint64 {
	chunks, spans := s.layout()
	var best, run uint64
	for _, sp := range spans {
		for i := sp.first; i < sp.end; i++ {
			if chunks[i].InUse {
				run = 0
				continue
			}
			run = satAdd(run, chunks[i].Size)
			best = max(best, run)
		}
		if sp.first == sp.end {
			run = 0
		}
	}
	return best
}

// ib formats a size as go-humanize's IBytes does ("2.1 GiB").
func ib(n uint64) string { return humanize.IBytes(n) }

// explainLog reasons about a pasted log from the figures TensorFlow printed
// (reading ranks them above the chunk lines): the Stats block alone decides
// lack of memory, the bin lines and the "Bin for" block alone can show that
// no free chunk fits, and a bare headline still names the request. Each
// step records the lines it rests on; what the paste leaves out that bears
// on the verdict goes to CannotKnow.
func explainLog(s *Snapshot, r *reading) Explanation {
	sum := r.sum
	var ex Explanation
	var text []string
	cite := func(key, what string) {
		p, ok := r.prov[key]
		if !ok || p.Source == SourceUnknown {
			return
		}
		ex.RestsOn = append(ex.RestsOn, fmt.Sprintf("%s: %s (%s)", what, p.From, "line"+plural(p.Lines)+" "+p.Lines))
	}
	approx := func(key string) string {
		if p := r.prov[key]; !p.Exact {
			return "about "
		}
		return ""
	}
	// fragmentation is the verdict when the figures show room in total
	// but no chunk: the lines it rests on.
	fragmentation := func() {
		cite("bytes_in_use", "bytes in use")
		cite("memory_limit", "memory limit")
		cite("pool_bytes", "pool")
		ex.Verdict = VerdictFragmentation
		if r.fits == fitNo {
			ex.RestsOn = append(ex.RestsOn, "no free chunk fits: "+r.fitFrom)
		} else if largestBound(r) != "" {
			cite("largest_free_chunk", "largest free chunk")
		}
	}
	ev := s.Log
	if s.Request == nil {
		ex.Verdict = VerdictState
		text = append(text, "TensorFlow prints this dump only when an allocation fails, but the failed request is not in the pasted text.")
		if r.inUseKnown && r.limitKnown {
			text = append(text, fmt.Sprintf("%s%s is in use of the %s limit, so any request above %s%s would fail for lack of memory.",
				approx("bytes_in_use"), ib(sum.BytesInUse), ib(sum.MemoryLimit), approx("bytes_in_use"), ib(sum.MemoryLimit-min(sum.MemoryLimit, sum.BytesInUse))))
			cite("bytes_in_use", "bytes in use")
			cite("memory_limit", "memory limit")
		}
		if lf := r.prov["largest_free_chunk"]; lf.Source != SourceUnknown && (r.poolKnown || len(s.Chunks) > 0) {
			at := ""
			if lf.Source == SourceAtLeast {
				at = "at least "
			}
			text = append(text, fmt.Sprintf("%s%s is free in the pool; the largest free chunk is %s%s.", approx("free_in_pool"), ib(sum.FreeInPool), at, ib(sum.LargestFreeChunk)))
			cite("largest_free_chunk", "largest free chunk")
		}
		ex.CannotKnow = append(ex.CannotKnow, "the failed request: the headline (\"Allocator (...) ran out of memory trying to allocate ...\") and the \"Bin for\" line are not in the paste")
		ex.Text = strings.Join(text, " ")
		return ex
	}
	req := requestSizes(s.Request)
	need := req.Rounded
	reqExact := ev.HeadlineRounded
	asked := fmt.Sprintf("the request for %s (%d bytes rounded)", ib(req.Bytes), need)
	if !reqExact {
		asked = fmt.Sprintf("the request for about %s", ib(need))
	}
	if ev.HeadlineLine > 0 {
		ex.RestsOn = append(ex.RestsOn, fmt.Sprintf("request: headline (line %d)", ev.HeadlineLine))
	} else if ev.BinFor != nil {
		ex.RestsOn = append(ex.RestsOn, fmt.Sprintf("request: \"Bin for\" line (line %d)", ev.BinFor.Line))
	}
	headroom := sum.Unreserved &^ (1<<minAllocationBits - 1)
	switch {
	case r.limitKnown && need > sum.MemoryLimit:
		cite("memory_limit", "memory limit")
		ex.Verdict = VerdictTooLarge
		text = append(text, fmt.Sprintf("Too large: %s exceeds the whole memory limit of %s; it cannot fit however the pool is laid out.",
			asked, ib(sum.MemoryLimit)))
	case r.limitKnown && (r.inUseKnown || r.inUseAtLeast) && satAdd(sum.BytesInUse, need) > sum.MemoryLimit:
		// A lower bound on the bytes in use suffices to show the overshoot.
		cite("bytes_in_use", "bytes in use")
		cite("memory_limit", "memory limit")
		ex.Verdict = VerdictOutOfMemory
		over := sum.BytesInUse + need - sum.MemoryLimit
		overBy := approx("bytes_in_use")
		if !reqExact {
			overBy = "about "
		}
		t := fmt.Sprintf("Not enough memory: %s%s is in use of the %s limit, and %s overshoots the limit by %s%s. Only using less memory helps (smaller batches, fewer live tensors) or a larger limit.",
			approx("bytes_in_use"), ib(sum.BytesInUse), ib(sum.MemoryLimit), asked, overBy, ib(over))
		// TF's rounded figures may hide the overshoot.
		var tol uint64
		if !reqExact {
			tol += humanTolerance(need)
		}
		if !r.prov["bytes_in_use"].Exact {
			tol += humanTolerance(sum.BytesInUse)
		}
		if over <= tol {
			t += " TensorFlow's rounded figures leave this close: it may instead be fragmentation."
		}
		text = append(text, t)
	case r.fits == fitYes:
		ex.Verdict = VerdictUnexplained
		ex.RestsOn = append(ex.RestsOn, "a free chunk large enough: "+r.fitFrom)
		text = append(text, fmt.Sprintf("A free chunk large enough for %s is in the dump (%s), so the pool as shown should have served it: the dump was probably taken at another moment than the failure, or TF held freed chunks back (its timing counter).",
			asked, r.fitFrom))
	case r.limitKnown && r.poolKnown && need <= headroom:
		cite("pool_bytes", "pool")
		cite("memory_limit", "memory limit")
		ex.Verdict = VerdictDeviceFull
		text = append(text, fmt.Sprintf("The pool (%s%s) could still grow by %s under its %s limit, enough for %s, yet the allocation failed: the device refused the new region. Either the memory limit overstates what the device had free (memory held by another process or outside the allocator), or the device's own address space is too fragmented for one region that large.",
			approx("pool_bytes"), ib(sum.PoolBytes), ib(sum.Unreserved), ib(sum.MemoryLimit), asked))
	case r.limitKnown && r.inUseKnown && r.poolKnown:
		fragmentation()
		grow := fmt.Sprintf("the pool can grow by only %s", ib(headroom))
		free := fmt.Sprintf("%s%s is free (%s%s in the pool, %s not yet reserved)", approx("free_in_pool"), ib(sum.FreeInPool+sum.Unreserved),
			approx("free_in_pool"), ib(sum.FreeInPool), ib(sum.Unreserved))
		if sum.Unreserved == 0 {
			grow = "the pool already holds its whole limit"
			free = fmt.Sprintf("%s%s is free in the pool", approx("free_in_pool"), ib(sum.FreeInPool))
		}
		text = append(text, fmt.Sprintf("%s%s is in use of the %s limit, so %s: enough for %s in total. But %s, and %s: fragmentation, not lack of memory; the request needs one contiguous chunk.",
			approx("bytes_in_use"), ib(sum.BytesInUse), ib(sum.MemoryLimit), free, asked, grow, noChunkFits(r)))
		text = append(text, fragmentationCause(s, r, need, &ex)...)
	case r.limitKnown && r.inUseKnown && r.poolCannotGrowBy(need, reqExact):
		// Only a lower bound of the pool (its chunk lines, the largest free
		// chunk and the bytes in use): enough to show it could not grow by
		// the request.
		fragmentation()
		text = append(text, fmt.Sprintf("%s%s is in use of the %s limit, enough room for %s in total. But the pool holds at least %s (%s), so it can grow by at most %s, and %s: fragmentation, not lack of memory; the request needs one contiguous chunk.",
			approx("bytes_in_use"), ib(sum.BytesInUse), ib(sum.MemoryLimit), asked, ib(sum.PoolBytes), provenanceText(r.prov["pool_bytes"]),
			ib(sum.MemoryLimit-min(sum.MemoryLimit, sum.PoolBytes)), noChunkFits(r)))
		text = append(text, fragmentationCause(s, r, need, &ex)...)
	case r.limitKnown && r.inUseKnown:
		cite("bytes_in_use", "bytes in use")
		cite("memory_limit", "memory limit")
		ex.Verdict = VerdictFragmentation
		if r.fits != fitNo && largestBound(r) != "" {
			cite("largest_free_chunk", "largest free chunk")
		}
		text = append(text, fmt.Sprintf("%s%s is in use of the %s limit, enough room for %s in total, and %s: fragmentation or a pool that could not grow, not lack of memory. Which of the two needs the pool's size, not in this paste.",
			approx("bytes_in_use"), ib(sum.BytesInUse), ib(sum.MemoryLimit), asked, noChunkFits(r)))
		ex.CannotKnow = append(ex.CannotKnow, "the pool's size, so whether the pool could have grown (TF 1.14+ prints it on the line after \"Sum Total of in-use chunks\")")
	default:
		ex.Verdict = VerdictUndetermined
		t := fmt.Sprintf("The paste names %s but not enough figures to tell lack of memory from fragmentation", asked)
		switch {
		case !r.limitKnown && !r.inUseKnown:
			t += ": the memory limit and the bytes in use (the Stats block) are missing."
		case !r.limitKnown:
			t += ": the memory limit (the Stats block's Limit) is missing."
		default:
			t += ": the bytes in use (the Stats block's InUse or \"Sum Total of in-use chunks\") are missing."
		}
		text = append(text, t)
		switch {
		case r.fits == fitNo:
			text = append(text, fmt.Sprintf("What the paste does show: %s.", noChunkFits(r)))
			ex.RestsOn = append(ex.RestsOn, "no free chunk fits: "+r.fitFrom)
		case r.binForSmaller != "":
			text = append(text, fmt.Sprintf("What the paste does show: %s; larger bins would be in the bin lines, not in the paste.", r.binForSmaller))
			ex.RestsOn = append(ex.RestsOn, "the request's bin: "+r.binForSmaller)
		case largestBound(r) != "":
			text = append(text, fmt.Sprintf("What the paste does show: %s.", largestBound(r)))
			cite("largest_free_chunk", "largest free chunk")
		}
		ex.CannotKnow = append(ex.CannotKnow, "the Stats block (Limit, InUse), which decides whether memory ran out")
	}
	if ev.HeadlineLine == 0 && ev.BinFor != nil {
		ex.CannotKnow = append(ex.CannotKnow, "the request's exact size and op: the headline is not in the paste, and the \"Bin for\" line rounds the size to three digits")
	}
	if len(r.partial) > 0 && ex.Verdict != VerdictOutOfMemory && ex.Verdict != VerdictTooLarge {
		ex.CannotKnow = append(ex.CannotKnow, "the whole chunk list: the paste is partial (see its notes), so the layout of the free memory is known only in part")
	}
	if ev.ChunkLines == 0 && ex.Verdict == VerdictFragmentation {
		ex.CannotKnow = append(ex.CannotKnow, "which chunks keep the free memory apart: the chunk lines are not in the paste")
	}
	ex.Text = strings.Join(text, " ")
	return ex
}

// noChunkFits says how the paste shows that no free chunk could hold the
// request, and what it shows of the largest free chunk.
func noChunkFits(r *reading) string {
	if r.fits == fitNo {
		return fmt.Sprintf("no free chunk can hold it (%s)", r.fitFrom)
	}
	t := "no free chunk could hold it (TensorFlow logs this dump only after its best-fit search found none"
	if b := largestBound(r); b != "" {
		t += "; " + b
	}
	return t + ")"
}

// largestBound is what the paste shows of the largest free chunk when that
// is a lower bound ("the largest free chunk is at least 6.1 GiB, by a free
// chunk under "Bin for", line 9"); "" otherwise.
func largestBound(r *reading) string {
	p := r.prov["largest_free_chunk"]
	if p.Source != SourceAtLeast || r.sum.LargestFreeChunk == 0 {
		return ""
	}
	return fmt.Sprintf("the largest free chunk is at least %s, by %s", ib(r.sum.LargestFreeChunk), provenanceText(p))
}

// fragmentationCause says what keeps the free memory apart, when the chunk
// list is whole enough to tell.
func fragmentationCause(s *Snapshot, r *reading, need uint64, ex *Explanation) []string {
	if !r.chunksComplete {
		return nil
	}
	across := s.largestFreeRunAcrossRegions()
	if len(s.Regions) > 1 && across >= need {
		return []string{fmt.Sprintf(
			"Region boundaries are the cause: the pool is %d regions, and chunks never coalesce across a region boundary; joined end to end, the free chunks at the boundaries would make a %s run, enough. The usual remedies are garbage_collection (TF releases wholly free regions and reserves a larger one), a sub-allocator that coalesces regions (TF's virtual-memory GPU allocator), or TF_GPU_ALLOCATOR=cuda_malloc_async.",
			len(s.Regions), ib(across))}
	}
	return []string{fmt.Sprintf(
		"The free memory lies in %d free chunks kept apart by chunks in use, and BFC never moves a live allocation, so coalescing cannot help. Allocating large, long-lived tensors first, or freeing tensors sooner, helps; so may TF_GPU_ALLOCATOR=cuda_malloc_async.",
		r.sum.FreeChunks)}
}

// plural is "s" when a line reference names more than one line.
func plural(lines string) string {
	if strings.ContainsAny(lines, ",–") {
		return "s"
	}
	return ""
}
