// The JSON that `peakscope price --json` prints (docs/pricing.md, "Output"), and the
// one entry point that turns a plan document into it, shared by `price` and
// `replay` so a replay re-prices exactly as the report was priced.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "pricing/admission.h"
#include "pricing/plan.h"
#include "pricing/pricing.h"

namespace psc::pricing {

// { "required_bytes", "raw_bytes", "components": {...}, "peak_group", "peak_layer" }
Json price_to_json(const Price& price);

// { "budget_bytes", "max_tokens", "admitted_tokens", "decided_by", "search_prices",
//   "cheap_estimates", "next_required_bytes", "price" }
Json admission_to_json(const Admission& admission, const AdmissionPlan& plan, Bytes budget_bytes);

// Without a budget: parse_plan + price, as price_to_json. With one: the plan is an
// admission plan and the result is admission_to_json. Throws PlanError.
Json evaluate_plan(const Json& plan, std::optional<Bytes> budget_bytes, const std::string& field_prefix = "");

}  // namespace psc::pricing
