"""Ranges, marks and waves on the calling thread, through the recording backend."""

import json
import threading
import unittest

from tests.python import support  # noqa: F401  (import paths)
import peakscope
from peakscope import ranges


class RangesTest(unittest.TestCase):
    def setUp(self):
        self.recording = peakscope.set_backend("recording")

    def tearDown(self):
        peakscope.set_backend("none")

    def test_range_context_pushes_and_pops_on_this_thread(self):
        with peakscope.range("head/loss"):
            self.assertEqual(self.recording.stack(), ["head/loss"])
            with peakscope.range("optimizer/step"):
                self.assertEqual(self.recording.innermost(), "optimizer/step")
        me = threading.get_ident()
        self.assertEqual(self.recording.events, [
            (me, "push", "head/loss", None), (me, "push", "optimizer/step", None),
            (me, "pop", "optimizer/step", None), (me, "pop", "head/loss", None)])

    def test_push_pop(self):
        peakscope.push("a")
        peakscope.push("b")
        peakscope.pop()
        self.assertEqual(self.recording.stack(), ["a"])
        peakscope.pop()
        self.assertEqual(self.recording.stack(), [])
        peakscope.pop()  # nothing open: the helper does not pop the backend blindly
        self.assertEqual([op for _, op, _, _ in self.recording.events], ["push", "push", "pop", "pop"])

    def test_closing_an_outer_range_closes_what_was_left_open_inside(self):
        with self.assertRaises(RuntimeError):
            with peakscope.range("outer"):
                peakscope.push("left/open")
                raise RuntimeError("forward failed")
        self.assertEqual(self.recording.stack(), [])
        self.assertEqual([n for _, op, n, _ in self.recording.events if op == "pop"], ["left/open", "outer"])

    def test_ranges_are_per_thread(self):
        seen = {}

        def worker():
            with peakscope.range("backward/layer.0"):
                seen["worker"] = self.recording.stack()

        with peakscope.range("wave"):
            thread = threading.Thread(target=worker)
            thread.start()
            thread.join()
            self.assertEqual(self.recording.stack(), ["wave"])
        self.assertEqual(seen["worker"], ["backward/layer.0"])
        threads = {t for t, _, name, _ in self.recording.events if name == "backward/layer.0"}
        self.assertEqual(len(threads), 1)
        self.assertNotIn(threading.get_ident(), threads)

    def test_an_entry_cannot_be_closed_from_another_thread(self):
        entry = ranges.open_entry("mine")
        result = {}
        thread = threading.Thread(target=lambda: result.setdefault("closed", ranges.close_entry(entry)))
        thread.start()
        thread.join()
        self.assertFalse(result["closed"])
        self.assertEqual(self.recording.stack(), ["mine"])
        self.assertTrue(ranges.close_entry(entry))
        self.assertFalse(ranges.close_entry(entry))

    def test_mark_payload_forms(self):
        peakscope.mark("plain")
        peakscope.mark("text", '{"x": 1}')
        peakscope.mark("data", {"x": [1, 2]})
        payloads = [(n, p) for _, op, n, p in self.recording.events if op == "mark"]
        self.assertEqual(payloads, [("plain", None), ("text", '{"x": 1}'), ("data", '{"x": [1, 2]}')])


class WaveTest(unittest.TestCase):
    def setUp(self):
        self.recording = peakscope.set_backend("recording")

    def tearDown(self):
        peakscope.set_backend("none")

    def test_wave_is_a_range_with_its_payload_marked_right_after_the_push(self):
        with peakscope.wave(tokens=2047, slots=["a"], groups=1, cold=True):
            with peakscope.range("forward/layer.0"):
                pass
        ops = [(op, name) for _, op, name, _ in self.recording.events]
        self.assertEqual(ops[:2], [("push", "wave"), ("mark", "wave")])
        self.assertEqual(ops[-1], ("pop", "wave"))
        payload = self.recording.events[1][3]
        self.assertEqual(payload, '{"tokens": 2047, "slots": ["a"], "groups": 1, "cold": true}')
        self.assertEqual(json.loads(payload), {"tokens": 2047, "slots": ["a"], "groups": 1, "cold": True})

    def test_extra_payload_fields_and_types(self):
        with peakscope.wave(tokens=8.0, slots=("a", "b"), groups=2, cold=0,
                            children=[{"tokens": 4}, {"tokens": 4}]):
            pass
        payload = json.loads(self.recording.events[1][3])
        self.assertEqual(payload, {"tokens": 8, "slots": ["a", "b"], "groups": 2, "cold": False,
                                   "children": [{"tokens": 4}, {"tokens": 4}]})
        self.assertIs(type(payload["tokens"]), int)
        with self.assertRaises(TypeError):
            peakscope.wave_payload(4, cold=True, tokens=5)

    def test_bad_payloads_raise_before_the_range_opens_naming_the_field(self):
        bad = [({"tokens": -5}, "wave tokens"), ({"tokens": 0}, "wave tokens"), ({"tokens": 10.7}, "wave tokens"),
               ({"tokens": "12"}, "wave tokens"), ({"tokens": True}, "wave tokens"),
               ({"tokens": 4, "cold": "no"}, "wave cold"), ({"tokens": 4, "slots": "ab"}, "wave slots"),
               ({"tokens": 100, "sequence_lengths": [3, 4]}, "wave sequence_lengths"),
               ({"tokens": 96, "sequence_lengths": [-3, 99]}, "wave sequence_lengths"),
               ({"tokens": 7, "sequence_lengths": "34"}, "wave sequence_lengths")]
        for kwargs, field in bad:
            with self.subTest(kwargs=kwargs):
                with self.assertRaises((TypeError, ValueError)) as raised:
                    with peakscope.wave(**kwargs):
                        pass
                self.assertTrue(str(raised.exception).startswith(field), raised.exception)
        self.assertEqual(self.recording.events, [])  # nothing was opened
        with peakscope.wave(tokens=7, sequence_lengths=[3, 4]):
            pass
        self.assertEqual(json.loads(self.recording.events[1][3])["sequence_lengths"], [3, 4])

    def test_a_wave_inside_a_wave_is_refused(self):
        with peakscope.wave(tokens=200):
            with self.assertRaises(RuntimeError) as raised:
                with peakscope.wave(tokens=50):
                    pass
            self.assertIn("one at a time", str(raised.exception))
        self.assertEqual([op for _, op, _, _ in self.recording.events].count("push"), 1)
        with peakscope.wave(tokens=50):  # after the first closed: fine
            pass

    def test_wave_closes_ranges_left_open_inside_it(self):
        with peakscope.wave(tokens=4):
            peakscope.push("backward/layer.0")
        self.assertEqual(self.recording.stack(), [])
        pops = [n for _, op, n, _ in self.recording.events if op == "pop"]
        self.assertEqual(pops, ["backward/layer.0", "wave"])


if __name__ == "__main__":
    unittest.main()
