// Package trace owns bfcsim's event model and the v1 trace format: JSON Lines,
// one event per line, optionally gzip- or zstd-compressed.
//
// Vocabulary:
//
//   - An Event is one line of a trace: an alloc, free, step, mark, reserve or
//     release. Events are small values that are copied freely.
//   - A Header is the optional first line, {"bfcsim_trace":1,...}, naming the
//     trace and the device it was recorded on.
//   - An id names an allocation from its alloc to its free. A live id is one
//     that has been allocated and not yet freed; ids may be reused after a free.
//   - A Slot is a dense small integer the Reader gives every live allocation,
//     reused after its free, so that consumers can keep per-allocation state in
//     slices instead of maps keyed by id.
//
// Reading is streaming and shaped like bufio.Scanner:
//
//	r, err := trace.NewReader(f, "run.jsonl.gz")
//	for r.Next() {
//		ev := r.Event()
//		...
//	}
//	if err := r.Err(); err != nil { ... }
//
// The Reader works in four steps:
//
//  1. NewReader sniffs the first bytes for the gzip or zstd magic and wraps
//     the input in a decompressor, then reads the header if the first
//     non-blank line is one.
//  2. Next reads one line, of any length up to MaxLineBytes, skipping blank
//     lines.
//  3. The line is checked as strict JSON and decoded into an Event in one
//     pass that allocates nothing (decode.go); field types, required fields,
//     alignment and the monotonicity of t are checked.
//  4. The event is checked against the set of live ids (alloc of a live id and
//     free of an id that is not live are errors), the free is annotated with
//     the size and Slot of the allocation it ends, and the running Summary is
//     updated.
//
// Memory use grows with the number of simultaneously live allocations, never
// with the length of the trace.
//
// Invalid lines are reported as *SyntaxError values printed "file:line: reason".
// By default the first one stops the Reader; with SkipInvalid the Reader
// counts and skips them and goes on.
package trace
