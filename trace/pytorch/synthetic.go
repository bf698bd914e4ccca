package pytorch

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
)

// SyntheticOptions describe a synthetic memory snapshot of the shape
// PyTorch writes, for benchmarks and tests at sizes no fixture has.
type SyntheticOptions struct {
	// Entries is the number of trace entries (allocs, the free_requested and
	// free_completed of each free, segment_allocs).
	Entries int
	// Stacks is the number of distinct frames lists when SharedStacks is
	// set; Frames the frames in each stack, drawn from 4×Frames distinct
	// frame dicts.
	Stacks, Frames int
	// SharedStacks makes every allocation's frames one of Stacks shared
	// list objects. Without it each allocation has its own list (of shared
	// frame dicts), which its frees share, as PyTorch's own snapshots do.
	SharedStacks bool
	// Live is about how many allocations are live at once.
	Live int
	// Seed picks the sequence.
	Seed uint64
	// JSON writes the snapshot as JSON instead of a protocol 4 pickle.
	JSON bool
}

// DefaultSynthetic is the shape the importer's benchmarks use: entries
// with 60 frames each, drawn from 500 shared stacks.
func DefaultSynthetic(entries int) SyntheticOptions {
	return SyntheticOptions{Entries: entries, Stacks: 500, Frames: 60, SharedStacks: true, Live: 2000, Seed: 1}
}

// The synthetic device: segments of synthSegment bytes, each holding one
// allocation at its start, as many as are live at once.
const (
	synthBase    = 0x7f2a00000000
	synthSegment = 64 << 20
)

// WriteSynthetic writes a synthetic snapshot: device 0 allocates and frees
// blocks of 512 B to 32 MiB, each in a segment of its own, and frees each
// with free_requested then free_completed; the trace keeps the last
// Entries entries of a longer run (PyTorch's ring buffer), so the importer
// must rebuild what was live when it starts. It streams: memory stays
// flat whatever Entries is.
func WriteSynthetic(w io.Writer, opt SyntheticOptions) error {
	if opt.Entries < 0 || opt.Frames <= 0 || opt.Live <= 0 || opt.SharedStacks && opt.Stacks <= 0 {
		return errors.New("synthetic snapshot: Entries ≥ 0, and Frames, Live and (with SharedStacks) Stacks > 0")
	}
	g := &synth{opt: opt, rng: rand.New(rand.NewPCG(opt.Seed, 0x5eed))}
	g.plan()
	var e encoder
	if opt.JSON {
		e = newJSONEncoder(w)
	} else {
		e = newPickleEncoder(w)
	}
	return g.write(e)
}

type synthBlock struct {
	slot  int
	size  uint64
	stack int // frames list: a shared stack, or the allocation's own
}

type synth struct {
	opt  SyntheticOptions
	rng  *rand.Rand
	skip int // entries run before the recording starts
	// the allocator's state
	live      []synthBlock
	freeSlots []int
	slots     int // segments made
	nextStack int // the next per-allocation frames list
}

// plan sets how much of the run happens before the recording starts: long
// enough to fill the device, so the start state is real.
func (g *synth) plan() {
	g.skip = 3 * g.opt.Live
}

// encoder writes the snapshot's structure; pickle and JSON differ only in
// how values are spelled and shared.
type encoder interface {
	dict()                      // open a dict
	list()                      // open a list
	end()                       // close the innermost container
	key(s string)               // the next key of a dict
	str(s string)               // a string value
	int(i int64)                // an int value
	bool(b bool)                // a bool value
	frames(g *synth, stack int) // the frames list of a stack
	forget(stack int)           // the stack's list is not used again
	flush() error
}

func (g *synth) size() uint64 {
	// Log-uniform from 512 B to 32 MiB, rounded to 512.
	x := math.Exp(g.rng.Float64() * math.Log(32<<20/512))
	return uint64(x) * 512
}

// step runs the allocator one action and calls emit for each entry it
// records.
func (g *synth) step(emit func(action string, addr, size uint64, stack int)) {
	if len(g.live) > 0 && (len(g.live) >= 2*g.opt.Live || g.rng.IntN(2*g.opt.Live) < len(g.live)) {
		i := g.rng.IntN(len(g.live))
		b := g.live[i]
		g.live[i] = g.live[len(g.live)-1]
		g.live = g.live[:len(g.live)-1]
		g.freeSlots = append(g.freeSlots, b.slot)
		addr := synthBase + uint64(b.slot)*synthSegment
		emit("free_requested", addr, b.size, b.stack)
		emit("free_completed", addr, b.size, b.stack)
		return
	}
	var slot int
	if n := len(g.freeSlots); n > 0 {
		slot = g.freeSlots[n-1]
		g.freeSlots = g.freeSlots[:n-1]
	} else {
		slot = g.slots
		g.slots++
		emit("segment_alloc", synthBase+uint64(slot)*synthSegment, synthSegment, -1)
	}
	b := synthBlock{slot: slot, size: g.size()}
	if g.opt.SharedStacks {
		b.stack = g.rng.IntN(g.opt.Stacks)
	} else {
		b.stack = g.nextStack
		g.nextStack++
	}
	g.live = append(g.live, b)
	emit("alloc", synthBase+uint64(slot)*synthSegment, b.size, b.stack)
}

// replay runs the allocator from the start, with the same seed, and calls
// emit (if not nil) for each entry the recording keeps. It returns the
// final state.
func (g *synth) replay(emit func(action string, addr, size uint64, stack int)) *synth {
	s := &synth{opt: g.opt, rng: rand.New(rand.NewPCG(g.opt.Seed, 0x5eed)), skip: g.skip}
	n := 0
	for n < s.skip+s.opt.Entries {
		s.step(func(action string, addr, size uint64, stack int) {
			if n >= s.skip && emit != nil {
				emit(action, addr, size, stack)
			}
			n++
		})
	}
	return s
}

// write writes the snapshot. The final segments come first in the file,
// so the allocator runs twice with the same seed: once to learn the final
// state, once to write the recording.
func (g *synth) write(e encoder) error {
	final := g.replay(nil)
	live := map[int]synthBlock{}
	for _, b := range final.live {
		live[b.slot] = b
	}
	e.dict()
	e.key("segments")
	e.list()
	for slot := range final.slots {
		addr := uint64(synthBase + slot*synthSegment)
		e.dict()
		e.key("device")
		e.int(0)
		e.key("address")
		e.int(int64(addr))
		e.key("total_size")
		e.int(synthSegment)
		e.key("stream")
		e.int(0)
		e.key("segment_type")
		e.str("large")
		e.key("is_expandable")
		e.bool(false)
		e.key("blocks")
		e.list()
		rest := uint64(synthSegment)
		if b, ok := live[slot]; ok {
			e.dict()
			e.key("address")
			e.int(int64(addr))
			e.key("size")
			e.int(int64(b.size))
			e.key("requested_size")
			e.int(int64(b.size))
			e.key("state")
			e.str("active_allocated")
			e.key("frames")
			e.frames(g, b.stack)
			e.end()
			addr += b.size
			rest -= b.size
		}
		e.dict()
		e.key("address")
		e.int(int64(addr))
		e.key("size")
		e.int(int64(rest))
		e.key("requested_size")
		e.int(0)
		e.key("state")
		e.str("inactive")
		e.key("frames")
		e.list()
		e.end()
		e.end()
		e.end() // blocks
		e.end() // segment
	}
	e.end() // segments

	e.key("device_traces")
	e.list()
	e.list()
	var t uint64
	g.replay(func(action string, addr, size uint64, stack int) {
		t += 7
		e.dict()
		e.key("action")
		e.str(action)
		e.key("addr")
		e.int(int64(addr))
		e.key("size")
		e.int(int64(size))
		e.key("stream")
		e.int(0)
		e.key("time_us")
		e.int(int64(1_700_000_000_000_000 + t))
		e.key("frames")
		if stack < 0 {
			e.list()
			e.end()
		} else {
			e.frames(g, stack)
			if !g.opt.SharedStacks && action == "free_completed" {
				e.forget(stack) // the last entry to use the allocation's list
			}
		}
		e.end()
	})
	e.end() // device 0
	e.end() // device_traces
	e.key("allocator_settings")
	e.dict()
	e.key("PYTORCH_CUDA_ALLOC_CONF")
	e.str("")
	e.key("expandable_segments")
	e.bool(false)
	e.end()
	e.end()
	return e.flush()
}

// frame returns frame j of a stack: its id among the 4×Frames distinct
// frames and what it says. C++ frames come first, as in snapshots taken
// on Linux, then Python frames.
func (g *synth) frame(stack, j int) (id int, file, name string, line int64) {
	f := g.opt.Frames
	if j < f/3 {
		id = (stack*7919 + j*104729) % f
		return id, "??", fmt.Sprintf("c10::cuda_frame_%d()", id), 0
	}
	id = f + (stack*7919+j*104729)%(3*f)
	return id, fmt.Sprintf("/opt/project/model/layer_%d.py", id%40), fmt.Sprintf("forward_%d", id), int64(10 + id)
}

// pickleEncoder writes protocol 4 as Python's pickler does, but for one
// thing: every string and container memoized, strings and shared objects
// referenced again with BINGET or LONG_BINGET, containers filled in
// batches of up to 1,000 items between MARK and SETITEMS or APPENDS, the
// stream cut into FRAMEs of about 64 KiB. Python writes a batch of one
// item without the MARK (SETITEM, APPEND) and an empty container with no
// batch at all; this encoder, which does not know a container's length
// before its end, writes a MARK and SETITEMS or APPENDS for those too,
// which unpickles to the same objects.
type pickleEncoder struct {
	w        *bufio.Writer
	frame    []byte
	memo     uint32
	strs     map[string]uint32
	stacks   map[int]uint32 // frames lists written, by stack
	frameIdx map[int]uint32 // frame dicts written, by frame id
	open     []*openContainer
	started  bool
	err      error
}

type openContainer struct {
	dict  bool
	items int // items since the last batch started
}

func newPickleEncoder(w io.Writer) *pickleEncoder {
	return &pickleEncoder{w: bufio.NewWriterSize(w, 1<<20), strs: map[string]uint32{}, stacks: map[int]uint32{}, frameIdx: map[int]uint32{}}
}

const pickleFrameTarget = 64 << 10

func (p *pickleEncoder) op(b ...byte) { p.frame = append(p.frame, b...) }

func (p *pickleEncoder) memoize() uint32 {
	p.op('\x94')
	p.memo++
	return p.memo - 1
}

func (p *pickleEncoder) get(idx uint32) {
	if idx < 256 {
		p.op('h', byte(idx))
		return
	}
	p.frame = binary.LittleEndian.AppendUint32(append(p.frame, 'j'), idx)
}

// item notes that a value was written into the innermost container,
// closing a batch at 1,000 items (Python's _BATCHSIZE).
func (p *pickleEncoder) item() {
	if p.err == nil && len(p.frame) >= pickleFrameTarget {
		p.commitFrame()
	}
	if len(p.open) == 0 {
		return
	}
	c := p.open[len(p.open)-1]
	if c.dict {
		c.items++ // keys and values both count; a batch is 1,000 pairs
		if c.items == 2000 {
			p.op('u', '(')
			c.items = 0
		}
		return
	}
	c.items++
	if c.items == 1000 {
		p.op('e', '(')
		c.items = 0
	}
}

func (p *pickleEncoder) commitFrame() {
	if !p.started {
		if _, p.err = p.w.Write([]byte{'\x80', 4}); p.err != nil {
			return
		}
		p.started = true
	}
	var h [9]byte
	h[0] = '\x95'
	binary.LittleEndian.PutUint64(h[1:], uint64(len(p.frame)))
	if _, p.err = p.w.Write(h[:]); p.err == nil {
		_, p.err = p.w.Write(p.frame)
	}
	p.frame = p.frame[:0]
}

func (p *pickleEncoder) open1(dict bool) {
	if dict {
		p.op('}')
	} else {
		p.op(']')
	}
	p.memoize()
	p.op('(')
	p.open = append(p.open, &openContainer{dict: dict})
}

func (p *pickleEncoder) dict() { p.open1(true) }
func (p *pickleEncoder) list() { p.open1(false) }

func (p *pickleEncoder) end() {
	c := p.open[len(p.open)-1]
	p.open = p.open[:len(p.open)-1]
	if c.dict {
		p.op('u')
	} else {
		p.op('e')
	}
	p.item()
}

func (p *pickleEncoder) key(s string) { p.str(s) }

func (p *pickleEncoder) str(s string) {
	if idx, ok := p.strs[s]; ok {
		p.get(idx)
	} else {
		if len(s) < 256 {
			p.op('\x8c', byte(len(s)))
		} else {
			p.frame = binary.LittleEndian.AppendUint32(append(p.frame, 'X'), uint32(len(s)))
		}
		p.frame = append(p.frame, s...)
		p.strs[s] = p.memoize()
	}
	p.item()
}

func (p *pickleEncoder) int(i int64) {
	switch {
	case i >= 0 && i < 256:
		p.op('K', byte(i))
	case i >= 0 && i < 65536:
		p.frame = binary.LittleEndian.AppendUint16(append(p.frame, 'M'), uint16(i))
	case i >= math.MinInt32 && i <= math.MaxInt32:
		p.frame = binary.LittleEndian.AppendUint32(append(p.frame, 'J'), uint32(int32(i)))
	default:
		// LONG1: the shortest two's complement that holds i.
		var b [9]byte
		binary.LittleEndian.PutUint64(b[:], uint64(i))
		n := 8
		for n > 1 && (b[n-1] == 0 && b[n-2]&0x80 == 0 || b[n-1] == 0xff && b[n-2]&0x80 != 0) {
			n--
		}
		p.op('\x8a', byte(n))
		p.frame = append(p.frame, b[:n]...)
	}
	p.item()
}

func (p *pickleEncoder) bool(b bool) {
	if b {
		p.op('\x88')
	} else {
		p.op('\x89')
	}
	p.item()
}

func (p *pickleEncoder) frames(g *synth, stack int) {
	if idx, ok := p.stacks[stack]; ok {
		p.get(idx)
		p.item()
		return
	}
	p.list()
	p.stacks[stack] = p.memo - 1
	for j := range g.opt.Frames {
		id, file, name, line := g.frame(stack, j)
		if idx, ok := p.frameIdx[id]; ok {
			p.get(idx)
			p.item()
			continue
		}
		p.dict()
		p.frameIdx[id] = p.memo - 1
		p.key("filename")
		p.str(file)
		p.key("line")
		p.int(line)
		p.key("name")
		p.str(name)
		p.end()
	}
	p.end()
}

func (p *pickleEncoder) forget(stack int) { delete(p.stacks, stack) }

func (p *pickleEncoder) flush() error {
	p.op('.')
	p.commitFrame()
	if p.err != nil {
		return p.err
	}
	return p.w.Flush()
}

// jsonEncoder writes the same structure as JSON: no sharing, so every
// entry spells out its frames.
type jsonEncoder struct {
	w      *bufio.Writer
	first  []bool // per open container: nothing written in it yet
	closer []byte // per open container: '}' or ']'
	buf    []byte
}

func newJSONEncoder(w io.Writer) *jsonEncoder { return &jsonEncoder{w: bufio.NewWriterSize(w, 1<<20)} }

func (j *jsonEncoder) sep() {
	if n := len(j.first); n > 0 {
		if !j.first[n-1] {
			j.w.WriteByte(',')
		}
		j.first[n-1] = false
	}
}

func (j *jsonEncoder) open(c, closer byte) {
	j.sep()
	j.w.WriteByte(c)
	j.first = append(j.first, true)
	j.closer = append(j.closer, closer)
}

func (j *jsonEncoder) dict() { j.open('{', '}') }
func (j *jsonEncoder) list() { j.open('[', ']') }

func (j *jsonEncoder) end() {
	j.first = j.first[:len(j.first)-1]
	j.w.WriteByte(j.closer[len(j.closer)-1])
	j.closer = j.closer[:len(j.closer)-1]
}

func (j *jsonEncoder) key(s string) {
	j.sep()
	j.buf, _ = json.Marshal(s)
	j.w.Write(j.buf)
	j.w.WriteByte(':')
	j.first[len(j.first)-1] = true // the value follows without a comma
}

func (j *jsonEncoder) str(s string) {
	j.sep()
	j.buf, _ = json.Marshal(s)
	j.w.Write(j.buf)
}

func (j *jsonEncoder) int(i int64) {
	j.sep()
	j.buf = fmt.Appendf(j.buf[:0], "%d", i)
	j.w.Write(j.buf)
}

func (j *jsonEncoder) bool(b bool) {
	j.sep()
	if b {
		j.w.WriteString("true")
	} else {
		j.w.WriteString("false")
	}
}

func (j *jsonEncoder) frames(g *synth, stack int) {
	j.list()
	for k := range g.opt.Frames {
		_, file, name, line := g.frame(stack, k)
		j.dict()
		j.key("filename")
		j.str(file)
		j.key("line")
		j.int(line)
		j.key("name")
		j.str(name)
		j.end()
	}
	j.end()
}

func (j *jsonEncoder) forget(int) {}

func (j *jsonEncoder) flush() error { return j.w.Flush() }
