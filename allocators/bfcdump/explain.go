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
)

// significantWaste is the share of the bytes in use above which Explain
// mentions internal waste: 10%.
const significantWaste = 0.10

// Explanation says in plain language why an allocation failed, or describes
// the pool when none did.
type Explanation struct {
	Verdict string `json:"verdict"`
	Text    string `json:"text"`
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
func Explain(s *Snapshot) Explanation {
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
