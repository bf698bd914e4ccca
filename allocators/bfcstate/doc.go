// Package bfcstate owns the state of a BFC pool at one moment, a Snapshot,
// and TensorFlow's bins, the two things bfcsim's bfc allocator and the
// diagnosis layer share. The allocator files its free chunks in bins
// (BinNumForSize) and describes its pool as a Snapshot
// (allocators.Snapshotter); the replay keeps snapshots at the peak and at
// the first failed allocation; diagnose/bfcdump reads and writes the same
// state in TensorFlow's formats (a MemoryDump, DumpMemoryLog's text) and
// explains it. The package is plain data: it imports nothing else of
// bfcsim, and nothing here reads, writes or judges.
//
// Vocabulary, as in TF:
//
//   - A region is one reservation from the device. The pool is all regions;
//     pool bytes is their total. The memory limit caps the pool.
//   - Regions are cut into chunks, in address order. A chunk is in use
//     (handed out whole, its requested size at most its size; the
//     difference is internal waste) or free. Free chunks never merge across
//     a region boundary.
//   - Bin b holds free chunks of [256<<b, 256<<(b+1)) bytes, bin 20
//     everything from 256 MiB (BinNumForSize).
package bfcstate
