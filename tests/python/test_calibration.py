"""calibrate and check through the real recorder, on a tiny workload.

Calibrates on waves of 8 and 64 tokens, checks waves of 16 and 48 tokens it
has not seen. Skipped until build/peakscope and the preload library exist.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from tests.python import support

CLI = os.path.join(support.REPO, "build", "peakscope")
PRELOAD = os.path.join(support.REPO, "build", "libpeakscope_preload.so")
SCRIPT = os.path.join(support.REPO, "workloads", "torch", "lora_step.py")
SIZES = ["--layers", "4", "--hidden", "32", "--heads", "2", "--intermediate", "64", "--rank", "8",
         "--vocab", "64", "--attention-block", "16"]
KEYS = {"tokens", "cold", "measured_peak_bytes", "raw_bytes", "required_bytes", "raw_error", "admitted_error"}


def run(*arguments):
    return subprocess.run([CLI, *arguments], capture_output=True, text=True, timeout=120)


@unittest.skipUnless(os.access(CLI, os.X_OK) and os.path.exists(PRELOAD),
                     "build/peakscope and build/libpeakscope_preload.so are not built (run make)")
class CalibrationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        environment = {k: v for k, v in os.environ.items() if k not in ("PEAKSCOPE_BACKEND", "LD_PRELOAD")}
        cls.paths = {}
        for name, tokens in (("calibration", "8,64"), ("held_out", "16,48")):
            path = os.path.join(cls.directory.name, name + ".pstrace")
            subprocess.run([CLI, "record", "--host", "-o", path, "--", sys.executable, SCRIPT, "--steps", "2",
                            "--tokens", tokens] + SIZES, check=True, capture_output=True, env=environment,
                           timeout=300)
            cls.paths[name] = path
        cls.calibration = os.path.join(cls.directory.name, "cal.json")
        cls.calibrate = run("calibrate", cls.paths["calibration"], "-o", cls.calibration)

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def test_calibration_file(self):
        self.assertEqual(self.calibrate.returncode, 0, self.calibrate.stderr)
        with open(self.calibration) as f:
            calibration = json.load(f)
        self.assertEqual(calibration["layers"], 4)
        self.assertEqual(len(calibration["boundary_per_group"]), 4)
        # Adapter gradients are exact: every layer has the same adapters.
        gradients = calibration["adapter_gradient_bytes"]["a"]
        self.assertEqual(len(set(gradients)), 1, gradients)
        self.assertGreater(gradients[0], 0)
        self.assertEqual(len(calibration["residuals"]), 4)
        # Two sizes cannot leave one out and keep a growth: the flat factor, and why.
        self.assertFalse(calibration["margin"]["derived"])
        self.assertIn("not derived", calibration["margin"]["evidence"][0])

    def test_check_on_held_out_waves(self):
        self.assertEqual(self.calibrate.returncode, 0, self.calibrate.stderr)
        check = run("check", "--calibration", self.calibration, self.paths["held_out"], "--json")
        result = json.loads(check.stdout)
        self.assertEqual(check.returncode, 1 if result["under_estimates"] else 0, check.stderr)
        waves = result["waves"]
        self.assertEqual([(w["tokens"], w["cold"]) for w in waves], [(16, True), (48, True), (16, False), (48, False)])
        for wave in waves:
            self.assertTrue(KEYS <= wave.keys(), wave.keys())
            self.assertGreaterEqual(wave["required_bytes"], wave["raw_bytes"])
            self.assertAlmostEqual(wave["margin"], 0.1)
        # The first wave of a step has pending gradients: floor-only prices it lower.
        self.assertLess(waves[0]["floor_raw_bytes"], waves[0]["raw_bytes"])
        self.assertEqual(waves[1]["floor_raw_bytes"], waves[1]["raw_bytes"])
        self.assertEqual(result["under_estimates"], 0, json.dumps(waves, indent=1))

    def test_text_table_and_bad_input(self):
        self.assertEqual(self.calibrate.returncode, 0, self.calibrate.stderr)
        text = run("check", "--calibration", self.calibration, self.paths["held_out"])
        self.assertIn("under_estimates 0", text.stdout)
        self.assertEqual(run("check", self.paths["held_out"]).returncode, 2)
        self.assertEqual(run("check", "--calibration", self.paths["held_out"], self.paths["held_out"]).returncode, 2)
        self.assertEqual(run("calibrate", self.paths["held_out"]).returncode, 2)


if __name__ == "__main__":
    unittest.main()


@unittest.skipUnless(os.access(CLI, os.X_OK) and os.path.exists(PRELOAD),
                     "build/peakscope and build/libpeakscope_preload.so are not built (run make)")
class HostFloorTest(unittest.TestCase):
    """A trace recorded with a host floor never yields a silent price."""

    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        environment = {k: v for k, v in os.environ.items() if k not in ("PEAKSCOPE_BACKEND", "LD_PRELOAD")}
        cls.trace = os.path.join(cls.directory.name, "floor.pstrace")
        subprocess.run([CLI, "record", "--host", "--host-min-bytes", "4096", "-o", cls.trace, "--", sys.executable,
                        SCRIPT, "--steps", "1", "--tokens", "8,32,64"] + SIZES, check=True, capture_output=True,
                       env=environment, timeout=300)
        cls.calibration = os.path.join(cls.directory.name, "cal.json")

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def test_calibrate_and_check_refuse_it_naming_the_fix(self):
        for command in (["calibrate", self.trace, "-o", os.path.join(self.directory.name, "refused.json")],
                        ["check", "--calibration", self.calibration, self.trace]):
            if command[0] == "check" and not os.path.exists(self.calibration):
                self.assertEqual(run("calibrate", self.trace, "-o", self.calibration, "--allow-host-floor")
                                 .returncode, 0)
            result = run(*command)
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertIn("size floor", result.stderr)
            self.assertIn("record it again without a floor", result.stderr)
            self.assertIn("--allow-host-floor", result.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.directory.name, "refused.json")))

    def test_accepted_it_warns_in_every_price(self):
        calibrate = run("calibrate", self.trace, "-o", self.calibration, "--allow-host-floor")
        self.assertEqual(calibrate.returncode, 0, calibrate.stderr)
        self.assertIn("warning", calibrate.stderr)
        with open(self.calibration) as f:
            calibration = json.load(f)
        self.assertIn("size floor", " ".join(calibration["warnings"]))
        # Three sizes: each left out in turn, the margin read off the prices.
        margin = calibration["margin"]
        self.assertTrue(margin["derived"])
        self.assertEqual(len([e for e in margin["evidence"] if "left out" in e]), 3, margin)
        self.assertGreaterEqual(margin["inside"], 0)
        self.assertEqual(margin["largest_tokens"], 64)
        self.assertIn("margin (derived)", calibrate.stdout)
        price = run("price", "--calibration", self.calibration, "--tokens", "48", "--json")
        self.assertEqual(price.returncode, 0, price.stderr)
        priced = json.loads(price.stdout)
        self.assertTrue(any("size floor" in w for w in priced["warnings"]), price.stdout)
        self.assertTrue(priced["margin"]["derived"])
        self.assertAlmostEqual(priced["margin"]["fraction"], margin["inside"])
        beyond = json.loads(run("price", "--calibration", self.calibration, "--tokens", "256", "--json").stdout)
        self.assertIn("2.00 doublings beyond", beyond["margin"]["why"])
        self.assertAlmostEqual(beyond["margin"]["fraction"], margin["inside"] + 2 * margin["per_doubling"])
        flat = os.path.join(self.directory.name, "flat.json")
        self.assertEqual(run("calibrate", self.trace, "-o", flat, "--allow-host-floor", "--safety", "1.25")
                         .returncode, 0)
        flat_price = json.loads(run("price", "--calibration", flat, "--tokens", "48", "--json").stdout)
        self.assertFalse(flat_price["margin"]["derived"])
        self.assertAlmostEqual(flat_price["margin"]["fraction"], 0.25)
        self.assertIn("--safety", flat_price["margin"]["why"])
        check = run("check", "--calibration", self.calibration, self.trace, "--json", "--allow-host-floor")
        self.assertIn(check.returncode, (0, 1), check.stderr)
        self.assertIn("warning", check.stderr)
        self.assertTrue(any("size floor" in w for w in json.loads(check.stdout)["warnings"]))
