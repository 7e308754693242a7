// How one moment's events of waves of different sizes are paired
// (estimator/event_alignment.h): by their allocations, not their index.
#include "estimator/event_alignment.h"

#include <gtest/gtest.h>

#include <vector>

namespace psc {
namespace {

using Allocations = std::vector<WaveLiveness::EventAllocation>;

// A wave's events from the bytes of its allocations, none freed: each event's
// value is the sum so far.
struct Wave {
  WaveSize size;
  std::vector<int64_t> events;
  Allocations allocations;
  Wave(int64_t tokens, const std::vector<uint64_t>& bytes) : size(unpacked(tokens)) {
    int64_t live = 0;
    for (uint64_t b : bytes) {
      live += static_cast<int64_t>(b);
      events.push_back(live);
      allocations.push_back({0, UINT64_MAX, b, false});
    }
  }
  EventSeries series() const { return {size, &events, &allocations}; }
};

TEST(EventAlignment, AllocationsAreTheSameWhenEqualOrInProportionToAFeature) {
  EXPECT_TRUE(same_allocation(64, unpacked(10), 64, unpacked(30)));     // a constant
  EXPECT_TRUE(same_allocation(40, unpacked(10), 120, unpacked(30)));    // 4 t
  EXPECT_TRUE(same_allocation(300, unpacked(10), 2700, unpacked(30)));  // 3 t^2
  EXPECT_FALSE(same_allocation(40, unpacked(10), 100, unpacked(30)));
  // Packings: squares and sequences as well as tokens.
  const WaveSize a = packed(30, {10, 20}), b = packed(60, {20, 20, 20});
  EXPECT_TRUE(same_allocation(500, a, 1200, b));  // squares 500 and 1200
  EXPECT_TRUE(same_allocation(8, a, 12, b));      // 2 and 3 sequences
}

// At 20 tokens the program makes its 2t buffer after its t^2 scores, the
// other sizes before: each wave leaves that one event out, and every other
// event pairs with the same allocation at every size.
TEST(EventAlignment, AnAllocationMadeLaterAtOneSizeLeavesOneEventOutOfEachWave) {
  const Wave a(10, {40, 20, 100, 8, 50});   // 4t, 2t, t^2, 8, 5t
  const Wave b(20, {80, 400, 40, 8, 100});  // the 2t buffer after the scores
  const Wave c(40, {160, 80, 1600, 8, 200});
  const auto kept = line_up_events({a.series(), b.series(), c.series()});
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0], (std::vector<size_t>{0, 2, 3, 4}));
  EXPECT_EQ(kept[1], (std::vector<size_t>{0, 1, 3, 4}));
  EXPECT_EQ(kept[2], (std::vector<size_t>{0, 2, 3, 4}));
  // By index, the 2t buffer at 10 and 40 would pair with the scores at 20.
  EXPECT_FALSE(same_allocation(a.allocations[1].bytes, a.size, b.allocations[1].bytes, b.size));
}

TEST(EventAlignment, AnEventLeftOutIsFoldedIntoTheSharedOneBeforeIt) {
  const std::vector<int64_t> events{5, 9, 7, 3, 4};
  EXPECT_EQ(folded(events, {0, 3, 4}), (std::vector<int64_t>{9, 3, 4}));
  // Before the first shared event: folded into it.
  EXPECT_EQ(folded(events, {2, 4}), (std::vector<int64_t>{9, 4}));
}

// Per-sequence tensors of packings of different sequence counts find no
// like: the waves are different programs, paired by index when every wave
// has as many events, and not at all otherwise.
TEST(EventAlignment, WavesOfManyEventsWithoutALikeLineUpByIndexOrNotAtAll) {
  const Wave a(10, {40, 7, 11, 13, 17, 100});
  const Wave b(20, {80, 19, 23, 29, 31, 400});
  const auto same_count = line_up_events({a.series(), b.series()});
  ASSERT_EQ(same_count.size(), 2u);
  EXPECT_EQ(same_count[0], (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  const Wave c(20, {80, 19, 23, 400});
  EXPECT_TRUE(line_up_events({a.series(), c.series()}).empty());
  // Without their allocations, waves line up by index too.
  EventSeries blind = a.series();
  blind.allocations = nullptr;
  EXPECT_EQ(line_up_events({blind, b.series()}).size(), 2u);
}

// Two events a wave makes that no other does are folded; a third (and more
// than one in twenty) says the waves run different programs: by index.
TEST(EventAlignment, TwoEventsWithoutALikeAreLeftOutAThirdIsNot) {
  const Wave a(10, {40, 7, 11, 100});
  const Wave b(20, {80, 19, 23, 400});
  const auto two = line_up_events({a.series(), b.series()});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0], (std::vector<size_t>{0, 3}));
  EXPECT_EQ(two[1], (std::vector<size_t>{0, 3}));
  const Wave c(10, {40, 7, 11, 13, 100});
  const Wave d(20, {80, 19, 23, 29, 400});
  const auto three = line_up_events({c.series(), d.series()});
  ASSERT_EQ(three.size(), 2u);
  EXPECT_EQ(three[0], (std::vector<size_t>{0, 1, 2, 3, 4}));
}

// The wave that made the layer's gradient says at which shared event it
// did; an accumulating wave whose own index of that event differs (a stray
// allocation before it) counts its temporary there, from its free on.
TEST(EventAlignment, GradientsStayAtTheSharedEventNotTheIndex) {
  const WaveSize a_size = unpacked(10), b_size = unpacked(20);
  const std::vector<int64_t> a_events{40, 48, 148};
  const Allocations a_allocations{{1, UINT64_MAX, 40, false}, {2, UINT64_MAX, 8, true}, {3, UINT64_MAX, 100, false}};
  const EventSeries a{a_size, &a_events, &a_allocations, 1};
  // b: a stray 3 bytes, 2t, the temporary of 8 freed at ordinal 14, t^2.
  const std::vector<int64_t> b_events{3, 83, 91, 483};
  const Allocations b_allocations{
      {11, 12, 3, false}, {12, UINT64_MAX, 80, false}, {13, 14, 8, false}, {15, UINT64_MAX, 400, false}};
  const EventSeries b{b_size, &b_events, &b_allocations, -1};
  const auto kept = line_up_events({a, b});
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[1], (std::vector<size_t>{1, 2, 3}));
  const std::vector<size_t> at = gradient_events({a, b}, kept);
  EXPECT_EQ(at, (std::vector<size_t>{1}));
  // The temporary (b's event 2) is freed before b's last event: counted there.
  EXPECT_EQ(as_if_gradients_stayed(b, kept[1], at), (std::vector<int64_t>{3, 83, 91, 491}));
}

}  // namespace
}  // namespace psc
