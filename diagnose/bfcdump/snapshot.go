package bfcdump

import "github.com/bfcsim/bfcsim/allocators/bfcstate"

// Snapshot is a BFC pool's state as a dump holds it: a bfcstate.Snapshot's
// fields, and, for a snapshot ParseLog read, what TensorFlow's log printed
// beside its chunk lines. Read, ParseLog and Unmarshal return one;
// FromState makes one of the state bfcsim's bfc allocator described.
//
// Fields a source does not carry are zero: a MemoryDump has no regions, no
// memory limit and no pool size; a log has no requested size per chunk.
type Snapshot struct {
	// The fields of bfcstate.Snapshot, with its meanings: the allocator's
	// name, the regions (empty when the source does not say: PoolRegions
	// then infers them from gaps between chunks), every chunk in address
	// order, the stats, the failed request, and where in a replayed trace
	// the snapshot was taken.
	AllocatorName string
	Regions       []Region
	Chunks        []Chunk
	Stats         Stats
	Request       *Request
	Event, Line   int64

	// Log is what a TensorFlow OOM log printed besides its chunk lines, for
	// a snapshot ParseLog read; nil otherwise.
	Log *LogEvidence
}

// Region is one reservation from the device, [Addr, Addr+Size): a
// bfcstate.Region, kept a type of its own so that a dump's regions can be
// written as {addr, size} pairs.
type Region struct {
	Addr, Size uint64
}

// A dump's chunks, stats and failed request are the pool's own, as
// bfcstate defines them.
type (
	Chunk   = bfcstate.Chunk
	Stats   = bfcstate.Stats
	Request = bfcstate.Request
)

// FromState returns the dump of a pool bfcsim's allocator described: its
// regions, chunks and stats (the chunks shared with s, not copied: a pool
// may hold millions), and no log. It returns nil for nil.
func FromState(s *bfcstate.Snapshot) *Snapshot {
	if s == nil {
		return nil
	}
	d := &Snapshot{AllocatorName: s.AllocatorName, Regions: make([]Region, len(s.Regions)), Chunks: s.Chunks,
		Stats: s.Stats, Request: s.Request, Event: s.Event, Line: s.Line}
	for i, r := range s.Regions {
		d.Regions[i] = Region(r)
	}
	return d
}
