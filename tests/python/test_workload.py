"""The embedded workload: its attention, its sizing, and a small run end to end."""

import contextlib
import io
import json
import os
import subprocess
import sys
import unittest

import torch

from tests.python import support
from tests.python.support import balanced, nesting, pushes
import lora_model
import lora_step
import peakscope

SMALL = ["--steps", "2", "--tokens", "4,9", "--layers", "2", "--hidden", "16", "--heads", "2",
         "--intermediate", "16", "--rank", "4", "--vocab", "32", "--attention-block", "4"]


class AttentionTest(unittest.TestCase):
    def inputs(self, heads=2, tokens=11, dim=4):
        generator = torch.Generator().manual_seed(5)
        return [torch.randn(heads, tokens, dim, generator=generator, dtype=torch.float64, requires_grad=True)
                for _ in range(3)]

    def test_blockwise_matches_materialised_attention(self):
        q, k, v = self.inputs()
        blockwise = lora_model.BlockwiseCausalAttention.apply(q, k, v, 4)  # 11 tokens: a short last block
        reference = lora_model.reference_attention(q, k, v)
        self.assertTrue(torch.allclose(blockwise, reference, atol=1e-12))
        grad = torch.randn_like(reference)
        got = torch.autograd.grad(blockwise, (q, k, v), grad)
        want = torch.autograd.grad(reference, (q, k, v), grad)
        for a, b in zip(got, want):
            self.assertTrue(torch.allclose(a, b, atol=1e-10))

    def test_gradcheck(self):
        q, k, v = self.inputs(tokens=5)
        self.assertTrue(torch.autograd.gradcheck(
            lambda q, k, v: lora_model.BlockwiseCausalAttention.apply(q, k, v, 2), (q, k, v)))

    def test_causal(self):
        q, k, v = self.inputs()
        out = lora_model.BlockwiseCausalAttention.apply(q, k, v, 4)
        v2 = v.detach().clone()
        v2[:, -1] += 100.0  # the last token's value cannot reach earlier tokens
        out2 = lora_model.BlockwiseCausalAttention.apply(q, k, v2, 4)
        self.assertTrue(torch.equal(out[:, :-1], out2[:, :-1]))
        self.assertFalse(torch.equal(out[:, -1], out2[:, -1]))


class ModelTest(unittest.TestCase):
    def test_only_adapters_train(self):
        model = support.tiny_model(2)
        trainable = {name for name, p in model.named_parameters() if p.requires_grad}
        self.assertTrue(trainable)
        self.assertTrue(all(name.endswith(("lora_a", "lora_b")) for name in trainable))
        adapted = {name.split(".")[2] for name in trainable}
        self.assertEqual(adapted, set(lora_model.ADAPTED))

    def test_checkpointing_changes_no_gradient(self):
        results = []
        for checkpointing in (True, False):
            model = support.tiny_model(2, checkpointing=checkpointing, seed=4)
            ids, targets = support.tokens(7)
            model(ids, targets).backward()
            results.append([p.grad for p in model.adapter_parameters()])
        for a, b in zip(*results):
            self.assertTrue(torch.allclose(a, b, atol=1e-6))

    def test_default_sizes_put_short_waves_on_adapters_and_long_waves_on_boundaries(self):
        arguments = lora_step.parse_arguments([])
        model, _ = lora_step.build(arguments)
        adapter = sum(lora_step.bytes_per_layer(model))
        boundaries = {t: t * arguments.hidden * lora_step.FLOAT_BYTES * arguments.layers
                      for t in arguments.tokens}
        self.assertGreater(adapter, 5 * boundaries[min(arguments.tokens)])
        self.assertGreater(boundaries[max(arguments.tokens)], adapter)
        # Every adapter gradient stays visible to `record --host` even under a
        # 4 KiB floor (--host-min-bytes 4096), for long host-only traces.
        smallest = min(p.numel() for p in model.adapter_parameters()) * lora_step.FLOAT_BYTES
        self.assertGreaterEqual(smallest, 4096)
        self.assertGreaterEqual(min(arguments.tokens) * arguments.hidden * lora_step.FLOAT_BYTES, 4096)


class WorkloadRunTest(unittest.TestCase):
    def setUp(self):
        self.recording = peakscope.set_backend("recording")

    def tearDown(self):
        peakscope.set_backend("none")

    def run_small(self):
        out = io.StringIO()
        waves = lora_step.run(lora_step.parse_arguments(SMALL), out=out)
        return waves, out.getvalue()

    def test_waves_payloads_and_optimizer(self):
        waves, summary = self.run_small()
        events = self.recording.events
        marks = [json.loads(p) for _, op, name, p in events if op == "mark" and name == "wave"]
        self.assertEqual([(m["tokens"], m["cold"]) for m in marks], [(4, True), (9, True), (4, False), (9, False)])
        self.assertTrue(all(m["slots"] == ["a"] and m["groups"] == 1 for m in marks))
        names = pushes(events)
        self.assertEqual(names.count("wave"), 4)
        self.assertEqual(names.count("optimizer/step"), 2)
        self.assertEqual(names.count("optimizer/zero_grad"), 2)
        self.assertEqual(names.count("backward/layer.0"), 4)
        self.assertEqual(names.count("recompute/layer.1"), 4)
        for _, name, parent in nesting(events):
            if name.startswith("optimizer/") or name == "wave":
                self.assertIsNone(parent, name)
        for i, (_, op, name, _) in enumerate(events):  # the payload follows its push at once
            if op == "push" and name == "wave":
                self.assertEqual(events[i + 1][1:3], ("mark", "wave"))
        self.assertTrue(balanced(events))
        self.assertEqual(len(waves), 4)
        self.assertIn("4 waves in 2 steps", summary)

    def test_deterministic(self):
        first, _ = self.run_small()
        self.recording.clear()
        second, _ = self.run_small()
        self.assertEqual([w[4] for w in first], [w[4] for w in second])
        self.assertTrue(all(torch.isfinite(torch.tensor(w[4])) for w in first))

    def test_command_line(self):
        environment = dict(os.environ, PEAKSCOPE_BACKEND="none")
        script = os.path.join(support.REPO, "workloads", "torch", "lora_step.py")
        child = subprocess.run([sys.executable, script] + SMALL, capture_output=True, text=True,
                               env=environment, timeout=120)
        self.assertEqual(child.returncode, 0, child.stderr)
        self.assertIn("4 waves in 2 steps", child.stdout)
        self.assertIn("annotations: none", child.stdout)

    def test_bad_arguments_exit_2(self):
        for bad in (["--tokens", "x"], ["--tokens", "1,8"], ["--steps", "0"], ["--leak-bytes", "-4"],
                    ["--leak-bytes", "6"]):
            with contextlib.redirect_stderr(io.StringIO()) as stderr, self.assertRaises(SystemExit) as exit:
                lora_step.parse_arguments(bad)
            self.assertEqual(exit.exception.code, 2)
            self.assertIn(bad[0], stderr.getvalue())


if __name__ == "__main__":
    unittest.main()
