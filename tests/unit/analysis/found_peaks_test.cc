// The analysis finds the peaks in the read that replays the trace (its first
// read only scans), unless an observer needs them before that read: then the
// first read finds them, as it always did. Both ways must give the same
// answer to the byte, whatever the trace: random traces with waves (nested,
// overlapping, never ended), equal peaks, allocations over live addresses,
// both memory levels, CUPTI's deferred allocations, counters and steps.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/lifetime_pass.h"
#include "analysis/report_json.h"
#include "analysis/report_text.h"
#include "estimator/liveness.h"
#include "tests/support/synthetic_trace.h"
#include "tests/support/test_support.h"

namespace psc {
namespace {

using test_support::TempTrace;

// An observer that only asks for the peaks before the replaying read.
struct NeedsPeaks : LifetimeObserver {
  void on_lifetime(LifetimeView&) override {}
  bool needs_peaks() const override { return true; }
};

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return state_;
  }
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t state_;
};

constexpr uint32_t kThreads = 3;
constexpr uint64_t kAddresses = 48;

std::string range_name(Rng& rng) {
  static const char* kPhases[] = {"forward", "recompute", "backward"};
  switch (rng.below(6)) {
    case 0: return "head/loss";
    case 1: return "optimizer/step";
    default: return std::string(kPhases[rng.below(3)]) + "/layer." + std::to_string(rng.below(4));
  }
}

std::string wave_payload(Rng& rng) {
  const uint64_t tokens = 64 * (1 + rng.below(2));
  return "{\"tokens\":" + std::to_string(tokens) + (rng.below(3) == 0 ? ",\"cold\":true}" : "}");
}

// One memory event at one of a few addresses; sizes repeat, so equal peaks
// and equal groups are common.
void memory(SyntheticTrace& t, Rng& rng, uint32_t thread) {
  static const uint64_t kSizes[] = {64, 128, 256, 4096};
  SyntheticTrace::Memory how;
  const uint64_t kind = rng.below(20);
  if (kind == 0) how.flags = kFlagNested;
  if (kind == 1) how.flags = kFlagFailed;
  if (kind >= 2 && kind < 6) how.flags = kFlagReserved;
  const uint64_t address = 0x10000 + 0x100 * rng.below(kAddresses);
  if (rng.below(2) == 0)
    t.alloc(thread, address, kSizes[rng.below(4)], how);
  else
    t.free(thread, address, how);
}

// Ranges, waves and the rest of what a trace holds besides memory events.
void scope(SyntheticTrace& t, Rng& rng, uint32_t thread, uint64_t* range_ids) {
  switch (rng.below(9)) {
    case 0:
    case 1: t.push(thread, range_name(rng)); return;
    case 2:
    case 3: t.pop(thread); return;
    case 4: t.wave_begin(thread, wave_payload(rng)); return;
    case 5: t.range_start(thread, ++*range_ids, "wave", wave_payload(rng)); return;
    case 6: t.range_end(thread, 1 + rng.below(*range_ids + 1)); return;
    case 7: t.counter(thread, "device_used_bytes", rng.below(1 << 20), 0); return;
    default:
      if (rng.below(2) == 0)
        t.cupti_alloc(thread, t.now_ns() - 500, 0x900000 + 0x100 * rng.below(8), 512, "libcublas.so");
      else
        t.cupti_free(thread, t.now_ns() - 500, 0x900000 + 0x100 * rng.below(8));
      return;
  }
}

void write_random_trace(const std::string& path, uint64_t seed, bool with_scope) {
  Rng rng(seed);
  SyntheticTrace t(path);
  uint64_t range_ids = 0;
  const uint64_t events = 200 + rng.below(2000);
  for (uint64_t i = 0; i < events; ++i) {
    const uint32_t thread = static_cast<uint32_t>(rng.below(kThreads));
    if (with_scope && rng.below(4) == 0)
      scope(t, rng, thread, &range_ids);
    else
      memory(t, rng, thread);
  }
  t.close(rng.below(4) != 0);
}

// Everything the analysis says of a trace, as report prints it.
std::string rendered(const Analysis& a) { return analysis_to_json(a).dump(1) + render_analysis_text(a); }

std::string both_ways(const std::string& path, bool report) {
  NeedsPeaks needs;
  AnalysisOptions first_read_finds;
  first_read_finds.observers.push_back(&needs);
  const Analysis found_by_replay = report ? analyze_report(path) : analyze_trace(path);
  const Analysis found_first = report ? analyze_report(path, first_read_finds) : analyze_trace(path, first_read_finds);
  const std::string replay_text = rendered(found_by_replay);
  EXPECT_EQ(replay_text, rendered(found_first));
  return replay_text;
}

TEST(FoundPeaks, RandomTracesAnswerAsWhenTheFirstReadFindsThem) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TempTrace trace("found_peaks");
    write_random_trace(trace.path, seed, /*with_scope=*/seed % 5 != 0);
    both_ways(trace.path, /*report=*/false);
    both_ways(trace.path, /*report=*/true);
  }
}

// The first of equal peaks is the one reported, with what was live there:
// the allocation that makes a later equal peak must not take its place.
TEST(FoundPeaks, EqualPeaksReportTheFirst) {
  TempTrace trace("equal_peaks");
  {
    SyntheticTrace t(trace.path);
    t.push(0, "forward/layer.0");
    t.alloc(0, 0x100, 100);
    t.alloc(0, 0x200, 50);  // the peak: 150
    t.pop(0);
    t.free(0, 0x200);
    t.push(0, "backward/layer.1");
    t.alloc(0, 0x300, 50);  // 150 again
    t.free(0, 0x300);
    t.alloc(0, 0x100, 150);  // over the live 0x100: 150 once more
    t.pop(0);
    t.close();
  }
  both_ways(trace.path, false);
  const Analysis a = analyze_trace(trace.path);
  EXPECT_EQ(a.peak.bytes, 150u);
  EXPECT_EQ(a.peak.site.range, "forward/layer.0");
  EXPECT_EQ(a.peak.live.bytes, 150u);
  EXPECT_EQ(a.peak.live.allocations, 2u);
  for (const LiveGroup& g : a.peak.live.groups) EXPECT_EQ(g.range, "forward/layer.0");
}

}  // namespace
}  // namespace psc
