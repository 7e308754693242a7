"""peakscope.use_pluggable_allocator(): finding the recorder library and handing
it to PyTorch's CUDAPluggableAllocator with the entry points' names.

No GPU here: torch.cuda.is_available and the two torch.cuda.memory functions
are patched (created when this PyTorch is older than 2.0 and lacks them). The
library lookup through /proc/self/maps runs for real in a child process that
has the recorder preloaded.
"""

import os
import subprocess
import sys
import tempfile
import types
import unittest
from unittest import mock

from tests.python import support
import peakscope
import torch

PRELOAD = os.path.join(os.environ.get("PSC_BUILD_DIR", os.path.join(support.REPO, "build")),
                       "libpeakscope_preload.so")


class PluggableAllocatorTest(unittest.TestCase):
    def setUp(self):
        environment = mock.patch.dict(os.environ)
        environment.start()
        self.addCleanup(environment.stop)
        os.environ.pop("PEAKSCOPE_LIBRARY", None)

    def test_hands_pytorch_the_library_and_both_entry_points(self):
        made = []
        with mock.patch.object(torch.cuda, "is_available", return_value=True), \
                mock.patch.object(torch.cuda.memory, "CUDAPluggableAllocator", create=True,
                                  side_effect=lambda *args: made.append(args) or "allocator"), \
                mock.patch.object(torch.cuda.memory, "change_current_allocator", create=True) as change:
            result = peakscope.use_pluggable_allocator(library="/opt/x/libpeakscope_preload.so")
        self.assertEqual(made, [("/opt/x/libpeakscope_preload.so", "psc_torch_malloc", "psc_torch_free")])
        change.assert_called_once_with("allocator")
        self.assertEqual(result, "allocator")

    def test_too_late_says_so_and_names_the_alternative(self):
        failure = RuntimeError("Can't swap an already initialized allocator")
        with mock.patch.object(torch.cuda, "is_available", return_value=True), \
                mock.patch.object(torch.cuda.memory, "CUDAPluggableAllocator", create=True, return_value="allocator"), \
                mock.patch.object(torch.cuda.memory, "change_current_allocator", create=True, side_effect=failure):
            with self.assertRaises(RuntimeError) as caught:
                peakscope.use_pluggable_allocator(library="/x/libpeakscope_preload.so")
        self.assertIn("before the first CUDA allocation", str(caught.exception))
        self.assertIn("backend:cudaMallocAsync", str(caught.exception))
        self.assertIs(caught.exception.__cause__, failure)

    def test_without_cuda_or_without_the_library_it_refuses(self):
        with mock.patch.object(torch.cuda, "is_available", return_value=False):
            with self.assertRaisesRegex(RuntimeError, "needs CUDA"):
                peakscope.use_pluggable_allocator(library="/x/libpeakscope_preload.so")
        with mock.patch.object(torch.cuda, "is_available", return_value=True), \
                mock.patch.object(torch.cuda.memory, "CUDAPluggableAllocator", create=True), \
                mock.patch.object(torch.cuda.memory, "change_current_allocator", create=True), \
                mock.patch("peakscope.cuda.preload_library_path", return_value=None):
            with self.assertRaisesRegex(RuntimeError, "not loaded in this process"):
                peakscope.use_pluggable_allocator()
        with mock.patch.object(torch.cuda, "is_available", return_value=True), \
                mock.patch.object(torch.cuda, "memory", types.SimpleNamespace()):
            with self.assertRaisesRegex(RuntimeError, "needs PyTorch 2.0 or newer"):
                peakscope.use_pluggable_allocator(library="/x/libpeakscope_preload.so")

    def test_library_path_from_the_environment_then_the_process_maps(self):
        with tempfile.NamedTemporaryFile("w", suffix=".maps") as maps:
            maps.write("7f00-7f01 r-xp 00000000 08:01 42 /usr/lib/libc.so.6\n"
                       "7f02-7f03 r-xp 00000000 08:01 43 /opt/peak scope/libpeakscope_preload.so\n"
                       "7f04-7f05 rw-p 00000000 00:00 0 \n")
            maps.flush()
            self.assertEqual(peakscope.preload_library_path(maps.name), "/opt/peak scope/libpeakscope_preload.so")
            os.environ["PEAKSCOPE_LIBRARY"] = "/explicit/lib.so"
            self.assertEqual(peakscope.preload_library_path(maps.name), "/explicit/lib.so")
        os.environ.pop("PEAKSCOPE_LIBRARY")
        self.assertIsNone(peakscope.preload_library_path("/nonexistent/maps"))

    @unittest.skipUnless(os.path.exists(PRELOAD), "build/libpeakscope_preload.so not built")
    def test_a_preloaded_process_finds_its_recorder(self):
        with tempfile.TemporaryDirectory() as scratch:
            env = dict(os.environ, LD_PRELOAD=PRELOAD, PEAKSCOPE_OUTPUT=os.path.join(scratch, "t.pstrace"),
                       PEAKSCOPE_QUIET="1", PYTHONPATH=os.path.join(support.REPO, "python"))
            env.pop("PEAKSCOPE_LIBRARY", None)
            code = "from peakscope import cuda; print(cuda.preload_library_path())"
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        self.assertEqual(os.path.realpath(out.stdout.strip()), os.path.realpath(PRELOAD))


if __name__ == "__main__":
    unittest.main()
