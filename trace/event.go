package trace

import (
	"fmt"
	"strings"
)

// Op is the kind of an Event.
type Op uint8

// The event kinds of trace format v1.
const (
	OpAlloc   Op = iota + 1 // request Size bytes under ID
	OpFree                  // release the allocation ID
	OpStep                  // end of one iteration: a training step, an inference run
	OpMark                  // a free-form annotation
	OpReserve               // a device-level reservation the recorded program made; informational
	OpRelease               // the matching device-level release; informational
	// OpFrame and OpStack define the stack table (stacks.go). The Reader
	// keeps them and hands on no event for them.
	OpFrame
	OpStack
)

var opNames = [...]string{
	OpAlloc:   "alloc",
	OpFree:    "free",
	OpStep:    "step",
	OpMark:    "mark",
	OpReserve: "reserve",
	OpRelease: "release",
	OpFrame:   "frame",
	OpStack:   "stack",
}

// String returns the op's name as it is spelled in a trace.
func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// ParseOp returns the Op spelled s, or false.
func ParseOp(s string) (Op, bool) {
	for op, name := range opNames {
		if name != "" && name == s {
			return Op(op), true
		}
	}
	return 0, false
}

// Event flags record which optional fields a line carried.
const (
	HasT      uint8 = 1 << iota // T is set
	HasAddr                     // Addr is set (for an alloc: the recorded address)
	HasStream                   // Stream is set
	HasBlock                    // Block is set (an alloc's recorded block size)
)

// Event is one event of a trace. It is a plain value; the Reader fills it and
// consumers may copy and keep it.
type Event struct {
	// Line is the 1-based line of the trace file the event came from, or 0
	// for an event that was built in memory.
	Line int64
	// ID names the allocation (alloc, free).
	ID uint64
	// Size is the requested size in bytes (alloc, reserve), or the bytes
	// released from the reservation at Addr (release; 0: all of it). For a
	// free the Reader fills in the size of the allocation being freed.
	Size uint64
	// Align is the requested alignment, a power of two, or 0 for the
	// allocator's default (alloc).
	Align uint64
	// Addr is the address the recorded program received (alloc, when
	// Flags&HasAddr), or the reserved address (reserve, release).
	Addr uint64
	// Block is the bytes the recorded allocator set aside for the alloc
	// (TensorFlow's chunk size, PyTorch's block size), when Flags&HasBlock;
	// never less than Size.
	Block uint64
	// T is the event's time in the header's time unit, when Flags&HasT.
	T float64
	// Stream is the CUDA stream, when Flags&HasStream.
	Stream int64
	// Tag is the alloc's tensor or op name; Name is the label of a step or mark.
	Tag, Name string
	// Stack is the alloc's call stack in the trace's stack table
	// (Reader.Stacks), or 0.
	Stack uint32
	// Slot is a dense index for the allocation named by an alloc or free,
	// unique among live allocations and reused after a free. The Reader sets
	// it; the Writer ignores it.
	Slot uint32
	// Op is the event's kind.
	Op Op
	// Flags records which optional fields are set (HasT, HasAddr, HasStream,
	// HasBlock).
	Flags uint8
}

// RecordedOOMMark begins the name of a mark that says the recorded program
// failed the allocation that follows it (PyTorch's oom entry). The program
// never held that allocation, so it does not count as live in the trace's
// summary; a replay tries it, and counts whether it fails too.
const RecordedOOMMark = "oom:"

// IsRecordedOOMMark reports whether a mark named name says the recorded
// program failed the allocation that follows it.
func IsRecordedOOMMark(name string) bool { return strings.HasPrefix(name, RecordedOOMMark) }

// The marks an importer writes of a recording's own state: where the
// state the recording started from ends (the allocations live before it),
// and where the recording's events begin.
const (
	StartStateMark      = "start state"
	RecordingStartsMark = "recording starts"
)

// IsAnnotation reports whether a mark named name is a phase the recorded
// program annotated: not an importer's mark of the recording's own state,
// a recorded failure, or PyTorch's snapshot of its state.
func IsAnnotation(name string) bool {
	switch {
	case name == StartStateMark, name == RecordingStartsMark, name == "snapshot", IsRecordedOOMMark(name),
		strings.HasPrefix(name, "oom ("):
		return false
	}
	return true
}

// Header is the optional first line of a trace.
type Header struct {
	// Version is the format version, 1. A zero Header (Version 0) means the
	// trace had no header line.
	Version int
	// Name names the trace, for reports.
	Name string
	// Source says where the trace came from (e.g. "pytorch-snapshot", "gen").
	Source string
	// CapacityBytes is the size of the device the trace was recorded on, or 0.
	CapacityBytes uint64
	// TimeUnit is "ns", "us", "ms" or "s", or "" when t is only an order.
	TimeUnit string
	// Meta holds every other header key, as raw JSON text, for reports.
	Meta map[string]string
}

// FormatVersion is the trace format version this package reads and writes.
const FormatVersion = 1

// validTimeUnits are the accepted values of the header's time_unit.
var validTimeUnits = []string{"ns", "us", "ms", "s"}
