// Accuracy check (docs/design.md, "Accuracy is measured, never asserted"): for every
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
#include "traces/run.h"

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
  double margin = 0;           // what the price added over raw: the plan's factor − 1
  // The features of the wave's groups outside the calibrated sizes
  // (GrowthTerm::outside_features), naming what a miss extrapolated in.
  std::vector<std::string> outside;
  // What the wave's payload left check to assume and the trace says
  // otherwise (groups of evidently different sizes given as a count).
  std::vector<std::string> warnings;
  double floor_raw_error = 0;
  // Per term: measured in this wave versus what the plan charged: retained,
  // pending_gradient, then with moments the moment the price names
  // ("moment"), without them workspace, input_gradient and output.
  std::vector<TermResidual> terms;

  // The full price or, with floor_only, the floor-only one: what check
  // reports and judges the wave by.
  const pricing::Price& priced(bool floor_only) const { return floor_only ? floor_price : price; }
  double raw_error_of(bool floor_only) const { return floor_only ? floor_raw_error : raw_error; }
  // required / measured − 1 of that price (0 for a wave that measured nothing).
  double admitted_error_of(bool floor_only) const;
  bool under_estimate(bool floor_only) const {
    return static_cast<uint64_t>(priced(floor_only).raw_bytes) < measured_peak_bytes;
  }
};

// Waves without a token count are skipped (nothing to price them by). Throws
// CalibrationError when the trace's decoder has another number of layers than
// the calibration's: its waves cannot be priced by it.
std::vector<CheckRow> check_trace(const Calibration& calibration, const Liveness& trace);

// The raw errors of one kind of wave (cold or warm): how many, how many
// priced below their measured peak, and the median, least and largest error.
struct ErrorSummary {
  size_t waves = 0;
  size_t under = 0;
  double median = 0, min = 0, max = 0;
};

struct CheckSummary {
  ErrorSummary cold, warm;
  size_t under_estimates() const { return cold.under + warm.under; }
};

// Of the full prices or, with floor_only, the floor-only ones.
CheckSummary summarize_check(const std::vector<CheckRow>& rows, bool floor_only);

// The check of a distributed run, rank by rank (README "Distributed runs").
// The rank that runs out of memory first is the one whose price matters: the
// busiest, the rank with the largest measured wave peak. The run's verdict is
// that rank's under-estimates; every other rank's are reported beside it.
struct RankCheck {
  RunMember member;
  size_t waves = 0;          // checked
  size_t under = 0;          // priced below their measured peak
  double max_raw_error = 0;  // the largest raw error of its waves
  double min_raw_error = 0;  // the smallest (most negative)
  uint64_t largest_measured = 0;
};
struct RunCheck {
  std::string id;
  std::vector<RankCheck> ranks;  // members with checked waves, in the run's order
  int busiest = -1;              // index into ranks
  size_t verdict_under() const { return busiest < 0 ? 0 : ranks[static_cast<size_t>(busiest)].under; }
};

// One RunCheck per run among the checked traces that has rank traces
// (is_rank_trace; the others are checked as before, apart from any run).
std::vector<RunCheck> check_runs(const std::vector<Run>& runs, const std::vector<CheckRow>& rows, bool floor_only);

}  // namespace psc
