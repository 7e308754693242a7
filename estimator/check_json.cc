#include "estimator/check_json.h"

#include <utility>

namespace psc {

using Json = CalibrationJson;

Json check_row_to_json(const CheckRow& r, bool floor_only) {
  const pricing::Price& p = r.priced(floor_only);
  Json j;
  j["trace"] = r.trace;
  j["wave"] = r.wave;
  j["tokens"] = r.tokens;
  j["cold"] = r.cold;
  j["groups"] = r.groups;
  j["measured_peak_bytes"] = r.measured_peak_bytes;
  j["raw_bytes"] = p.raw_bytes;
  j["required_bytes"] = p.required_bytes;
  j["raw_error"] = r.raw_error_of(floor_only);
  j["admitted_error"] = r.admitted_error_of(floor_only);
  j["margin"] = r.margin;
  j["outside"] = r.outside;
  if (!r.warnings.empty()) j["warnings"] = r.warnings;
  j["floor_raw_bytes"] = r.floor_price.raw_bytes;
  j["floor_raw_error"] = r.floor_raw_error;
  j["peak_range"] = r.peak_range;
  j["peak_layer"] = p.peak.layer;
  j["square_tokens"] = r.square_tokens;
  if (p.peak.moment != pricing::Moment::kNone) {
    j["peak_moment"] = pricing::moment_name(p.peak.moment);
    j["peak_moment_bytes"] = p.peak.moment_bytes;
  }
  Json terms = Json::object();
  for (const TermResidual& t : r.terms)
    terms[t.term] = {{"measured_bytes", t.measured}, {"priced_bytes", t.fitted}, {"over_bytes", -t.residual()}};
  terms["adapter_gradient_priced_bytes"] = p.components.adapter_gradient;
  terms["moment_priced_bytes"] = p.components.moment;
  terms["transient_priced_bytes"] = p.components.transient;
  j["terms"] = std::move(terms);
  return j;
}

Json check_to_json(const std::string& calibration_path, const std::vector<CheckRow>& rows, bool floor_only) {
  const CheckSummary summary = summarize_check(rows, floor_only);
  Json j;
  j["calibration"] = calibration_path;
  j["floor_only"] = floor_only;
  Json waves = Json::array();
  for (const CheckRow& r : rows) waves.push_back(check_row_to_json(r, floor_only));
  j["waves"] = std::move(waves);
  for (const auto& [name, s] :
       {std::pair<const char*, const ErrorSummary&>{"cold", summary.cold}, {"warm", summary.warm}})
    j["summary"][name] = {{"waves", s.waves},
                          {"median_raw_error", s.median},
                          {"min_raw_error", s.min},
                          {"max_raw_error", s.max},
                          {"under_estimates", s.under}};
  j["under_estimates"] = summary.under_estimates();
  return j;
}

Json runs_to_json(const std::vector<RunCheck>& runs) {
  Json out = Json::array();
  for (const RunCheck& run : runs) {
    Json ranks = Json::array();
    for (const RankCheck& r : run.ranks)
      ranks.push_back({{"rank", r.member.header.rank},
                       {"host", host_of(r.member.header)},
                       {"pid", r.member.header.pid},
                       {"trace", r.member.path},
                       {"waves", r.waves},
                       {"under_estimates", r.under},
                       {"largest_measured_peak_bytes", r.largest_measured},
                       {"min_raw_error", r.min_raw_error},
                       {"max_raw_error", r.max_raw_error}});
    out.push_back({{"id", run.id.empty() ? Json(nullptr) : Json(run.id)},
                   {"busiest_rank", run.ranks[static_cast<size_t>(run.busiest)].member.header.rank},
                   {"verdict_under_estimates", run.verdict_under()},
                   {"ranks", std::move(ranks)}});
  }
  return out;
}

}  // namespace psc
