"""peakscope/locate.py and `python3 -m peakscope`: where the package finds the
estimator library and the CLI, in order (the environment variable, the prefix
the package is installed under, the repository's build/, the prefix of a
peakscope on PATH), and an error that lists every path tried. Each layout is
built in a temporary folder with empty stand-ins; nothing is loaded.
"""

import os
import stat
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.path.join(REPO, "python") not in sys.path:
    sys.path.insert(0, os.path.join(REPO, "python"))

from peakscope import locate  # noqa: E402


def touch(path, executable=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("#!/bin/sh\necho \"cli $*\"\nexit 3\n" if executable else "")
    if executable:
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


class LocateTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.addCleanup(subprocess.run, ["rm", "-rf", self.root])
        environment = mock.patch.dict(os.environ, {"PATH": os.path.join(self.root, "empty")})
        environment.start()
        self.addCleanup(environment.stop)
        os.environ.pop(locate.ENV_ESTIMATOR_LIBRARY, None)
        os.environ.pop(locate.ENV_CLI, None)

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def test_installed_under_a_prefix(self):
        for packages in ("lib/python3.11/site-packages", "lib/python3/dist-packages"):
            package = self.path("prefix", packages, "peakscope")
            self.assertEqual(locate.installed_prefix(package), self.path("prefix"))
        self.assertIsNone(locate.installed_prefix(self.path("target", "peakscope")))
        package = self.path("prefix", "lib/python3/dist-packages", "peakscope")
        library = touch(self.path("prefix", "lib", locate.ESTIMATOR_LIBRARY))
        cli = touch(self.path("prefix", "bin", "peakscope"), executable=True)
        self.assertEqual(locate.estimator_library(package), library)
        self.assertEqual(locate.cli(package), cli)

    def test_the_environment_first_and_a_missing_file_named(self):
        package = self.path("prefix", "lib/python3/dist-packages", "peakscope")
        touch(self.path("prefix", "lib", locate.ESTIMATOR_LIBRARY))
        named = touch(self.path("elsewhere", locate.ESTIMATOR_LIBRARY))
        os.environ[locate.ENV_ESTIMATOR_LIBRARY] = named
        self.assertEqual(locate.estimator_library(package), named)
        os.environ[locate.ENV_ESTIMATOR_LIBRARY] = self.path("nothing.so")
        with self.assertRaises(locate.NotFound) as raised:
            locate.estimator_library(package)
        self.assertIn(self.path("nothing.so"), str(raised.exception))
        self.assertIn("$PEAKSCOPE_ESTIMATOR_LIBRARY", str(raised.exception))

    def test_the_repository_build_then_path(self):
        package = self.path("repo", "python", "peakscope")
        on_path = touch(self.path("other", "bin", "peakscope"), executable=True)
        path_library = touch(self.path("other", "lib", locate.ESTIMATOR_LIBRARY))
        os.environ["PATH"] = self.path("other", "bin")
        self.assertEqual(locate.estimator_library(package), path_library)
        self.assertEqual(locate.cli(package), on_path)
        built = touch(self.path("repo", "build", locate.ESTIMATOR_LIBRARY))
        self.assertEqual(locate.estimator_library(package), built)

    def test_not_found_lists_every_path_tried(self):
        package = self.path("prefix", "lib/python3/dist-packages", "peakscope")
        touch(self.path("other", "bin", "peakscope"), executable=True)
        os.environ["PATH"] = self.path("other", "bin")
        with self.assertRaises(locate.NotFound) as raised:
            locate.estimator_library(package)
        tried = [self.path("prefix", "lib", locate.ESTIMATOR_LIBRARY),
                 self.path("other", "lib", locate.ESTIMATOR_LIBRARY)]
        self.assertEqual(raised.exception.tried, tried)
        for path in tried:
            self.assertIn(path, str(raised.exception))
        # Neither installed nor in a repository, nothing on PATH: it says so.
        os.environ["PATH"] = self.path("empty")
        with self.assertRaises(locate.NotFound) as raised:
            locate.cli(self.path("target", "peakscope"))
        self.assertEqual(raised.exception.tried, [])
        self.assertIn(f"nowhere: the package ({self.path('target', 'peakscope')})", str(raised.exception))

    def test_python_m_peakscope_runs_the_cli(self):
        cli = touch(self.path("bin", "fake-peakscope"), executable=True)
        environment = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), PEAKSCOPE_CLI=cli)
        done = subprocess.run([sys.executable, "-m", "peakscope", "report", "a b"], capture_output=True,
                              text=True, env=environment, timeout=60)
        self.assertEqual((done.returncode, done.stdout), (3, "cli report a b\n"))
        environment[locate.ENV_CLI] = self.path("none")
        done = subprocess.run([sys.executable, "-m", "peakscope", "report"], capture_output=True, text=True,
                              env=environment, timeout=60)
        self.assertEqual(done.returncode, 2)
        self.assertIn(f"{self.path('none')} ($PEAKSCOPE_CLI)", done.stderr)


if __name__ == "__main__":
    unittest.main()
