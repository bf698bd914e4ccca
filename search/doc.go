// Package search answers questions by replaying a trace many times: over
// a grid of settings (sweeps, split into shards), for the smallest device
// an allocator runs the trace on (Fit), and for the settings that need the
// least memory (Advise).
//
// Vocabulary:
//
//   - a probe is one replay that answers yes or no: did every allocation
//     succeed on this device? It stops at its first failed allocation
//     (sim.Config.Probe);
//   - a trace is read once, onto a tape (tape.go), which every replay of
//     the search then reads: decoding a recording costs more than
//     replaying it;
//   - the capacity a search varies is the device's, or, for an allocator
//     whose reference takes a memory limit (allocators.Factory.LimitOption:
//     PyTorch's set_per_process_memory_fraction), that limit on the
//     trace's device.
//
// A search runs its replays on every core. Its answers do not depend on
// how many run at once: a probe's answer is a replay's, and a search only
// cancels a probe whose answer another has made moot.
package search
