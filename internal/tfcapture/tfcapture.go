// Package tfcapture makes TensorFlow profiler captures from bfcsim traces,
// for tests: it replays a trace through bfcsim's own BFC allocator and
// records each allocation and free as TensorFlow's BFCAllocator::AddTraceMe
// does (the chunk's address, requested size and size; the allocator's
// bytes in use, peak and memory limit after it), in a
// tensorflow.Capture that tensorflow.WriteCapture writes as an XSpace. A
// capture made from the start of a trace must replay under bfc at the
// recorded addresses and chunk sizes, every one; one that starts later
// (Options.From) has a start state to rebuild, as real captures do.
package tfcapture

import (
	"fmt"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/trace"
	"github.com/bfcsim/bfcsim/trace/tensorflow"
)

// Options say how to make a capture.
type Options struct {
	// Allocator names the allocator in the capture ("GPU_0_bfc").
	Allocator string
	// Capacity is the device and the memory limit.
	Capacity uint64
	// BFC are bfc's options (--set bfc.KEY=VALUE).
	BFC allocators.Options
	// From is the index of the first event the capture records: the
	// events before it are replayed but not recorded, as a profiler
	// started mid-run sees them.
	From int
	// EventPs is the time between events, in picoseconds (default 1 µs).
	EventPs int64
	// Scatter puts each region the pool reserves below the one before,
	// with a gap, as cudaMalloc may place a growing pool's regions,
	// rather than one after another from the space's base.
	Scatter bool
	// JAXVersion makes the capture JAX's (tensorflow.Capture.JAXVersion).
	JAXVersion string
}

// scatterSpace places each reservation 6 MiB below the one before, from
// 16 TiB above the virtual base down.
type scatterSpace struct {
	*allocators.VirtualSpace
	next uint64 // where the next reservation ends
}

func (s *scatterSpace) Reserve(n uint64) (uint64, error) {
	const mib = 1 << 20
	addr := s.next - (n+2*mib-1)&^(2*mib-1)
	if err := s.ReserveAt(addr, n); err != nil {
		return 0, err
	}
	s.next = addr - 6*mib
	return addr, nil
}

// FromTrace replays evs through bfcsim's bfc and returns the capture of the
// window from Options.From. Allocations bfc fails are not recorded, as
// TensorFlow records none for them.
func FromTrace(evs []trace.Event, o Options) (tensorflow.Capture, error) {
	if o.EventPs == 0 {
		o.EventPs = 1_000_000
	}
	var space allocators.Space = allocators.NewVirtualSpace(o.Capacity, allocators.CostModel{}, allocators.Paged)
	if o.Scatter {
		space = &scatterSpace{VirtualSpace: space.(*allocators.VirtualSpace), next: allocators.VirtualBase + 1<<44}
	}
	a, _, err := allocators.New("bfc", space, o.BFC)
	if err != nil {
		return tensorflow.Capture{}, err
	}
	c := tensorflow.Capture{Allocator: o.Allocator, StartNs: 1_700_000_000_000_000_000, JAXVersion: o.JAXVersion}
	live := map[uint64]allocators.Block{}
	requested := map[uint64]uint64{}
	step := int64(1)
	for i, ev := range evs {
		rec := i >= o.From
		var ce tensorflow.CaptureEvent
		switch ev.Op {
		case trace.OpStep:
			step++
			continue
		case trace.OpAlloc:
			if ev.Size == 0 {
				continue
			}
			b, err := a.Allocate(ev.Size, ev.Align)
			if err != nil {
				continue
			}
			live[ev.ID], requested[ev.ID] = b, ev.Size
			ce = tensorflow.CaptureEvent{Alloc: true, Addr: b.Addr, Requested: int64(ev.Size), Chunk: int64(b.Size), Op: ev.Tag}
		case trace.OpFree:
			b, ok := live[ev.ID]
			if !ok {
				continue
			}
			if err := a.Free(b); err != nil {
				return tensorflow.Capture{}, fmt.Errorf("event %d: %w", i, err)
			}
			ce = tensorflow.CaptureEvent{Addr: b.Addr, Requested: int64(requested[ev.ID]), Chunk: int64(b.Size)}
			delete(live, ev.ID)
			delete(requested, ev.ID)
		default:
			continue
		}
		if !rec {
			continue
		}
		st := a.(allocators.StatsReporter).Stats()
		ce.InUse, ce.Peak, ce.Limit = st["bytes_in_use"], st["peak_bytes_in_use"], st["bytes_limit"]
		ce.Step = step
		ce.Ps = int64(len(c.Events)) * o.EventPs
		c.Events = append(c.Events, ce)
	}
	return c, nil
}
