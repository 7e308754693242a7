// Hand-worked cases of the pricing model. Each expected figure is derived in the
// comment next to it from the model's stated semantics (docs/design.md, "The
// pricing model"; docs/pricing.md, "The model"), not read off the code.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "pricing/plan.h"
#include "pricing/price_json.h"
#include "pricing/pricing.h"

namespace psc::pricing {
namespace {

Price price_of(const char* text) { return price(parse_plan(Json::parse(text))); }

TEST(PricingModel, DesignExampleByHand) {
  // One group, two layers of 274432-byte boundaries and 24117248-byte gradients.
  // Layer 1: holds p[1] = 24117248, nothing freed.
  // Layer 0: holds p[0] + p[1] = 48234496, has freed b[1] = 274432 -> 47960064.
  // raw = retained 548864 + adapter 47960064 + transient 67108864 = 115617792;
  // required = floor(115617792 x 1.1) = floor(127179571.2) = 127179571.
  const Price p = price_of(R"({
    "safety_factor": 1.1, "transient_bytes": 67108864, "profiled": false,
    "output_bytes": 0, "workspace_bytes": 0, "input_gradient_bytes": 0,
    "groups": [ { "slot": "a", "boundary_bytes": [274432, 274432],
                  "pending_gradient_bytes": [24117248, 24117248], "outside_gradient_bytes": 0 } ],
    "children": [] })");
  EXPECT_EQ(p.components.retained, 548864);
  EXPECT_EQ(p.components.adapter_gradient, 47960064);
  EXPECT_EQ(p.components.transient, 67108864);
  EXPECT_EQ(p.raw_bytes, 115617792);
  EXPECT_EQ(p.required_bytes, 127179571);
  EXPECT_EQ(p.components.adapter_gradient_slots, std::vector<std::string>{"a"});
  EXPECT_EQ(p.peak_group, "a");
  EXPECT_EQ(p.peak.layer, 0);
}

TEST(PricingModel, SingleGroupUnequalLayersIsItsExtra) {
  // b = [100, 10, 1000], p = [5, 50, 500], p[L] = 7.
  // layer 2: 7 + 500 = 507; layer 1: 557 - 1000 = -443; layer 0: 562 - 1010 = -448.
  // extra = 507 at layer 2; net = 562 - 1110 = -548.
  Group g{"a", {100, 10, 1000}, {5, 50, 500}, 7};
  const GroupExcess e = group_excess(g);
  EXPECT_EQ(e.extra, 507);
  EXPECT_EQ(e.peak_layer, 2);
  EXPECT_EQ(e.net, -548);
  EXPECT_EQ(e.pending_total, 562);
  const AdapterTerm t = adapter_term({g});
  EXPECT_EQ(t.bytes, 507);
  EXPECT_EQ(t.peak_group, 0);
  EXPECT_EQ(t.peak_layer, 2);
}

TEST(PricingModel, WorkspaceOverlapCreditsTheRecomputedLayersOwnGradient) {
  // b = [100, 100], p = [60, 60], workspace 500, 380 of it left once a layer's
  // gradient is made: overlap 120.
  // Layer 1: before its gradient 0 (+ full workspace), after it 60 - 120 -> the
  //   worst is 0. Term: 60 - min(60, 120) = 0.
  // Layer 0: before 60 - 100 = -40, after 120 - 100 - 120 = -100, once done
  //   (boundary 0 freed) 120 - 200 = -80; term -40. extra = max(0, 0, -40) = 0
  //   at layer 1.
  // Without the field: layer 1 holds 60, layer 0 holds 20: extra 60.
  const char* with = R"({"safety_factor": 1, "transient_bytes": 0, "profiled": false,
    "workspace_bytes": 500, "workspace_after_gradient_bytes": 380,
    "groups": [ { "slot": "a", "boundary_bytes": [100, 100], "pending_gradient_bytes": [60, 60], "outside_gradient_bytes": 0 } ] })";
  const Price p = price_of(with);
  EXPECT_EQ(p.components.adapter_gradient, 0);
  EXPECT_EQ(p.components.workspace, 500);
  EXPECT_EQ(p.raw_bytes, 200 + 500);
  EXPECT_EQ(p.peak.layer, 1);
  // Same plan with what is left equal to the workspace: no credit, the design's figure.
  const Price same = price_of(R"({"safety_factor": 1, "transient_bytes": 0, "profiled": false,
    "workspace_bytes": 500, "workspace_after_gradient_bytes": 500,
    "groups": [ { "slot": "a", "boundary_bytes": [100, 100], "pending_gradient_bytes": [60, 60], "outside_gradient_bytes": 0 } ] })");
  EXPECT_EQ(same.components.adapter_gradient, 60);
  // The credit is at most the layer's own gradient, and the group's last state
  // stays a floor: b = [10, 10], p = [0, 60], overlap 120: layer 1 term
  // 60 - min(60, 120) = 0; layer 0: 60 - 10 - 0 = 50 (layer 1's gradient,
  // boundary 1 freed, the full workspace of layer 0); done: 60 - 20 = 40.
  Group g{"a", {10, 10}, {0, 60}, 0};
  EXPECT_EQ(group_excess(g, 120).extra, 50);
  EXPECT_EQ(group_excess(g, 120).peak_layer, 0);
  // b = [0, 100], p = [50, 60], overlap 1000: layer 1 60 - 60 = 0; layer 0
  // 110 - 100 - 50 = -40; the last state (all gradients, no boundary) 10 holds
  // no workspace: in one forward the workspace charged beside covers it, in a
  // split it is a floor (another child may start its backward then).
  Group last{"a", {0, 100}, {50, 60}, 0};
  EXPECT_EQ(group_excess(last, 1000).extra, 0);
  EXPECT_EQ(group_excess(last, 1000, true).extra, 10);
  EXPECT_EQ(group_excess(last, 1000).net, 10);
  EXPECT_EQ(group_excess(g, 0).extra, 60);
  EXPECT_EQ(group_excess(g, 5).extra, 55);
}

TEST(PricingModel, OtherGroupsPositiveNetCountsInTheWorstOrder) {
  // A: b = [10, 10], p = [100, 0]: extra 90 (layer 0), net 100 - 20 = 80.
  // B: b = [1000, 0], p = [0, 40]: extra 40 (layer 1), net 40 - 1000 = -960.
  // A first then B: A leaves 80, B's layer 1 adds 40 -> 120. Autograd's own order
  // (last forwarded first: B, then A) peaks at only 40: B's own peak, after which
  // A starts 960 below the floor.
  Group a{"a", {10, 10}, {100, 0}, 0};
  Group b{"b", {1000, 0}, {0, 40}, 0};
  const AdapterTerm t = adapter_term({a, b});
  EXPECT_EQ(t.bytes, 120);
  EXPECT_EQ(t.peak_group, 1);
  EXPECT_EQ(t.peak_layer, 1);
}

TEST(PricingModel, SharedParameterCountsOnceAtItsHighestLayer) {
  // One 64-byte parameter used by layers 0 and 2; b = [0, 30, 30].
  // The backward reaches layer 2 first and allocates it there: p = [0, 0, 64],
  // extra = 64 at layer 2. (Counted at layer 0 it would be max(0, -30, 64 - 60) = 4.)
  const Price p = price_of(R"({
    "safety_factor": 1, "transient_bytes": 0, "profiled": true,
    "groups": [ { "slot": "a", "boundary_bytes": [0, 30, 30],
                  "parameters": [ { "name": "shared", "layers": [0, 2], "local_bytes": 64,
                                    "trainable": true, "has_gradient": false, "outside_decoder": false } ] } ] })");
  EXPECT_EQ(p.components.adapter_gradient, 64);
  EXPECT_EQ(p.peak.layer, 2);
}

TEST(PricingModel, ParameterRules) {
  std::vector<Bytes> pending;
  Bytes outside = -1;
  derive_pending({{"frozen", {1}, 1, false, false, false},
                  {"done", {1}, 2, true, true, false},
                  {"shared", {0, 3, 1}, 4, true, false, false},
                  {"tied_head", {3}, 8, true, false, true},
                  {"slot_wide", {}, 16, true, false, false},
                  {"plain", {2}, 32, true, false, false}},
                 4, pending, outside);
  EXPECT_EQ(pending, (std::vector<Bytes>{0, 0, 32, 4}));
  EXPECT_EQ(outside, 8 + 16);
}

TEST(PricingModel, OutsideBucketIsLiveThroughout) {
  // b = [100], p = [0], a 30-byte head parameter tied to layer 0: it goes to p[L].
  // Layer 0: holds p[L] = 30, nothing freed yet -> 30.
  const Price p = price_of(R"({
    "safety_factor": 1, "transient_bytes": 0, "profiled": true,
    "groups": [ { "slot": "a", "boundary_bytes": [100],
                  "parameters": [ { "name": "head", "layers": [0], "local_bytes": 30,
                                    "outside_decoder": true } ] } ] })");
  EXPECT_EQ(p.components.adapter_gradient, 30);
  EXPECT_EQ(p.raw_bytes, 130);
}

TEST(PricingModel, SplitChargesOncePerSlotSetAndSumsAcrossSets) {
  // child 0 {a}: b = [5, 50], p = [60, 40]: layer 1 -> 40, layer 0 -> 100 - 50 = 50.
  // child 1 {a}: b = [5, 10], same p: layer 1 -> 40, layer 0 -> 100 - 10 = 90.
  // child 2 {b}: b = [0, 0], p = [0, 7]: 7.
  // Set {a} charged once, at its largest child: 90; set {b}: 7; adapter = 97.
  // output 1 + 2 + 4 = 7, workspace max(8, 16, 32) = 32, input gradient 3,
  // retained 55 + 15 + 0 = 70, transient once: 1000. raw = 7+70+32+3+97+1000 = 1209.
  const Price p = price_of(R"({
    "safety_factor": 1, "transient_bytes": 1000, "profiled": false,
    "children": [
      { "output_bytes": 1, "workspace_bytes": 8, "input_gradient_bytes": 1,
        "groups": [ { "slot": "a", "boundary_bytes": [5, 50], "pending_gradient_bytes": [60, 40],
                      "outside_gradient_bytes": 0 } ] },
      { "output_bytes": 2, "workspace_bytes": 16, "input_gradient_bytes": 1,
        "groups": [ { "slot": "a", "boundary_bytes": [5, 10], "pending_gradient_bytes": [60, 40],
                      "outside_gradient_bytes": 0 } ] },
      { "output_bytes": 4, "workspace_bytes": 32, "input_gradient_bytes": 1,
        "groups": [ { "slot": "b", "boundary_bytes": [0, 0], "pending_gradient_bytes": [0, 7],
                      "outside_gradient_bytes": 0 } ] } ] })");
  EXPECT_EQ(p.components.output, 7);
  EXPECT_EQ(p.components.workspace, 32);
  EXPECT_EQ(p.components.input_gradient, 3);
  EXPECT_EQ(p.components.retained, 70);
  EXPECT_EQ(p.components.adapter_gradient, 97);
  EXPECT_EQ(p.components.transient, 1000);
  EXPECT_EQ(p.raw_bytes, 1209);
  EXPECT_EQ(p.components.adapter_gradient_slots, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.peak.forward, 1);
  EXPECT_EQ(p.peak.group, 0);
  EXPECT_EQ(p.peak.layer, 0);
  EXPECT_EQ(p.peak_group, "a");
}

TEST(PricingModel, TransientOnlyForUnprofiledGradientWaves) {
  const char* unprofiled = R"({"safety_factor": 1, "transient_bytes": 64, "profiled": false,
      "groups": [ { "slot": null, "boundary_bytes": [1] } ] })";
  const char* profiled = R"({"safety_factor": 1, "transient_bytes": 64, "profiled": true,
      "groups": [ { "slot": null, "boundary_bytes": [1] } ] })";
  const char* no_groups = R"({"safety_factor": 1, "transient_bytes": 64, "profiled": false, "output_bytes": 5})";
  // A null-slot group trains nothing but still runs a backward: it is a gradient group.
  EXPECT_EQ(price_of(unprofiled).components.transient, 64);
  EXPECT_EQ(price_of(unprofiled).components.adapter_gradient, 0);
  EXPECT_TRUE(price_of(unprofiled).components.adapter_gradient_slots.empty());
  EXPECT_EQ(price_of(unprofiled).raw_bytes, 65);
  EXPECT_EQ(price_of(profiled).components.transient, 0);
  EXPECT_EQ(price_of(no_groups).components.transient, 0);
  EXPECT_EQ(price_of(no_groups).raw_bytes, 5);
  EXPECT_FALSE(price_of(no_groups).peak_group.has_value());
  EXPECT_EQ(price_of(no_groups).peak.layer, -1);
}

TEST(PricingModel, SafetyFactorIsAnExactFloor) {
  EXPECT_EQ(apply_safety(10, 1.1), 11);  // 10 x 1.1000000000000000888 = 11.000000000000000888
  EXPECT_EQ(apply_safety(0, 1.7), 0);
  EXPECT_EQ(apply_safety(123, 1.0), 123);
  EXPECT_EQ(apply_safety(kMaxTotalBytes, 64.0), kMaxTotalBytes * 64);
  // Factors k / 1024 are exact doubles: the result must be the integer floor.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const Bytes raw = std::uniform_int_distribution<Bytes>(0, kMaxTotalBytes)(rng);
    const std::int64_t k = std::uniform_int_distribution<std::int64_t>(1024, 64 * 1024)(rng);
    const auto expected = static_cast<Bytes>(static_cast<__int128>(raw) * k / 1024);
    ASSERT_EQ(apply_safety(raw, static_cast<double>(k) / 1024.0), expected) << raw << " x " << k << "/1024";
  }
}

TEST(PricingModel, JsonOutputHasTheDesignFields) {
  const Json out = price_to_json(price_of(R"({"safety_factor": 1, "transient_bytes": 0, "profiled": false,
      "groups": [ { "slot": "a", "boundary_bytes": [3], "pending_gradient_bytes": [4],
                    "outside_gradient_bytes": 0 } ] })"));
  std::vector<std::string> keys;
  for (const auto& entry : out.items()) keys.push_back(entry.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"required_bytes", "raw_bytes", "components", "peak_group", "peak_layer"}));
  std::vector<std::string> components;
  for (const auto& entry : out["components"].items()) components.push_back(entry.key());
  EXPECT_EQ(components, (std::vector<std::string>{"output", "retained", "workspace", "input_gradient",
                                                  "adapter_gradient", "adapter_gradient_slots", "transient"}));
  EXPECT_EQ(out["raw_bytes"], 7);  // retained 3 + adapter 4
  EXPECT_EQ(out["peak_layer"], 0);
}

}  // namespace
}  // namespace psc::pricing
