// Package mtrace converts glibc mtrace logs into bfcsim traces, and records
// them: a Recorder runs a program with a small preloaded library that
// writes its heap calls in the same format (record.go; `bfcsim record`).
//
// glibc's mtrace() writes one line per heap call of the process to the file
// named by MALLOC_TRACE (from glibc 2.34 only when libc_malloc_debug.so.0 is
// preloaded; docs/recording.md shows how). The lines this package reads:
//
//	= Start                          tracing began (mtrace() was called)
//	= End                            tracing stopped (muntrace())
//	@ CALLER + 0xADDR 0xSIZE         malloc, calloc, memalign, realloc(NULL, n)
//	@ CALLER - 0xADDR                free, realloc(p, 0)
//	@ CALLER < 0xOLD                 realloc(OLD, n), first half ...
//	@ CALLER > 0xNEW 0xSIZE          ... second half: the block is now NEW
//	@ CALLER ! 0xOLD 0xSIZE          realloc(OLD, SIZE) failed; OLD stays live
//
// CALLER is where the call came from, as glibc prints it:
// "/lib/x86_64-linux-gnu/libc.so.6:(__strdup+1a)[0x9e9aa]", "./prog:[0x1139]",
// or a bare "[0x7f3a5c1d2e3f]"; it is absent ("+ 0x..." starts the line) when
// glibc did not know it. A failed malloc is "+ (nil) 0xSIZE", and a size of
// zero is printed "0", not "0x0".
//
// Vocabulary:
//
//   - An address is what malloc returned. The log has no other name for an
//     allocation, and the C library reuses an address only after it is freed,
//     so an address names one allocation from its malloc to its free.
//   - An id is the trace's name for an allocation. Each malloc gets a fresh id
//     from a counter starting at 1; the address goes into the alloc's addr.
//   - A dropped free is a free of an address the log never allocated: the
//     block was allocated before tracing began (by the dynamic loader, by
//     libc's start-up, by code that ran before mtrace()). It cannot be
//     replayed and is counted in Stats.DroppedFrees.
//
// Convert works in four steps, in one pass and in memory proportional to
// the number of live allocations, never to the length of the log:
//
//  1. Write the trace header: source "mtrace", the name and metadata from
//     Options.
//  2. Read the log line by line (lines of up to MaxLineBytes), and split each
//     one from the right into its operator, address and size, so that a
//     caller path containing spaces is still read; the caller becomes the
//     allocation's tag ("__strdup", "prog+0x1139").
//  3. Keep a map from each live address to its id and size. A malloc emits
//     an alloc; a free of a live address emits its free; a realloc emits the
//     free of the old block then the alloc of the new one, even when the
//     address did not change (the trace format has no resize).
//  4. Count what cannot be replayed as recorded instead of failing on it: a
//     free of an unknown address is dropped, a malloc of an address that is
//     still live (the log missed its free) is written as a free of the old
//     allocation and a new alloc, a failed malloc or realloc writes nothing.
//
// Line order is time: the log has no timestamps, so events carry no t. A
// last line without a newline is not converted: glibc ends every line with
// one, so it was cut short by a process that died before flushing its log
// (Stats.CutLastLine).
//
// A line that is not mtrace output is a *trace.SyntaxError ("log:12: ...").
// With Options.Lenient such lines are counted and skipped instead, which is
// what a log cut short by a crash, or interleaved by a process that forked
// while tracing, needs.
package mtrace
