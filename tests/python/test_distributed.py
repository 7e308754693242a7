"""Data-parallel ranks: the launcher on its own, then ranks under `peakscope record --host`.

The launcher tests run small Python commands and need neither torch nor the
build. The recorded tests start workloads/torch/launch_ranks.py under
build/peakscope record, which follows the launcher's children into one trace
per rank (<stem>.r<RANK>.<host>.p<PID>.pstrace); they read `report --json`,
and the run's exports with JSON and SQLite readers.
Skipped without torch's gloo backend or the build (run make).
"""

import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

try:
    import torch.distributed as dist
    from tests.python import support
    import ddp_lora
    WHY_NOT = None if dist.is_available() and dist.is_gloo_available() else \
        "this torch has no torch.distributed gloo backend"
except ImportError as missing:
    support = ddp_lora = None
    WHY_NOT = f"torch is not importable: {missing}"

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.path.join(REPO, "build", "peakscope")
PRELOAD = os.path.join(REPO, "build", "libpeakscope_preload.so")
LAUNCHER = os.path.join(REPO, "workloads", "torch", "launch_ranks.py")
WORKLOAD = os.path.join(REPO, "workloads", "torch", "ddp_lora.py")
HOST_PATTERN = os.path.join(REPO, "build", "programs", "host_pattern")
BUILT = os.access(CLI, os.X_OK) and os.path.exists(PRELOAD)
RANK_TRACE = re.compile(r"^run\.r(\d+)\.[A-Za-z0-9_-]+\.p(\d+)\.pstrace$")
SKEW = 0.5


def wave_spans(events, pid):
    """(begin, end) in ts of each `wave` range of one process of a Chrome export, in order."""
    stacks, spans = {}, []
    for e in events:
        if e.get("pid") != pid or e.get("ph") not in ("B", "E"):
            continue
        stack = stacks.setdefault(e["tid"], [])
        if e["ph"] == "B":
            stack.append((e["name"], e["ts"]))
        elif stack:
            name, begin = stack.pop()
            if name == "wave":
                spans.append((begin, e["ts"]))
    return sorted(spans)


def launch(nproc, command, *options, timeout=60):
    return subprocess.run([sys.executable, LAUNCHER, "--nproc", str(nproc), *options, "--", *command],
                          capture_output=True, text=True, timeout=timeout)


def python_command(source):
    return [sys.executable, "-c", source]


class LauncherTest(unittest.TestCase):
    def test_every_rank_gets_the_scheduler_variables_and_its_prefix(self):
        source = ("import os, sys; v = os.environ; "
                  "print(v['RANK'], v['WORLD_SIZE'], v['LOCAL_RANK'], v['MASTER_ADDR'], v['MASTER_PORT']); "
                  "print('to stderr', file=sys.stderr)")
        child = launch(3, python_command(source), "--port", "29533")
        self.assertEqual(child.returncode, 0, child.stderr)
        self.assertEqual(sorted(child.stdout.splitlines()),
                         [f"[rank {r}] {r} 3 {r} 127.0.0.1 29533" for r in range(3)])
        self.assertEqual(sorted(child.stderr.splitlines()), [f"[rank {r}] to stderr" for r in range(3)])

    def test_a_free_port_is_chosen_and_shared(self):
        child = launch(2, python_command("import os; print(os.environ['MASTER_PORT'])"))
        self.assertEqual(child.returncode, 0, child.stderr)
        ports = {line.split()[-1] for line in child.stdout.splitlines()}
        self.assertEqual(len(ports), 1, child.stdout)
        self.assertGreater(int(ports.pop()), 0)

    def test_the_worst_status_of_ranks_that_ended_on_their_own(self):
        child = launch(3, python_command("import os; raise SystemExit(int(os.environ['RANK']))"))
        self.assertEqual(child.returncode, 2, child.stderr)

    def test_a_failed_rank_stops_the_others_after_the_grace(self):
        source = "import os, time; time.sleep(60) if os.environ['RANK'] == '0' else exit(3)"
        started = time.monotonic()
        child = launch(2, python_command(source), "--grace", "0.5")
        self.assertLess(time.monotonic() - started, 20)
        self.assertEqual(child.returncode, 3, child.stderr)  # the stopped rank 0 does not count
        self.assertIn("rank 1 ended with status 3", child.stderr)
        self.assertIn("stopping rank 0", child.stderr)

    def test_timeout_stops_every_rank_with_124(self):
        child = launch(2, python_command("import time; time.sleep(60)"), "--timeout", "1")
        self.assertEqual(child.returncode, 124, child.stderr)
        self.assertIn("timeout after 1 s", child.stderr)

    def test_kill_rank_after_waves(self):
        source = ("import os, time\n"
                  "for i in range(3):\n"
                  "    print(f'wave {i} done', flush=True)\n"
                  "    time.sleep(0.2)\n"
                  "time.sleep(60 if os.environ['RANK'] == '1' else 0)\n")
        child = launch(2, python_command(source), "--kill-rank", "1", "--kill-after-waves", "3", "--grace", "0.5")
        self.assertEqual(child.returncode, 137, child.stderr)  # SIGKILL
        self.assertIn("killing rank 1 after 3 waves", child.stderr)
        self.assertIn("[rank 1] wave 2 done", child.stdout)

    def test_bad_usage_exits_2_with_the_reason(self):
        cases = [(["--nproc", "0", "--", "true"], "--nproc"),
                 (["--nproc", "two", "--", "true"], "--nproc"),
                 (["--nproc", "2", "true"], "expected -- COMMAND"),
                 (["--nproc", "2", "--"], "no command"),
                 (["--nproc", "2", "--", "/no/such/program"], "command not found: /no/such/program"),
                 (["--nproc", "2", "--kill-rank", "2", "--kill-after-waves", "1", "--", "true"], "--kill-rank"),
                 (["--nproc", "2", "--kill-rank", "1", "--", "true"], "go together")]
        for arguments, reason in cases:
            child = subprocess.run([sys.executable, LAUNCHER, *arguments], capture_output=True, text=True,
                                   timeout=30)
            self.assertEqual(child.returncode, 2, arguments)
            self.assertIn(reason, child.stderr, arguments)

    def test_a_command_that_cannot_start_exits_2(self):
        with tempfile.TemporaryDirectory() as directory:
            script = os.path.join(directory, "broken")
            with open(script, "w") as file:
                file.write("#!/no/such/interpreter\n")
            os.chmod(script, 0o755)
            child = launch(2, [script])
        self.assertEqual(child.returncode, 2, child.stderr)
        self.assertIn(f"cannot run {script}", child.stderr)


class RecordedRanks:
    """One launcher run under `peakscope record --host`, with each trace's report."""

    def __init__(self, nproc, workload_arguments, launcher_arguments=()):
        self.directory = tempfile.TemporaryDirectory()
        self.launcher_trace = os.path.join(self.directory.name, "run.pstrace")
        environment = {k: v for k, v in os.environ.items()
                       if k not in ("PEAKSCOPE_BACKEND", "LD_PRELOAD", "RANK", "WORLD_SIZE", "LOCAL_RANK")}
        started = time.monotonic()
        self.record = subprocess.run(
            [CLI, "record", "--host", "-o", self.launcher_trace, "--", sys.executable, LAUNCHER,
             "--nproc", str(nproc), *launcher_arguments, "--", sys.executable, WORKLOAD, *workload_arguments],
            capture_output=True, text=True, env=environment, timeout=240)
        self.seconds = time.monotonic() - started
        self.pids = {}  # rank -> pid, from the file names
        for name in os.listdir(self.directory.name):
            match = RANK_TRACE.match(name)
            if match:
                self.pids.setdefault(int(match.group(1)), []).append(int(match.group(2)))
        self.names = sorted(os.listdir(self.directory.name))
        self.paths = {}  # rank -> its trace's path
        for name in self.names:
            match = RANK_TRACE.match(name)
            if match:
                self.paths.setdefault(int(match.group(1)), os.path.join(self.directory.name, name))
        self.reports = {rank: self.report(path) for rank, path in self.paths.items()}

    @staticmethod
    def report(path):
        child = subprocess.run([CLI, "report", path, "--json"], capture_output=True, text=True, timeout=120)
        if child.returncode != 0:
            raise AssertionError(f"report {path}: {child.stderr}")
        return json.loads(child.stdout)

    def run_report(self, json_output=True):
        """`peakscope report` of the whole folder: the run."""
        child = subprocess.run([CLI, "report", self.directory.name] + (["--json"] if json_output else []),
                               capture_output=True, text=True, timeout=240)
        if child.returncode != 0:
            raise AssertionError(f"report {self.directory.name}: {child.stderr}")
        return json.loads(child.stdout) if json_output else child.stdout

    def printed_tokens(self, rank):
        """The token counts rank `rank` said it ran, from its 'wave <i> ... tokens <T>' lines."""
        pattern = re.compile(rf"^\[rank {rank}\] wave \d+ step \d+ tokens (\d+) ")
        return [int(m.group(1)) for m in map(pattern.match, self.record.stdout.splitlines()) if m]

    def cleanup(self):
        self.directory.cleanup()


def run_names_the_busiest(test, run, world_size):
    """The run report: a member per trace by rank, each with its single-trace peak; the last rank the busiest."""
    report = run.run_report()["run"]
    ranked = [m for m in report["members"] if m["rank"] >= 0]
    test.assertEqual([m["rank"] for m in ranked], list(range(world_size)))
    test.assertEqual([m["world_size"] for m in ranked], [world_size] * world_size)
    for m in ranked:
        test.assertEqual(m["peak_bytes"], run.reports[m["rank"]]["peak_bytes"], m)
        test.assertEqual([w["measured_peak_bytes"] for w in m["waves"]],
                         [w["measured_peak_bytes"] for w in run.reports[m["rank"]]["waves"]])
    test.assertEqual(report["busiest"]["rank"], world_size - 1, report["busiest"])
    test.assertEqual(report["busiest"]["peak_bytes"], run.reports[world_size - 1]["peak_bytes"])
    text = run.run_report(json_output=False)
    test.assertIn(f"busiest    rank {world_size - 1} (pid {run.pids[world_size - 1][0]})", text)
    test.assertIn("== the busiest rank's report:", text)
    return report


def busiest_last(test, run, world_size, tokens):
    """The last rank peaks highest, and each rank's wave peaks above baseline grow with its tokens."""
    peaks = [run.reports[r]["peak_bytes"] for r in range(world_size)]
    test.assertEqual(peaks, sorted(peaks), peaks)
    test.assertGreater(peaks[-1], max(peaks[:-1]), peaks)
    for wave in range(len(tokens)):
        base = run.reports[0]["waves"][wave]["measured_peak_bytes"]
        for rank in range(1, world_size):
            measured = run.reports[rank]["waves"][wave]["measured_peak_bytes"]
            # Boundaries and one layer's workspace grow linearly with tokens.
            test.assertAlmostEqual(measured / base, 1 + SKEW * rank, delta=0.1 * (1 + SKEW * rank),
                                   msg=f"wave {wave} rank {rank}: {measured} against {base}")
    return peaks


@unittest.skipIf(WHY_NOT, WHY_NOT)
@unittest.skipUnless(BUILT, "build/peakscope and build/libpeakscope_preload.so are not built (run make)")
class TwoRanksTest(unittest.TestCase):
    TOKENS = [512, 1024, 768]

    @classmethod
    def setUpClass(cls):
        cls.run_ = RecordedRanks(2, ["--tokens", ",".join(map(str, cls.TOKENS)), "--skew", str(SKEW)])

    @classmethod
    def tearDownClass(cls):
        cls.run_.cleanup()

    def test_the_run_succeeds_and_the_adapters_stay_in_sync(self):
        self.assertEqual(self.run_.record.returncode, 0, self.run_.record.stderr)
        for rank in range(2):
            self.assertIn(f"[rank {rank}] ddp_lora: rank {rank} of 2", self.run_.record.stdout)
        self.assertEqual(self.run_.record.stdout.count("annotations: capi; adapters in sync: yes"), 2)

    def test_one_trace_per_rank_named_and_stamped_with_its_rank(self):
        self.assertEqual(sorted(self.run_.pids), [0, 1], self.run_.names)
        self.assertTrue(all(len(pids) == 1 for pids in self.run_.pids.values()), self.run_.names)
        self.assertEqual(len(self.run_.names), 3, self.run_.names)  # and the launcher's own trace
        for rank, report in self.run_.reports.items():
            trace = report["trace"]
            self.assertEqual((trace["rank"], trace["local_rank"], trace["pid"]), (rank, rank, self.run_.pids[rank][0]))
            self.assertEqual((trace["status"], trace["clean_end"]), ("complete", True))
            self.assertIn("ddp_lora.py", trace["command"])
            self.assertIn(f"trace also written: {self.run_.directory.name}/run.r{rank}.", self.run_.record.stderr)
        launcher = RecordedRanks.report(self.run_.launcher_trace)["trace"]
        self.assertEqual(launcher["rank"], -1)
        self.assertIn("launch_ranks.py", launcher["command"])

    def test_each_rank_has_the_waves_it_announced(self):
        for rank, report in self.run_.reports.items():
            shard = ddp_lora.shard_tokens(self.TOKENS, SKEW, rank)
            self.assertEqual(self.run_.printed_tokens(rank), shard)
            self.assertEqual([(w["tokens"], w["cold"], w["complete"], w["slots"]) for w in report["waves"]],
                             [(t, True, True, ["a"]) for t in shard])

    def test_the_busiest_rank_peaks_highest(self):
        busiest_last(self, self.run_, 2, self.TOKENS)

    def test_calibrate_and_check_read_the_run_folder_as_every_ranks_trace(self):
        folder = self.run_.directory.name
        ranks = [self.run_.paths[r] for r in range(2)]
        calibrations = []
        for name, inputs in (("folder", [folder]), ("list", ranks)):
            out = os.path.join(folder, f"cal-{name}.json")
            child = subprocess.run([CLI, "calibrate", *inputs, "-o", out], capture_output=True, text=True, timeout=240)
            self.assertEqual(child.returncode, 0, child.stderr)
            with open(out) as f:
                calibration = json.load(f)
            calibration.pop("traces", None)
            calibrations.append(calibration)
        self.assertEqual(calibrations[0], calibrations[1])
        check = subprocess.run([CLI, "check", "--calibration", os.path.join(folder, "cal-list.json"), folder, "--json"],
                               capture_output=True, text=True, timeout=240)
        self.assertIn(check.returncode, (0, 1), check.stderr)
        self.assertIn("run.pstrace has no waves: nothing to check there", check.stderr)
        checked = json.loads(check.stdout)
        waves = checked["waves"]
        self.assertEqual(len(waves), 6)  # three waves of each rank; the launcher's trace passed over
        # By rank, and the verdict is the busiest rank's: its under-estimates decide the exit status.
        [run] = checked["runs"]
        self.assertEqual([r["rank"] for r in run["ranks"]], [0, 1])
        self.assertEqual([r["waves"] for r in run["ranks"]], [3, 3])
        self.assertEqual(run["busiest_rank"], 1)
        self.assertEqual(run["ranks"][1]["largest_measured_peak_bytes"],
                         max(w["measured_peak_bytes"] for w in waves if w["trace"] == self.run_.paths[1]))
        self.assertEqual(check.returncode, 1 if run["verdict_under_estimates"] else 0)
        text = subprocess.run([CLI, "check", "--calibration", os.path.join(folder, "cal-list.json"), folder],
                              capture_output=True, text=True, timeout=240)
        self.assertIn(f"run_verdict rank 1: {run['verdict_under_estimates']} under-estimates", text.stdout)
        for name in os.listdir(folder):
            if name.startswith("cal-"):
                os.remove(os.path.join(folder, name))

    def test_the_run_exports_as_one_file_with_a_process_per_rank(self):
        folder = self.run_.directory.name
        with tempfile.TemporaryDirectory() as out:
            files = {}
            for name in ("chrome", "nsys-sqlite", "perfetto"):
                files[name] = os.path.join(out, "run." + name)
                child = subprocess.run([CLI, "export", folder, "--format", name, "-o", files[name]],
                                       capture_output=True, text=True, timeout=240)
                self.assertEqual(child.returncode, 0, child.stderr)
                self.assertIn("3 traces of run", child.stdout)
            with open(files["chrome"]) as f:
                chrome = json.load(f)
            names = {e["pid"]: e["args"]["name"] for e in chrome["traceEvents"]
                     if e.get("ph") == "M" and e["name"] == "process_name"}
            host = self.run_.reports[0]["trace"]["hostname"]
            for rank in range(2):
                pid = self.run_.pids[rank][0]
                self.assertTrue(names[pid].startswith(f"rank {rank} ({host}, pid {pid}): "), names)
                begins = [e["ts"] for e in chrome["traceEvents"] if e.get("ph") == "B" and e["pid"] == pid]
                self.assertEqual(begins, sorted(begins))
            # The ranks start together: their first ranges lie within a second of each other on the run's clock.
            firsts = [min(e["ts"] for e in chrome["traceEvents"] if e.get("ph") == "B" and e["pid"] == self.run_.pids[r][0])
                      for r in range(2)]
            self.assertLess(abs(firsts[0] - firsts[1]), 1e6, firsts)
            database = sqlite3.connect(files["nsys-sqlite"])
            try:
                self.assertEqual(database.execute("SELECT count(*) FROM PROCESSES").fetchone()[0], 3)
                for rank in range(2):
                    rows = database.execute("SELECT count(*) FROM PEAKSCOPE_HOST_MEMORY_EVENTS "
                                            "WHERE globalTid >> 24 = ? AND memoryOperationType = 0",
                                            (self.run_.pids[rank][0],)).fetchone()[0]
                    self.assertEqual(rows, self.run_.reports[rank]["memory"]["allocs"])
            finally:
                database.close()
            self.assertGreater(os.path.getsize(files["perfetto"]), 0)
            # A summary of the run: counters and ranges of every member, each still its own process.
            summary = os.path.join(out, "summary.json")
            child = subprocess.run([CLI, "export", folder, "--format", "chrome", "--summary", "-o", summary],
                                   capture_output=True, text=True, timeout=240)
            self.assertEqual(child.returncode, 0, child.stderr)
            with open(summary) as f:
                summarized = json.load(f)["traceEvents"]
            self.assertEqual({e["pid"] for e in summarized if e.get("ph") == "M" and e["name"] == "process_name"},
                             set(names))
            self.assertLess(os.path.getsize(summary), os.path.getsize(files["chrome"]) / 4)
            self.check_windows_of_the_run(folder, out, chrome)
            html = subprocess.run([CLI, "export", folder, "--format", "html", "-o", os.path.join(out, "x.html")],
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(html.returncode, 2)
            self.assertIn("holds one trace, not a run of 3", html.stderr)

    def check_windows_of_the_run(self, folder, out, whole):
        """Windows of the run are one stretch of its clock: wave 1 of every rank together, or --from/--to."""
        path = os.path.join(out, "wave1.json")
        child = subprocess.run([CLI, "export", folder, "--format", "chrome", "--wave", "1", "-o", path],
                               capture_output=True, text=True, timeout=240)
        self.assertEqual(child.returncode, 0, child.stderr)
        self.assertEqual(child.stderr, "")
        self.assertIn("after the run's earliest event (wave 1 of every rank): 2 of 3 traces of run", child.stdout)
        self.assertIn("nothing in the window (it has no wave 1 (it has 0 waves))", child.stdout)  # the launcher
        self.assertFalse([name for name in os.listdir(out) if ".window" in name])
        with open(path) as f:
            windowed = json.load(f)
        # In the whole export's microseconds: from the first rank's push of wave 1 to the last rank's pop.
        shift = (windowed["otherData"]["origin_realtime_ns"] - whole["otherData"]["origin_realtime_ns"]) / 1000
        spans = [wave_spans(whole["traceEvents"], self.run_.pids[rank][0])[1] for rank in range(2)]
        begin, end = min(b for b, _ in spans), max(e for _, e in spans)
        self.assertEqual({e["pid"] for e in windowed["traceEvents"] if e.get("ph") == "M" and e["name"] == "process_name"},
                         {self.run_.pids[rank][0] for rank in range(2)})
        for rank in range(2):
            pid = self.run_.pids[rank][0]
            times = [e["ts"] + shift for e in windowed["traceEvents"] if e.get("pid") == pid and e.get("ph") != "M"
                     and "ts" in e]
            self.assertTrue(times, rank)
            self.assertGreaterEqual(min(times), begin - 0.01, rank)
            self.assertLessEqual(max(times), end + 0.01, rank)
            # Its own wave 1 whole (a rank done sooner shows the start of its next wave too).
            own = [(b + shift, e + shift) for b, e in wave_spans(windowed["traceEvents"], pid)]
            self.assertTrue(any(abs(b - spans[rank][0]) < 0.01 and abs(e - spans[rank][1]) < 0.01 for b, e in own),
                            (rank, own, spans))
        # --from/--to count from the run's earliest event, on its clock.
        child = subprocess.run([CLI, "export", folder, "--format", "perfetto", "--from", "0", "--to", "500ms",
                                "-o", os.path.join(out, "start.pftrace")], capture_output=True, text=True, timeout=240)
        self.assertEqual(child.returncode, 0, child.stderr)
        self.assertIn("window 0.000000 s to 0.500000 s after the run's earliest event: ", child.stdout)
        # Nothing of any member in the window: exit 2 with one line that says why.
        for window, reason in ((["--from", "100000s"], "no member has anything in the window 100000.000000 s"),
                               (["--wave", "99"], "no member has wave 99 (rank 0 (")):
            child = subprocess.run([CLI, "export", folder, "--format", "chrome", *window, "-o", path],
                                   capture_output=True, text=True, timeout=240)
            self.assertEqual(child.returncode, 2, child.stdout)
            self.assertEqual(len(child.stderr.splitlines()), 1, child.stderr)
            self.assertIn(reason, child.stderr)

    def test_traces_of_two_runs_in_one_folder_are_told_apart(self):
        with tempfile.TemporaryDirectory() as folder:
            for rank in range(2):
                shutil.copy(self.run_.paths[rank], folder)
            other = os.path.join(folder, "other.pstrace")
            environment = dict(os.environ, PEAKSCOPE_RUN_ID="other-job", RANK="0", WORLD_SIZE="1")
            child = subprocess.run([CLI, "record", "--host", "-o", other, "--", HOST_PATTERN, "pairs", "1", "10", "4096"],
                                   capture_output=True, text=True, env=environment, timeout=60)
            self.assertEqual(child.returncode, 0, child.stderr)
            mixed = subprocess.run([CLI, "report", folder], capture_output=True, text=True, timeout=120)
            self.assertEqual(mixed.returncode, 2)
            self.assertIn("the traces are of 2 runs; choose one with --run ID", mixed.stderr)
            self.assertIn("'other-job' (PEAKSCOPE_RUN_ID): 1 trace", mixed.stderr)
            chosen = subprocess.run([CLI, "report", folder, "--run", "other-job", "--json"], capture_output=True,
                                    text=True, timeout=120)
            self.assertEqual(chosen.returncode, 0, chosen.stderr)
            run = json.loads(chosen.stdout)["run"]
            self.assertEqual((run["id"], run["id_source"], run["traces"]), ("other-job", "PEAKSCOPE_RUN_ID", 1))

    def test_the_run_report_names_the_busiest_rank_with_each_ranks_own_peak(self):
        report = run_names_the_busiest(self, self.run_, 2)
        self.assertEqual(report["notes"], [])
        # Every wave's spread across ranks is the two ranks' difference.
        for w, spread in enumerate(report["waves"]):
            peaks = [self.run_.reports[r]["waves"][w]["measured_peak_bytes"] for r in range(2)]
            self.assertEqual((spread["smallest_measured_peak_bytes"], spread["largest_measured_peak_bytes"]),
                             (min(peaks), max(peaks)))


@unittest.skipIf(WHY_NOT, WHY_NOT)
@unittest.skipUnless(BUILT, "build/peakscope and build/libpeakscope_preload.so are not built (run make)")
class FourRanksTest(unittest.TestCase):
    TOKENS = [256, 512, 384]  # half the default: four ranks share two cores

    def test_four_traces_and_peaks_in_rank_order(self):
        run = RecordedRanks(4, ["--tokens", ",".join(map(str, self.TOKENS)), "--skew", str(SKEW)])
        self.addCleanup(run.cleanup)
        self.assertEqual(run.record.returncode, 0, run.record.stderr)
        self.assertEqual(sorted(run.pids), [0, 1, 2, 3], run.names)
        for rank, report in run.reports.items():
            self.assertEqual(report["trace"]["rank"], rank)
            self.assertEqual([w["tokens"] for w in report["waves"]], ddp_lora.shard_tokens(self.TOKENS, SKEW, rank))
        busiest_last(self, run, 4, self.TOKENS)
        run_names_the_busiest(self, run, 4)
        self.traces_side_by_side_say_what_one_at_a_time_says(run)

    def traces_side_by_side_say_what_one_at_a_time_says(self, run):
        """report, calibrate and check of the run's four traces, read 4 at a time and 1 at a time: the same output."""
        folder = run.directory.name
        calibration = os.path.join(folder, "cal.json")

        def outputs(threads):
            environment = dict(os.environ, PEAKSCOPE_TRACE_THREADS=str(threads))
            said = []
            for command in (["report", folder], ["report", folder, "--json"],
                            ["calibrate", folder, "-o", calibration],
                            ["check", "--calibration", calibration, folder, "--json"]):
                child = subprocess.run([CLI, *command], capture_output=True, text=True, timeout=240, env=environment)
                self.assertIn(child.returncode, (0, 1), child.stderr)
                said.append((" ".join(command[:1]), child.returncode, child.stdout))
                if command[0] == "calibrate":
                    with open(calibration) as f:
                        said.append(("the calibration", 0, f.read()))
            return said

        one_at_a_time = outputs(1)
        for (name, status, text), (_, status_4, text_4) in zip(one_at_a_time, outputs(4)):
            self.assertEqual(status_4, status, name)
            self.assertEqual(text_4, text, name)


def can_name_a_host():
    """Whether this process may start one in a UTS namespace of its own (root, or a user namespace)."""
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-u", "sh", "-c", "hostname psc-probe && hostname"], capture_output=True,
                           text=True)
    return probe.returncode == 0 and probe.stdout.strip() == "psc-probe"


@unittest.skipIf(WHY_NOT, WHY_NOT)
@unittest.skipUnless(BUILT, "build/peakscope and build/libpeakscope_preload.so are not built (run make)")
class TwoHostsTest(unittest.TestCase):
    """Two ranks as on two machines: each in a UTS namespace with a host name of its own ("alpha", "beta"), each
    under its own `peakscope record` writing into one folder (a shared file system), tied only by the
    MASTER_ADDR:MASTER_PORT the scheduler gave both."""

    TOKENS = [256, 512]

    @classmethod
    def setUpClass(cls):
        if not can_name_a_host():
            raise unittest.SkipTest("unshare -u cannot give a process its own host name here (needs root)")
        cls.directory = tempfile.TemporaryDirectory()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        base = {k: v for k, v in os.environ.items() if k not in ("PEAKSCOPE_BACKEND", "LD_PRELOAD", "PEAKSCOPE_RUN_ID")}
        ranks = []
        for rank, host in enumerate(("alpha", "beta")):
            environment = dict(base, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                               MASTER_PORT=str(port))
            trace = os.path.join(cls.directory.name, f"{host}.pstrace")
            command = ["unshare", "-u", "sh", "-c", f'hostname {host} && exec "$@"', "sh", CLI, "record", "--host",
                       "-o", trace, "--", sys.executable, WORKLOAD, "--tokens", ",".join(map(str, cls.TOKENS)),
                       "--skew", str(SKEW)]
            ranks.append(subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
        cls.outputs = [p.communicate(timeout=240) for p in ranks]
        cls.statuses = [p.returncode for p in ranks]
        cls.port = port

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()

    def test_each_host_records_its_rank(self):
        self.assertEqual(self.statuses, [0, 0], self.outputs)
        self.assertEqual(sorted(os.listdir(self.directory.name)), ["alpha.pstrace", "beta.pstrace"])

    def test_the_folder_reads_as_one_run_of_two_hosts(self):
        child = subprocess.run([CLI, "report", self.directory.name, "--json"], capture_output=True, text=True,
                               timeout=120)
        self.assertEqual(child.returncode, 0, child.stderr)
        run = json.loads(child.stdout)["run"]
        self.assertEqual((run["id"], run["id_source"]), (f"127.0.0.1:{self.port}", "MASTER_ADDR:MASTER_PORT"))
        self.assertEqual([(m["rank"], m["host"]) for m in run["members"]], [(0, "alpha"), (1, "beta")])
        self.assertIn("2 hosts: alpha, beta", run["notes"])
        self.assertEqual(run["busiest"]["rank"], 1)

    def test_the_export_names_each_rank_with_its_host(self):
        out = os.path.join(self.directory.name, "run.json")
        self.addCleanup(lambda: os.path.exists(out) and os.remove(out))
        child = subprocess.run([CLI, "export", self.directory.name, "--format", "chrome", "-o", out],
                               capture_output=True, text=True, timeout=120)
        self.assertEqual(child.returncode, 0, child.stderr)
        with open(out) as f:
            events = json.load(f)["traceEvents"]
        names = sorted(e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name")
        self.assertEqual(len(names), 2, names)
        self.assertTrue(names[0].startswith("rank 0 (alpha, pid "), names)
        self.assertTrue(names[1].startswith("rank 1 (beta, pid "), names)


@unittest.skipIf(WHY_NOT, WHY_NOT)
@unittest.skipUnless(BUILT, "build/peakscope and build/libpeakscope_preload.so are not built (run make)")
class DyingRankTest(unittest.TestCase):
    """The last rank SIGKILLs itself after the forward of its wave 1."""

    TOKENS = [256, 512, 384]
    DIE_AT = 1

    @classmethod
    def setUpClass(cls):
        cls.run_ = RecordedRanks(2, ["--tokens", ",".join(map(str, cls.TOKENS)), "--skew", str(SKEW),
                                     "--die-at-wave", str(cls.DIE_AT)], ["--grace", "2"])

    @classmethod
    def tearDownClass(cls):
        cls.run_.cleanup()

    def test_the_launcher_fails_with_the_dead_ranks_status(self):
        self.assertEqual(self.run_.record.returncode, 137, self.run_.record.stderr)
        self.assertIn("launch_ranks.py: rank 1 ended with status 137", self.run_.record.stderr)
        self.assertIn("[rank 1] rank 1 dies in wave 1 (kill)", self.run_.record.stdout)

    def test_the_dead_ranks_trace_reads_up_to_where_it_stopped(self):
        report = self.run_.reports[1]
        self.assertFalse(report["trace"]["clean_end"])
        self.assertEqual(report["trace"]["rank"], 1)
        waves = report["waves"]
        shard = ddp_lora.shard_tokens(self.TOKENS, SKEW, 1)
        self.assertEqual([(w["tokens"], w["complete"]) for w in waves[:self.DIE_AT]],
                         [(t, True) for t in shard[:self.DIE_AT]])
        # The dying wave's opening made it to the file unless it fell in the last flush period.
        self.assertLessEqual(len(waves), self.DIE_AT + 1)
        for wave in waves[self.DIE_AT:]:
            self.assertEqual((wave["tokens"], wave["complete"]), (shard[self.DIE_AT], False))

    def test_the_run_report_says_the_dead_rank_did_not_end_cleanly(self):
        report = self.run_.run_report()["run"]
        dead = [m for m in report["members"] if m["rank"] == 1]
        self.assertEqual(len(dead), 1)
        self.assertFalse(dead[0]["clean_end"])
        self.assertTrue(any("(rank 1) did not end cleanly" in n for n in report["notes"]), report["notes"])

    def test_the_survivor_leaves_a_readable_trace_of_its_waves(self):
        # Under gloo the survivor's all-reduce fails at once ("Connection closed by
        # peer") and it ends by itself; a blocked one would be stopped after --grace.
        report = self.run_.reports[0]
        self.assertEqual(report["trace"]["status"], "complete")
        self.assertEqual([w["tokens"] for w in report["waves"] if w["complete"]], self.TOKENS)


if __name__ == "__main__":
    unittest.main()
