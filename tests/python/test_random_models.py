"""The random held-out models (workloads/heldout/random_models.py): what a seed draws, and that it trains."""

import collections
import os
import sys
import unittest

import torch

from tests.python import support

sys.path.append(os.path.join(support.REPO, "workloads", "heldout"))

import random_models  # noqa: E402

SEEDS = range(1, 41)


def totals(waves):
    return [sum(lengths) for lengths in waves]


class DrawTest(unittest.TestCase):
    def test_a_seed_draws_the_same_model_and_weights(self):
        for seed in (1, 7, 23):
            self.assertEqual(random_models.draw(seed), random_models.draw(seed))
            first = random_models.build_model(random_models.draw(seed)).state_dict()
            second = random_models.build_model(random_models.draw(seed)).state_dict()
            self.assertEqual(first.keys(), second.keys())
            for name in first:
                self.assertTrue(torch.equal(first[name], second[name]), name)
        self.assertNotEqual(random_models.draw(1), random_models.draw(2))

    def test_forty_seeds_cover_every_choice(self):
        seen = collections.defaultdict(set)
        for seed in SEEDS:
            spec = random_models.draw(seed)
            for field in ("attention", "mlp", "norm", "threads", "accumulate", "tied"):
                seen[field].add(getattr(spec, field))
        self.assertEqual(seen["attention"], set(random_models.ATTENTION_KINDS))
        self.assertEqual(seen["mlp"], set(random_models.MLP_KINDS))
        self.assertEqual(seen["norm"], set(random_models.NORM_KINDS))
        self.assertEqual(seen["threads"], {1, 2})
        self.assertEqual(seen["accumulate"], {True, False})
        self.assertEqual(seen["tied"], {True, False})

    def test_the_seeds_make_test_runs_keep_their_kinds(self):
        """tests/cli/test_random_heldout.sh picks seeds for what they draw."""
        packed, gqa, mlp_only = (random_models.draw(seed) for seed in (30, 8, 11))
        self.assertEqual((packed.attention, packed.accumulate), ("packed", True))
        self.assertEqual((gqa.attention, gqa.threads, gqa.accumulate), ("gqa", 2, True))
        self.assertEqual((mlp_only.attention, mlp_only.accumulate), ("none", False))

    def test_shapes_are_within_their_ranges(self):
        for seed in SEEDS:
            spec = random_models.draw(seed)
            with self.subTest(seed=seed):
                self.assertTrue(2 <= spec.layers <= 8)
                self.assertTrue(32 <= spec.hidden <= 160)
                self.assertTrue(2 <= spec.rank <= 16)
                self.assertTrue(spec.adapters)
                if spec.attention == "none":
                    self.assertFalse(set(spec.adapters) & set(random_models.ATTENTION_ADAPTERS))
                else:
                    self.assertTrue(1 <= spec.heads <= 8)
                    self.assertEqual(spec.hidden % spec.heads, 0)
                    self.assertEqual(spec.heads % spec.kv_heads, 0)
                    self.assertEqual(spec.kv_heads < spec.heads, spec.attention == "gqa")
                if spec.mlp != "swiglu":
                    self.assertNotIn("gate", spec.adapters)
                self.assertIn(f"seed {seed}: ", spec.describe())
                self.assertNotIn("\n", spec.describe())

    def test_check_sizes_lie_inside_and_beyond_the_calibrated_ones(self):
        for seed in SEEDS:
            spec = random_models.draw(seed)
            # A packed model's calibration ends with the README's three recipe
            # waves (test_packings).
            drawn = spec.calibration[:3]
            calibration, check = totals(drawn), totals(spec.check)
            with self.subTest(seed=seed, calibration=calibration, check=check):
                self.assertEqual(len(spec.calibration), 6 if spec.packed else 3)
                self.assertEqual(len(check), 6)
                self.assertEqual(calibration, sorted(calibration))
                for smaller, larger in zip(calibration, calibration[1:]):
                    self.assertGreaterEqual(larger / smaller, 1.5)
                self.assertGreaterEqual(calibration[0], 32)
                self.assertLessEqual(calibration[-1], 256)
                self.assertFalse(set(check) & set(calibration), "a check size was calibrated")
                inside = [n for n in check if calibration[0] < n < calibration[-1]]
                beyond = [n for n in check if n > calibration[-1]]
                self.assertGreaterEqual(len(inside), 2)
                self.assertGreaterEqual(len(beyond), 2)
                self.assertLessEqual(max(check), 3 * calibration[-1])

    def test_packings(self):
        packed = [random_models.draw(seed) for seed in SEEDS if random_models.draw(seed).packed]
        self.assertTrue(packed)
        for spec in [random_models.draw(seed) for seed in SEEDS]:
            with self.subTest(seed=spec.seed):
                waves = spec.calibration + spec.check
                if not spec.packed:
                    self.assertTrue(all(len(lengths) == 1 for lengths in waves))
                    continue
                self.assertTrue(all(min(lengths) >= random_models.SHORTEST_SEQUENCE for lengths in waves))
                drawn, recipe = spec.calibration[:3], spec.calibration[3:]
                self.assertTrue(all(len(lengths) >= 2 for lengths in drawn))
                # The recipe: the middle size as one sequence, the largest as
                # many short ones, as even as it goes, and one sequence as long
                # as the packer's longest.
                self.assertEqual(recipe[0], (sorted(totals(drawn))[1],))
                longest = max(max(lengths) for lengths in drawn)
                self.assertEqual(recipe[2], (random_models.PACKER_LONGEST * longest,))
                self.assertEqual(len(recipe[1]), min(random_models.MOST_CALIBRATED_SEQUENCES,
                                                     sum(recipe[1]) // random_models.SHORTEST_SEQUENCE))
                self.assertLessEqual(max(recipe[1]) - min(recipe[1]), 1)
                self.assertLessEqual(max(max(lengths) for lengths in spec.check), recipe[2][0])
                counts = {len(lengths) for lengths in drawn}
                self.assertTrue({len(lengths) for lengths in spec.check} - counts,
                                "no check wave packs another number of sequences")


class ModelTest(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(1)

    def first_seed(self, **choices):
        for seed in SEEDS:
            spec = random_models.draw(seed)
            if all(getattr(spec, k) == v for k, v in choices.items()):
                return spec
        self.fail(f"no seed in {SEEDS} with {choices}")

    def test_every_kind_trains_its_adapters_only(self):
        specs = [self.first_seed(attention=kind) for kind in random_models.ATTENTION_KINDS]
        specs += [self.first_seed(mlp="swiglu"), self.first_seed(tied=False), self.first_seed(norm="layer")]
        for spec in specs:
            with self.subTest(spec=spec.describe()):
                model = random_models.build_model(spec)
                lengths = (5, 7) if spec.packed else (12,)
                ids, targets = random_models.batch(spec, 0, 0, lengths)
                loss = model(ids, targets, lengths)
                self.assertTrue(torch.isfinite(loss))
                loss.backward()
                for name, parameter in model.named_parameters():
                    if parameter.requires_grad:
                        self.assertIn("lora_", name)
                        self.assertIsNotNone(parameter.grad, name)
                    else:
                        self.assertIsNone(parameter.grad, name)
                self.assertTrue(any(p.requires_grad for p in model.parameters()))
                if spec.tied:
                    self.assertIs(model.lm_head.weight, model.embedding.weight)

    def test_packed_attention_keeps_sequences_apart(self):
        """A packed wave attends as its sequences would each alone, and causally."""
        spec = self.first_seed(attention="packed")
        attention = random_models.build_model(spec).layers[0].attention
        generator = torch.Generator().manual_seed(3)
        x = torch.randn(12, spec.hidden, generator=generator)
        with torch.no_grad():
            packed = attention(x, [5, 7])
            alone = torch.cat([attention(x[:5], [5]), attention(x[5:], [7])])
            self.assertTrue(torch.allclose(packed, alone, atol=1e-6))
            later = x.clone()
            later[-1] += 10.0  # the last token reaches no earlier token
            self.assertTrue(torch.allclose(attention(later, [5, 7])[:-1], packed[:-1], atol=1e-6))

    def test_grouped_query_attention_shares_key_value_heads(self):
        spec = self.first_seed(attention="gqa")
        attention = random_models.build_model(spec).layers[0].attention
        self.assertEqual(attention.k.weight.shape[0], spec.kv_heads * spec.hidden // spec.heads)
        x = torch.randn(9, spec.hidden, generator=torch.Generator().manual_seed(4))
        with torch.no_grad():
            self.assertEqual(attention(x, [9]).shape, (9, spec.hidden))


if __name__ == "__main__":
    unittest.main()
