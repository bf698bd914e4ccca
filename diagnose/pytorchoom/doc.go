// Package pytorchoom reads the message PyTorch's CUDA caching allocator
// raises when it runs out of memory, as people paste it, and explains it.
// It owns the message's figures (Message), the verdict on why the
// allocation failed (Explanation), and the report `bfcsim inspect` prints
// of both (Report, as JSON or text). Of bfcsim it imports only the small
// helpers under internal/.
//
// Vocabulary, as PyTorch prints it (c10/cuda/CUDACachingAllocator.cpp):
//
//   - The request is what the allocator tried to allocate ("Tried to
//     allocate"). Later releases print the block they asked the driver
//     for, the caller's size rounded up (a 1.5 MiB tensor asks for 20.00
//     MiB); the earliest print the size rounded to 512 bytes.
//   - Total capacity and free are the device's, from cudaMemGetInfo, taken
//     after the allocator returned every unused whole segment to the driver.
//   - Allocated is what live tensors hold; reserved is everything the
//     allocator holds from the driver; reserved but unallocated (called
//     "cached" before PyTorch 1.4) is the difference: free bytes inside
//     segments that are partly in use, which the allocator cannot return.
//   - Allowed is the per-process limit set by
//     torch.cuda.set_per_process_memory_fraction (PyTorch 1.8 and later).
//   - From PyTorch 2.1, NVML's list of processes on the device: this
//     process ("Including non-PyTorch memory, this process has ...") and
//     the others ("Process 1234 has ...").
//   - Every figure is printed by c10's format_size: bytes up to 1024, then
//     KiB, MiB, GiB with two decimals, so "1.54 GiB" stands for anything
//     within ±0.005 GiB. A Size keeps that tolerance and every comparison
//     the verdict makes allows for it.
//
// The message has had four shapes (Format): 1.0–1.3 "(GPU 0; ... free;
// X cached)", 1.4–2.0 "(GPU 0; ... reserved in total by PyTorch)", 2.1
// "GPU 0 has a total capacty of ..." (sic) and 2.2 onwards "GPU 0 has a
// total capacity of ...". docs/pytorch-oom.md lists each with its
// variants.
//
// Reading (Scanner, Read):
//
//  1. Read the text a line at a time (lines are capped at maxLineBytes);
//     memory stays flat whatever the input's length.
//  2. Normalise each line for searching: drop leading quote markers ("> ",
//     "# "), all white space, and case. Wrapping at any column, CRLF,
//     indentation and quoting then disappear, and a message split across
//     lines reads as one.
//  3. Look for "out of memory." in the normalised stream, across line
//     ends. At each find, take the message's body: the rest of that line
//     and up to maxBodyLines following lines, each stripped of the prefix
//     the first line carried before the message, or of the log prefix it
//     shares with it up to a delimiter ("[rank0]: ", pytest's "E   "), up
//     to the next "out of memory.".
//  4. Parse the body with the grammar of the four shapes, figure by
//     figure; a paste that stops early keeps the figures it has and says
//     which are missing. Each figure records the clause it came from and
//     its line.
//  5. Read keeps the last message and counts the others.
//
// Explaining (Explain) tests, in this order, and takes the first that holds:
//
//  1. fragmentation: the request is at most what PyTorch holds reserved but
//     unallocated, or does not fit in the device's free memory alone but
//     would in free plus reserved-unallocated.
//  2. limit: a per-process limit is printed and reserved + request
//     exceeds it (the test PyTorch makes), and the device had room. The 2.x
//     wordings may leave a limit out, so there a missing one cannot be
//     ruled out.
//  3. other-process: other processes hold enough that without them the
//     request would fit in the device's free memory.
//  4. no-room: the request does not fit in free plus reserved-unallocated.
//
// Each test is three-valued (holds, does not, cannot tell): a figure the
// message does not print, or a comparison within the figures' rounding,
// cannot tell. The verdict is the first test that holds; it is confident
// only when every earlier test surely fails. When none holds, the first
// that cannot tell is the verdict, not confident; when every test fails
// (the device reports room and nothing forbids it) the verdict is no-room,
// not confident, and says the figures do not explain the failure.
//
// Rendering builds the data once (NewReport, which calls Explain) and
// writes it as text (WriteText) or, with encoding/json, as JSON.
package pytorchoom
