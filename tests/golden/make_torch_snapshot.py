#!/usr/bin/env python3
"""Writes the torch memory snapshot fixtures of tests/unit/import_torch_snapshot_test.cc.

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
"""
import os
import pickle
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


if __name__ == "__main__":
    main()
