"""Through the real recorder: the workload under `peakscope record --host`.

Skipped until build/peakscope and build/libpeakscope_preload.so exist (they are
built by `make`). Reads only the `report --json` fields the design promises.
"""

import os
import sys
import unittest

from tests.python import support
import lora_step

from tests.python.recorded import CLI, PRELOAD, RecordedTraceTest  # noqa: E402
SCRIPT = os.path.join(support.REPO, "workloads", "torch", "lora_step.py")
RECORDED = ["--steps", "2", "--tokens", "4,128", "--layers", "4", "--hidden", "32", "--heads", "2",
            "--intermediate", "64", "--rank", "8", "--vocab", "64", "--attention-block", "16"]


@unittest.skipUnless(os.access(CLI, os.X_OK) and os.path.exists(PRELOAD),
                     "build/peakscope and build/libpeakscope_preload.so are not built (run make)")
class RecordedWorkloadTest(RecordedTraceTest):
    @classmethod
    def setUpClass(cls):
        environment = {k: v for k, v in os.environ.items() if k not in ("PEAKSCOPE_BACKEND", "LD_PRELOAD")}
        cls.record_and_report("lora.pstrace", ["--host"], [sys.executable, SCRIPT] + RECORDED, environment,
                              timeout=300)

    def test_annotations_went_through_the_c_api(self):
        self.assertEqual(self.record.returncode, 0, self.record.stderr)
        self.assertIn("annotations: capi", self.record.stdout)

    def test_waves_and_their_payloads(self):
        waves = self.report_json()["waves"]
        self.assertEqual([(w["tokens"], w["cold"]) for w in waves], [(4, True), (128, True), (4, False), (128, False)])

    def test_adapter_gradients_live_at_peak_belong_to_their_layers_backward(self):
        report = self.report_json()
        adapter = [e for e in report["live_at_peak"] if e["category"] == "adapter_gradient"]
        self.assertTrue(adapter, report["live_at_peak"])
        for entry in adapter:
            self.assertEqual(entry["range"], f"backward/layer.{entry['layer']}")
        model, _ = lora_step.build(lora_step.parse_arguments(RECORDED))
        self.assertEqual(sum(e["bytes"] for e in adapter), sum(lora_step.bytes_per_layer(model)))

    def test_short_wave_peak_holds_every_adapter_gradient(self):
        waves = self.report_json()["waves"]
        model, _ = lora_step.build(lora_step.parse_arguments(RECORDED))
        adapter = sum(lora_step.bytes_per_layer(model))
        first_short = waves[0]
        measured = first_short["peak_bytes"] - first_short["baseline_bytes"]
        self.assertGreaterEqual(measured, adapter)
        self.assertLess(measured, 2 * adapter)  # and they are most of it


if __name__ == "__main__":
    unittest.main()
