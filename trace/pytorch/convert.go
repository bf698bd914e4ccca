package pytorch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/bfcsim/bfcsim/trace"
)

// Options tune a conversion.
type Options struct {
	// Name names the trace in its header; "" leaves it to the reader.
	Name string
	// Device picks the device whose trace is converted; -1 picks the one
	// with the most trace entries (the lowest on a tie).
	Device int
	// Frames says which frames of a stack are the program's own, for the
	// call site an allocation is tagged with.
	Frames trace.FrameRule
	// TempDir is where a snapshot too large to keep in memory spools its
	// trace while it is read (about 25 bytes an entry, in an unlinked
	// file); "" is os.TempDir().
	TempDir string
	// memLimit is how many spooled bytes stay in memory before the spool
	// moves to a file; 0 is defaultSpoolLimit.
	memLimit int64
}

// Stats describe a conversion.
type Stats struct {
	Device       int
	DeviceChoice DeviceChoice
	// Events counts the events written, header aside.
	Events, Allocs, Frees int64
	// StartSegments and StartAllocs are the segments and allocations live
	// when the recording started, rebuilt from the final state and the
	// orphan frees.
	StartSegments, StartAllocs int
	// OrphanFrees are frees of blocks allocated before the recording started.
	OrphanFrees int64
	// SizesUnknown counts blocks allocated before the recording and freed
	// during it whose size stays unknown: the snapshot gives only their
	// requested size, and PyTorch may have added up to 1 MiB it did not
	// split off. SizesInferred counts those whose block the start state or
	// the recording shows (see inferSizes).
	SizesUnknown, SizesInferred int
	// PeakLiveBytes is the most bytes the trace holds allocated at once.
	PeakLiveBytes uint64
	// PendingFrees are blocks whose free was requested but had not
	// completed when the snapshot was taken; they stay allocated.
	PendingFrees int64
	// Dropped counts entries that contradict the rest of the snapshot (a
	// block outside every segment, an alloc of a live address, ...) and
	// were left out, each with a reason in DroppedReasons (the first few).
	Dropped        int64
	DroppedReasons []string
	// Clusters is how many groups of overlapping segments were moved into
	// the simulated device.
	Clusters int
	// Settings are the recorded allocator settings written into the
	// header, when the snapshot has them; Unmodelled lists the settings
	// the pytorch model has no option for.
	Settings   *trace.RecordedSettings
	Unmodelled []string
	// OOMs counts the allocations the recorded program failed (oom
	// entries), written as allocations after a mark, and CapacityBytes
	// the device capacity the header gives: what the allocator held at
	// the tightest such failure plus the free device memory it was told of
	// (device_free), never less than it held at its peak; 0 when there was
	// no failure.
	OOMs          int64
	CapacityBytes uint64
	// ExpandableStart is set when the start state's expandable segments
	// were worked out on address ranges (segment_map and segment_unmap).
	ExpandableStart bool
	// ExpandableRanges are where the expandable segments' ranges start,
	// one per pool and stream: the lowest address the recording shows
	// mapped (header expandable_ranges, replayed addresses).
	ExpandableRanges []trace.ExpandableRange
	// Annotations counts the marks written for external_annotations: the
	// start of a phase the program named, and its end (NAME (end)).
	Annotations int64
}

// maxReasons is how many reasons for dropped entries Stats keeps.
const maxReasons = 10

func (s *Stats) drop(format string, args ...any) {
	s.Dropped++
	if len(s.DroppedReasons) < maxReasons {
		s.DroppedReasons = append(s.DroppedReasons, fmt.Sprintf(format, args...))
	}
}

// Convert reads a snapshot from r and writes its device trace to w as a
// bfcsim trace. It stops, with ctx's error, soon after ctx is done.
func Convert(ctx context.Context, r io.Reader, w *trace.Writer, opt Options) (Stats, error) {
	s, err := read(ctx, r, opt)
	if err != nil {
		return Stats{}, err
	}
	defer s.close()
	return s.write(ctx, w, opt)
}

// op is one event of the converted trace, before addresses are moved.
type op struct {
	kind   trace.Op
	id     uint64
	addr   uint64 // recorded address
	size   uint64
	stream int64
	t      float64
	hasT   bool
	tag    uint32 // the builder's tag id; 0: none
	name   string
	noAddr bool // an alloc the recording failed: it has no address, and is never live
}

// pickDevice picks the device to convert: want, or with want < 0 the one
// with the most trace entries (the lowest on a tie), unless it has no
// allocation, in its trace or in its segments when the snapshot was taken,
// and another device has: then the one with the most allocations. A
// device whose trace holds only a "snapshot" marker is passed over for
// the one that allocates.
func (s *snapshot) pickDevice(ctx context.Context, want int) (int, DeviceChoice, error) {
	if want >= 0 {
		if want >= len(s.traces) && !s.hasSegmentsOn(want) {
			return 0, DeviceChoice{}, fmt.Errorf("--device %d: the snapshot has traces for %d devices and no segments on device %d", want, len(s.traces), want)
		}
		return want, DeviceChoice{Asked: true}, nil
	}
	allocs := map[int]int64{}
	for d := range s.traces {
		if s.traceLen(d) == 0 {
			continue
		}
		// An entry this walk cannot decode ends the count of its device
		// only: the device converted reports its own errors.
		_ = s.eachEntry(ctx, d, func(_ int64, e *entry) error {
			if e.action == actAlloc {
				allocs[d]++
			}
			return nil
		})
		if err := ctx.Err(); err != nil {
			return 0, DeviceChoice{}, err
		}
	}
	for _, seg := range s.segments {
		for _, b := range seg.blocks {
			if strings.HasPrefix(b.state, "active") {
				allocs[int(seg.device)]++
			}
		}
	}
	devices := make([]int, 0, len(allocs)+len(s.traces))
	for d := range s.traces {
		devices = append(devices, d)
	}
	for _, seg := range s.segments {
		devices = append(devices, int(seg.device))
	}
	slices.Sort(devices)
	devices = slices.Compact(devices)
	if len(devices) == 0 {
		return 0, DeviceChoice{}, nil
	}
	best := devices[0]
	for _, d := range devices {
		if s.traceLen(d) > s.traceLen(best) {
			best = d
		}
	}
	if allocs[best] == 0 {
		for _, d := range devices {
			if allocs[d] > allocs[best] {
				best = d
			}
		}
	}
	c := DeviceChoice{Devices: len(devices), Allocs: allocs[best]}
	for _, d := range devices {
		if d != best && allocs[d] > 0 {
			c.Others = append(c.Others, d)
		}
	}
	return best, c, nil
}

// DeviceChoice says how the converted device was picked.
type DeviceChoice struct {
	Asked   bool  // by Options.Device
	Devices int   // devices the snapshot has a trace or segments for
	Allocs  int64 // allocations on the device picked: its trace's and its segments' at the end
	Others  []int // other devices with allocations, left out
}

func (s *snapshot) hasSegmentsOn(dev int) bool {
	for _, seg := range s.segments {
		if seg.device == int64(dev) {
			return true
		}
	}
	return false
}

type span struct{ lo, hi uint64 }

// errStopWalk ends a walk of the trace early.
var errStopWalk = errors.New("stop")

// write converts the chosen device's trace, walking it three times: to
// find the start state, to infer block sizes, and to write it.
func (s *snapshot) write(ctx context.Context, w *trace.Writer, opt Options) (Stats, error) {
	dev, choice, err := s.pickDevice(ctx, opt.Device)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Device: dev, DeviceChoice: choice}

	// Walk the trace once: what it allocates and frees, and what it frees
	// without having allocated (orphans, live at its start).
	live := map[uint64]struct{}{}   // recorded address → block allocated in the trace
	segsMade := map[uint64]uint64{} // address → size of segments the trace created, still held
	pending := map[uint64]bool{}
	var nextID uint64 = 1
	var startBlocks []startBlock
	var startSegs []segment
	orphanID := map[int64]uint64{} // entry index → id of the start block it frees
	var segSpans []span
	expStart := newStartState() // the expandable segments' pages mapped at the start
	expandable := false
	// lowest is, per pool and stream, the lowest address seen mapped in
	// an expandable segment: where its range starts.
	lowest := map[trace.ExpandableRange]uint64{}
	seenMapped := func(addr, size uint64, stream int64) {
		k := trace.ExpandableRange{Small: size == smallBuffer, Stream: stream}
		if a, ok := lowest[k]; !ok || addr < a {
			lowest[k] = addr
		}
	}
	// reserved follows the bytes the recording reserves and releases, from
	// an unknown start; at each oom it is kept with the free device memory.
	var reserved, peakReserved int64
	// tightest is the least, over the oom entries, of what was reserved
	// then (from the same unknown start) plus the free device memory.
	tightest, ooms := int64(math.MaxInt64), 0
	hasT := false
	err = s.eachEntry(ctx, dev, func(i int64, e *entry) error {
		switch e.action {
		case actAlloc:
			if _, dup := live[e.addr]; dup {
				st.drop("entry %d: alloc of %#x, which is already allocated", i, e.addr)
				return nil
			}
			live[e.addr] = struct{}{}
		case actFreeCompleted, actFree:
			delete(pending, e.addr)
			if _, ok := live[e.addr]; ok {
				delete(live, e.addr)
				break
			}
			startBlocks = append(startBlocks, startBlock{addr: e.addr, size: e.size, stream: e.stream, entry: i})
		case actFreeRequested:
			pending[e.addr] = true
		case actSegmentAlloc:
			segsMade[e.addr] = e.size
			segSpans = append(segSpans, span{e.addr, e.addr + e.size})
			reserved += int64(min(e.size, maxCapacity))
		case actSegmentFree:
			reserved -= int64(min(e.size, maxCapacity))
			if _, ok := segsMade[e.addr]; ok {
				delete(segsMade, e.addr)
				break
			}
			startSegs = append(startSegs, segment{address: e.addr, totalSize: e.size, stream: e.stream, small: e.size == smallBuffer})
			segSpans = append(segSpans, span{e.addr, e.addr + e.size})
		case actSegmentMap, actSegmentUnmap:
			// Pages of expandable segments: worked out on ranges. One past
			// the end of the address space is dropped when written.
			expandable = true
			if hi := e.addr + e.size; hi > e.addr && e.size < maxTraceSize {
				expStart.event(e.addr, hi, e.stream, e.action == actSegmentUnmap)
				segSpans = append(segSpans, span{e.addr, hi})
				if e.action == actSegmentMap {
					seenMapped(e.addr, e.size, e.stream)
				}
			}
			if e.action == actSegmentMap {
				reserved += int64(min(e.size, maxCapacity))
			} else {
				reserved -= int64(min(e.size, maxCapacity))
			}
		case actOOM:
			ooms++
			tightest = min(tightest, reserved+int64(min(e.deviceFree, math.MaxInt64/2)))
		}
		peakReserved = max(peakReserved, reserved)
		// The header's time unit is known before the first event is
		// written: it is set if any event that is written has a time.
		hasT = hasT || e.hasTime && e.action != actFreeRequested && e.action != actOther
		return nil
	})
	if err != nil {
		return st, err
	}
	st.PendingFrees = int64(len(pending))
	var final []mappedRange // the expandable segments' pages mapped at the end
	for _, seg := range s.segments {
		if seg.device != int64(dev) {
			continue
		}
		if seg.expandable {
			final = append(final, mappedRange{lo: seg.address, hi: seg.address + seg.totalSize, stream: seg.stream, small: seg.small})
			segSpans = append(segSpans, span{seg.address, seg.address + seg.totalSize})
		} else if _, made := segsMade[seg.address]; !made {
			startSegs = append(startSegs, seg)
			segSpans = append(segSpans, span{seg.address, seg.address + seg.totalSize})
		}
		for _, b := range seg.blocks {
			if !strings.HasPrefix(b.state, "active") {
				continue
			}
			if _, made := live[b.address]; made {
				continue
			}
			size := b.size
			if b.requestedSize > 0 && roundSize(b.requestedSize) == b.size {
				size = b.requestedSize // the request is known, and the block is just its rounding
			}
			startBlocks = append(startBlocks, startBlock{addr: b.address, size: size, stream: seg.stream, tag: b.tag, entry: -1})
		}
	}
	live, segsMade, pending = nil, nil, nil
	if len(final) > 0 || expandable {
		st.ExpandableStart = true
		expStart.finish(final).each(func(r mappedRange) {
			startSegs = append(startSegs, segment{address: r.lo, totalSize: r.hi - r.lo, stream: r.stream, small: r.small, expandable: true})
			k := trace.ExpandableRange{Small: r.small, Stream: r.stream}
			if a, ok := lowest[k]; !ok || r.lo < a {
				lowest[k] = r.lo
			}
		})
		for _, r := range final {
			k := trace.ExpandableRange{Small: r.small, Stream: r.stream}
			if a, ok := lowest[k]; !ok || r.lo < a {
				lowest[k] = r.lo
			}
		}
	}
	expStart = nil
	slices.SortFunc(startSegs, func(a, b segment) int { return cmp.Compare(a.address, b.address) })
	if ooms > 0 {
		// The capacity the program could have had: what it held at a
		// failure plus what the device still had free, at the tightest
		// failure, and never less than it held at its peak.
		var start int64
		for _, seg := range startSegs {
			start += int64(min(seg.totalSize, math.MaxInt64/4))
		}
		if c := max(start+tightest, start+peakReserved, 0); c <= maxCapacity {
			st.CapacityBytes = uint64(c)
		} else {
			st.drop("the capacity the oom entries give, %d bytes, is beyond any device", c)
		}
	}
	switch {
	case s.settings != nil:
		rs := s.settings.recorded(&st)
		st.Settings = &rs
	case st.ExpandableStart:
		// Snapshots before PyTorch 2.6 have no allocator_settings; the
		// segments say this much.
		st.Settings = &trace.RecordedSettings{Allocator: "pytorch", Options: map[string]string{"expandable_segments": "true"}}
	}
	slices.SortFunc(startBlocks, func(a, b startBlock) int { return cmp.Compare(a.addr, b.addr) })

	gap := uint64(clusterGap)
	if st.ExpandableStart {
		// An expandable segment's unmapped addresses count: best fit
		// weighs a free block by the unmapped room after it, and the next
		// segment's range starts where this one's ends. Keep the recorded
		// distances (the replay's device is paged: its range is 128 TiB).
		gap = expandableGap
	}
	clusters := makeClusters(segSpans, gap)
	st.Clusters = len(clusters)
	for k, addr := range lowest {
		if to, ok := clusters.move(addr); ok {
			k.Addr = to
			st.ExpandableRanges = append(st.ExpandableRanges, k)
		}
	}
	// In a fixed order, whatever the map's: by address, then pool and
	// stream (two keys may start at one address in a crafted snapshot).
	slices.SortFunc(st.ExpandableRanges, func(a, b trace.ExpandableRange) int {
		if c := cmp.Compare(a.Addr, b.Addr); c != 0 {
			return c
		}
		if a.Small != b.Small {
			if a.Small {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Stream, b.Stream)
	})
	if err := inferSizes(startSegs, startBlocks, func(fn func(e *entry) bool) error {
		err := s.eachEntry(ctx, dev, func(_ int64, e *entry) error {
			if !fn(e) {
				return errStopWalk
			}
			return nil
		})
		if err == errStopWalk {
			return nil
		}
		return err
	}, &st); err != nil {
		return st, err
	}

	em, err := newEmitter(w, clusters, opt, &st, hasT)
	if err != nil {
		return st, err
	}
	em.b = s.b
	em.op(op{kind: trace.OpMark, name: startStateMark})
	// The small pool's pages are written one by one, up to a bound no
	// device comes near (2 TiB of them), so that a crafted snapshot cannot
	// make the start state endless.
	smallPagesLeft := uint64(1 << 20)
	bi := 0
	for _, seg := range startSegs {
		if pages := seg.totalSize / smallBuffer; seg.expandable && seg.small && seg.totalSize%smallBuffer == 0 &&
			pages > 1 && pages <= smallPagesLeft {
			// The small pool maps one 2 MiB page at a time: a reserve of
			// 2 MiB is how the trace says a page is the small pool's.
			smallPagesLeft -= pages
			for a := seg.address; a < seg.address+seg.totalSize; a += smallBuffer {
				em.op(op{kind: trace.OpReserve, addr: a, size: smallBuffer, stream: seg.stream})
			}
		} else {
			em.op(op{kind: trace.OpReserve, addr: seg.address, size: seg.totalSize, stream: seg.stream})
		}
		st.StartSegments++
		for bi < len(startBlocks) && startBlocks[bi].addr < seg.address {
			st.drop("block at %#x: allocated before the recording, in no segment", startBlocks[bi].addr)
			bi++
		}
		for ; bi < len(startBlocks) && startBlocks[bi].addr < seg.address+seg.totalSize; bi++ {
			b := startBlocks[bi]
			id := nextID
			nextID++
			if b.entry >= 0 {
				orphanID[b.entry] = id
			}
			em.op(op{kind: trace.OpAlloc, id: id, addr: b.addr, size: b.size, stream: seg.stream, tag: b.tag})
			st.StartAllocs++
		}
	}
	for ; bi < len(startBlocks); bi++ {
		st.drop("block at %#x: allocated before the recording, in no segment", startBlocks[bi].addr)
	}
	startBlocks, startSegs = nil, nil
	em.op(op{kind: trace.OpMark, name: recordingStartsMark})

	ids := map[uint64]uint64{} // recorded address → id of the block allocated there in the trace
	marks := s.annotationsOn(dev, hasT)
	// annotate writes the annotations up to time t (all of them: +Inf) as
	// marks, in time order, before the entry at t.
	annotate := func(t float64) {
		for len(marks) > 0 && marks[0].timeUS <= t {
			a := marks[0]
			marks = marks[1:]
			name := a.name
			if a.end {
				name += annotationEnd
			}
			em.op(op{kind: trace.OpMark, name: name, t: a.timeUS, hasT: true})
			st.Annotations++
		}
	}
	err = s.eachEntry(ctx, dev, func(i int64, e *entry) error {
		if e.hasTime {
			annotate(e.timeUS)
		}
		o := op{addr: e.addr, size: e.size, stream: e.stream, t: e.timeUS, hasT: e.hasTime, tag: e.tag}
		switch e.action {
		case actAlloc:
			if _, dup := ids[e.addr]; dup {
				return nil // dropped in the first walk
			}
			o.kind, o.id = trace.OpAlloc, nextID
			ids[e.addr] = nextID
			nextID++
		case actFreeCompleted, actFree:
			if id, ok := ids[e.addr]; ok {
				delete(ids, e.addr)
				o.kind, o.id = trace.OpFree, id
				break
			}
			id, ok := orphanID[i]
			if !ok {
				return nil // its block was dropped
			}
			o.kind, o.id = trace.OpFree, id
			st.OrphanFrees++
		case actSegmentAlloc, actSegmentMap:
			o.kind = trace.OpReserve
		case actSegmentFree:
			o.kind, o.size = trace.OpRelease, 0 // the whole segment
		case actSegmentUnmap:
			o.kind = trace.OpRelease // these pages
		case actSnapshot:
			o.kind, o.name = trace.OpMark, "snapshot"
		case actOOM:
			// The request the program failed: a mark that says so, then
			// the request, freed at once, so that a replay tries it too.
			st.OOMs++
			if e.size >= maxTraceSize || e.size == 0 {
				o.kind, o.name = trace.OpMark, fmt.Sprintf("oom (%d bytes requested)", e.size)
				break
			}
			em.op(op{kind: trace.OpMark, t: e.timeUS, hasT: e.hasTime,
				name: fmt.Sprintf("%s the recording failed this %d-byte allocation; the device had %d bytes free", trace.RecordedOOMMark, e.size, e.deviceFree)})
			em.op(op{kind: trace.OpAlloc, id: nextID, size: e.size, stream: e.stream, t: e.timeUS, hasT: e.hasTime, tag: e.tag, noAddr: true})
			o.kind, o.id = trace.OpFree, nextID
			nextID++
		default:
			return nil // free_requested, and actions bfcsim has no use for
		}
		em.op(o)
		return em.err
	})
	if err != nil {
		return st, err
	}
	annotate(math.Inf(1))
	return st, em.flush()
}

// annotationEnd ends the name of the mark an annotation's END is written
// as; its START's mark is its name.
const annotationEnd = " (end)"

// annotationsOn returns the annotations of device dev in time order, to be
// written as marks among its entries; none when the entries carry no
// time to place them by.
func (s *snapshot) annotationsOn(dev int, hasT bool) []annotation {
	if !hasT {
		return nil
	}
	var out []annotation
	for _, a := range s.annotations {
		if a.device == int64(dev) {
			out = append(out, a)
		}
	}
	slices.SortStableFunc(out, func(a, b annotation) int { return cmp.Compare(a.timeUS, b.timeUS) })
	return out
}

type startBlock struct {
	addr, size uint64
	stream     int64
	tag        uint32
	entry      int64 // index of its orphan free, or -1
}

// The marks around the start state, which allocators.Replayer reads.
const (
	startStateMark      = trace.StartStateMark
	recordingStartsMark = trace.RecordingStartsMark
)

// emitter writes the header and then the events, with addresses moved,
// keeping the conversion's counts. After the first error it writes
// nothing more and keeps the error in err.
type emitter struct {
	w     *trace.Writer
	cl    clusterList
	st    *Stats
	lastT float64
	live  uint64
	sizes map[uint64]uint64 // id → size of the live allocations
	err   error

	// The stack table, written as allocations first name its stacks: the
	// trace's id of each builder frame and tag, 0 until written.
	b                *builder
	frameOut, tagOut []uint32
	nFrames, nStacks uint32
	stackIDs         []uint32 // scratch
}

// stackOf returns the trace's stack id of builder tag t, writing the stack
// and its frames not written yet; 0 if the tag kept no stack.
func (em *emitter) stackOf(t uint32) uint32 {
	if int(t) < len(em.tagOut) && em.tagOut[t] != 0 {
		return em.tagOut[t]
	}
	fids := em.b.tags[t].frames
	if len(fids) == 0 {
		return 0
	}
	em.stackIDs = em.stackIDs[:0]
	for _, f := range fids {
		for int(f) >= len(em.frameOut) {
			em.frameOut = append(em.frameOut, 0)
		}
		if em.frameOut[f] == 0 {
			em.nFrames++
			if err := em.w.WriteFrame(em.nFrames, em.b.traceFrame(f)); err != nil {
				em.err = err
				return 0
			}
			em.frameOut[f] = em.nFrames
		}
		em.stackIDs = append(em.stackIDs, em.frameOut[f])
	}
	em.nStacks++
	if err := em.w.WriteStack(em.nStacks, em.stackIDs); err != nil {
		em.err = err
		return 0
	}
	for int(t) >= len(em.tagOut) {
		em.tagOut = append(em.tagOut, 0)
	}
	em.tagOut[t] = em.nStacks
	return em.nStacks
}

func newEmitter(w *trace.Writer, cl clusterList, opt Options, st *Stats, hasT bool) (*emitter, error) {
	h := trace.Header{Version: trace.FormatVersion, Name: opt.Name, Source: "pytorch-snapshot", Meta: map[string]string{}}
	if hasT {
		h.TimeUnit = "us"
	}
	var m strings.Builder
	m.WriteByte('[')
	for i, c := range cl {
		if i > 0 {
			m.WriteByte(',')
		}
		fmt.Fprintf(&m, `{"recorded":"%#x","replayed":"%#x","bytes":%d}`, c.lo, c.to, c.hi-c.lo)
	}
	m.WriteByte(']')
	h.Meta["address_map"] = m.String()
	h.Meta[trace.DeviceKey] = fmt.Sprint(st.Device)
	if st.Settings != nil {
		j, err := st.Settings.MarshalJSON()
		if err != nil {
			return nil, err
		}
		h.Meta[trace.SettingsKey] = string(j)
	}
	h.CapacityBytes = st.CapacityBytes
	if len(st.ExpandableRanges) > 0 {
		h.Meta[trace.ExpandableRangesKey] = trace.FormatExpandableRanges(st.ExpandableRanges)
	}
	if st.ExpandableStart {
		// Expandable segments map pages into address ranges larger than
		// the memory; holes unmapped in them are never given to another
		// segment. A contiguous device of the recorded capacity cannot hold
		// that layout; a paged one (a large virtual range, only the
		// capacity limiting what is mapped) can.
		h.Meta[trace.SpaceSettingsKey] = `{"placement":"paged"}`
	}
	if err := w.WriteHeader(h); err != nil {
		return nil, err
	}
	return &emitter{w: w, cl: cl, st: st, sizes: map[uint64]uint64{}}, nil
}

func (em *emitter) op(o op) {
	if em.err != nil {
		return
	}
	st := em.st
	ev := trace.Event{Op: o.kind, ID: o.id, Size: o.size, Name: o.name}
	if o.tag != 0 && o.kind == trace.OpAlloc {
		ev.Tag = em.b.tags[o.tag].text
		ev.Stack = em.stackOf(o.tag)
	}
	if o.size >= maxTraceSize && (o.kind == trace.OpReserve || o.kind == trace.OpRelease) {
		st.drop("%s of %d bytes at %#x: larger than a trace can say", o.kind, o.size, o.addr)
		return
	}
	if o.kind == trace.OpAlloc && !o.noAddr || o.kind == trace.OpReserve || o.kind == trace.OpRelease {
		a, ok := em.cl.move(o.addr)
		if !ok {
			if o.kind == trace.OpAlloc {
				// An allocation in no known segment still happened: keep
				// it, without a recorded address to compare with.
				st.drop("alloc of %d bytes at %#x: in no segment the snapshot knows; kept without its address", o.size, o.addr)
			} else {
				st.drop("%s at %#x: in no segment the snapshot knows", o.kind, o.addr)
				return
			}
		} else {
			ev.Addr = a
			if o.kind == trace.OpAlloc {
				ev.Flags |= trace.HasAddr
			}
		}
	}
	if o.kind == trace.OpAlloc || o.kind == trace.OpReserve {
		ev.Stream = o.stream
		ev.Flags |= trace.HasStream
	}
	if o.hasT {
		// A recording's clock may step back (the ring buffer, clock
		// adjustments); the trace format wants it non-decreasing.
		ev.T = max(o.t, em.lastT)
		em.lastT = ev.T
		ev.Flags |= trace.HasT
	}
	if em.err = em.w.Write(ev); em.err != nil {
		return
	}
	st.Events++
	switch o.kind {
	case trace.OpAlloc:
		st.Allocs++
		if !o.noAddr {
			em.sizes[o.id] = o.size
			em.live += o.size
			st.PeakLiveBytes = max(st.PeakLiveBytes, em.live)
		}
	case trace.OpFree:
		st.Frees++
		em.live -= em.sizes[o.id]
		delete(em.sizes, o.id)
	}
}

func (em *emitter) flush() error {
	if em.err != nil {
		return em.err
	}
	return em.w.Flush()
}

// inferSizes works out the blocks of allocations made before the recording
// and freed during it, which the snapshot knows only by their requested
// size. PyTorch may have handed such a block out with up to 1 MiB (512
// bytes in the small pool) it did not split off, and those bytes move every
// later allocation in the free space after it. Two things tell:
//
//   - the room up to the next block (or the segment's end) is too small to
//     be a free block of its pool, so the block holds it (blockSize);
//   - the recording's first event in the block's neighbourhood, from its
//     start to the next block, is an allocation in the free space after it:
//     best fit takes the front of a free block, so that free block, and the
//     slack, ends where the allocation starts.
//
// Blocks neither tells about keep their requested size (Stats.SizesUnknown).
// walk calls its function with each entry of the trace, in order, until
// it returns false: the walk ends as soon as every block is settled.
func inferSizes(segs []segment, blocks []startBlock, walk func(func(e *entry) bool) error, st *Stats) error {
	type region struct {
		lo, hi uint64 // the block's start and the next block's (or the segment's end)
		i      int    // index in blocks
		small  bool
		done   bool
	}
	var open []region
	si := 0
	for i := range blocks {
		b := &blocks[i]
		for si < len(segs) && segs[si].address+segs[si].totalSize <= b.addr {
			si++
		}
		if b.entry < 0 || si == len(segs) || b.addr < segs[si].address {
			continue // known size, or a block the start state drops
		}
		seg := segs[si]
		next := seg.address + seg.totalSize
		if i+1 < len(blocks) && blocks[i+1].addr < next {
			next = blocks[i+1].addr
		}
		small := seg.totalSize == smallBuffer
		if size, proven := blockSize(*b, next, small); proven {
			b.size = size
			st.SizesInferred++
			continue
		}
		open = append(open, region{lo: b.addr, hi: next, i: i, small: small})
	}
	unsettled := len(open)
	settle := func(r *region, e *entry) {
		r.done = true
		unsettled--
		b := &blocks[r.i]
		end := b.addr + roundSize(b.size)
		slack := e.addr - min(e.addr, end)
		if e.action == actAlloc && e.addr >= end && e.addr < r.hi &&
			(r.small && slack < minBlockSize || !r.small && slack <= smallSize) {
			b.size = roundSize(b.size) + slack
			st.SizesInferred++
			return
		}
		st.SizesUnknown++
	}
	if len(open) == 0 {
		return nil // nothing to learn from the trace: do not walk it
	}
	err := walk(func(e *entry) bool {
		if e.action != actAlloc && e.action != actFreeCompleted && e.action != actFree {
			return true
		}
		// The regions containing e.addr: the one starting at or below it,
		// and the one before, when e.addr is where it ends (the next
		// block's own free merges with the free space before it).
		k, _ := slices.BinarySearchFunc(open, e.addr, func(r region, a uint64) int { return cmp.Compare(r.lo, a+1) })
		for _, j := range []int{k - 1, k - 2} {
			if j >= 0 && !open[j].done && open[j].lo <= e.addr && e.addr <= open[j].hi {
				settle(&open[j], e)
			}
		}
		return unsettled > 0
	})
	if err != nil {
		return err
	}
	for j := range open {
		if !open[j].done {
			st.SizesUnknown++
		}
	}
	return nil
}

// PyTorch's pools: a segment of exactly kSmallBuffer serves the small pool.
// Every block of the large pool is larger than kSmallSize (requests above
// it, and remainders split off only when larger), and every block of the
// small pool at least kMinBlockSize.
const (
	smallBuffer  = 2 << 20
	smallSize    = 1 << 20
	minBlockSize = 512
)

// blockSize says what block an allocation made before the recording, and
// known only by its requested size, must have had: if the room between its
// rounded size and the next block (or the segment's end) is too small to be
// a free block of its pool, PyTorch did not split it off, and the block
// holds it.
func blockSize(b startBlock, next uint64, small bool) (uint64, bool) {
	end := b.addr + roundSize(b.size)
	if next <= end {
		return b.size, false
	}
	room := next - end
	if small && room < minBlockSize || !small && room <= smallSize {
		return roundSize(b.size) + room, true
	}
	return b.size, false
}

// roundSize is PyTorch's default rounding of a request: to 512 bytes.
func roundSize(n uint64) uint64 {
	if n < 512 {
		return 512
	}
	return (n + 511) / 512 * 512
}

// cluster is a run of addresses where segments overlap at some time, and
// where it goes in the simulated device.
type cluster struct {
	lo, hi uint64 // recorded
	to     uint64 // replayed address of lo
}

type clusterList []cluster

// maxTraceSize bounds sizes in a trace (trace format v1: below 2^63), and
// maxCapacity a device's (bfcsim's simulated devices hold at most 2^62
// bytes).
const (
	maxTraceSize = 1 << 63
	maxCapacity  = 1 << 62
)

// replayBase is where the first cluster goes: the simulated device's base.
const replayBase = 1 << 40

// clusterAlign keeps each cluster's offset from a 2 MiB boundary, the
// alignment of CUDA's segments; clusterGap is the most room left between
// clusters (their recorded gap, if smaller).
const (
	clusterAlign = 2 << 20
	clusterGap   = 2 << 20
	// expandableGap is the most room left between clusters of a recording
	// with expandable segments: more than any segment's address range (9/8
	// of a device's memory: 128 GiB is beyond any GPU's), and little
	// enough that hundreds of clusters fit in the paged device's 128 TiB.
	expandableGap = 1 << 37
)

func makeClusters(spans []span, maxGap uint64) clusterList {
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	var cl clusterList
	for _, s := range spans {
		if s.hi <= s.lo {
			continue
		}
		if k := len(cl); k > 0 && s.lo <= cl[k-1].hi {
			cl[k-1].hi = max(cl[k-1].hi, s.hi)
			continue
		}
		cl = append(cl, cluster{lo: s.lo, hi: s.hi})
	}
	cursor := uint64(replayBase)
	for i := range cl {
		c := &cl[i]
		c.to = (cursor+clusterAlign-1)/clusterAlign*clusterAlign + c.lo%clusterAlign
		cursor = c.to + (c.hi - c.lo)
		if i+1 < len(cl) {
			cursor += min(cl[i+1].lo-c.hi, maxGap)
		}
	}
	return cl
}

// move maps a recorded address into the simulated device.
func (cl clusterList) move(addr uint64) (uint64, bool) {
	i, _ := slices.BinarySearchFunc(cl, addr, func(c cluster, a uint64) int {
		if c.hi <= a {
			return -1
		}
		if c.lo > a {
			return 1
		}
		return 0
	})
	if i < len(cl) && cl[i].lo <= addr && addr < cl[i].hi {
		return addr - cl[i].lo + cl[i].to, true
	}
	return 0, false
}
