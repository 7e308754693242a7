"""A test class that records one command under `peakscope record` and reads its report (no torch needed)."""

import json
import os
import subprocess
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PSC_BUILD_DIR", os.path.join(REPO, "build"))
CLI = os.path.join(BUILD, "peakscope")
PRELOAD = os.path.join(BUILD, "libpeakscope_preload.so")


class RecordedTraceTest(unittest.TestCase):
    """Records `command` once per class into a temporary folder, then `report --json` of the trace.

    `record_and_report` is called from a subclass' setUpClass; `report_json` asserts both succeeded."""

    @classmethod
    def record_and_report(cls, name, record_options, command, environment, timeout=120):
        cls.directory = tempfile.TemporaryDirectory()
        cls.trace = os.path.join(cls.directory.name, name)
        cls.record = subprocess.run([CLI, "record", *record_options, "-o", cls.trace, "--", *command],
                                    capture_output=True, text=True, env=environment, timeout=timeout)
        cls.report = subprocess.run([CLI, "report", cls.trace, "--json"], capture_output=True, text=True,
                                    timeout=120)

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def report_json(self):
        self.assertEqual(self.record.returncode, 0, self.record.stderr)
        self.assertEqual(self.report.returncode, 0, self.report.stderr)
        return json.loads(self.report.stdout)
