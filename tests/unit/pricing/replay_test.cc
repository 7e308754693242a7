// Reports and replay: a report replays clean; any changed figure is named; a
// report from other estimator source is refused unless drift is allowed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pricing/price_json.h"
#include "pricing/pricing_fingerprint.h"
#include "pricing/saved_price.h"

namespace psc::pricing {
namespace {

const char* kPlan = R"({"safety_factor": 1.1, "transient_bytes": 1000, "profiled": false,
    "groups": [ {"slot": "a", "boundary_bytes": [10, 10], "pending_gradient_bytes": [100, 0],
                 "outside_gradient_bytes": 0},
                {"slot": "b", "boundary_bytes": [1000, 0], "pending_gradient_bytes": [0, 40],
                 "outside_gradient_bytes": 0} ]})";

const char* kAdmissionPlan = R"({"safety_factor": 1.25, "transient_bytes": 64, "profiled": false,
    "max_tokens": 4096, "workspace_bytes_per_token": 3,
    "groups": [ {"slot": "a", "boundary_bytes_per_token": [8, 8, 8],
                 "pending_gradient_bytes": [5, 0, 900], "outside_gradient_bytes": 7} ]})";

// A report as a file holds it: written out and read back.
Json report_for(const char* plan_text, std::optional<Bytes> budget) {
  const Json plan = Json::parse(plan_text);
  return Json::parse(make_saved_price(plan, budget, evaluate_plan(plan, budget)).dump());
}

TEST(Replay, FreshReportsReplayClean) {
  const Json report = report_for(kPlan, std::nullopt);
  EXPECT_EQ(report["estimator_fingerprint"], std::string(kEstimatorFingerprint));
  EXPECT_EQ(report["price"]["components"]["adapter_gradient"], 120);  // see PricingModel's worst-order case
  const Replay replay = replay_saved_price(report, false);
  EXPECT_TRUE(replay.ok());
  EXPECT_FALSE(replay.source_drift);
  EXPECT_TRUE(replay.mismatches.empty());

  const Json admission = report_for(kAdmissionPlan, 20000);
  EXPECT_EQ(admission["budget_bytes"], 20000);
  EXPECT_TRUE(admission.contains("admission"));
  EXPECT_FALSE(admission.contains("price"));
  EXPECT_TRUE(replay_saved_price(admission, false).ok());
}

TEST(Replay, NamesEveryChangedComponent) {
  Json report = report_for(kPlan, std::nullopt);
  report["price"]["components"]["adapter_gradient"] = 119;
  report["price"]["peak_layer"] = 0;
  report["price"]["components"]["adapter_gradient_slots"] = Json::array({"a"});
  const Replay replay = replay_saved_price(report, false);
  EXPECT_FALSE(replay.ok());
  ASSERT_EQ(replay.mismatches.size(), 3u);
  EXPECT_EQ(replay.mismatches[0].component, "price.components.adapter_gradient");
  EXPECT_EQ(replay.mismatches[0].reported, "119");
  EXPECT_EQ(replay.mismatches[0].repriced, "120");
  EXPECT_EQ(replay.mismatches[1].component, "price.components.adapter_gradient_slots");
  EXPECT_EQ(replay.mismatches[2].component, "price.peak_layer");
}

TEST(Replay, ChangedPlanShowsUpInTheFigures) {
  Json report = report_for(kPlan, std::nullopt);
  // Group a's b[1] 10 -> 11: retained +1; a's net 80 -> 79, so the worst order
  // (a, then b's 40) gives 119. raw is unchanged: only a per-component comparison
  // sees that the plan changed.
  report["plan"]["groups"][0]["boundary_bytes"][1] = 11;
  const Replay replay = replay_saved_price(report, false);
  std::vector<std::string> names;
  for (const Mismatch& m : replay.mismatches) names.push_back(m.component);
  EXPECT_EQ(names, (std::vector<std::string>{"price.components.retained", "price.components.adapter_gradient"}));
}

TEST(Replay, AdmissionMismatchesAreNamed) {
  Json report = report_for(kAdmissionPlan, 20000);
  const std::int64_t tokens = report["admission"]["admitted_tokens"].get<std::int64_t>();
  ASSERT_GT(tokens, 0);
  report["admission"]["admitted_tokens"] = tokens + 1;
  const Replay replay = replay_saved_price(report, false);
  ASSERT_EQ(replay.mismatches.size(), 1u);
  EXPECT_EQ(replay.mismatches[0].component, "admission.admitted_tokens");
}

TEST(Replay, MissingAndExtraFiguresAreMismatches) {
  Json report = report_for(kPlan, std::nullopt);
  report["price"].erase("peak_group");
  report["price"]["components"]["surprise"] = 1;
  const Replay replay = replay_saved_price(report, false);
  ASSERT_EQ(replay.mismatches.size(), 2u);
  EXPECT_EQ(replay.mismatches[0].component, "price.components.surprise");
  EXPECT_EQ(replay.mismatches[0].repriced, "absent");
  EXPECT_EQ(replay.mismatches[1].component, "price.peak_group");
  EXPECT_EQ(replay.mismatches[1].reported, "absent");
}

TEST(Replay, RefusesSourceDriftUnlessAllowed) {
  Json report = report_for(kPlan, std::nullopt);
  report["estimator_fingerprint"] = "fnv1a64:0123456789abcdef";
  const Replay refused = replay_saved_price(report, false);
  EXPECT_TRUE(refused.refused);
  EXPECT_TRUE(refused.source_drift);
  EXPECT_FALSE(refused.ok());
  const Replay allowed = replay_saved_price(report, true);
  EXPECT_FALSE(allowed.refused);
  EXPECT_TRUE(allowed.source_drift);
  EXPECT_TRUE(allowed.ok());
  // Drift allowed still checks the figures.
  report["price"]["raw_bytes"] = 1;
  EXPECT_FALSE(replay_saved_price(report, true).ok());
}

TEST(Replay, RefusesWhatIsNotAReport) {
  auto field_of = [](const Json& report) -> std::string {
    try {
      replay_saved_price(report, false);
    } catch (const PlanError& e) {
      return e.field();
    }
    return "(accepted)";
  };
  const Json good = report_for(kPlan, std::nullopt);
  Json no_plan = good;
  no_plan.erase("plan");
  EXPECT_EQ(field_of(no_plan), "plan");
  Json bad_plan = good;
  bad_plan["plan"]["groups"][1]["slot"] = "a";
  EXPECT_EQ(field_of(bad_plan), "plan.groups[1].slot");
  Json wrong_kind = good;
  wrong_kind["report"] = "something else";
  EXPECT_EQ(field_of(wrong_kind), "report");
  Json future = good;
  future["version"] = kSavedPriceVersion + 1;
  EXPECT_EQ(field_of(future), "version");
  Json no_result = good;
  no_result.erase("price");
  EXPECT_EQ(field_of(no_result), "price");
  EXPECT_EQ(field_of(Json::array()), "(top level)");
}

}  // namespace
}  // namespace psc::pricing
