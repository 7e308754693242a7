// Pricing throughput: whole prices (components, slot lists, safety factor) per
// second for a 40-layer model, by number of gradient groups, plus a 4-child split
// and an admission search. Target: over a million prices/s at 40 layers x 8 groups.
//
//   build/benchmarks --benchmark_filter=Pricing
#include <benchmark/benchmark.h>

#include <random>

#include "pricing/admission.h"
#include "pricing/pricing.h"

namespace psc::pricing {
namespace {

constexpr int kLayers = 40;

Group random_group(std::mt19937_64& rng, const std::string& slot) {
  std::uniform_int_distribution<Bytes> boundary(1 << 18, 1 << 22);
  std::uniform_int_distribution<Bytes> gradient(0, 1 << 25);
  Group g;
  g.slot = slot;
  for (int i = 0; i < kLayers; ++i) {
    g.boundary_bytes.push_back(boundary(rng));  // unequal layers
    g.pending_gradient_bytes.push_back(gradient(rng));
  }
  g.outside_gradient_bytes = gradient(rng);
  return g;
}

Plan random_plan(int groups, int children) {
  std::mt19937_64 rng(42);
  Plan plan;
  plan.safety_factor = 1.1;
  plan.transient_bytes = 64 << 20;
  for (int c = 0; c < children; ++c) {
    Forward& f = plan.forwards.emplace_back();
    f.output_bytes = 1 << 20;
    f.workspace_bytes = 1 << 24;
    f.input_gradient_bytes = 1 << 20;
    for (int g = 0; g < groups; ++g) f.groups.push_back(random_group(rng, "slot" + std::to_string(g)));
  }
  return plan;
}

void BM_PricingPrice(benchmark::State& state) {
  const Plan plan = random_plan(static_cast<int>(state.range(0)), 1);
  for (auto _ : state) benchmark::DoNotOptimize(price(plan));
  state.SetItemsProcessed(state.iterations());
  state.counters["layers"] = kLayers;
}
BENCHMARK(BM_PricingPrice)->ArgName("groups")->DenseRange(1, 8);

void BM_PricingAdapterTerm(benchmark::State& state) {
  const Plan plan = random_plan(static_cast<int>(state.range(0)), 1);
  for (auto _ : state) benchmark::DoNotOptimize(adapter_term(plan.forwards[0].groups));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PricingAdapterTerm)->ArgName("groups")->Arg(1)->Arg(8);

void BM_PricingSplit4x2(benchmark::State& state) {
  const Plan plan = random_plan(2, 4);
  for (auto _ : state) benchmark::DoNotOptimize(price(plan));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PricingSplit4x2);

void BM_PricingAdmitExact(benchmark::State& state) {
  const Plan base = random_plan(8, 1);
  AdmissionPlan plan;
  plan.safety_factor = 1.1;
  plan.transient_bytes = 64 << 20;
  plan.max_tokens = 1 << 16;
  plan.workspace = {1 << 24, 4096};
  for (const Group& g : base.forwards[0].groups) {
    AdmissionGroup a{g.slot, std::vector<Bytes>(kLayers, 8192), g.pending_gradient_bytes, g.outside_gradient_bytes};
    plan.groups.push_back(std::move(a));
  }
  const Bytes budget = Bytes{40} << 30;
  for (auto _ : state) benchmark::DoNotOptimize(admit(plan, budget));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PricingAdmitExact);

}  // namespace
}  // namespace psc::pricing
