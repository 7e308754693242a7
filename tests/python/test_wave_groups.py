"""Waves of several gradient groups: peakscope.group and the list form of `groups`."""

import json
import unittest

from tests.python import support  # noqa: F401  (import paths)
import peakscope


class GroupTest(unittest.TestCase):
    def test_group_fields(self):
        self.assertEqual(peakscope.group(128), {"tokens": 128})
        self.assertEqual(peakscope.group(128.0, slot="a"), {"tokens": 128, "slot": "a"})
        self.assertEqual(peakscope.group(128, "a", [64, 64]),
                         {"tokens": 128, "slot": "a", "sequence_lengths": [64, 64]})
        self.assertEqual(list(peakscope.group(128, "a", (64, 64))), ["tokens", "slot", "sequence_lengths"])
        self.assertIs(type(peakscope.group(8.0, sequence_lengths=(3.0, 5))["sequence_lengths"][0]), int)

    def test_group_refuses_bad_values(self):
        for tokens in (0, -4, 2.5, True, "8", None):
            with self.subTest(tokens=tokens), self.assertRaises((TypeError, ValueError)):
                peakscope.group(tokens)
        with self.assertRaisesRegex(ValueError, "add up to 127, not to the group's 128 tokens"):
            peakscope.group(128, "a", [64, 63])
        for lengths in ([], [0, 128], [128.5], "128", 128):
            with self.subTest(lengths=lengths), self.assertRaises((TypeError, ValueError)):
                peakscope.group(128, sequence_lengths=lengths)
        with self.assertRaises(TypeError):
            peakscope.group(128, slot=3)


class ListFormTest(unittest.TestCase):
    def test_the_designed_payload(self):
        payload = peakscope.wave_payload(
            groups=[peakscope.group(128, "a", [64, 64]), peakscope.group(256, "b")],
            cold=True, backward_order=[1, 0])
        self.assertEqual(json.dumps(payload),
                         '{"tokens": 384, "slots": ["a", "b"], "groups": [{"tokens": 128, "slot": "a", '
                         '"sequence_lengths": [64, 64]}, {"tokens": 256, "slot": "b"}], "cold": true, '
                         '"backward_order": [1, 0]}')

    def test_tokens_and_slots_default_to_the_groups(self):
        payload = peakscope.wave_payload(groups=[{"tokens": 400, "slot": "b"}, {"tokens": 300, "slot": "a"}])
        self.assertEqual(payload, {"tokens": 700, "slots": ["b", "a"],
                                   "groups": [{"tokens": 400, "slot": "b"}, {"tokens": 300, "slot": "a"}],
                                   "cold": False})
        self.assertNotIn("backward_order", payload)
        # tokens that agree, slots that agree, and slots for groups that name none
        self.assertEqual(peakscope.wave_payload(664, ["a", "b"], [peakscope.group(64, "a"), peakscope.group(600, "b")]),
                         peakscope.wave_payload(groups=[peakscope.group(64, "a"), peakscope.group(600, "b")]))
        self.assertEqual(peakscope.wave_payload(slots=["x", "y"], groups=[{"tokens": 4}, {"tokens": 6}])["slots"],
                         ["x", "y"])
        self.assertEqual(peakscope.wave_payload(groups=({"tokens": 4},))["slots"], [])

    def test_disagreements_are_errors_that_say_what(self):
        groups = [peakscope.group(128, "a"), peakscope.group(256, "b")]
        with self.assertRaisesRegex(ValueError, r"wave tokens 400 disagree with its groups, which add up "
                                                r"to 384 \(128\+256\)"):
            peakscope.wave_payload(400, groups=groups)
        with self.assertRaisesRegex(ValueError, "slots"):
            peakscope.wave_payload(slots=["b", "a"], groups=groups)
        with self.assertRaisesRegex(ValueError, r"groups\[1\]: .*add up to 3"):
            peakscope.wave_payload(groups=[{"tokens": 2}, {"tokens": 4, "sequence_lengths": [1, 2]}])
        with self.assertRaisesRegex(ValueError, r"groups\[0\]: unknown field"):
            peakscope.wave_payload(groups=[{"tokens": 2, "slots": ["a"]}])
        with self.assertRaisesRegex(ValueError, r"groups\[0\]: no tokens"):
            peakscope.wave_payload(groups=[{"slot": "a"}])
        with self.assertRaises(TypeError):
            peakscope.wave_payload(groups=[128, 256])
        with self.assertRaises(ValueError):
            peakscope.wave_payload(groups=[])
        with self.assertRaises(TypeError):
            peakscope.wave_payload(groups="2")
        with self.assertRaises(TypeError):
            peakscope.wave_payload(groups=2)  # the count form needs tokens
        with self.assertRaises(TypeError):
            peakscope.wave_payload(groups=groups, backward_order=[1, 0], **{"backward_order": [0, 1]})

    def test_backward_order_is_a_permutation(self):
        groups = [peakscope.group(n, s) for n, s in ((64, "a"), (96, "b"), (32, "c"))]
        self.assertEqual(peakscope.wave_payload(groups=groups, backward_order=(2, 0, 1))["backward_order"],
                         [2, 0, 1])
        for order in ([0, 1], [0, 1, 1], [1, 2, 3], [0, 1, 2, 3], [0.0, 1, 2], [True, 0, 2]):
            with self.subTest(order=order), self.assertRaisesRegex(ValueError, "not a permutation"):
                peakscope.wave_payload(groups=groups, backward_order=order)
        with self.assertRaises(TypeError):
            peakscope.wave_payload(groups=groups, backward_order=2)

    def test_the_count_form_is_unchanged(self):
        self.assertEqual(json.dumps(peakscope.wave_payload(2047, ["a"], 1, True)),
                         '{"tokens": 2047, "slots": ["a"], "groups": 1, "cold": true}')
        self.assertEqual(peakscope.wave_payload(8, ("a", "b"), 2.0, sequence_lengths=[3, 5]),
                         {"tokens": 8, "slots": ["a", "b"], "groups": 2, "cold": False, "sequence_lengths": [3, 5]})
        self.assertEqual(peakscope.wave_payload(8, ("a", "b"), 2, backward_order=[1, 0])["backward_order"], [1, 0])
        for groups in (0, -1, 1.5, True):
            with self.subTest(groups=groups), self.assertRaises((TypeError, ValueError)):
                peakscope.wave_payload(8, groups=groups)


class WaveRangeTest(unittest.TestCase):
    def setUp(self):
        self.recording = peakscope.set_backend("recording")

    def tearDown(self):
        peakscope.set_backend("none")

    def test_wave_marks_the_list_form(self):
        groups = [peakscope.group(128, "a", [64, 64]), peakscope.group(256, "b")]
        with peakscope.wave(groups=groups, cold=True, backward_order=[1, 0]):
            pass
        ops = [(op, name) for _, op, name, _ in self.recording.events]
        self.assertEqual(ops, [("push", "wave"), ("mark", "wave"), ("pop", "wave")])
        self.assertEqual(json.loads(self.recording.events[1][3]),
                         peakscope.wave_payload(groups=groups, cold=True, backward_order=[1, 0]))

    def test_a_bad_payload_opens_no_range(self):
        with self.assertRaises(ValueError):
            with peakscope.wave(tokens=5, groups=[peakscope.group(4, "a")]):
                self.fail("the wave's body ran")
        self.assertEqual(self.recording.events, [])
        self.assertEqual(self.recording.stack(), [])


if __name__ == "__main__":
    unittest.main()
