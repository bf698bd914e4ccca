// Package diagnose is bfcsim's diagnosis layer: it says why a run failed,
// from what people bring when one does. It owns reading the input of
// `bfcsim inspect` (Read) and the checks that replay a recording to explain
// a failure (CheckSnapshot); the formats themselves are its two
// sub-packages:
//
//   - bfcdump: a BFC pool's state as TensorFlow shows it on an
//     out-of-memory, a MemoryDump protobuf or the text of DumpMemoryLog,
//     read, written and explained (fragmentation or lack of memory);
//   - pytorchoom: the message PyTorch's caching allocator raises when it
//     runs out of memory, of every release, as people paste it, read and
//     explained.
//
// Vocabulary: a finding is what an input holds (Found); a verdict is one
// word for why the allocation failed, with the figures it rests on; a
// check replays the run the finding came from, under the limit it
// describes, to see whether the allocator model fails the same way and
// whether other settings would have served it.
//
// Read, in four steps:
//
//  1. Decompress the input (gzip or zstd) and look at its first 64 KiB.
//  2. Bytes with a NUL are a MemoryDump: bfcdump reads them.
//  3. Text is scanned line by line, in flat memory, for PyTorch's message;
//     standard input, which cannot be read twice, is kept meanwhile (in
//     memory up to SpoolMemBytes, then in a temporary file) and dropped at
//     the first message.
//  4. Text without one is read again by bfcdump, as a TensorFlow log; input
//     that is none of the three is an error that says so, and names a line
//     that spoke of running out of memory in other words.
//
// CheckSnapshot replays a PyTorch snapshot of the failing run with the
// pytorch model (sim) under the limit the message implies (the per-process
// limit it prints, or one inferred from its free memory, or the snapshot's
// own capacity) and builds the report's explanation of the failure
// (report.Held); then it replays the snapshot again under each setting that
// acts on fragmentation.
//
// The diagnosis layer sits above the replay (sim) and the report it reads
// the explanation from; report uses bfcdump to explain a bfc allocator's
// out-of-memory in a replay's report.
package diagnose
