// Package pytorch imports PyTorch CUDA memory snapshots, the files
// torch.cuda.memory._dump_snapshot writes, as bfcsim traces.
//
// A snapshot is a pickle (protocol 0 to 5) or JSON document of plain data:
// the device's segments with their blocks at the moment of the snapshot,
// and per device a trace of allocator actions (alloc, free_requested,
// free_completed, segment_alloc, segment_free, ...). Recordings of real
// training runs hold tens of millions of entries, and their stacks
// ("frames") are shared objects: one list per distinct stack, one dict per
// distinct frame. The recording usually starts mid-run and its ring buffer
// may have wrapped, so the trace alone does not say what was allocated when
// it starts. Conversion works in six steps:
//
//  1. Read the document once, as a stream (pickle.go, json.go): no tree of
//     it is built. Each container is reduced when it is placed in its
//     parent (builder.go): a dict placed in a list is written as a compact
//     record to that list's chain in a spool, in memory while small and in
//     an unlinked temporary file after (spool.go); a frames list becomes a
//     tag once per list object. Memory holds the memo's live objects, the
//     distinct strings and frames, and the lists, not the entries. No
//     opcode that could run code is executed: they are refused by name.
//  2. Pick the device (--device, else the one with the most trace entries)
//     and walk its trace once, from the spool, noting what it allocates and
//     frees.
//  3. Rebuild the start state: the segments and blocks live when the trace
//     starts are those the final snapshot holds that the trace did not
//     create, and those the trace frees without having created them
//     ("orphan" frees). A second walk infers what it can of the size of
//     blocks known only by their requested size (inferSizes).
//  4. Move addresses into the simulated device: segments that overlap in
//     address at any time form clusters, laid out from 1<<40 in address
//     order with gaps of at most 2 MiB. Offsets inside a cluster, and so
//     every address relation the allocator sees, are kept; the header's
//     address_map says how to map back.
//  5. Write the start state: a mark "start state", a reserve and the live
//     blocks (allocs carrying their recorded address) for each starting
//     segment, a mark "recording starts".
//  6. Walk the trace a third time, writing every action in order as it is
//     read: alloc (with the requested size, recorded address, stream, time
//     and a tag from the top frame), free (at free_completed, when the block
//     really returns to the allocator), reserve and release for segments,
//     marks for snapshots and out-of-memory events.
//
// Time is linear in the file, and memory does not grow with the number of
// trace entries: it grows with the final state (segments and blocks), the
// allocations live at once, and the distinct strings, frames and stacks.
package pytorch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/bfcsim/bfcsim/trace"
)

// snapshot is the part of a memory snapshot the importer reads.
type snapshot struct {
	b        *builder
	segments []segment
	// traces are the items of device_traces, by device; only the chosen
	// device's is read (eachEntry), so that what other devices hold cannot
	// stop an import.
	traces []value
	// settings are what allocator_settings says, when the snapshot has it.
	settings *settings
	// annotations are external_annotations, in the snapshot's order.
	annotations []annotation
}

// annotation is one of external_annotations: the start or the end of a
// phase the program named (record_function), on a device, at a time.
type annotation struct {
	name   string
	end    bool
	device int64
	timeUS float64
}

// maxAnnotations bounds the annotations read; the rest are left out.
const maxAnnotations = 1 << 20

// settings are the allocator settings a snapshot records (PyTorch 2.6 and
// later): the values in effect, and the PYTORCH_CUDA_ALLOC_CONF text they
// came from.
type settings struct {
	conf         string
	expandable   bool
	maxSplitSize int64 // -1: unlimited
	gcThreshold  float64
	// problems are settings that could not be read, for Stats.
	problems []string
}

type segment struct {
	device     int64
	address    uint64
	totalSize  uint64
	stream     int64
	expandable bool
	small      bool // segment_type "small": the small pool's
	blocks     []block
}

type block struct {
	address       uint64
	size          uint64
	requestedSize uint64
	state         string
	tag           uint32 // the builder's tag id of its frames; 0: none
}

// action is a trace entry's action.
type action uint8

const (
	actOther action = iota
	actAlloc
	actFreeRequested
	actFreeCompleted
	actFree
	actSegmentAlloc
	actSegmentFree
	actSegmentMap
	actSegmentUnmap
	actSnapshot
	actOOM
)

var actionNames = map[string]action{
	"alloc":          actAlloc,
	"free_requested": actFreeRequested,
	"free_completed": actFreeCompleted,
	"free":           actFree,
	"segment_alloc":  actSegmentAlloc,
	"segment_free":   actSegmentFree,
	"segment_map":    actSegmentMap,
	"segment_unmap":  actSegmentUnmap,
	"snapshot":       actSnapshot,
	"oom":            actOOM,
}

type entry struct {
	action action
	addr   uint64
	size   uint64
	// deviceFree is an oom entry's free device memory (device_free).
	deviceFree uint64
	stream     int64
	timeUS     float64
	hasTime    bool
	tag        uint32 // the builder's tag id of its frames; 0: none
}

// read reads a snapshot, JSON by its first byte or a pickle, from r. Its
// spool must be closed (snapshot.close) once the snapshot is written.
func read(ctx context.Context, r io.Reader, opt Options) (*snapshot, error) {
	br := bufio.NewReaderSize(trace.ContextReader(ctx, r), 4096)
	first, err := firstByte(br)
	if err != nil {
		return nil, err
	}
	limit := opt.memLimit
	if limit == 0 {
		limit = defaultSpoolLimit
	}
	b := newBuilder(newSpool(opt.TempDir, limit))
	b.rule = opt.Frames
	var top value
	form := "a pickle"
	if first == '{' || first == '[' {
		form = "JSON"
		top, err = readJSON(br, b)
	} else {
		top, err = readPickle(br, b)
		if err != nil && first != '\x80' && !errors.As(err, &codeError{}) {
			err = fmt.Errorf("not a memory snapshot (neither JSON nor a pickle of protocol 2 or later): %w", err)
		}
	}
	if err == nil {
		err = b.sp.finish()
	}
	var s *snapshot
	if err == nil {
		s, err = b.snapshot(top, form)
	}
	if err != nil {
		b.sp.Close()
		return nil, err
	}
	return s, nil
}

// firstByte returns the first byte that is not white space.
func firstByte(br *bufio.Reader) (byte, error) {
	for {
		c, err := br.ReadByte()
		if err == io.EOF {
			return 0, errors.New("empty file: not a memory snapshot")
		}
		if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return c, br.UnreadByte()
		}
	}
}

func (s *snapshot) close() { s.b.sp.Close() }

// where is the path to an item, for messages: "segments[3]".
func where(parent string, i int64) string { return fmt.Sprintf("%s[%d]", parent, i) }

// snapshot reads the segments and the device traces out of the top-level
// value; form ("a pickle", "JSON") says what the file was, for messages.
func (b *builder) snapshot(top value, form string) (*snapshot, error) {
	if top.kind != kDict {
		return nil, fmt.Errorf("%s that is not a memory snapshot: its top level is a %s, not a dict", form, top.typeName())
	}
	d, err := b.dict(top)
	if err != nil {
		return nil, err
	}
	var segs, traces, set, ann value
	for _, f := range d.fields {
		switch f.key {
		case keySegments:
			segs = f.v
		case keyDeviceTraces:
			traces = f.v
		case keyAllocatorSettings:
			set = f.v
		case keyExternalAnnotations:
			ann = f.v
		}
	}
	if segs.kind == 0 {
		return nil, fmt.Errorf("%s that is not a memory snapshot: its top-level dict has no segments key (it has %s)", form, b.describeKeys(d))
	}
	s := &snapshot{b: b}
	if err := s.readSegments(segs); err != nil {
		return nil, err
	}
	if err := s.readTraces(traces); err != nil {
		return nil, err
	}
	s.settings = b.readSettings(set)
	s.annotations = b.readAnnotations(ann)
	return s, nil
}

// readAnnotations reads external_annotations. An annotation without a
// name, a stage of START or END, or a time is left out, not an error:
// they say where phases begin, which the trace is worth importing
// without.
func (b *builder) readAnnotations(v value) []annotation {
	l, err := b.listOf(v, "external_annotations", "the snapshot")
	if l == nil || err != nil {
		return nil
	}
	var out []annotation
	cr := b.chain(l)
	var rec record
	for len(out) < maxAnnotations {
		if err := cr.next(&rec); err != nil {
			break
		}
		if !rec.dict {
			continue
		}
		a := annotation{name: b.asStr(rec.get(keyName))}
		switch b.asStr(rec.get(keyStage)) {
		case "START":
		case "END":
			a.end = true
		default:
			continue
		}
		var ok bool
		a.device, _ = b.asInt(rec.get(keyDevice), "device")
		if a.timeUS, ok, err = b.asFloat(rec.get(keyTimeUS), "time_us"); err != nil || !ok || a.name == "" {
			continue
		}
		out = append(out, a)
	}
	return out
}

// readSettings reads allocator_settings. A setting of the wrong type is
// left at PyTorch's default and noted, not an error: the trace is still
// worth importing.
func (b *builder) readSettings(v value) *settings {
	if v.kind != kDict {
		return nil
	}
	d, err := b.dict(v)
	if err != nil {
		return nil
	}
	st := &settings{maxSplitSize: -1}
	for _, f := range d.fields {
		switch f.key {
		case keyAllocConf:
			st.conf = b.asStr(f.v)
		case keyExpandableSegments:
			switch f.v.kind {
			case kTrue:
				st.expandable = true
			case kFalse, kNone:
			default:
				st.problems = append(st.problems, "expandable_segments is "+b.describe(f.v))
			}
		case keyMaxSplitSize:
			// -1, or SIZE_MAX in older versions, means unlimited.
			switch n, err := b.asInt(f.v, "max_split_size"); {
			case err != nil:
				st.problems = append(st.problems, err.Error())
			case f.v.kind == kInt && n >= 0:
				st.maxSplitSize = n
			}
		case keyGCThreshold:
			x, _, err := b.asFloat(f.v, "garbage_collection_threshold")
			if err != nil {
				st.problems = append(st.problems, err.Error())
			}
			st.gcThreshold = x
		}
	}
	return st
}

// listOf returns the list a field holds; nil for None or a missing field.
func (b *builder) listOf(v value, key, where string) (*listNode, error) {
	switch v.kind {
	case 0, kNone:
		return nil, nil
	case kList:
		return b.list(v)
	}
	return nil, fmt.Errorf("%s: %s is a %s, not a list", where, key, v.typeName())
}

func (s *snapshot) readSegments(v value) error {
	b := s.b
	l, err := b.listOf(v, "segments", "the snapshot")
	if l == nil || err != nil {
		return err
	}
	cr := b.chain(l)
	var rec record
	for {
		err := cr.next(&rec)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		w := where("segments", rec.index)
		if !rec.dict {
			return fmt.Errorf("%s: a %s where a dict was expected", w, rec.item.typeName())
		}
		seg := segment{expandable: rec.get(keyIsExpandable).kind == kTrue, small: b.asStr(rec.get(keySegmentType)) == "small"}
		if seg.device, err = b.asInt(rec.get(keyDevice), "device"); err == nil {
			if seg.address, err = b.asUint(rec.get(keyAddress), "address"); err == nil {
				if seg.totalSize, err = b.asUint(rec.get(keyTotalSize), "total_size"); err == nil {
					seg.stream, err = b.asInt(rec.get(keyStream), "stream")
				}
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
		if seg.blocks, err = s.readBlocks(rec.get(keyBlocks), w, seg.address); err != nil {
			return err
		}
		s.segments = append(s.segments, seg)
	}
}

func (s *snapshot) readBlocks(v value, parent string, addr uint64) ([]block, error) {
	b := s.b
	l, err := b.listOf(v, "blocks", parent)
	if l == nil || err != nil {
		return nil, err
	}
	if l.used {
		// Shared blocks lists would make the start state grow with the
		// square of the file.
		return nil, fmt.Errorf("%s: its blocks list is another segment's too; a memory snapshot never shares them", parent)
	}
	l.used = true
	var blocks []block
	cr := b.chain(l)
	var rec record
	for {
		err := cr.next(&rec)
		if err == io.EOF {
			return blocks, nil
		}
		if err != nil {
			return nil, err
		}
		w := where(parent+".blocks", rec.index)
		if !rec.dict {
			return nil, fmt.Errorf("%s: a %s where a dict was expected", w, rec.item.typeName())
		}
		bl := block{state: b.asStr(rec.get(keyState))}
		if bl.size, err = b.asUint(rec.get(keySize), "size"); err == nil {
			if bl.requestedSize, err = b.asUint(rec.get(keyRequestedSize), "requested_size"); err == nil {
				bl.tag, err = b.tagID(rec.get(keyFrames))
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w, err)
		}
		// Older snapshots leave the address out: blocks tile the segment.
		bl.address = addr
		if rec.has(keyAddress) {
			if bl.address, err = b.asUint(rec.get(keyAddress), "address"); err != nil {
				return nil, fmt.Errorf("%s: %w", w, err)
			}
		}
		addr = bl.address + bl.size
		blocks = append(blocks, bl)
	}
}

// tagID returns the tag of an item's frames, the reduced frames list, or
// 0 for none.
func (b *builder) tagID(v value) (uint32, error) {
	switch v.kind {
	case 0, kNone:
		return 0, nil
	case kTag:
		if t := b.tags[v.aux]; t.err != "" {
			return 0, errors.New(t.err)
		}
		return v.aux, nil
	}
	return 0, fmt.Errorf("frames is a %s, not a list", v.typeName())
}

func (s *snapshot) readTraces(v value) error {
	b := s.b
	l, err := b.listOf(v, "device_traces", "the snapshot")
	if l == nil || err != nil {
		return err
	}
	// Items written as frames (dicts with only a frame's keys) leave gaps
	// in the chain; they are dicts, not traces.
	s.traces = make([]value, 0, min(l.n, 1<<16))
	cr := b.chain(l)
	var rec record
	for {
		err := cr.next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		for int64(len(s.traces)) < rec.index {
			s.traces = append(s.traces, value{kind: kFrame})
		}
		if rec.dict {
			s.traces = append(s.traces, value{kind: kDict})
		} else {
			s.traces = append(s.traces, rec.item)
		}
	}
	for int64(len(s.traces)) < l.n {
		s.traces = append(s.traces, value{kind: kFrame})
	}
	return nil
}

// traceLen is how many entries device dev's trace has.
func (s *snapshot) traceLen(dev int) int64 {
	if dev >= len(s.traces) || s.traces[dev].kind != kList {
		return 0
	}
	l, err := s.b.list(s.traces[dev])
	if err != nil {
		return 0
	}
	return l.n
}

// entryBatch is how many entries are decoded at a time: a walk decodes
// the next batch in a goroutine of its own while fn runs on this one.
const entryBatch = 1024

type entries struct {
	index []int64
	e     []entry
	err   error // what stopped the decoding after these entries
}

// eachEntry calls fn with each entry of device dev's trace, in order, with
// its index in the trace. Entries are decoded from the spool, one batch
// ahead of fn, on another goroutine; the first entry that does not fit the
// schema stops the walk with an error naming it, as does ctx, or fn's
// error. fn must not keep the entry it is given.
func (s *snapshot) eachEntry(ctx context.Context, dev int, fn func(i int64, e *entry) error) error {
	if dev >= len(s.traces) {
		return nil
	}
	b := s.b
	parent := fmt.Sprintf("device_traces[%d]", dev)
	var l *listNode
	switch v := s.traces[dev]; v.kind {
	case kNone, kTag:
		return nil // no trace; a list of frames holds no entries
	case kList:
		var err error
		if l, err = b.list(v); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%s: a %s, not a list", parent, v.typeName())
	}
	full := make(chan *entries, 2)
	free := make(chan *entries, 3)
	// A short trace (most files a fuzzer makes) gets batches its size.
	n := int(min(entryBatch, max(l.n, 1)))
	for range cap(free) {
		free <- &entries{index: make([]int64, 0, n), e: make([]entry, 0, n)}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(full)
		b.decodeEntries(b.chain(l), parent, free, full, stop)
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for batch := range full {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for k := range batch.e {
			if err := fn(batch.index[k], &batch.e[k]); err != nil {
				return err
			}
		}
		if batch.err != nil {
			return batch.err
		}
		free <- batch
	}
	return nil
}

// decodeEntries decodes a chain of entries into batches taken from free
// and handed on through full, until the chain ends, an entry is bad, or
// stop is closed.
func (b *builder) decodeEntries(cr *chainReader, parent string, free <-chan *entries, full chan<- *entries, stop <-chan struct{}) {
	var rec record
	for {
		var batch *entries
		select {
		case batch = <-free:
		case <-stop:
			return
		}
		batch.index, batch.e = batch.index[:0], batch.e[:0]
		for len(batch.e) < cap(batch.e) && batch.err == nil {
			err := cr.next(&rec)
			if err == io.EOF {
				break
			}
			switch {
			case err != nil:
				batch.err = err
			case !rec.dict:
				batch.err = fmt.Errorf("%s: a %s where a dict was expected", where(parent, rec.index), rec.item.typeName())
			default:
				batch.e = append(batch.e, entry{})
				if err := b.decodeEntry(&rec, &batch.e[len(batch.e)-1]); err != nil {
					batch.e = batch.e[:len(batch.e)-1]
					batch.err = fmt.Errorf("%s: %w", where(parent, rec.index), err)
					break
				}
				batch.index = append(batch.index, rec.index)
			}
		}
		last := len(batch.e) < cap(batch.e) || batch.err != nil
		select {
		case full <- batch:
		case <-stop:
			return
		}
		if last {
			return
		}
	}
}

func (b *builder) decodeEntry(rec *record, e *entry) error {
	if rec.compact {
		c := &rec.e
		e.action = actOther
		if c.flags&ceAction != 0 {
			e.action = b.strs.act[c.action]
		}
		e.addr, e.size, e.stream = c.addr, c.size, c.stream
		e.hasTime = c.flags&(ceTimeInt|ceTimeFloat) != 0
		switch {
		case c.flags&ceTimeInt != 0:
			e.timeUS = float64(int64(c.time))
		case c.flags&ceTimeFloat != 0:
			e.timeUS = math.Float64frombits(c.time)
		default:
			e.timeUS = 0
		}
		e.tag = c.tag
		return nil
	}
	var err error
	e.action = actOther
	if a := rec.get(keyAction); a.kind == kStr {
		e.action = b.strs.act[a.aux]
	}
	if e.addr, err = b.asUint(rec.get(keyAddr), "addr"); err != nil {
		return err
	}
	if e.size, err = b.asUint(rec.get(keySize), "size"); err != nil {
		return err
	}
	if e.stream, err = b.asInt(rec.get(keyStream), "stream"); err != nil {
		return err
	}
	if e.tag, err = b.tagID(rec.get(keyFrames)); err != nil {
		return err
	}
	if e.deviceFree, err = b.asUint(rec.get(keyDeviceFree), "device_free"); err != nil {
		return err
	}
	e.timeUS, e.hasTime, err = b.asFloat(rec.get(keyTimeUS), "time_us")
	return err
}
