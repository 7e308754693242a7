// The recorder through its real loading path: programs whose allocation
// pattern is known exactly run under `peakscope record` (or LD_PRELOAD set by
// hand), and the traces are checked event by event.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/test_support.h"
#include "traces/reader.h"

namespace psc {
namespace {

namespace fs = std::filesystem;
using test_support::build_dir;
using test_support::cli;
using test_support::preload;
using test_support::run;
using test_support::Scratch;
using test_support::slurp;

std::string program() { return build_dir() + "/programs/host_pattern"; }

int record(const std::string& trace, const std::string& args, const std::string& env = "") {
  return run(env + " " + cli() + " record --host -o " + trace + " -- " + program() + " " + args + " 2>/dev/null");
}

struct Replay {
  uint64_t allocs = 0, frees = 0, peak = 0, live = 0;
  std::map<uint32_t, uint64_t> per_thread;
  bool contiguous = true;
};

Replay replay(const LoadedTrace& t) {
  Replay r;
  uint64_t expected_seq = 1;
  for (const Event& e : t.events) {
    r.contiguous &= e.seq == expected_seq++;
    ++r.per_thread[e.thread];
    if (e.kind == EventKind::kAlloc) {
      ++r.allocs;
      r.live += e.bytes;
      r.peak = std::max(r.peak, r.live);
    } else if (e.kind == EventKind::kFree) {
      ++r.frees;
      r.live -= e.bytes;
    }
  }
  return r;
}

TEST(Recorder, SingleThreadPeakIsExactToTheByte) {
  Scratch s;
  ASSERT_EQ(record(s.path("t.pstrace"), "peak 100 123457"), 0);
  LoadedTrace t = load_trace(s.path("t.pstrace"));
  Replay r = replay(t);
  EXPECT_TRUE(t.status.complete());
  EXPECT_TRUE(t.meta.clean_end);
  EXPECT_EQ(t.meta.dropped_total(), 0u);
  EXPECT_EQ(r.allocs, 100u);
  EXPECT_EQ(r.frees, 100u);
  EXPECT_EQ(r.peak, 100u * 123457u);
  EXPECT_EQ(r.live, 0u);
  EXPECT_TRUE(r.contiguous);
  EXPECT_NE(t.meta.command.find("host_pattern peak 100 123457"), std::string::npos);
  EXPECT_EQ(t.meta.header.flags & format::kHeaderHostMode, format::kHeaderHostMode);
  EXPECT_EQ(static_cast<int>(t.events[0].memory), static_cast<int>(MemoryKind::kHost));
  EXPECT_EQ(t.events[0].api, Api::kPosixMemalign);
}

TEST(Recorder, SixteenThreadsLoseNothing) {
  Scratch s;
  constexpr int kThreads = 16;
  constexpr long kPairs = 200000;  // the 16 x 1M figure is in `make bench`
  ASSERT_EQ(record(s.path("t.pstrace"), "pairs 16 200000 4096"), 0);
  LoadedTrace t = load_trace(s.path("t.pstrace"));
  Replay r = replay(t);
  EXPECT_TRUE(t.meta.clean_end);
  EXPECT_EQ(t.meta.dropped_total(), 0u);
  EXPECT_EQ(t.meta.late_events, 0u);
  EXPECT_EQ(t.events.size(), 2u * kThreads * kPairs);
  EXPECT_TRUE(r.contiguous) << "sequence numbers must run 1..N with no gap: a gap is a lost event";
  EXPECT_EQ(r.per_thread.size(), static_cast<size_t>(kThreads));
  for (auto [thread, count] : r.per_thread) EXPECT_EQ(count, 2u * kPairs) << "thread " << thread;
  EXPECT_EQ(r.live, 0u);
  EXPECT_LE(r.peak, 4096u * kThreads);
  EXPECT_GE(r.peak, 4096u);
}

// Threads that fill a small ring, publish a last partial ring and exit at once,
// in waves so that buffers are handed from dead threads to new ones. A writer
// that frees a buffer after reading its head but before learning its thread
// died loses that last partial ring (this test caught that).
TEST(Recorder, ShortLivedThreadsLoseNothing) {
  Scratch s;
  constexpr int kWaves = 12, kThreads = 8, kPairs = 3000;
  ASSERT_EQ(record(s.path("t.pstrace"), "churn 12 8 3000", "PEAKSCOPE_BUFFER_EVENTS=256"), 0);
  LoadedTrace t = load_trace(s.path("t.pstrace"));
  Replay r = replay(t);
  EXPECT_EQ(t.meta.dropped_total(), 0u);
  EXPECT_EQ(t.events.size(), 2u * kWaves * kThreads * kPairs);
  EXPECT_TRUE(r.contiguous);
  EXPECT_EQ(r.live, 0u);
  EXPECT_LE(r.per_thread.size(), static_cast<size_t>(kWaves * kThreads));
}

uint64_t monotonic_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Times are CLOCK_MONOTONIC ns whichever clock stamped the events (runtime/clock.h:
// TSC ticks mapped by the writer where the TSC is invariant): inside the run,
// and never backwards on a thread.
TEST(Recorder, EventTimesAreMonotonicNanosecondsOnEitherClock) {
  for (const std::string clock : {"auto", "monotonic"}) {
    Scratch s;
    const uint64_t before = monotonic_now_ns();
    ASSERT_EQ(record(s.path("t.pstrace"), "pairs 2 50000 4096", "PEAKSCOPE_CLOCK=" + clock), 0);
    const uint64_t after = monotonic_now_ns();
    LoadedTrace t = load_trace(s.path("t.pstrace"));
    ASSERT_EQ(t.events.size(), 200000u) << clock;
    if (clock == "monotonic") {
      EXPECT_EQ(t.meta.header.flags & format::kHeaderClockTsc, 0u) << "never the TSC";
    }
    std::map<uint32_t, uint64_t> last;
    for (const Event& e : t.events) {
      ASSERT_GE(e.time_ns, before) << clock << " seq " << e.seq;
      ASSERT_LE(e.time_ns, after) << clock << " seq " << e.seq;
      ASSERT_GE(e.time_ns, last[e.thread]) << clock << " seq " << e.seq << ": backwards on its thread";
      last[e.thread] = e.time_ns;
    }
  }
}

TEST(Recorder, EveryHostBlockIsRecordedByDefault) {
  Scratch s;
  ASSERT_EQ(record(s.path("t.pstrace"), "realloc"), 0);
  LoadedTrace t = load_trace(s.path("t.pstrace"));
  EXPECT_EQ(t.events.size(), 6u) << "the 1000-byte block too";
  EXPECT_NE(t.meta.header.flags & format::kHeaderHostEveryBlock, 0u);
  ASSERT_EQ(record(s.path("f.pstrace"), "realloc", "PEAKSCOPE_HOST_MIN_BYTES=4096"), 0);
  EXPECT_EQ(load_trace(s.path("f.pstrace")).meta.header.flags & format::kHeaderHostEveryBlock, 0u)
      << "a floor hides blocks: the header says so";
}

TEST(Recorder, ReallocOfATrackedBlockIsAFreeThenAnAlloc) {
  Scratch s;
  ASSERT_EQ(record(s.path("t.pstrace"), "realloc", "PEAKSCOPE_HOST_MIN_BYTES=4096"), 0);
  LoadedTrace t = load_trace(s.path("t.pstrace"));
  ASSERT_EQ(t.events.size(), 4u) << "the 1000-byte block is under the 4 KiB floor";
  EXPECT_EQ(t.events[0].kind, EventKind::kAlloc);
  EXPECT_EQ(t.events[0].bytes, 100000u);
  EXPECT_EQ(t.events[1].kind, EventKind::kFree);
  EXPECT_EQ(t.events[1].api, Api::kRealloc);
  EXPECT_EQ(t.events[1].address, t.events[0].address);
  EXPECT_EQ(t.events[2].kind, EventKind::kAlloc);
  EXPECT_EQ(t.events[2].bytes, 300000u);
  EXPECT_EQ(t.events[3].kind, EventKind::kFree);
  EXPECT_EQ(t.events[3].bytes, 300000u);
  EXPECT_EQ(replay(t).peak, 300000u);
}

TEST(Recorder, ThresholdComesFromTheEnvironment) {
  Scratch s;
  auto count = [&](const std::string& args) {
    const std::string trace = s.path("t.pstrace");
    EXPECT_EQ(run(cli() + " record --force --host --host-min-bytes 150000 -o " + trace + " -- " + program() + " " +
                  args + " 2>/dev/null"),
              0);
    return load_trace(trace).events.size();
  };
  EXPECT_EQ(count("peak 10 100000"), 0u);
  EXPECT_EQ(count("peak 10 150000"), 20u);
}

TEST(Recorder, RangesAndMarksFromTheCApiAttributeAllocations) {
  Scratch s;
  ASSERT_EQ(record(s.path("t.pstrace"), "ranges"), 0);
  LoadedTrace t = load_trace(s.path("t.pstrace"));
  std::map<uint64_t, std::string> alloc_range;
  std::string payload;
  int pushes = 0, pops = 0;
  for (const Event& e : t.events) {
    if (e.kind == EventKind::kAlloc) alloc_range[e.bytes] = std::string(t.meta.string(e.range));
    if (e.kind == EventKind::kMark) payload = std::string(t.meta.string(e.payload));
    pushes += e.kind == EventKind::kRangePush;
    pops += e.kind == EventKind::kRangePop;
  }
  EXPECT_EQ(pushes, 3);
  EXPECT_EQ(pops, 3);
  EXPECT_EQ(alloc_range[1 << 20], "");
  EXPECT_EQ(alloc_range[100000], "forward/layer.0");
  EXPECT_EQ(alloc_range[200000], "backward/layer.0");
  EXPECT_NE(payload.find("\"tokens\": 16"), std::string::npos);
}

TEST(Recorder, SigkillLeavesAReadableTrace) {
  Scratch s;
  const std::string trace = s.path("killed.pstrace");
  const std::string preload = build_dir() + "/libpeakscope_preload.so";
  const std::string exe = program();
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], 1);
    setenv("PEAKSCOPE_HOST", "1", 1);
    setenv("PEAKSCOPE_OUTPUT", trace.c_str(), 1);
    setenv("PEAKSCOPE_PRIMARY_PID", std::to_string(getpid()).c_str(), 1);  // as `record` does
    setenv("LD_PRELOAD", preload.c_str(), 1);
    execl(exe.c_str(), exe.c_str(), "hold", "50", "100000", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  char line[16] = {};
  ASSERT_EQ(read(out[0], line, 6), 6);
  ASSERT_STREQ(line, "ready\n");
  // The writer flushes at least every 50 ms (PEAKSCOPE_FLUSH_MS); give it a few periods.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(out[0]);
  ASSERT_TRUE(WIFSIGNALED(status));
  LoadedTrace t = load_trace(trace);
  EXPECT_FALSE(t.meta.clean_end) << "a killed process cannot close its trace";
  Replay r = replay(t);
  EXPECT_EQ(r.allocs, 50u);
  EXPECT_EQ(r.live, 50u * 100000u);
}

TEST(Recorder, AbortFlushesAndTheExitStatusPassesThrough) {
  Scratch s;
  EXPECT_EQ(record(s.path("t.pstrace"), "abort 20 100000"), 128 + SIGABRT);
  LoadedTrace t = load_trace(s.path("t.pstrace"));
  EXPECT_EQ(replay(t).allocs, 20u);
  EXPECT_FALSE(t.meta.clean_end);
}

TEST(Recorder, ForkNeitherDeadlocksNorCorruptsTheParent) {
  Scratch s;
  const std::string trace = s.path("f.pstrace");
  ASSERT_EQ(
      run("timeout 60 " + cli() + " record --host -o " + trace + " -- " + program() + " fork 10 100000 2>/dev/null"),
      0);
  LoadedTrace parent = load_trace(trace);
  EXPECT_TRUE(parent.status.complete());
  EXPECT_TRUE(parent.meta.clean_end);
  Replay r = replay(parent);
  EXPECT_TRUE(r.contiguous);
  EXPECT_EQ(r.live, 0u);
  EXPECT_GE(r.peak, 10u * 100000u);
  for (const Event& e : parent.events) EXPECT_NE(e.bytes, 200000u) << "a child's allocation leaked into the parent";
  int children = 0;
  for (const auto& entry : fs::directory_iterator(s.dir())) {
    if (entry.path() == trace) continue;
    LoadedTrace child = load_trace(entry.path());
    ++children;
    EXPECT_EQ(child.meta.header.parent_pid, parent.meta.header.pid);
    ASSERT_EQ(child.events.size(), 2u) << entry.path();
    EXPECT_EQ(child.events[0].bytes, 200000u);
    EXPECT_NE(entry.path().filename().string().find(".p" + std::to_string(child.meta.header.pid) + ".pstrace"),
              std::string::npos);
  }
  EXPECT_EQ(children, 4);
}

TEST(Recorder, ForkStopPolicyWritesNoChildTraces) {
  Scratch s;
  ASSERT_EQ(run(cli() + " record --host --fork stop -o " + s.path("f.pstrace") + " -- " + program() +
                " fork 4 100000 2>/dev/null"),
            0);
  int files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(s.dir())) ++files;
  EXPECT_EQ(files, 1);
}

TEST(RecordCommand, ExitCodesPassThroughAndBadUsageIsTwo) {
  Scratch s;
  EXPECT_EQ(record(s.path("t.pstrace"), "exit 3"), 3);
  EXPECT_EQ(run(cli() + " record -o " + s.path("x.pstrace") + " -- /nonexistent/program 2>/dev/null"), 127);
  EXPECT_EQ(run(cli() + " record --level bogus -- true 2>/dev/null"), 2);
  EXPECT_EQ(run(cli() + " record 2>/dev/null"), 2);
  EXPECT_EQ(run(cli() + " record --frobnicate -- true 2>/dev/null"), 2);
}

TEST(RecordCommand, WithoutHostModeNothingIsRecordedButTheTraceExists) {
  Scratch s;
  ASSERT_EQ(run(cli() + " record -o " + s.path("t.pstrace") + " -- " + program() + " peak 10 100000 2>/dev/null"), 0);
  LoadedTrace t = load_trace(s.path("t.pstrace"));
  EXPECT_TRUE(t.events.empty());
  EXPECT_TRUE(t.meta.clean_end);
}

}  // namespace
}  // namespace psc
