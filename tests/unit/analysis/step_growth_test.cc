// Growth across optimizer steps (analysis/step_growth.h): synthetic training
// loops whose answer is known by construction. Each step runs one wave
// (activations made and freed in it, a gradient made in backward), then
// optimizer/step (its state made in the first step only and kept) and
// optimizer/zero_grad (the gradient freed: set_to_none=True). A planted leak
// keeps one more block per step in train/leaky_cache.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/report_json.h"
#include "analysis/report_text.h"
#include "analysis/run_report.h"
#include "analysis/step_growth.h"
#include "tests/support/export_fixture.h"
#include "tests/support/synthetic_trace.h"
#include "tests/support/test_support.h"

namespace psc {
namespace {

using test_support::TempTrace;

constexpr uint32_t kMain = 0;
constexpr uint64_t kWeights = 1 << 20;
constexpr uint64_t kState = 2 << 20;
constexpr uint64_t kGradient = 1 << 16;
constexpr uint64_t kActivations = 3 << 20;
constexpr uint64_t kLeak = 64 << 10;

SyntheticTrace::Memory host_memory() {
  SyntheticTrace::Memory m;
  m.device = -1;
  m.memory = MemoryKind::kHost;
  m.api = Api::kPosixMemalign;
  return m;
}

SyntheticTrace::Memory device_memory() { return SyntheticTrace::Memory{}; }

struct Loop {
  int steps = 3;
  uint64_t leak = 0;  // bytes kept per step in train/leaky_cache
  int leak_from = 1;  // the first step that leaks
  SyntheticTrace::Memory how = device_memory();
  bool optimizer = true;  // optimizer/step and optimizer/zero_grad ranges
  // A block made once in this step's forward and kept (a lazily built cache); 0 for none.
  int lazy_cache_step = 0;
};

void write_loop(SyntheticTrace& t, const Loop& loop) {
  const SyntheticTrace::Memory& m = loop.how;
  t.alloc(kMain, 0x100000, kWeights, m);
  for (int step = 1; step <= loop.steps; ++step) {
    const uint64_t base = 0x1000000 * static_cast<uint64_t>(step);
    t.wave_begin(kMain, R"({"tokens":128,"slots":["a"],"groups":1,"cold":false})");
    t.push(kMain, "forward/layer.0");
    t.alloc(kMain, base + 1, kActivations, m);
    if (step == loop.lazy_cache_step) t.alloc(kMain, 0x300000, 4096, m);
    t.pop(kMain);
    t.push(kMain, "backward/layer.0");
    t.alloc(kMain, base + 2, kGradient, m);
    t.free(kMain, base + 1, m);
    t.pop(kMain);
    t.wave_end(kMain);
    if (loop.leak && step >= loop.leak_from) {
      t.push(kMain, "train/leaky_cache");
      t.alloc(kMain, base + 3, loop.leak, m);
      t.pop(kMain);
    }
    if (loop.optimizer) t.push(kMain, "optimizer/step");
    if (step == 1) t.alloc(kMain, 0x200000, kState, m);
    t.alloc(kMain, base + 4, 512, m);  // a temporary of the update
    t.free(kMain, base + 4, m);
    if (loop.optimizer) t.pop(kMain);
    if (loop.optimizer) t.push(kMain, "optimizer/zero_grad");
    t.free(kMain, base + 2, m);
    if (loop.optimizer) t.pop(kMain);
  }
}

Analysis analyze_loop(const Loop& loop) {
  TempTrace trace("growth");
  {
    SyntheticTrace t(trace.path);
    write_loop(t, loop);
    t.close();
  }
  return analyze_trace(trace.path);
}

const GrowingRange* find_growing(const StepGrowth& g, const std::string& range) {
  for (const GrowingRange& r : g.growing)
    if (r.range == range) return &r;
  return nullptr;
}

// The leak is reported when the second step ends (two step ends compared),
// with its range, one block per step and nothing else.
TEST(StepGrowth, OneBlockLeakedPerStepIsFoundWhenTheSecondStepEnds) {
  for (const SyntheticTrace::Memory& how : {device_memory(), host_memory()}) {
    SCOPED_TRACE(static_cast<int>(how.memory));
    Loop loop;
    loop.steps = 2;
    loop.leak = kLeak;
    loop.how = how;
    const Analysis a = analyze_loop(loop);
    const StepGrowth& g = a.growth;
    EXPECT_EQ(g.steps, 2u);
    EXPECT_EQ(g.window, 1u);
    ASSERT_EQ(g.growing.size(), 1u);
    const GrowingRange& r = g.growing[0];
    EXPECT_EQ(r.range, "train/leaky_cache");
    EXPECT_EQ(r.layer, kNoLayer);
    EXPECT_EQ(r.bytes_per_step(), kLeak);
    EXPECT_EQ(r.first_step, 1u);
    EXPECT_EQ(r.first_bytes, kLeak);
    EXPECT_EQ(r.last_bytes, 2 * kLeak);
    EXPECT_EQ(r.allocations, 2u);
    EXPECT_EQ(r.rising_steps, 1u);
    // Live at each step end: weights, state and the step's gradient (zero_grad comes after), and the leak.
    ASSERT_EQ(g.step_ends.size(), 2u);
    EXPECT_EQ(g.step_ends[0].live_bytes, kWeights + kState + kGradient + kLeak);
    EXPECT_EQ(g.step_ends[1].live_bytes, kWeights + kState + kGradient + 2 * kLeak);
    EXPECT_EQ(g.step_ends[1].live_allocations, 5u);
    EXPECT_EQ(g.step_ends[1].step, 2u);
  }
}

TEST(StepGrowth, LongerRunsReportTheWholeRiseAndItsRate) {
  for (int steps : {3, 4, 9}) {
    SCOPED_TRACE(steps);
    Loop loop;
    loop.steps = steps;
    loop.leak = kLeak;
    const Analysis a = analyze_loop(loop);
    EXPECT_EQ(a.growth.window, std::min<uint64_t>(static_cast<uint64_t>(steps) - 1, kGrowthWindow));
    ASSERT_EQ(a.growth.growing.size(), 1u);
    const GrowingRange& r = a.growth.growing[0];
    EXPECT_EQ(r.range, "train/leaky_cache");
    EXPECT_EQ(r.bytes_per_step(), kLeak);
    EXPECT_EQ(r.rising_steps, static_cast<uint64_t>(steps) - 1);
    EXPECT_EQ(r.last_bytes, static_cast<uint64_t>(steps) * kLeak);
  }
}

// Weights and optimizer state made once (state in the first step) and kept,
// activations freed inside the wave, gradients freed by zero_grad, the
// update's temporary freed inside the step: nothing grows.
TEST(StepGrowth, SteadyStateIsNotFlagged) {
  for (const SyntheticTrace::Memory& how : {device_memory(), host_memory()}) {
    for (int steps : {2, 3, 6}) {
      SCOPED_TRACE(steps);
      Loop loop;
      loop.steps = steps;
      loop.how = how;
      const Analysis a = analyze_loop(loop);
      EXPECT_EQ(a.growth.steps, static_cast<uint64_t>(steps));
      EXPECT_TRUE(a.growth.growing.empty()) << a.growth.growing.front().range;
      for (const StepEnd& s : a.growth.step_ends) EXPECT_EQ(s.live_bytes, kWeights + kState + kGradient);
      const std::string text = render_analysis_text(a);
      EXPECT_NE(text.find(fmt::format("\ngrowth across optimizer steps: nothing grows over {} step ends (no range's "
                                      "live bytes rose at each of the last {}; 3.06 MiB live at the first, 3.06 MiB "
                                      "at the last)\n",
                                      steps, std::min(steps - 1, 3))),
                std::string::npos)
          << text;
    }
  }
}

// A cache made once, lazily, after the first step: it rises at one step end
// only. From three step ends on (two rises in a row asked for) it is not
// growing, also when it is made in the last step; with two step ends (one
// rise asked for) it cannot be told from a leak yet, and is reported.
TEST(StepGrowth, MemoryMadeOnceInALaterStepIsNotFlaggedFromThreeSteps) {
  for (int steps : {3, 6}) {
    for (int made_in : {2, steps}) {
      SCOPED_TRACE(fmt::format("{} steps, made in step {}", steps, made_in));
      Loop loop;
      loop.steps = steps;
      loop.lazy_cache_step = made_in;
      const Analysis a = analyze_loop(loop);
      EXPECT_TRUE(a.growth.growing.empty()) << a.growth.growing.front().range;
      EXPECT_EQ(a.growth.step_ends.back().live_bytes, kWeights + kState + kGradient + 4096);
    }
  }
  Loop loop;
  loop.steps = 2;
  loop.lazy_cache_step = 2;
  const Analysis a = analyze_loop(loop);
  ASSERT_EQ(a.growth.growing.size(), 1u);
  EXPECT_EQ(a.growth.growing[0].range, "forward/layer.0");
  EXPECT_EQ(a.growth.growing[0].layer, 0);
}

// A leak that starts in step 3 of 6: the rise is counted from the step end
// before it (step 2, nothing live in the range yet).
TEST(StepGrowth, ALeakThatStartsLateIsReportedFromWhereItStarted) {
  Loop loop;
  loop.steps = 6;
  loop.leak = kLeak;
  loop.leak_from = 3;
  const Analysis a = analyze_loop(loop);
  const GrowingRange* r = find_growing(a.growth, "train/leaky_cache");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->first_step, 2u);
  EXPECT_EQ(r->first_bytes, 0u);
  EXPECT_EQ(r->last_bytes, 4 * kLeak);
  EXPECT_EQ(r->bytes_per_step(), kLeak);
}

// A host leak is found beside device memory that stays steady (both are
// allocations of the analysed level).
TEST(StepGrowth, HostLeakBesideSteadyDeviceMemory) {
  TempTrace trace("growth_mixed");
  {
    SyntheticTrace t(trace.path);
    Loop loop;
    loop.steps = 3;
    write_loop(t, loop);  // device memory, steady
    for (int step = 0; step < 3; ++step) {
      t.push(kMain, "host/pinned_buffers");
      t.alloc(kMain, 0x9000000 + static_cast<uint64_t>(step), 8192, host_memory());
      t.pop(kMain);
      t.push(kMain, "optimizer/step");
      t.pop(kMain);
    }
    t.close();
  }
  const Analysis a = analyze_trace(trace.path);
  EXPECT_EQ(a.growth.steps, 6u);
  ASSERT_EQ(a.growth.growing.size(), 1u);
  EXPECT_EQ(a.growth.growing[0].range, "host/pinned_buffers");
  EXPECT_EQ(a.growth.growing[0].bytes_per_step(), 8192u);
  EXPECT_EQ(a.growth.growing[0].first_step, 3u);
}

TEST(StepGrowth, WithoutOptimizerRangesGrowthIsNotMeasured) {
  Loop loop;
  loop.leak = kLeak;
  loop.optimizer = false;
  const Analysis a = analyze_loop(loop);
  EXPECT_EQ(a.growth.steps, 0u);
  EXPECT_TRUE(a.growth.growing.empty());
  EXPECT_NE(render_analysis_text(a).find("no optimizer steps (no `optimizer/step` range): growth not measured"),
            std::string::npos);
  const auto j = analysis_to_json(a);
  EXPECT_EQ(j["growth"]["step_count"], 0);
  EXPECT_TRUE(j["growth"]["steps"].empty());
}

TEST(StepGrowth, OneStepHasNothingToCompare) {
  Loop loop;
  loop.steps = 1;
  loop.leak = kLeak;
  const Analysis a = analyze_loop(loop);
  EXPECT_EQ(a.growth.steps, 1u);
  EXPECT_EQ(a.growth.window, 0u);
  EXPECT_TRUE(a.growth.growing.empty());
  EXPECT_NE(render_analysis_text(a).find(
                "growth across optimizer steps: 1 step (3.12 MiB live at its end): growth needs the ends of at least 2 "
                "steps\n"),
            std::string::npos)
      << render_analysis_text(a);
}

// Only the end of the outermost optimizer/step range is a step end; zero_grad
// and other optimizer ranges are not; NVTX start/end ranges count too.
TEST(StepGrowth, StepBoundariesAreTheOutermostOptimizerStepEnds) {
  TempTrace trace("growth_nested");
  {
    SyntheticTrace t(trace.path);
    for (uint64_t step = 0; step < 3; ++step) {
      t.push(kMain, "optimizer/step");
      t.push(kMain, "optimizer/step");  // an annotated inner optimizer
      t.alloc(kMain, 0x1000 + step, 100);
      t.pop(kMain);
      t.push(kMain, "optimizer/step/foreach");  // a finer range inside the step, not a step
      t.pop(kMain);
      t.pop(kMain);
      t.push(kMain, "optimizer/zero_grad");
      t.pop(kMain);
    }
    t.range_start(kMain, 77, "optimizer/step");
    t.alloc(kMain, 0x2000, 100);
    t.range_end(kMain, 77);
    t.close();
  }
  const Analysis a = analyze_trace(trace.path);
  EXPECT_EQ(a.growth.steps, 4u);
  ASSERT_EQ(a.growth.step_ends.size(), 4u);
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(a.growth.step_ends[i].live_bytes, 100 * (i + 1));
  ASSERT_EQ(a.growth.growing.size(), 1u);
  EXPECT_EQ(a.growth.growing[0].range, "optimizer/step");
  EXPECT_EQ(a.growth.growing[0].bytes_per_step(), 100u);
}

TEST(StepGrowth, RangeParserSaysWhichRangesEndAStep) {
  const RangeParser& p = default_range_parser();
  EXPECT_TRUE(p.ends_step("optimizer/step"));
  EXPECT_FALSE(p.ends_step("optimizer/zero_grad"));
  EXPECT_FALSE(p.ends_step("optimizer/step/foreach"));
  EXPECT_FALSE(p.ends_step("forward/step"));
  EXPECT_FALSE(p.ends_step("step"));
  EXPECT_FALSE(p.ends_step(""));
}

// A long run keeps the first and the last step ends, never all of them.
TEST(StepGrowth, StepEndsKeptAreBounded) {
  const int steps = static_cast<int>(kKeptStepEnds) + 300;
  Loop loop;
  loop.steps = steps;
  loop.leak = 4096;
  const Analysis a = analyze_loop(loop);
  EXPECT_EQ(a.growth.steps, static_cast<uint64_t>(steps));
  ASSERT_EQ(a.growth.step_ends.size(), kKeptStepEnds);
  const size_t half = kKeptStepEnds / 2;
  for (size_t i = 0; i < half; ++i) EXPECT_EQ(a.growth.step_ends[i].step, i + 1);
  for (size_t i = half; i < kKeptStepEnds; ++i)
    EXPECT_EQ(a.growth.step_ends[i].step, static_cast<uint64_t>(steps) - (kKeptStepEnds - i) + 1);
  EXPECT_EQ(a.growth.step_ends.back().live_bytes, kWeights + kState + kGradient + 4096 * static_cast<uint64_t>(steps));
  ASSERT_EQ(a.growth.growing.size(), 1u);
  EXPECT_EQ(a.growth.growing[0].rising_steps, static_cast<uint64_t>(steps) - 1);
  // The text shows the first and the last few.
  const std::string text = render_analysis_text(a);
  EXPECT_NE(text.find(fmt::format("({} steps)", grouped(static_cast<uint64_t>(steps)))), std::string::npos) << text;
  EXPECT_NE(text.find("\n     ...\n"), std::string::npos) << text;
}

TEST(StepGrowth, TextAndJsonNameTheGrowingRange) {
  Loop loop;
  loop.steps = 4;
  loop.leak = kLeak;
  const Analysis a = analyze_loop(loop);
  const std::string text = render_analysis_text(a);
  const size_t waves = text.find("\nwaves (peak is absolute");
  const size_t section =
      text.find("\ngrowth across optimizer steps: live at the end of each `optimizer/step` (4 steps)");
  ASSERT_NE(waves, std::string::npos) << text;
  ASSERT_NE(section, std::string::npos) << text;
  EXPECT_LT(waves, section);
  EXPECT_NE(text.find("growing: live bytes rose at each of the last 3 of 4 step ends (1 range)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("64.00 KiB     256.00 KiB        4   step 1       -  train/leaky_cache"), std::string::npos)
      << text;

  const auto j = analysis_to_json(a);
  const auto& g = j["growth"];
  EXPECT_EQ(g["step_count"], 4);
  EXPECT_EQ(g["window"], 3);
  ASSERT_EQ(g["steps"].size(), 4u);
  EXPECT_EQ(g["steps"][3]["step"], 4);
  EXPECT_EQ(g["steps"][3]["live_bytes"], kWeights + kState + kGradient + 4 * kLeak);
  ASSERT_EQ(g["growing"].size(), 1u);
  const auto& r = g["growing"][0];
  EXPECT_EQ(r["range"], "train/leaky_cache");
  EXPECT_TRUE(r["layer"].is_null());
  EXPECT_EQ(r["bytes_per_step"], kLeak);
  EXPECT_EQ(r["first_step"], 1);
  EXPECT_EQ(r["first_bytes"], kLeak);
  EXPECT_EQ(r["last_step"], 4);
  EXPECT_EQ(r["last_bytes"], 4 * kLeak);
  EXPECT_EQ(r["allocations"], 4);
  EXPECT_EQ(r["rising_steps"], 3);
}

// A run lists each rank's growing ranges.
TEST(StepGrowth, RunReportListsEachRanksGrowth) {
  test::TempDir dir;
  std::vector<Analysis> analyses;
  for (int32_t rank = 0; rank < 2; ++rank) {
    TraceWriterOptions o;
    o.pid = 2000 + static_cast<uint32_t>(rank);
    o.rank = rank;
    o.world_size = 2;
    const std::string path = dir.file("run.r" + std::to_string(rank) + ".pstrace");
    SyntheticTrace t(path, o);
    Loop loop;
    loop.steps = 3;
    loop.leak = rank == 1 ? kLeak : 0;
    write_loop(t, loop);
    t.close();
    analyses.push_back(analyze_trace(path));
  }
  const std::string text = render_run_text(make_run_report(analyses));
  EXPECT_NE(text.find("growth across optimizer steps by rank"), std::string::npos) << text;
  EXPECT_NE(text.find("     0     2000  3 steps, nothing grows\n"), std::string::npos) << text;
  EXPECT_NE(text.find("     1     2001  3 steps, growing: train/leaky_cache +64.00 KiB/step\n"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace psc
