"""Random held-out models with several gradient groups (random_models.draw_groups,
random_step.py --groups): what a seed draws, that it leaves draw() alone, and
that a multi-group wave trains every slot and marks the list-form payload."""

import collections
import io
import json
import os
import sys
import unittest
import unittest.mock

import torch

from tests.python import support

sys.path.append(os.path.join(support.REPO, "workloads", "heldout"))

import peakscope  # noqa: E402
import random_models  # noqa: E402
import random_step  # noqa: E402

SEEDS = range(1, 41)


def group_sizes(waves):
    return {sum(lengths) for wave in waves for _, lengths in wave.groups}


class DrawGroupsTest(unittest.TestCase):
    def test_old_seeds_draw_what_they_drew(self):
        """draw() is unchanged by the multi-group mode (its own random stream)."""
        expected = {
            8: ("seed 8: 3L h40 i88 gqa 8h/kv2 swiglu rms lora{gate,down} r5 v269 untied t2 accum",
                "calibrate 44,88,154; check 70,100,110,184,344,388"),
            30: ("seed 30: 4L h133 i368 packed 1h gelu ln lora{q,o} r2 v331 untied t1 accum",
                 # The drawn packings and checks as they always were; the
                 # README recipe's three waves (86, 194 as eight, and one
                 # sequence as long as the packer's longest, twice 173) after them.
                 "calibrate 16+21,36+19+18+13,173+21,86,25+25+24+24+24+24+24+24,346; "
                 "check 14+11+25+12+9,28+74+27,138,82+95+86,328,"
                 "154+44+36+126+177"),
            11: ("seed 11: 6L h80 i188 no-attn swiglu rms lora{gate,up,down} r9 v219 tied t1 step-per-wave",
                 "calibrate 44,104,221; check 84,86,188,225,489,561"),
        }
        for seed, (model, waves) in expected.items():
            spec = random_models.draw(seed)
            self.assertEqual((spec.describe(), spec.describe_waves()), (model, waves))

    def test_a_seed_draws_the_same_groups(self):
        for seed in (1, 5, 17):
            self.assertEqual(random_models.draw_groups(seed), random_models.draw_groups(seed))
        self.assertNotEqual(random_models.draw_groups(1), random_models.draw_groups(2))

    def test_forty_seeds_cover_every_kind(self):
        seen = collections.defaultdict(set)
        for seed in SEEDS:
            spec = random_models.draw_groups(seed)
            seen["attention"].add(spec.model.attention)
            seen["slots"].add(len(spec.slots))
            seen["accumulate"].add(spec.model.accumulate)
            seen["threads"].add(spec.model.threads)
        self.assertEqual(seen["attention"], set(random_models.ATTENTION_KINDS))
        self.assertEqual(seen["slots"], {2, 3})
        self.assertEqual(seen["accumulate"], {True, False})
        self.assertEqual(seen["threads"], {1, 2})

    def test_waves(self):
        for seed in SEEDS:
            spec = random_models.draw_groups(seed)
            with self.subTest(seed=seed, waves=spec.describe_waves()):
                self.assertTrue(2 <= spec.model.layers <= 4)
                self.assertLessEqual(spec.model.hidden, random_models.GROUP_WIDEST)
                orders = set()
                for wave in spec.calibration + spec.check:
                    # one group per slot, in slot order; backward order a permutation
                    self.assertEqual(tuple(slot for slot, _ in wave.groups), spec.slots)
                    self.assertEqual(sorted(wave.backward_order), list(range(len(spec.slots))))
                    orders.add(wave.backward_order)
                    for _, lengths in wave.groups:
                        self.assertTrue(all(n >= 1 for n in lengths))
                        if not spec.packed:
                            self.assertEqual(len(lengths), 1)
                        else:
                            self.assertTrue(min(lengths) >= random_models.SHORTEST_SEQUENCE)
                longest_one = ()  # the recipe's sequence as long as the packer's longest
                if spec.packed:
                    # the drawn packings, then the README recipe's groups of one
                    # sequence (a middle size, and the packer's longest) and of
                    # many short ones, each waiting once
                    drawn, recipe = spec.calibration[:-3], spec.calibration[-3:]
                    self.assertTrue(all(len(lengths) >= 2 for w in drawn for _, lengths in w.groups))
                    one, many, longest_one = spec.model.calibration[-3:]
                    self.assertEqual(len(one), 1)
                    self.assertEqual(len(longest_one), 1)
                    self.assertGreaterEqual(len(many), 2 * max(len(lengths) for w in drawn for _, lengths in w.groups))
                    self.assertEqual(longest_one[0], random_models.PACKER_LONGEST *
                                     max(max(lengths) for w in drawn for _, lengths in w.groups))
                    self.assertLessEqual(max(max(lengths) for w in spec.check for _, lengths in w.groups),
                                         longest_one[0])
                    waiting = {wave.groups[g][1] for wave in recipe for g in wave.backward_order[1:]}
                    self.assertEqual(waiting, {one, many, longest_one})
                    self.assertEqual({lengths for w in spec.single[-3 * len(spec.slots):] for _, lengths in w.groups},
                                     {one, many, longest_one})
                forward, reverse = tuple(range(len(spec.slots))), tuple(reversed(range(len(spec.slots))))
                self.assertTrue({forward, reverse} <= orders, "both backward orders")
                # equal and unequal groups, in calibration and in check
                for waves in (spec.calibration, spec.check):
                    self.assertTrue(any(len(set(w.group_tokens())) == 1 for w in waves))
                    self.assertTrue(any(len(set(w.group_tokens())) > 1 for w in waves))
                # the sizes drawn (the recipe's longest sequence is a size of its own)
                calibrated = group_sizes(spec.calibration[:-3] if spec.packed else spec.calibration)
                checked = group_sizes(spec.check)
                self.assertEqual(len(calibrated), 3)
                self.assertFalse(calibrated & checked, "a check group size was calibrated")
                self.assertTrue(any(n > max(calibrated) for n in checked))
                self.assertTrue(any(min(calibrated) < n < max(calibrated) for n in checked))
                self.assertLessEqual(max(checked), 3 * max(calibrated))
                self.assertGreater(max(checked), 2.5 * max(calibrated))
                # the README's recipe: every calibrated size waits for another
                # group's backward in some calibration wave
                waited = {sum(wave.groups[g][1]) for wave in spec.calibration for g in wave.backward_order[1:]}
                self.assertEqual(waited, calibrated | ({sum(longest_one)} if spec.packed else set()))
                # single: one group per wave, every slot at every calibrated size
                self.assertTrue(all(len(w.groups) == 1 and w.backward_order == (0,) for w in spec.single))
                self.assertEqual({(w.groups[0][0], w.tokens) for w in spec.single},
                                 {(slot, n) for slot in spec.slots
                                  for n in calibrated | ({sum(longest_one)} if spec.packed else set())})

    def test_every_wave_makes_a_valid_payload(self):
        for seed in SEEDS:
            spec = random_models.draw_groups(seed)
            for wave in spec.calibration + spec.single + spec.check:
                groups = [peakscope.group(sum(lengths), slot, list(lengths) if len(lengths) > 1 else None)
                          for slot, lengths in wave.groups]
                payload = peakscope.wave_payload(groups=groups, cold=True,
                                                 backward_order=list(wave.backward_order))
                self.assertEqual(payload["tokens"], wave.tokens)
                self.assertEqual(payload["slots"], [slot for slot, _ in wave.groups])


class SlotsTest(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(1)
        self.recording = peakscope.set_backend("recording")

    def tearDown(self):
        peakscope.set_backend("none")

    def spec(self, **choices):
        for seed in SEEDS:
            spec = random_models.draw_groups(seed)
            if all(getattr(spec.model, k) == v for k, v in choices.items()) and len(spec.slots) == 3:
                return spec
        self.fail(f"no three-slot seed with {choices}")

    def test_slots_share_the_frozen_base_and_own_their_adapters(self):
        spec = self.spec(tied=True)
        models = random_models.build_slots(spec)
        self.assertEqual(list(models), list(spec.slots))
        first = models[spec.slots[0]]
        for slot in spec.slots[1:]:
            other = models[slot]
            self.assertIs(other.lm_head.weight, other.embedding.weight)
            for (name, p), (_, q) in zip(first.named_parameters(), other.named_parameters()):
                if p.requires_grad:
                    self.assertNotEqual(p.data_ptr(), q.data_ptr(), name)
                    self.assertFalse(torch.equal(p, q), name)
                else:
                    self.assertEqual(p.data_ptr(), q.data_ptr(), name)

    def test_a_multi_group_wave_trains_every_slot_in_its_backward_order(self):
        spec = self.spec(attention="packed")
        models = random_models.build_slots(spec)
        wave = random_models.GroupWave((("a", (5, 7)), ("b", (9,)), ("c", (4, 4))), (2, 0, 1))
        started = []  # the slot whose backward reached its final norm, in order

        def watch(slot):
            def hook(module, args, output):
                output.register_hook(lambda grad: started.append(slot))
            return hook

        for slot, model in models.items():
            model.final_norm.register_forward_hook(watch(slot))
        out = io.StringIO()
        random_step.run_group_wave(models, spec, 0, 0, wave, set(), out)
        self.assertEqual(started, ["c", "a", "b"])  # one backward call per group, in its order
        for model in models.values():
            for parameter in model.adapter_parameters():
                self.assertIsNotNone(parameter.grad)
        marks = [payload for _, op, name, payload in self.recording.events if op == "mark" and name == "wave"]
        self.assertEqual(json.loads(marks[0]), {
            "tokens": 29, "slots": ["a", "b", "c"],
            "groups": [{"tokens": 12, "slot": "a", "sequence_lengths": [5, 7]}, {"tokens": 9, "slot": "b"},
                       {"tokens": 8, "slot": "c", "sequence_lengths": [4, 4]}],
            "cold": True, "backward_order": [2, 0, 1]})
        self.assertIn("tokens    29 groups a:5+7,b:9,c:4+4 bw 2,0,1 cold yes", out.getvalue())

    def test_the_step_runs_each_set_of_waves(self):
        for seed, waves in ((3, "single"), (2, "check")):
            out = io.StringIO()
            arguments = random_step.parse_arguments(["--seed", str(seed), "--groups", "--waves", waves,
                                                     "--steps", "1", "--describe"])
            self.assertEqual(random_step.run(arguments, out), 0)
            self.assertIn(f"seed {seed} groups:", out.getvalue())
        with self.assertRaises(SystemExit), unittest.mock.patch("sys.stderr", io.StringIO()):
            random_step.parse_arguments(["--seed", "1", "--waves", "single"])


if __name__ == "__main__":
    unittest.main()
