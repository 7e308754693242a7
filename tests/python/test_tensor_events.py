"""psc_record_tensor_event through the real recorder, and the trace tracker's loader.

The entry point is what PyTorch's allocator trace tracker
(python/peakscope/trace_tracker.cpp) calls on a GPU; here a process
under `peakscope record --host --level reserved` calls it through ctypes, with
host blocks standing in for the segments the cudaMalloc hooks would record.
The tensors must stay at the allocated level (read first, never added on top
of the segments) and carry the range open on the calling thread.
"""

import os
import sys
import unittest

from tests.python.recorded import CLI, PRELOAD, REPO, RecordedTraceTest
sys.path.insert(0, os.path.join(REPO, "python"))

# Two 1 MiB "segments" (posix_memalign, recorded by the host hooks at the
# reserved level); inside them three tensors, the first at a segment's own
# address, one freed before the last arrives.
PROGRAM = r"""
import ctypes
libc = ctypes.CDLL(None)
record = libc.psc_record_tensor_event
record.argtypes = [ctypes.c_int, ctypes.c_ulonglong, ctypes.c_ulonglong, ctypes.c_int, ctypes.c_ulonglong]
segments = []
for _ in range(2):
    p = ctypes.c_void_p()
    assert libc.posix_memalign(ctypes.byref(p), 4096, 1 << 20) == 0
    segments.append(p.value)
libc.psc_range_push(b"forward/layer.0")
record(1, segments[0], 300000, 0, 7)
record(1, segments[0] + 300032, 200000, 0, 7)
libc.psc_range_pop()
libc.psc_range_push(b"backward/layer.0")
record(2, segments[0], 300000, 0, 7)
record(1, segments[1], 400000, 0, 7)
record(3, segments[1], 1, 0, 7)          # not an action: ignored
record(1, 0, 100, 0, 7)                  # no address: ignored
libc.psc_range_pop()
libc.psc_flush()
"""


@unittest.skipUnless(os.access(CLI, os.X_OK) and os.path.exists(PRELOAD),
                     "build/peakscope and build/libpeakscope_preload.so are not built (run make)")
class TensorEventTest(RecordedTraceTest):
    @classmethod
    def setUpClass(cls):
        environment = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        cls.record_and_report("tensors.pstrace", ["--host", "--level", "reserved"], [sys.executable, "-c", PROGRAM],
                              environment)

    def test_tensors_are_the_level_read_and_not_added_to_segments(self):
        report = self.report_json()
        self.assertEqual(report["level"], "allocated")
        # Live tensors at most: 300000 + 200000, then 200000 + 400000.
        self.assertEqual(report["peak_bytes"], 600000)

    def test_tensors_carry_the_open_range(self):
        report = self.report_json()
        ranges = {entry["range"] for entry in report["live_at_peak"]}
        self.assertEqual(ranges, {"forward/layer.0", "backward/layer.0"}, report["live_at_peak"])

    def test_segments_stay_at_the_reserved_level(self):
        report = self.report_json()
        self.assertGreater(report["memory"].get("other_level_events", 0), 0, report["memory"])


class TrackerLoaderTest(unittest.TestCase):
    def test_unavailable_says_why_without_building(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            self.skipTest("no torch here: the loader has nothing to load against")
        from peakscope import trace_tracker
        ok, why = trace_tracker.available()
        if ok:
            self.skipTest("a CUDA torch with the recorder loaded: attach() is exercised by tools/gpu-check")
        self.assertTrue(why)
        with self.assertRaises(trace_tracker.TrackerUnavailable) as raised:
            trace_tracker.attach()
        self.assertIn(why, str(raised.exception))


if __name__ == "__main__":
    unittest.main()
