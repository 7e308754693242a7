#include "pricing/saved_price.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "pricing/price_json.h"
#include "pricing/pricing_fingerprint.h"

namespace psc::pricing {
namespace {

// Plain price reports keep the figures under "price"; admission reports under "admission".
std::string_view result_key(bool admission) { return admission ? "admission" : "price"; }

std::string child(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

void compare_into(const Json& reported, const Json& repriced, const std::string& path, std::vector<Mismatch>& out) {
  if (reported.is_object() && repriced.is_object()) {
    for (const auto& entry : repriced.items()) {
      auto it = reported.find(entry.key());
      if (it == reported.end()) {
        out.push_back({child(path, entry.key()), "absent", entry.value().dump()});
      } else {
        compare_into(*it, entry.value(), child(path, entry.key()), out);
      }
    }
    for (const auto& entry : reported.items()) {
      if (!repriced.contains(entry.key())) out.push_back({child(path, entry.key()), entry.value().dump(), "absent"});
    }
    return;
  }
  // Numbers compare by value whatever their JSON type (nlohmann compares
  // unsigned and signed integers numerically).
  if (reported != repriced) out.push_back({path, reported.dump(), repriced.dump()});
}

}  // namespace

std::vector<Mismatch> compare_results(const Json& reported, const Json& repriced, const std::string& path) {
  std::vector<Mismatch> out;
  compare_into(reported, repriced, path, out);
  return out;
}

Json make_saved_price(const Json& plan, std::optional<Bytes> budget_bytes, const Json& result) {
  Json report = Json::object();
  report["report"] = kSavedPriceKind;
  report["version"] = kSavedPriceVersion;
  report["estimator_fingerprint"] = kEstimatorFingerprint;
  report["plan"] = plan;
  if (budget_bytes) report["budget_bytes"] = *budget_bytes;
  report[std::string(result_key(budget_bytes.has_value()))] = result;
  return report;
}

Replay replay_saved_price(const Json& report, bool allow_source_drift) {
  if (!report.is_object()) throw PlanError("(top level)", "a report must be a JSON object");
  auto kind = report.find("report");
  if (kind == report.end() || *kind != kSavedPriceKind) {
    throw PlanError("report", fmt::format("must be \"{}\" (is this a price report?)", kSavedPriceKind));
  }
  auto version = report.find("version");
  if (version == report.end() || !version->is_number_integer() || *version != kSavedPriceVersion) {
    throw PlanError("version", fmt::format("this build reads report version {} only", kSavedPriceVersion));
  }
  auto fingerprint = report.find("estimator_fingerprint");
  if (fingerprint == report.end() || !fingerprint->is_string()) {
    throw PlanError("estimator_fingerprint", "required string missing");
  }
  auto plan = report.find("plan");
  if (plan == report.end()) throw PlanError("plan", "required field missing");

  std::optional<Bytes> budget;
  if (auto it = report.find("budget_bytes"); it != report.end()) {
    const bool non_negative = it->is_number_unsigned() || (it->is_number_integer() && it->get<std::int64_t>() >= 0);
    if (!non_negative || it->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      throw PlanError("budget_bytes", "must be a non-negative integer");
    }
    budget = static_cast<Bytes>(it->get<std::uint64_t>());
  }
  const std::string key(result_key(budget.has_value()));
  auto reported = report.find(key);
  if (reported == report.end()) throw PlanError(key, "required field missing");
  for (const auto& entry : report.items()) {
    const std::string& k = entry.key();
    if (k != "report" && k != "version" && k != "estimator_fingerprint" && k != "plan" && k != "budget_bytes" &&
        k != key) {
      throw PlanError(k, "unknown field");
    }
  }

  Replay replay;
  replay.report_fingerprint = fingerprint->get<std::string>();
  replay.source_drift = replay.report_fingerprint != kEstimatorFingerprint;
  if (replay.source_drift && !allow_source_drift) {
    replay.refused = true;
    return replay;
  }
  const Json repriced = evaluate_plan(*plan, budget, "plan.");
  replay.mismatches = compare_results(*reported, repriced, key);
  return replay;
}

}  // namespace psc::pricing
