// Package pytorch imports PyTorch CUDA memory snapshots, the files
// torch.cuda.memory._dump_snapshot writes, as bfcsim traces.
//
// A snapshot is a pickle (protocol 2 to 5) or JSON document of plain data:
// the device's segments with their blocks at the moment of the snapshot,
// and per device a trace of allocator actions (alloc, free_requested,
// free_completed, segment_alloc, segment_free, ...). The recording usually
// starts mid-run and its ring buffer may have wrapped, so the trace alone
// does not say what was allocated when it starts. Conversion works in five
// steps:
//
//  1. Read the document: JSON by its first byte, a pickle otherwise, whose
//     opcodes are checked before decoding so that no code can run.
//  2. Pick the device (--device, else the one with the most trace entries)
//     and walk its trace once, noting what it allocates and frees.
//  3. Rebuild the start state: the segments and blocks live when the trace
//     starts are those the final snapshot holds that the trace did not
//     create, and those the trace frees without having created them
//     ("orphan" frees).
//  4. Move addresses into the simulated device: segments that overlap in
//     address at any time form clusters, laid out from 1<<40 in address
//     order with gaps of at most 2 MiB. Offsets inside a cluster, and so
//     every address relation the allocator sees, are kept; the header's
//     address_map says how to map back.
//  5. Write the trace: a mark "start state", a reserve and the live blocks
//     (allocs carrying their recorded address) for each starting segment, a
//     mark "recording starts", then every action in order: alloc (with the
//     requested size, recorded address, stream, time and a tag from the top
//     frame), free (at free_completed, when the block really returns to the
//     allocator), reserve and release for segments, marks for snapshots and
//     out-of-memory events.
package pytorch

import (
	"fmt"
	"math"
	"math/big"
	"path"
	"strconv"
)

// snapshot is the part of a memory snapshot the importer reads.
type snapshot struct {
	segments []segment
	// traces are the device traces as decoded, by device; only the chosen
	// device's is read (entries), so that what other devices hold cannot
	// stop an import.
	traces []any
}

type segment struct {
	device     int64
	address    uint64
	totalSize  uint64
	stream     int64
	expandable bool
	blocks     []block
}

type block struct {
	address       uint64
	size          uint64
	requestedSize uint64
	state         string
	tag           string
}

type entry struct {
	action  string
	addr    uint64
	size    uint64
	stream  int64
	timeUS  float64
	hasTime bool
	tag     string
}

// doc reads fields of a decoded map, remembering the first error with the
// path that led to it.
type doc struct {
	err error
}

func (d *doc) fail(where, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...))
	}
}

// uint reads an unsigned integer (an int, a big int below 2^64, a float
// holding a whole number, or a JSON number).
func (d *doc) uint(m map[string]any, key, where string) uint64 {
	v, ok := m[key]
	if !ok || v == nil {
		return 0
	}
	switch x := v.(type) {
	case int64:
		if x >= 0 {
			return uint64(x)
		}
	case *big.Int:
		if x.Sign() >= 0 && x.IsUint64() {
			return x.Uint64()
		}
		d.fail(where, "%s is %s, which does not fit in 64 bits", key, x)
		return 0
	case float64:
		if x >= 0 && x == math.Trunc(x) && x < 1<<64 {
			return uint64(x)
		}
	case numberText:
		if u, err := strconv.ParseUint(string(x), 10, 64); err == nil {
			return u
		}
		if f, err := strconv.ParseFloat(string(x), 64); err == nil && f >= 0 && f == math.Trunc(f) && f < 1<<64 {
			return uint64(f)
		}
		d.fail(where, "%s is %s, not a whole number below 2^64", key, string(x))
		return 0
	}
	d.fail(where, "%s is %v, not an unsigned integer", key, v)
	return 0
}

func (d *doc) int(m map[string]any, key, where string) int64 {
	v, ok := m[key]
	if !ok || v == nil {
		return 0
	}
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return int64(x)
		}
	case numberText:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
	case *big.Int:
		// A stream handle can be any pointer-sized value; keep its low bits.
		return int64(new(big.Int).And(x, new(big.Int).SetUint64(math.MaxUint64)).Uint64())
	}
	d.fail(where, "%s is %v, not an integer", key, v)
	return 0
}

func (d *doc) float(m map[string]any, key, where string) (float64, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return 0, false
	}
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f, true
	case numberText:
		if f, err := strconv.ParseFloat(string(x), 64); err == nil {
			return f, true
		}
	}
	d.fail(where, "%s is %v, not a number", key, v)
	return 0, false
}

func (d *doc) str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func (d *doc) list(m map[string]any, key, where string) []any {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		d.fail(where, "%s is a %T, not a list", key, v)
	}
	return l
}

func (d *doc) dict(v any, where string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		d.fail(where, "a %T where a dict was expected", v)
	}
	return m
}

// numberText is a JSON number as written, so that big integers survive.
type numberText string

// parseSnapshot reads the decoded document.
func parseSnapshot(v any) (*snapshot, error) {
	d := &doc{}
	top := d.dict(v, "the snapshot")
	if d.err != nil {
		return nil, fmt.Errorf("not a memory snapshot: %w", d.err)
	}
	if _, ok := top["segments"]; !ok {
		return nil, fmt.Errorf("not a memory snapshot: no segments key (it has %d keys)", len(top))
	}
	s := &snapshot{}
	for i, sv := range d.list(top, "segments", "the snapshot") {
		where := fmt.Sprintf("segments[%d]", i)
		sm := d.dict(sv, where)
		if sm == nil {
			break
		}
		seg := segment{
			device:     d.int(sm, "device", where),
			address:    d.uint(sm, "address", where),
			totalSize:  d.uint(sm, "total_size", where),
			stream:     d.int(sm, "stream", where),
			expandable: sm["is_expandable"] == true,
		}
		addr := seg.address
		for j, bv := range d.list(sm, "blocks", where) {
			bw := fmt.Sprintf("%s.blocks[%d]", where, j)
			bm := d.dict(bv, bw)
			if bm == nil {
				break
			}
			b := block{
				size:          d.uint(bm, "size", bw),
				requestedSize: d.uint(bm, "requested_size", bw),
				state:         d.str(bm, "state"),
				tag:           frameTag(d, bm, bw),
			}
			// Older snapshots leave the address out: blocks tile the segment.
			b.address = addr
			if _, ok := bm["address"]; ok {
				b.address = d.uint(bm, "address", bw)
			}
			addr = b.address + b.size
			seg.blocks = append(seg.blocks, b)
		}
		s.segments = append(s.segments, seg)
	}
	s.traces = d.list(top, "device_traces", "the snapshot")
	if d.err != nil {
		return nil, d.err
	}
	return s, nil
}

// entries reads one device's trace.
func (s *snapshot) entries(dev int) ([]entry, error) {
	if dev >= len(s.traces) || s.traces[dev] == nil {
		return nil, nil
	}
	d := &doc{}
	where := fmt.Sprintf("device_traces[%d]", dev)
	l, ok := s.traces[dev].([]any)
	if !ok {
		return nil, fmt.Errorf("%s: a %T, not a list", where, s.traces[dev])
	}
	entries := make([]entry, 0, len(l))
	for j, ev := range l {
		ew := fmt.Sprintf("%s[%d]", where, j)
		em := d.dict(ev, ew)
		if em == nil {
			break
		}
		e := entry{
			action: d.str(em, "action"),
			addr:   d.uint(em, "addr", ew),
			size:   d.uint(em, "size", ew),
			stream: d.int(em, "stream", ew),
			tag:    frameTag(d, em, ew),
		}
		e.timeUS, e.hasTime = d.float(em, "time_us", ew)
		entries = append(entries, e)
	}
	return entries, d.err
}

// frameTag names an allocation by the innermost Python frame of its stack
// (or the innermost frame when none is Python): "forward (model.py:42)".
func frameTag(d *doc, m map[string]any, where string) string {
	frames := d.list(m, "frames", where)
	var first map[string]any
	for _, f := range frames {
		fm, _ := f.(map[string]any)
		if fm == nil {
			continue
		}
		if first == nil {
			first = fm
		}
		if file := d.str(fm, "filename"); path.Ext(file) == ".py" {
			first = fm
			break
		}
	}
	if first == nil {
		return ""
	}
	name, file := d.str(first, "name"), path.Base(d.str(first, "filename"))
	line := d.int(first, "line", where)
	switch {
	case file == "." || file == "":
		return name
	case name == "":
		return fmt.Sprintf("%s:%d", file, line)
	}
	return fmt.Sprintf("%s (%s:%d)", name, file, line)
}
