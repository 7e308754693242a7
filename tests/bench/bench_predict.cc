// Calibrated prices per second (estimator/predict.h): predict() builds the
// wave's plan from the calibrated terms and prices it, as `peakscope price
// --calibration` and the Python API (through libpeakscope_estimator.so) do.
// The calibration is synthetic (32 layers, moments of two events per layer,
// two slots) unless PSC_BENCH_CALIBRATION names a cal.json; tokens cycle over
// eight widths inside the calibrated range, so no price extrapolates, except
// in BM_PredictExtrapolated. Target: a million prices/s.
//
//   build/benchmarks --benchmark_filter=Predict
//   PSC_BENCH_CALIBRATION=cal.json build/benchmarks --benchmark_filter=Predict
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "estimator/calibration.h"
#include "estimator/predict.h"

namespace psc {
namespace {

constexpr int kLayers = 32;
constexpr int64_t kSmallest = 256, kLargest = 8192;

GrowthTerm term(double intercept, double per_token, double per_square_token) {
  GrowthTerm t;
  t.intercept = intercept;
  t.per_token = per_token;
  t.per_square_token = per_square_token;
  t.margin_bytes = 64;
  t.points = 6;
  t.sizes = 3;
  t.growth = per_square_token > 0 ? Growth::kQuadratic : per_token > 0 ? Growth::kLinear : Growth::kFlat;
  t.smallest = unpacked(kSmallest);
  t.largest = unpacked(kLargest);
  t.longest_share = 1;  // calibrated on single sequences
  t.has_beyond = true;
  t.beyond = {intercept, per_token, per_square_token + 0.5};
  return t;
}

// Two events per moment: linear activations, and quadratic attention probabilities.
MomentFit moment(double scale) {
  MomentFit m;
  m.method = "events";
  m.events = {term(4096 * scale, 8192 * scale, 0), term(0, 2048 * scale, 2 * scale)};
  return m;
}

Calibration synthetic() {
  Calibration c;
  c.layers = kLayers;
  c.safety_factor = 1.1;
  for (int i = 0; i < kLayers; ++i) c.boundary.push_back(term(0, 8192 + 64 * i, 0));
  c.workspace = term(1 << 20, 40960, 4);
  c.workspace_after_gradient = term(1 << 19, 20480, 2);
  c.input_gradient = term(0, 8192, 0);
  c.output = term(1 << 16, 4096, 0);
  c.head_saved = term(0, 2048, 0);
  MomentFits fits;
  fits.head = moment(2);
  for (int i = 0; i < kLayers; ++i) {
    fits.before_gradient.push_back(moment(1 + 0.01 * i));
    fits.after_gradient.push_back(moment(0.8 + 0.01 * i));
  }
  c.moments = std::move(fits);
  c.adapter_gradient_bytes["a"] = std::vector<uint64_t>(kLayers, 1 << 20);
  c.adapter_gradient_bytes["b"] = std::vector<uint64_t>(kLayers, 1 << 19);
  c.first_execution_bytes = 64 << 20;
  return c;
}

struct Bench {
  Calibration calibration;
  std::vector<std::string> slots;  // one slot: the calibration's only one, or "a"
  std::vector<int64_t> widths;     // eight widths inside the calibrated range
  int64_t largest = 0;
};

const Bench& bench() {
  static const Bench b = [] {
    Bench out;
    const char* path = std::getenv("PSC_BENCH_CALIBRATION");
    if (path && *path) {
      std::ifstream in(path);
      if (!in) throw std::runtime_error(std::string(path) + ": cannot read");
      std::stringstream text;
      text << in.rdbuf();
      out.calibration = calibration_from_json(CalibrationJson::parse(text.str()));
    } else {
      out.calibration = synthetic();
    }
    out.slots = {out.calibration.adapter_gradient_bytes.begin()->first};
    const GrowthTerm& w = out.calibration.workspace;
    const int64_t low = std::max<int64_t>(1, w.smallest.tokens), high = std::max(low, w.largest.tokens);
    for (int i = 0; i < 8; ++i) out.widths.push_back(low + (high - low) * i / 7);
    out.largest = high;
    return out;
  }();
  return b;
}

void BM_PredictPrice(benchmark::State& state) {
  const Bench& b = bench();
  WaveRequest request;
  request.slots = b.slots;
  size_t i = 0;
  for (auto _ : state) {
    request.tokens = b.widths[i++ & 7];
    benchmark::DoNotOptimize(predict(b.calibration, request));
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["layers"] = b.calibration.layers;
}
BENCHMARK(BM_PredictPrice);

// Two gradient groups (the synthetic calibration's two slots), each its moments.
void BM_PredictPriceTwoSlots(benchmark::State& state) {
  const Bench& b = bench();
  if (b.calibration.adapter_gradient_bytes.size() < 2) {
    state.SkipWithError("the calibration has one slot");
    return;
  }
  WaveRequest request;
  for (const auto& [slot, bytes] : b.calibration.adapter_gradient_bytes)
    if (request.slots.size() < 2) request.slots.push_back(slot);
  size_t i = 0;
  for (auto _ : state) {
    request.tokens = 2 * b.widths[i++ & 7];
    benchmark::DoNotOptimize(predict(b.calibration, request));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PredictPriceTwoSlots);

// Beyond the calibrated sizes: every term noted, warnings written.
void BM_PredictExtrapolated(benchmark::State& state) {
  const Bench& b = bench();
  WaveRequest request;
  request.slots = b.slots;
  size_t i = 0;
  for (auto _ : state) {
    request.tokens = 2 * b.largest + b.widths[i++ & 7];
    const Prediction p = predict(b.calibration, request);
    benchmark::DoNotOptimize(p.extrapolation.warnings(b.calibration));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PredictExtrapolated);

// The largest wave that fits half the price of the largest calibrated width.
void BM_PredictAdmit(benchmark::State& state) {
  const Bench& b = bench();
  WaveRequest shape;
  shape.slots = b.slots;
  WaveRequest largest = shape;
  largest.tokens = b.largest;
  const pricing::Bytes budget = predict(b.calibration, largest).price.required_bytes / 2;
  int searched = 0;
  for (auto _ : state) {
    const pricing::Admission a = admit_wave(b.calibration, shape, 0, int64_t{1} << 20, budget);
    searched = a.search_prices;
    benchmark::DoNotOptimize(a);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["prices_searched"] = searched;
}
BENCHMARK(BM_PredictAdmit);

}  // namespace
}  // namespace psc
