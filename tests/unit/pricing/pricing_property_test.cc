// Property tests: the closed form against the brute-force oracle
// (tests/support/pricing_oracle.h), to the byte, on random waves priced through the
// JSON input path (so parameter metadata goes through the estimator's derivation).
#include <gtest/gtest.h>

#include <climits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "pricing/plan.h"
#include "pricing/pricing.h"
#include "tests/support/pricing_oracle.h"
#include "tests/unit/pricing/pricing_cases.h"

namespace psc::pricing {
namespace {

using testing::Case;
using testing::Shape;

// What the random cases exercised, so a generator that stopped producing the
// interesting cases would be noticed.
struct Coverage {
  int cases = 0;
  int worst_order_not_drain_order = 0;  // another group's positive net mattered
  int shared_parameter_mattered = 0;    // counting it at its lowest layer changes the price
  int outside_mattered = 0;
  int same_slot_set_children = 0;
  int overlap_mattered = 0;  // the workspace overlap credit lowers the adapter term
  int moment_mattered = 0;   // a group's moments raise the adapter term above the design's
  int waiting_mattered = 0;  // other groups' waiting bytes raise the worst order
  int net_over_waiting = 0;  // ... and some group's net beat its waiting bytes there
};

void expect_matches_oracle(const Case& c, Coverage& coverage) {
  const Json plan_text = testing::plan_json(c);
  const Plan plan = parse_plan(plan_text);
  const Price got = price(plan);
  const oracle::Result want = oracle::price(c.wave);
  ++coverage.cases;

  ASSERT_EQ(got.components.adapter_gradient + got.components.moment + got.components.waiting, want.adapter)
      << plan_text.dump();
  ASSERT_GE(got.components.moment, 0) << plan_text.dump();
  ASSERT_GE(got.components.waiting, 0) << plan_text.dump();
  ASSERT_EQ(got.components.retained, want.retained) << plan_text.dump();
  ASSERT_EQ(got.raw_bytes, want.raw) << plan_text.dump();
  ASSERT_EQ(got.required_bytes, want.required) << plan_text.dump();
  ASSERT_EQ(got.components.adapter_gradient_slots, std::vector<std::string>(want.slots.begin(), want.slots.end()))
      << plan_text.dump();

  // The reported location must be one where some order reaches the largest
  // single charge.
  bool any_group = false;
  for (const Forward& f : plan.forwards) any_group = any_group || !f.groups.empty();
  ASSERT_EQ(got.peak.group >= 0, any_group) << plan_text.dump();
  if (any_group) {
    const std::int64_t largest = *std::max_element(want.set_worst.begin(), want.set_worst.end());
    const auto at = want.excess_at.find({got.peak.forward, got.peak.group, got.peak.layer});
    ASSERT_NE(at, want.excess_at.end()) << plan_text.dump();
    ASSERT_EQ(at->second, largest) << plan_text.dump();
    if (got.peak_group) {
      ASSERT_EQ(plan.forwards[got.peak.forward].groups[got.peak.group].slot, got.peak_group);
    }
  }

  if (got.components.moment > 0) ++coverage.moment_mattered;
  if (got.components.waiting > 0) {
    ++coverage.waiting_mattered;
    for (const Forward& f : plan.forwards)
      for (const Group& g : f.groups)
        if (g.waiting_bytes > 0 && group_excess(g).net > g.waiting_bytes) ++coverage.net_over_waiting;
  }
  // Coverage bookkeeping: the single-group worst (no other nets) falls short.
  for (const Forward& f : plan.forwards) {
    if (f.workspace_after_gradient_bytes) {
      const Bytes overlap = f.workspace_bytes - *f.workspace_after_gradient_bytes;
      if (adapter_term(f.groups, overlap).bytes < adapter_term(f.groups).bytes) ++coverage.overlap_mattered;
    }
    Bytes worst_single = 0;
    for (const Group& g : f.groups) worst_single = std::max(worst_single, group_excess(g).extra);
    if (adapter_term(f.groups).bytes > worst_single) ++coverage.worst_order_not_drain_order;
    for (const Group& g : f.groups) {
      Group without = g;
      without.outside_gradient_bytes = 0;
      if (g.outside_gradient_bytes > 0 && group_excess(without).extra != group_excess(g).extra) {
        ++coverage.outside_mattered;
      }
    }
  }
  for (size_t i = 0; i < plan.forwards.size(); ++i) {
    for (size_t j = i + 1; j < plan.forwards.size(); ++j) {
      const auto si = adapter_gradient_slots(plan.forwards[i]);
      if (!si.empty() && si == adapter_gradient_slots(plan.forwards[j])) ++coverage.same_slot_set_children;
    }
  }
  for (const oracle::Forward& f : c.wave.forwards) {
    for (const oracle::Group& g : f.groups) {
      if (!g.slot || !c.as_parameters.at(*g.slot)) continue;
      for (const oracle::Tensor& t : g.tensors) {
        if (t.layers.size() < 2 || !oracle::trains(g, t) || t.outside_decoder || t.local_bytes == 0) continue;
        // Move the tensor to its lowest layer and see whether the oracle notices.
        oracle::Wave moved = c.wave;
        for (oracle::Forward& mf : moved.forwards) {
          for (oracle::Group& mg : mf.groups) {
            if (mg.slot != g.slot) continue;
            for (oracle::Tensor& mt : mg.tensors) {
              if (mt.name == t.name) mt.layers = {*std::min_element(t.layers.begin(), t.layers.end())};
            }
          }
        }
        if (oracle::price(moved).adapter != want.adapter) ++coverage.shared_parameter_mattered;
      }
    }
  }
}

TEST(PricingProperty, OneForwardMatchesBruteForceInEveryOrder) {
  std::mt19937_64 rng(20261129);
  Coverage coverage;
  Shape shape;
  shape.max_groups = 6;
  for (int i = 0; i < 1500; ++i) {
    expect_matches_oracle(testing::random_case(rng, shape), coverage);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GT(coverage.worst_order_not_drain_order, 100);
  EXPECT_GT(coverage.shared_parameter_mattered, 20);
  EXPECT_GT(coverage.outside_mattered, 100);
  EXPECT_GT(coverage.overlap_mattered, 50);
  EXPECT_GT(coverage.moment_mattered, 100);
  EXPECT_GT(coverage.waiting_mattered, 100);
  EXPECT_GT(coverage.net_over_waiting, 50);
}

// Whether some group's forward (the oracle's layer -3) holds more than every
// moment of every backward the oracle ran.
bool forward_sets_the_worst(const oracle::Result& result) {
  std::int64_t forward = INT64_MIN, backward = INT64_MIN;
  for (const auto& [at, bytes] : result.excess_at) {
    std::int64_t& worst = std::get<2>(at) == -3 ? forward : backward;
    worst = std::max(worst, bytes);
  }
  return forward > backward;
}

// A known backward order prices that order: at or above what the brute
// force simulates for it (a group that ran is charged its net only when it
// holds more than the floor: a run that left less than its boundaries is not
// counted on), never above the worst order, and exactly the brute force's
// when every group that can run first leaves at least its boundaries.
TEST(PricingProperty, AKnownBackwardOrderMatchesBruteForceAndNeverPassesTheWorst) {
  std::mt19937_64 rng(20261202);
  Coverage coverage;
  Shape shape;
  shape.max_groups = 6;
  int below_worst = 0, exact = 0, forward_exact = 0;
  for (int i = 0; i < 1500; ++i) {
    Case c = testing::random_case(rng, shape);
    if (c.wave.forwards.size() != 1 || c.wave.forwards[0].groups.size() < 2) continue;
    const Price worst = price(parse_plan(testing::plan_json(c)));
    std::vector<int>& order = c.wave.forwards[0].backward_order;
    order.resize(c.wave.forwards[0].groups.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    ++coverage.cases;
    const Price known = price(parse_plan(testing::plan_json(c)));
    const oracle::Result want = oracle::price(c.wave);
    ASSERT_GE(known.raw_bytes, want.raw) << testing::plan_json(c).dump();
    ASSERT_LE(known.raw_bytes, worst.raw_bytes) << testing::plan_json(c).dump();
    below_worst += known.raw_bytes < worst.raw_bytes;
    if (known.raw_bytes != want.raw) continue;
    ++exact;
    // A price set by a group's forward names it, and the oracle's forward of
    // that group (its layer -3) reaches the worst.
    if (known.peak.moment != Moment::kForward) continue;
    const auto at = want.excess_at.find({known.peak.forward, known.peak.group, -3});
    ASSERT_NE(at, want.excess_at.end()) << testing::plan_json(c).dump();
    ASSERT_EQ(at->second, want.adapter) << testing::plan_json(c).dump();
    ASSERT_EQ(known.peak.layer, -1);
    ++forward_exact;
  }
  EXPECT_GT(coverage.cases, 500);
  EXPECT_GT(below_worst, 100);   // the order mattered in many cases
  EXPECT_GT(exact, 300);         // and was priced to the byte in many
  EXPECT_GT(forward_exact, 20);  // some of them at a group's forward
}

// Where runs free their boundaries (a calibration measured it), a known order
// credits a run that left less than its boundaries: the brute force's price to
// the byte, and never above the order priced without the credit.
TEST(PricingProperty, AKnownOrderWhoseRunsFreeTheirBoundariesIsTheBruteForcesPrice) {
  std::mt19937_64 rng(20261203);
  Shape shape;
  shape.max_groups = 6;
  int cases = 0, exact = 0, credited = 0, in_forward = 0;
  for (int i = 0; i < 1500; ++i) {
    Case c = testing::random_case(rng, shape);
    if (c.wave.forwards.size() != 1 || c.wave.forwards[0].groups.size() < 2) continue;
    std::vector<int>& order = c.wave.forwards[0].backward_order;
    order.resize(c.wave.forwards[0].groups.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    ++cases;
    Json plan = testing::plan_json(c);
    const Price kept = price(parse_plan(plan));
    plan["runs_free_boundaries"] = true;
    const Price freed = price(parse_plan(plan));
    const oracle::Result want = oracle::price(c.wave);
    ASSERT_GE(freed.raw_bytes, want.raw) << plan.dump();
    ASSERT_LE(freed.raw_bytes, kept.raw_bytes) << plan.dump();
    exact += freed.raw_bytes == want.raw;
    credited += freed.raw_bytes < kept.raw_bytes;
    in_forward += forward_sets_the_worst(want);
    // Exact in every case: the forward is named where it sets the price.
    if (forward_sets_the_worst(want)) ASSERT_EQ(freed.peak.moment, Moment::kForward) << plan.dump();
  }
  EXPECT_GT(cases, 500);
  EXPECT_GT(credited, 100);   // the credit mattered in many cases
  EXPECT_GT(in_forward, 20);  // a group's forward set the price in some
  EXPECT_EQ(exact, cases);    // and the price is the brute force's in every one
}

// The worked case: a runs first and leaves 180 bytes less than its
// boundaries (net -180); b, running second, peaks at 190 over the floor.
// Floored, b's moment is charged on top of all of a's boundaries (220
// retained + 190); credited, a's boundaries are gone by then and a's own run
// (10 over the floor) is the peak.
TEST(PricingProperty, ARunIsCreditedItsBoundariesOnlyWhereTheyAreFreed) {
  auto group = [](const char* slot, Json boundary, Json pending) {
    return Json{{"slot", slot},
                {"boundary_bytes", boundary},
                {"pending_gradient_bytes", pending},
                {"outside_gradient_bytes", 0}};
  };
  Json plan = {{"safety_factor", 1.0},
               {"transient_bytes", 0},
               {"profiled", true},
               {"groups", Json::array({group("a", {100, 100}, {10, 10}), group("b", {10, 10}, {100, 100})})},
               {"backward_order", Json::array({0, 1})}};
  EXPECT_EQ(price(parse_plan(plan)).raw_bytes, 410);
  plan["runs_free_boundaries"] = true;
  const Price credited = price(parse_plan(plan));
  EXPECT_EQ(credited.raw_bytes, 230);
  EXPECT_EQ(credited.peak_group, "a");
}

TEST(PricingProperty, ABackwardOrderThatIsNotAPermutationIsRefused) {
  Json plan = {{"safety_factor", 1.0},
               {"transient_bytes", 0},
               {"profiled", false},
               {"groups", Json::array({Json{{"slot", "a"},
                                            {"boundary_bytes", {1}},
                                            {"pending_gradient_bytes", {1}},
                                            {"outside_gradient_bytes", 0}},
                                       Json{{"slot", "b"},
                                            {"boundary_bytes", {1}},
                                            {"pending_gradient_bytes", {1}},
                                            {"outside_gradient_bytes", 0}}})}};
  for (const Json& order : {Json::array({0}), Json::array({0, 0}), Json::array({0, 2}), Json("0,1")}) {
    plan["backward_order"] = order;
    EXPECT_THROW(parse_plan(plan), PlanError) << order.dump();
  }
  plan["backward_order"] = Json::array({1, 0});
  EXPECT_EQ(parse_plan(plan).forwards[0].backward_order, (std::vector<int32_t>{1, 0}));
  EXPECT_FALSE(parse_plan(plan).forwards[0].runs_free_boundaries);
  plan["runs_free_boundaries"] = 1;
  EXPECT_THROW(parse_plan(plan), PlanError);
  plan["runs_free_boundaries"] = true;
  EXPECT_TRUE(parse_plan(plan).forwards[0].runs_free_boundaries);
}

TEST(PricingProperty, SplitWavesMatchBruteForce) {
  std::mt19937_64 rng(4242);
  Coverage coverage;
  Shape shape;
  shape.max_groups = 6;
  shape.max_children = 3;
  shape.slot_pool = 3;  // few slots, so children often train the same set
  for (int i = 0; i < 1500; ++i) {
    expect_matches_oracle(testing::random_case(rng, shape), coverage);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GT(coverage.same_slot_set_children, 100);
  EXPECT_GT(coverage.worst_order_not_drain_order, 50);
  EXPECT_GT(coverage.overlap_mattered, 50);
  EXPECT_GT(coverage.moment_mattered, 30);  // the waves that are not split
}

TEST(PricingProperty, ManyLayersFewGroups) {
  std::mt19937_64 rng(99);
  Coverage coverage;
  Shape shape;
  shape.max_layers = 40;
  shape.max_groups = 3;
  shape.max_children = 2;
  for (int i = 0; i < 400; ++i) {
    expect_matches_oracle(testing::random_case(rng, shape), coverage);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(coverage.cases, 400);
}

// Merging every group of a forward into one chain and pricing it as a single
// group under-prices: the chain fixes one backward order and lets one group's
// freed boundaries offset another's gradients.
Group concatenated_chain(const std::vector<Group>& groups) {
  // Forward order bottom to top: the last forwarded group runs its backward first,
  // as autograd drains it.
  Group chain{"merged", {}, {}, 0};
  for (const Group& g : groups) {
    chain.boundary_bytes.insert(chain.boundary_bytes.end(), g.boundary_bytes.begin(), g.boundary_bytes.end());
    chain.pending_gradient_bytes.insert(chain.pending_gradient_bytes.end(), g.pending_gradient_bytes.begin(),
                                        g.pending_gradient_bytes.end());
    chain.outside_gradient_bytes += g.outside_gradient_bytes;
  }
  return chain;
}

Group layerwise_sum(const std::vector<Group>& groups) {
  Group sum{"merged", std::vector<Bytes>(groups[0].boundary_bytes.size()),
            std::vector<Bytes>(groups[0].boundary_bytes.size()), 0};
  for (const Group& g : groups) {
    for (size_t i = 0; i < g.boundary_bytes.size(); ++i) {
      sum.boundary_bytes[i] += g.boundary_bytes[i];
      sum.pending_gradient_bytes[i] += g.pending_gradient_bytes[i];
    }
    sum.outside_gradient_bytes += g.outside_gradient_bytes;
  }
  return sum;
}

TEST(PricingProperty, MergingGroupsIntoOneChainUnderPrices) {
  // By hand: A: b = [10, 10], p = [100, 0] (extra 90, net 80); B: b = [1000, 0],
  // p = [0, 40] (extra 40, net -960). Worst order A then B: 80 + 40 = 120.
  // The chain [A | B] runs B first: B peaks at 40 and leaves -960; A then peaks at
  // -960 + 90 = -870. The chain says 40.
  const std::vector<Group> groups{{"a", {10, 10}, {100, 0}, 0}, {"b", {1000, 0}, {0, 40}, 0}};
  EXPECT_EQ(adapter_term(groups).bytes, 120);
  EXPECT_EQ(group_excess(concatenated_chain(groups)).extra, 40);
  // Layer-wise sum: A: b = [0, 100], p = [0, 0]; B: b = [0, 0], p = [60, 0].
  // B alone peaks at 60 (layer 0); summed, A's freed 100 hides it: max(0, 60-100) = 0.
  const std::vector<Group> groups2{{"a", {0, 100}, {0, 0}, 0}, {"b", {0, 0}, {60, 0}, 0}};
  EXPECT_EQ(adapter_term(groups2).bytes, 60);
  EXPECT_EQ(group_excess(layerwise_sum(groups2)).extra, 0);

  // And on random waves both merges under-price often, never the closed form
  // (which the other tests hold to the oracle).
  std::mt19937_64 rng(5);
  Shape shape;
  shape.max_groups = 5;
  shape.null_slot_percent = 0;
  int chain_under = 0, sum_under = 0, multi = 0;
  for (int i = 0; i < 500; ++i) {
    const Case c = testing::random_case(rng, shape);
    const Plan plan = parse_plan(testing::plan_json(c));
    const Forward& forward = plan.forwards[0];
    const std::vector<Group>& gs = forward.groups;
    if (gs.size() < 2) continue;
    ++multi;
    const Bytes worst = oracle::price(c.wave).adapter;
    const Bytes overlap =
        forward.workspace_after_gradient_bytes ? forward.workspace_bytes - *forward.workspace_after_gradient_bytes : 0;
    ASSERT_EQ(adapter_term(gs, overlap).bytes, worst);
    if (group_excess(concatenated_chain(gs), overlap).extra < worst) ++chain_under;
    if (group_excess(layerwise_sum(gs), overlap).extra < worst) ++sum_under;
  }
  EXPECT_GT(chain_under, multi / 10) << "of " << multi;
  EXPECT_GT(sum_under, multi / 10) << "of " << multi;
}

// The design's figures are the special case of the worst moment: every moment
// holding output + workspace + input_gradient prices to the byte what the
// design's sum of maxima prices; moments of workspace and what is left of it
// price what the overlap credit prices.
TEST(PricingProperty, DesignAndOverlapCreditAreSpecialCasesOfMoments) {
  std::mt19937_64 rng(777);
  Shape shape;
  shape.moments_percent = 0;
  int priced = 0, credited = 0;
  for (int i = 0; i < 800; ++i) {
    const Case c = testing::random_case(rng, shape);
    const Plan plan = parse_plan(testing::plan_json(c));
    if (plan.forwards.size() != 1) continue;
    const Forward& forward = plan.forwards[0];
    const Bytes rest = forward.output_bytes + forward.workspace_bytes + forward.input_gradient_bytes;
    const size_t layers = forward.groups.empty() ? 0 : forward.groups[0].boundary_bytes.size();
    Plan design = plan;
    design.forwards[0].workspace_after_gradient_bytes.reset();
    Plan moments = design;
    Forward& f = moments.forwards[0];
    f.output_bytes = f.workspace_bytes = f.input_gradient_bytes = 0;
    for (Group& g : f.groups)
      g.moments = Moments{rest, std::vector<Bytes>(layers, rest), std::vector<Bytes>(layers, rest)};
    if (f.groups.empty()) continue;
    ++priced;
    ASSERT_EQ(price(moments).raw_bytes, price(design).raw_bytes) << testing::plan_json(c).dump();
    if (!forward.workspace_after_gradient_bytes) continue;
    // Before a layer's gradients: the full workspace; after: what is left.
    const Bytes after = rest - (forward.workspace_bytes - *forward.workspace_after_gradient_bytes);
    for (Group& g : f.groups)
      g.moments = Moments{rest, std::vector<Bytes>(layers, rest), std::vector<Bytes>(layers, after)};
    ++credited;
    ASSERT_EQ(price(moments).raw_bytes, price(plan).raw_bytes) << testing::plan_json(c).dump();
  }
  EXPECT_GT(priced, 300);
  EXPECT_GT(credited, 100);
}

}  // namespace
}  // namespace psc::pricing
