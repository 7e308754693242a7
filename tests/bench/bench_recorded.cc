// Reader throughput on a trace the recorder wrote (make bench records one and
// passes it in PSC_BENCH_TRACE), with a visitor that touches every event, in
// events per second of wall time (chunks decode on other threads too:
// PEAKSCOPE_READ_THREADS=0 keeps them on the reading thread).
#include <cstdlib>

#include <benchmark/benchmark.h>

#include "traces/reader.h"

namespace {

struct Summer : psc::TraceVisitor {
  uint64_t bytes = 0;
  void on_events(const psc::Event* events, size_t count, const psc::TraceMeta&) override {
    for (size_t i = 0; i < count; ++i) bytes += events[i].bytes;
  }
};

void ReadRecordedTrace(benchmark::State& state) {
  const char* path = std::getenv("PSC_BENCH_TRACE");
  if (!path) {
    state.SkipWithError("set PSC_BENCH_TRACE to a .pstrace (make bench does)");
    return;
  }
  uint64_t events = 0;
  for (auto _ : state) {
    Summer summer;
    events += psc::read_trace(path, summer).events;
    benchmark::DoNotOptimize(summer.bytes);
  }
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(ReadRecordedTrace)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
