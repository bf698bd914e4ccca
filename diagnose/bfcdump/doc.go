// Package bfcdump owns a BFC pool's state as TensorFlow dumps it, a
// Snapshot, and every way bfcsim reads, writes and explains one. It mirrors
// what TensorFlow's BFC allocator shows of itself on an out-of-memory: the
// text of BFCAllocator::DumpMemoryLog, the 100-character RenderOccupancy
// strip, and the MemoryDump protobuf of RecordMemoryMap (written when
// TF_BFC_MEMORY_DUMP is set). bfcsim's bfc allocator describes its pool as
// a bfcstate.Snapshot, which FromState turns into a dump for the replay's
// reports; users bring TF's dumps and logs to `bfcsim inspect`. Of bfcsim it
// imports only allocators/bfcstate, the state it shares with the
// allocator, and the small helpers under internal/.
//
// Vocabulary, as in TF:
//
//   - A region is one reservation from the device. The pool is all regions;
//     pool bytes is their total. The memory limit caps the pool; unreserved
//     headroom is limit − pool.
//   - Regions are cut into chunks, in address order. A chunk is in use
//     (handed out whole, its requested size at most its size; the
//     difference is internal waste) or free. Free chunks never merge across
//     a region boundary.
//   - Bin b holds free chunks of [256<<b, 256<<(b+1)) bytes, bin 20
//     everything from 256 MiB (BinNumForSize). TF's bin summaries count
//     every chunk by its size's bin, in use or not.
//   - TF's fragmentation is (free in pool − largest free chunk) / free in
//     pool; it ignores the headroom.
//
// The two sources carry different halves of the truth. A MemoryDump has
// each chunk's requested size but neither the regions, the memory limit nor
// the pool size; PoolRegions infers regions from gaps between chunks
// (adjacent regions look like one). A log has regions, the limit and the
// pool, but no requested sizes. Every figure that a source lacks is zero,
// and the readers and renderers say "unknown" rather than guess.
//
// Reading (Read):
//
//  1. Read at most MaxInputBytes.
//  2. Valid UTF-8 text with one of the log's marker lines ("InUse at",
//     "Bin (", "ran out of memory", ...) goes to ParseLog; anything else to
//     Unmarshal. Input that is neither is an error that says so.
//  3. ParseLog scans line by line for the lines of the first dump it finds,
//     ignoring log prefixes and foreign lines; Unmarshal decodes the proto.
//     Both sort chunks by address and Validate the result, so every
//     snapshot they return satisfies the invariants the renderers assume.
//
// Explaining (Explain): compare the failed request, rounded to 256 bytes as
// TF rounds it, with the memory limit (too large), with the limit minus what
// is in use (out of memory), with the largest free chunk and the headroom
// (fragmentation when neither fits but their sum would), and add a sentence
// on internal waste when it is 10% or more of the bytes in use.
//
// Rendering builds the data once (Summarize, Bins, RenderOccupancy,
// Explain, NewInspectReport) and writes it as TF's log text
// (WriteMemoryLog), as bfcsim's report (WriteInspect, or the InspectReport
// as JSON), or as a MemoryDump (Marshal).
package bfcdump
