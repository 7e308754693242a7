"""Growth across optimizer steps on a real PyTorch run, through the recorder.

The workload's --leak-bytes keeps one more tensor per optimizer step, made in
a `train/leaky_cache` range: `report` must name that range and its bytes per
step. Without it, the default workload (3 steps) must show nothing growing.
Skipped until build/peakscope and build/libpeakscope_preload.so exist.
"""

import os
import sys
import unittest

from tests.python import support
from tests.python.recorded import CLI, PRELOAD, RecordedTraceTest

SCRIPT = os.path.join(support.REPO, "workloads", "torch", "lora_step.py")
SMALL = ["--tokens", "4,128", "--layers", "4", "--hidden", "32", "--heads", "2", "--intermediate", "64",
         "--rank", "8", "--vocab", "64", "--attention-block", "16"]
LEAK_BYTES = 65536
BUILT = os.access(CLI, os.X_OK) and os.path.exists(PRELOAD)
WHY = "build/peakscope and build/libpeakscope_preload.so are not built (run make)"


def environment():
    return {k: v for k, v in os.environ.items() if k not in ("PEAKSCOPE_BACKEND", "LD_PRELOAD")}


@unittest.skipUnless(BUILT, WHY)
class LeakyRunTest(RecordedTraceTest):
    @classmethod
    def setUpClass(cls):
        command = [sys.executable, SCRIPT, "--steps", "3", "--leak-bytes", str(LEAK_BYTES)] + SMALL
        cls.record_and_report("leaky.pstrace", ["--host"], command, environment(), timeout=300)

    def test_the_leak_is_named_with_its_bytes_per_step(self):
        growth = self.report_json()["growth"]
        self.assertEqual(growth["step_count"], 3)
        self.assertEqual(growth["window"], 2)
        self.assertEqual([g["range"] for g in growth["growing"]], ["train/leaky_cache"], growth["growing"])
        leak = growth["growing"][0]
        self.assertEqual(leak["bytes_per_step"], LEAK_BYTES)
        self.assertEqual(leak["first_step"], 1)
        self.assertEqual(leak["last_bytes"], 3 * LEAK_BYTES)
        self.assertEqual(leak["allocations"], 3)
        self.assertIsNone(leak["layer"])

    def test_live_bytes_at_step_ends_rise_by_the_leak(self):
        steps = self.report_json()["growth"]["steps"]
        self.assertEqual([s["step"] for s in steps], [1, 2, 3])
        self.assertEqual([b["live_bytes"] - a["live_bytes"] for a, b in zip(steps, steps[1:])],
                         [LEAK_BYTES, LEAK_BYTES])


@unittest.skipUnless(BUILT, WHY)
class DefaultRunTest(RecordedTraceTest):
    """The default workload as `lora_step.py` runs it (3 optimizer steps)."""

    @classmethod
    def setUpClass(cls):
        cls.record_and_report("default.pstrace", ["--host"], [sys.executable, SCRIPT], environment(), timeout=300)

    def test_nothing_grows(self):
        growth = self.report_json()["growth"]
        self.assertEqual(growth["step_count"], 3)
        self.assertEqual(growth["window"], 2)
        self.assertEqual(growth["growing"], [])
        # Weights, optimizer state and the step's gradients: the same at every step end.
        self.assertEqual(len({s["live_bytes"] for s in growth["steps"]}), 1, growth["steps"])


if __name__ == "__main__":
    unittest.main()
