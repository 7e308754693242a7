"""Where the package finds peakscope's native parts: the estimator library
(libpeakscope_estimator.so, for `Calibration`) and the `peakscope` CLI (for
`python3 -m peakscope`).

Each is looked for, in order:
  1. its environment variable ($PEAKSCOPE_ESTIMATOR_LIBRARY, $PEAKSCOPE_CLI);
  2. the prefix the package is installed under: a package in
     <prefix>/lib/python3*/{site,dist}-packages/peakscope (`make install`,
     `pip install --prefix`, `pip install --user`) looks in <prefix>/lib and
     <prefix>/bin;
  3. the build folder of the repository the package sits in
     (python/peakscope/ -> build/);
  4. the prefix of a `peakscope` on $PATH (<prefix>/bin/peakscope ->
     <prefix>/lib), for a package installed apart from the CLI
     (`pip install --target`).
When none is there, NotFound lists every path tried.
"""

import os
import shutil

ENV_ESTIMATOR_LIBRARY = "PEAKSCOPE_ESTIMATOR_LIBRARY"
ENV_CLI = "PEAKSCOPE_CLI"
ESTIMATOR_LIBRARY = "libpeakscope_estimator.so"
CLI = "peakscope"

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


class NotFound(OSError):
    """A native part of peakscope is in none of the places it was looked for."""

    def __init__(self, what, tried, hint, package=_PACKAGE):
        self.tried = list(tried)
        lines = "\n".join(f"  {path}" for path in self.tried) or (
            f"  nowhere: the package ({package}) is neither under an install prefix nor in a repository's "
            f"python/, and no {CLI} is on $PATH")
        super().__init__(f"{what} not found; looked at:\n{lines}\n{hint}")


def installed_prefix(package=_PACKAGE):
    """The prefix of a package installed as <prefix>/lib/python3*/{site,dist}-packages/peakscope; else None."""
    packages = os.path.dirname(package)
    python = os.path.dirname(packages)
    lib = os.path.dirname(python)
    if (os.path.basename(packages) in ("site-packages", "dist-packages")
            and os.path.basename(python).startswith("python") and os.path.basename(lib).startswith("lib")):
        return os.path.dirname(lib)
    return None


def build_folder(package=_PACKAGE):
    """build/ of the repository whose python/ holds the package; None when it is not in one."""
    repository = os.path.dirname(os.path.dirname(package))
    if os.path.basename(os.path.dirname(package)) != "python":
        return None
    return os.path.join(repository, "build")


def _path_prefix():
    found = shutil.which(CLI)
    return os.path.dirname(os.path.dirname(os.path.realpath(found))) if found else None


def candidates(kind, package=_PACKAGE):
    """The paths looked at for `kind` ("estimator" or "cli"), in order, without the environment variable."""
    name, folder = (ESTIMATOR_LIBRARY, "lib") if kind == "estimator" else (CLI, "bin")
    out = []
    prefix = installed_prefix(package)
    if prefix:
        out.append(os.path.join(prefix, folder, name))
    build = build_folder(package)
    if build:
        out.append(os.path.join(build, name))
    path_prefix = _path_prefix()
    if path_prefix:
        out.append(os.path.join(path_prefix, folder, name))
    seen = set()
    return [p for p in out if not (p in seen or seen.add(p))]


def _find(kind, env, usable, what, hint, package):
    named = os.environ.get(env)
    if named:
        if usable(named):
            return named
        raise NotFound(what, [f"{named} (${env})"], f"${env} names no such file")
    tried = candidates(kind, package)
    for path in tried:
        if usable(path):
            return path
    raise NotFound(what, tried, hint, package)


def estimator_library(package=_PACKAGE):
    """The estimator library's path; NotFound lists every path tried."""
    return _find("estimator", ENV_ESTIMATOR_LIBRARY, os.path.isfile, ESTIMATOR_LIBRARY,
                 f"install peakscope (make install), build it (make), or name the library with "
                 f"${ENV_ESTIMATOR_LIBRARY} or library=", package)


def cli(package=_PACKAGE):
    """The `peakscope` executable's path; NotFound lists every path tried."""
    return _find("cli", ENV_CLI, lambda p: os.path.isfile(p) and os.access(p, os.X_OK), "the peakscope CLI",
                 f"install peakscope (make install), build it (make), or name it with ${ENV_CLI}", package)
