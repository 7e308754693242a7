"""peakscope's version: the one place it is written. The Makefile reads it for
the CLI (`peakscope --version`), the man page and peakscope.pc, and
python/pyproject.toml for the package."""

__version__ = "0.1.0"
