// The first-execution allowance: what a cold wave's first executions keep
// past its end (plans and caches, one set per new shape) against what they
// make and free again inside it (scratch, held by one shape at a time), and
// how a cold wave of several group shapes is charged for them.
#include <gtest/gtest.h>

#include <string>

#include "estimator/calibration.h"
#include "estimator/liveness.h"
#include "estimator/predict.h"
#include "tests/support/synthetic_trace.h"
#include "tests/support/test_support.h"

namespace psc {
namespace {

using test_support::TempTrace;

constexpr uint32_t kMain = 0;
constexpr uint64_t kScratch = 7;  // made and freed by a cold wave's first executions
constexpr uint64_t kKept = 11;    // made by a cold wave and kept: the new shape's cache

// One wave of `t` tokens: a layer's recompute makes 10t bytes, its backward
// frees them. A cold wave's first executions also make kScratch bytes and
// free them (in the same range, or with `apart` in the backward: held from
// one range to another, as a group's forward to its backward while other
// groups run), and make kKept bytes that stay live to the end of the trace.
// With `workspace`, the wave also makes that many bytes and keeps them (what
// a process's first wave keeps: a library's workspace).
// With `gradient`, its backward also makes kGradient bytes of adapter
// gradient at that address (a step's first wave; the optimizer frees them).
constexpr uint64_t kGradient = 1000;
void wave(SyntheticTrace& s, uint64_t base, uint64_t t, bool cold, bool apart = false, uint64_t workspace = 0,
          uint64_t gradient = 0) {
  s.wave_begin(kMain, "{\"tokens\": " + std::to_string(t) +
                          ", \"slots\": [\"a\"], \"groups\": 1, \"cold\": " + (cold ? "true" : "false") + "}");
  s.push(kMain, "recompute/layer.0");
  s.alloc(kMain, base + 1, 10 * t);
  if (cold) {
    s.alloc(kMain, base + 2, kScratch);
    s.alloc(kMain, base + 3, kKept);
    if (workspace) s.alloc(kMain, base + 4, workspace);
    if (!apart) s.free(kMain, base + 2);
  }
  s.pop(kMain);
  s.push(kMain, "backward/layer.0");
  if (cold && apart) s.free(kMain, base + 2);
  if (gradient) s.alloc(kMain, gradient, kGradient);
  s.free(kMain, base + 1);
  s.pop(kMain);
  s.wave_end(kMain);
}

// Two steps of waves of 10 and 20 tokens: each size cold the first time;
// the process's first wave also keeps `workspace` bytes.
Calibration calibrated(const std::string& path, bool apart = false, uint64_t workspace = 0) {
  {
    SyntheticTrace s(path);
    for (int step = 0; step < 2; ++step) {
      wave(s, 0x1000 * static_cast<uint64_t>(2 * step + 1), 10, step == 0, apart, step == 0 ? workspace : 0);
      wave(s, 0x1000 * static_cast<uint64_t>(2 * step + 2), 20, step == 0, apart);
    }
    s.close();
  }
  const Liveness l = analyze_liveness(path);
  EXPECT_EQ(l.waves.size(), 4u);
  if (l.waves.size() == 4) {
    EXPECT_EQ(l.waves[0].first_execution_max_live_bytes, kScratch + kKept + workspace);
    EXPECT_EQ(l.waves[0].first_execution_kept_bytes, (apart ? kScratch + kKept : kKept) + workspace);
    EXPECT_EQ(l.waves[2].first_execution_kept_bytes, 0u);  // warm
  }
  return calibrate({l});
}

TEST(FirstExecution, WhatAColdWaveKeepsIsChargedPerNewShapeAndItsScratchOnce) {
  TempTrace trace("first-execution");
  const Calibration c = calibrated(trace.path);
  EXPECT_EQ(c.first_execution_pairs, 2u);
  // One new shape: its scratch and its cache live together.
  EXPECT_EQ(c.first_execution_bytes, kScratch + kKept);
  EXPECT_EQ(c.first_execution_per_shape_bytes, kKept);
  EXPECT_EQ(c.first_execution_once_bytes, kScratch);
  EXPECT_EQ(first_execution_allowance(c, 1, false), kScratch + kKept);
  // Three shapes, each maybe new: three caches, one scratch at a time (the
  // whole allowance per shape would have been 54).
  EXPECT_EQ(first_execution_allowance(c, 3, false), kScratch + 3 * kKept);
  EXPECT_EQ(calibrated_plan(c, true, 20, 3, false).transient_bytes, static_cast<pricing::Bytes>(kScratch + 3 * kKept));
  EXPECT_EQ(calibrated_plan(c, false, 20, 3).profiled, true);
  // A wave that may be the process's first: what the first wave kept (it
  // cannot say how much of it is the process's, how much its shape's) and a
  // later shape's cache beside it.
  EXPECT_EQ(first_execution_allowance(c, 1), kScratch + 2 * kKept);
}

// Made in one range and freed in another, first-execution memory may be
// live while other groups run: a wave of several new shapes holds it once
// per shape.
TEST(FirstExecution, WhatOneRangeMakesAndAnotherFreesIsChargedPerNewShape) {
  TempTrace trace("first-execution-apart");
  const Calibration c = calibrated(trace.path, true);
  EXPECT_EQ(c.first_execution_bytes, kScratch + kKept);
  EXPECT_EQ(c.first_execution_per_shape_bytes, kScratch + kKept);
  EXPECT_EQ(c.first_execution_once_bytes, 0u);
  EXPECT_EQ(first_execution_allowance(c, 3, false), 3 * (kScratch + kKept));
}

TEST(FirstExecution, TheSplitSurvivesTheJsonAndOlderCalibrationsChargeTheWholeAllowancePerShape) {
  TempTrace trace("first-execution-json");
  const Calibration c = calibrated(trace.path);
  CalibrationJson j = calibration_to_json(c);
  EXPECT_EQ(j["first_execution"]["per_new_shape_bytes"], kKept);
  EXPECT_EQ(j["first_execution"]["once_bytes"], kScratch);
  const Calibration back = calibration_from_json(j);
  EXPECT_EQ(first_execution_allowance(back, 3, false), kScratch + 3 * kKept);
  // Written before the split (one allowance, "bytes"): every shape was
  // charged all of it, as then.
  for (const char* key : {"per_new_shape_bytes", "once_bytes", "after_first_wave_bytes", "first_wave_pairs"})
    j["first_execution"].erase(key);
  const uint64_t bytes = j["first_execution"]["bytes"];
  const Calibration old = calibration_from_json(j);
  EXPECT_EQ(first_execution_allowance(old, 1), bytes);
  EXPECT_EQ(first_execution_allowance(old, 3, false), 3 * bytes);
  j["first_execution"]["per_new_shape_bytes"] = nullptr;  // null reads as absent
  EXPECT_EQ(first_execution_allowance(calibration_from_json(j), 3), 3 * bytes);
  // Counts near the limit saturate rather than wrap.
  Calibration huge = back;
  huge.first_execution_per_shape_bytes = UINT64_MAX / 2;
  EXPECT_EQ(first_execution_allowance(huge, 4), UINT64_MAX);
}

// A process's first wave keeps what the process holds from then on (a
// library's workspace); the cold waves after it only what their new shape
// adds. Each is charged where it belongs: the first wave's allowance to a
// wave that may be the process's first, the later waves' to the others.
TEST(FirstExecution, TheProcesssFirstWaveIsChargedWhatItKeepsOnlyWhereItMayBeFirst) {
  constexpr uint64_t kWorkspace = 96;
  TempTrace trace("first-execution-first-wave");
  const Calibration c = calibrated(trace.path, false, kWorkspace);
  EXPECT_EQ(c.first_execution_pairs, 2u);
  EXPECT_EQ(c.first_execution_first_wave_pairs, 1u);
  EXPECT_EQ(c.first_execution_bytes, kScratch + kKept);
  EXPECT_EQ(c.first_execution_per_shape_bytes, kKept);
  // The first wave's scratch and everything it kept, and a later shape's
  // cache beside it: the workspace cannot be told apart from the first
  // shape's own cache, so a first wave at another shape pays both.
  constexpr uint64_t kFirstWave = kScratch + kKept + kWorkspace + kKept;
  EXPECT_EQ(c.first_execution_first_wave_bytes, kFirstWave);
  EXPECT_EQ(first_execution_allowance(c, 1), kFirstWave);
  EXPECT_EQ(first_execution_allowance(c, 3), kFirstWave + 2 * kKept);
  EXPECT_EQ(first_execution_allowance(c, 1, false), kScratch + kKept);
  EXPECT_EQ(first_execution_allowance(c, 3, false), kScratch + 3 * kKept);
  EXPECT_EQ(calibrated_plan(c, true, 20, 1, false).transient_bytes, static_cast<pricing::Bytes>(kScratch + kKept));
  // Through the request: cold is priced as a first wave unless told otherwise.
  WaveRequest request;
  request.tokens = 20;
  request.cold = true;
  const uint64_t first = static_cast<uint64_t>(predict(c, request).price.raw_bytes);
  request.after_first_wave = true;
  EXPECT_EQ(first - static_cast<uint64_t>(predict(c, request).price.raw_bytes), kFirstWave - kScratch - kKept);
  // The JSON's "bytes" is the first wave's, all a reader that knows of no
  // first wave charges; the later waves' allowance goes beside it.
  CalibrationJson j = calibration_to_json(c);
  EXPECT_EQ(j["first_execution"]["bytes"], kFirstWave);
  EXPECT_EQ(j["first_execution"]["after_first_wave_bytes"], kScratch + kKept);
  EXPECT_EQ(j["first_execution"]["first_wave_pairs"], 1u);
  const Calibration back = calibration_from_json(j);
  EXPECT_EQ(back.first_execution_bytes, kScratch + kKept);
  EXPECT_EQ(back.first_execution_first_wave_bytes, kFirstWave);
  EXPECT_EQ(first_execution_allowance(back, 3, false), kScratch + 3 * kKept);
  // Without it (written before): every cold wave pays "bytes".
  j["first_execution"].erase("after_first_wave_bytes");
  const Calibration old = calibration_from_json(j);
  EXPECT_EQ(first_execution_allowance(old, 1), kFirstWave);
  EXPECT_EQ(first_execution_allowance(old, 1, false), kFirstWave);
}

// Where no cold wave came after a process's first, the first waves' own
// measure is all there is: every cold wave pays it.
TEST(FirstExecution, WithOnlyFirstWavesColdEveryColdWavePaysTheirs) {
  constexpr uint64_t kWorkspace = 96;
  TempTrace trace("first-execution-only-first");
  {
    SyntheticTrace s(trace.path);
    wave(s, 0x1000, 10, true, false, kWorkspace);
    wave(s, 0x2000, 10, false);
    s.close();
  }
  const Calibration c = calibrate({analyze_liveness(trace.path)});
  EXPECT_EQ(c.first_execution_bytes, kScratch + kKept + kWorkspace);
  EXPECT_EQ(first_execution_allowance(c, 1, false), kScratch + kKept + kWorkspace);
}

// An accumulating trainer's step makes its adapter gradients in its first
// wave and adds to them in the others; a data loader's steps need not begin
// with the same wave. A cold wave that began a step, beside a warm twin that
// did not, peaks higher by the gradients it made, which prices charge on
// their own: they are not a first execution's, or a cold wave would pay for
// its gradients twice.
TEST(FirstExecution, GradientsAColdWaveMadeAndItsTwinDidNotAreNoFirstExecution) {
  TempTrace trace("first-execution-gradients");
  {
    SyntheticTrace s(trace.path);
    // Step 0 begins with 10 tokens, step 1 with 20: each size makes the
    // gradients cold or warm, not both.
    for (int step = 0; step < 2; ++step) {
      const uint64_t base = 0x1000 * static_cast<uint64_t>(2 * step + 1);
      if (step == 0) {
        wave(s, base, 10, true, false, 0, 0x9000);
        wave(s, base + 0x1000, 20, true);
      } else {
        wave(s, base, 20, false, false, 0, 0x9000);
        wave(s, base + 0x1000, 10, false);
      }
      s.push(kMain, "optimizer/step");
      s.free(kMain, 0x9000);
      s.pop(kMain);
    }
    s.close();
  }
  const Liveness l = analyze_liveness(trace.path);
  ASSERT_EQ(l.waves.size(), 4u);
  ASSERT_EQ(l.waves[0].warm_twin, 3);
  // The cold 10-token wave's gradients are at its peak, its twin made none.
  EXPECT_EQ(l.waves[0].at_peak_bytes[static_cast<size_t>(Category::kAdapterGradient)], kGradient);
  EXPECT_EQ(l.waves[3].at_peak_bytes[static_cast<size_t>(Category::kAdapterGradient)], 0u);
  EXPECT_EQ(l.waves[0].measured_peak_bytes, l.waves[3].measured_peak_bytes + kKept + kGradient);
  const Calibration c = calibrate({l});
  EXPECT_EQ(c.first_execution_first_wave_bytes, kScratch + kKept + kKept);
  EXPECT_EQ(c.first_execution_bytes, kScratch + kKept);
}

}  // namespace
}  // namespace psc
