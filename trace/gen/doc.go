// Package gen owns bfcsim's synthetic workloads: deterministic generators of
// traces that stand in for recorded ones, so that allocators can be compared
// on the allocation patterns that matter without a GPU or a recording.
//
// Vocabulary:
//
//   - A workload is a named kind of program ("transformer-train"); New looks
//     one up by name and Names lists them.
//   - A config is a workload's parameters, a plain struct of int, int64,
//     uint64, float64 and bool fields (one CLI flag each) with a
//     Default<Name> constructor. Every config is a Generator.
//   - A Generator gives the trace's Header and emits its events in order.
//
// The workloads, and why each exists:
//
//   - transformer-train (TransformerTrain) models mixed-precision training of
//     a GPT-2-style decoder: weights for good, gradients and Adam state (made
//     lazily in the first step), and per step the activations autograd saves
//     in the forward pass and frees in reverse during backward, amid short
//     temporaries. Each step's sequence length varies: dynamic shapes are
//     what fragments the caching allocators of real frameworks.
//   - transformer-infer (TransformerInfer) models autoregressive decoding in
//     a naive framework: key/value caches grow one token at a time by
//     allocating a larger tensor and freeing the old one, which leaves holes
//     just too small for the next size; requests of varying length follow
//     one another.
//   - cnn-infer (CNNInfer) models inference of a ResNet-like network: every
//     run has the same lifetimes (workspaces freed at once, residual inputs
//     kept until the add) and frees everything before its step: the case
//     where an arena that keeps the weights apart resets after every run,
//     a baseline for arenas and planners.
//   - random (Random) is the memoryless classic: log-uniform sizes, the live
//     count held around a target, uniformly random frees. It streams any
//     number of events in constant memory, for throughput and latency runs.
//   - ramp (Ramp) allocates a range of sizes in order and frees them: the
//     shape of TensorFlow's allocator conformance tests (NoDups by default),
//     so their numbers can be checked end to end.
//   - fragmenter (Fragmenter) is the adversary: Robson's construction of
//     doubling block sizes with thinning pins keeps live bytes low while
//     forcing any allocator that does not move blocks, best fit with
//     coalescing included, to take fresh memory every round.
//
// Each Generate works in three steps:
//
//  1. Validate the config; an invalid one is an error naming the field (in
//     its flag spelling, seq-len) before anything is emitted.
//  2. Seed a PCG generator from Seed and a fixed stream constant, so that the
//     same config always gives the same events, byte for byte, on every
//     platform. Nothing depends on map order or the clock.
//  3. Walk the modelled program, emitting through a shared emitter that hands
//     out ids from a counter (unique, never reused), advances t by at least a
//     microsecond per event (the ML workloads also add the time a kernel
//     takes to write each tensor, at about 1 TB/s), and stops at emit's
//     first error.
//
// Sizes are real: fp16 tensors take 2 bytes an element, fp32 ones 4, int64
// token ids 8 and dropout masks 1. Tags name tensors the way PyTorch's
// named_parameters and a profiler would ("layer3.attn.qkv",
// "layer3.mlp.fc1.weight.grad", "layer3.mlp.fc1.weight.adam.exp_avg").
//
// The default configs are sized to be bundled in the repository: each gives
// a few thousand to twenty thousand events, under 1 MB of JSONL.
package gen
