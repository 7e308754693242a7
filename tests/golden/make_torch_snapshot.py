#!/usr/bin/env python3
"""Writes the torch memory snapshot fixtures of tests/end_to_end/exchange/import_torch_snapshot_test.cc.

    tests/golden/make_torch_snapshot.py tests/golden

torch.cuda.memory._dump_snapshot is `pickle.dump(torch.cuda.memory._snapshot(), f)`;
no GPU is needed to make a file of the same shape: the dict below follows
_snapshot's documented structure (torch/cuda/memory.py) and what
torch/csrc/cuda/Module.cpp puts in it (time_us, external_annotations,
allocator_settings), with what real snapshots contain and a reader must cope
with: frames shared between entries (pickle memo references), a history that
begins after memory was allocated (a free of a block it never saw allocated,
blocks allocated in `segments` it never mentions), an OOM, a snapshot entry,
expandable-segment map/unmap, two devices, streams, and annotations.

Writes torch_snapshot.pickle (protocol 4, what Python 3.8-3.13 write),
torch_snapshot_p2.pickle and torch_snapshot_p5.pickle, and
torch_snapshot_evil.pickle, whose REDUCE would run os.system if unpickled by
Python: peakscope must refuse it without running anything.

The realistic fixtures of tests/end_to_end/exchange/torch_snapshot_viz_test.cc come from a small
model of CUDACachingAllocator's bookkeeping (CachingAllocator below: block
rounding to 512 bytes, the small and large pools, best fit, splitting,
coalescing, empty_cache, record_stream's deferred free_completed, and
expandable segments mapped and unmapped page by page), running a training
step shaped workload:
  torch_snapshot_segments.pickle    segments enclosing blocks, requested_size
                                    below size, user_metadata and
                                    compile_context that change mid-run
  torch_snapshot_expandable.pickle  expandable segments (segment_map /
                                    segment_unmap; `segments` one per mapped run)
  torch_snapshot_ring.pickle        the ring buffer of _record_memory_history
                                    wrapped: the history starts mid-run (frees of
                                    blocks and segments it never saw allocated, a
                                    free_completed whose free_requested was cut
                                    off, live blocks it never mentions)
and torch_snapshot_expected.json: what memory_viz's Active Memory Timeline
shows for each (its process_alloc_data, replayed here from the pickle's own
entries, not by peakscope): the peak, the number of allocations, what is live
at the end; and each snapshot's segment totals.
"""
import json
import os
import pickle
import random
import sys

T0 = 1_700_000_000_000_000  # microseconds since the epoch
SEG0 = 0x7F0000000000
SEG1 = 0x7F0000200000
frames_fwd = [{"filename": "train.py", "line": 42, "name": "forward"},
              {"filename": "torch/nn/modules/linear.py", "line": 125, "name": "forward"}]
frames_bwd = [{"filename": "torch/autograd/graph.py", "line": 768, "name": "_engine_run_backward"}]


def entry(action, addr, size, t, frames, stream=0):
    return {"action": action, "addr": addr, "size": size, "stream": stream, "frames": frames, "time_us": T0 + t}


def snapshot():
    dev0 = [
        # allocated before the history began (the ring buffer wrapped)
        entry("free_requested", SEG0 + 0x1000, 4096, 1, frames_fwd),
        entry("free_completed", SEG0 + 0x1000, 4096, 1, frames_fwd),
        entry("segment_alloc", SEG1, 2 << 20, 2, frames_fwd),
        entry("alloc", SEG1, 512, 3, frames_fwd),
        entry("alloc", SEG1 + 512, 1024, 4, frames_fwd),
        entry("alloc", SEG1 + 1536, 8192, 5, frames_bwd, stream=140234567890123),
        entry("free_requested", SEG1, 512, 6, frames_bwd),
        entry("free_completed", SEG1, 512, 7, frames_bwd),
        {"action": "oom", "device_free": 1 << 20, "size": 1 << 40, "stream": 0, "frames": frames_bwd,
         "time_us": T0 + 8},
        entry("alloc", SEG1, 256, 9, frames_bwd),
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "frames": [], "time_us": T0 + 10},
        entry("segment_map", 0x7F1000000000, 2 << 20, 11, []),
        entry("segment_unmap", 0x7F1000000000, 2 << 20, 12, []),
        entry("free_requested", SEG1 + 1536, 8192, 13, frames_bwd, stream=140234567890123),
        entry("free_completed", SEG1 + 1536, 8192, 14, frames_bwd, stream=140234567890123),
    ]
    dev1 = [entry("segment_alloc", 0x7E0000000000, 2 << 20, 5, []),
            entry("alloc", 0x7E0000000000, 3000, 6, frames_fwd)]
    segments = [
        {"device": 0, "address": SEG0, "total_size": 2 << 20, "allocated_size": 65536, "active_size": 65536,
         "requested_size": 65536, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
         "is_expandable": False, "frames": frames_fwd,
         "blocks": [{"address": SEG0, "size": 65536, "requested_size": 65000, "state": "active_allocated",
                     "frames": frames_fwd},
                    {"address": SEG0 + 65536, "size": (2 << 20) - 65536, "requested_size": 0, "state": "inactive",
                     "frames": []}]},
        {"device": 0, "address": SEG1, "total_size": 2 << 20, "allocated_size": 1280, "active_size": 1280,
         "requested_size": 1280, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
         "is_expandable": False, "frames": frames_fwd,
         "blocks": [{"address": SEG1, "size": 256, "requested_size": 256, "state": "active_allocated",
                     "frames": frames_bwd},
                    {"address": SEG1 + 256, "size": 256, "requested_size": 0, "state": "inactive", "frames": []},
                    {"address": SEG1 + 512, "size": 1024, "requested_size": 1024, "state": "active_allocated",
                     "frames": frames_fwd},
                    {"address": SEG1 + 1536, "size": (2 << 20) - 1536, "requested_size": 0, "state": "inactive",
                     "frames": []}]},
        {"device": 1, "address": 0x7E0000000000, "total_size": 2 << 20, "allocated_size": 3072, "active_size": 3072,
         "requested_size": 3000, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
         "is_expandable": False, "frames": [],
         "blocks": [{"address": 0x7E0000000000, "size": 3072, "requested_size": 3000, "state": "active_allocated",
                     "frames": frames_fwd},
                    {"address": 0x7E0000000000 + 3072, "size": (2 << 20) - 3072, "requested_size": 0,
                     "state": "inactive", "frames": []}]},
    ]
    annotations = [
        {"stage": "START", "name": "forward/layer.0", "device": 0, "time_us": T0 + 2},
        {"stage": "END", "name": "forward/layer.0", "device": 0, "time_us": T0 + 5},
        {"stage": "START", "name": "backward/layer.0", "device": 0, "time_us": T0 + 5},
        {"stage": "END", "name": "backward/layer.0", "device": 0, "time_us": T0 + 14},
    ]
    return {"segments": segments, "device_traces": [dev0, dev1],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                   "garbage_collection_threshold": 0.0, "expandable_segments": False,
                                   "roundup_power2_divisions": {"1": 0, "2": 0}},
            "external_annotations": annotations}


# ---- a model of the caching allocator ------------------------------------------------

MB = 1 << 20
SMALL_SIZE = 1 * MB          # kSmallSize: requests up to this use the small pool
SMALL_BUFFER = 2 * MB        # kSmallBuffer: a small pool segment
LARGE_BUFFER = 20 * MB       # kLargeBuffer: a segment for requests under kMinLargeAlloc
MIN_LARGE_ALLOC = 10 * MB
ROUND_LARGE = 2 * MB


def round_size(n):
    return 512 if n < 512 else 512 * ((n + 511) // 512)


def segment_size(n):
    if n <= SMALL_SIZE:
        return SMALL_BUFFER
    if n < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return ROUND_LARGE * ((n + ROUND_LARGE - 1) // ROUND_LARGE)


class Block:
    def __init__(self, addr, size, segment):
        self.addr, self.size, self.segment = addr, size, segment
        self.requested = 0
        self.state = "inactive"  # or active_allocated, active_pending_free

    def end(self):
        return self.addr + self.size


class Segment:
    def __init__(self, addr, size, pool, expandable=False, page=0):
        self.addr, self.size, self.pool, self.expandable, self.page = addr, size, pool, expandable, page
        self.blocks = [Block(addr, size, self)]
        self.mapped = set()  # expandable: indices of mapped pages


class CachingAllocator:
    def __init__(self, expandable=False, t0=T0):
        self.expandable = expandable
        self.trace = []
        self.segments = []
        self.live = {}  # addr -> Block
        self.pending = []
        self.time = t0
        self.next_addr = {"small": 0x7F2000000000, "large": 0x7F4000000000}
        self.metadata = ""
        self.compile_context = "N/A"
        self.frames = {"forward": frames_fwd, "backward": frames_bwd}
        self.phase = "forward"
        if expandable:
            # One expandable segment per pool: address space reserved up front,
            # pages mapped as blocks need them (2 MiB small, 20 MiB large).
            for pool, page in (("small", SMALL_BUFFER), ("large", LARGE_BUFFER)):
                self.segments.append(Segment(self.next_addr[pool], 1 << 36, pool, True, page))

    def record(self, action, addr, size, frames=None):
        self.time += 3
        self.trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                           "time_us": self.time, "frames": frames if frames is not None else self.frames[self.phase],
                           "compile_context": self.compile_context, "user_metadata": self.metadata})

    def pool_of(self, size):
        return "small" if size <= SMALL_SIZE else "large"

    def best_fit(self, size, pool):
        best = None
        for seg in self.segments:
            if seg.pool != pool:
                continue
            for b in seg.blocks:
                if b.state == "inactive" and b.size >= size and (best is None or (b.size, b.addr) < (best.size, best.addr)):
                    best = b
        return best

    def new_segment(self, size, pool):
        total = segment_size(size)
        seg = Segment(self.next_addr[pool], total, pool)
        self.next_addr[pool] += ((total + ROUND_LARGE - 1) // ROUND_LARGE) * ROUND_LARGE
        self.segments.append(seg)
        self.record("segment_alloc", seg.addr, total, [])
        return seg.blocks[0]

    def map_pages(self, seg, addr, end):
        first, last = (addr - seg.addr) // seg.page, (end - seg.addr + seg.page - 1) // seg.page
        run = None
        for p in list(range(first, last)) + [None]:
            if p is not None and p not in seg.mapped:
                seg.mapped.add(p)
                run = run or [p, p]
                run[1] = p + 1
                continue
            if run:
                self.record("segment_map", seg.addr + run[0] * seg.page, (run[1] - run[0]) * seg.page, [])
                run = None

    def malloc(self, requested):
        size = round_size(requested)
        pool = self.pool_of(size)
        block = self.best_fit(size, pool)
        if block is None:
            block = self.new_segment(size, pool)
        seg = block.segment
        remaining = block.size - size
        if remaining >= (512 if pool == "small" else SMALL_SIZE + 1):
            rest = Block(block.addr + size, remaining, seg)
            seg.blocks.insert(seg.blocks.index(block) + 1, rest)
            block.size = size
        if seg.expandable:
            self.map_pages(seg, block.addr, block.end())
        block.state, block.requested = "active_allocated", requested
        self.live[block.addr] = block
        self.record("alloc", block.addr, requested)
        return block.addr

    def free(self, addr, record_stream=False):
        block = self.live.pop(addr)
        self.record("free_requested", addr, block.requested)
        if record_stream:
            block.state = "active_pending_free"  # waits for the other stream's event
            self.pending.append(block)
        else:
            self.complete(block)

    def complete(self, block):
        self.record("free_completed", block.addr, block.requested)
        block.state, block.requested = "inactive", 0
        seg = block.segment
        i = seg.blocks.index(block)
        for j in (i + 1, i - 1):  # coalesce with free neighbours
            if 0 <= j < len(seg.blocks) and seg.blocks[j].state == "inactive":
                a, b = sorted((seg.blocks[j], block), key=lambda x: x.addr)
                a.size += b.size
                seg.blocks.remove(b)
                block = a
                i = seg.blocks.index(block)

    def process_events(self):
        for block in self.pending:
            self.complete(block)
        self.pending = []

    def empty_cache(self):
        for seg in list(self.segments):
            if seg.expandable:
                for b in seg.blocks:
                    if b.state != "inactive":
                        continue
                    first = (b.addr - seg.addr + seg.page - 1) // seg.page
                    last = (b.end() - seg.addr) // seg.page
                    run = None
                    for p in list(range(first, last)) + [None]:
                        if p is not None and p in seg.mapped:
                            seg.mapped.discard(p)
                            run = run or [p, p]
                            run[1] = p + 1
                            continue
                        if run:
                            self.record("segment_unmap", seg.addr + run[0] * seg.page,
                                        (run[1] - run[0]) * seg.page, [])
                            run = None
            elif len(seg.blocks) == 1 and seg.blocks[0].state == "inactive":
                self.record("segment_free", seg.addr, seg.size, [])
                self.segments.remove(seg)

    def snapshot_segments(self):
        out = []
        for seg in self.segments:
            if not seg.expandable:
                out.append(self.segment_info(seg, seg.addr, seg.size))
                continue
            pages = sorted(seg.mapped)
            start = None
            for i, p in enumerate(pages + [None]):
                if start is None:
                    start = p
                if p is None or i + 1 >= len(pages) or pages[i + 1] != p + 1:
                    if start is not None and p is not None:
                        out.append(self.segment_info(seg, seg.addr + start * seg.page, (p + 1 - start) * seg.page))
                    start = None
        return sorted(out, key=lambda s: s["address"])

    def segment_info(self, seg, addr, size):
        blocks = []
        for b in seg.blocks:
            lo, hi = max(b.addr, addr), min(b.end(), addr + size)
            if lo >= hi:
                continue
            blocks.append({"address": lo, "size": hi - lo, "requested_size": b.requested, "state": b.state,
                           "frames": frames_fwd if b.state != "inactive" else []})
        allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
        active = sum(b["size"] for b in blocks if b["state"] != "inactive")
        requested = sum(b["requested_size"] for b in blocks if b["state"] != "inactive")
        return {"device": 0, "address": addr, "total_size": size, "allocated_size": allocated,
                "active_size": active, "requested_size": requested, "stream": 0,
                "segment_type": seg.pool, "segment_pool_id": (0, 0), "is_expandable": seg.expandable,
                "frames": [], "blocks": blocks}

    def snapshot(self, trace=None):
        return {"segments": self.snapshot_segments(), "device_traces": [trace if trace is not None else self.trace],
                "allocator_settings": settings(self.expandable), "external_annotations": []}


def settings(expandable):
    return {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True" if expandable else "",
            "max_split_size": -1, "garbage_collection_threshold": 0.0, "expandable_segments": expandable,
            "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}


def training(allocator, steps, seed):
    """A LoRA-like step: weights once, then per step activations kept for
    backward, temporaries, gradients, an optimizer phase tagged through
    user_metadata, record_stream on a few tensors, empty_cache now and then."""
    rng = random.Random(seed)
    weights = [allocator.malloc(rng.choice([4 * MB + 1000, 12 * MB + 7, 300_000, 64 * 1024 + 3])) for _ in range(6)]
    # A large buffer freed after the first step, and one that lands in its
    # last page and stays: with expandable segments, empty_cache then unmaps
    # part of what one segment_map mapped.
    big = allocator.malloc(45 * MB)
    weights.append(allocator.malloc(12 * MB))
    for step in range(steps):
        if step == 1:
            allocator.free(big)
        allocator.phase = "forward"
        allocator.compile_context = "N/A" if step % 2 == 0 else "torch_compile_frame_0"
        saved = []
        for layer in range(4):
            tmp = [allocator.malloc(rng.randrange(1000, 900_000)) for _ in range(3)]
            saved.append(allocator.malloc(rng.choice([2 * MB + rng.randrange(1, 5000), 600_000 + layer,
                                                      11 * MB + rng.randrange(1, 999)])))
            for t in tmp[:2]:
                allocator.free(t)
            saved.append(tmp[2])
        allocator.phase = "backward"
        grads = []
        for layer in reversed(range(4)):
            work = allocator.malloc(rng.randrange(100_000, 3 * MB))
            grads.append(allocator.malloc(rng.randrange(2000, 200_000)))
            allocator.free(saved.pop(), record_stream=(layer == 1))
            allocator.free(saved.pop())
            allocator.free(work)
        allocator.process_events()
        allocator.metadata = "phase=optimizer step=%d" % step
        state = allocator.malloc(rng.randrange(1 * MB, 6 * MB))
        for g in grads:
            allocator.free(g)
        allocator.free(state)
        allocator.metadata = ""
        if step % 2 == 1:
            allocator.empty_cache()
    return weights


# ---- what memory_viz's Active Memory Timeline shows (process_alloc_data) ---------------

def memory_viz_timeline(snapshot, device=0):
    # annotate_snapshot: free_requested directly followed by its free_completed
    # becomes one 'free'; blocks' addresses tile their segment.
    events = []
    for e in snapshot["device_traces"][device]:
        if (e["action"] == "free_completed" and events and events[-1]["action"] == "free_requested"
                and events[-1]["addr"] == e["addr"]):
            events[-1] = dict(events[-1], action="free")
            continue
        events.append(e)
    sizes, initially, actions, addr_to_alloc = [], [], [], {}
    for e in events:
        if e["action"] == "alloc":
            sizes.append(e["size"])
            addr_to_alloc[e["addr"]] = len(sizes) - 1
            actions.append(len(sizes) - 1)
        elif e["action"] in ("free", "free_completed"):
            if e["addr"] in addr_to_alloc:
                actions.append(addr_to_alloc.pop(e["addr"]))
            else:
                sizes.append(e["size"])
                initially.append(len(sizes) - 1)
                actions.append(len(sizes) - 1)
    for seg in snapshot["segments"]:
        if seg["device"] != device:
            continue
        addr = seg["address"]
        for b in seg["blocks"]:
            if b["state"] == "active_allocated" and addr not in addr_to_alloc:
                sizes.append(b["requested_size"])
                initially.append(len(sizes) - 1)
            addr += b["size"]
    live = set(initially)
    total = sum(sizes[i] for i in initially)
    start, max_size = total, 0
    for i in actions:  # an element's first action adds it, its second removes it
        if i in live:
            live.discard(i)
            total -= sizes[i]
        else:
            live.add(i)
            total += sizes[i]
        max_size = max(max_size, total)
    return {"peak_bytes": max_size, "live_at_start_bytes": start, "allocations": len(sizes),
            "live_at_end_bytes": total, "live_at_end_allocations": len(live)}


def expected(snapshot):
    e = memory_viz_timeline(snapshot)
    # memory_viz's peak is over its actions; peakscope's is over every live
    # state, the start included. The fixtures are made so that they agree.
    assert e["peak_bytes"] >= e["live_at_start_bytes"], e
    segs = snapshot["segments"]
    e["segments"] = len(segs)
    e["segments_total_size"] = sum(s["total_size"] for s in segs)
    e["segments_allocated_size"] = sum(s["allocated_size"] for s in segs)
    e["segments_requested_size"] = sum(s["requested_size"] for s in segs)
    e["expandable_segments"] = sum(1 for s in segs if s["is_expandable"])
    e["actions"] = {}
    for entry in snapshot["device_traces"][0]:
        e["actions"][entry["action"]] = e["actions"].get(entry["action"], 0) + 1
    return e


def realistic():
    caching = CachingAllocator()
    weights = training(caching, steps=3, seed=14)
    # Freed with record_stream and still waiting at the snapshot: free_requested
    # with no free_completed, a block active_pending_free.
    caching.free(weights[-1], record_stream=True)
    expandable = CachingAllocator(expandable=True)
    training(expandable, steps=3, seed=15)
    # The ring buffer: a longer run whose history keeps only its last entries,
    # cut between a free_requested and its free_completed.
    long_run = CachingAllocator()
    training(long_run, steps=6, seed=16)
    trace = long_run.trace
    keep = len(trace) * 2 // 5
    while not (trace[-keep]["action"] == "free_completed" and trace[-keep - 1]["action"] == "free_requested"):
        keep += 1
    return {"torch_snapshot_segments.pickle": caching.snapshot(),
            "torch_snapshot_expandable.pickle": expandable.snapshot(),
            "torch_snapshot_ring.pickle": long_run.snapshot(trace[-keep:])}


class Evil:
    def __reduce__(self):
        return (os.system, ("echo this must never run",))


def main():
    out = sys.argv[1]
    s = snapshot()
    for name, protocol in (("torch_snapshot.pickle", 4), ("torch_snapshot_p2.pickle", 2),
                           ("torch_snapshot_p5.pickle", 5)):
        with open(os.path.join(out, name), "wb") as f:
            pickle.dump(s, f, protocol=protocol)
    s["device_traces"][0][3]["frames"] = Evil()
    with open(os.path.join(out, "torch_snapshot_evil.pickle"), "wb") as f:
        pickle.dump(s, f, protocol=4)
    sidecar = {}
    for name, snap in realistic().items():
        with open(os.path.join(out, name), "wb") as f:
            pickle.dump(snap, f, protocol=4)
        sidecar[name] = expected(snap)
    with open(os.path.join(out, "torch_snapshot_expected.json"), "w") as f:
        json.dump(sidecar, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
