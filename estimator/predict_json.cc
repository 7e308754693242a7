#include "estimator/predict_json.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace psc {

namespace {

pricing::Json request_to_json(const WaveRequest& r) {
  pricing::Json j = pricing::Json::object();
  int64_t tokens = r.tokens;
  if (!r.groups.empty()) {
    tokens = 0;
    for (const GroupRequest& g : r.groups) tokens += g.tokens;
  }
  j["tokens"] = tokens;
  j["sequence_lengths"] = r.sequence_lengths;
  j["slots"] = r.slots;
  j["cold"] = r.cold;
  j["gradients_exist"] = r.gradients_exist;
  // Only requests that gave each group's size: others read as before.
  if (!r.groups.empty()) {
    pricing::Json groups = pricing::Json::array();
    for (const GroupRequest& g : r.groups)
      groups.push_back({{"slot", g.slot}, {"tokens", g.tokens}, {"sequence_lengths", g.sequence_lengths}});
    j["groups"] = std::move(groups);
  }
  if (!r.backward_order.empty()) j["backward_order"] = r.backward_order;
  return j;
}

bool by_moments(const Prediction& p) {
  for (const pricing::Forward& f : p.plan.forwards)
    for (const pricing::Group& g : f.groups)
      if (g.moments) return true;
  return false;
}

// What the price added over raw, and why: the calibration's derived margin at
// this wave's distance beyond its sizes, or the flat factor.
pricing::Json margin_to_json(const Calibration& c, const Prediction& p) {
  const double factor = p.plan.safety_factor;
  std::string why;
  if (c.margin.derived) {
    const double beyond = c.margin.doublings_beyond(p.group_tokens);
    why = fmt::format(
        "derived from the calibration's sizes left out in turn: +{:.2f}% inside, +{:.2f}% per doubling "
        "beyond {} tokens per group; this wave is {:.2f} doublings beyond",
        c.margin.inside * 100, c.margin.per_doubling * 100, c.margin.largest_tokens, beyond);
  } else {
    why = fmt::format("the flat safety factor x{} ({})", c.safety_factor,
                      c.margin.evidence.empty() ? std::string("a calibration written before margins were derived")
                                                : c.margin.evidence.front());
  }
  return {{"fraction", factor - 1.0}, {"derived", c.margin.derived}, {"why", why}};
}

}  // namespace

pricing::Json prediction_to_json(const Calibration& c, const WaveRequest& request, const Prediction& p) {
  pricing::Json j = pricing::price_to_json(p.price);
  j["request"] = request_to_json(request);
  j["pricing"] = by_moments(p) ? "worst moment" : "sum of maxima";
  j["margin"] = margin_to_json(c, p);
  j["warnings"] = p.extrapolation.warnings(c);
  j["extrapolated"] = {{"outside", p.extrapolation.outside}, {"few_sizes", p.extrapolation.few_sizes}};
  return j;
}

pricing::Json ranks_to_json(const RunPrediction& run) {
  pricing::Json ranks = pricing::Json::array();
  for (const RankPrediction& r : run.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"tokens", r.tokens},
                     {"raw_bytes", r.prediction.price.raw_bytes},
                     {"required_bytes", r.prediction.price.required_bytes}});
  return {{"ranks", ranks}, {"busiest_rank", run.ranks[run.busiest].rank}};
}

pricing::Json wave_admission_to_json(const Calibration& c, const WaveRequest& shape, int64_t max_sequence_length,
                                     int64_t max_tokens, pricing::Bytes budget_bytes,
                                     const pricing::Admission& admission) {
  pricing::Json j = pricing::Json::object();
  j["budget_bytes"] = budget_bytes;
  j["max_tokens"] = max_tokens;
  j["max_sequence_length"] = max_sequence_length;
  j["admitted_tokens"] = admission.tokens;
  j["decided_by"] = "exact";
  j["search_prices"] = admission.search_prices;
  j["next_required_bytes"] =
      admission.next_required_bytes ? pricing::Json(*admission.next_required_bytes) : pricing::Json(nullptr);
  j["price"] = nullptr;
  if (admission.tokens > 0) {
    const WaveRequest at = wave_at(shape, admission.tokens, max_sequence_length);
    j["price"] = prediction_to_json(c, at, predict(c, at));
  }
  return j;
}

}  // namespace psc
