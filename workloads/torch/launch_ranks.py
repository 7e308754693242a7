#!/usr/bin/python3
"""Starts N ranks of a command on this machine, the way a cluster scheduler does.

    launch_ranks.py --nproc N [--port P] [--timeout S] [--grace S]
                    [--kill-rank R --kill-after-waves K] -- COMMAND [ARGS...]

Each copy of COMMAND gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR=127.0.0.1 and MASTER_PORT (a free port unless --port says one) on
top of this process's environment, so the recorder that `peakscope record`
preloads follows every rank into its own <stem>.r<RANK>.<host>.p<PID>.pstrace.
(Debian's torchrun fails before it starts workers; this does only what a
single-node torchrun would.) Their stdout and stderr are forwarded, line by
line, to ours with a "[rank R] " prefix.

When every rank has ended, the exit status is the worst one among the ranks
that ended on their own: the highest, a rank killed by signal N counting as
128+N. A rank that ends on its own with a nonzero status (or a signal, or the
kill below) fails the run: the others cannot finish without it, so after --grace seconds (default 5) those still running get SIGTERM, and
SIGKILL two seconds later; ranks stopped that way do not count towards the
status. When --timeout (default 600 s) passes, every rank still running is
stopped the same way and the status is 124 (or a worse one of a rank that
failed by itself). Under gloo on one machine the others rarely need stopping:
their next collective fails at once ("Connection closed by peer") and they end
with status 1 by themselves. SIGINT or SIGTERM to the launcher stops the ranks
and it exits 128+N.

--kill-rank R --kill-after-waves K: SIGKILL rank R from outside (like an OOM
kill) as soon as it has printed K lines starting "wave <index>", as
ddp_lora.py does after each wave.

Exit status 2 with one line on stderr for bad usage: N not a positive integer,
a command that cannot be found or run, a kill rank outside the run.
"""

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

MASTER_ADDR = "127.0.0.1"
WAVE_LINE = re.compile(rb"^wave \d+\b")
KILL_WAIT_SECONDS = 2.0
POLL_SECONDS = 0.05


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def parse_arguments(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="launch_ranks.py", description=__doc__.splitlines()[0],
                                     usage="%(prog)s --nproc N [options] -- COMMAND [ARGS...]")
    parser.add_argument("--nproc", type=positive_int, required=True, help="ranks to start")
    parser.add_argument("--port", type=int, default=0, help="MASTER_PORT (default: a free port)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds before every rank is stopped (default 600)")
    parser.add_argument("--grace", type=float, default=5.0,
                        help="seconds the other ranks get to end after one fails (default 5)")
    parser.add_argument("--kill-rank", type=int, default=None, metavar="R")
    parser.add_argument("--kill-after-waves", type=positive_int, default=None, metavar="K")
    # Everything after "--" is the command, untouched (it may have options of its own).
    if "--" not in argv:
        parser.error("expected -- COMMAND [ARGS...] after the options")
    split = argv.index("--")
    arguments = parser.parse_args(argv[:split])
    arguments.command = argv[split + 1:]
    if not arguments.command:
        parser.error("no command after --")
    if not 0 <= arguments.port <= 65535:
        parser.error(f"--port: {arguments.port} is not a TCP port")
    if arguments.timeout <= 0 or arguments.grace < 0:
        parser.error("--timeout must be positive and --grace not negative")
    if (arguments.kill_rank is None) != (arguments.kill_after_waves is None):
        parser.error("--kill-rank and --kill-after-waves go together")
    if arguments.kill_rank is not None and not 0 <= arguments.kill_rank < arguments.nproc:
        parser.error(f"--kill-rank: {arguments.kill_rank} is not one of ranks 0..{arguments.nproc - 1}")
    executable = shutil.which(arguments.command[0])
    if executable is None:
        parser.error(f"command not found: {arguments.command[0]}")
    return arguments


def free_port():
    """A port nobody listens on now. Another process may take it before rank 0
    binds it; pass --port where that matters."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((MASTER_ADDR, 0))
        return probe.getsockname()[1]


def rank_environment(rank, world_size, port):
    environment = dict(os.environ)
    environment.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                       LOCAL_WORLD_SIZE=str(world_size), MASTER_ADDR=MASTER_ADDR, MASTER_PORT=str(port))
    return environment


def status_of(returncode):
    """A Popen return code as a shell would report it: signal N is 128+N."""
    return 128 - returncode if returncode < 0 else returncode


class Rank:
    """One started copy of the command, with the threads that forward its output."""

    def __init__(self, rank, process, output_lock):
        self.rank = rank
        self.process = process
        self.waves = 0
        self.stopped_by_us = False
        self.killed_by_request = False
        self._lock = output_lock
        self._forwarders = [
            threading.Thread(target=self._forward, args=(process.stdout, sys.stdout.buffer, True), daemon=True),
            threading.Thread(target=self._forward, args=(process.stderr, sys.stderr.buffer, False), daemon=True),
        ]
        for forwarder in self._forwarders:
            forwarder.start()

    def _forward(self, source, destination, count_waves):
        prefix = f"[rank {self.rank}] ".encode()
        for line in iter(source.readline, b""):
            if count_waves and WAVE_LINE.match(line):
                self.waves += 1
            if not line.endswith(b"\n"):
                line += b"\n"
            with self._lock:
                destination.write(prefix + line)
                destination.flush()
        source.close()

    def finish_output(self):
        for forwarder in self._forwarders:
            forwarder.join(timeout=5)

    def running(self):
        return self.process.poll() is None

    def signal(self, number):
        try:
            os.killpg(self.process.pid, number)  # the rank and anything it started
        except ProcessLookupError:
            pass


def start_ranks(arguments, port, output_lock, ranks):
    """Appends to `ranks` as it goes, so an interruption can stop those started."""
    for rank in range(arguments.nproc):
        try:
            process = subprocess.Popen(arguments.command, env=rank_environment(rank, arguments.nproc, port),
                                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       start_new_session=True)
        except OSError as error:
            for started in ranks:
                started.signal(signal.SIGKILL)
            print(f"launch_ranks.py: cannot run {arguments.command[0]}: {error.strerror}", file=sys.stderr)
            raise SystemExit(2)
        ranks.append(Rank(rank, process, output_lock))


def stop(ranks, reason):
    """SIGTERM (the recorder flushes on it), then SIGKILL whatever is left."""
    alive = [r for r in ranks if r.running()]
    if not alive:
        return
    print(f"launch_ranks.py: {reason}; stopping rank{'s' if len(alive) > 1 else ''} "
          f"{', '.join(str(r.rank) for r in alive)}", file=sys.stderr, flush=True)
    for rank in alive:
        rank.stopped_by_us = True
        rank.signal(signal.SIGTERM)
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    while any(r.running() for r in alive) and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
    for rank in alive:
        if rank.running():
            rank.signal(signal.SIGKILL)
    for rank in alive:
        rank.process.wait()


class Interrupted(Exception):
    def __init__(self, number):
        super().__init__(number)
        self.number = number


def supervise(arguments, ranks):
    """Waits for every rank; returns the run's exit status."""
    deadline = time.monotonic() + arguments.timeout
    failed_at = None
    timed_out = False
    while any(r.running() for r in ranks):
        now = time.monotonic()
        if arguments.kill_rank is not None:
            target = ranks[arguments.kill_rank]
            if target.running() and not target.killed_by_request and target.waves >= arguments.kill_after_waves:
                print(f"launch_ranks.py: killing rank {target.rank} after {target.waves} waves (--kill-rank)",
                      file=sys.stderr, flush=True)
                target.killed_by_request = True
                target.signal(signal.SIGKILL)
        if failed_at is None:
            failure = next((r for r in ranks if not r.running() and r.process.returncode != 0), None)
            if failure is not None:
                failed_at = now
                print(f"launch_ranks.py: rank {failure.rank} ended with status "
                      f"{status_of(failure.process.returncode)}", file=sys.stderr, flush=True)
        if failed_at is not None and now - failed_at >= arguments.grace:
            stop(ranks, f"a rank failed {arguments.grace:g} s ago")
            break
        if now >= deadline:
            timed_out = True
            stop(ranks, f"timeout after {arguments.timeout:g} s")
            break
        time.sleep(POLL_SECONDS)
    for rank in ranks:
        rank.process.wait()
        rank.finish_output()
    counted = [status_of(r.process.returncode) for r in ranks if not r.stopped_by_us]
    return max(counted + [124] if timed_out else counted)


def main(argv=None):
    arguments = parse_arguments(argv)
    port = arguments.port or free_port()
    output_lock = threading.Lock()

    def interrupted(number, frame):
        raise Interrupted(number)

    previous = {n: signal.signal(n, interrupted) for n in (signal.SIGINT, signal.SIGTERM)}
    ranks = []
    try:
        start_ranks(arguments, port, output_lock, ranks)
        return supervise(arguments, ranks)
    except Interrupted as interruption:
        for number, handler in previous.items():
            signal.signal(number, handler)
        stop(ranks, f"launcher got signal {interruption.number}")
        return 128 + interruption.number


if __name__ == "__main__":
    sys.exit(main())
