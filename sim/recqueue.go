package sim

import (
	"sync"

	"github.com/bfcsim/bfcsim/allocators"
	"github.com/bfcsim/bfcsim/trace"
)

// recQueue runs a recorder on a goroutine of its own, beside the
// allocator's. What the recorder does per block (its tables by slot, the
// memory map's raster) waits on memory more than it computes, and would
// otherwise be a third of the allocator goroutine's time; the runner now
// only notes each call in a buffer, and the recorder's goroutine makes
// them, in the same order, a batch of the trace behind.
//
// The timeline is the exception: it is cheap, and kept by the runner's
// goroutine itself (after, mark), apart from everything the recorder's
// goroutine touches, until finish has joined the two.
type recQueue struct {
	rec *recorder
	now int64 // index of the event being applied
	ops []recOp

	full  chan []recOp // noted calls, for the recorder's goroutine
	empty chan []recOp // their buffers, back
	done  chan struct{}
	once  sync.Once
}

type recKind uint8

const (
	recAlloc recKind = iota
	recFree
	recReserve
	recRelease
	recPeak
	recLayout // the layout at the event now (RecordConfig.AtEvent)
)

// recOp is one noted call: its kind, the event it was made at, and its
// arguments.
type recOp struct {
	kind      recKind
	slot      uint32
	now, line int64
	addr      uint64 // alloc: the block's; reserve, release: the range's
	size      uint64
	requested uint64
	id        uint64
	tag       string
	stack     uint32
}

// recBuffers is how many buffers of noted calls circulate: one being
// filled, one being recorded, one waiting, so that neither side waits on
// the other unless it falls a whole batch behind.
const recBuffers = 3

func newRecQueue(rec *recorder) *recQueue {
	q := &recQueue{
		rec:   rec,
		full:  make(chan []recOp, recBuffers),
		empty: make(chan []recOp, recBuffers),
		done:  make(chan struct{}),
	}
	for range recBuffers - 1 {
		q.empty <- nil
	}
	go q.run()
	return q
}

func (q *recQueue) run() {
	defer close(q.done)
	r := q.rec
	for ops := range q.full {
		for k := range ops {
			op := &ops[k]
			r.now = op.now
			switch op.kind {
			case recAlloc:
				r.alloc(op.slot, allocators.Block{Addr: op.addr, Size: op.size}, op.requested, op.tag, op.stack, op.id, op.line)
			case recFree:
				r.free(op.slot, op.line)
			case recReserve:
				r.reserve(op.addr, op.size)
			case recRelease:
				r.release(op.addr, op.size)
			case recPeak:
				r.peak(op.now, op.line)
			case recLayout:
				r.layout = r.buildLayout()
				r.layout.Event, r.layout.Line = op.now, op.line
			}
		}
		clear(ops) // the tags
		q.empty <- ops[:0]
	}
}

// flush hands the calls noted so far to the recorder's goroutine.
func (q *recQueue) flush() {
	if len(q.ops) == 0 {
		return
	}
	q.full <- q.ops
	q.ops = <-q.empty
}

// stop ends the recorder's goroutine, once every noted call is made.
func (q *recQueue) stop() {
	q.once.Do(func() {
		q.flush()
		close(q.full)
	})
	<-q.done
}

func (q *recQueue) alloc(slot uint32, b allocators.Block, requested uint64, tag string, stack uint32, id uint64, line int64) {
	q.ops = append(q.ops, recOp{kind: recAlloc, slot: slot, now: q.now, line: line,
		addr: b.Addr, size: b.Size, requested: requested, id: id, tag: tag, stack: stack})
}

func (q *recQueue) free(slot uint32, line int64) {
	q.ops = append(q.ops, recOp{kind: recFree, slot: slot, now: q.now, line: line})
}

func (q *recQueue) reserve(addr, n uint64) {
	q.ops = append(q.ops, recOp{kind: recReserve, now: q.now, addr: addr, size: n})
}

func (q *recQueue) release(addr, n uint64) {
	q.ops = append(q.ops, recOp{kind: recRelease, now: q.now, addr: addr, size: n})
}

func (q *recQueue) peak(event, line int64) {
	q.ops = append(q.ops, recOp{kind: recPeak, now: event, line: line})
}

// after is called once an event is applied.
func (q *recQueue) after(i, line int64, live, inUse, reserved uint64, frag float64, failed bool) {
	r := q.rec
	r.timeline.add(i, r.cfg.Points, live, inUse, reserved, frag, failed)
	if r.cfg.AtEvent && r.cfg.LayoutEvent == i {
		q.ops = append(q.ops, recOp{kind: recLayout, now: i, line: line})
	}
}

func (q *recQueue) mark(i int64, ev *trace.Event) { q.rec.mark(i, ev) }

// finish waits for the recorder's goroutine and returns what it recorded.
func (q *recQueue) finish(events int64) (*Timeline, *Memmap, *Layout) {
	q.stop()
	return q.rec.finish(events)
}
