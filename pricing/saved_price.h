// Saved prices and their replay (`price PLAN --report FILE`, `replay FILE`;
// the file's kind is "peakscope-price-report"). Not the trace report of
// `peakscope report` (analysis/report_*): a saved price holds the plan as
// given, the budget (admission only), every figure the estimator printed, and
// the fingerprint of the estimator source that printed them. Replaying
// re-prices the plan through the same entry point and names every figure that
// differs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pricing/plan.h"
#include "pricing/pricing.h"

namespace psc::pricing {

constexpr std::string_view kSavedPriceKind = "peakscope-price-report";
constexpr int kSavedPriceVersion = 1;

// `result` is what evaluate_plan() returned for `plan` and `budget_bytes`.
Json make_saved_price(const Json& plan, std::optional<Bytes> budget_bytes, const Json& result);

struct Mismatch {
  std::string component;  // e.g. "price.components.adapter_gradient"
  std::string reported;   // JSON text, or "absent"
  std::string repriced;
};

struct Replay {
  std::string report_fingerprint;
  bool source_drift = false;  // the report came from different estimator source
  bool refused = false;       // drift without permission: not re-priced
  std::vector<Mismatch> mismatches;
  bool ok() const { return !refused && mismatches.empty(); }
};

// Throws PlanError (field names start with the report's own keys, e.g.
// "plan.groups[0].slot") when the report is not one this build can read.
Replay replay_saved_price(const Json& report, bool allow_source_drift);

// Every leaf (and every array, as a whole) that differs, named by its path.
std::vector<Mismatch> compare_results(const Json& reported, const Json& repriced, const std::string& path);

}  // namespace psc::pricing
