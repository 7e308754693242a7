// NVTX injection through its real loading path: tests/nvtx/nvtx_program (three
// NVTX instances: its own and two shared objects') runs under `peakscope
// record`, or with LD_PRELOAD and NVTX_INJECTION64_PATH set by hand, and the
// trace's NVTX events are compared with the calls the program makes. A fake
// injection (tests/nvtx/fake_tool.cc) stands in for Nsight Systems to check
// chaining: with peakscope in front it must see exactly what it sees alone.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

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
std::string program() { return build_dir() + "/nvtx/nvtx_program"; }
std::string fake_tool() { return build_dir() + "/nvtx/libpsc_nvtx_fake_tool.so"; }

struct Outcome {
  int status = -1;
  std::string out, err;
};

Outcome shell(const Scratch& s, const std::string& command) {
  Outcome r;
  const std::string out = s.path("stdout"), err = s.path("stderr");
  const int status = std::system(("timeout 60 sh -c '" + command + "' >" + out + " 2>" + err).c_str());
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// `env` is a list of VAR=value words put in front of `peakscope record`.
Outcome record(const Scratch& s, const std::string& trace, const std::string& args, const std::string& env = "") {
  return shell(s, env + " " + cli() + " record --force -o " + trace + " -- " + program() + " " + args);
}

// The recorder and the injection set up by hand, as docs/nvtx.md describes.
Outcome preloaded(const Scratch& s, const std::string& trace, const std::string& args) {
  return shell(s, "export PEAKSCOPE_PRIMARY_PID=$$ PEAKSCOPE_OUTPUT=" + trace + " LD_PRELOAD=" + preload() +
                      " NVTX_INJECTION64_PATH=" + preload() + "; exec " + program() + " " + args);
}

// The program with the fake tool as the only injection (no peakscope).
Outcome tool_alone(const Scratch& s, const std::string& log, const std::string& args) {
  return shell(s, "export FAKE_NVTX_TOOL_LOG=" + log + " NVTX_INJECTION64_PATH=" + fake_tool() + "; exec " + program() +
                      " " + args);
}

std::map<std::string, uint64_t> tool_log(const std::string& path) {
  std::map<std::string, uint64_t> values;
  std::ifstream in(path);
  std::string key;
  uint64_t value;
  while (in >> key >> value) values[key] = value;
  return values;
}

std::vector<Event> nvtx_events(const LoadedTrace& t) {
  std::vector<Event> out;
  for (const Event& e : t.events) {
    if (e.api == Api::kNvtx) out.push_back(e);
  }
  return out;
}

// One line per NVTX event; start/end ids become #1, #2... in order of first use.
std::vector<std::string> render(const LoadedTrace& t) {
  std::vector<std::string> lines;
  std::map<uint64_t, int> ids;
  auto id = [&](uint64_t raw) {
    auto [it, fresh] = ids.emplace(raw, static_cast<int>(ids.size()) + 1);
    return "#" + std::to_string(it->second);
  };
  for (const Event& e : nvtx_events(t)) {
    const std::string name(t.meta.string(e.name)), payload(t.meta.string(e.payload));
    switch (e.kind) {
      case EventKind::kRangePush: lines.push_back("push " + name); break;
      case EventKind::kRangePop: lines.push_back("pop " + name); break;
      case EventKind::kMark: lines.push_back("mark " + name + (payload.empty() ? "" : " " + payload)); break;
      case EventKind::kRangeStart: lines.push_back("start" + id(e.address) + " " + name); break;
      case EventKind::kRangeEnd: lines.push_back("end" + id(e.address)); break;
      default: lines.push_back(std::string("other ") + event_kind_name(e.kind));
    }
  }
  return lines;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

// What `nvtx_program sequence` does, event by event.
const std::vector<std::string> kSequence = {
    "push wave",
    "mark wave {\"tokens\": 7, \"cold\": true}",
    "push forward/layer.0",
    "push backward/layer.1 \u00fcn\u00ef",
    "pop backward/layer.1 \u00fcn\u00ef",
    "push recompute/layer.2",
    "pop recompute/layer.2",
    "push NCCL::AllReduce",
    "mark NCCL::sync",
    "pop NCCL::AllReduce",
    "push forward/layer.5",
    "pop forward/layer.5",
    "start#1 head/loss",
    "end#1",
    "start#2 NCCL::AllReduce",
    "end#2",
    "mark step {\"payload\": 42}",
    "mark lr {\"payload\": -0.25}",
    "mark \u00e9t\u00e9",
    "push \u03a9mega::x",
    "push \u03a9mega::w\u00ee",
    "pop \u03a9mega::w\u00ee",
    "pop \u03a9mega::x",
    "push (unnamed)",
    "pop (unnamed)",
    "pop forward/layer.0",
    "pop wave",
};
const char* kSequenceDepths = "depths: 0 1 2 2 2 2 2 2 2 2 2 3 3 2 2 2 1 0\n";

void expect_clean(const LoadedTrace& t) {
  EXPECT_TRUE(t.status.complete());
  EXPECT_TRUE(t.meta.clean_end);
  EXPECT_EQ(t.meta.dropped_total(), 0u);
}

TEST(NvtxInjection, EveryKindOfCallFromThreeInstancesIsRecordedExactly) {
  Scratch s;
  const std::string trace = s.path("t.pstrace");
  Outcome r = record(s, trace, "sequence");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, kSequenceDepths) << "push/pop return the 0-based level, as NVTX specifies";
  EXPECT_EQ(r.err.find("chain"), std::string::npos) << r.err;
  LoadedTrace t = load_trace(trace);
  expect_clean(t);
  EXPECT_EQ(joined(render(t)), joined(kSequence));
  std::set<uint32_t> threads;
  for (const Event& e : nvtx_events(t)) {
    threads.insert(e.thread);
    // A mark inside a domain range is attributed to it like any event.
    if (t.meta.string(e.name) == "NCCL::sync") {
      EXPECT_EQ(t.meta.string(e.range), "NCCL::AllReduce");
    }
  }
  EXPECT_EQ(threads.size(), 1u);
}

TEST(NvtxInjection, PlainDomainNamingDropsThePrefix) {
  Scratch s;
  const std::string trace = s.path("t.pstrace");
  ASSERT_EQ(record(s, trace, "sequence", "PEAKSCOPE_NVTX_DOMAINS=plain").status, 0);
  const std::string text = joined(render(load_trace(trace)));
  EXPECT_NE(text.find("push AllReduce\nmark sync\npop AllReduce\n"), std::string::npos) << text;
  EXPECT_NE(text.find("push x\npush w\u00ee\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("::"), std::string::npos) << text;
}

struct ThreadView {
  int worker = -1;  // t of "forward/layer.<t>"
  std::vector<std::string> lines;
};

TEST(NvtxInjection, ThreadsNestPerThreadAndEndRangesStartedElsewhere) {
  Scratch s;
  constexpr int kThreads = 4, kRounds = 300;
  const std::string trace = s.path("t.pstrace");
  ASSERT_EQ(record(s, trace, "threads " + std::to_string(kThreads) + " " + std::to_string(kRounds)).status, 0);
  LoadedTrace t = load_trace(trace);
  expect_clean(t);

  std::map<uint32_t, ThreadView> threads;
  std::map<uint64_t, uint32_t> started_on;  // range id -> thread index
  std::map<uint64_t, uint32_t> ended_on;
  for (const Event& e : nvtx_events(t)) {
    ThreadView& view = threads[e.thread];
    const std::string name(t.meta.string(e.name));
    if (e.kind == EventKind::kRangePush && name.rfind("forward/layer.", 0) == 0)
      view.worker = std::stoi(name.substr(14));
    if (e.kind == EventKind::kRangeStart) {
      EXPECT_TRUE(started_on.emplace(e.address, e.thread).second) << "range id " << e.address << " reused";
      view.lines.push_back("start " + name);
    } else if (e.kind == EventKind::kRangeEnd) {
      EXPECT_TRUE(ended_on.emplace(e.address, e.thread).second) << "range " << e.address << " ended twice";
    } else {
      view.lines.push_back((e.kind == EventKind::kRangePush  ? "push "
                            : e.kind == EventKind::kRangePop ? "pop "
                                                             : "mark ") +
                           name);
    }
  }
  ASSERT_EQ(threads.size(), static_cast<size_t>(kThreads));
  for (auto& [index, view] : threads) {
    ASSERT_GE(view.worker, 0);
    const std::string w = std::to_string(view.worker);
    const std::vector<std::string> round = {"push forward/layer." + w, "push NCCL::t" + w, "mark tick",
                                            "start prefetch." + w,     "pop NCCL::t" + w,  "pop forward/layer." + w};
    ASSERT_EQ(view.lines.size(), round.size() * kRounds) << "thread of worker " << w;
    for (size_t i = 0; i < view.lines.size(); ++i) ASSERT_EQ(view.lines[i], round[i % round.size()]) << "event " << i;
  }
  ASSERT_EQ(started_on.size(), static_cast<size_t>(kThreads * kRounds));
  ASSERT_EQ(ended_on.size(), started_on.size());
  for (auto [id, start_thread] : started_on) {
    ASSERT_TRUE(ended_on.count(id)) << "range " << id << " never ended";
    const uint32_t end_thread = ended_on[id];
    EXPECT_NE(end_thread, start_thread);
    EXPECT_EQ(threads[start_thread].worker, (threads[end_thread].worker + 1) % kThreads)
        << "worker t ends the ranges worker t+1 started";
  }
}

TEST(NvtxInjection, ConcurrentFirstCallsAndRepeatedInitialisationAreSafe) {
  constexpr int kThreads = 12;
  for (int attempt = 0; attempt < 4; ++attempt) {
    Scratch s;
    const std::string trace = s.path("t.pstrace");
    Outcome r = preloaded(s, trace, "concurrent-init " + std::to_string(kThreads));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "reinit: 12 of 12\n") << "a repeated InitializeInjectionNvtx2 succeeds";
    LoadedTrace t = load_trace(trace);
    expect_clean(t);
    std::map<uint32_t, std::multiset<std::string>> per_thread;
    for (const Event& e : nvtx_events(t))
      per_thread[e.thread].insert(std::string(event_kind_name(e.kind)) + " " + std::string(t.meta.string(e.name)));
    ASSERT_EQ(per_thread.size(), static_cast<size_t>(kThreads)) << "attempt " << attempt;
    std::map<std::string, int> first_calls;
    for (auto& [thread, seen] : per_thread) {
      EXPECT_EQ(seen.size(), 7u) << "init push/pop, three marks, one push/pop after re-initialisation";
      for (const char* mark : {"all.main", "all.core", "all.domains"})
        EXPECT_EQ(seen.count(std::string(event_kind_name(EventKind::kMark)) + " " + mark), 1u) << mark;
      EXPECT_EQ(seen.count(std::string(event_kind_name(EventKind::kRangePush)) + " after.reinit"), 1u)
          << "recorded once: re-initialisation must not install a second layer of hooks";
      for (const char* first : {"init.main", "init.core", "init.domains"})
        first_calls[first] +=
            static_cast<int>(seen.count(std::string(event_kind_name(EventKind::kRangePush)) + " " + first));
    }
    for (auto& [name, count] : first_calls) EXPECT_EQ(count, kThreads / 3) << name;
  }
}

TEST(NvtxInjection, ChainedToolSeesExactlyWhatItSeesAlone) {
  Scratch s;
  const std::string alone_log = s.path("alone.log"), chained_log = s.path("chained.log");
  Outcome alone = tool_alone(s, alone_log, "sequence");
  ASSERT_EQ(alone.status, 0) << alone.err;
  const auto expected = tool_log(alone_log);
  ASSERT_EQ(expected.at("errors"), 0u);
  ASSERT_EQ(expected.at("inits"), 3u) << "one per NVTX instance";
  ASSERT_GT(expected.at("core.9"), 0u);

  const std::string trace = s.path("t.pstrace");
  Outcome r =
      record(s, trace, "sequence", "FAKE_NVTX_TOOL_LOG=" + chained_log + " NVTX_INJECTION64_PATH=" + fake_tool());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("chains to it"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chained to"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, alone.out) << "push/pop return what the chained tool returns";
  const auto seen = tool_log(chained_log);
  EXPECT_EQ(seen, expected) << "counts per slot, handles the tool issued, message checksum";
  EXPECT_EQ(seen.at("instances"), 3u);
  EXPECT_EQ(seen.at("core.12"), 1u) << "nvtxNameCategoryA reaches the tool though peakscope does not hook it";
  EXPECT_EQ(seen.at("core2.8"), 1u) << "nvtxDomainNameCategoryA, with the tool's own domain handle";
  EXPECT_EQ(seen.at("core2.14"), 1u) << "nvtxDomainDestroy";

  LoadedTrace t = load_trace(trace);
  expect_clean(t);
  EXPECT_EQ(joined(render(t)), joined(kSequence)) << "the recorder sees the same as without a chained tool";
}

TEST(NvtxInjection, ChainedToolGetsItsOwnRangeIdsAcrossThreadsAndOneInitPerInstance) {
  Scratch s;
  for (const std::string args : {"threads 4 200", "concurrent-init 12"}) {
    const std::string alone_log = s.path("alone.log"), chained_log = s.path("chained.log");
    ASSERT_EQ(tool_alone(s, alone_log, args).status, 0);
    const std::string trace = s.path("t.pstrace");
    Outcome r = record(s, trace, args, "FAKE_NVTX_TOOL_LOG=" + chained_log + " NVTX_INJECTION64_PATH=" + fake_tool());
    ASSERT_EQ(r.status, 0) << r.err;
    const auto expected = tool_log(alone_log), seen = tool_log(chained_log);
    EXPECT_EQ(expected.at("errors"), 0u) << args;
    EXPECT_EQ(seen, expected) << args << ": every range end reached the tool with the id it issued";
    EXPECT_EQ(seen.at("inits"), 3u) << args << ": repeated InitializeInjectionNvtx2 calls do not re-run the tool's";
    const size_t recorded = nvtx_events(load_trace(trace)).size();
    EXPECT_EQ(recorded, args[0] == 't' ? 4u * 200u * 7u : 12u * 7u) << args;
  }
}

// What `nvtx_program names` does: the CUDA (driver) and CUDART (runtime)
// resource-naming calls of a fourth instance, then a mark of the program's own.
const std::vector<std::string> kNames = {
    R"(mark nvtx.resource_name {"kind":"stream","api":"cudart","handle":28672,"name":"copy stream"})",
    R"(mark nvtx.resource_name {"kind":"stream","api":"cuda","handle":28928,"name":"nccl \"ring\""})",
    R"(mark nvtx.resource_name {"kind":"context","api":"cuda","handle":20480,"name":"main context"})",
    R"(mark nvtx.resource_name {"kind":"device","api":"cudart","handle":0,"name":"gpu0"})",
    R"(mark nvtx.resource_name {"kind":"device","api":"cuda","handle":1,"name":"gpu1"})",
    "mark nvtx.resource_name {\"kind\":\"stream\",\"api\":\"cudart\",\"handle\":29184,\"name\":\"fl\u00fc\u00df\"}",
    "mark nvtx.resource_name {\"kind\":\"context\",\"api\":\"cuda\",\"handle\":20736,\"name\":\"ctx \u03a9\"}",
    R"(mark nvtx.resource_name {"kind":"event","api":"cuda","handle":36864,"name":"ev"})",
    R"(mark nvtx.resource_name {"kind":"event","api":"cudart","handle":37120,"name":"done"})",
    R"(mark nvtx.resource_name {"kind":"stream","api":"cuda","handle":18446603336526616184,"name":"high"})",
    "mark names.done",
};

TEST(NvtxInjection, CudaResourceNamesBecomeMarksWithKindApiHandleAndName) {
  Scratch s;
  const std::string trace = s.path("t.pstrace");
  Outcome r = record(s, trace, "names");
  ASSERT_EQ(r.status, 0) << r.err;
  LoadedTrace t = load_trace(trace);
  expect_clean(t);
  EXPECT_EQ(joined(render(t)), joined(kNames));
}

TEST(NvtxInjection, ChainedToolStillGetsEveryResourceNamingCall) {
  Scratch s;
  const std::string alone_log = s.path("alone.log"), chained_log = s.path("chained.log");
  ASSERT_EQ(tool_alone(s, alone_log, "names").status, 0);
  const auto expected = tool_log(alone_log);
  ASSERT_EQ(expected.at("errors"), 0u);
  // Slots the program calls: CUDA 1 (device A), 3 and 4 (context A/W), 5 (stream A, twice), 8 (event W);
  // CUDART 1 (device A), 3 and 4 (stream A/W), 5 (event A).
  const std::map<std::string, uint64_t> calls = {{"cuda.1", 1},   {"cuda.2", 0},   {"cuda.3", 1},   {"cuda.4", 1},
                                                 {"cuda.5", 2},   {"cuda.6", 0},   {"cuda.7", 0},   {"cuda.8", 1},
                                                 {"cudart.1", 1}, {"cudart.2", 0}, {"cudart.3", 1}, {"cudart.4", 1},
                                                 {"cudart.5", 1}, {"cudart.6", 0}};
  for (const auto& [slot, count] : calls) EXPECT_EQ(expected.at(slot), count) << slot << " (tool alone)";

  const std::string trace = s.path("t.pstrace");
  Outcome r = record(s, trace, "names", "FAKE_NVTX_TOOL_LOG=" + chained_log + " NVTX_INJECTION64_PATH=" + fake_tool());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("chained to"), std::string::npos) << r.err;
  const auto seen = tool_log(chained_log);
  EXPECT_EQ(seen, expected) << "same counts per slot, same names and handles (checksum) with peakscope in front";
  EXPECT_EQ(seen.at("inits"), 2u) << "the program's instance and libpsc_nvtx_cuda's";
  EXPECT_EQ(joined(render(load_trace(trace))), joined(kNames)) << "the recorder sees them all too";
}

TEST(NvtxInjection, RecordDoesNotChainToItself) {
  Scratch s;
  const std::string trace = s.path("t.pstrace");
  Outcome r = record(s, trace, "sequence", "NVTX_INJECTION64_PATH=" + preload());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("chain"), std::string::npos) << r.err;
  EXPECT_EQ(joined(render(load_trace(trace))), joined(kSequence));
}

TEST(NvtxInjection, AChainedToolThatCannotLoadIsReportedAndRecordingGoesOn) {
  Scratch s;
  const std::string trace = s.path("t.pstrace");
  Outcome r = record(s, trace, "sequence", "NVTX_INJECTION64_PATH=" + s.path("missing.so"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("cannot load the chained injection library"), std::string::npos) << r.err;
  EXPECT_EQ(joined(render(load_trace(trace))), joined(kSequence));
}

}  // namespace
}  // namespace psc
