// Admission: the binary search equals trying every width, the price is monotone
// in tokens, and the cheap estimate never decides while gradients are pending.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "pricing/admission.h"
#include "pricing/plan.h"
#include "pricing/price_json.h"
#include "tests/unit/pricing/pricing_cases.h"

namespace psc::pricing {
namespace {

Bytes required_at(const AdmissionPlan& plan, std::int64_t tokens) {
  return price(plan_at(plan, tokens)).required_bytes;
}

// Every width, no monotonicity assumed.
std::int64_t exhaustive(const AdmissionPlan& plan, Bytes budget) {
  std::int64_t best = 0;
  for (std::int64_t t = 1; t <= plan.max_tokens; ++t) {
    if (required_at(plan, t) <= budget) best = t;
  }
  return best;
}

AdmissionPlan random_admission_plan(std::mt19937_64& rng, bool with_pending) {
  AdmissionPlan plan;
  auto small = [&](Bytes hi) {
    return testing::chance(rng, 30) ? 0 : std::uniform_int_distribution<Bytes>(1, hi)(rng);
  };
  plan.safety_factor = static_cast<double>(std::uniform_int_distribution<int>(1024, 2048)(rng)) / 1024.0;
  plan.transient_bytes = small(5000);
  plan.profiled = testing::chance(rng, 40);
  plan.max_tokens = std::uniform_int_distribution<std::int64_t>(1, 200)(rng);
  plan.output = {small(300), small(20)};
  plan.workspace = {small(300), small(20)};
  plan.input_gradient = {small(300), small(20)};
  const int layers = std::uniform_int_distribution<int>(0, 5)(rng);
  const int groups = std::uniform_int_distribution<int>(0, 4)(rng);
  for (int g = 0; g < groups; ++g) {
    AdmissionGroup& group = plan.groups.emplace_back();
    group.slot = std::string(1, static_cast<char>('a' + g));
    for (int i = 0; i < layers; ++i) {
      group.boundary_bytes_per_token.push_back(small(40));
      group.pending_gradient_bytes.push_back(with_pending ? small(4000) : 0);
    }
    group.outside_gradient_bytes = with_pending ? small(2000) : 0;
  }
  return plan;
}

TEST(Admission, EqualsExhaustiveSearchOnRandomPlans) {
  std::mt19937_64 rng(31337);
  int pending_cases = 0, cheap_cases = 0, partial = 0;
  for (int i = 0; i < 1500; ++i) {
    const bool with_pending = testing::chance(rng, 60);
    const AdmissionPlan plan = random_admission_plan(rng, with_pending);
    // Budgets around the price of a random width, so answers land inside the range.
    const std::int64_t probe = std::uniform_int_distribution<std::int64_t>(1, plan.max_tokens)(rng);
    const Bytes budget = std::max<Bytes>(0, required_at(plan, probe) + std::uniform_int_distribution<int>(-2, 2)(rng));
    const Admission got = admit(plan, budget);
    const std::int64_t want = exhaustive(plan, budget);
    ASSERT_EQ(got.tokens, want) << "case " << i << " budget " << budget;

    if (has_pending_gradients(plan)) {
      ++pending_cases;
      ASSERT_EQ(got.decided_by, DecidedBy::kExact);
      ASSERT_EQ(got.cheap_estimates, 0);
      ASSERT_GE(got.search_prices, 1);
    } else {
      ++cheap_cases;
      ASSERT_EQ(got.decided_by, DecidedBy::kCheap);
      ASSERT_EQ(got.search_prices, 0);
    }
    if (want > 0 && want < plan.max_tokens) ++partial;
    // What the result reports about its neighbourhood is the exact price.
    if (got.tokens > 0) {
      ASSERT_EQ(got.price->required_bytes, required_at(plan, got.tokens));
    }
    if (got.tokens < plan.max_tokens) {
      ASSERT_EQ(*got.next_required_bytes, required_at(plan, got.tokens + 1));
      ASSERT_GT(*got.next_required_bytes, budget);
    }
  }
  EXPECT_GT(pending_cases, 500);
  EXPECT_GT(cheap_cases, 300);
  EXPECT_GT(partial, 600);  // most answers are interior widths, not 0 or max_tokens
}

TEST(Admission, PriceIsMonotoneInTokens) {
  std::mt19937_64 rng(77);
  for (int i = 0; i < 400; ++i) {
    const AdmissionPlan plan = random_admission_plan(rng, true);
    Bytes previous_raw = 0;
    for (std::int64_t t = 1; t <= plan.max_tokens; ++t) {
      const Bytes raw = price(plan_at(plan, t)).raw_bytes;
      ASSERT_GE(raw, previous_raw) << "case " << i << " at " << t << " tokens";
      previous_raw = raw;
    }
  }
}

TEST(Admission, CheapEstimateWouldOverAdmitWithPendingGradients) {
  // One layer at 1 byte per token, a 1000-byte pending gradient, budget 1500.
  // Exact: raw(T) = T (retained) + 1000 (layer 0 holds the gradient, nothing freed
  // yet), so T = 500. The linear estimate ignores the adapter term and says 1500.
  AdmissionPlan plan;
  plan.profiled = true;
  plan.max_tokens = 10000;
  plan.groups.push_back({"a", {1}, {1000}, 0});
  const Admission got = admit(plan, 1500);
  EXPECT_EQ(cheap_admit_tokens(plan, 1500), 1500);
  EXPECT_EQ(got.tokens, 500);
  EXPECT_EQ(got.decided_by, DecidedBy::kExact);
  EXPECT_EQ(got.cheap_estimates, 0);

  // The same wave after the first gradient wave: the gradient is in the baseline.
  plan.groups[0].pending_gradient_bytes = {0};
  const Admission later = admit(plan, 1500);
  EXPECT_EQ(later.decided_by, DecidedBy::kCheap);
  EXPECT_EQ(later.tokens, 1500);
  EXPECT_EQ(exhaustive(plan, 1500), 1500);
}

TEST(Admission, NothingFits) {
  AdmissionPlan plan;
  plan.transient_bytes = 100;
  plan.max_tokens = 4;
  plan.groups.push_back({"a", {8}, {0}, 0});
  const Admission got = admit(plan, 99);
  EXPECT_EQ(got.tokens, 0);
  EXPECT_FALSE(got.price.has_value());
  EXPECT_EQ(got.next_required_bytes, 108);  // 100 transient + 8 retained at 1 token
}

TEST(Admission, FromJson) {
  // 2 layers at 8 bytes per token, 16-byte gradient at layer 1, workspace 4 per token.
  // raw(T) = 16T retained + 4T workspace + adapter 16 (layer 1, nothing freed) = 20T + 16;
  // budget 1016 -> T = 50.
  const Json text = Json::parse(R"({"safety_factor": 1, "transient_bytes": 0, "profiled": true,
      "max_tokens": 100, "workspace_bytes_per_token": 4,
      "groups": [ {"slot": "a", "boundary_bytes_per_token": [8, 8],
                   "pending_gradient_bytes": [0, 16], "outside_gradient_bytes": 0} ]})");
  const Json out = evaluate_plan(text, 1016);
  EXPECT_EQ(out["admitted_tokens"], 50);
  EXPECT_EQ(out["decided_by"], "exact");
  EXPECT_EQ(out["price"]["raw_bytes"], 1016);
  EXPECT_EQ(out["next_required_bytes"], 1036);
}

}  // namespace
}  // namespace psc::pricing
