// Plan input: what is accepted, and bad input refused with the field named.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pricing/plan.h"

namespace psc::pricing {
namespace {

struct BadInput {
  const char* what;
  const char* json;
  const char* field;
  const char* reason_contains;
};

// Wraps one group (or several) into an otherwise valid plan.
std::string with_groups(const std::string& groups) {
  return R"({"safety_factor": 1.1, "transient_bytes": 0, "profiled": false, "groups": [)" + groups + "]}";
}
const std::string kGood = R"({"slot": "a", "boundary_bytes": [1, 2], "pending_gradient_bytes": [3, 4],
                              "outside_gradient_bytes": 5})";

void expect_refused(const std::string& text, const std::string& field, const std::string& reason_contains,
                    bool admission = false, const std::string& prefix = "") {
  SCOPED_TRACE(text);
  try {
    if (admission) {
      parse_admission_plan(Json::parse(text), prefix);
    } else {
      parse_plan(Json::parse(text), prefix);
    }
    ADD_FAILURE() << "accepted";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.field(), field);
    EXPECT_NE(e.reason().find(reason_contains), std::string::npos) << e.reason();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);  // one line
  }
}

TEST(PricingPlan, AcceptsTheDesignExampleAndDefaults) {
  const Plan plan = parse_plan(Json::parse(with_groups(kGood)));
  ASSERT_EQ(plan.forwards.size(), 1u);
  ASSERT_EQ(plan.forwards[0].groups.size(), 1u);
  const Group& g = plan.forwards[0].groups[0];
  EXPECT_EQ(g.slot, "a");
  EXPECT_EQ(g.boundary_bytes, (std::vector<Bytes>{1, 2}));
  EXPECT_EQ(g.pending_gradient_bytes, (std::vector<Bytes>{3, 4}));
  EXPECT_EQ(g.outside_gradient_bytes, 5);
  EXPECT_DOUBLE_EQ(plan.safety_factor, 1.1);
  EXPECT_EQ(plan.forwards[0].output_bytes, 0);  // absent: 0
}

TEST(PricingPlan, WorkspaceAfterGradientIsOptionalAndAtMostTheWorkspace) {
  EXPECT_FALSE(parse_plan(Json::parse(with_groups(kGood))).forwards[0].workspace_after_gradient_bytes.has_value());
  const std::string head =
      R"({"safety_factor": 1.1, "transient_bytes": 0, "profiled": false, "workspace_bytes": 100, )";
  const Plan plan =
      parse_plan(Json::parse(head + R"("workspace_after_gradient_bytes": 40, "groups": [)" + kGood + "]}"));
  EXPECT_EQ(plan.forwards[0].workspace_after_gradient_bytes, 40);
  expect_refused(head + R"("workspace_after_gradient_bytes": 101, "groups": [)" + kGood + "]}",
                 "workspace_after_gradient_bytes", "cannot exceed");
  expect_refused(head + R"("workspace_after_gradient_bytes": -1, "groups": [)" + kGood + "]}",
                 "workspace_after_gradient_bytes", "");
}

TEST(PricingPlan, NullSlotNeedsNoGradientFields) {
  const Plan plan = parse_plan(Json::parse(with_groups(R"({"slot": null, "boundary_bytes": [7, 8]})")));
  EXPECT_FALSE(plan.forwards[0].groups[0].slot.has_value());
  EXPECT_EQ(plan.forwards[0].groups[0].pending_gradient_bytes, (std::vector<Bytes>{0, 0}));
}

TEST(PricingPlan, SameSlotInDifferentChildrenIsFine) {
  const Plan plan = parse_plan(Json::parse(R"({"safety_factor": 1, "transient_bytes": 0, "profiled": false,
      "children": [ {"groups": [ {"slot": "a", "boundary_bytes": [1], "pending_gradient_bytes": [1],
                                  "outside_gradient_bytes": 0} ]},
                    {"groups": [ {"slot": "a", "boundary_bytes": [2], "pending_gradient_bytes": [1],
                                  "outside_gradient_bytes": 0} ]} ]})"));
  EXPECT_EQ(plan.forwards.size(), 2u);
}

TEST(PricingPlan, RefusesBadSizes) {
  const BadInput cases[] = {
      {"negative", R"({"slot": "a", "boundary_bytes": [1, -5], "pending_gradient_bytes": [3, 4],
                       "outside_gradient_bytes": 5})",
       "groups[0].boundary_bytes[1]", "must be a non-negative integer"},
      {"fraction", R"({"slot": "a", "boundary_bytes": [1, 2], "pending_gradient_bytes": [3, 4.5],
                       "outside_gradient_bytes": 5})",
       "groups[0].pending_gradient_bytes[1]", "must be a non-negative integer"},
      {"float that is whole", R"({"slot": "a", "boundary_bytes": [1.0, 2], "pending_gradient_bytes": [3, 4],
                                  "outside_gradient_bytes": 5})",
       "groups[0].boundary_bytes[0]", "must be a non-negative integer"},
      {"string", R"({"slot": "a", "boundary_bytes": [1, 2], "pending_gradient_bytes": [3, 4],
                     "outside_gradient_bytes": "5"})",
       "groups[0].outside_gradient_bytes", "must be a non-negative integer"},
      {"huge", R"({"slot": "a", "boundary_bytes": [1, 2], "pending_gradient_bytes": [3, 4],
                   "outside_gradient_bytes": 100000000000000000000})",
       "groups[0].outside_gradient_bytes", "must be a non-negative integer"},
      {"above 2^56", R"({"slot": "a", "boundary_bytes": [1, 72057594037927937], "pending_gradient_bytes": [3, 4],
                         "outside_gradient_bytes": 5})",
       "groups[0].boundary_bytes[1]", "at most 2^56"},
      {"sum past 2^56", R"({"slot": "a", "boundary_bytes": [72057594037927936, 1], "pending_gradient_bytes": [0, 0],
                            "outside_gradient_bytes": 0})",
       "groups[0].boundary_bytes[1]", "add up to more than 2^56"},
  };
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.what);
    expect_refused(with_groups(c.json), c.field, c.reason_contains);
  }
}

TEST(PricingPlan, RefusesArraysThatDisagreeWithTheLayerCount) {
  expect_refused(
      with_groups(kGood + R"(, {"slot": "b", "boundary_bytes": [1, 2, 3], "pending_gradient_bytes": [1, 2, 3],
                                         "outside_gradient_bytes": 0})"),
      "groups[1].boundary_bytes", "has 3 entries but the plan has 2 layers (from groups[0].boundary_bytes)");
  expect_refused(with_groups(R"({"slot": "a", "boundary_bytes": [1, 2], "pending_gradient_bytes": [3],
                                 "outside_gradient_bytes": 0})"),
                 "groups[0].pending_gradient_bytes", "has 1 entries but the plan has 2 layers");
  expect_refused(R"({"safety_factor": 1, "transient_bytes": 0, "profiled": false, "children": [
                      {"groups": [ {"slot": "a", "boundary_bytes": [1], "pending_gradient_bytes": [1],
                                    "outside_gradient_bytes": 0} ]},
                      {"groups": [ {"slot": "b", "boundary_bytes": [1, 1], "pending_gradient_bytes": [1, 1],
                                    "outside_gradient_bytes": 0} ]} ]})",
                 "children[1].groups[0].boundary_bytes", "from children[0].groups[0].boundary_bytes");
  expect_refused(with_groups(R"({"slot": "a", "boundary_bytes": [1, 2], "parameters": [
                                   {"name": "w", "layers": [0, 2], "local_bytes": 4}]})"),
                 "groups[0].parameters[0].layers[1]", "must be a layer index from 0 to 1");
}

TEST(PricingPlan, RefusesTwoGroupsOfOneForwardOnOneSlot) {
  expect_refused(with_groups(kGood + ", " + R"({"slot": null, "boundary_bytes": [0, 0]}, )" + kGood), "groups[2].slot",
                 "\"a\" is already trained by groups[0]");
}

TEST(PricingPlan, RefusesMalformedStructure) {
  const BadInput cases[] = {
      {"not an object", "[1, 2]", "(top level)", "must be a JSON object"},
      {"no safety factor", R"({"transient_bytes": 0, "profiled": false})", "safety_factor", "required field missing"},
      {"safety below 1", R"({"safety_factor": 0.9, "transient_bytes": 0, "profiled": false})", "safety_factor",
       "from 1 to 64"},
      {"profiled not bool", R"({"safety_factor": 1, "transient_bytes": 0, "profiled": 0})", "profiled",
       "true or false"},
      {"unknown top field", R"({"safety_factor": 1, "transient_bytes": 0, "profiled": false, "group": []})", "group",
       "unknown field"},
      {"per-token plan without budget",
       R"({"safety_factor": 1, "transient_bytes": 0, "profiled": false, "max_tokens": 5})", "max_tokens", "admission"},
      {"child sets the safety factor",
       R"({"safety_factor": 1, "transient_bytes": 0, "profiled": false, "children": [{"safety_factor": 1}]})",
       "children[0].safety_factor", "whole wave"},
      {"nested split",
       R"({"safety_factor": 1, "transient_bytes": 0, "profiled": false, "children": [{"children": []}]})",
       "children[0].children", "cannot itself be split"},
      {"split with top-level groups",
       R"({"safety_factor": 1, "transient_bytes": 0, "profiled": false, "groups": [{"slot": null, "boundary_bytes": []}],
           "children": [{"groups": []}]})",
       "groups", "in its children"},
      {"split with top-level output",
       R"({"safety_factor": 1, "transient_bytes": 0, "profiled": false, "output_bytes": 3, "children": [{}]})",
       "output_bytes", "from its children"},
      {"split with a top-level backward order (it would be ignored)",
       R"({"safety_factor": 1, "transient_bytes": 0, "profiled": false, "backward_order": [5, 7, 7],
           "children": [{}]})",
       "backward_order", "order their own groups"},
      {"split with top-level runs_free_boundaries",
       R"({"safety_factor": 1, "transient_bytes": 0, "profiled": false, "runs_free_boundaries": true,
           "children": [{}]})",
       "runs_free_boundaries", "order their own groups"},
      {"runs_free_boundaries without an order",
       R"({"safety_factor": 1, "transient_bytes": 0, "profiled": false, "runs_free_boundaries": true})",
       "runs_free_boundaries", "give backward_order with it"},
  };
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.what);
    expect_refused(c.json, c.field, c.reason_contains);
  }
}

TEST(PricingPlan, RefusesBadGroups) {
  const BadInput cases[] = {
      {"typo", R"({"slot": "a", "boundary_byte": [1, 2]})", "groups[0].boundary_byte", "unknown field"},
      {"empty slot", R"({"slot": "", "boundary_bytes": [1, 2]})", "groups[0].slot", "non-empty string or null"},
      {"missing slot", R"({"boundary_bytes": [1, 2]})", "groups[0].slot", "required field missing"},
      {"no gradients", R"({"slot": "a", "boundary_bytes": [1, 2]})", "groups[0].pending_gradient_bytes",
       "required field missing"},
      {"outside forgotten", R"({"slot": "a", "boundary_bytes": [1, 2], "pending_gradient_bytes": [0, 0]})",
       "groups[0].outside_gradient_bytes", "required field missing"},
      {"both forms",
       R"({"slot": "a", "boundary_bytes": [1, 2], "pending_gradient_bytes": [0, 0], "outside_gradient_bytes": 0,
           "parameters": []})",
       "groups[0].parameters", "not both"},
      {"null slot that trains",
       R"({"slot": null, "boundary_bytes": [1, 2], "pending_gradient_bytes": [0, 9], "outside_gradient_bytes": 0})",
       "groups[0].slot", "trains nothing"},
      {"parameter twice",
       R"({"slot": "a", "boundary_bytes": [1, 2], "parameters": [{"name": "w", "layers": [0], "local_bytes": 1},
                                                                 {"name": "w", "layers": [1], "local_bytes": 1}]})",
       "groups[0].parameters[1].name", "listed twice"},
      {"parameter bytes", R"({"slot": "a", "boundary_bytes": [1, 2], "parameters": [{"name": "w", "layers": [0]}]})",
       "groups[0].parameters[0].local_bytes", "required field missing"},
      {"parameter flag",
       R"({"slot": "a", "boundary_bytes": [1, 2], "parameters": [{"name": "w", "layers": [0], "local_bytes": 1,
                                                                  "trainable": "yes"}]})",
       "groups[0].parameters[0].trainable", "true or false"},
  };
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.what);
    expect_refused(with_groups(c.json), c.field, c.reason_contains);
  }
}

TEST(PricingPlan, RefusesBadAdmissionPlans) {
  const std::string head = R"("safety_factor": 1, "transient_bytes": 0, "profiled": false)";
  expect_refused("{" + head + "}", "max_tokens", "required field missing", true);
  expect_refused("{" + head + R"(, "max_tokens": 0})", "max_tokens", "from 1 to 2^40", true);
  expect_refused("{" + head + R"(, "max_tokens": 8, "children": [{}]})", "children", "cannot be split", true);
  expect_refused("{" + head + R"(, "max_tokens": 8, "groups": [{"slot": null, "boundary_bytes": [1]}]})",
                 "groups[0].boundary_bytes", "boundary_bytes_per_token", true);
  // Per-token sizes count at their largest width.
  expect_refused("{" + head + R"(, "max_tokens": 1099511627776, "workspace_bytes_per_token": 65537})",
                 "workspace_bytes_per_token", "add up to more than 2^56", true);
}

TEST(PricingPlan, PrefixesFieldsForReports) {
  expect_refused(with_groups(R"({"slot": 3, "boundary_bytes": []})"), "plan.groups[0].slot", "non-empty string", false,
                 "plan.");
  expect_refused("7", "plan", "must be a JSON object", false, "plan.");
}

}  // namespace
}  // namespace psc::pricing

namespace psc::pricing {
namespace {

const std::string kMoments =
    R"("moments": {"head_bytes": 7, "before_gradient_bytes": [1, 2], "after_gradient_bytes": [3, 4]})";

TEST(PricingPlan, MomentsArePerGroupAndPerLayer) {
  const Plan plan = parse_plan(Json::parse(with_groups(
      R"({"slot": "a", "boundary_bytes": [1, 2], "pending_gradient_bytes": [3, 4], "outside_gradient_bytes": 5, )" +
      kMoments + "}")));
  const Group& g = plan.forwards[0].groups[0];
  ASSERT_TRUE(g.moments);
  EXPECT_EQ(g.moments->head_bytes, 7);
  EXPECT_EQ(g.moments->before_gradient_bytes, (std::vector<Bytes>{1, 2}));
  EXPECT_EQ(g.moments->after_gradient_bytes, (std::vector<Bytes>{3, 4}));
  EXPECT_FALSE(parse_plan(Json::parse(with_groups(kGood))).forwards[0].groups[0].moments);
}

TEST(PricingPlan, RefusesBadMoments) {
  const std::string group = R"({"slot": "a", "boundary_bytes": [1, 2], "pending_gradient_bytes": [3, 4],
                                "outside_gradient_bytes": 5, )";
  expect_refused(with_groups(group + R"("moments": {"head_bytes": 1, "before_gradient_bytes": [1, 2]}})"),
                 "groups[0].moments.after_gradient_bytes", "required field missing");
  expect_refused(with_groups(group + R"("moments": {"head_bytes": 1, "before_gradient_bytes": [1],
                 "after_gradient_bytes": [1, 2]}})"),
                 "groups[0].moments.before_gradient_bytes", "has 1 entries but the plan has 2 layers");
  expect_refused(with_groups(group + R"("moments": {"head_bytes": -1, "before_gradient_bytes": [1, 2],
                 "after_gradient_bytes": [1, 2]}})"),
                 "groups[0].moments.head_bytes", "non-negative integer");
  expect_refused(with_groups(group + R"("moments": {"head_bytes": 1, "before_gradient_bytes": [1, 2],
                 "after_gradient_bytes": [1, 2], "tail": 3}})"),
                 "groups[0].moments.tail", "unknown field");
  expect_refused(with_groups(group + R"("moments": {"head_bytes": 1, "forward_bytes": 2,
                 "before_gradient_bytes": [1, 2], "after_gradient_bytes": [1, 2]}})"),
                 "groups[0].moments.forward_bytes", "at most head_bytes");
  const std::string split = R"({"safety_factor": 1.1, "transient_bytes": 0, "profiled": false, "children": [
      {"groups": [)" + group +
                            kMoments + R"(}]}, {"groups": [)" + kGood + "]}]}";
  expect_refused(split, "children[0].groups[0].moments", "one forward whose groups are the children");
}

// The worst moment by hand: b = [10, 20], p = [4, 8], p[L] = 1.
// head: 1 + 7 = 8; layer 1 before: 1 + 2 = 3, after: 1 + 8 + 4 = 13;
// layer 0 before: 1 + 8 - 20 + 1 = -10, after: -10 + 4 + 3 = -3. Worst: layer 1 after (13).
// The design's excess of the same group: max(1, 9, 9 + 4 - 20) = 9; moment = 13 - 9.
TEST(PricingPlan, WorstMomentByHand) {
  const Plan plan = parse_plan(Json::parse(with_groups(
      R"({"slot": "a", "boundary_bytes": [10, 20], "pending_gradient_bytes": [4, 8], "outside_gradient_bytes": 1,
          "moments": {"head_bytes": 7, "before_gradient_bytes": [1, 2], "after_gradient_bytes": [3, 4]}})")));
  const Price p = price(plan);
  EXPECT_EQ(p.components.adapter_gradient, 9);
  EXPECT_EQ(p.components.moment, 4);
  EXPECT_EQ(p.raw_bytes, 30 + 13);
  EXPECT_EQ(p.peak.layer, 1);
  EXPECT_EQ(p.peak.moment, Moment::kAfterGradient);
  EXPECT_EQ(p.peak.moment_bytes, 4);
}

}  // namespace
}  // namespace psc::pricing
