"""Backend choice: explicit, by environment, and automatic (C API found or not).

The C API path is exercised against a stand-in library built here from C,
reached through PEAKSCOPE_LIBRARY (in this process) and through LD_PRELOAD (in
a child process), the two ways the recorder's symbols reach a process.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
import warnings

from tests.python import support
import peakscope
import torch

FAKE_CAPI = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>

static FILE* out(void) {
  static FILE* f;
  if (!f) f = fopen(getenv("FAKE_CAPI_LOG"), "w");
  return f;
}
static long tid(void) { return syscall(SYS_gettid); }
void psc_range_push(const char* name) { fprintf(out(), "%ld push %s\n", tid(), name); }
void psc_range_pop(void) { fprintf(out(), "%ld pop\n", tid()); }
void psc_mark(const char* name, const char* payload) {
  fprintf(out(), "%ld mark %s %s\n", tid(), name, payload ? payload : "(null)");
}
void psc_flush(void) { fflush(out()); }
int psc_api_version(void) { return FAKE_VERSION; }
"""

CHILD = textwrap.dedent("""
    import sys, warnings
    sys.path.insert(0, sys.argv[1])
    warnings.simplefilter("always")
    import peakscope
    with warnings.catch_warnings(record=True) as caught:
        with peakscope.wave(tokens=7, slots=["a"], cold=True):
            with peakscope.range("forward/layer.0"):
                pass
        peakscope.mark("note")
        peakscope.flush()
    print(peakscope.get_backend().name, len(caught))
""")

ONE_WAVE = ["push wave", 'mark wave {"tokens": 7, "slots": ["a"], "groups": 1, "cold": true}',
            "push forward/layer.0", "pop", "pop", "mark note (null)"]


def _annotate_once():
    with peakscope.wave(tokens=7, slots=["a"], cold=True):
        with peakscope.range("forward/layer.0"):
            pass
    peakscope.mark("note")
    peakscope.flush()


def _read_log(path):
    with open(path) as f:
        return [line.split(" ", 1) for line in f.read().splitlines()]


class NamedBackendTest(unittest.TestCase):
    def tearDown(self):
        peakscope.set_backend("none")

    def test_named_backends(self):
        self.assertIsInstance(peakscope.set_backend("none"), peakscope.NoopBackend)
        recording = peakscope.set_backend("recording")
        self.assertIs(peakscope.get_backend(), recording)
        mine = peakscope.RecordingBackend()
        self.assertIs(peakscope.set_backend(mine), mine)
        with self.assertRaises(ValueError):
            peakscope.set_backend("perfetto")

    @unittest.skipIf(torch.cuda.is_available(), "CUDA is available here")
    def test_nvtx_needs_cuda(self):
        with self.assertRaises(peakscope.BackendUnavailable):
            peakscope.set_backend("nvtx")

    def test_recording_backend_rejects_an_unbalanced_pop(self):
        with self.assertRaises(AssertionError):
            peakscope.RecordingBackend().pop()


@unittest.skipIf(torch.cuda.is_available(), "CUDA is available: the automatic choice is NVTX")
class AutomaticChoiceTest(unittest.TestCase):
    """set_backend(None) makes the next annotation choose as a fresh process would."""

    @classmethod
    def setUpClass(cls):
        if os.environ.get("LD_PRELOAD") or os.environ.get("PEAKSCOPE_LIBRARY"):
            raise unittest.SkipTest("this test process already has a library preloaded")
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            raise unittest.SkipTest("no C compiler for the stand-in C API library")
        cls.directory = tempfile.TemporaryDirectory()
        source = os.path.join(cls.directory.name, "fake_capi.c")
        with open(source, "w") as f:
            f.write(FAKE_CAPI)
        cls.libraries = {}
        for name, version in (("v1", 1), ("v2", 2), ("preload", 1)):
            library = os.path.join(cls.directory.name, f"libfake_{name}.so")
            subprocess.run([compiler, "-shared", "-fPIC", f"-DFAKE_VERSION={version}", "-o", library, source],
                           check=True, capture_output=True)
            cls.libraries[name] = library

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def setUp(self):
        self.saved_environment = dict(os.environ)
        for key in ("PEAKSCOPE_LIBRARY", "PEAKSCOPE_BACKEND", "FAKE_CAPI_LOG"):
            os.environ.pop(key, None)
        peakscope.set_backend(None)

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self.saved_environment)
        peakscope.set_backend("none")

    def choose_and_annotate(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _annotate_once()
            _annotate_once()
        return peakscope.get_backend().name, [str(w.message) for w in caught]

    def test_nothing_loaded_means_no_op_and_one_warning(self):
        name, caught = self.choose_and_annotate()
        self.assertEqual(name, "none")
        self.assertEqual(len(caught), 1)
        self.assertIn("annotations are disabled", caught[0])

    def test_backend_none_by_environment_is_silent(self):
        os.environ["PEAKSCOPE_BACKEND"] = "none"
        self.assertEqual(self.choose_and_annotate(), ("none", []))

    def test_backend_recording_by_environment(self):
        os.environ["PEAKSCOPE_BACKEND"] = "Recording"
        name, caught = self.choose_and_annotate()
        self.assertEqual((name, caught), ("recording", []))
        self.assertEqual(peakscope.get_backend().events[0][1:3], ("push", "wave"))

    def test_a_missing_library_falls_back_with_a_warning_that_names_it(self):
        os.environ["PEAKSCOPE_LIBRARY"] = os.path.join(self.directory.name, "missing.so")
        name, caught = self.choose_and_annotate()
        self.assertEqual(name, "none")
        self.assertEqual(len(caught), 1)
        self.assertIn("missing.so", caught[0])

    def test_capi_through_peakscope_library(self):
        log = os.path.join(self.directory.name, "library.log")
        os.environ.update(PEAKSCOPE_LIBRARY=self.libraries["v1"], FAKE_CAPI_LOG=log)
        self.assertEqual(self.choose_and_annotate(), ("capi", []))
        self.assertEqual(peakscope.get_backend().api_version, 1)
        lines = _read_log(log)
        self.assertEqual([rest for _, rest in lines], ONE_WAVE * 2)
        self.assertEqual({thread for thread, _ in lines}, {str(os.getpid())})  # the main thread's id

    def test_capi_version_mismatch_warns(self):
        os.environ.update(PEAKSCOPE_LIBRARY=self.libraries["v2"],
                          FAKE_CAPI_LOG=os.path.join(self.directory.name, "v2.log"))
        name, caught = self.choose_and_annotate()
        self.assertEqual(name, "capi")
        self.assertEqual(len(caught), 1)
        self.assertIn("version 2", caught[0])

    def test_capi_through_ld_preload_in_a_child(self):
        log = os.path.join(self.directory.name, "preload.log")
        environment = dict(os.environ, LD_PRELOAD=self.libraries["preload"], FAKE_CAPI_LOG=log)
        child = subprocess.run([sys.executable, "-c", CHILD, os.path.join(support.REPO, "python")],
                               env=environment, capture_output=True, text=True, timeout=120)
        self.assertEqual(child.returncode, 0, child.stderr)
        self.assertEqual(child.stdout.split(), ["capi", "0"])
        self.assertEqual([rest for _, rest in _read_log(log)], ONE_WAVE)


if __name__ == "__main__":
    unittest.main()
