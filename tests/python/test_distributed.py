"""Data-parallel ranks started by torchrun, under `peakscope record --host`.

torchrun is Debian's (python3-torch: PyTorch 1.13 on Python 3.11), or
`python3 -m torch.distributed.run` where no torchrun is on PATH. It runs with
--redirects 1 --tee 1: its default stdio options fail on Python 3.11 before
any worker starts (README, "Distributed runs"). The recorder that `record`
preloads follows torchrun's agent into its workers, one trace per rank
(<stem>.r<RANK>.<host>.p<PID>.pstrace) beside the agent's own; the tests read
`report --json`, and the run's exports with JSON and SQLite readers.
Skipped without torch's gloo backend or the build (run make).
"""

import glob
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
WORKLOAD = os.path.join(REPO, "workloads", "torch", "ddp_lora.py")
HOST_PATTERN = os.path.join(REPO, "build", "programs", "host_pattern")
BUILT = os.access(CLI, os.X_OK) and os.path.exists(PRELOAD)
RANK_TRACE = re.compile(r"^run\.r(\d+)\.[A-Za-z0-9_-]+\.p(\d+)\.pstrace$")
SKEW = 0.5
# Debian's torchrun, or the module it runs. --redirects 1 --tee 1: each worker's
# stdout goes to a file under --log_dir and to ours with a "[default<LOCAL_RANK>]:"
# prefix; torchrun 1.13's default (no redirects) trips over Python 3.11's enum.
TORCHRUN = [shutil.which("torchrun")] if shutil.which("torchrun") else [sys.executable, "-m", "torch.distributed.run"]
STDIO = ["--redirects", "1", "--tee", "1"]
# How often torchrun looks at its workers (default 5 s): it ends that much after them.
MONITOR = ["--monitor_interval", "0.5"]
# Variables of an outer launcher that would name the run or the rank.
LAUNCHER_VARIABLES = ("PEAKSCOPE_BACKEND", "LD_PRELOAD", "PEAKSCOPE_RUN_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                      "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_PROCID",
                      "OMPI_COMM_WORLD_RANK", "PMI_RANK")


def clean_environment(**extra):
    environment = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    environment.update(extra)
    return environment


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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


@unittest.skipIf(WHY_NOT, WHY_NOT)
class TorchrunTest(unittest.TestCase):
    """What the recorded tests rely on torchrun for, without the build."""

    def test_every_worker_gets_the_scheduler_variables_and_its_prefix(self):
        with tempfile.TemporaryDirectory() as directory:
            script = os.path.join(directory, "variables.py")
            with open(script, "w") as file:
                file.write("import os\nv = os.environ\n"
                           "print(v['RANK'], v['WORLD_SIZE'], v['LOCAL_RANK'], v['MASTER_ADDR'], v['MASTER_PORT'])\n")
            port = free_port()
            child = subprocess.run([*TORCHRUN, *STDIO, *MONITOR, "--log_dir", os.path.join(directory, "logs"),
                                    "--nproc_per_node", "3", "--master_addr", "127.0.0.1", "--master_port", str(port),
                                    script], capture_output=True, text=True, env=clean_environment(), timeout=120)
            self.assertEqual(child.returncode, 0, child.stderr)
            # What each worker printed, from its own log (--redirects 1): the
            # launcher's tee of three workers at once can split one worker's
            # line around another's on its stdout.
            printed = {}
            for log in glob.glob(os.path.join(directory, "logs", "**", "stdout.log"), recursive=True):
                with open(log) as file:
                    printed[int(os.path.basename(os.path.dirname(log)))] = file.read().strip()
        self.assertEqual(printed, {r: f"{r} 3 {r} 127.0.0.1 {port}" for r in range(3)})
        for r in range(3):
            self.assertIn(f"[default{r}]:", child.stdout)


class RecordedRanks:
    """One torchrun of ddp_lora.py under `peakscope record --host`, with each trace's report."""

    def __init__(self, nproc, workload_arguments):
        self.directory = tempfile.TemporaryDirectory()
        self.logs = tempfile.TemporaryDirectory()  # torchrun's --log_dir, outside the run's folder
        self.launcher_trace = os.path.join(self.directory.name, "run.pstrace")
        started = time.monotonic()
        self.record = subprocess.run(
            [CLI, "record", "--host", "-o", self.launcher_trace, "--", *TORCHRUN, *STDIO, *MONITOR,
             "--log_dir", self.logs.name, "--nproc_per_node", str(nproc), "--master_addr", "127.0.0.1",
             "--master_port", str(free_port()), WORKLOAD, *workload_arguments],
            capture_output=True, text=True, env=clean_environment(), timeout=240)
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
        pattern = re.compile(rf"^\[default{rank}\]:wave \d+ step \d+ tokens (\d+) ")
        return [int(m.group(1)) for m in map(pattern.match, self.record.stdout.splitlines()) if m]

    def cleanup(self):
        self.directory.cleanup()
        self.logs.cleanup()


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
            self.assertIn(f"[default{rank}]:ddp_lora: rank {rank} of 2", self.run_.record.stdout)
        self.assertEqual(self.run_.record.stdout.count("annotations: capi; adapters in sync: yes"), 2)

    def test_one_trace_per_rank_named_and_stamped_with_its_rank(self):
        self.assertEqual(sorted(self.run_.pids), [0, 1], self.run_.names)
        self.assertTrue(all(len(pids) == 1 for pids in self.run_.pids.values()), self.run_.names)
        self.assertEqual(len(self.run_.names), 3, self.run_.names)  # and torchrun's own trace
        for rank, report in self.run_.reports.items():
            trace = report["trace"]
            self.assertEqual((trace["rank"], trace["local_rank"], trace["pid"]), (rank, rank, self.run_.pids[rank][0]))
            self.assertEqual((trace["status"], trace["clean_end"]), ("complete", True))
            self.assertIn("ddp_lora.py", trace["command"])
            self.assertIn(f"trace also written: {self.run_.directory.name}/run.r{rank}.", self.run_.record.stderr)
        launcher = RecordedRanks.report(self.run_.launcher_trace)["trace"]
        self.assertEqual((launcher["rank"], launcher["world_size"], launcher["parent_pid"]), (-1, 0, 0))
        self.assertIn(f"{TORCHRUN[-1]} --redirects 1 --tee 1", launcher["command"])

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


@unittest.skipUnless(BUILT, "build/peakscope and build/libpeakscope_preload.so are not built (run make)")
class SchedulerRanksTest(unittest.TestCase):
    """Ranks as srun and mpirun start them, their variables set by hand: one `record` per task, as `srun
    peakscope record ...` runs it, each writing its own file into one folder."""

    def record_tasks(self, folder, tasks):
        for name, variables in tasks:
            child = subprocess.run([CLI, "record", "--host", "-o", os.path.join(folder, f"{name}.pstrace"), "--",
                                    HOST_PATTERN, "peak", "2", str(4096 * (1 + len(name)))], capture_output=True,
                                   text=True, env=clean_environment(**variables), timeout=60)
            self.assertEqual(child.returncode, 0, child.stderr)

    def report(self, folder):
        child = subprocess.run([CLI, "report", folder, "--json"], capture_output=True, text=True, timeout=60)
        self.assertEqual(child.returncode, 0, child.stderr)
        return json.loads(child.stdout)

    def test_srun_tasks_are_the_ranks_of_the_job_step(self):
        with tempfile.TemporaryDirectory() as folder:
            job = dict(SLURM_JOB_ID="4242", SLURM_STEP_ID="0", SLURM_NTASKS="3")
            self.record_tasks(folder, [(f"task{i}", dict(job, SLURM_PROCID=str(i), SLURM_LOCALID=str(i % 2)))
                                       for i in range(3)])
            report = self.report(folder)
        run = report["run"]
        self.assertEqual((run["id"], run["id_source"], run["traces"]), ("4242.0", "SLURM_JOB_ID", 3))
        self.assertEqual([(m["rank"], m["world_size"], os.path.basename(m["path"])) for m in run["members"]],
                         [(i, 3, f"task{i}.pstrace") for i in range(3)])
        self.assertEqual([r["trace"]["local_rank"] for r in report["reports"]], [0, 1, 0])
        self.assertEqual(run["notes"], [])

    def test_mpirun_ranks_come_before_the_srun_task_they_run_under(self):
        # mpirun's ranks under an allocation hold their node daemon's SLURM_PROCID (here 0 for all).
        with tempfile.TemporaryDirectory() as folder:
            outer = dict(SLURM_JOB_ID="77", SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_NTASKS="1",
                         MASTER_ADDR="127.0.0.1", MASTER_PORT="1")
            self.record_tasks(folder, [(f"mpi{i}", dict(outer, OMPI_COMM_WORLD_RANK=str(i),
                                                        OMPI_COMM_WORLD_LOCAL_RANK=str(i),
                                                        OMPI_COMM_WORLD_SIZE="2")) for i in range(2)] +
                              [(f"hydra{i}", dict(PEAKSCOPE_RUN_ID="hydra", PMI_RANK=str(i), PMI_SIZE="2",
                                                  MPI_LOCALRANKID=str(i))) for i in range(2)])
            mixed = subprocess.run([CLI, "report", folder], capture_output=True, text=True, timeout=60)
            self.assertEqual(mixed.returncode, 2)
            self.assertIn("the traces are of 2 runs", mixed.stderr)
            for run_id, stem in (("77", "mpi"), ("hydra", "hydra")):
                child = subprocess.run([CLI, "report", folder, "--run", run_id, "--json"], capture_output=True,
                                       text=True, timeout=60)
                self.assertEqual(child.returncode, 0, child.stderr)
                run = json.loads(child.stdout)["run"]
                self.assertEqual([(m["rank"], m["world_size"], os.path.basename(m["path"])) for m in run["members"]],
                                 [(i, 2, f"{stem}{i}.pstrace") for i in range(2)], run_id)
                self.assertEqual(run["notes"], [], run_id)


def why_no_host_of_its_own():
    """None when this process may start one with a host name and an /etc/hosts of its own (UTS and mount
    namespaces: root, or a user namespace), else why not."""
    if not shutil.which("unshare"):
        return "no unshare here"
    with tempfile.NamedTemporaryFile("w", suffix=".hosts") as hosts:
        hosts.write("127.0.0.1 psc-probe localhost\n")
        hosts.flush()
        probe = subprocess.run(["unshare", "--uts", "--mount", "sh", "-c",
                                f"hostname psc-probe && mount --bind {hosts.name} /etc/hosts && hostname && "
                                "getent hosts psc-probe"], capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.split()[:2] != ["psc-probe", "127.0.0.1"]:
        return ("unshare --uts --mount cannot give a process its own host name and /etc/hosts here (needs root): "
                + (probe.stderr.strip().splitlines() or ["no reason given"])[-1])
    return None


@unittest.skipIf(WHY_NOT, WHY_NOT)
@unittest.skipUnless(BUILT, "build/peakscope and build/libpeakscope_preload.so are not built (run make)")
class TwoHostsTest(unittest.TestCase):
    """Two nodes as two machines: each in UTS and mount namespaces with a host name ("alpha", "beta") and an
    /etc/hosts of its own, each under its own `peakscope record` writing into one folder (a shared file system),
    each a torchrun of two workers (--nnodes 2 --node_rank N) meeting by c10d rendezvous on the loopback, each
    node one task of `srun --nodes 2 --ntasks-per-node 1` (its variables set by hand). torchrun gives the workers
    the rendezvous id as TORCHELASTIC_RUN_ID, which ties the hosts' traces into one run; each agent holds its srun
    task's SLURM_PROCID, and joins its host's ranks by its `record` as a launcher, not a rank."""

    TOKENS = [256, 512]
    HOSTS = ("alpha", "beta")
    RUN_ID = "two-hosts"
    JOB = "4242"

    @classmethod
    def setUpClass(cls):
        why_not = why_no_host_of_its_own()
        if why_not:
            raise unittest.SkipTest(why_not)
        cls.directory = tempfile.TemporaryDirectory()
        cls.scratch = tempfile.TemporaryDirectory()  # each host's /etc/hosts and torchrun's logs
        endpoint = f"127.0.0.1:{free_port()}"
        nodes = []
        for node_rank, host in enumerate(cls.HOSTS):
            # The agent of the rendezvous' first node tells every worker its host's name as MASTER_ADDR: each
            # host resolves its own name first, and the other's, as hosts of one cluster do.
            hosts = os.path.join(cls.scratch.name, f"{host}.hosts")
            with open(hosts, "w") as file:
                file.write(f"127.0.0.1 {host} localhost\n")
                file.writelines(f"127.0.0.1 {other}\n" for other in cls.HOSTS if other != host)
            trace = os.path.join(cls.directory.name, f"{host}.pstrace")
            command = ["unshare", "--uts", "--mount", "sh", "-c",
                       f'hostname {host} && mount --bind "$0" /etc/hosts && exec "$@"', hosts,
                       CLI, "record", "--host", "-o", trace, "--", *TORCHRUN, *STDIO, *MONITOR,
                       "--log_dir", os.path.join(cls.scratch.name, f"logs-{host}"),
                       "--nnodes", "2", "--node_rank", str(node_rank), "--nproc_per_node", "2",
                       "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint, "--rdzv_id", cls.RUN_ID,
                       WORKLOAD, "--tokens", ",".join(map(str, cls.TOKENS)), "--skew", str(SKEW)]
            srun_task = dict(SLURM_JOB_ID=cls.JOB, SLURM_STEP_ID="0", SLURM_PROCID=str(node_rank),
                             SLURM_LOCALID="0", SLURM_NTASKS="2")
            nodes.append(subprocess.Popen(command, env=clean_environment(**srun_task), stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        cls.outputs = [p.communicate(timeout=240) for p in nodes]
        cls.statuses = [p.returncode for p in nodes]

    @classmethod
    def tearDownClass(cls):
        cls.directory.cleanup()
        cls.scratch.cleanup()

    def run_report(self):
        child = subprocess.run([CLI, "report", self.directory.name, "--json"], capture_output=True, text=True,
                               timeout=120)
        self.assertEqual(child.returncode, 0, child.stderr)
        return json.loads(child.stdout)

    def test_each_host_records_its_agent_and_its_two_ranks(self):
        self.assertEqual(self.statuses, [0, 0], self.outputs)
        names = sorted(os.listdir(self.directory.name))
        self.assertEqual(len(names), 6, names)
        for host in self.HOSTS:
            self.assertIn(f"{host}.pstrace", names)
            ranks = [n for n in names if re.match(rf"^{host}\.r\d+\.{host}\.p\d+\.pstrace$", n)]
            self.assertEqual(len(ranks), 2, names)
        for (out, _), host in zip(self.outputs, self.HOSTS):
            self.assertEqual(out.count("adapters in sync: yes"), 2, out)
            self.assertEqual(len(re.findall(r"ddp_lora: rank \d of 4", out)), 2, out)

    def test_the_folder_reads_as_one_run_of_every_rank_on_both_hosts(self):
        report = self.run_report()
        run = report["run"]
        self.assertEqual((run["id"], run["id_source"], run["traces"]), (self.RUN_ID, "TORCHELASTIC_RUN_ID", 6))
        ranked = [m for m in run["members"] if m["rank"] >= 0]
        self.assertEqual([m["rank"] for m in ranked], [0, 1, 2, 3])
        self.assertEqual([m["world_size"] for m in ranked], [4] * 4)
        # The rendezvous orders nodes by host name: alpha's workers are ranks 0 and 1.
        self.assertEqual([(m["rank"], m["host"]) for m in ranked],
                         [(0, "alpha"), (1, "alpha"), (2, "beta"), (3, "beta")])
        for m in ranked:
            self.assertTrue(os.path.basename(m["path"]).startswith(f"{m['host']}.r{m['rank']}.{m['host']}.p"), m)
        # Each torchrun agent: a member without a rank (its srun task's is no rank of the job), on its host,
        # with nothing of the ranks' waves.
        agents = [m for m in run["members"] if m["rank"] < 0]
        self.assertEqual([(m["host"], os.path.basename(m["path"]), m["world_size"], m["waves"]) for m in agents],
                         [(host, f"{host}.pstrace", 0, []) for host in self.HOSTS])
        self.assertEqual(run["notes"], [f"{m['path']} is a task of srun or mpirun that launched ranks (as torchrun's "
                                        "agent does): not one of the ranks" for m in agents] + ["2 hosts: alpha, beta"])
        for m in agents:  # the file itself keeps what srun said
            self.assertEqual(RecordedRanks.report(m["path"])["trace"]["rank"], self.HOSTS.index(m["host"]))
        self.assertEqual(run["busiest"]["rank"], 3)
        by_path = {r["trace"]["path"]: r for r in report["reports"]}
        for m in ranked:
            trace = by_path[m["path"]]["trace"]
            self.assertEqual((trace["local_rank"], trace["status"], trace["clean_end"]),
                             (m["rank"] % 2, "complete", True))
            self.assertEqual([w["tokens"] for w in m["waves"]], ddp_lora.shard_tokens(self.TOKENS, SKEW, m["rank"]))

    def test_the_export_names_each_rank_and_agent_with_its_host(self):
        out = os.path.join(self.scratch.name, "run.json")
        child = subprocess.run([CLI, "export", self.directory.name, "--format", "chrome", "-o", out],
                               capture_output=True, text=True, timeout=120)
        self.assertEqual(child.returncode, 0, child.stderr)
        self.assertIn("6 traces of run", child.stdout)
        with open(out) as f:
            events = json.load(f)["traceEvents"]
        names = [e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"]
        self.assertEqual(len(names), 6, names)
        for rank, host in enumerate(("alpha", "alpha", "beta", "beta")):
            self.assertEqual(len([n for n in names if n.startswith(f"rank {rank} ({host}, pid ")]), 1, names)
        for host in self.HOSTS:
            self.assertEqual(len([n for n in names if re.match(rf"^pid \d+ \({host}\)", n)]), 1, names)


@unittest.skipIf(WHY_NOT, WHY_NOT)
@unittest.skipUnless(BUILT, "build/peakscope and build/libpeakscope_preload.so are not built (run make)")
class DyingRankTest(unittest.TestCase):
    """The last rank SIGKILLs itself after the forward of its wave 1, once rank 0 has run its waves of the step
    (--die-after-others: torchrun stops the survivor as soon as it sees the rank gone, wherever it is)."""

    TOKENS = [256, 512, 384]
    DIE_AT = 1

    @classmethod
    def setUpClass(cls):
        cls.run_ = RecordedRanks(2, ["--tokens", ",".join(map(str, cls.TOKENS)), "--skew", str(SKEW),
                                     "--die-at-wave", str(cls.DIE_AT), "--die-after-others"])

    @classmethod
    def tearDownClass(cls):
        cls.run_.cleanup()

    def test_the_launcher_fails_naming_the_dead_rank_and_its_signal(self):
        # torchrun's status is 1 whatever ended a worker; its failure report names each.
        self.assertEqual(self.run_.record.returncode, 1, self.run_.record.stderr)
        pid = self.run_.pids[1][0]
        self.assertIn(f"rank      : 1 (local_rank: 1)\n  exitcode  : -9 (pid: {pid})", self.run_.record.stderr)
        self.assertIn(f"Signal 9 (SIGKILL) received by PID {pid}", self.run_.record.stderr)
        self.assertIn("[default1]:rank 1 dies in wave 1 (kill)", self.run_.record.stdout)

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
        # Under gloo the survivor's all-reduce fails at once ("Connection reset by
        # peer") and it ends by itself, or torchrun stops it first (SIGTERM, which
        # the recorder flushes on): either way after its waves.
        report = self.run_.reports[0]
        self.assertEqual(report["trace"]["status"], "complete")
        self.assertEqual([w["tokens"] for w in report["waves"] if w["complete"]], self.TOKENS)


if __name__ == "__main__":
    unittest.main()
