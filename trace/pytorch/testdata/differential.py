#!/usr/bin/env python3
"""Write snapshot-like cases for the differential test of bfcsim's pickle reader.

Each case K is one random structure shaped like what
torch.cuda.memory._dump_snapshot writes (segments with blocks, per-device
traces, allocator settings, annotations, shared frames), written twice:

  case-K.pickle   pickled with a protocol from 0 to 5, by the C or the
                  pure-Python pickler, sometimes run through
                  pickletools.optimize;
  case-K.json     json.dumps of what CPython's own pickle.loads returns for
                  those bytes.

The Go test (differential_test.go) converts both and wants the same trace:
the JSON file goes through a different tokenizer, so a disagreement points
at the pickle walker. JSON turns tuples into lists and loses the sharing of
objects by identity; neither may change what the importer writes.

Frames are shared the way PyTorch shares them: one dict per distinct frame,
one list per distinct stack, the same objects in many entries and blocks,
so the pickles are full of memo references (BINGET, LONG_BINGET, GET).
Integers span every pickle encoding (BININT1/2/4, LONG1, INT/LONG text),
strings hold accents, CJK, emoji and characters protocol 0 escapes, and the
large cases pass 1,000 items per list and dict, where the pickler splits
APPENDS and SETITEMS.

cases.json describes the cases: their protocol and pickler, how many
devices their trace has, whether converting them (the device picked by
default) must succeed ("ok"), fail ("error") or either ("any", where
either could be right), and, for a case that shows a divergence not yet
fixed, what it is ("known"; see known_cases).

Python 3 standard library only; deterministic for a given seed.

Usage: python3 differential.py OUTDIR [SEED]
"""

import io
import json
import os
import pickle
import pickletools
import random
import sys

MiB = 1 << 20
BASE = 0x7F2A00000000

ACTIONS = ["alloc", "free_requested", "free_completed", "segment_alloc",
           "segment_free", "snapshot", "oom"]
OTHER_ACTIONS = ["segment_map", "segment_unmap", "free", "workspace", "", "ALLOC"]
STATES = ["active_allocated", "active_pending_free", "inactive"]

FILES = [
    "/home/user/train.py",
    "model.py",
    "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py",
    "??",
    "",
    "/opt/pytorch/c10/cuda/CUDACachingAllocator.cpp",
    "/données/modèle.py",
    "/漢字/模型.py",
    "/🔥/fire.py",
    "dir/",
    "noext",
    "/tmp/a\\b.py",
    "/tmp/new\nline.py",
]
NAMES = [
    "forward",
    "backward",
    "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, unsigned long, CUstream_st*)",
    "",
    "é",
    "漢字",
    "🚀 launch",
    "<module>",
    "__call__",
    "quote\" and back\\slash",
    "tab\tnul\x00ctl\x1a\r\x7f",
    "\u2028sep\u2029",
    "x" * 300,
    "é" * 200,
]
LINES = [0, 1, 42, 255, 256, 65535, 65536, 2**31 - 1, 2**31, -1]

# Integers where pickle changes encodings: BININT1 up to 255, BININT2 up to
# 65535, BININT to 2**31-1, LONG1 above; and the edges of 64 bits.
EDGE_INTS = [0, 1, 255, 256, 65535, 65536, 2**31 - 1, 2**31, 2**32,
             2**47 + 0x2A00000, 2**63 - 1, 2**63, 2**64 - 1]
STREAMS = [0, 0, 0, 7, 0x55D2C0A1B2C0, -1, -(2**31), -(2**31) - 1, 2**31,
           -(2**63), 2**63 - 1, 2**63, 2**64 - 1, 3.0, None]


class Gen:
    """Makes the parts of one snapshot, sharing frames between them."""

    def __init__(self, rng):
        self.rng = rng
        self.frames = [self.frame() for _ in range(rng.randint(1, 12))]
        self.stacks = [self.stack() for _ in range(rng.randint(1, 10))]
        self.float_time = rng.random() < 0.5
        self.t = rng.choice([0, 1712345678901234, rng.randint(0, 10**9)])

    def frame(self):
        """A frame dict; any of them may be shared by identity."""
        r = self.rng
        f = {"filename": r.choice(FILES), "line": r.choice(LINES), "name": r.choice(NAMES)}
        x = r.random()
        if x < 0.05:
            del f["line"]
        elif x < 0.10:
            f["line"] = None
        elif x < 0.13:
            f["line"] = float(r.randint(1, 999))
        elif x < 0.16:
            f = {"name": f["name"], "line": f["line"], "filename": f["filename"]}
        elif x < 0.18:
            del f["filename"]
        elif x < 0.20:
            del f["name"]
        elif x < 0.23:
            f["column"] = r.randint(0, 80)  # unknown keys leave it a frame
        elif x < 0.25:
            f["line"] = 2**70 + 3  # a line of more than 64 bits keeps its low bits
        return f

    def stack(self):
        r = self.rng
        return [r.choice(self.frames) for _ in range(r.choice([0, 1, 1, 2, 3, 5, 8]))]

    def fresh_stack(self):
        """A stack that is not shared, possibly holding odd items."""
        r = self.rng
        s = [dict(r.choice(self.frames)) for _ in range(r.randint(0, 4))]
        if r.random() < 0.3:
            s.insert(r.randint(0, len(s)), r.choice(["a string", 5, None, [1, 2], (3, 4), {"size": 5}]))
        return s

    def frames_value(self):
        r = self.rng
        x = r.random()
        if x < 0.75:
            return r.choice(self.stacks)
        if x < 0.85:
            return self.fresh_stack()
        if x < 0.92:
            return []
        return None

    def junk(self, depth=0):
        """Nested data under keys the importer does not read."""
        r = self.rng
        x = r.random()
        if depth > 2 or x < 0.4:
            return r.choice([None, True, False, 0, -5, 2**70, -(2**70), 1.5, -0.0, 1e300,
                             "", "str", "é漢🚀", "x" * 400, r.choice(EDGE_INTS)])
        if x < 0.55:
            return tuple(self.junk(depth + 1) for _ in range(r.randint(0, 4)))
        if x < 0.75:
            return [self.junk(depth + 1) for _ in range(r.randint(0, 5))]
        d = {}
        for _ in range(r.randint(0, 5)):
            k = r.choice(["a", "b", "é", "size", "frames", "action", "name", "filename",
                          "line", "device", 1, True, None, 2.5, "1"])
            d[k] = self.junk(depth + 1)
        return d

    def maybe_vary(self, d, keys):
        """Sets some of d's keys to None, drops some, adds unknown ones."""
        r = self.rng
        for k in keys:
            if k in d:
                x = r.random()
                if x < 0.03:
                    d[k] = None
                elif x < 0.05:
                    del d[k]
        if r.random() < 0.15:
            d["user_metadata"] = r.choice(["", "step 3", {"k": [1, 2]}])
        if r.random() < 0.1:
            d["compile_context"] = "N/A"
        if r.random() < 0.05:
            d["zz_junk"] = self.junk()
        if r.random() < 0.03:
            d["zz_stack"] = r.choice(self.stacks)  # a shared stack under a key not read
        if r.random() < 0.05:
            items = list(d.items())
            r.shuffle(items)
            d = dict(items)
        return d

    def time(self):
        r = self.rng
        self.t += r.choice([0, 1, 3, 100, 12345])
        if r.random() < 0.03:
            self.t -= 500  # clocks step back
        if self.float_time:
            return self.t + r.choice([0.0, 0.25, 0.5, 0.123456789])
        if r.random() < 0.05:
            return float(self.t)
        return self.t

    def segments(self, dev, n, base):
        """n segments on device dev from base, with blocks tiling them."""
        r = self.rng
        segs = []
        addr = base
        for _ in range(n):
            total = r.choice([2 * MiB, 2 * MiB, 20 * MiB, 4 * MiB])
            blocks = []
            off = 0
            while off < total and len(blocks) < 6:
                size = min(total - off, r.choice([512, 1024, 4096, 65536, MiB, 2 * MiB]))
                b = {"address": addr + off, "size": size,
                     "requested_size": max(0, size - r.choice([0, 0, 3, 100, 511])),
                     "state": r.choice(STATES), "frames": self.frames_value()}
                b = self.maybe_vary(b, ["address", "requested_size", "frames", "state"])
                blocks.append(b)
                off += size
            seg = {"device": dev, "address": addr, "total_size": total,
                   "allocated_size": 0, "active_size": 0, "requested_size": 0,
                   "stream": r.choice(STREAMS), "segment_type": "small" if total == 2 * MiB else "large",
                   "segment_pool_id": (0, 0), "is_expandable": r.random() < 0.2,
                   "frames": self.frames_value(), "blocks": blocks}
            seg = self.maybe_vary(seg, ["stream", "frames", "is_expandable", "segment_pool_id"])
            segs.append(seg)
            addr += total + r.choice([0, 0, 2 * MiB, 64 * MiB])
        return segs

    def trace(self, n, base, span):
        """n trace entries, mostly about addresses in [base, base+span)."""
        r = self.rng
        live = []
        out = []
        for _ in range(n):
            x = r.random()
            if x < 0.4 or not live:
                action = "alloc"
                addr = base + 512 * r.randrange(max(1, span // 512))
                size = r.choice([512, 1024, 4096, 65536, MiB, r.randint(1, 5000), r.choice(EDGE_INTS[:10])])
                live.append((addr, size))
            elif x < 0.55:
                action = "free_requested"
                addr, size = r.choice(live)
            elif x < 0.8:
                action = "free_completed"
                addr, size = live.pop(r.randrange(len(live)))
            elif x < 0.85:
                action = "segment_alloc"
                addr, size = base + span + 2 * MiB * r.randrange(8), 2 * MiB
            elif x < 0.88:
                action = "segment_free"
                addr, size = base + 2 * MiB * r.randrange(8), 2 * MiB
            elif x < 0.91:
                action, addr, size = "snapshot", 0, 0
            elif x < 0.93:
                action, addr, size = "oom", 0, r.choice(EDGE_INTS)
            else:
                action = r.choice(OTHER_ACTIONS)
                addr, size = r.choice(live)
            e = {"action": action, "addr": addr, "size": size, "stream": r.choice(STREAMS),
                 "time_us": self.time(), "frames": self.frames_value()}
            if r.random() < 0.03:
                e["addr"] = float(addr)  # a whole float reads as an integer
            e = self.maybe_vary(e, ["addr", "size", "stream", "time_us", "frames"])
            out.append(e)
        return out

    def settings(self, n=None):
        r = self.rng
        s = {"PYTORCH_CUDA_ALLOC_CONF": r.choice(["", "expandable_segments:True"]),
             "max_split_size": -1, "garbage_collection_threshold": 0.0,
             "expandable_segments": r.random() < 0.5, "pinned_num_register_threads": 1,
             "release_lock_on_cudamalloc": False, "roundup_power2_divisions": [0] * 4}
        for i in range(n or 0):
            s["k%d" % i] = r.choice([i, -i, float(i) / 3, True, "v%d" % i, 2**64 + i])
        return s

    def annotations(self):
        r = self.rng
        return [{"device": 0, "stream": 0, "time_us": self.time(), "name": "step %d" % i,
                 "stage": r.choice(["START", "END"])} for i in range(r.randint(0, 3))]

    def snapshot(self, devices, entries, segs_per_dev, extra=True):
        """A snapshot over devices, entries[d] trace entries each."""
        r = self.rng
        segs = []
        traces = []
        for dev in range(devices):
            base = BASE + dev * (1 << 36)
            n = segs_per_dev[dev] if isinstance(segs_per_dev, list) else r.randint(0, segs_per_dev)
            segs += self.segments(dev, n, base)
            traces.append(self.trace(entries[dev], base, max(n, 1) * 4 * MiB))
        if r.random() < 0.3:
            r.shuffle(segs)
        top = {"segments": segs, "device_traces": traces}
        if extra:
            if r.random() < 0.7:
                top["allocator_settings"] = self.settings()
            if r.random() < 0.4:
                top["external_annotations"] = self.annotations()
            if r.random() < 0.2:
                top["zz_extra"] = self.junk()
            if r.random() < 0.3:
                items = list(top.items())
                r.shuffle(items)
                top = dict(items)
        return top


def all_allocs(entries):
    """Makes every entry an alloc at its own address, so that each one's
    stream, time and tag are written."""
    for i, e in enumerate(entries):
        e.update(action="alloc", addr=BASE + 4096 * i, size=4096)


def case(top, devices, description, expect="ok", **kw):
    """A case: the structure, how many devices its trace has, and what
    converting it must do. kw may fix protocol, pickler ("C" or "python")
    and optimize, and name a known divergence (known)."""
    c = {"top": top, "devices": devices, "description": description, "expect": expect}
    c.update(kw)
    return c


def random_case(rng):
    g = Gen(rng)
    devices = rng.choice([1, 1, 2, 3])
    entries = [rng.choice([0, 1, 5, 20, 60]) for _ in range(devices)]
    return case(g.snapshot(devices, entries, 4), devices, "random")


def big_case(rng, entries, segments, frames_len, settings_n, protocol):
    """Lists and dicts of more than 1,000 items: batched APPENDS/SETITEMS."""
    g = Gen(rng)
    top = g.snapshot(2, [entries, 40], [segments, 2])
    long_stack = [rng.choice(g.frames) for _ in range(frames_len)]
    # One stack of more than 1,000 frames, shared by a few entries (JSON
    # writes it out each time).
    for e in top["device_traces"][0][::entries // 3]:
        e["frames"] = long_stack
    # One segment with more than 1,000 blocks.
    seg = top["segments"][0]
    seg["blocks"] = [{"address": seg["address"] + 512 * i, "size": 512, "requested_size": 500,
                      "state": rng.choice(STATES), "frames": rng.choice(g.stacks)}
                     for i in range(1100)]
    seg["total_size"] = 512 * 1100
    top["allocator_settings"] = g.settings(settings_n)
    return case(top, 2, "big", protocol=protocol)


def memo_pages_case(rng, protocol):
    """Over 8,192 entries in a row that memoize nothing but themselves, so
    that a whole page of the memo (4,096 slots) holds only placed entries
    and is given back, then stacks made late and shared on later pages."""
    frames = [{"filename": "/m/%d.py" % i, "line": i, "name": "f%d" % i} for i in range(6)]
    early = [[frames[0], frames[1]], [frames[2]], []]
    entries = []
    t = 1000
    for i in range(10000):
        if i == 8500 or (i > 8500 and i % 300 == 0):
            early.append([frames[i % 6], {"filename": "/late/%d.py" % i, "line": i, "name": "late"}])
        addr = BASE + 512 * (i % 3000)
        action = ("alloc", "free_requested", "free_completed")[i % 3]
        t += 1 + i % 7
        entries.append({"action": action, "addr": addr, "size": 512 * (1 + i % 5), "stream": 0,
                        "time_us": t, "frames": early[i % len(early)] if i < 8500 else rng.choice(early)})
    top = {"segments": [{"device": 0, "address": BASE, "total_size": 3000 * 512, "stream": 0,
                         "segment_type": "large", "segment_pool_id": (0, 0), "blocks": []}],
           "device_traces": [entries]}
    return case(top, 1, "memo pages", protocol=protocol, pickler="C", optimize=False)


def wide_memo_case(rng, protocol):
    """More than 65,536 memoized objects before the frames, so that memo
    indices need all four bytes of LONG_BINPUT and LONG_BINGET."""
    g = Gen(rng)
    top = {"allocator_settings": {"key %d" % i: i % 3 for i in range(70000)}}
    top.update(g.snapshot(1, [200], [3], extra=False))
    return case(top, 1, "wide memo", protocol=protocol, optimize=False)


def long_strings_case(rng, ascii_only, protocol, known=""):
    """Strings about maxKeptString (64 KiB) long, in frames that become tags."""
    g = Gen(rng)
    top = g.snapshot(1, [8], [1])
    cap = 64 << 10
    if ascii_only:
        names = ["a" * (cap - 1), "b" * cap, "c" * (cap + 1), "d" * 70000, "e" * 301]
    else:
        names = [
            "é" * (cap // 2),              # exactly cap bytes
            "é" * (cap // 2) + "x",        # one byte over
            "a" * (cap - 1) + "é" + "z",   # the cut splits é
            "漢" * 30000,                   # 90,000 bytes
            "🚀" * 20000,                   # 80,000 bytes
            "é" * 301,
        ]
    stacks = [[{"filename": "/long/%d.py" % i, "line": i, "name": n}] for i, n in enumerate(names)]
    stacks.append([{"filename": "/long/" + "f" * 70000 + ".py", "line": 9, "name": "long_file"}])
    all_allocs(top["device_traces"][0])
    for i, e in enumerate(top["device_traces"][0]):
        e["frames"] = stacks[i % len(stacks)]
    for seg in top["segments"]:
        for j, b in enumerate(seg["blocks"]):
            b["frames"] = stacks[j % len(stacks)]
    desc = ("known: " if known else "") + "long strings" + (" (ASCII)" if ascii_only else "")
    return case(top, 1, desc, protocol=protocol, known=known)


def wide_ints_case(rng, protocol):
    """Integers of 64 bits and more where the importer allows them."""
    g = Gen(rng)
    top = g.snapshot(2, [40, 20], [2, 1])
    wide = [2**64, 2**64 + 5, -(2**63) - 1, 2**100 + 7, -(2**200) + 3, 2**1000 + 11,
            -(2**1000) - 13, 10**300 + 1]
    for i, e in enumerate(top["device_traces"][0]):
        e["stream"] = wide[i % len(wide)]  # a stream keeps its low 64 bits
        if i % 4 == 1:
            e["time_us"] = rng.choice([2**64, 10**30, -(2**70), 10**200])
    for i, f in enumerate(g.frames):
        f["line"] = wide[i % len(wide)]
    # Sizes past 64 bits on the device not converted by default.
    for i, e in enumerate(top["device_traces"][1]):
        e["size"] = rng.choice([2**64, 2**100, -1, -(2**70), 1.5, "12"])
    top["allocator_settings"] = {"big": 2**2000, "neg": -(2**3000)}
    return case(top, 2, "wide ints", protocol=protocol)


def error_case(rng, kind):
    """A snapshot the importer must refuse, whichever way it is written."""
    g = Gen(rng)
    top = g.snapshot(2, [30, 5], [2, 1], extra=False)
    trace0 = top["device_traces"][0]
    if kind == "segment size past 64 bits":
        top["segments"][-1]["total_size"] = 2**64
    elif kind == "size a string":
        trace0[3]["size"] = "4096"
    elif kind == "negative size":
        trace0[3]["size"] = -512
    elif kind == "fractional addr":
        trace0[3]["addr"] = 1024.5
    elif kind == "bool size":
        trace0[3]["size"] = True
    elif kind == "frames a string":
        trace0[3]["frames"] = "forward"
    elif kind == "line a string":
        trace0[3]["frames"] = [{"filename": "m.py", "line": "42", "name": "f"}]
    elif kind == "segments a dict":
        top["segments"] = {"a": 1}
    elif kind == "no segments":
        del top["segments"]
        top[1] = "one"  # JSON writes the key as "1": the messages differ
    elif kind == "top a list":
        top = [top]
    elif kind == "entry a list":
        trace0[3] = ["alloc", 5, 6]
    elif kind == "traces an int":
        top["device_traces"] = 5
    elif kind == "block size past 64 bits":
        top["segments"].append({"device": 1, "address": 0, "total_size": 512,
                                "blocks": [{"size": 2**64 + 512}]})
    else:
        raise ValueError(kind)
    return case(top, 2, "error: " + kind, "error")


def edge_case(rng, kind):
    """Odd but valid shapes."""
    g = Gen(rng)
    if kind == "empty":
        return case({"segments": [], "device_traces": []}, 0, kind)
    if kind == "segments only":
        top = g.snapshot(1, [0], [3])
        del top["device_traces"]
        return case(top, 0, kind)
    if kind == "empty traces":
        top = g.snapshot(3, [0, 0, 0], [1, 1, 1])
        top["device_traces"][1] = None
        return case(top, 3, kind)
    if kind == "shared trace list":
        top = g.snapshot(1, [25], [2])
        top["device_traces"].append(top["device_traces"][0])
        return case(top, 2, kind)
    if kind == "float fields":
        top = g.snapshot(1, [30], [2])
        for i, e in enumerate(top["device_traces"][0]):
            e["time_us"] = [-0.0, 5e-324, 1e-7, 1.7976931348623157e308, 0.1, 1e21, 123456789.125][i % 7]
            if e.get("size") is not None and i % 3 == 0:
                e["size"] = float(e["size"]) if e["size"] < 2**53 else 2.0**63
            if i % 5 == 0:
                e["stream"] = -3.0
        for s in top["segments"]:
            s["address"] = float(s["address"])
            s["total_size"] = float(s["total_size"])
        return case(top, 1, kind)
    if kind == "frames variety":
        top = g.snapshot(1, [40], [2])
        odd = [
            [{}, {"filename": "x.py", "line": 3, "name": "f"}],
            [{"column": 1}, {"filename": "x.py", "line": 3, "name": "f"}],
            [{"line": 4}],
            [{"name": None, "filename": None, "line": None}],
            [{"filename": "/a/b/", "line": 5, "name": "dir"}],
            [{"filename": "m.cpp", "line": 6, "name": "cpp"}, {"filename": "m.py", "line": 7, "name": "py"}],
            [{"filename": "m.py", "line": 8.0, "name": "floatline"}],
            [{"filename": "m.py", "line": -(2**63), "name": "neg"}],
            [{"filename": "m.py", "line": 2**64 - 1, "name": "u64"}],
            [{"filename": "m.py", "line": 1, "name": "known key", "size": 4}],
            ["not a frame", {"filename": "m.py", "line": 9, "name": "after"}],
            [[{"filename": "nested.py", "line": 1, "name": "n"}]],
            [(1, 2), {"filename": "m.py", "line": 10, "name": "aftertuple"}],
        ]
        # Copies: a dict with a key of a trace entry, segment or block
        # ("size") is a record, and a snapshot never shares one.
        for i, e in enumerate(top["device_traces"][0]):
            e["frames"] = [dict(f) if isinstance(f, dict) else f for f in odd[i % len(odd)]]
        return case(top, 1, kind)
    raise ValueError(kind)


# Cases about the edges where the pickle and JSON readers once diverged:
# integers of more than 600 digits (their low 64 bits), a frame dict with
# no frame key shared by identity, protocol 0's long strings (cut once
# decoded), a lone surrogate (U+FFFD either way). A divergence found later
# can be marked with known="why": the test skips such a case while it
# still diverges, and fails once it does not, so that the mark is dropped
# with the fix.


def known_cases(rng):
    """The edges where the readers once diverged."""
    out = []
    g = Gen(rng)
    top = g.snapshot(1, [20], [1], extra=False)
    all_allocs(top["device_traces"][0])
    for i, e in enumerate(top["device_traces"][0]):
        e["stream"] = [10**605 + i, 2**2100 + 5][i % 2]
    out.append(case(top, 1, "very wide stream", protocol=4))

    g = Gen(rng)
    top = g.snapshot(1, [20], [1], extra=False)
    all_allocs(top["device_traces"][0])
    for i, e in enumerate(top["device_traces"][0]):
        e["time_us"] = 10**605 + i  # read in full from LONG1, described from JSON
    out.append(case(top, 1, "very wide time", "any", protocol=2))

    g = Gen(rng)
    top = g.snapshot(1, [20], [1], extra=False)
    all_allocs(top["device_traces"][0])
    for e in top["device_traces"][0]:
        e["time_us"] = 10**400  # 1e400 in JSON reads the same
    # Either refused or written so that it reads back: "t":+Inf is not JSON.
    out.append(case(top, 1, "infinite time", "any", protocol=3))

    g = Gen(rng)
    top = g.snapshot(1, [20], [1], extra=False)
    empty = {}
    for e in top["device_traces"][0]:
        e["frames"] = [empty, {"filename": "x.py", "line": 3, "name": "f"}]
    out.append(case(top, 1, "shared empty frame dict", protocol=4))

    out.append(long_strings_case(rng, False, 0))

    g = Gen(rng)
    top = g.snapshot(1, [20], [1], extra=False)
    for e in top["device_traces"][0]:
        e["frames"] = [{"filename": "/x/\udcff.py", "line": 1, "name": "surrogate\udcff"}]
    out.append(case(top, 1, "lone surrogate", protocol=5, ensure_ascii=True))
    return out


def build_cases(rng):
    cases = [
        big_case(rng, 3000, 1050, 1500, 1200, 4),
        big_case(rng, 2600, 40, 1200, 1100, 1),
        big_case(rng, 1500, 20, 1001, 1001, 0),
        memo_pages_case(rng, 4),
        memo_pages_case(rng, 2),
        wide_memo_case(rng, 2),
        long_strings_case(rng, True, 0),
        long_strings_case(rng, True, 2),
        long_strings_case(rng, False, 1),
        long_strings_case(rng, False, 5),
        wide_ints_case(rng, 0),
        wide_ints_case(rng, 3),
        wide_ints_case(rng, 5),
    ]
    for kind in ["empty", "segments only", "empty traces", "shared trace list",
                 "float fields", "frames variety"]:
        cases.append(edge_case(rng, kind))
    for kind in ["segment size past 64 bits", "size a string", "negative size",
                 "fractional addr", "bool size", "frames a string", "line a string",
                 "segments a dict", "no segments", "top a list", "entry a list",
                 "traces an int", "block size past 64 bits"]:
        cases.append(error_case(rng, kind))
    cases += known_cases(rng)
    while len(cases) < 60:
        cases.append(random_case(rng))
    return cases


def dump(obj, protocol, python_pickler, optimize):
    if python_pickler:
        buf = io.BytesIO()
        pickle._Pickler(buf, protocol).dump(obj)
        data = buf.getvalue()
    else:
        data = pickle.dumps(obj, protocol)
    if optimize:
        data = pickletools.optimize(data)
    return data


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[-1])
    out = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) == 3 else 1
    os.makedirs(out, exist_ok=True)
    rng = random.Random(seed)
    manifest = []
    for k, c in enumerate(build_cases(rng)):
        protocol = c.get("protocol", k % 6)
        python_pickler = c.get("pickler", "python" if rng.random() < 0.3 else "C") == "python"
        optimize = c.get("optimize", rng.random() < 0.2)
        data = dump(c["top"], protocol, python_pickler, optimize)
        loaded = pickle.loads(data)  # what CPython reads back is what JSON gets
        ensure_ascii = c.get("ensure_ascii", rng.random() < 0.5)
        text = json.dumps(loaded, ensure_ascii=ensure_ascii, indent=rng.choice([None, None, 1]))
        with open(os.path.join(out, "case-%d.pickle" % k), "wb") as f:
            f.write(data)
        with open(os.path.join(out, "case-%d.json" % k), "w", encoding="utf-8") as f:
            f.write(text)
        manifest.append({"case": k, "description": c["description"], "protocol": protocol,
                         "pickler": "python" if python_pickler else "C", "optimized": optimize,
                         "devices": c["devices"], "expect": c["expect"], "known": c.get("known", "")})
    with open(os.path.join(out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
