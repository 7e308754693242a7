// Admission: the largest wave, in tokens, whose price fits a memory budget.
//
// An admission plan is a plan whose token-dependent sizes are given per token of
// the wave: each group's boundaries, and optionally output, workspace and input
// gradient. Pending gradients do not depend on tokens. At width T every such size
// is fixed + per_token x T.
//
// The price is non-decreasing in T (docs/pricing.md proves it): per group,
// retained + excess = max_i [p[L] + sum_{j>=i} p[j] + T x (B - sum_{j>i} r[j])]
// with B >= sum_{j>i} r[j], and max(T x B_h, P_h) for the other groups' nets. So
// a binary search over T finds the same width as trying every T.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pricing/pricing.h"

namespace psc::pricing {

constexpr std::int64_t kMaxAdmissionTokens = std::int64_t{1} << 40;

struct LinearBytes {
  Bytes fixed = 0;
  Bytes per_token = 0;
  Bytes at(std::int64_t tokens) const { return fixed + per_token * tokens; }
};

struct AdmissionGroup {
  std::optional<std::string> slot;
  std::vector<Bytes> boundary_bytes_per_token;  // r[0..L-1]
  std::vector<Bytes> pending_gradient_bytes;    // p[0..L-1], constant in tokens
  Bytes outside_gradient_bytes = 0;             // p[L]
};

struct AdmissionPlan {
  double safety_factor = 1.0;
  Bytes transient_bytes = 0;
  bool profiled = false;
  std::int64_t max_tokens = 1;  // widths searched: 1..max_tokens
  LinearBytes output;
  LinearBytes workspace;
  LinearBytes input_gradient;
  std::vector<AdmissionGroup> groups;
};

// The ordinary plan of a wave of `tokens` tokens.
Plan plan_at(const AdmissionPlan& plan, std::int64_t tokens);

// True when some group still has gradients to allocate: only the step's first
// gradient wave does. Then the price is not linear in tokens.
bool has_pending_gradients(const AdmissionPlan& plan);

enum class DecidedBy { kCheap, kExact };

struct Admission {
  std::int64_t tokens = 0;  // largest admitted width; 0 when not even one token fits
  DecidedBy decided_by = DecidedBy::kExact;
  int search_prices = 0;                     // exact prices the search evaluated to decide
  int cheap_estimates = 0;                   // cheap estimates consulted to decide
  std::optional<Price> price;                // the exact price at `tokens` (when > 0)
  std::optional<Bytes> next_required_bytes;  // exact required_bytes at tokens + 1 (when <= max_tokens)
};

// Decides with the cheap estimate only while no slot has pending gradients;
// otherwise by binary search over the exact price.
Admission admit(const AdmissionPlan& plan, Bytes budget_bytes);

// The binary search alone, over any plan of `tokens` tokens whose price does
// not decrease with them (the calibrated predictor's, estimator/predict.h):
// always decided by the exact price.
template <typename PlanAt>
Admission admit_by_search(PlanAt plan_at, std::int64_t max_tokens, Bytes budget_bytes) {
  Admission result;
  result.decided_by = DecidedBy::kExact;
  // Invariant: width `low` fits (0 trivially), every width above `high` does not.
  std::int64_t low = 0;
  std::int64_t high = max_tokens;
  while (low < high) {
    const std::int64_t mid = low + (high - low + 1) / 2;
    ++result.search_prices;
    if (price(plan_at(mid)).required_bytes <= budget_bytes) {
      low = mid;
    } else {
      high = mid - 1;
    }
  }
  result.tokens = low;
  // For the report, not for the decision: what the admitted width costs, and
  // what one more token would cost.
  if (result.tokens > 0) result.price = price(plan_at(result.tokens));
  if (result.tokens < max_tokens) result.next_required_bytes = price(plan_at(result.tokens + 1)).required_bytes;
  return result;
}

// The cheap estimate: the price without the adapter term is linear in tokens,
// raw(T) = fixed + rate x T, so the width follows from one division. It equals the
// exact answer when no slot has pending gradients (the adapter term is then 0);
// with pending gradients it ignores the adapter term and can admit too much,
// which is why admit() never consults it then.
std::int64_t cheap_admit_tokens(const AdmissionPlan& plan, Bytes budget_bytes);

}  // namespace psc::pricing
