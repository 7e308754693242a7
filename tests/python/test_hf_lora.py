"""workloads/torch/hf_lora.py: what runs without a GPU.

Its packing runs anywhere; the workload itself needs transformers and peft,
which the CPU machine usually lacks: then it must say so and exit 3 (the run
on the CPU is skipped with that reason), and tools/gpu-check runs it on the GPU.
"""

import importlib.util
import json
import os
import subprocess
import sys
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "workloads", "torch", "hf_lora.py")
sys.path.insert(0, os.path.dirname(SCRIPT))

import hf_lora  # noqa: E402  (imports nothing heavy at module level)

HAVE_HF = all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers", "peft"))
TINY = ["--steps", "2", "--tokens", "16,48", "--documents", "3", "--layers", "2", "--hidden", "32", "--heads", "4",
        "--kv-heads", "2", "--intermediate", "48", "--vocab", "64", "--rank", "4", "--device", "cpu"]


def run(arguments):
    environment = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PEAKSCOPE_BACKEND")}
    return subprocess.run([sys.executable, SCRIPT] + arguments, capture_output=True, text=True, timeout=600,
                          env=environment)


class PackingTest(unittest.TestCase):
    def test_documents_cover_the_wave(self):
        for tokens, documents in ((16, 3), (8192, 4), (5, 4), (2, 1)):
            lengths = hf_lora.document_lengths(tokens, documents)
            self.assertEqual(sum(lengths), tokens)
            self.assertLessEqual(max(lengths) - min(lengths), 1)
            self.assertGreaterEqual(min(lengths), 2 if tokens >= 2 else 1)

    def test_arguments(self):
        arguments = hf_lora.parse_arguments(["--tokens", "8,32", "--allocator", "native-tensors"])
        self.assertEqual(arguments.tokens, [8, 32])
        self.assertEqual(arguments.allocator, "native-tensors")


class WorkloadTest(unittest.TestCase):
    def test_missing_dependencies_are_named(self):
        if HAVE_HF:
            self.skipTest("transformers and peft are installed here")
        result = run(TINY)
        self.assertEqual(result.returncode, hf_lora.EXIT_MISSING, result.stderr)
        self.assertIn("needs torch, transformers and peft", result.stderr)

    def test_runs_on_the_cpu(self):
        if not HAVE_HF:
            self.skipTest("transformers or peft not installed: hf_lora.py runs on the GPU machine (tools/gpu-check)")
        result = run(TINY)
        self.assertEqual(result.returncode, 0, result.stderr)
        waves = [json.loads(line.split(" ", 2)[2]) for line in result.stdout.splitlines()
                 if line.startswith("hf_lora wave ")]
        self.assertEqual([(w["tokens"], w["cold"]) for w in waves], [(16, True), (48, True), (16, False), (48, False)])
        self.assertEqual(waves[0]["sequence_lengths"], [6, 5, 5])


if __name__ == "__main__":
    unittest.main()
