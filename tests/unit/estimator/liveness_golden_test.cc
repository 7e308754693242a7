// Golden traces for the liveness terms, calibration and check, whose answer is
// known by construction: a two-layer LoRA step written event by event, sizes
// proportional to the wave's tokens, so every term, fit and price below
// follows from the schedule in step() by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>
#include <string>

#include "estimator/calibration.h"
#include "estimator/check.h"
#include "estimator/liveness.h"
#include "estimator/margin.h"
#include "tests/support/synthetic_trace.h"
#include "tests/support/test_support.h"

namespace psc {
namespace {

using test_support::TempTrace;

constexpr uint32_t kMain = 0;
constexpr uint64_t kWeights = 1000;
constexpr uint64_t kGradient = 20;  // adapter gradient per layer, independent of tokens
constexpr uint64_t kWarmUp = 7;     // allocated only by a cold wave (first execution)

// One wave of `t` tokens. Activations of 10t (embedding output E, layer
// outputs X1 X2, head gradient G, input gradients IG1 IG0), logits 3t, forward
// scratch 5t, recompute workspace 4t. `grads`: the wave makes the adapter
// gradients (the step's first wave); later waves accumulate in place.
// `early_free`: each layer's backward frees its workspace before it makes its
// gradient (the workspace has shrunk by the time the gradient exists).
// `resize`: layer 1's workspace is that many bytes larger (a data-dependent
// shape: same range and order, another size). `scores`: layer 1's recompute
// also makes (and frees) t^2 bytes, as attention scores do. `stray`: it
// first makes and frees 8 bytes, as a library may at some sizes only.
// `temporaries` (a wave that accumulates): each layer's backward makes a
// temporary of the gradient's size where a gradient wave makes the
// gradient, and frees it at once (1: added to the gradient before the
// input gradient is made) or after the input gradient (2).
void step(SyntheticTrace& s, uint64_t base, uint64_t t, bool cold, bool grads, bool early_free = false,
          uint64_t resize = 0, bool scores = false, bool stray = false, int temporaries = 0) {
  const auto temporary = [&](uint64_t at, bool made) {
    if (grads || temporaries == 0) return;
    if (made) s.alloc(kMain, at, kGradient);
    if (made == (temporaries == 1)) s.free(kMain, at);
  };
  s.wave_begin(kMain, "{\"tokens\": " + std::to_string(t) +
                          ", \"slots\": [\"a\"], \"groups\": 1, \"cold\": " + (cold ? "true" : "false") + "}");
  const uint64_t E = base + 1, S = base + 2, X1 = base + 3, X2 = base + 4, L = base + 5, G = base + 6;
  const uint64_t W1 = base + 7, IG1 = base + 8, W0 = base + 9, IG0 = base + 10, K = base + 11;
  s.push(kMain, "head/embedding");
  s.alloc(kMain, E, 10 * t);
  s.pop(kMain);
  s.push(kMain, "forward/layer.0");
  s.alloc(kMain, S, 5 * t);
  s.free(kMain, S);
  s.alloc(kMain, X1, 10 * t);
  s.pop(kMain);
  s.push(kMain, "forward/layer.1");
  s.alloc(kMain, X2, 10 * t);
  s.pop(kMain);
  s.push(kMain, "head/lm_head");
  s.alloc(kMain, L, 3 * t);
  s.alloc(kMain, G, 10 * t);
  s.free(kMain, L);
  s.free(kMain, X2);
  s.pop(kMain);
  s.push(kMain, "recompute/layer.1");
  if (stray) {
    s.alloc(kMain, base + 12, 8);
    s.free(kMain, base + 12);
  }
  if (cold) s.alloc(kMain, K, kWarmUp);
  s.alloc(kMain, W1, 4 * t + resize);
  if (scores) {
    s.alloc(kMain, base + 13, t * t);
    s.free(kMain, base + 13);
  }
  s.pop(kMain);
  s.push(kMain, "backward/layer.1");
  if (early_free) s.free(kMain, W1);
  if (grads) s.alloc(kMain, 0x3001, kGradient);
  temporary(base + 14, true);
  s.alloc(kMain, IG1, 10 * t);
  temporary(base + 14, false);
  if (!early_free) s.free(kMain, W1);
  if (cold) s.free(kMain, K);
  s.free(kMain, X1);
  s.free(kMain, G);
  s.pop(kMain);
  s.push(kMain, "recompute/layer.0");
  s.alloc(kMain, W0, 4 * t);
  s.pop(kMain);
  s.push(kMain, "backward/layer.0");
  if (early_free) s.free(kMain, W0);
  if (grads) s.alloc(kMain, 0x3000, kGradient);
  temporary(base + 15, true);
  s.alloc(kMain, IG0, 10 * t);
  temporary(base + 15, false);
  if (!early_free) s.free(kMain, W0);
  s.free(kMain, E);
  s.free(kMain, IG1);
  s.pop(kMain);
  s.push(kMain, "head/embedding");
  s.free(kMain, IG0);
  s.pop(kMain);
  s.wave_end(kMain);
}

void optimizer(SyntheticTrace& s) {
  s.push(kMain, "optimizer/step");
  s.free(kMain, 0x3000);
  s.free(kMain, 0x3001);
  s.pop(kMain);
}

// Steps of two waves each (t, then 2t), cold the first time each size runs.
void write_steps(const std::string& path, uint64_t t, int steps, bool early_free = false, int temporaries = 0) {
  SyntheticTrace s(path);
  s.alloc(kMain, 0x1000, kWeights);
  for (int k = 0; k < steps; ++k) {
    step(s, 0x10000 * (2 * k + 1), t, k == 0, true, early_free);
    step(s, 0x10000 * (2 * k + 2), 2 * t, k == 0, false, early_free, 0, false, false, temporaries);
    optimizer(s);
  }
  s.close();
}

TEST(LivenessGolden, TermsOfTheHandBuiltWave) {
  TempTrace trace("terms");
  write_steps(trace.path, 10, 2);
  const Liveness l = analyze_liveness(trace.path);
  ASSERT_EQ(l.layers, 2);
  ASSERT_EQ(l.waves.size(), 4u);

  const WaveLiveness& w = l.waves[2];  // warm, t = 10, makes the gradients
  EXPECT_FALSE(w.cold);
  EXPECT_EQ(w.tokens, 10);
  EXPECT_EQ(w.boundary_bytes, (std::vector<uint64_t>{100, 100}));
  EXPECT_EQ(w.pending_gradient_bytes, (std::vector<uint64_t>{kGradient, kGradient}));
  EXPECT_EQ(w.gradient_live_at_start_bytes, (std::vector<uint64_t>{0, 0}));
  EXPECT_EQ(w.workspace_bytes, 40u);
  // G (the head's gradient into layer 1) and IG1 overlap, then IG1 and IG0.
  EXPECT_EQ(w.input_gradient_bytes, 200u);
  EXPECT_EQ(w.output_bytes, 0u);        // logits and X2 died before the backward
  EXPECT_EQ(w.head_saved_bytes, 130u);  // X2 and the logits, before the head's backward
  EXPECT_EQ(w.forward_scratch_bytes, 50u);
  // Peak: E + X1 + G + W1 + gradient(1) + IG1, at IG1 in backward/layer.1.
  EXPECT_EQ(w.measured_peak_bytes, 100u + 100 + 100 + 40 + kGradient + 100);
  EXPECT_EQ(w.peak_in, (RangeName{Phase::kBackward, 1}));
  EXPECT_EQ(w.at_peak_bytes[static_cast<size_t>(Category::kBoundary)], 200u);
  EXPECT_EQ(w.at_peak_bytes[static_cast<size_t>(Category::kAdapterGradient)], kGradient);

  // Both layers make their gradient while their workspace is live: all of the
  // workspace is left once the gradient exists (layer 0's W0 = 40 with its 20).
  EXPECT_EQ(w.workspace_after_gradient_bytes, 40);

  // The second wave of a step finds the gradients live: baseline, not pending.
  const WaveLiveness& second = l.waves[3];
  EXPECT_EQ(second.workspace_after_gradient_bytes, -1);  // made no gradient
  EXPECT_EQ(second.pending_gradient_bytes, (std::vector<uint64_t>{0, 0}));
  EXPECT_EQ(second.gradient_live_at_start_bytes, (std::vector<uint64_t>{kGradient, kGradient}));
  EXPECT_EQ(second.baseline_bytes, kWeights + 2 * kGradient);
}

TEST(LivenessGolden, ColdWavePairsWithWarmByRangeAndOrder) {
  TempTrace trace("cold");
  write_steps(trace.path, 10, 2);
  const Liveness l = analyze_liveness(trace.path);
  const WaveLiveness& cold = l.waves[0];
  ASSERT_TRUE(cold.cold);
  EXPECT_EQ(cold.warm_twin, 2);
  EXPECT_EQ(cold.first_execution_bytes, kWarmUp);
  EXPECT_EQ(cold.first_execution_at_peak_bytes, kWarmUp);
  EXPECT_EQ(cold.measured_peak_bytes, l.waves[2].measured_peak_bytes + kWarmUp);
  // The warm-up allocation does not count as workspace.
  EXPECT_EQ(cold.workspace_bytes, 40u);
}

// The report shows the same first_execution the terms leave out: the cold
// wave's unmatched warm-up, live at its peak, and nothing of the kind in the
// warm waves. Without the wave-level rules its Classifier category stays.
TEST(LivenessGolden, ReportShowsFirstExecutionAtTheColdPeak) {
  TempTrace trace("report");
  write_steps(trace.path, 10, 2);
  const Analysis plain = analyze_trace(trace.path);
  const Analysis report = analyze_report(trace.path);
  ASSERT_EQ(report.waves.size(), plain.waves.size());
  auto first_execution = [](const LiveBreakdown& live) {
    return live.category_bytes[static_cast<size_t>(Category::kFirstExecution)];
  };
  ASSERT_EQ(report.waves.size(), 4u);  // cold t, cold 2t, then both warm
  for (size_t i = 0; i < report.waves.size(); ++i) {
    const bool cold = i < 2;
    EXPECT_EQ(first_execution(plain.waves[i].peak.live), 0u) << i;
    EXPECT_EQ(first_execution(report.waves[i].peak.live), cold ? kWarmUp : 0u) << i;
    EXPECT_EQ(report.waves[i].peak.live.bytes, plain.waves[i].peak.live.bytes) << i;  // moved, not added
  }
  uint64_t groups = 0;
  for (const LiveGroup& g : report.waves[0].peak.live.groups)
    if (g.category == Category::kFirstExecution) groups += g.bytes;
  EXPECT_EQ(groups, kWarmUp);
  // The warm waves' breakdowns are exactly the plain analysis'.
  EXPECT_EQ(report.waves[2].peak.live.category_bytes, plain.waves[2].peak.live.category_bytes);
}

TEST(LivenessGolden, ColdWavePairsDifferentSizesInTheSameRangeByOrder) {
  TempTrace trace("resized");
  SyntheticTrace s(trace.path);
  s.alloc(kMain, 0x1000, kWeights);
  step(s, 0x10000, 10, true, true, false, 16);  // cold: layer 1's workspace 56 instead of 40
  step(s, 0x20000, 10, false, false);
  s.close();
  const Liveness l = analyze_liveness(trace.path);
  ASSERT_EQ(l.waves.size(), 2u);
  const WaveLiveness& cold = l.waves[0];
  EXPECT_EQ(cold.warm_twin, 1);
  // The resized workspace pairs with the warm wave's by range and order: only
  // the warm-up allocation has no counterpart.
  EXPECT_EQ(cold.first_execution_bytes, kWarmUp);
  EXPECT_EQ(cold.workspace_bytes, 56u);
}

TEST(LivenessGolden, CalibrateFitsTermsExactly) {
  TempTrace a("cal10"), b("cal20");
  write_steps(a.path, 10, 2);
  write_steps(b.path, 20, 2);
  const Calibration c = calibrate({analyze_liveness(a.path), analyze_liveness(b.path)});
  ASSERT_EQ(c.layers, 2);
  for (const GrowthTerm& t : c.boundary) {
    EXPECT_NEAR(t.per_token, 10.0, 1e-9);
    EXPECT_NEAR(t.intercept, 0.0, 1e-6);
    EXPECT_EQ(t.margin_bytes, 0u);
  }
  EXPECT_NEAR(c.workspace.per_token, 4.0, 1e-9);
  EXPECT_NEAR(c.input_gradient.per_token, 20.0, 1e-9);
  EXPECT_NEAR(c.output.per_token, 0.0, 1e-9);
  EXPECT_NEAR(c.head_saved.per_token, 13.0, 1e-9);
  EXPECT_EQ(c.adapter_gradient_bytes.at("a"), (std::vector<uint64_t>{kGradient, kGradient}));
  EXPECT_EQ(c.first_execution_bytes, kWarmUp);
  EXPECT_EQ(c.first_execution_pairs, 4u);

  // The JSON round trip keeps what check needs.
  const Calibration back = calibration_from_json(calibration_to_json(c));
  EXPECT_EQ(back.layers, 2);
  EXPECT_EQ(back.workspace.bytes_at(30), c.workspace.bytes_at(30));
  EXPECT_EQ(back.adapter_gradient_bytes, c.adapter_gradient_bytes);
  EXPECT_THROW(calibration_from_json(CalibrationJson::object()), CalibrationError);
}

TEST(LivenessGolden, CheckPricesAHeldOutWave) {
  TempTrace a("c10"), b("c20"), held("c30");
  write_steps(a.path, 10, 2);
  write_steps(b.path, 20, 2);
  write_steps(held.path, 30, 2);
  // The sum of the terms' maxima (no moments): the design's price.
  Calibration c = calibrate({analyze_liveness(a.path), analyze_liveness(b.path)});
  ASSERT_TRUE(c.moments.has_value());
  c.moments.reset();
  const std::vector<CheckRow> rows = check_trace(c, analyze_liveness(held.path));
  ASSERT_EQ(rows.size(), 4u);
  const CheckRow& r = rows[2];  // warm, 30 tokens, pending gradients
  // Measured: E + X1 + G (300 each) + W1 120 + gradient 20 + IG1 300.
  EXPECT_EQ(r.measured_peak_bytes, 1340u);
  // Priced: retained 600 + adapter 20 (layer 1: 20; layer 0: 40 - 300 < 20)
  // + workspace 120 + input gradient 600 (G with IG1, IG1 with IG0) + output 0:
  // exact here, since every term's maximum falls at the peak.
  EXPECT_EQ(r.price.components.retained, 600);
  EXPECT_EQ(r.price.components.adapter_gradient, 20);
  EXPECT_EQ(r.price.raw_bytes, 1340);
  EXPECT_FALSE(r.under_estimate(false));
  // Floor-only drops the adapter term, and under-estimates; the warm wave
  // pays no transient.
  EXPECT_EQ(r.floor_price.raw_bytes, 1320);
  EXPECT_TRUE(r.under_estimate(true));
  EXPECT_EQ(r.price.components.transient, 0);
  // The later cold wave pays the calibrated first-execution allowance; the
  // trace's first wave also what the calibration's first waves kept, which
  // it cannot tell apart from their own shape's (charged beside a later
  // shape's).
  EXPECT_EQ(rows[1].price.components.transient, static_cast<pricing::Bytes>(kWarmUp));
  EXPECT_EQ(rows[0].price.components.transient, static_cast<pricing::Bytes>(2 * kWarmUp));
  // The second wave of the step finds its gradients live: nothing pending.
  EXPECT_EQ(rows[3].price.components.adapter_gradient, 0);
}

TEST(LivenessGolden, WorkspaceShrunkBeforeTheGradientEarnsAnOverlapCredit) {
  TempTrace a("o10"), b("o20"), held("o15");
  write_steps(a.path, 10, 2, true);
  write_steps(b.path, 20, 2, true);
  write_steps(held.path, 15, 2, true);
  const Liveness la = analyze_liveness(a.path);
  // Each layer frees its workspace (4t) before it makes its gradient (20):
  // 4t, then 20 -> at most 4t, less the 20 made: 4t - 20 left.
  EXPECT_EQ(la.waves[2].workspace_after_gradient_bytes, 20);
  // The overlap credit prices waves of calibrations without moments.
  Calibration c = calibrate({la, analyze_liveness(b.path)});
  c.moments.reset();
  ASSERT_TRUE(c.workspace_after_gradient.has_value());
  EXPECT_EQ(c.workspace_after_gradient_method, "envelope");
  EXPECT_NEAR(c.workspace_after_gradient->per_token, 4.0, 1e-9);
  EXPECT_NEAR(c.workspace_after_gradient->intercept, -20.0, 1e-6);
  // Held out, 15 tokens (inside the calibrated sizes, where both gradient
  // waves' lines are exact): workspace 60, 40 left -> credit min(20, 20) = 20
  // on the top layer's own gradient: adapter 0 instead of 20. With W1 freed
  // first the backward peaks at E + X1 + G + gradient + IG1 = 620, below the
  // head's moment (E, X1, X2, logits 45, G: 645), which is the wave's peak.
  const std::vector<CheckRow> rows = check_trace(c, analyze_liveness(held.path));
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[2].price.components.adapter_gradient, 0);
  EXPECT_EQ(rows[2].measured_peak_bytes, 645u);
  // retained 300 + workspace 60 + input gradient 300 + output 0 + adapter 0.
  EXPECT_EQ(rows[2].price.raw_bytes, 660);
  EXPECT_FALSE(rows[2].under_estimate(false));
  // The JSON round trip keeps the term and its method.
  const Calibration back = calibration_from_json(calibration_to_json(c));
  ASSERT_TRUE(back.workspace_after_gradient.has_value());
  EXPECT_EQ(back.workspace_after_gradient->bytes_at(30), c.workspace_after_gradient->bytes_at(30));
  EXPECT_EQ(back.workspace_after_gradient_method, "envelope");
  ASSERT_TRUE(calibration_from_json(calibration_to_json(calibrate({la, analyze_liveness(b.path)}))).moments);
}

// The moments of the same step, by hand (t tokens; the wave with gradients),
// beside the boundaries E and X1: before any layer (the head's forward and
// backward) X2 10t + logits 3t + G 10t at most: 23t; layer 1
// while it recomputes: G + W1 4t beside its boundary X1 (= 14t), then its
// gradient (20) and IG1 10t: 20t beside boundaries and gradients, W1 freed
// after; layer 0 likewise.
TEST(LivenessGolden, MomentsOfEachLayerAndTheHead) {
  TempTrace a("m10");
  write_steps(a.path, 10, 2);
  const Liveness l = analyze_liveness(a.path);
  const WaveLiveness& w = l.waves[2];  // warm, 10 tokens, makes gradients
  ASSERT_EQ(w.tokens, 10);
  EXPECT_EQ(w.moment_head_bytes, 230);
  EXPECT_EQ(w.moment_before_gradient_bytes, (std::vector<int64_t>{140, 140}));
  // Once its gradient exists: G + W1 + IG1 (+ the gradient, taken off).
  EXPECT_EQ(w.moment_after_gradient_bytes, (std::vector<int64_t>{240, 240}));
  // Layer 1's events: W1 (G + W1), its gradient, IG1 (with the gradient).
  EXPECT_EQ(w.moment_events[2], (std::vector<int64_t>{140, 160, 260}));
  EXPECT_EQ(w.moment_gradient_from, (std::vector<int64_t>{1, 1}));
  // The next wave of the step accumulates: no gradient of its own.
  EXPECT_EQ(l.waves[3].moment_gradient_from, (std::vector<int64_t>{-1, -1}));
}

TEST(LivenessGolden, WorstMomentPricesHeldOutWavesAtOrAboveTheirPeaks) {
  TempTrace a("w10"), b("w20"), c3("w40"), held("w30");
  write_steps(a.path, 10, 2);
  write_steps(b.path, 20, 2);
  write_steps(c3.path, 40, 2);
  write_steps(held.path, 30, 2);
  const Calibration moments =
      calibrate({analyze_liveness(a.path), analyze_liveness(b.path), analyze_liveness(c3.path)});
  Calibration summed = moments;
  summed.moments.reset();
  const Liveness h = analyze_liveness(held.path);
  const std::vector<CheckRow> by_moment = check_trace(moments, h);
  const std::vector<CheckRow> by_sum = check_trace(summed, h);
  ASSERT_EQ(by_moment.size(), 4u);
  for (size_t i = 0; i < by_moment.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_FALSE(by_moment[i].under_estimate(false));
  }
  // Here every term's maximum falls at that moment, so the sum of maxima is
  // exact too (CheckPricesAHeldOutWave). Accumulating waves are charged their
  // gradients' temporaries, which this schedule does not make: no equality there.
  EXPECT_EQ(by_sum[2].price.raw_bytes, 1340);
  // The warm gradient wave (30 tokens) peaks while layer 1 has made its
  // gradient: boundaries E + X1 (600) + gradient 20 + G + W1 + IG1 (720):
  // 1340, priced exactly at that moment.
  EXPECT_EQ(by_moment[2].measured_peak_bytes, 1340u);
  EXPECT_EQ(by_moment[2].price.raw_bytes, 1340);
  EXPECT_EQ(by_moment[2].price.peak.layer, 1);
  EXPECT_EQ(by_moment[2].price.peak.moment, pricing::Moment::kAfterGradient);
}

// An accumulating wave makes each gradient as a temporary and adds it to the
// gradient that exists. Priced as a wave that makes the gradients (the
// temporaries as if they stayed), it is charged all of them; the
// calibration's accumulating waves measure, per event, those already freed
// there, and an accumulating wave is charged the rest: to the byte here,
// whether they are freed before the input gradient (1) or after it (2).
TEST(LivenessGolden, AccumulatingWavesAreChargedTheTemporariesStillLive) {
  for (int temporaries : {1, 2}) {
    SCOPED_TRACE(temporaries);
    TempTrace a("t10"), b("t20"), c3("t40"), held("t30");
    write_steps(a.path, 10, 2, false, temporaries);
    write_steps(b.path, 20, 2, false, temporaries);
    write_steps(c3.path, 40, 2, false, temporaries);
    write_steps(held.path, 30, 2, false, temporaries);
    const Calibration c = calibrate({analyze_liveness(a.path), analyze_liveness(b.path), analyze_liveness(c3.path)});
    ASSERT_TRUE(c.moments.has_value());
    const MomentFit& after = c.moments->after_gradient[1];
    ASSERT_TRUE(after.includes_gradient);
    const bool any_freed = std::any_of(after.freed_temporaries.begin(), after.freed_temporaries.end(),
                                       [](uint64_t f) { return f == kGradient; });
    EXPECT_EQ(any_freed, temporaries == 1);
    const Calibration back = calibration_from_json(calibration_to_json(c));
    EXPECT_EQ(back.moments->after_gradient[1].freed_temporaries, after.freed_temporaries);
    const Liveness h = analyze_liveness(held.path);
    for (const Calibration* cal : {&c, &back}) {
      const std::vector<CheckRow> rows = check_trace(*cal, h);
      ASSERT_EQ(rows.size(), 4u);
      for (const CheckRow& r : rows) {
        SCOPED_TRACE(r.wave);
        // Cold waves add the first-execution allowance (a bound: a process's
        // first wave pays what later shapes keep too).
        if (h.waves[static_cast<size_t>(r.wave)].cold) {
          EXPECT_FALSE(r.under_estimate(false));
        } else {
          EXPECT_EQ(r.price.raw_bytes, static_cast<pricing::Bytes>(r.measured_peak_bytes));
        }
      }
    }
  }
}

// A layer's events are followed across sizes by their allocations, not by
// their index: at 20 tokens layer 1's recompute first makes and frees 8
// bytes that the other sizes never make. Paired by index they would not line
// up (one event more at 20 tokens), and the layer's maxima would be fitted:
// 100 bytes over at 30 tokens, the chord between 20 and 40. Lined up by
// allocation the stray event folds into the first shared one, and waves of
// sizes never calibrated are priced to the byte.
TEST(LivenessGolden, EventsLineUpByTheirAllocationsWhereOneSizeMakesAnotherFirst) {
  TempTrace cal("stray"), held("stray_held");
  auto write = [](const std::string& path, std::vector<uint64_t> sizes, uint64_t stray_at) {
    SyntheticTrace s(path);
    s.alloc(kMain, 0x1000, kWeights);
    uint64_t base = 0x10000;
    for (uint64_t t : sizes) {
      for (bool cold : {true, false}) {
        step(s, base, t, cold, true, false, 0, true, t == stray_at);
        optimizer(s);
        base += 0x10000;
      }
    }
    s.close();
  };
  write(cal.path, {10, 20, 40}, 20);
  write(held.path, {30, 80}, 0);
  const Calibration c = calibrate({analyze_liveness(cal.path)});
  const std::vector<CheckRow> rows = check_trace(c, analyze_liveness(held.path));
  ASSERT_EQ(rows.size(), 4u);
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_FALSE(rows[i].under_estimate(false));
  }
  // Warm, 80 tokens: boundaries E + X1 (1600), G 800, W1 320 and the scores
  // 6400 while layer 1 recomputes.
  EXPECT_EQ(rows[3].measured_peak_bytes, 9120u);
  EXPECT_EQ(rows[3].price.raw_bytes, 9120);
  EXPECT_EQ(rows[1].price.raw_bytes, static_cast<pricing::Bytes>(rows[1].measured_peak_bytes));
}

// A version 1 calibration (lines in tokens, no moments, no ranges) reads and
// prices the sum of the terms' maxima, as it did.
TEST(LivenessGolden, VersionOneCalibrationsPriceAsTheyDid) {
  TempTrace a("v10"), b("v20"), held("v15");
  write_steps(a.path, 10, 2);
  write_steps(b.path, 20, 2);
  write_steps(held.path, 15, 2);
  Calibration now = calibrate({analyze_liveness(a.path), analyze_liveness(b.path)});
  CalibrationJson j = calibration_to_json(now);
  j["version"] = 1;
  j.erase("moments");
  std::function<void(CalibrationJson&)> strip = [&](CalibrationJson& v) {
    if (v.is_object()) {
      if (v.contains("intercept_bytes"))
        for (const char* key : {"growth", "bytes_per_square_token", "sizes", "range", "beyond", "left_out_error"})
          v.erase(key);
      for (auto& [key, value] : v.items()) strip(value);
    } else if (v.is_array()) {
      for (CalibrationJson& e : v) strip(e);
    }
  };
  strip(j);
  const Calibration v1 = calibration_from_json(j);
  EXPECT_FALSE(v1.moments.has_value());
  EXPECT_EQ(v1.workspace.growth, Growth::kLinear);
  EXPECT_EQ(v1.workspace.sizes, 0u);
  now.moments.reset();
  const std::vector<CheckRow> old_rows = check_trace(v1, analyze_liveness(held.path));
  const std::vector<CheckRow> new_rows = check_trace(now, analyze_liveness(held.path));
  ASSERT_EQ(old_rows.size(), new_rows.size());
  for (size_t i = 0; i < old_rows.size(); ++i) EXPECT_EQ(old_rows[i].price.raw_bytes, new_rows[i].price.raw_bytes) << i;
  j["version"] = 3;
  EXPECT_THROW(calibration_from_json(j), CalibrationError);
}

TEST(LivenessGolden, OneTokenCountScalesTheWorkspaceLine) {
  TempTrace a("s10");
  write_steps(a.path, 10, 2);
  // Only the t = 10 waves make gradients: one token count. The workspace line
  // (4/token from t = 10 and 20) scaled by the measured ratio 40 / 40 = 1.
  const Calibration c = calibrate({analyze_liveness(a.path)});
  ASSERT_TRUE(c.workspace_after_gradient.has_value());
  EXPECT_EQ(c.workspace_after_gradient_method, "scaled workspace");
  EXPECT_NEAR(c.workspace_after_gradient->per_token, c.workspace.per_token, 1e-9);
  EXPECT_EQ(c.workspace_after_gradient->bytes_at(10), 40u);
}

TEST(LivenessGolden, DeviceMemoryNoRecordAccountsForJoinsTheFirstExecutionAllowance) {
  // A cold and a warm wave of one shape, the same allocations in each; the
  // device samples show the cold wave growing by 300000 bytes that no hooked
  // or CUPTI allocation accounts for (a context, lazily loaded modules).
  constexpr uint64_t kContext = 1'000'000, kUnexplained = 300'000;
  TempTrace trace("device");
  {
    SyntheticTrace t(trace.path);
    for (int wave = 0; wave < 2; ++wave) {
      const bool cold = wave == 0;
      const uint64_t before = kContext + (cold ? 0 : kUnexplained);
      t.wave_begin(kMain, cold ? R"({"tokens": 8, "slots": ["a"], "groups": 1, "cold": true})"
                               : R"({"tokens": 8, "slots": ["a"], "groups": 1, "cold": false})");
      t.counter(kMain, "device_used_bytes", before, 0);
      t.push(kMain, "backward/layer.0");
      const uint64_t a = 0x1000 * static_cast<uint64_t>(wave + 1);
      t.alloc(kMain, a, 4096);
      t.counter(kMain, "device_used_bytes", kContext + kUnexplained + 4096, 0);
      t.free(kMain, a);
      t.pop(kMain);
      t.wave_end(kMain);
    }
    t.close();
  }
  const Liveness l = analyze_liveness(trace.path);
  ASSERT_EQ(l.waves.size(), 2u);
  EXPECT_EQ(l.waves[0].measured_peak_bytes, l.waves[1].measured_peak_bytes);  // the hooks see no difference
  const Calibration c = calibrate({l});
  EXPECT_EQ(c.first_execution_pairs, 1u);
  EXPECT_EQ(c.first_execution_device_pairs, 1u);
  EXPECT_EQ(c.first_execution_unexplained_bytes, kUnexplained);
  EXPECT_EQ(c.first_execution_bytes, kUnexplained);
  const CalibrationJson j = calibration_to_json(c);
  EXPECT_EQ(j["first_execution"]["device_unexplained_bytes"], kUnexplained);
  EXPECT_EQ(calibration_from_json(j).first_execution_bytes, kUnexplained);
}

TEST(LivenessGolden, SplitBufferedGradientsArePendingNotWorkspace) {
  // Two children, one backward: child B's backward (run first) makes layer 1's
  // gradient piece G1 and layer 0's G0; autograd holds them until child A's
  // backward adds its own, then frees them. Each layer's scratch S is freed
  // inside the layer. By range G1 and G0 look like workspace; by lifetime
  // (other layers work while they are live) they are buffered gradients.
  TempTrace trace("split_buffers");
  {
    SyntheticTrace t(trace.path);
    t.wave_begin(kMain, R"({"tokens": 20, "slots": ["a"], "groups": 1, "cold": false,
                            "children": [{"tokens": 10}, {"tokens": 10}]})");
    uint64_t next = 0x9000;
    auto layer = [&](int i, uint64_t gradient_buffer, uint64_t frees) {
      t.push(kMain, "backward/layer." + std::to_string(i));
      const uint64_t scratch = next++;
      t.alloc(kMain, scratch, 40);
      if (gradient_buffer) t.alloc(kMain, gradient_buffer, 20);
      if (frees) t.free(kMain, frees);
      t.free(kMain, scratch);
      t.pop(kMain);
    };
    layer(1, 0x5001, 0);  // child B, layer 1: buffer G1
    layer(0, 0x5000, 0);  // child B, layer 0: buffer G0
    layer(1, 0, 0x5001);  // child A, layer 1: adds to G1, frees it
    layer(0, 0, 0x5000);  // child A, layer 0: adds to G0, frees it
    t.wave_end(kMain);
    t.close();
  }
  const Liveness l = analyze_liveness(trace.path);
  ASSERT_EQ(l.waves.size(), 1u);
  const WaveLiveness& w = l.waves[0];
  ASSERT_EQ(w.children.size(), 2u);
  EXPECT_EQ(w.pending_gradient_bytes, (std::vector<uint64_t>{20, 20}));
  EXPECT_EQ(w.pending_gradient_max_live_bytes, 40u);
  EXPECT_EQ(w.workspace_bytes, 40u);  // one layer's scratch, not the buffers
}

// A wave of two gradient groups (slots a and b), `ta` and `tb` tokens, the
// schedule of step() per group: both forwards (a, then b), then the two
// backwards in `order` ("ab" or "ba"). Each group's head state G lives from
// its forward to its own layer 1's backward; each makes its own gradients.
// keep_embedding: the first group to run leaves its first boundary (E) to the
// last run's layer 0, as when a trainer holds it past the group's backward.
void two_groups(SyntheticTrace& s, uint64_t base, uint64_t ta, uint64_t tb, const std::string& order, bool listed,
                bool keep_embedding = false, bool head_backward = false) {
  const std::string groups = listed
                                 ? "[{\"tokens\": " + std::to_string(ta) +
                                       ", \"slot\": \"a\"}, {\"tokens\": " + std::to_string(tb) + ", \"slot\": \"b\"}]"
                                 : "2";
  const std::string backward = order == "ab" ? "[0, 1]" : "[1, 0]";
  s.wave_begin(kMain, "{\"tokens\": " + std::to_string(ta + tb) + ", \"slots\": [\"a\", \"b\"], \"groups\": " + groups +
                          ", \"cold\": false" + (listed ? ", \"backward_order\": " + backward : "") + "}");
  auto at = [&](char g, uint64_t k) { return base + (g == 'a' ? 0 : 0x100) + k; };
  auto tokens = [&](char g) { return g == 'a' ? ta : tb; };
  for (char g : std::string("ab")) {
    const uint64_t t = tokens(g);
    s.push(kMain, "head/embedding");
    s.alloc(kMain, at(g, 1), 10 * t);  // E
    s.pop(kMain);
    s.push(kMain, "forward/layer.0");
    s.alloc(kMain, at(g, 2), 5 * t);  // S
    s.free(kMain, at(g, 2));
    s.alloc(kMain, at(g, 3), 10 * t);  // X1
    s.pop(kMain);
    s.push(kMain, "forward/layer.1");
    s.alloc(kMain, at(g, 4), 10 * t);  // X2
    s.pop(kMain);
    s.push(kMain, "head/lm_head");
    s.alloc(kMain, at(g, 5), 3 * t);   // L
    s.alloc(kMain, at(g, 6), 10 * t);  // G
    s.free(kMain, at(g, 5));
    s.free(kMain, at(g, 4));
    s.pop(kMain);
  }
  for (char g : order) {
    const uint64_t t = tokens(g);
    const uint64_t gradient = g == 'a' ? 0x3000 : 0x3100;
    if (head_backward) {  // the gradient the head sends down, 30t, until layer 1's backward
      s.push(kMain, "head/lm_head");
      s.alloc(kMain, at(g, 11), 30 * t);
      s.alloc(kMain, at(g, 12), 7 * t);  // and a scratch of its own, 7t
      s.free(kMain, at(g, 12));
      s.pop(kMain);
    }
    s.push(kMain, "recompute/layer.1");
    s.alloc(kMain, at(g, 7), 4 * t);  // W1
    s.pop(kMain);
    s.push(kMain, "backward/layer.1");
    s.alloc(kMain, gradient + 1, kGradient);
    s.alloc(kMain, at(g, 8), 10 * t);  // IG1
    if (head_backward) s.free(kMain, at(g, 11));
    s.free(kMain, at(g, 7));
    s.free(kMain, at(g, 3));
    s.free(kMain, at(g, 6));
    s.pop(kMain);
    s.push(kMain, "recompute/layer.0");
    s.alloc(kMain, at(g, 9), 4 * t);  // W0
    s.pop(kMain);
    s.push(kMain, "backward/layer.0");
    s.alloc(kMain, gradient, kGradient);
    s.alloc(kMain, at(g, 10), 10 * t);  // IG0
    s.free(kMain, at(g, 9));
    if (!keep_embedding || g != order.front()) s.free(kMain, at(g, 1));
    if (keep_embedding && g == order.back()) s.free(kMain, at(order.front(), 1));
    s.free(kMain, at(g, 8));
    s.pop(kMain);
    s.push(kMain, "head/embedding");
    s.free(kMain, at(g, 10));
    s.pop(kMain);
  }
  s.wave_end(kMain);
  s.push(kMain, "optimizer/step");
  for (uint64_t gradient : {0x3000, 0x3001, 0x3100, 0x3101}) s.free(kMain, gradient);
  s.pop(kMain);
}

// Waves of two groups, each pair (ta, tb) in both orders.
void write_two_groups(const std::string& path, const std::vector<std::pair<uint64_t, uint64_t>>& sizes,
                      bool listed = true, bool keep_embedding = false, bool head_backward = false) {
  SyntheticTrace s(path);
  s.alloc(kMain, 0x1000, kWeights);
  uint64_t base = 0x10000;
  for (const auto& [ta, tb] : sizes)
    for (const char* order : {"ab", "ba"}) {
      two_groups(s, base, ta, tb, order, listed, keep_embedding, head_backward);
      base += 0x10000;
    }
  s.close();
}

TEST(LivenessGolden, EachGroupsRunHoldsWhatAWaveOfOneGroupOfItsSizeHolds) {
  TempTrace one("g1"), two("g2");
  write_steps(one.path, 10, 2);  // waves of 10 and 20 tokens, one group
  write_two_groups(two.path, {{10, 20}});
  const Liveness single = analyze_liveness(one.path);
  const Liveness l = analyze_liveness(two.path);
  ASSERT_EQ(l.waves.size(), 2u);
  const WaveLiveness& alone10 = single.waves[2];  // warm, 10 tokens, makes gradients
  for (const WaveLiveness& w : l.waves) {
    ASSERT_EQ(w.groups, 2);
    ASSERT_EQ(w.runs.size(), 2u);
    ASSERT_EQ(w.group_list.size(), 2u);
    // Run order follows the backward order; each run is its group's size and slot.
    const bool a_first = w.backward_order == std::vector<int32_t>{0, 1};
    const WaveLiveness& a = w.runs[a_first ? 0 : 1];
    const WaveLiveness& b = w.runs[a_first ? 1 : 0];
    EXPECT_EQ(a.tokens, 10);
    EXPECT_EQ(b.tokens, 20);
    EXPECT_EQ(a.slots, std::vector<std::string>{"a"});
    EXPECT_EQ(b.slots, std::vector<std::string>{"b"});
    // Group a's run holds what a lone wave of 10 tokens holds, whatever ran
    // before it or waits after it: boundaries, gradients, the layers' moments.
    EXPECT_EQ(a.boundary_bytes, alone10.boundary_bytes);
    EXPECT_EQ(a.pending_gradient_bytes, alone10.pending_gradient_bytes);
    EXPECT_EQ(a.moment_before_gradient_bytes, alone10.moment_before_gradient_bytes);
    EXPECT_EQ(a.moment_after_gradient_bytes, alone10.moment_after_gradient_bytes);
    EXPECT_EQ(b.boundary_bytes, (std::vector<uint64_t>{200, 200}));
    // Its head's forward (X2 and the logits L, output terms), and its
    // head moment, are its own forward's, not the other group's.
    EXPECT_EQ(a.head_saved_bytes, alone10.head_saved_bytes);
    EXPECT_EQ(a.moment_head_bytes, alone10.moment_head_bytes);
    EXPECT_EQ(b.head_saved_bytes, 260u);
    // a's forward: X2, L and G live together (10 x 23), whichever ran
    // first. b's, forwarded last, is not measured: no head range opens a
    // second time here, so where the first run's head backward begins is
    // not seen.
    EXPECT_EQ(a.moment_forward_bytes, 230);
    EXPECT_EQ(b.moment_forward_bytes, -1);
  }
}

// A group's forward is what its own allocations held until the next
// group's forward began, or for the group forwarded last, until the first
// backward's head: where a head range opens a second time after the last
// forward layer (the head's modules run forward, then backward). What that
// head backward makes and frees before the first layer's backward is the
// first run's, not the group forwarded last's.
TEST(LivenessGolden, EachGroupsForwardIsMeasuredWithoutItsHeadsBackward) {
  TempTrace two("g2h");
  write_two_groups(two.path, {{10, 20}}, true, false, true);
  const Liveness l = analyze_liveness(two.path);
  ASSERT_EQ(l.waves.size(), 2u);
  for (const WaveLiveness& w : l.waves) {
    ASSERT_EQ(w.runs.size(), 2u);
    const bool a_first = w.backward_order == std::vector<int32_t>{0, 1};
    const WaveLiveness& a = w.runs[a_first ? 0 : 1];
    const WaveLiveness& b = w.runs[a_first ? 1 : 0];
    // X2, the logits and G together (23t), in either order: 230 and 460.
    EXPECT_EQ(a.moment_forward_bytes, 230) << (a_first ? "a first" : "b first");
    EXPECT_EQ(b.moment_forward_bytes, 460) << (a_first ? "a first" : "b first");
    // Run first, a's head moment holds its head's backward, made while b
    // waits: G, the 30t it sends down and its 7t scratch (470).
    if (a_first) {
      EXPECT_EQ(a.moment_head_bytes, 470);
    }
  }
}

// A wave of one group whose head runs a backward of its own (the gradient
// it sends down, 30t, and a scratch of 7t, in a range named as its forward's)
// after a forward that left the logits L (3t) and G (10t). What the head
// holds while its group waits is what its forward left: with the mark the
// Python helper leaves as a head's backward begins, head_saved stops there;
// without it, at the first layer's backward, the head's backward included.
// Between the forward's last ranged event and the mark, `between`:
//   kTeardown   the forward's caller drops T (5t), made by the head's
//               forward, before the backward: in a wave of several groups
//               a caller that drops it just before each group's backward
//               holds it while the others run first;
//   kLossFirst  a loss outside every range runs its backward first: makes
//               the logits' gradient GL (3t), then frees L, which the
//               forward had left.
enum class Between { kNothing, kTeardown, kLossFirst };
void one_group_with_head_backward(const std::string& path, uint64_t t, bool mark, Between between = Between::kNothing) {
  SyntheticTrace s(path);
  s.wave_begin(kMain, "{\"tokens\": " + std::to_string(t) + ", \"slots\": [\"a\"], \"groups\": 1}");
  const uint64_t E = 0x100, X1 = 0x101, L = 0x102, G = 0x103, D = 0x104, C = 0x105, W0 = 0x106, IG0 = 0x107;
  const uint64_t T = 0x108, GL = 0x109;
  s.push(kMain, "head/embedding");
  s.alloc(kMain, E, 10 * t);
  s.pop(kMain);
  s.push(kMain, "forward/layer.0");
  s.alloc(kMain, X1, 10 * t);
  s.pop(kMain);
  s.push(kMain, "head/lm_head");
  s.alloc(kMain, L, 3 * t);
  if (between == Between::kTeardown) s.alloc(kMain, T, 5 * t);
  s.alloc(kMain, G, 10 * t);
  s.pop(kMain);
  if (between == Between::kTeardown) s.free(kMain, T);
  if (between == Between::kLossFirst) {
    s.alloc(kMain, GL, 3 * t);
    s.free(kMain, L);
  }
  if (mark) s.mark(kMain, kHeadBackwardMark);
  s.push(kMain, "head/lm_head");
  s.alloc(kMain, D, 30 * t);
  s.alloc(kMain, C, 7 * t);
  s.free(kMain, C);
  if (between == Between::kLossFirst) s.free(kMain, GL);
  if (between != Between::kLossFirst) s.free(kMain, L);
  s.pop(kMain);
  s.push(kMain, "recompute/layer.0");
  s.alloc(kMain, W0, 4 * t);
  s.pop(kMain);
  s.push(kMain, "backward/layer.0");
  s.alloc(kMain, IG0, 10 * t);
  s.free(kMain, W0);
  s.free(kMain, D);
  s.free(kMain, G);
  s.free(kMain, X1);
  s.free(kMain, E);
  s.free(kMain, IG0);
  s.pop(kMain);
  s.wave_end(kMain);
  s.close();
}

uint64_t head_saved_of(const std::string& name, bool mark, Between between = Between::kNothing) {
  TempTrace trace(name);
  one_group_with_head_backward(trace.path, 10, mark, between);
  const Liveness l = analyze_liveness(trace.path);
  return l.waves.size() == 1 ? l.waves[0].head_saved_bytes : 0;
}

TEST(LivenessGolden, TheHeadsBackwardMarkEndsWhatItsForwardLeft) {
  TempTrace marked("marked"), unmarked("unmarked");
  one_group_with_head_backward(marked.path, 10, true);
  one_group_with_head_backward(unmarked.path, 10, false);
  const Liveness m = analyze_liveness(marked.path), u = analyze_liveness(unmarked.path);
  ASSERT_EQ(m.waves.size(), 1u);
  ASSERT_EQ(u.waves.size(), 1u);
  // L and G: what the forward left (130), not the head's backward on top.
  EXPECT_EQ(m.waves[0].head_saved_bytes, 130u);
  EXPECT_GT(u.waves[0].head_saved_bytes, 130u);
  // Only head_saved reads the mark: the head's moment holds its backward.
  EXPECT_EQ(m.waves[0].moment_head_bytes, u.waves[0].moment_head_bytes);
  EXPECT_EQ(m.waves[0].moment_before_gradient_bytes, u.waves[0].moment_before_gradient_bytes);
  // What the caller dropped before the backward began is kept: L, G and T.
  EXPECT_EQ(head_saved_of("teardown", true, Between::kTeardown), 180u);
  // Logits an unannotated loss's backward freed before the mark were still
  // what the forward left: counted, though no longer live there (with what
  // that backward made: 160).
  EXPECT_EQ(head_saved_of("loss_first", true, Between::kLossFirst), 160u);
}

// Whether a group that ran freed its boundaries before the next began is
// measured per wave; a calibration credits it in a known order only when
// every wave of several groups did (pricing.h, Forward::runs_free_boundaries).
TEST(LivenessGolden, WhetherRunsFreeTheirBoundariesIsMeasured) {
  TempTrace freed("freed"), kept("kept"), one("one");
  write_two_groups(freed.path, {{10, 20}, {20, 30}});
  write_two_groups(kept.path, {{10, 20}, {20, 30}}, true, true);
  write_steps(one.path, 10, 2);
  const Liveness f = analyze_liveness(freed.path), k = analyze_liveness(kept.path), o = analyze_liveness(one.path);
  for (const WaveLiveness& w : f.waves) EXPECT_EQ(w.runs_free_boundaries, 1) << w.index;
  for (const WaveLiveness& w : k.waves) EXPECT_EQ(w.runs_free_boundaries, 0) << w.index;
  for (const WaveLiveness& w : o.waves) EXPECT_EQ(w.runs_free_boundaries, -1) << w.index;  // one group: no runs
  const Calibration credited = calibrate({f});
  EXPECT_TRUE(credited.runs_free_boundaries);
  EXPECT_TRUE(calibration_from_json(calibration_to_json(credited)).runs_free_boundaries);
  EXPECT_FALSE(calibrate({f, k}).runs_free_boundaries);  // one wave kept a boundary: no credit
  EXPECT_FALSE(calibrate({o}).runs_free_boundaries);     // nothing measured: no credit
  EXPECT_FALSE(calibration_from_json(calibration_to_json(calibrate({f, k}))).runs_free_boundaries);
}

TEST(LivenessGolden, AWaveOfOneListedGroupIsPackedAsItsGroup) {
  // The list form of "groups" with one group may give the packing only there
  // (peakscope.wave(groups=[peakscope.group(40, "a", [10, 30])])): the wave is
  // packed as its group, so calibration fits it at its own squares, not as
  // one sequence of 40.
  TempTrace trace("listed-one");
  {
    SyntheticTrace t(trace.path);
    t.wave_begin(
        kMain,
        R"({"tokens": 40, "slots": ["a"], "groups": [{"tokens": 40, "slot": "a", "sequence_lengths": [10, 30]}]})");
    t.push(kMain, "backward/layer.0");
    t.alloc(kMain, 0x1000, 4096);
    t.free(kMain, 0x1000);
    t.pop(kMain);
    t.wave_end(kMain);
    t.close();
  }
  const Liveness l = analyze_liveness(trace.path);
  ASSERT_EQ(l.waves.size(), 1u);
  const WaveLiveness& w = l.waves[0];
  ASSERT_EQ(w.group_list.size(), 1u);
  EXPECT_EQ(w.sequence_lengths, (std::vector<int64_t>{10, 30}));
  EXPECT_EQ(w.size().square_tokens, 10.0 * 10 + 30.0 * 30);
  EXPECT_EQ(w.size().sequences, 2.0);
}

TEST(LivenessGolden, RunsWithoutTheBackwardOrderAreMatchedBySize) {
  TempTrace two("g3");
  write_two_groups(two.path, {{10, 30}}, false);  // a count of groups: equal parts assumed by the payload
  const Liveness l = analyze_liveness(two.path);
  ASSERT_EQ(l.waves.size(), 2u);
  // Equal parts of 40: each run is a group of 20 tokens (the payload says no more).
  for (const WaveLiveness& w : l.waves) {
    ASSERT_EQ(w.runs.size(), 2u);
    EXPECT_EQ(w.runs[0].tokens, 20);
    EXPECT_EQ(w.runs[1].tokens, 20);
  }
  // Check says the groups evidently differ: their boundaries are 3-fold apart.
  const std::vector<CheckRow> rows = check_trace(calibrate({l}), l);
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_EQ(rows[0].warnings.size(), 1u);
  EXPECT_NE(rows[0].warnings[0].find("differ 3.0-fold"), std::string::npos) << rows[0].warnings[0];
  // Listed sizes leave nothing to warn about.
  TempTrace listed("g4");
  write_two_groups(listed.path, {{10, 30}});
  const Liveness m = analyze_liveness(listed.path);
  EXPECT_TRUE(check_trace(calibrate({m}), m)[0].warnings.empty());
}

TEST(LivenessGolden, CalibratedFromTwoGroupWavesAlonePricesUnequalGroupsInTheirOrderAtOrAboveTheirPeaks) {
  TempTrace cal("gc"), held("gh");
  write_two_groups(cal.path, {{10, 10}, {10, 30}, {40, 20}});
  write_two_groups(held.path, {{15, 45}, {50, 10}, {25, 25}});
  const Calibration c = calibrate({analyze_liveness(cal.path)});
  ASSERT_TRUE(c.moments.has_value());  // fitted from the runs
  EXPECT_EQ(c.adapter_gradient_bytes.at("a"), (std::vector<uint64_t>{kGradient, kGradient}));
  EXPECT_EQ(c.adapter_gradient_bytes.at("b"), (std::vector<uint64_t>{kGradient, kGradient}));
  const std::vector<CheckRow> rows = check_trace(c, analyze_liveness(held.path));
  ASSERT_EQ(rows.size(), 6u);
  const Liveness held_waves = analyze_liveness(held.path);
  for (size_t i = 0; i < rows.size(); i += 2) {
    SCOPED_TRACE(rows[i].wave);
    // Each order of one pair of sizes priced in the order its payload names:
    // at or above its own peak, never above the worse order's price (what a
    // price without the order charges both). (Below it by more than the
    // granule a known order charges only at larger sizes: the pricing and
    // Python tests show that.)
    for (size_t k = i; k < i + 2; ++k) {
      const CheckRow& row = rows[k];
      EXPECT_FALSE(row.under_estimate(false));
      ASSERT_EQ(held_waves.waves[k].backward_order.size(), 2u);  // the payload's
      WaveLiveness without_order = held_waves.waves[k];
      without_order.backward_order.clear();
      const pricing::Bytes worst = pricing::price(plan_for_wave(c, without_order, false)).raw_bytes;
      EXPECT_LE(row.price.raw_bytes, worst);
    }
  }
  // A group waits holding its head state G (an input gradient here): what
  // the runs that waited measured, not the most its head held (X2 + L).
  ASSERT_TRUE(c.waiting.has_value());
  EXPECT_DOUBLE_EQ(c.waiting->line(int64_t{10}), 100.0);
}

// The derived margin's jitter compares waves recorded more than once in the
// same state. Waves of the same tokens split otherwise between the groups
// (10+30 and 30+10) or run in another order are other waves, with other
// peaks, not repeats whose spread says how much a peak varies run to run.
TEST(LivenessGolden, TheMarginsJitterComparesOnlyRepeatsOfOneSplitAndOrder) {
  TempTrace cal("gj");
  write_two_groups(cal.path, {{10, 30}, {30, 10}, {20, 20}, {40, 20}});
  const Liveness waves = analyze_liveness(cal.path);
  std::set<uint64_t> forty;  // the peaks of the 40-token waves
  for (const WaveLiveness& w : waves.waves)
    if (w.tokens == 40) forty.insert(w.measured_peak_bytes);
  ASSERT_GT(forty.size(), 1u);  // other splits, other peaks
  const Margin once = derive_margin({waves}, calibrate({waves}));
  ASSERT_TRUE(once.derived);
  for (const std::string& line : once.evidence) EXPECT_EQ(line.find("repeated waves"), std::string::npos) << line;
  // The same waves recorded twice measure the same peaks: still no spread.
  const Margin twice = derive_margin({waves, waves}, calibrate({waves, waves}));
  ASSERT_TRUE(twice.derived);
  for (const std::string& line : twice.evidence) EXPECT_EQ(line.find("repeated waves"), std::string::npos) << line;
  EXPECT_EQ(twice.inside, once.inside);
}

TEST(LivenessGolden, CheckFlagsAnUnderEstimate) {
  TempTrace a("u10"), held("u30");
  write_steps(a.path, 10, 2);
  write_steps(held.path, 30, 2);
  // One token count: flat lines at the t = 10 (and 20) sizes cannot cover 30.
  Calibration c = calibrate({analyze_liveness(a.path)});
  c.workspace = GrowthTerm{};
  c.input_gradient = GrowthTerm{};
  c.output = GrowthTerm{};
  for (GrowthTerm& t : c.boundary) t = GrowthTerm{};
  const std::vector<CheckRow> rows = check_trace(c, analyze_liveness(held.path));
  ASSERT_FALSE(rows.empty());
  EXPECT_TRUE(rows[2].under_estimate(false));
}

}  // namespace
// Waves with no usable token count are left out of a calibration and a
// check, and said why: a payload whose tokens are not a positive count or
// whose sequence lengths do not add up (its shape unknown: not priced as one
// sequence), and waves open at the same time (their figures mix).
TEST(LivenessGolden, WavesWithoutAUsableTokenCountAreLeftOutAndSaidWhy) {
  TempTrace file("leftout");
  {
    SyntheticTrace s(file.path);
    step(s, 0x100, 64, true, true);                                                     // wave 0: fine
    s.wave_begin(kMain, R"({"tokens": 96, "groups": 1, "sequence_lengths": [3, 4]})");  // wave 1
    s.alloc(kMain, 0x900, 10);
    s.free(kMain, 0x900);
    s.wave_end(kMain);
    s.wave_begin(kMain, R"({"tokens": -5, "groups": 1})");  // wave 2
    s.wave_end(kMain);
    s.wave_begin(kMain, R"({"tokens": 200, "groups": 1})");  // wave 3, and wave 4 inside it
    s.wave_begin(kMain, R"({"tokens": 50, "groups": 1})");
    s.wave_end(kMain);
    s.wave_end(kMain);
    step(s, 0x200, 64, false, false);  // wave 5: fine
    s.close();
  }
  const Liveness l = analyze_liveness(file.path);
  ASSERT_EQ(l.waves.size(), 6u);
  std::vector<int64_t> tokens;
  for (const WaveLiveness& w : l.waves) tokens.push_back(w.tokens);
  EXPECT_EQ(tokens, (std::vector<int64_t>{64, 0, 0, 0, 0, 64}));
  EXPECT_EQ(l.analysis.waves[3].span.overlapped, 4);
  EXPECT_EQ(l.analysis.waves[4].span.overlapped, 3);
  EXPECT_EQ(l.analysis.waves[0].span.overlapped, -1);
  const std::vector<std::string> notes = waves_left_out(l);
  ASSERT_EQ(notes.size(), 4u);
  EXPECT_EQ(notes[0],
            file.path + ": left out wave 1: its payload: \"sequence_lengths\" add up to 7, not to the 96 tokens");
  EXPECT_EQ(notes[1], file.path + ": left out wave 2: its payload: \"tokens\" is not a positive count");
  EXPECT_NE(notes[2].find("left out wave 3: it and wave 4 were open at the same time"), std::string::npos) << notes[2];
  EXPECT_EQ(waves_left_out(l, 1).back(), file.path + ": left out 3 more waves without a usable token count");
  // The calibration learns from the two good waves only.
  EXPECT_EQ(calibrate({l}).waves, 2u);
}

}  // namespace psc
