// Reader and analysis throughput on a synthetic trace of a few million
// alloc/free events (written once with the same encoder the recorder uses).
// Targets: read_trace with a trivial visitor over 20 M events/s; `top`'s
// follower feeding the live view over 5 M events/s (BM_FollowLiveView: the
// same trace followed from its start to its end mark, then a snapshot).
//
//   build/benchmarks --benchmark_filter='Reader|Analysis'
//   PEAKSCOPE_BENCH_EVENTS=8000000 build/benchmarks ...   (default 4 M events)
//   PEAKSCOPE_BENCH_TRACE=big.pstrace ...   writes the trace there and keeps it
//                                          (for `peakscope report` / `export` on it)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "analysis/analysis.h"
#include "analysis/live_view.h"
#include "estimator/liveness.h"
#include "exchange/export_model.h"
#include "tests/support/synthetic_trace.h"
#include "traces/follower.h"
#include "traces/reader.h"

namespace psc {
namespace {

uint64_t bench_events() {
  const char* text = std::getenv("PEAKSCOPE_BENCH_EVENTS");
  const uint64_t n = text ? std::strtoull(text, nullptr, 10) : 0;
  return n > 0 ? n : 4'000'000;
}

// A LoRA-like pattern: 8 threads, each with a range per "layer" that changes
// every few thousand events, and a working set of a few thousand live blocks
// so frees hit addresses allocated long before (hash table, not a stack).
// With `steps`, an optimizer/step range every 64 K alloc/free pairs (about 60
// in 4 M events): the second read then also measures growth across steps.
class BenchTrace {
 public:
  explicit BenchTrace(bool steps = false) {
    const char* keep = std::getenv("PEAKSCOPE_BENCH_TRACE");
    keep_ = keep && *keep && !steps;
    path_ = keep_ ? std::string(keep)
                  : (std::filesystem::temp_directory_path() / ("psc_bench_" + std::to_string(::getpid()) + ".pstrace"))
                        .string();
    SyntheticTrace t(path_);
    constexpr uint32_t kThreads = 8;
    constexpr uint64_t kWorkingSet = 4096;
    const uint64_t pairs = bench_events() / 2;
    uint64_t rng = 0x2545F4914F6CDD1Dull;
    for (uint64_t i = 0; i < pairs; ++i) {
      const uint32_t thread = static_cast<uint32_t>(i % kThreads);
      if (i % 4096 == 0) {
        if (i) t.pop(thread);
        t.push(thread, "backward/layer." + std::to_string((i / 4096) % 32));
      }
      rng ^= rng << 13;
      rng ^= rng >> 7;
      rng ^= rng << 17;
      if (steps && i % 65536 == 65535) {
        t.push(0, "optimizer/step");
        t.pop(0);
      }
      const uint64_t slot = rng % kWorkingSet;
      const uint64_t address = 0x7f0000000000ull + (static_cast<uint64_t>(thread) << 32) + slot * 512;
      if (live_[thread][slot]) t.free(thread, address);
      t.alloc(thread, address, 512 + (rng >> 50));
      live_[thread][slot] = true;
    }
    t.close();
    events_ = t.events();
    bytes_ = std::filesystem::file_size(path_);
  }
  ~BenchTrace() {
    if (!keep_) std::remove(path_.c_str());
  }
  const std::string& path() const { return path_; }
  uint64_t events() const { return events_; }
  uint64_t bytes() const { return bytes_; }

 private:
  std::string path_;
  bool keep_ = false;
  uint64_t events_ = 0;
  uint64_t bytes_ = 0;
  bool live_[8][4096] = {};
};

const BenchTrace& bench_trace() {
  static const BenchTrace trace;
  return trace;
}

const BenchTrace& bench_trace_with_steps() {
  static const BenchTrace trace(/*steps=*/true);
  return trace;
}

struct CountingVisitor : TraceVisitor {
  uint64_t events = 0;
  uint64_t checksum = 0;
  void on_events(const Event* e, size_t n, const TraceMeta&) override {
    events += n;
    checksum += e[n - 1].bytes;
  }
};

void BM_ReaderTrivialVisitor(benchmark::State& state) {
  const BenchTrace& trace = bench_trace();
  uint64_t events = 0;
  for (auto _ : state) {
    CountingVisitor visitor;
    read_trace(trace.path(), visitor);
    benchmark::DoNotOptimize(visitor.checksum);
    events += visitor.events;
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["bytes/event"] = static_cast<double>(trace.bytes()) / static_cast<double>(trace.events());
  state.counters["events"] = static_cast<double>(trace.events());
}
BENCHMARK(BM_ReaderTrivialVisitor)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_FollowLiveView(benchmark::State& state) {
  const BenchTrace& trace = bench_trace();
  uint64_t events = 0;
  for (auto _ : state) {
    TraceFollower follower(trace.path());
    LiveView view;
    uint64_t polls = 0;
    while (!follower.poll(view).over()) ++polls;
    const LiveSnapshot s = view.snapshot();
    benchmark::DoNotOptimize(s.peak_bytes);
    benchmark::DoNotOptimize(polls);
    events += follower.status().events;
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_FollowLiveView)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_AnalysisTwoPasses(benchmark::State& state) {
  const BenchTrace& trace = bench_trace();
  uint64_t events = 0;
  for (auto _ : state) {
    const Analysis a = analyze_trace(trace.path());
    benchmark::DoNotOptimize(a.peak.bytes);
    events += a.trace.status.events;
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AnalysisTwoPasses)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same with optimizer steps: the cost of growth across steps
// (analysis/step_growth.h), which a trace without step ranges does not pay.
void BM_StepsAnalysisTwoPasses(benchmark::State& state) {
  const BenchTrace& trace = bench_trace_with_steps();
  uint64_t events = 0;
  for (auto _ : state) {
    const Analysis a = analyze_trace(trace.path());
    benchmark::DoNotOptimize(a.growth.steps);
    events += a.trace.status.events;
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_StepsAnalysisTwoPasses)->Unit(benchmark::kMillisecond)->UseRealTime();

// What `peakscope report` does per trace, the figure `make bench` prints as
// the analysis' throughput: both reads, the breakdowns and liveness'
// categories (analyze_report), in events of the trace per second of wall time.
void BM_AnalysisReport(benchmark::State& state) {
  const BenchTrace& trace = bench_trace();
  uint64_t events = 0;
  for (auto _ : state) {
    const Analysis a = analyze_report(trace.path());
    benchmark::DoNotOptimize(a.peak.bytes);
    events += a.trace.status.events;
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["events"] = static_cast<double>(trace.events());
}
BENCHMARK(BM_AnalysisReport)->Unit(benchmark::kMillisecond)->UseRealTime();

// What calibrate and check read per trace: the analysis with liveness as an
// observer of its second read (two reads in all).
void BM_LivenessTwoReads(benchmark::State& state) {
  const BenchTrace& trace = bench_trace();
  uint64_t events = 0;
  for (auto _ : state) {
    const Liveness l = analyze_liveness(trace.path());
    benchmark::DoNotOptimize(l.layers);
    events += l.analysis.trace.status.events;
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_LivenessTwoReads)->Unit(benchmark::kMillisecond)->UseRealTime();

// What every exporter reads before its own read: the analysis with the
// category log and samples collected in its second read.
void BM_ExportModelTwoReads(benchmark::State& state) {
  const BenchTrace& trace = bench_trace();
  uint64_t events = 0;
  ExportModelOptions options;
  options.sample_points = 512;
  for (auto _ : state) {
    const ExportModel m = build_export_model(trace.path(), options);
    benchmark::DoNotOptimize(m.samples.size());
    events += m.analysis.trace.status.events;
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ExportModelTwoReads)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace psc
