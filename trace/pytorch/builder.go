package pytorch

import (
	"encoding/binary"
	"slices"

	"errors"
	"fmt"
	"github.com/bfcsim/bfcsim/trace"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The builder is what the pickle and JSON readers feed: it holds the
// snapshot's containers while they are filled, and reduces each one to what
// the importer needs the moment it is placed in its parent. It never builds
// a tree of the document:
//
//   - A dict placed in a list is a record: its known keys (keyCode) are
//     written to the list's chain in the spool (spool.go; a trace entry in
//     a compact form of its own) and the dict is gone. Trace entries,
//     segments and blocks all take this path, so memory does not grow with
//     the trace. Anything else placed in a list is a record of one value.
//   - A dict with only a frame's keys (filename, name, line) placed in a
//     list is a frame: it is interned once, by content, and the list keeps
//     its id (up to trace.MaxStackDepth of them). A frames list placed in
//     a dict becomes its tag, once per list object, however many entries
//     share it: the stack, interned by its frames, and the call site it
//     names (trace.FrameRule).
//   - A dict with no key the importer reads is written wherever it is
//     placed (it may be shared: a frame with only unknown keys).
//   - A list keeps a count, its chain of records and the frames of its
//     tag; a dict placed in a dict (the top level, a segment's
//     allocator settings) keeps its known fields.
//
// A container is sealed when it is placed: Python's pickler writes every
// container whole before placing it, and a snapshot has no cycles, so a
// change after placement (a crafted pickle) is refused rather than
// modelled. This is what makes one pass enough: what a container holds
// when it is placed is final.
//
// A reduced container's memo slot holds what it was reduced to, so later
// references cost nothing. Its node is freed once no copy of it is left on
// the reader's stack: the reader counts them (hold and drop), since the
// same frame dict or frames list may sit on the stack several times while
// the first copy is placed.

// keyCode names the snapshot keys the importer reads; any other key is
// ignored.
type keyCode uint8

const (
	keyNone keyCode = iota
	keySegments
	keyDeviceTraces
	keyDevice
	keyAddress
	keyTotalSize
	keyStream
	keyIsExpandable
	keyBlocks
	keySize
	keyRequestedSize
	keyState
	keyFrames
	keyAction
	keyAddr
	keyTimeUS
	keyFilename
	keyName
	keyLine
	keyAllocatorSettings
	keyExpandableSegments
	keyMaxSplitSize
	keyGCThreshold
	keyAllocConf
	keyDeviceFree
	keySegmentType
	keyExternalAnnotations
	keyStage
	numKeys
)

var keyNames = [numKeys]string{
	keySegments:      "segments",
	keyDeviceTraces:  "device_traces",
	keyDevice:        "device",
	keyAddress:       "address",
	keyTotalSize:     "total_size",
	keyStream:        "stream",
	keyIsExpandable:  "is_expandable",
	keyBlocks:        "blocks",
	keySize:          "size",
	keyRequestedSize: "requested_size",
	keyState:         "state",
	keyFrames:        "frames",
	keyAction:        "action",
	keyAddr:          "addr",
	keyTimeUS:        "time_us",
	keyFilename:      "filename",
	keyName:          "name",
	keyLine:          "line",
	// allocator_settings (PyTorch ≥ 2.6) and what the importer reads of it.
	keyAllocatorSettings:  "allocator_settings",
	keyExpandableSegments: "expandable_segments",
	keyMaxSplitSize:       "max_split_size",
	keyGCThreshold:        "garbage_collection_threshold",
	keyAllocConf:          "PYTORCH_CUDA_ALLOC_CONF",
	// An oom entry's free device memory.
	keyDeviceFree:  "device_free",
	keySegmentType: "segment_type",
	// external_annotations: the phases record_function names (an
	// optimizer's step, a data loader's next batch), each a START and an
	// END.
	keyExternalAnnotations: "external_annotations",
	keyStage:               "stage",
}

// isFrameKey says which keys a frame dict has.
func isFrameKey(k keyCode) bool { return k == keyFilename || k == keyName || k == keyLine }

// Bounds that no real snapshot comes near, so that a crafted one ends in an
// error instead of exhausting memory.
const (
	// maxKeptString is the most bytes of a string that are kept; a longer
	// one (no key, action or file name is) keeps its first bytes only.
	maxKeptString = 64 << 10
	// maxNodes bounds the containers alive at once (a reference holds
	// the slot in 28 bits).
	maxNodes = 1 << 28
	// maxOthers is how many unknown keys of a dict are kept for messages.
	maxOthers = 8
)

// A node reference packs a slot and the generation of the node that held
// it, so that a reference to a node that has since been freed and reused is
// caught. Both fit in 56 bits, so that a reference packs into a memo slot.
const (
	refBits = 28
	refMask = 1<<refBits - 1
)

func makeRef(slot, gen uint32) uint64 { return uint64(gen&refMask)<<refBits | uint64(slot) }

func splitRef(r uint64) (slot, gen uint32) { return uint32(r & refMask), uint32(r>>refBits) & refMask }

// errStale is what using a container that no longer exists gives.
var errStale = errors.New("a container is used again after it was placed in a list; a memory snapshot never does that")

// errSharedRecord is what placing a trace entry, segment or block twice
// gives.
var errSharedRecord = errors.New("a dict is placed in a list twice; a memory snapshot never shares a trace entry, segment or block")

type field struct {
	v   value
	key keyCode
}

type dictNode struct {
	fields  []field  // known keys only, in the order first set
	others  []uint32 // the first few unknown keys (string ids), for messages
	memo    uint32   // memo index + 1, or 0
	gen     uint32
	refs    int32  // copies on the reader's stack
	frame   uint32 // reduced to a frame: its id + 1
	spooled bool   // reduced to a record in a list's chain
	empty   bool   // reduced to kEmpty: it has no key the importer reads
	sealed  bool   // placed in a container: no more changes
	free    bool
}

func (d *dictNode) reduced() bool { return d.spooled || d.frame != 0 || d.empty }

type listNode struct {
	n          int64    // items placed
	last       int64    // index of the last item written to the spool, or -1
	head, tail int32    // the list's chain in the spool, or -1
	stk        []uint32 // ids of the frames placed, innermost first, up to trace.MaxStackDepth
	memo       uint32   // memo index + 1, or 0
	gen        uint32
	refs       int32  // copies on the reader's stack
	tag        uint32 // reduced to a tag (a frames list placed in a dict): its id + 1
	sealed     bool   // placed in a container: no more items
	tuple      bool   // a tuple: its items came with it
	used       bool   // read as a segment's blocks
	free       bool
	// lastAddr and lastTime are the last compact entry's, which the next
	// one's are written as differences from (encodeDict).
	lastAddr, lastTime uint64
}

// frame is a frame dict, by content.
type frame struct {
	name, file uint32 // string ids; 0 ("") when absent or not a string
	line       value
}

// tag is what a frames list is reduced to: its stack, the call site that
// names an allocation, or the reason it could not be made.
type tag struct {
	text, err string
	frames    []uint32 // frame ids, innermost first
}

type builder struct {
	strs  strTable
	memo  memo
	dicts []dictNode
	lists []listNode
	// freeDicts and freeLists are slots to reuse.
	freeDicts, freeLists []uint32

	frames     []frame
	frameIndex map[frame]uint32
	tags       []tag
	tagIndex   map[string]uint32 // by the frame ids, 4 bytes each
	stackRefs  int               // frames listed by all tags together
	heldFrames int               // frames the lists being filled keep (listNode.stk)
	rule       trace.FrameRule
	key        []byte

	sp  *spool
	rec []byte // the record being encoded
}

func newBuilder(sp *spool) *builder {
	b := &builder{
		strs:       newStrTable(),
		frameIndex: map[frame]uint32{},
		tagIndex:   map[string]uint32{},
		sp:         sp,
	}
	b.tags = append(b.tags, tag{}) // tag 0: none
	b.tagIndex[""] = 0
	return b
}

func (b *builder) newDict() (value, error) {
	var slot uint32
	if n := len(b.freeDicts); n > 0 {
		slot = b.freeDicts[n-1]
		b.freeDicts = b.freeDicts[:n-1]
	} else {
		if len(b.dicts)+len(b.lists) >= maxNodes {
			return value{}, fmt.Errorf("more than %d containers alive at once; a memory snapshot has far fewer", maxNodes)
		}
		b.dicts = append(b.dicts, dictNode{})
		slot = uint32(len(b.dicts) - 1)
	}
	d := &b.dicts[slot]
	*d = dictNode{fields: d.fields[:0], gen: d.gen}
	return value{kind: kDict, bits: makeRef(slot, d.gen)}, nil
}

func (b *builder) newList() (value, error) {
	var slot uint32
	if n := len(b.freeLists); n > 0 {
		slot = b.freeLists[n-1]
		b.freeLists = b.freeLists[:n-1]
	} else {
		if len(b.dicts)+len(b.lists) >= maxNodes {
			return value{}, fmt.Errorf("more than %d containers alive at once; a memory snapshot has far fewer", maxNodes)
		}
		b.lists = append(b.lists, listNode{})
		slot = uint32(len(b.lists) - 1)
	}
	l := &b.lists[slot]
	gen := l.gen
	*l = listNode{last: -1, head: -1, tail: -1, gen: gen}
	return value{kind: kList, bits: makeRef(slot, gen)}, nil
}

// dict returns the node v refers to, or errStale.
func (b *builder) dict(v value) (*dictNode, error) {
	slot, gen := splitRef(v.bits)
	if int(slot) >= len(b.dicts) {
		return nil, errStale
	}
	d := &b.dicts[slot]
	if d.free || d.gen&refMask != gen {
		return nil, errStale
	}
	return d, nil
}

func (b *builder) list(v value) (*listNode, error) {
	slot, gen := splitRef(v.bits)
	if int(slot) >= len(b.lists) {
		return nil, errStale
	}
	l := &b.lists[slot]
	if l.free || l.gen&refMask != gen {
		return nil, errStale
	}
	return l, nil
}

// hold counts a copy of a container on the reader's stack.
func (b *builder) hold(v value) {
	switch v.kind {
	case kDict:
		if d, err := b.dict(v); err == nil {
			d.refs++
		}
	case kList:
		if l, err := b.list(v); err == nil {
			l.refs++
		}
	}
}

// drop forgets a copy of a container on the reader's stack, and frees the
// container if it was reduced and that was the last copy.
func (b *builder) drop(v value) {
	switch v.kind {
	case kDict:
		if d, err := b.dict(v); err == nil {
			if d.refs--; d.refs <= 0 && d.reduced() {
				b.freeDict(v, d)
			}
		}
	case kList:
		if l, err := b.list(v); err == nil {
			if l.refs--; l.refs <= 0 && l.tag != 0 {
				b.freeList(v, l)
			}
		}
	}
}

func (b *builder) freeDict(v value, d *dictNode) {
	d.free = true
	d.gen++
	slot, _ := splitRef(v.bits)
	b.freeDicts = append(b.freeDicts, slot)
}

func (b *builder) freeList(v value, l *listNode) {
	b.dropFrames(l)
	l.free = true
	l.gen++
	slot, _ := splitRef(v.bits)
	b.freeLists = append(b.freeLists, slot)
}

// reduceDict records what a dict was reduced to in its memo slot, and
// frees it if no copy is left on the stack.
func (b *builder) reduceDict(v value, d *dictNode, memoAs value) {
	if d.memo != 0 {
		b.memo.replace(d.memo-1, memoAs)
	}
	if d.refs <= 0 {
		b.freeDict(v, d)
	}
}

// memoize records that memo index idx holds v, so that the container can
// update its memo slot when it is reduced.
func (b *builder) memoize(idx uint32, v value) error {
	switch v.kind {
	case kDict:
		d, err := b.dict(v)
		if err != nil {
			return err
		}
		d.memo = idx + 1
	case kList:
		l, err := b.list(v)
		if err != nil {
			return err
		}
		l.memo = idx + 1
	}
	return b.memo.put(idx, v)
}

// fetch returns what memo index idx holds.
func (b *builder) fetch(idx uint32) (value, error) {
	v, ok := b.memo.get(idx)
	switch {
	case !ok:
		return value{}, fmt.Errorf("memo %d is read before it is written", idx)
	case v.kind == kSpooled:
		return value{}, fmt.Errorf("memo %d is a trace entry, segment or block already placed in its list; a memory snapshot never refers to one twice", idx)
	}
	return v, nil
}

// seal marks a container as placed. Placing a container twice is allowed
// (frames lists and frame dicts are shared); changing it afterwards is not.
func (b *builder) seal(v value) error {
	switch v.kind {
	case kDict:
		d, err := b.dict(v)
		if err != nil {
			return err
		}
		d.sealed = true
	case kList:
		l, err := b.list(v)
		if err != nil {
			return err
		}
		l.sealed = true
	}
	return nil
}

// setItem does d[k] = v.
func (b *builder) setItem(dv, k, v value) error {
	if dv.kind != kDict {
		return fmt.Errorf("sets an item of a %s, not of a dict", dv.typeName())
	}
	d, err := b.dict(dv)
	if err != nil {
		return err
	}
	if d.sealed {
		return errors.New("a dict is changed after it was placed; a memory snapshot never does that")
	}
	if err := b.seal(v); err != nil {
		return err
	}
	if k.kind != kStr {
		return nil // no key of a snapshot is anything but a string
	}
	code := b.strs.key[k.aux]
	if code == keyNone {
		if len(d.others) < maxOthers && !containsID(d.others, k.aux) {
			d.others = append(d.others, k.aux)
		}
		return nil
	}
	if code == keyFrames && v.kind == kList {
		// reduceFrames frees a list, never a dict: d stays valid.
		if v, err = b.reduceFrames(v); err != nil {
			return err
		}
	}
	for i := range d.fields {
		if d.fields[i].key == code {
			d.fields[i].v = v
			return nil
		}
	}
	d.fields = append(d.fields, field{v: v, key: code})
	return nil
}

func containsID(ids []uint32, id uint32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// reduceFrames turns a frames list placed in a dict into its tag. A list
// that holds nothing but frames is reduced: its memo slot keeps the tag, so
// a later reference to the same list costs nothing, and its node goes once
// no copy of it is on the stack.
func (b *builder) reduceFrames(v value) (value, error) {
	l, err := b.list(v)
	if err != nil {
		return value{}, err
	}
	if l.tag != 0 {
		return value{kind: kTag, aux: l.tag - 1}, nil
	}
	t := value{kind: kTag, aux: b.tagOf(l.stk)}
	if l.head < 0 {
		b.dropFrames(l)
		l.tag = t.aux + 1
		if l.memo != 0 {
			b.memo.replace(l.memo-1, t)
		}
		if l.refs <= 0 {
			b.freeList(v, l)
		}
	}
	return t, nil
}

// appendItem does l.append(v).
func (b *builder) appendItem(lv, v value) error {
	if lv.kind != kList {
		return fmt.Errorf("appends to a %s, not to a list", lv.typeName())
	}
	l, err := b.list(lv)
	if err != nil {
		return err
	}
	if l.sealed || l.tuple {
		return errors.New("a list is changed after it was placed; a memory snapshot never does that")
	}
	return b.place(l, v)
}

// place puts v at the end of list l.
func (b *builder) place(l *listNode, v value) error {
	idx := l.n
	l.n++
	switch v.kind {
	case kFrame:
		b.noteFrame(l, v.aux)
		return nil
	case kEmpty:
		b.rec = b.placeEmpty(l, idx)
	case kDict:
		d, err := b.dict(v)
		if err != nil {
			return err
		}
		switch {
		case d.frame != 0:
			b.noteFrame(l, d.frame-1)
			return nil
		case d.spooled:
			return errSharedRecord
		case d.empty:
			b.rec = b.placeEmpty(l, idx)
		case len(d.fields) == 0:
			// A dict with no key the importer reads may be shared (a
			// frame with only keys it does not read): it reduces to
			// kEmpty, written again wherever it is placed.
			d.sealed, d.empty = true, true
			b.reduceDict(v, d, value{kind: kEmpty})
			b.rec = b.placeEmpty(l, idx)
		default:
			d.sealed = true
			if fid, ok := b.frameOf(d); ok {
				b.noteFrame(l, fid)
				if d.isFrame() {
					d.frame = fid + 1
					b.reduceDict(v, d, value{kind: kFrame, aux: fid})
					return nil
				}
			}
			b.rec = b.encodeDict(b.rec[:0], idx-l.last-1, d, l)
			d.spooled = true
			b.reduceDict(v, d, value{kind: kSpooled})
		}
	default:
		if err := b.seal(v); err != nil {
			return err
		}
		b.rec = appendItemRecord(b.rec[:0], idx-l.last-1, v)
	}
	l.last = idx
	return b.sp.append(l, b.rec)
}

// placeEmpty notes a dict with no key the importer reads, placed at idx
// in l: a frame without a name, and a record without fields.
func (b *builder) placeEmpty(l *listNode, idx int64) []byte {
	b.noteFrame(l, b.internFrame(frame{}))
	return b.encodeDict(b.rec[:0], idx-l.last-1, &dictNode{}, l)
}

// isFrame says whether a dict is a frame: it has a frame's keys and no
// other key the importer reads.
func (d *dictNode) isFrame() bool {
	if len(d.fields) == 0 {
		return false
	}
	for _, f := range d.fields {
		if !isFrameKey(f.key) {
			return false
		}
	}
	return true
}

// frameOf returns the frame a dict describes, if it has any frame key.
func (b *builder) frameOf(d *dictNode) (uint32, bool) {
	var fr frame
	var any bool
	for _, f := range d.fields {
		switch f.key {
		case keyName:
			fr.name, any = strID(f.v), true
		case keyFilename:
			fr.file, any = strID(f.v), true
		case keyLine:
			fr.line, any = f.v, true
		}
	}
	if !any {
		return 0, false
	}
	return b.internFrame(fr), true
}

func strID(v value) uint32 {
	if v.kind == kStr {
		return v.aux
	}
	return 0
}

func (b *builder) internFrame(fr frame) uint32 {
	if id, ok := b.frameIndex[fr]; ok {
		return id
	}
	id := uint32(len(b.frames))
	b.frames = append(b.frames, fr)
	b.frameIndex[fr] = id
	return id
}

// noteFrame keeps what a list's tag needs: the frames placed in it, the
// innermost trace.MaxStackDepth.
func (b *builder) noteFrame(l *listNode, fid uint32) {
	if len(l.stk) < trace.MaxStackDepth && b.heldFrames < maxHeldFrames {
		l.stk = append(l.stk, fid)
		b.heldFrames++
	}
}

// dropFrames lets go of the frames list l keeps.
func (b *builder) dropFrames(l *listNode) {
	b.heldFrames -= len(l.stk)
	l.stk = nil
}

// maxHeldFrames bounds the frames the lists being filled keep together: a
// snapshot fills one frames list at a time, a crafted pickle could fill
// millions at once.
const maxHeldFrames = 1 << 22

// maxStackRefs bounds the frames all distinct stacks list together; past
// it a new stack keeps its call site and no stack (a snapshot of a whole
// training run lists some hundred thousand).
const maxStackRefs = trace.MaxStackRefs

// tagOf interns the stack of frames fids and returns its tag id: the stack
// and the call site it names, "forward (model.py:42)".
func (b *builder) tagOf(fids []uint32) uint32 {
	if len(fids) == 0 {
		return 0
	}
	b.key = b.key[:0]
	for _, f := range fids {
		b.key = binary.LittleEndian.AppendUint32(b.key, f)
	}
	if id, ok := b.tagIndex[string(b.key)]; ok {
		return id
	}
	var t tag
	stack := make([]trace.Frame, len(fids))
	for i, fid := range fids {
		fr := b.frames[fid]
		line, err := b.asInt(fr.line, "line")
		if err != nil && t.err == "" {
			t.err = err.Error()
		}
		stack[i] = trace.Frame{Name: b.strs.get(fr.name), File: b.strs.get(fr.file), Line: line}
	}
	if t.err == "" {
		t.text = b.rule.CallSite(stack)
		if b.stackRefs+len(fids) <= maxStackRefs {
			t.frames = slices.Clone(fids)
			b.stackRefs += len(fids)
		}
	}
	id := uint32(len(b.tags))
	b.tags = append(b.tags, t)
	b.tagIndex[string(b.key)] = id
	return id
}

// frameOf returns frame fid as the trace writes it.
func (b *builder) traceFrame(fid uint32) trace.Frame {
	fr := b.frames[fid]
	line, _ := b.asInt(fr.line, "line") // checked when its tag was made
	return trace.Frame{Name: b.strs.get(fr.name), File: b.strs.get(fr.file), Line: line}
}

// str interns a string read from the document. Bytes that are not UTF-8
// (a lone surrogate from Python, a character cut at maxKeptString) become
// U+FFFD, the same whichever form the snapshot was in; a cut string gets a
// suffix no whole string has, so that it equals no key.
func (b *builder) str(s []byte, cut bool) value {
	if !utf8.Valid(s) {
		s = fromSurrogatePass(s)
	}
	if cut {
		s = append(s, "\x00…"...)
	}
	return value{kind: kStr, aux: b.strs.intern(s)}
}

// newTuple makes a tuple of items: a list that takes no more items.
func (b *builder) newTuple(items []value) (value, error) {
	v, err := b.newList()
	if err != nil {
		return value{}, err
	}
	l := &b.lists[uint32(v.bits&refMask)] // place makes no node, so l stays valid
	for _, it := range items {
		if err := b.place(l, it); err != nil {
			return value{}, err
		}
	}
	l.tuple = true
	return v, nil
}

// describeKeys lists a dict's keys, known and not, for messages.
func (b *builder) describeKeys(d *dictNode) string {
	var names []string
	for _, f := range d.fields {
		names = append(names, strconv.Quote(keyNames[f.key]))
	}
	for _, id := range d.others {
		names = append(names, b.describe(value{kind: kStr, aux: id}))
	}
	if len(names) == 0 {
		return "no keys"
	}
	return "keys " + strings.Join(names, ", ")
}
