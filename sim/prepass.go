package sim

import (
	"context"
	"fmt"
	"strings"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/trace"
)

// The pre-pass. Every allocator but one streams: it sees each event once, in
// order, and the replay's memory does not grow with the trace. The offline
// planner (allocators.Planner) must instead see every allocation, with its
// lifetime, before the first is made. For it Replay reads the trace one extra
// time, through Config.Reread, before the replay proper, and keeps one
// allocators.Lifetime (32 bytes) per allocation: memory O(allocations), the
// one place bfcsim does not stream. Replays without a planner skip it.

// planOffline gives every runner whose allocator plans offline the lifetimes
// of the trace's allocations, read through reread. It does nothing when no
// allocator plans.
func planOffline(ctx context.Context, runners []*runner, reread func() (Source, error)) error {
	var planners []*runner
	for _, r := range runners {
		if _, ok := r.alloc.(allocators.Planner); ok {
			planners = append(planners, r)
		}
	}
	if len(planners) == 0 {
		return nil
	}
	names := make([]string, len(planners))
	for i, r := range planners {
		names[i] = r.name
	}
	who := strings.Join(names, ", ")
	if reread == nil {
		return fmt.Errorf("%s plans offline and needs to read the trace twice; give a trace file, not standard input or a pipe", who)
	}
	src, err := reread()
	if err != nil {
		return fmt.Errorf("reading the trace again for %s: %w", who, err)
	}
	lifetimes, err := Lifetimes(ctx, src)
	if err != nil {
		return err
	}
	for _, r := range planners {
		if err := r.alloc.(allocators.Planner).Plan(ctx, lifetimes); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
	}
	return nil
}

// prepassCheckEvery is how often, in events, the pre-pass looks for a
// cancelled context: rarely enough to cost nothing per event.
const prepassCheckEvery = 1 << 14

// Lifetimes reads src to its end and returns what allocators.Planner.Plan
// takes: every alloc with a size > 0, in trace order, with the index of its
// event, the index of the event that frees it (the number of events, if
// none does), its size and its alignment. Event indexes count every event
// src gives, as Replay's do. It returns src's error, or the context's.
func Lifetimes(ctx context.Context, src Source) ([]allocators.Lifetime, error) {
	var lifetimes []allocators.Lifetime
	var bySlot []int // the lifetime of the allocation live in each Slot, or -1
	var i int64
	for src.Next() {
		ev := src.Event()
		switch ev.Op {
		case trace.OpAlloc:
			if int(ev.Slot) >= len(bySlot) {
				bySlot = append(bySlot, make([]int, int(ev.Slot)+1-len(bySlot))...)
			}
			bySlot[ev.Slot] = -1
			if ev.Size > 0 {
				bySlot[ev.Slot] = len(lifetimes)
				lifetimes = append(lifetimes, allocators.Lifetime{Size: ev.Size, Align: ev.Align, Start: i, End: -1})
			}
		case trace.OpFree:
			if int(ev.Slot) < len(bySlot) {
				if j := bySlot[ev.Slot]; j >= 0 {
					lifetimes[j].End = i
					bySlot[ev.Slot] = -1
				}
			}
		}
		i++
		if i%prepassCheckEvery == 0 && ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
	}
	if err := src.Err(); err != nil {
		return nil, err
	}
	for j := range lifetimes {
		if lifetimes[j].End < 0 {
			lifetimes[j].End = i
		}
	}
	return lifetimes, nil
}
