"""Intra-op threads do not change a price.

The same held-out model (workloads/heldout/step.py, eager nn.MultiheadAttention)
is recorded with one intra-op thread and with two, each with the recorder's
default settings, calibrated on the same three sizes, and priced at sizes
inside and beyond them: the prices are the same to the byte. Blocks a worker
thread allocates with no range of its own belong to the range its parallel
region was started in (analysis/scope_tracker.h), and every host block is
recorded, so nothing a second thread does can move a term.
"""

import json
import os
import subprocess
import tempfile
import unittest

from tests.python import support

CLI = os.path.join(support.REPO, "build", "peakscope")
PRELOAD = os.path.join(support.REPO, "build", "libpeakscope_preload.so")
STEP = os.path.join(support.REPO, "workloads", "heldout", "step.py")


@unittest.skipUnless(os.access(CLI, os.X_OK) and os.path.exists(PRELOAD),
                     "build/peakscope and build/libpeakscope_preload.so are not built (run make)")
class ThreadsTest(unittest.TestCase):
    def test_one_or_two_threads_price_alike(self):
        environment = {k: v for k, v in os.environ.items() if not k.startswith("PEAKSCOPE_") and k != "LD_PRELOAD"}
        prices = {}
        with tempfile.TemporaryDirectory() as directory:
            for threads in (1, 2):
                trace = os.path.join(directory, f"t{threads}.pstrace")
                calibration = os.path.join(directory, f"t{threads}.json")
                subprocess.run([CLI, "record", "--host", "-o", trace, "--", "/usr/bin/python3", STEP, "--model", "mha",
                                "--layers", "3", "--threads", str(threads), "--tokens", "32,64,128"],
                               check=True, capture_output=True, env=environment, timeout=300)
                calibrate = subprocess.run([CLI, "calibrate", trace, "-o", calibration], capture_output=True,
                                           text=True, timeout=120)
                self.assertEqual(calibrate.returncode, 0, calibrate.stderr)
                prices[threads] = []
                for tokens in ("48", "96", "256", "384"):
                    price = subprocess.run([CLI, "price", "--calibration", calibration, "--tokens", tokens, "--json"],
                                           capture_output=True, text=True, timeout=60)
                    self.assertEqual(price.returncode, 0, price.stderr)
                    prices[threads].append(json.loads(price.stdout)["raw_bytes"])
        self.assertEqual(prices[1], prices[2])


if __name__ == "__main__":
    unittest.main()
