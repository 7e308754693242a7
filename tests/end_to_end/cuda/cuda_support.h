// Shared by the CUDA integration tests (tests/end_to_end/cuda/cuda_*_test.cc): run a
// client from $(BUILD)/cuda under the preloaded recorder against the test
// doubles in $(BUILD)/fakes, then read back the trace, the doubles' own counts
// and what the client printed.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/test_support.h"
#include "traces/reader.h"

namespace psc::cuda_test {

namespace fs = std::filesystem;

using test_support::build_dir;
using test_support::run_shell;
using test_support::Scratch;
inline std::string preload() { return build_dir() + "/libpeakscope_preload.so"; }
inline std::string fakes() { return build_dir() + "/fakes"; }
inline std::string client(const std::string& name) { return build_dir() + "/cuda/" + name; }

// "name value" lines (the doubles' counts, the clients' output); later lines win.
using Values = std::map<std::string, std::string>;

inline Values read_values(const std::string& path) {
  Values v;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto space = line.find(' ');
    if (space != std::string::npos) v[line.substr(0, space)] = line.substr(space + 1);
  }
  return v;
}

inline uint64_t number(const Values& v, const std::string& key) {
  auto it = v.find(key);
  return it == v.end() ? 0 : std::stoull(it->second);
}

struct ClientRun {
  int status = -1;
  LoadedTrace trace;
  Values driver;   // the fake libcuda's counts
  Values runtime;  // the fake libcudart's counts
  Values output;   // what the client printed
  std::string stderr_text;
};

// Runs `command` (a client and its arguments) with the recorder preloaded
// unless `with_preload` is false. `env` adds "NAME=value ..." assignments.
inline ClientRun run_client(const Scratch& s, const std::string& command, const std::string& env = "",
                            bool with_preload = true) {
  ClientRun r;
  const std::string trace = s.path("trace.pstrace");
  std::string prefix = "LD_LIBRARY_PATH=" + fakes() + " FAKE_CUDA_COUNTS=" + s.path("driver.counts") +
                       " FAKE_CUDART_COUNTS=" + s.path("runtime.counts") + " FAKE_PRIMARY_PID=$$ PEAKSCOPE_QUIET=1 ";
  if (with_preload) {
    // As `peakscope record` does: the shell execs the client, so its pid is the shell's.
    prefix =
        "exec env " + prefix + "LD_PRELOAD=" + preload() + " PEAKSCOPE_OUTPUT=" + trace + " PEAKSCOPE_PRIMARY_PID=$$ ";
  } else {
    prefix = "exec env " + prefix;
  }
  r.status =
      run_shell("sh -c '" + prefix + env + " " + command + " >" + s.path("out.txt") + " 2>" + s.path("err.txt") + "'");
  r.output = read_values(s.path("out.txt"));
  r.driver = read_values(s.path("driver.counts"));
  r.runtime = read_values(s.path("runtime.counts"));
  std::ifstream err(s.path("err.txt"));
  r.stderr_text.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  if (with_preload && fs::exists(trace)) r.trace = load_trace(trace);
  return r;
}

inline bool nested(const Event& e) { return (e.flags & kFlagNested) != 0; }
inline bool failed(const Event& e) { return (e.flags & kFlagFailed) != 0; }

inline std::vector<Event> select(const LoadedTrace& t, EventKind kind, Api api) {
  std::vector<Event> out;
  for (const Event& e : t.events)
    if (e.kind == kind && e.api == api) out.push_back(e);
  return out;
}

// Live bytes over outer (non-nested, successful) allocations and frees, as
// analysis counts them; registered host memory is not new memory.
struct Replay {
  uint64_t allocs = 0, frees = 0, allocated = 0, freed = 0, live = 0, peak = 0;
};
inline Replay replay(const LoadedTrace& t) {
  Replay r;
  for (const Event& e : t.events) {
    if (!is_memory_event(e.kind) || nested(e) || failed(e) || e.memory == MemoryKind::kRegisteredHost) continue;
    if (e.kind == EventKind::kAlloc) {
      ++r.allocs;
      r.allocated += e.bytes;
      r.live += e.bytes;
      r.peak = std::max(r.peak, r.live);
    } else {
      ++r.frees;
      r.freed += e.bytes;
      r.live -= e.bytes;
    }
  }
  return r;
}

// Fails the test with the reason when a client did not run cleanly.
#define ASSERT_CLIENT_RAN(run)                                                                                       \
  ASSERT_EQ((run).status, 0) << "client failed (did `make` build " << build_dir() << "/cuda and /fakes?); stderr:\n" \
                             << (run).stderr_text

}  // namespace psc::cuda_test
