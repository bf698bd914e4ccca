// Package malloclab converts CMU malloc-lab trace files (.rep) into bfcsim
// traces.
//
// The malloc lab of Bryant and O'Hallaron's "Computer Systems: A
// Programmer's Perspective" grades student allocators by replaying .rep
// files with its driver, mdriver. A .rep file is plain text:
//
//	20000        suggested heap size (bytes; unused by mdriver)
//	3            number of ids: ids run from 0 to this minus 1
//	5            number of ops: the lines that follow
//	1            weight (whether the trace counts towards the score)
//	a 0 512      allocate 512 bytes under id 0
//	a 1 128
//	r 0 640      reallocate id 0 to 640 bytes
//	f 1          free id 1
//	f 0
//
// The classic trace files are copyrighted and are not shipped with bfcsim;
// this package reads any file in their format.
//
// Vocabulary: an id names an allocation from its "a" to its "f", as in a
// bfcsim trace, and is kept as the trace id. A realloc ("r") is written as
// the free of the id and a new alloc under the same id, since the trace
// format has no resize.
//
// Convert works in three steps, in one pass, in memory proportional to the
// number of live ids:
//
//  1. Read the four header numbers (one per line, as mdriver writes them;
//     blank lines and lines starting with # are skipped throughout) and
//     write the trace header: source "malloclab", the numbers as metadata.
//  2. Convert each op line, checking it against the live ids: an alloc of
//     a live id, and a realloc or free of an id that is not live, are
//     errors, as they would be undefined behaviour in mdriver.
//  3. At the end, compare what was read with the header's counts. A
//     different number of ops, or an id past the declared number of ids, is
//     a warning (Stats.Warnings), not an error: the trace is sound, only
//     its header is wrong.
//
// Errors are *trace.SyntaxError values, "file:line: reason". With
// Options.Lenient, invalid op lines are counted and skipped; a bad header
// always stops the conversion.
package malloclab
