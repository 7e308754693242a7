// Accuracy check (DESIGN.md "Accuracy is measured, never asserted"): for every
// wave of a trace, the plan the calibration and the wave's payload give, priced
// by the pricing library, against the wave's measured peak.
//
// The plan of a wave: one forward, or one per child of a split wave (payload
// "children"); `groups` gradient groups of tokens/groups each, the payload's
// slots in order;
// each group's pending gradients are its slot's calibrated adapter-gradient
// bytes less what the trace shows already live when the wave began (the
// trainer's pending state, read, not assumed); the transient only for a cold
// wave. Floor-only prices the same plan without pending gradients, the way
// pricing was before they were priced.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "estimator/calibration.h"
#include "estimator/liveness.h"
#include "pricing/pricing.h"

namespace psc {

pricing::Plan plan_for_wave(const Calibration& calibration, const WaveLiveness& wave, bool floor_only);

struct CheckRow {
  std::string trace;
  int32_t wave = 0;
  int64_t tokens = 0;
  double square_tokens = 0;
  bool cold = false;
  int64_t groups = 1;
  uint64_t measured_peak_bytes = 0;
  std::string peak_range;  // where the measured peak was reached
  pricing::Price price;
  pricing::Price floor_price;  // the same plan without pending gradients
  double raw_error = 0;        // raw / measured − 1
  double admitted_error = 0;   // required / measured − 1
  double floor_raw_error = 0;
  // Per term: measured in this wave versus what the plan charged: retained,
  // pending_gradient, then with moments the moment the price names
  // ("moment"), without them workspace, input_gradient and output.
  std::vector<TermResidual> terms;
  bool under_estimate(bool floor_only) const {
    return static_cast<uint64_t>((floor_only ? floor_price : price).raw_bytes) < measured_peak_bytes;
  }
};

// Waves without a token count are skipped (nothing to price them by).
std::vector<CheckRow> check_trace(const Calibration& calibration, const Liveness& trace);

}  // namespace psc
