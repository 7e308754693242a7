// Calibration: the pricing model's terms fitted per model from traced waves
// (DESIGN.md "The pricing model"; issue 5). What `peakscope calibrate` writes
// and `peakscope check` prices with.
//
// Token-dependent terms (each layer's boundary, the workspace of the
// recomputed layer, the input gradient, the head/output term, the head state
// of a group not yet run) are fitted as intercept + per_token × tokens: the
// upper envelope of the waves given (the line on or above every one of them
// with the least total excess), so the calibrated term never falls below a
// wave it has seen.
// Residuals (measured − line) are kept per wave and term, so a miss on a
// held-out wave can be traced to the term that caused it.
//
// Exact terms: adapter-gradient bytes per slot and layer (the largest a wave of
// that slot made), and the first-execution allowance (the largest cold − warm
// difference of measured peaks over pairs of the same shape).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "estimator/liveness.h"

namespace psc {

using CalibrationJson = nlohmann::ordered_json;

class CalibrationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct LinearTerm {
  double intercept = 0;  // bytes
  double per_token = 0;  // bytes per token
  uint64_t margin_bytes = 0;
  size_t points = 0;
  double max_abs_residual = 0;  // largest |measured − line| over the points

  double line(int64_t tokens) const { return intercept + per_token * static_cast<double>(tokens); }
  // ceil(line) + margin, never negative.
  uint64_t bytes_at(int64_t tokens) const;
};

// The upper envelope of the points; one distinct token count gives a flat line at its largest value.
LinearTerm fit_linear(const std::vector<int64_t>& tokens, const std::vector<uint64_t>& bytes);

// One wave's term, as measured and as the fitted line (before the margin) says.
struct TermResidual {
  std::string term;
  uint64_t measured = 0;
  double fitted = 0;
  double residual() const { return static_cast<double>(measured) - fitted; }
};
struct WaveResiduals {
  std::string trace;
  int32_t wave = 0;
  int64_t tokens = 0;
  bool cold = false;
  std::vector<TermResidual> terms;
};

struct Calibration {
  int32_t layers = 0;
  double safety_factor = 1.1;
  std::vector<LinearTerm> boundary;  // per decoder layer, per group's tokens
  LinearTerm workspace;
  // What is left of the workspace once the recomputed layer's own gradients are
  // made (the pricing's workspace_after_gradient_bytes), from waves that made
  // adapter gradients. Fitted like the others when those waves have two token
  // counts or more; from one token count, the workspace line scaled by the
  // largest measured ratio. Absent: no such wave, no overlap credit.
  std::optional<LinearTerm> workspace_after_gradient;
  std::string workspace_after_gradient_method;  // "envelope" or "scaled workspace"
  LinearTerm input_gradient;
  LinearTerm output;      // per group, from waves of one group
  LinearTerm head_saved;  // per group: held by each group whose backward has not run
  std::map<std::string, std::vector<uint64_t>> adapter_gradient_bytes;  // slot → per layer
  uint64_t first_execution_bytes = 0;
  size_t first_execution_pairs = 0;
  uint64_t first_execution_at_peak_bytes = 0;  // largest of unmatched allocations live at a cold peak
  // Device memory no allocator and no CUPTI record accounts for that a cold
  // wave's samples grew by more than its warm twin's (context, lazily loaded
  // modules, static runtimes' workspaces): the largest over pairs with device
  // samples, added to the pair's peak difference in first_execution_bytes.
  uint64_t first_execution_unexplained_bytes = 0;
  size_t first_execution_device_pairs = 0;  // pairs whose waves have device samples
  std::vector<std::string> traces;
  size_t waves = 0;
  std::vector<WaveResiduals> residuals;

  // Adapter-gradient bytes of a slot per layer; a slot never seen gets the
  // largest seen per layer (adapters of one model share their shapes).
  std::vector<uint64_t> slot_gradients(const std::string& slot) const;
};

// Needs at least one wave with a token count. Throws CalibrationError.
Calibration calibrate(const std::vector<Liveness>& traces, double safety_factor = 1.1);

CalibrationJson calibration_to_json(const Calibration& calibration);
// Throws CalibrationError naming the field that is missing or wrong.
Calibration calibration_from_json(const CalibrationJson& json);

}  // namespace psc
