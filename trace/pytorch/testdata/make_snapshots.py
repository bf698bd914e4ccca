#!/usr/bin/env python3
"""Write the PyTorch memory snapshots bfcsim's importer is tested with.

PyTorch is not needed: this script models the CUDA caching allocator's
default configuration on its own (rounding to 512 bytes, small and large
pools with best fit by (stream, size, address), splitting at the front,
segment sizes of 2 MiB / 20 MiB / multiples of 2 MiB, merging on free,
empty_cache) over a fake cudaMalloc that hands out 2 MiB-aligned addresses
first fit, records what torch.cuda.memory._record_memory_history records,
and writes what torch.cuda.memory._dump_snapshot writes: a pickle of plain
dicts and lists (or the same structure as JSON).

The model is written from the allocator's description, independently of
bfcsim's Go implementation, so that importing these files and replaying them
with bfcsim's `pytorch` allocator is a real check: every recorded address
should be reproduced.

Each snapshot keeps only the last entries of its trace, as PyTorch's ring
buffer does, so the importer must rebuild the state at the start of the
recording from the final segments and from frees of blocks it never saw
allocated.

Usage: python3 make_snapshots.py [OUTDIR]   (default: this script's folder)
"""

import json
import os
import pickle
import random
import sys
from collections import OrderedDict

KiB = 1024
MiB = 1024 * KiB
MIN_BLOCK = 512
SMALL_SIZE = 1 * MiB
SMALL_BUFFER = 2 * MiB
LARGE_BUFFER = 20 * MiB
MIN_LARGE_ALLOC = 10 * MiB
ROUND_LARGE = 2 * MiB

DEVICE_BASE = 0x7F2A00000000
DEVICE_BYTES = 40 * 1024 * MiB


def round_size(n):
    return MIN_BLOCK if n < MIN_BLOCK else MIN_BLOCK * ((n + MIN_BLOCK - 1) // MIN_BLOCK)


def segment_size(size):
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * ((size + ROUND_LARGE - 1) // ROUND_LARGE)


class Device:
    """cudaMalloc: first fit over a 2 MiB-aligned range."""

    def __init__(self):
        self.free = [(DEVICE_BASE, DEVICE_BYTES)]

    def malloc(self, size):
        for i, (start, n) in enumerate(self.free):
            if n >= size:
                if n == size:
                    del self.free[i]
                else:
                    self.free[i] = (start + size, n - size)
                return start
        raise MemoryError("device full")

    def release(self, start, size):
        self.free.append((start, size))
        self.free.sort()
        merged = []
        for s, n in self.free:
            if merged and merged[-1][0] + merged[-1][1] == s:
                merged[-1] = (merged[-1][0], merged[-1][1] + n)
            else:
                merged.append((s, n))
        self.free = merged


class Block:
    def __init__(self, seg, addr, size, stream, small):
        self.seg, self.addr, self.size, self.stream, self.small = seg, addr, size, stream, small
        self.allocated = False
        self.pending = False
        self.requested = 0
        self.prev = self.next = None
        self.frames = []


class Allocator:
    def __init__(self, rng, with_frames):
        self.device = Device()
        self.pools = {True: [], False: []}  # small? -> free blocks
        self.segments = []  # first block of each segment
        self.trace = []
        self.clock = 1_700_000_000_000_000.0
        self.rng = rng
        self.with_frames = with_frames

    def record(self, action, addr, size, stream, frames=None):
        self.clock += self.rng.choice([1.0, 2.5, 7.0, 40.0])
        e = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": self.clock}
        if self.with_frames:
            e["frames"] = frames or []
        self.trace.append(e)

    def best_fit(self, size, stream, small):
        best = None
        for b in self.pools[small]:
            if b.stream == stream and b.size >= size:
                if best is None or (b.size, b.addr) < (best.size, best.addr):
                    best = b
        return best

    def malloc(self, requested, stream, frames):
        size = round_size(requested)
        small = size <= SMALL_SIZE
        b = self.best_fit(size, stream, small)
        if b is None:
            seg = segment_size(size)
            addr = self.device.malloc(seg)
            self.record("segment_alloc", addr, seg, stream)
            b = Block(len(self.segments), addr, seg, stream, small)
            self.segments.append(b)
        else:
            self.pools[small].remove(b)
        rest = b.size - size
        if (small and rest >= MIN_BLOCK) or (not small and rest > SMALL_SIZE):
            r = Block(b.seg, b.addr + size, rest, stream, small)
            r.prev, r.next = b, b.next
            if b.next:
                b.next.prev = r
            b.next = r
            b.size = size
            self.pools[small].append(r)
        b.allocated, b.requested, b.frames = True, requested, frames
        self.record("alloc", b.addr, requested, stream, frames)
        return b

    def free(self, b, complete=True):
        self.record("free_requested", b.addr, b.requested, b.stream, b.frames)
        if not complete:
            b.pending = True
            return
        self.record("free_completed", b.addr, b.requested, b.stream, b.frames)
        b.allocated = False
        for n in (b.prev, b.next):
            if n is not None and not n.allocated:
                self.pools[b.small].remove(n)
                if n is b.prev:
                    b.addr, b.size = n.addr, n.size + b.size
                    b.prev = n.prev
                    if n.prev:
                        n.prev.next = b
                    if self.segments[b.seg] is n:
                        self.segments[b.seg] = b
                else:
                    b.size += n.size
                    b.next = n.next
                    if n.next:
                        n.next.prev = b
        self.pools[b.small].append(b)

    def empty_cache(self):
        """release_cached_blocks: give back every segment that is one free block."""
        for small in (True, False):
            for b in list(self.pools[small]):
                if b.prev is None and b.next is None:
                    self.pools[small].remove(b)
                    self.device.release(b.addr, b.size)
                    self.record("segment_free", b.addr, b.size, b.stream)
                    self.segments[b.seg] = None

    def snapshot_segments(self, device):
        out = []
        for first in self.segments:
            if first is None:
                continue
            blocks, total, allocated, active, requested = [], 0, 0, 0, 0
            b = first
            while b is not None:
                state = "inactive"
                if b.allocated:
                    state = "active_pending_free" if b.pending else "active_allocated"
                    allocated += b.size
                    active += b.size
                    requested += b.requested
                blocks.append({"address": b.addr, "size": b.size,
                               "requested_size": b.requested if b.allocated else 0,
                               "state": state, "frames": b.frames if b.allocated else []})
                total += b.size
                b = b.next
            out.append({"device": device, "address": first.addr, "total_size": total,
                        "allocated_size": allocated, "active_size": active,
                        "requested_size": requested, "stream": first.stream,
                        "segment_type": "small" if first.small else "large",
                        "segment_pool_id": (0, 0), "is_expandable": False,
                        "frames": [], "blocks": blocks})
        return out


def frames_for(rng, i):
    layer = rng.randrange(4)
    return [
        {"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"},
        {"filename": "/home/user/model.py", "line": 40 + layer, "name": "layer%d.forward" % layer},
        {"filename": "/home/user/train.py", "line": 12, "name": "<module>"},
    ]


def workload(seed, ops, streams, large_share, keep, with_frames=True, pending=0, empty_cache_at=None):
    rng = random.Random(seed)
    a = Allocator(rng, with_frames)
    live = []
    for i in range(ops):
        if empty_cache_at is not None and i == empty_cache_at:
            a.empty_cache()
        if live and (rng.random() < 0.45 or len(live) > 60):
            b = live.pop(rng.randrange(len(live)))
            a.free(b)
            continue
        if rng.random() < large_share:
            n = rng.choice([rng.randrange(SMALL_SIZE + 1, 8 * MiB), rng.randrange(8 * MiB, 48 * MiB)])
        else:
            n = rng.choice([rng.randrange(1, 4 * KiB), rng.randrange(4 * KiB, SMALL_SIZE + 1)])
        stream = rng.choice(streams)
        live.append(a.malloc(n, stream, frames_for(rng, i) if with_frames else []))
    for b in live[:pending]:
        a.free(b, complete=False)
    trace = a.trace[-keep:] if keep else a.trace
    return a, trace


def snapshot(a, trace, device=0, extra_devices=None):
    segs = a.snapshot_segments(device)
    traces = [[] for _ in range(device + 1)]
    traces[device] = trace
    snap = {"segments": segs, "device_traces": traces,
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": None, "max_split_size": -1,
                                   "roundup_power2_divisions": {}, "expandable_segments": False}}
    if extra_devices:
        extra_devices(snap)
    return snap


def big_int_device(snap):
    """A second device whose numbers do not fit in 63 (or 64) bits."""
    snap["segments"].append({"device": 1, "address": 0xFFFF800000000000, "total_size": SMALL_BUFFER,
                             "allocated_size": 0, "active_size": 0, "requested_size": 0,
                             "stream": 0, "segment_type": "small", "segment_pool_id": (0, 0),
                             "is_expandable": False, "frames": [],
                             "blocks": [{"address": 0xFFFF800000000000, "size": SMALL_BUFFER,
                                         "requested_size": 0, "state": "inactive", "frames": []}]})
    snap["device_traces"].append([{"action": "oom", "size": 1 << 70, "device_free": (1 << 64) + 5,
                                   "stream": 0, "time_us": 1.0, "frames": []}])


def write_pickle(path, obj, protocol):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    s1 = 94_531_122_454_400  # a stream handle, as PyTorch records it: a pointer

    a, t = workload(seed=1, ops=600, streams=[0], large_share=0.3, keep=700)
    write_pickle(os.path.join(out, "small-large.pickle"), snapshot(a, t), 4)
    with open(os.path.join(out, "small-large.json"), "w") as f:
        json.dump(snapshot(a, t), f)

    a, t = workload(seed=2, ops=800, streams=[0, s1], large_share=0.25, keep=500)
    write_pickle(os.path.join(out, "streams.pickle"), snapshot(a, t), 2)

    a, t = workload(seed=3, ops=900, streams=[0, s1], large_share=0.35, keep=600,
                    pending=3, empty_cache_at=800)
    write_pickle(os.path.join(out, "proto5-bigints.pickle"), snapshot(a, t, extra_devices=big_int_device), 5)

    a, _ = workload(seed=4, ops=300, streams=[0], large_share=0.3, keep=0, with_frames=False)
    snap = snapshot(a, [])
    snap["device_traces"] = [[]]
    write_pickle(os.path.join(out, "segments-only.pickle"), snap, 4)

    # Not plain data: an OrderedDict pickles as GLOBAL collections.OrderedDict.
    write_pickle(os.path.join(out, "global.pickle"), {"segments": OrderedDict(a=1)}, 2)

    # The bundled trace: a training-like run on two streams, long enough to
    # show the caching allocator's segments at work.
    if len(sys.argv) > 2:
        a, t = workload(seed=7, ops=20000, streams=[0, s1], large_share=0.3, keep=16000,
                        pending=2, empty_cache_at=12000)
        write_pickle(sys.argv[2], snapshot(a, t), 4)


if __name__ == "__main__":
    main()
