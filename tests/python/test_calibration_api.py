"""peakscope.Calibration: the C++ estimator's prices through libpeakscope_estimator.so.

Records the embedded workload (waves of 16, 48 and 96 tokens, 4 layers),
calibrates on it with build/peakscope, and holds the Python API to
`peakscope price --calibration` byte for byte. Skipped until build/peakscope,
the preload library and build/libpeakscope_estimator.so exist.
"""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

from tests.python import support

import peakscope  # noqa: E402  (support put python/ on the path)
from peakscope import calibration as api  # noqa: E402

CLI = os.path.join(support.REPO, "build", "peakscope")
PRELOAD = os.path.join(support.REPO, "build", "libpeakscope_preload.so")
LIBRARY = os.path.join(support.REPO, "build", "libpeakscope_estimator.so")
SCRIPT = os.path.join(support.REPO, "workloads", "torch", "lora_step.py")
SIZES = ["--layers", "4", "--hidden", "32", "--heads", "2", "--intermediate", "64", "--rank", "8",
         "--vocab", "64", "--attention-block", "16"]
COMPONENTS = ("output", "retained", "workspace", "input_gradient", "adapter_gradient", "moment", "waiting",
              "transient")
TWO_SLOTS = os.path.join(support.REPO, "workloads", "torch", "lora_two_slots.py")


def run(*arguments):
    return subprocess.run([CLI, *arguments], capture_output=True, text=True, timeout=120)


@unittest.skipUnless(os.access(CLI, os.X_OK) and os.path.exists(PRELOAD) and os.path.exists(LIBRARY),
                     "build/peakscope, the preload library or build/libpeakscope_estimator.so is not built (run make)")
class CalibrationApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        environment = {k: v for k, v in os.environ.items() if k not in ("PEAKSCOPE_BACKEND", "LD_PRELOAD")}
        trace = os.path.join(cls.directory.name, "waves.pstrace")
        subprocess.run([CLI, "record", "--host", "-o", trace, "--", sys.executable, SCRIPT, "--steps", "2",
                        "--tokens", "16,48,96"] + SIZES, check=True, capture_output=True, env=environment,
                       timeout=300)
        cls.path = os.path.join(cls.directory.name, "cal.json")
        calibrate = run("calibrate", trace, "-o", cls.path)
        if calibrate.returncode != 0:
            raise RuntimeError(f"peakscope calibrate failed: {calibrate.stderr}")
        cls.calibration = peakscope.Calibration.load(cls.path)

    @classmethod
    def tearDownClass(cls):
        cls.calibration.close()
        cls.directory.cleanup()

    def cli_price(self, tokens, *options):
        result = run("price", "--calibration", self.path, "--tokens", str(tokens), "--json", *options)
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)

    def assert_same_price(self, price, expected):
        self.assertEqual(price.raw_bytes, expected["raw_bytes"])
        self.assertEqual(price.required_bytes, expected["required_bytes"])
        self.assertEqual(price.components, {k: expected["components"].get(k, 0) for k in COMPONENTS})
        self.assertEqual(price.peak_layer, expected["peak_layer"])
        self.assertEqual(price.peak_moment, expected["peak_moment"])
        self.assertEqual(price.warnings, expected["warnings"])
        self.assertEqual(price.extrapolated, bool(expected["extrapolated"]["outside"] or
                                                  expected["extrapolated"]["few_sizes"]))

    def test_prices_equal_the_command_line(self):
        # Inside the calibrated sizes and outside them (8 and 200 extrapolate).
        for tokens in (8, 16, 30, 48, 96, 200):
            with self.subTest(tokens=tokens):
                price = self.calibration.price(tokens)
                self.assert_same_price(price, self.cli_price(tokens))
                self.assertGreaterEqual(price.required_bytes, price.raw_bytes)
                self.assertEqual(price.extrapolated, tokens in (8, 200))
                self.assertEqual(bool(price.warnings), price.extrapolated)
        self.assert_same_price(self.calibration.price(96, sequences=[48, 32, 16], cold=True),
                               self.cli_price(96, "--sequences", "48,32,16", "--cold"))
        self.assert_same_price(self.calibration.price(48, slots=["a"], gradients_exist=True),
                               self.cli_price(48, "--slots", "a", "--gradients-exist"))
        # A new shape in a process that has run a wave: the same bytes both ways,
        # never more than a cold wave that may be the process's first.
        later = self.calibration.price(96, cold=peakscope.COLD_AFTER_FIRST_WAVE)
        self.assert_same_price(later, self.cli_price(96, "--cold", "--after-first-wave"))
        self.assertLessEqual(later.raw_bytes, self.calibration.price(96, cold=True).raw_bytes)
        self.assertGreaterEqual(later.raw_bytes, self.calibration.price(96).raw_bytes)

    def test_prices_grow_with_tokens(self):
        required = [self.calibration.price(tokens).required_bytes for tokens in range(1, 200, 7)]
        self.assertEqual(required, sorted(required))

    def test_price_is_a_frozen_value(self):
        price = self.calibration.price(48)
        self.assertIsInstance(price, api.Price)
        self.assertEqual(price, self.calibration.price(48))
        with self.assertRaises(AttributeError):  # dataclasses.FrozenInstanceError
            price.raw_bytes = 0
        self.assertIn(price.peak_moment, (None, "head", "before_gradient", "after_gradient"))

    def test_threads_share_one_calibration(self):
        expected = {tokens: self.calibration.price(tokens, sequences=[tokens // 2, tokens - tokens // 2])
                    for tokens in range(16, 97, 8)}
        wrong = []

        def work():
            for _ in range(50):
                for tokens, price in expected.items():
                    try:
                        if self.calibration.price(tokens, sequences=[tokens // 2, tokens - tokens // 2]) != price:
                            wrong.append(tokens)
                    except peakscope.CalibrationError as e:  # another thread's request
                        wrong.append(str(e))

        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # threads switch between any two bytecodes: what the lock is for
        try:
            threads = [threading.Thread(target=work) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            sys.setswitchinterval(interval)
        self.assertEqual(wrong, [])

    def test_unknown_slot(self):
        with self.assertRaises(peakscope.CalibrationError) as raised:
            self.calibration.price(48, slots=["nope"])
        self.assertTrue(str(raised.exception).startswith("slots[0]: "), raised.exception)
        self.assertIn("nope", str(raised.exception))
        with self.assertRaises(peakscope.CalibrationError) as raised:
            self.calibration.admit(1 << 30, slots=["nope"])
        self.assertTrue(str(raised.exception).startswith("slots[0]: "), raised.exception)
        with self.assertRaises(peakscope.CalibrationError) as raised:
            self.calibration.price(48, slots=["a", "a"])
        self.assertTrue(str(raised.exception).startswith("slots[1]: "), raised.exception)
        # The error left the object usable.
        self.assertEqual(self.calibration.price(48), self.calibration.price(48, slots=["a"]))

    def test_sequences_that_do_not_add_up(self):
        with self.assertRaises(peakscope.CalibrationError) as raised:
            self.calibration.price(48, sequences=[16, 16])
        self.assertTrue(str(raised.exception).startswith("sequences: "), raised.exception)
        with self.assertRaises(peakscope.CalibrationError) as raised:
            self.calibration.price(48, sequences=[48, 1 << 64])
        self.assertIn("sequences[1]", str(raised.exception))
        for tokens in (0, -3):
            with self.assertRaises(peakscope.CalibrationError) as raised:
                self.calibration.price(tokens)
            self.assertTrue(str(raised.exception).startswith("tokens: "), raised.exception)
        self.assertTrue(issubclass(peakscope.CalibrationError, ValueError))

    def test_numbers_that_are_not_whole_are_refused_naming_the_field(self):
        # A fraction is not rounded away: the command line refuses 1.5 too.
        for call, field in ((lambda: self.calibration.price(48.5), "tokens: "),
                            (lambda: self.calibration.price("48"), "tokens: "),
                            (lambda: self.calibration.price(True), "tokens: "),
                            (lambda: self.calibration.admit(1 << 30, max_tokens=100.5), "max_tokens: "),
                            (lambda: self.calibration.admit(-1), "budget_bytes: ")):
            with self.subTest(field=field):
                with self.assertRaises(peakscope.CalibrationError) as raised:
                    call()
                self.assertTrue(str(raised.exception).startswith(field), raised.exception)
        # Whole numbers in other clothes are whole numbers.
        self.assertEqual(self.calibration.price(48.0), self.calibration.price(48))
        self.assertEqual(self.calibration.admit(float(1 << 30)).tokens, self.calibration.admit(1 << 30).tokens)

    def test_calibration_files_it_refuses(self):
        with open(self.path) as f:
            calibration = json.load(f)
        calibration["version"] = 99
        future = os.path.join(self.directory.name, "version99.json")
        with open(future, "w") as f:
            json.dump(calibration, f)
        with self.assertRaises(peakscope.CalibrationError) as raised:
            peakscope.Calibration.load(future)
        message = str(raised.exception)
        self.assertIn("version", message)
        self.assertIn(future, message)
        not_json = os.path.join(self.directory.name, "not.json")
        with open(not_json, "w") as f:
            f.write("{ not json")
        with self.assertRaises(peakscope.CalibrationError) as raised:
            peakscope.Calibration.load(not_json)
        self.assertIn("not valid JSON", str(raised.exception))
        with self.assertRaises(peakscope.CalibrationError) as raised:
            peakscope.Calibration.load(os.path.join(self.directory.name, "missing.json"))
        self.assertIn("cannot read", str(raised.exception))
        del calibration["layers"]
        calibration["version"] = 2
        with open(future, "w") as f:
            json.dump(calibration, f)
        with self.assertRaises(peakscope.CalibrationError) as raised:
            peakscope.Calibration.load(future)
        self.assertIn("layers", str(raised.exception))

    def test_admit_is_the_largest_width_that_fits(self):
        calibration = self.calibration
        for budget in (calibration.price(30).required_bytes, calibration.price(70).required_bytes + 1000,
                       calibration.price(300).required_bytes - 1):
            with self.subTest(budget=budget):
                admission = calibration.admit(budget)
                width = admission.tokens
                self.assertGreater(width, 0)
                self.assertLessEqual(calibration.price(width).required_bytes, budget)
                self.assertGreater(calibration.price(width + 1).required_bytes, budget)
                self.assertEqual(admission.price, calibration.price(width))
                self.assertEqual(admission.next_required_bytes, calibration.price(width + 1).required_bytes)
                self.assertGreater(admission.search_prices, 0)
                cli = json.loads(run("price", "--calibration", self.path, "--budget", str(budget), "--json").stdout)
                self.assertEqual(width, cli["admitted_tokens"])
                self.assertEqual(admission.search_prices, cli["search_prices"])
        # Packed sequences, cold: still the largest width of that shape.
        budget = calibration.price(200).required_bytes
        admission = calibration.admit(budget, cold=True, max_sequence_length=32)
        packed = lambda n: [32] * (n // 32) + ([n % 32] if n % 32 else [])  # noqa: E731
        width = admission.tokens
        self.assertLessEqual(calibration.price(width, sequences=packed(width), cold=True).required_bytes, budget)
        self.assertGreater(calibration.price(width + 1, sequences=packed(width + 1), cold=True).required_bytes, budget)
        # Not one token, and every token up to max_tokens.
        nothing = calibration.admit(calibration.price(1).required_bytes - 1)
        self.assertEqual((nothing.tokens, nothing.price), (0, None))
        self.assertEqual(nothing.next_required_bytes, calibration.price(1).required_bytes)
        everything = calibration.admit(1 << 40, max_tokens=64)
        self.assertEqual((everything.tokens, everything.next_required_bytes), (64, None))
        with self.assertRaises(peakscope.CalibrationError) as raised:
            calibration.admit(1 << 30, max_tokens=0)
        self.assertIn("max_tokens", str(raised.exception))

    def test_library_lookup(self):
        self.assertEqual(os.path.realpath(api.library_path()), os.path.realpath(LIBRARY))
        with self.assertRaises(api.EstimatorLibraryNotFound) as raised:
            peakscope.Calibration.load(self.path, library=os.path.join(self.directory.name, "none.so"))
        self.assertIn("make", str(raised.exception))
        copy = os.path.join(self.directory.name, "copy", "libpeakscope_estimator.so")
        os.makedirs(os.path.dirname(copy))
        shutil.copyfile(LIBRARY, copy)
        previous = os.environ.get(api.ENV_ESTIMATOR_LIBRARY)
        os.environ[api.ENV_ESTIMATOR_LIBRARY] = copy
        try:
            self.assertEqual(api.library_path(), copy)
            with peakscope.Calibration.load(self.path) as through_copy:
                self.assertEqual(through_copy.price(48), self.calibration.price(48))
        finally:
            if previous is None:
                del os.environ[api.ENV_ESTIMATOR_LIBRARY]
            else:
                os.environ[api.ENV_ESTIMATOR_LIBRARY] = previous

    def test_abi(self):
        # Only the psc_calibration_* functions are exported.
        if shutil.which("nm"):
            lines = subprocess.run(["nm", "-D", "--defined-only", LIBRARY], capture_output=True, text=True,
                                   check=True).stdout.splitlines()
            exported = sorted(line.split()[-1] for line in lines if line.strip())
            self.assertEqual(exported, ["psc_calibration_admit", "psc_calibration_free", "psc_calibration_group_split",
                                        "psc_calibration_load", "psc_calibration_price"])
        # A struct shorter than the first version is refused, naming it.
        lib = ctypes.PyDLL(LIBRARY)
        lib.psc_calibration_load.restype = ctypes.c_void_p
        error = ctypes.create_string_buffer(256)
        handle = ctypes.c_void_p(lib.psc_calibration_load(os.fsencode(self.path), error, ctypes.c_size_t(256)))
        self.assertTrue(handle.value, error.value)
        try:
            request = api._Request(size=ctypes.sizeof(api._Request), tokens=48)
            out = api._Price(size=ctypes.sizeof(api._Price))
            message = ctypes.create_string_buffer(256)
            price = lib.psc_calibration_price
            self.assertEqual(price(handle, ctypes.byref(request), ctypes.byref(out), message, ctypes.c_size_t(256)), 0)
            self.assertEqual(out.raw_bytes, self.calibration.price(48).raw_bytes)
            self.assertEqual(message.value, b"")
            request.size = 8
            self.assertEqual(price(handle, ctypes.byref(request), ctypes.byref(out), message, ctypes.c_size_t(256)), 2)
            self.assertTrue(message.value.startswith(b"request.size: "), message.value)
            request.size = ctypes.sizeof(api._Request)
            out.size = 16
            self.assertEqual(price(handle, ctypes.byref(request), ctypes.byref(out), message, ctypes.c_size_t(256)), 2)
            self.assertTrue(message.value.startswith(b"out.size: "), message.value)
            # A short message buffer is cut, and still terminated.
            out.size = ctypes.sizeof(api._Price)
            request.tokens = 0
            small = ctypes.create_string_buffer(b"x" * 8)
            self.assertEqual(price(handle, ctypes.byref(request), ctypes.byref(out), small, ctypes.c_size_t(8)), 2)
            self.assertEqual(small.value, b"tokens:")
        finally:
            lib.psc_calibration_free(handle)


if __name__ == "__main__":
    unittest.main()


@unittest.skipUnless(os.access(CLI, os.X_OK) and os.path.exists(PRELOAD) and os.path.exists(LIBRARY),
                     "build/peakscope, the preload library or build/libpeakscope_estimator.so is not built (run make)")
class GroupsTest(unittest.TestCase):
    """Waves of two gradient groups of unequal sizes: calibrated from them, priced per group."""

    @classmethod
    def setUpClass(cls):
        cls.directory = tempfile.TemporaryDirectory()
        environment = {k: v for k, v in os.environ.items() if not k.startswith("PEAKSCOPE_") and k != "LD_PRELOAD"}
        trace = os.path.join(cls.directory.name, "two.pstrace")
        subprocess.run([CLI, "record", "--host", "-o", trace, "--", sys.executable, TWO_SLOTS, "--steps", "2",
                        "--tokens", "24,48,96", "--share-a", "0.25", "--layers", "4", "--hidden", "32", "--rank", "8"],
                       check=True, capture_output=True, env=environment, timeout=300)
        cls.path = os.path.join(cls.directory.name, "cal.json")
        calibrate = run("calibrate", trace, "-o", cls.path)
        if calibrate.returncode != 0:
            raise RuntimeError(f"peakscope calibrate failed: {calibrate.stderr}")
        cls.calibration = peakscope.Calibration.load(cls.path)

    @classmethod
    def tearDownClass(cls):
        cls.calibration.close()
        cls.directory.cleanup()

    def test_each_slot_calibrated_from_its_own_runs(self):
        with open(self.path) as f:
            cal = json.load(f)
        self.assertEqual(sorted(cal["adapter_gradient_bytes"]), ["a", "b"])
        self.assertIn("moments", cal)  # fitted from the runs: no wave here has one group

    def test_prices_equal_the_command_line(self):
        for groups in ([("a", [20]), ("b", [60])], [("a", [60]), ("b", [20])], [("a", [8, 8]), ("b", [100])]):
            with self.subTest(groups=groups):
                text = ",".join(f"{slot}={'+'.join(map(str, lengths))}" for slot, lengths in groups)
                result = run("price", "--calibration", self.path, "--groups", text, "--json")
                self.assertEqual(result.returncode, 0, result.stderr)
                expected = json.loads(result.stdout)
                price = self.calibration.price(groups=[
                    peakscope.group(sum(lengths), slot=slot, sequence_lengths=lengths if len(lengths) > 1 else None)
                    for slot, lengths in groups])
                self.assertEqual(price.raw_bytes, expected["raw_bytes"])
                self.assertEqual(price.required_bytes, expected["required_bytes"])
                self.assertEqual(price.components, {k: expected["components"].get(k, 0) for k in COMPONENTS})
                self.assertEqual(expected["request"]["tokens"], sum(sum(lengths) for _, lengths in groups))

    def test_text_names_each_group(self):
        result = run("price", "--calibration", self.path, "--groups", "a=8+8,b=100")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("116 tokens in groups a=8+8, b=100, backwards in the worst order, warm",
                      result.stdout.splitlines()[0])
        result = run("price", "--calibration", self.path, "--groups", "a=8+8,b=100", "--backward-order", "1,0")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("backwards in the order b,a", result.stdout.splitlines()[0])
        result = run("price", "--calibration", self.path, "--budget", "1MiB", "--groups", "a=1,b=3")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stdout, r"split between the groups: a=\d+, b=\d+")

    def test_a_larger_group_costs_more_and_order_is_not_assumed(self):
        small = self.calibration.price(groups=[peakscope.group(20, slot="a"), peakscope.group(60, slot="b")])
        reversed_ = self.calibration.price(groups=[peakscope.group(60, slot="b"), peakscope.group(20, slot="a")])
        larger = self.calibration.price(groups=[peakscope.group(20, slot="a"), peakscope.group(120, slot="b")])
        self.assertGreater(larger.raw_bytes, small.raw_bytes)
        # The worst order of the backwards is priced, whatever the forward order.
        self.assertEqual(small.raw_bytes, reversed_.raw_bytes)

    def test_a_known_backward_order_is_priced_as_the_command_line_prices_it_and_never_above_the_worst(self):
        groups = [peakscope.group(20, slot="a"), peakscope.group(90, slot="b")]
        worst = self.calibration.price(groups=groups)
        cheaper = 0
        for order in ([0, 1], [1, 0]):
            with self.subTest(order=order):
                price = self.calibration.price(groups=groups, backward_order=order)
                result = run("price", "--calibration", self.path, "--groups", "a=20,b=90", "--backward-order",
                             ",".join(map(str, order)), "--json")
                self.assertEqual(result.returncode, 0, result.stderr)
                expected = json.loads(result.stdout)
                self.assertEqual(price.raw_bytes, expected["raw_bytes"])
                self.assertEqual(expected["request"]["backward_order"], order)
                self.assertLessEqual(price.raw_bytes, worst.raw_bytes)
                cheaper += price.raw_bytes < worst.raw_bytes
        self.assertGreater(cheaper, 0)  # unequal groups: one order holds less than the worst

    def test_a_backward_order_that_is_not_every_group_once_is_refused(self):
        groups = [peakscope.group(20, slot="a"), peakscope.group(90, slot="b")]
        for order in ([0], [0, 0], [0, 2], [-1, 0]):
            with self.subTest(order=order), self.assertRaises(peakscope.CalibrationError) as caught:
                self.calibration.price(groups=groups, backward_order=order)
            self.assertIn("backward_order", str(caught.exception))
        with self.assertRaises(peakscope.CalibrationError):
            self.calibration.price(tokens=100, backward_order=[0])
        result = run("price", "--calibration", self.path, "--tokens", "100", "--backward-order", "0")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--backward-order", result.stderr)

    def test_admission_in_a_known_backward_order_admits_at_least_the_worst_orders_wave(self):
        shares = [peakscope.group(1, slot="a"), peakscope.group(3, slot="b")]
        budget = self.calibration.price(groups=[peakscope.group(30, slot="a"), peakscope.group(90, slot="b")]
                                        ).required_bytes
        worst = self.calibration.admit(budget, groups=shares)
        for order in ([0, 1], [1, 0]):
            with self.subTest(order=order):
                known = self.calibration.admit(budget, groups=shares, backward_order=order)
                self.assertGreaterEqual(known.tokens, worst.tokens)
                self.assertLessEqual(known.price.required_bytes, budget)
                result = run("price", "--calibration", self.path, "--budget", str(budget), "--groups", "a=1,b=3",
                             "--backward-order", ",".join(map(str, order)), "--json")
                self.assertEqual(result.returncode, 0, result.stderr)
                expected = json.loads(result.stdout)
                self.assertEqual(expected["admitted_tokens"], known.tokens)
                self.assertEqual(expected["price"]["request"]["backward_order"], order)
                # The admitted wave priced on its own, in the same order, is the admission's price.
                a, b = known.group_tokens
                alone = self.calibration.price(groups=[peakscope.group(a, slot="a"), peakscope.group(b, slot="b")],
                                               backward_order=order)
                self.assertEqual(alone.required_bytes, known.price.required_bytes)

    def test_admission_over_a_split(self):
        budget = self.calibration.price(groups=[peakscope.group(30, slot="a"), peakscope.group(90, slot="b")]
                                        ).required_bytes
        admission = self.calibration.admit(budget, groups=[peakscope.group(1, slot="a"), peakscope.group(3, slot="b")])
        self.assertGreaterEqual(admission.tokens, 120)
        self.assertEqual(sum(admission.group_tokens), admission.tokens)
        a, b = admission.group_tokens
        self.assertAlmostEqual(b / a, 3, delta=0.2)
        result = run("price", "--calibration", self.path, "--budget", str(budget), "--groups", "a=1,b=3", "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        expected = json.loads(result.stdout)
        self.assertEqual(expected["admitted_tokens"], admission.tokens)
        self.assertEqual([g["tokens"] for g in expected["price"]["request"]["groups"]], admission.group_tokens)
        wider = self.calibration.price(groups=[peakscope.group(a + 1, slot="a"), peakscope.group(b + 3, slot="b")])
        self.assertGreater(wider.required_bytes, budget)

    def test_groups_refused_with_the_field(self):
        result = run("price", "--calibration", self.path, "--groups", "a=20,c=30")
        self.assertEqual(result.returncode, 2)
        self.assertIn("groups[1].slot", result.stderr)
        result = run("price", "--calibration", self.path, "--groups", "a20")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--groups", result.stderr)
        with self.assertRaises(peakscope.CalibrationError):
            self.calibration.price(groups=[peakscope.group(20, slot="a"), peakscope.group(30)])
        with self.assertRaises(peakscope.CalibrationError) as raised:
            self.calibration.price(groups=[{"tokens": 20.5, "slot": "a"}, peakscope.group(30, slot="b")])
        self.assertTrue(str(raised.exception).startswith("groups[0].tokens: "), raised.exception)
        with self.assertRaises(peakscope.CalibrationError) as raised:
            self.calibration.price(groups=[peakscope.group(20, slot="a"), peakscope.group(30, slot="b")],
                                   backward_order=[1.7, 0.2])
        self.assertTrue(str(raised.exception).startswith("backward_order[0]: "), raised.exception)
