"""`python3 -m peakscope ARGS...` runs the `peakscope` CLI with ARGS (found as
locate.py says: $PEAKSCOPE_CLI, the prefix the package is installed under,
the repository's build/, $PATH), in place of this process: its output and
exit status are the CLI's. Exit 2 with every path tried when there is none."""

import os
import sys

from peakscope import locate


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        cli = locate.cli()
    except locate.NotFound as e:
        print(f"python3 -m peakscope: {e}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(cli, [cli, *argv])


if __name__ == "__main__":
    sys.exit(main())
