// The JSON of `peakscope check --json`: one row per wave priced, the cold and
// warm summaries, and the count that decides the exit code.
#pragma once

#include <string>
#include <vector>

#include "estimator/calibration.h"
#include "estimator/check.h"

namespace psc {

// {"trace", "wave", "tokens", "cold", "groups", "measured_peak_bytes",
//  "raw_bytes", "required_bytes", "raw_error", "admitted_error" (of the full
//  price or, with floor_only, the floor-only one), "floor_raw_bytes",
//  "floor_raw_error", "peak_range", "peak_layer", "square_tokens",
//  ["peak_moment", "peak_moment_bytes"], "terms": {TERM: {"measured_bytes",
//  "priced_bytes", "over_bytes"}, ..., "adapter_gradient_priced_bytes",
//  "moment_priced_bytes", "transient_priced_bytes"}}
CalibrationJson check_row_to_json(const CheckRow& row, bool floor_only);

// {"calibration": calibration_path, "floor_only", "waves": [check_row_to_json...],
//  "summary": {"cold"|"warm": {"waves", "median_raw_error", "min_raw_error",
//  "max_raw_error", "under_estimates"}}, "under_estimates"}
CalibrationJson check_to_json(const std::string& calibration_path, const std::vector<CheckRow>& rows, bool floor_only);

// [{"id", "busiest_rank", "verdict_under_estimates", "ranks": [...]}].
CalibrationJson runs_to_json(const std::vector<RunCheck>& runs);

}  // namespace psc
