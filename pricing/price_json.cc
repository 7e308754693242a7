#include "pricing/price_json.h"

#include <nlohmann/json.hpp>

namespace psc::pricing {

Json price_to_json(const Price& price) {
  const Components& c = price.components;
  Json components = Json::object();
  components["output"] = c.output;
  components["retained"] = c.retained;
  components["workspace"] = c.workspace;
  components["input_gradient"] = c.input_gradient;
  components["adapter_gradient"] = c.adapter_gradient;
  components["adapter_gradient_slots"] = c.adapter_gradient_slots;
  // Only plans whose groups carry moments have this component: reports of
  // other plans read as they did.
  if (c.moment != 0 || price.peak.moment != Moment::kNone) components["moment"] = c.moment;
  // Only plans whose groups hold waiting bytes have this one.
  if (c.waiting != 0) components["waiting"] = c.waiting;
  components["transient"] = c.transient;

  Json out = Json::object();
  out["required_bytes"] = price.required_bytes;
  out["raw_bytes"] = price.raw_bytes;
  out["components"] = std::move(components);
  out["peak_group"] = price.peak_group ? Json(*price.peak_group) : Json(nullptr);
  out["peak_layer"] = price.peak.layer >= 0 ? Json(price.peak.layer) : Json(nullptr);
  // Only plans whose groups carry moments name one: other reports read as before.
  if (price.peak.moment != Moment::kNone) {
    out["peak_moment"] = moment_name(price.peak.moment);
    out["peak_moment_bytes"] = price.peak.moment_bytes;
  }
  return out;
}

Json admission_to_json(const Admission& admission, const AdmissionPlan& plan, Bytes budget_bytes) {
  Json out = Json::object();
  out["budget_bytes"] = budget_bytes;
  out["max_tokens"] = plan.max_tokens;
  out["admitted_tokens"] = admission.tokens;
  out["decided_by"] = admission.decided_by == DecidedBy::kCheap ? "cheap" : "exact";
  out["search_prices"] = admission.search_prices;
  out["cheap_estimates"] = admission.cheap_estimates;
  out["next_required_bytes"] = admission.next_required_bytes ? Json(*admission.next_required_bytes) : Json(nullptr);
  out["price"] = admission.price ? price_to_json(*admission.price) : Json(nullptr);
  return out;
}

Json evaluate_plan(const Json& plan, std::optional<Bytes> budget_bytes, const std::string& field_prefix) {
  if (!budget_bytes) return price_to_json(price(parse_plan(plan, field_prefix)));
  const AdmissionPlan admission_plan = parse_admission_plan(plan, field_prefix);
  return admission_to_json(admit(admission_plan, *budget_bytes), admission_plan, *budget_bytes);
}

}  // namespace psc::pricing
