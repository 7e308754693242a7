// The plan check builds for a wave, from a calibration written by hand.
#include <gtest/gtest.h>

#include "estimator/check.h"

namespace psc {
namespace {

Calibration two_layers() {
  Calibration c;
  c.layers = 2;
  c.boundary = {GrowthTerm{0, 10, 0, 2, 0}, GrowthTerm{0, 10, 0, 2, 0}};
  c.workspace = GrowthTerm{0, 4, 0, 2, 0};
  c.input_gradient = GrowthTerm{0, 20, 0, 2, 0};
  c.output = GrowthTerm{0, 10, 0, 2, 0};
  c.head_saved = GrowthTerm{0, 3, 0, 2, 0};
  c.adapter_gradient_bytes["a"] = {20, 20};
  c.first_execution_bytes = 7;
  return c;
}

WaveLiveness wave(int64_t tokens, int64_t groups, std::vector<std::string> slots) {
  WaveLiveness w;
  w.tokens = tokens;
  w.groups = groups;
  w.slots = std::move(slots);
  w.gradient_live_at_start_bytes = {0, 0};
  return w;
}

TEST(CheckPlan, OneGroup) {
  const pricing::Plan p = plan_for_wave(two_layers(), wave(30, 1, {"a"}), false);
  ASSERT_EQ(p.forwards.size(), 1u);
  const pricing::Forward& f = p.forwards[0];
  EXPECT_EQ(f.workspace_bytes, 120);
  EXPECT_EQ(f.input_gradient_bytes, 600);
  EXPECT_EQ(f.output_bytes, 300);
  ASSERT_EQ(f.groups.size(), 1u);
  EXPECT_EQ(f.groups[0].boundary_bytes, (std::vector<pricing::Bytes>{300, 300}));
  EXPECT_EQ(f.groups[0].pending_gradient_bytes, (std::vector<pricing::Bytes>{20, 20}));
  EXPECT_TRUE(p.profiled);  // warm
  EXPECT_EQ(p.transient_bytes, 7);
}

TEST(CheckPlan, GradientsLiveAtTheStartAreNotPending) {
  WaveLiveness w = wave(30, 1, {"a"});
  w.gradient_live_at_start_bytes = {20, 5};
  const pricing::Plan p = plan_for_wave(two_layers(), w, false);
  EXPECT_EQ(p.forwards[0].groups[0].pending_gradient_bytes, (std::vector<pricing::Bytes>{0, 15}));
  EXPECT_EQ(plan_for_wave(two_layers(), wave(30, 1, {"a"}), true).forwards[0].groups[0].pending_gradient_bytes,
            (std::vector<pricing::Bytes>{0, 0}));
}

TEST(CheckPlan, TwoGroupsSplitTokensAndAnUnknownSlotGetsTheLargest) {
  WaveLiveness w = wave(30, 2, {"a", "b"});
  w.cold = true;
  const pricing::Plan p = plan_for_wave(two_layers(), w, false);
  const pricing::Forward& f = p.forwards[0];
  EXPECT_FALSE(p.profiled);
  EXPECT_EQ(f.workspace_bytes, 60);  // one group of 15 tokens at a time
  EXPECT_EQ(f.output_bytes, 150);    // one group's output: the other's head state waits in its group
  ASSERT_EQ(f.groups.size(), 2u);
  EXPECT_EQ(f.groups[0].waiting_bytes, 45);
  EXPECT_EQ(f.groups[1].waiting_bytes, 45);
  EXPECT_EQ(*f.groups[1].slot, "b");
  EXPECT_EQ(f.groups[1].boundary_bytes, (std::vector<pricing::Bytes>{150, 150}));
  EXPECT_EQ(f.groups[1].pending_gradient_bytes, (std::vector<pricing::Bytes>{20, 20}));
}

TEST(CheckPlan, SplitOfOneSlotSetIsOneForwardWhoseGroupsAreItsChildren) {
  WaveLiveness w = wave(30, 1, {"a"});
  w.gradient_live_at_start_bytes = {20, 20};  // .grad exists, yet autograd buffers the split's gradients
  w.children = {{10, 1, {"a"}}, {20, 1, {"a"}}};
  const pricing::Plan p = plan_for_wave(two_layers(), w, false);
  ASSERT_EQ(p.forwards.size(), 1u);
  const pricing::Forward& f = p.forwards[0];
  ASSERT_EQ(f.groups.size(), 2u);
  EXPECT_EQ(f.groups[0].boundary_bytes, (std::vector<pricing::Bytes>{100, 100}));
  EXPECT_EQ(f.groups[1].boundary_bytes, (std::vector<pricing::Bytes>{200, 200}));
  // The last-forwarded child runs its backward first and makes the gradients;
  // the other only adds to autograd's buffers.
  EXPECT_FALSE(f.groups[0].slot.has_value());
  EXPECT_EQ(f.groups[0].pending_gradient_bytes, (std::vector<pricing::Bytes>{0, 0}));
  EXPECT_EQ(f.groups[1].slot, "a");
  EXPECT_EQ(f.groups[1].pending_gradient_bytes, (std::vector<pricing::Bytes>{20, 20}));
  // One backward at a time: the largest child's workspace (80), or a later
  // child's (40) with its contribution to a layer's gradient (20); the largest
  // input gradient (400); the running child's output plus the head state of
  // the children forwarded before it: max(10 x 10, 200 + 3 x 10) = 230.
  EXPECT_EQ(f.workspace_bytes, 80);
  EXPECT_EQ(f.input_gradient_bytes, 400);
  EXPECT_EQ(f.output_bytes, 230);
  const pricing::Price price = pricing::price(p);
  EXPECT_EQ(price.components.retained, 600);
  EXPECT_EQ(price.components.adapter_gradient_slots, (std::vector<std::string>{"a"}));
  // The 20-token child first: layer 1 holds 20, layer 0 40 - 200: adapter 20.
  EXPECT_EQ(price.components.adapter_gradient, 20);
}

TEST(CheckPlan, SplitOfDifferentSlotSetsKeepsOneForwardPerChild) {
  Calibration c = two_layers();
  c.adapter_gradient_bytes["b"] = {30, 30};
  WaveLiveness w = wave(30, 1, {"a"});
  w.children = {{10, 1, {"a"}}, {20, 1, {"b"}}};
  const pricing::Plan p = plan_for_wave(c, w, false);
  ASSERT_EQ(p.forwards.size(), 2u);
  EXPECT_EQ(p.forwards[0].groups[0].pending_gradient_bytes, (std::vector<pricing::Bytes>{20, 20}));
  EXPECT_EQ(p.forwards[1].groups[0].pending_gradient_bytes, (std::vector<pricing::Bytes>{30, 30}));
  EXPECT_EQ(pricing::price(p).components.adapter_gradient_slots, (std::vector<std::string>{"a", "b"}));
}

TEST(CheckPlan, OverlapCreditComesFromTheCalibrationCappedAtTheWorkspace) {
  Calibration c = two_layers();
  EXPECT_FALSE(plan_for_wave(c, wave(30, 1, {"a"}), false).forwards[0].workspace_after_gradient_bytes);
  c.workspace_after_gradient = GrowthTerm{0, 1, 0, 2, 0};
  EXPECT_EQ(plan_for_wave(c, wave(30, 1, {"a"}), false).forwards[0].workspace_after_gradient_bytes, 30);
  c.workspace_after_gradient = GrowthTerm{0, 9, 0, 2, 0};  // above the workspace line: capped
  EXPECT_EQ(plan_for_wave(c, wave(30, 1, {"a"}), false).forwards[0].workspace_after_gradient_bytes, 120);
}

}  // namespace
}  // namespace psc
