#include "pricing/admission.h"

#include <algorithm>
#include <cmath>

namespace psc::pricing {

Plan plan_at(const AdmissionPlan& plan, std::int64_t tokens) {
  Plan out;
  out.safety_factor = plan.safety_factor;
  out.transient_bytes = plan.transient_bytes;
  out.profiled = plan.profiled;
  Forward& forward = out.forwards.emplace_back();
  forward.output_bytes = plan.output.at(tokens);
  forward.workspace_bytes = plan.workspace.at(tokens);
  forward.input_gradient_bytes = plan.input_gradient.at(tokens);
  forward.groups.reserve(plan.groups.size());
  for (const AdmissionGroup& source : plan.groups) {
    Group& group = forward.groups.emplace_back();
    group.slot = source.slot;
    group.boundary_bytes.reserve(source.boundary_bytes_per_token.size());
    for (Bytes rate : source.boundary_bytes_per_token) group.boundary_bytes.push_back(rate * tokens);
    group.pending_gradient_bytes = source.pending_gradient_bytes;
    group.outside_gradient_bytes = source.outside_gradient_bytes;
  }
  return out;
}

bool has_pending_gradients(const AdmissionPlan& plan) {
  for (const AdmissionGroup& group : plan.groups) {
    if (group.outside_gradient_bytes > 0) return true;
    for (Bytes bytes : group.pending_gradient_bytes) {
      if (bytes > 0) return true;
    }
  }
  return false;
}

namespace {

// The largest raw value whose required bytes fit: floor(raw x factor) <= budget.
// With factor = mantissa / 2^shift that is raw x mantissa < (budget + 1) x 2^shift.
__int128 largest_fitting_raw(Bytes budget_bytes, double safety_factor) {
  int exponent = 0;
  const double fraction = std::frexp(safety_factor, &exponent);
  const auto mantissa = static_cast<__int128>(std::ldexp(fraction, 53));
  const int shift = 53 - exponent;  // >= 0 for factors below 2^53
  const __int128 limit = (static_cast<__int128>(budget_bytes) + 1) << shift;
  return (limit + mantissa - 1) / mantissa - 1;  // ceil(limit / mantissa) - 1
}

}  // namespace

std::int64_t cheap_admit_tokens(const AdmissionPlan& plan, Bytes budget_bytes) {
  __int128 fixed = plan.output.fixed + plan.workspace.fixed + plan.input_gradient.fixed;
  __int128 rate = plan.output.per_token + plan.workspace.per_token + plan.input_gradient.per_token;
  for (const AdmissionGroup& group : plan.groups) {
    for (Bytes r : group.boundary_bytes_per_token) rate += r;
  }
  if (!plan.groups.empty() && !plan.profiled) fixed += plan.transient_bytes;

  const __int128 room = largest_fitting_raw(budget_bytes, plan.safety_factor) - fixed;
  if (room < 0) return 0;
  if (rate == 0) return plan.max_tokens;
  return static_cast<std::int64_t>(std::min<__int128>(plan.max_tokens, room / rate));
}

Admission admit(const AdmissionPlan& plan, Bytes budget_bytes) {
  const auto at = [&](std::int64_t tokens) { return plan_at(plan, tokens); };
  if (has_pending_gradients(plan)) return admit_by_search(at, plan.max_tokens, budget_bytes);
  Admission result;
  result.decided_by = DecidedBy::kCheap;
  result.cheap_estimates = 1;
  result.tokens = cheap_admit_tokens(plan, budget_bytes);
  // For the report, not for the decision: what the admitted width costs, and what
  // one more token would cost.
  if (result.tokens > 0) result.price = price(at(result.tokens));
  if (result.tokens < plan.max_tokens) result.next_required_bytes = price(at(result.tokens + 1)).required_bytes;
  return result;
}

}  // namespace psc::pricing
