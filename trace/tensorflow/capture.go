package tensorflow

import (
	"fmt"
	"io"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/bfcsim/bfcsim/trace/tensorflow/xplanepb"
)

// CaptureEvent is one allocator event of a Capture, with the stats
// BFCAllocator::AddTraceMe records on it: the chunk (its address, the
// requested size and the chunk's size; for a free, the freed chunk's), and
// the allocator's counters after the event.
type CaptureEvent struct {
	// Ps is the event's time in picoseconds from the capture's start.
	Ps    int64
	Alloc bool
	Addr  uint64
	// Requested and Chunk are the chunk's requested_size and size.
	Requested, Chunk int64
	// InUse is stats_.bytes_in_use after the event; Limit the memory
	// limit (bytes_available is Limit − InUse).
	InUse, Limit int64
	Peak         int64
	Op           string
	Step         int64
	// Thread is the XLine (host thread) the event is on.
	Thread int
}

// Capture is what WriteCapture writes: one allocator's events.
type Capture struct {
	Allocator string
	// StartNs is the capture's start, in nanoseconds since the epoch.
	StartNs int64
	Events  []CaptureEvent
	// Threads names the host threads events are on (default one,
	// "tf_Compute").
	Threads []string
	// StringValues stores text stats as str_value, as TensorFlow before
	// 2.4 did, instead of references to stat metadata.
	StringValues bool
	// JAXVersion, when set, adds the "/host:metadata" plane JAX writes,
	// with its jax_version stat: the capture is JAX's.
	JAXVersion string
}

// WriteCapture writes c as an XSpace, the *.xplane.pb TensorFlow's
// profiler writes: a "/host:CPU" plane with a line per thread, the events
// named MemoryAllocation and MemoryDeallocation, and their stats typed as
// the profiler types them (ParseAndAddStatValue: integers as int64, text as
// a reference to a stat metadata named by it). Several captures' planes
// may be merged by writing them to one file one after another: an XSpace's
// planes are its top-level fields.
func WriteCapture(w io.Writer, c Capture) error {
	b := newPlaneBuilder("/host:CPU", c.StringValues)
	threads := c.Threads
	if len(threads) == 0 {
		threads = []string{"tf_Compute"}
	}
	lines := make([]*xplanepb.XLine, len(threads))
	for i, name := range threads {
		lines[i] = &xplanepb.XLine{Id: int64(1000 + i), Name: name, TimestampNs: c.StartNs}
	}
	allocMeta, freeMeta := b.event(eventAlloc), b.event(eventFree)
	for _, e := range c.Events {
		if e.Thread < 0 || e.Thread >= len(lines) {
			return fmt.Errorf("capture event on thread %d of %d", e.Thread, len(lines))
		}
		meta := freeMeta
		if e.Alloc {
			meta = allocMeta
		}
		ev := &xplanepb.XEvent{MetadataId: meta, Data: &xplanepb.XEvent_OffsetPs{OffsetPs: e.Ps}}
		add := func(name string, v int64) { ev.Stats = append(ev.Stats, b.intStat(name, v)) }
		ev.Stats = append(ev.Stats, b.textStat("allocator_name", c.Allocator))
		add("bytes_reserved", 0)
		add("bytes_allocated", e.InUse)
		add("bytes_available", e.Limit-e.InUse)
		add("peak_bytes_in_use", e.Peak)
		add("requested_bytes", e.Requested)
		add("allocation_bytes", e.Chunk)
		add("addr", int64(e.Addr))
		if e.Op != "" { // the profiler drops a stat whose text is empty
			ev.Stats = append(ev.Stats, b.textStat("tf_op", e.Op))
		}
		add("id", e.Step)
		l := lines[e.Thread]
		l.Events = append(l.Events, ev)
	}
	b.plane.Lines = lines
	planes := []*xplanepb.XPlane{b.plane}
	if c.JAXVersion != "" {
		m := newPlaneBuilder("/host:metadata", true)
		m.plane.Id = 2
		m.plane.Stats = []*xplanepb.XStat{{MetadataId: m.stat("jax_version"), Value: &xplanepb.XStat_StrValue{StrValue: c.JAXVersion}}}
		planes = append(planes, m.plane)
	}
	data, err := proto.Marshal(&xplanepb.XSpace{Planes: planes})
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// planeBuilder gives a plane's event and stat metadata ids, as the
// profiler's XPlaneBuilder does.
type planeBuilder struct {
	plane   *xplanepb.XPlane
	stats   map[string]int64
	strings bool
}

func newPlaneBuilder(name string, strValues bool) *planeBuilder {
	return &planeBuilder{
		plane: &xplanepb.XPlane{Id: 1, Name: name,
			EventMetadata: map[int64]*xplanepb.XEventMetadata{}, StatMetadata: map[int64]*xplanepb.XStatMetadata{}},
		stats:   map[string]int64{},
		strings: strValues,
	}
}

func (b *planeBuilder) event(name string) int64 {
	id := int64(len(b.plane.EventMetadata) + 1)
	b.plane.EventMetadata[id] = &xplanepb.XEventMetadata{Id: id, Name: name}
	return id
}

func (b *planeBuilder) stat(name string) int64 {
	if id, ok := b.stats[name]; ok {
		return id
	}
	id := int64(len(b.stats) + 1)
	b.stats[name] = id
	b.plane.StatMetadata[id] = &xplanepb.XStatMetadata{Id: id, Name: name}
	return id
}

func (b *planeBuilder) intStat(name string, v int64) *xplanepb.XStat {
	return &xplanepb.XStat{MetadataId: b.stat(name), Value: &xplanepb.XStat_Int64Value{Int64Value: v}}
}

// textStat types a text value as the profiler does: a number's text as an
// integer, other text as a reference (or, StringValues, a string).
func (b *planeBuilder) textStat(name, v string) *xplanepb.XStat {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return b.intStat(name, n)
	}
	if b.strings {
		return &xplanepb.XStat{MetadataId: b.stat(name), Value: &xplanepb.XStat_StrValue{StrValue: v}}
	}
	return &xplanepb.XStat{MetadataId: b.stat(name), Value: &xplanepb.XStat_RefValue{RefValue: uint64(b.stat(v))}}
}
