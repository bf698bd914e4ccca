// Package sim is bfcsim's replay engine: it drives one stream of trace events
// through every selected allocator, each over its own fresh Space, and
// measures what happens.
//
// Vocabulary (docs/metrics.md defines the metrics):
//
//   - live bytes: the requested sizes of the allocations alive now;
//   - in use bytes: the sizes of the blocks handed out for them (request plus
//     rounding and padding);
//   - reserved bytes: what the allocator holds from its space, its footprint.
//
// Replay works in five steps:
//
//  1. For each allocator, create a Space from the configuration and build
//     the allocator over it; with Check, wrap the space so that an
//     independent checker sees every reservation and release.
//  2. A producer goroutine reads events from the Source into batches of
//     batchEvents events. A small fixed pool of batches bounds memory: the
//     producer waits when every batch is still in use.
//  3. One worker goroutine per allocator applies every batch in order: an
//     alloc calls Allocate (size-0 allocs get no block), a free calls Free
//     with the block stored under the event's Slot, a step is passed to
//     allocators that implement Stepper. Each call is timed for the latency
//     histograms.
//  4. After every event the worker updates live, in-use and reserved bytes
//     and their peaks, internal waste at the reserved peak, and TensorFlow's
//     fragmentation metric; with Check, the checker verifies the block and
//     the accounting and the replay stops at the first violation.
//  5. When the source ends, each worker summarises its metrics into a Result.
//
// Two things are kept beside the metrics: with Record, the series plots are
// drawn from (record.go), in memory that does not grow with the trace; and,
// for an allocator that plans offline (allocators.Planner), the lifetime of
// every allocation, read in a first pass through Config.Reread (prepass.go):
// the one place memory grows with the trace.
//
// Allocators run concurrently, but each sees the events in trace order and
// nothing in a Result except timings depends on scheduling, so the same trace
// and configuration always give the same Results, timings aside.
package sim
