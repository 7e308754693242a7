// The analysis' small units on their own: range-name parsing, the live table
// against a std::map oracle, the replay rules, the classifier's rules, the
// wave payload parser, the timeline, and byte formatting.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <vector>

#include "analysis/categories.h"
#include "analysis/memory_replay.h"
#include "analysis/range_names.h"
#include "analysis/report_text.h"
#include "analysis/scope_tracker.h"
#include "analysis/timeline.h"
#include "traces/device_address.h"

namespace psc {
namespace {

// ---- range names -------------------------------------------------------------------

RangeName parse(std::string_view name) { return default_range_parser().parse(name); }

TEST(AnalysisRanges, Convention) {
  EXPECT_EQ(parse("forward/layer.0"), (RangeName{Phase::kForward, 0}));
  EXPECT_EQ(parse("recompute/layer.17"), (RangeName{Phase::kRecompute, 17}));
  EXPECT_EQ(parse("backward/layer.3"), (RangeName{Phase::kBackward, 3}));
  EXPECT_EQ(parse("backward/layer.3/attn"), (RangeName{Phase::kBackward, 3}));  // a finer range inside the layer
  EXPECT_EQ(parse("head/embedding"), (RangeName{Phase::kHead, kNoLayer}));
  EXPECT_EQ(parse("head/loss"), (RangeName{Phase::kHead, kNoLayer}));
  EXPECT_EQ(parse("optimizer/step"), (RangeName{Phase::kOptimizer, kNoLayer}));
  EXPECT_EQ(parse("optimizer/layer.2"), (RangeName{Phase::kOptimizer, 2}));
  EXPECT_EQ(parse("wave"), (RangeName{Phase::kWave, kNoLayer}));
}

TEST(AnalysisRanges, EverythingElseIsOutside) {
  for (std::string_view name : {"", "wave2", "waves", "Forward/layer.0", "forward", "forward/", "layer.3", "dataloader",
                                "fwd/layer.1", "/layer.1"})
    EXPECT_EQ(parse(name).phase, Phase::kOutside) << name;
}

TEST(AnalysisRanges, MalformedLayersKeepThePhaseButNoLayer) {
  for (std::string_view name : {"forward/layer.", "forward/layer.x", "forward/layer.3x", "forward/layer.-1",
                                "forward/layers.3", "forward/layer.99999999999999999999", "backward/block.2"}) {
    const RangeName r = parse(name);
    EXPECT_FALSE(r.has_layer()) << name;
    EXPECT_NE(r.phase, Phase::kOutside) << name;
  }
}

TEST(AnalysisRanges, TableCachesByIdAndToleratesMissingStrings) {
  TraceMeta meta;
  meta.strings = {"", "forward/layer.4", "wave"};
  RangeTable table(default_range_parser());
  EXPECT_EQ(table.lookup(StringId{1}, meta), (RangeName{Phase::kForward, 4}));
  EXPECT_EQ(table.lookup(StringId{2}, meta).phase, Phase::kWave);
  EXPECT_EQ(table.lookup(StringId{0}, meta).phase, Phase::kOutside);
  EXPECT_EQ(table.lookup(StringId{9}, meta).phase, Phase::kOutside);  // not arrived (yet)
  meta.strings.resize(10);
  meta.strings[9] = "backward/layer.1";
  EXPECT_EQ(table.lookup(StringId{9}, meta), (RangeName{Phase::kBackward, 1}));
}

struct Upper : RangeParser {
  RangeName parse(std::string_view name) const override {
    return name == "FWD" ? RangeName{Phase::kForward, 0} : RangeParser::parse(name);
  }
};

TEST(AnalysisRanges, ParserCanBeOverridden) {
  TraceMeta meta;
  meta.strings = {"", "FWD"};
  Upper upper;
  RangeTable table(upper);
  EXPECT_EQ(table.lookup(StringId{1}, meta), (RangeName{Phase::kForward, 0}));
}

// ---- the live table ------------------------------------------------------------------

TEST(AnalysisLifetimes, LiveTableMatchesAMap) {
  LiveTable table;
  std::map<std::pair<int16_t, uint64_t>, uint64_t> oracle;
  uint64_t rng = 42;
  for (int i = 0; i < 400000; ++i) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    const int16_t device = static_cast<int16_t>((rng >> 60) % 3) - 1;
    // Few distinct, aligned addresses: many collisions, reuse and long probe runs.
    const uint64_t address = 0x7f0000000000 + ((rng >> 20) % 5000) * 256;
    LiveAllocation a{};
    a.bytes = rng >> 40;
    LiveAllocation out{};
    if ((rng >> 8) % 3) {
      const bool replaced = table.insert(device, address, a, &out);
      auto [it, fresh] = oracle.insert({{device, address}, a.bytes});
      EXPECT_EQ(replaced, !fresh);
      if (!fresh) {
        EXPECT_EQ(out.bytes, it->second);
        it->second = a.bytes;
      }
    } else {
      const bool erased = table.erase(device, address, &out);
      auto it = oracle.find({device, address});
      ASSERT_EQ(erased, it != oracle.end()) << i;
      if (erased) {
        EXPECT_EQ(out.bytes, it->second);
        oracle.erase(it);
      }
    }
    ASSERT_EQ(table.size(), oracle.size());
  }
  size_t seen = 0;
  table.for_each([&](int16_t device, uint64_t address, const LiveAllocation& a) {
    ++seen;
    auto it = oracle.find({device, address});
    ASSERT_NE(it, oracle.end());
    EXPECT_EQ(a.bytes, it->second);
  });
  EXPECT_EQ(seen, oracle.size());
}

Event memory_event(EventKind kind, uint64_t address, uint64_t bytes, uint8_t flags = 0) {
  Event e{};
  e.kind = kind;
  e.address = address;
  e.bytes = bytes;
  e.flags = flags;
  return e;
}

struct Collect : LifetimeSink {
  std::vector<Lifetime> lifetimes;
  void on_lifetime(const Lifetime& l) override { lifetimes.push_back(l); }
};

TEST(AnalysisLifetimes, ReplayEndsLifetimesWithTheirCause) {
  Collect sink;
  MemoryReplay replay(&sink);
  EXPECT_EQ(replay.apply(memory_event(EventKind::kAlloc, 0x10, 100), {0, {}, -1}), MemoryReplay::Effect::kAllocated);
  EXPECT_EQ(replay.apply(memory_event(EventKind::kAlloc, 0x10, 40), {1, {}, 0}), MemoryReplay::Effect::kAllocated);
  EXPECT_EQ(replay.live_bytes(), 40u);
  // A free's own byte count is not trusted: the allocation's size leaves.
  EXPECT_EQ(replay.apply(memory_event(EventKind::kFree, 0x10, 0), {2, StringId{5}, 0}), MemoryReplay::Effect::kFreed);
  EXPECT_EQ(replay.apply(memory_event(EventKind::kAlloc, 0x20, 7), {3, {}, -1}), MemoryReplay::Effect::kAllocated);
  EXPECT_EQ(replay.apply(memory_event(EventKind::kAlloc, 0x30, 9, kFlagNested), {4, {}, -1}),
            MemoryReplay::Effect::kNone);
  EXPECT_EQ(replay.apply(memory_event(EventKind::kFree, 0x20, 7, kFlagFailed), {5, {}, -1}),
            MemoryReplay::Effect::kNone);
  EXPECT_EQ(replay.live_bytes(), 7u);
  replay.finish();
  EXPECT_EQ(replay.live_bytes(), 0u);
  ASSERT_EQ(sink.lifetimes.size(), 3u);
  EXPECT_EQ(sink.lifetimes[0].end.kind, EndKind::kReplaced);
  EXPECT_EQ(sink.lifetimes[0].alloc.bytes, 100u);
  EXPECT_EQ(sink.lifetimes[0].end.ordinal, 1u);
  EXPECT_EQ(sink.lifetimes[1].end.kind, EndKind::kFreed);
  EXPECT_EQ(sink.lifetimes[1].end.range.value, 5u);
  EXPECT_EQ(sink.lifetimes[1].alloc.wave, 0);
  EXPECT_EQ(sink.lifetimes[2].end.kind, EndKind::kStillLive);
  EXPECT_EQ(sink.lifetimes[2].end.ordinal, UINT64_MAX);
  EXPECT_EQ(replay.counts().nested, 1u);
  EXPECT_EQ(replay.counts().failed, 1u);
  EXPECT_EQ(replay.counts().replaced, 1u);
  // Each allocation that became live is numbered in order (what the export
  // model's category log is indexed by); the nested one is not counted.
  EXPECT_EQ(sink.lifetimes[0].alloc.birth, 0u);
  EXPECT_EQ(sink.lifetimes[1].alloc.birth, 1u);
  EXPECT_EQ(sink.lifetimes[2].alloc.birth, 2u);
}

// A free slot is one whose value has ordinal UINT64_MAX, which no event has:
// the table refuses such a value rather than lose it.
TEST(AnalysisLifetimes, LiveTableRefusesTheFreeSlotsOrdinal) {
  LiveTable table;
  LiveAllocation a{};
  a.ordinal = UINT64_MAX;
  LiveAllocation out{};
  EXPECT_THROW(table.insert(0, 0x10, a, &out), std::invalid_argument);
  EXPECT_EQ(table.size(), 0u);
  a.ordinal = 3;
  EXPECT_FALSE(table.insert(-1, 0x10, a, &out));
  EXPECT_FALSE(table.insert(0, 0x10, a, &out));  // another device: another key
  EXPECT_EQ(table.size(), 2u);
  ASSERT_TRUE(table.erase(-1, 0x10, &out));
  EXPECT_EQ(out.ordinal, 3u);
  EXPECT_EQ(out.device, -1);
  EXPECT_FALSE(table.erase(-1, 0x10, &out));
  EXPECT_EQ(table.size(), 1u);
}

// A probe run longer than a slot's kept distance can say (255): keys whose
// hashes all pick the same home slot of the first table (1024 slots, the
// hash's top 10 bits), then some freed from its middle. The table must keep
// answering as a map does, and place the rest where a table that hashes
// every key again would: the slot order for_each visits.
TEST(AnalysisLifetimes, LiveTableLongProbeRunsMatchAMap) {
  std::vector<uint64_t> same_home;
  const uint64_t home = device_address_mix(0, 0x7f0000000000) >> 54;
  for (uint64_t a = 0x7f0000000000; same_home.size() < 300; a += 64)
    if (device_address_mix(0, a) >> 54 == home) same_home.push_back(a);
  LiveTable table;
  std::map<uint64_t, uint64_t> oracle;
  LiveAllocation out{};
  for (size_t i = 0; i < same_home.size(); ++i) {
    LiveAllocation a{};
    a.ordinal = i;
    a.bytes = i;
    EXPECT_FALSE(table.insert(0, same_home[i], a, &out));
    oracle[same_home[i]] = i;
  }
  for (size_t i = 0; i < same_home.size(); i += 3) {
    ASSERT_TRUE(table.erase(0, same_home[i], &out));
    EXPECT_EQ(out.bytes, oracle[same_home[i]]);
    oracle.erase(same_home[i]);
  }
  // Every key left reads back its value.
  std::vector<uint64_t> visited;
  table.for_each([&](int16_t, uint64_t address, const LiveAllocation& a) {
    visited.push_back(address);
    EXPECT_EQ(a.bytes, oracle.at(address));
  });
  // What is left closes up from the home slot, in the order it was made; the
  // run may wrap past the table's last slot, which for_each visits first.
  std::vector<std::pair<uint64_t, uint64_t>> by_slot;  // slot, address
  for (size_t i = 0, k = 0; i < same_home.size(); ++i)
    if (i % 3 != 0) by_slot.push_back({(home + k++) % 1024, same_home[i]});
  std::sort(by_slot.begin(), by_slot.end());
  std::vector<uint64_t> expected;
  for (const auto& [slot, address] : by_slot) expected.push_back(address);
  EXPECT_EQ(visited, expected);
  for (const auto& [address, bytes] : oracle) {
    ASSERT_TRUE(table.erase(0, address, &out));
    EXPECT_EQ(out.bytes, bytes);
  }
  EXPECT_EQ(table.size(), 0u);
}

// ---- classification ----------------------------------------------------------------

AllocationFacts facts(RangeName made, RangeName ended, int32_t made_wave = 0, int32_t ended_wave = 0,
                      EndKind end = EndKind::kFreed) {
  AllocationFacts f;
  f.made_in = made;
  f.ended_in = ended;
  f.made_in_wave = made_wave;
  f.ended_in_wave = ended_wave;
  f.end = end;
  return f;
}

Attribution classify(const AllocationFacts& f) { return default_classifier().classify(f); }

constexpr RangeName fwd(int32_t l) { return {Phase::kForward, l}; }
constexpr RangeName rec(int32_t l) { return {Phase::kRecompute, l}; }
constexpr RangeName bwd(int32_t l) { return {Phase::kBackward, l}; }
constexpr RangeName kHead{Phase::kHead, kNoLayer};
constexpr RangeName kOptimizer{Phase::kOptimizer, kNoLayer};
constexpr RangeName kOutside{};

TEST(AnalysisAttribution, Boundary) {
  EXPECT_EQ(classify(facts(fwd(2), bwd(3))), (Attribution{Category::kBoundary, 3}));
  EXPECT_EQ(classify(facts(fwd(2), rec(3))), (Attribution{Category::kBoundary, 3}));
  EXPECT_EQ(classify(facts(kHead, bwd(0))), (Attribution{Category::kBoundary, 0}));
  EXPECT_NE(classify(facts(fwd(1), bwd(3))).category, Category::kBoundary);  // not the next layer
  EXPECT_NE(classify(facts(kHead, bwd(1))).category, Category::kBoundary);
  EXPECT_NE(classify(facts(fwd(2), bwd(3), 0, 0, EndKind::kStillLive)).category, Category::kBoundary);
}

TEST(AnalysisAttribution, AdapterGradient) {
  EXPECT_EQ(classify(facts(bwd(4), kOptimizer, 0, -1)), (Attribution{Category::kAdapterGradient, 4}));
  EXPECT_EQ(classify(facts(bwd(4), kOutside, 0, -1, EndKind::kStillLive)),
            (Attribution{Category::kAdapterGradient, 4}));
  EXPECT_EQ(classify(facts(bwd(4), kOutside, 0, -1)),
            (Attribution{Category::kAdapterGradient, 4}));  // unannotated zero_grad
  EXPECT_EQ(classify(facts(bwd(4), kOptimizer, 1, 2)), (Attribution{Category::kAdapterGradient, 4}));
  EXPECT_EQ(classify(facts(bwd(4), bwd(3))), (Attribution{Category::kInputGradient, 4}));
  EXPECT_NE(classify(facts(rec(4), kOptimizer, 0, -1)).category, Category::kAdapterGradient);
}

TEST(AnalysisAttribution, Workspace) {
  EXPECT_EQ(classify(facts(rec(1), bwd(1))), (Attribution{Category::kWorkspace, 1}));
  EXPECT_EQ(classify(facts(bwd(1), bwd(1))), (Attribution{Category::kWorkspace, 1}));
  EXPECT_EQ(classify(facts(rec(1), rec(1))), (Attribution{Category::kWorkspace, 1}));
  EXPECT_EQ(classify(facts(rec(1), bwd(0))), (Attribution{Category::kInputGradient, 1}));
  // Without any wave, a backward temporary is still workspace, not a gradient.
  EXPECT_EQ(classify(facts(bwd(1), bwd(1), -1, -1)), (Attribution{Category::kWorkspace, 1}));
}

TEST(AnalysisAttribution, InputGradient) {
  EXPECT_EQ(classify(facts(bwd(2), kOutside)), (Attribution{Category::kInputGradient, 2}));  // to the embedding
  EXPECT_EQ(classify(facts(kHead, bwd(3))), (Attribution{Category::kInputGradient, 3}));     // from the head
  EXPECT_NE(classify(facts(bwd(1), bwd(2))).category, Category::kInputGradient);             // to a higher layer
  EXPECT_NE(classify(facts(bwd(2), kOutside, 0, 0, EndKind::kStillLive)).category, Category::kInputGradient);
}

TEST(AnalysisAttribution, SavedBetweenLayersIsBoundary) {
  // The RNG state a checkpoint stashes before calling layer 2, released by its recompute.
  EXPECT_EQ(classify(facts(RangeName{Phase::kWave, kNoLayer}, rec(2), 0, 0)), (Attribution{Category::kBoundary, 2}));
  EXPECT_EQ(classify(facts(kOutside, bwd(2), 0, 0)), (Attribution{Category::kBoundary, 2}));
  EXPECT_NE(classify(facts(kOutside, bwd(2), 0, 1)).category, Category::kBoundary);  // another wave's
}

TEST(AnalysisAttribution, PersistentForwardScratchAndOutput) {
  AllocationFacts weights = facts(kOutside, kOutside, -1, -1, EndKind::kStillLive);
  weights.outlives_next_wave = true;
  EXPECT_EQ(classify(weights).category, Category::kPersistent);
  EXPECT_EQ(classify(facts(fwd(0), fwd(0))), (Attribution{Category::kForwardScratch, 0}));
  EXPECT_EQ(classify(facts(kHead, kHead)).category, Category::kOutput);
  EXPECT_EQ(classify(facts(kOutside, kOutside)).category, Category::kOutput);
  EXPECT_EQ(classify(facts(RangeName{Phase::kWave, kNoLayer}, kOutside)).category, Category::kOutput);
  EXPECT_EQ(classify(facts(kOptimizer, kOptimizer, -1, -1)).category, Category::kOutput);
}

TEST(AnalysisAttribution, OneAllocationIsNeverFirstExecution) {
  AllocationFacts f = facts(rec(2), bwd(2));
  f.made_in_cold_wave = true;  // only pairing a cold wave with a warm one decides it
  EXPECT_EQ(classify(f), (Attribution{Category::kWorkspace, 2}));
}

TEST(AnalysisAttribution, Names) {
  EXPECT_STREQ(category_name(Category::kAdapterGradient), "adapter_gradient");
  EXPECT_STREQ(category_name(Category::kInputGradient), "input_gradient");
  EXPECT_STREQ(category_name(Category::kForwardScratch), "forward_scratch");
  for (int c = 0; c < kCategoryCount; ++c) EXPECT_STRNE(category_name(static_cast<Category>(c)), "");
  EXPECT_TRUE(category_is_per_layer(Category::kBoundary));
  EXPECT_FALSE(category_is_per_layer(Category::kPersistent));
}

// ---- wave payloads, timeline, formatting ------------------------------------------------

TEST(AnalysisWaves, PayloadFields) {
  WavePayload p = parse_wave_payload(R"({"tokens": 2047, "slots": ["a", "b", 3], "groups": 2, "cold": true, "x": 1})");
  EXPECT_TRUE(p.error.empty()) << p.error;
  EXPECT_EQ(p.tokens, 2047);
  EXPECT_EQ(p.groups, 2);
  EXPECT_EQ(p.cold, true);
  EXPECT_EQ(p.slots, (std::vector<std::string>{"a", "b", "3"}));
  p = parse_wave_payload(R"({"tokens": 12.0, "cold": "yes"})");
  EXPECT_EQ(p.tokens, 12);
  EXPECT_FALSE(p.cold.has_value());
  EXPECT_FALSE(p.error.empty());
  EXPECT_FALSE(parse_wave_payload("[1,2]").error.empty());
  EXPECT_FALSE(parse_wave_payload("").error.empty());
  EXPECT_FALSE(parse_wave_payload(R"({"tokens": 1e300})").tokens.has_value());
}

TEST(AnalysisTimeline, BucketsKeepTheMaximum) {
  TimelineBuilder b(1000, 2000, 10);
  b.record(1000, 5);
  b.record(1001, 50);  // same bucket: the max survives
  b.record(1002, 7);
  b.record(2000, 3);
  b.record(1500, 9);  // a clock step back stays in the current bucket
  const std::vector<TimelinePoint> points = b.finish();
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].max_bytes, 50u);
  EXPECT_EQ(points[0].live_bytes, 7u);
  EXPECT_EQ(points[1].max_bytes, 9u);
  EXPECT_EQ(points[1].live_bytes, 9u);
  EXPECT_TRUE(TimelineBuilder(0, 0, 0).finish().empty());
}

TEST(AnalysisText, Bytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(3ull << 30), "3.00 GiB");
  EXPECT_EQ(grouped(0), "0");
  EXPECT_EQ(grouped(1234567), "1,234,567");
  EXPECT_EQ(grouped(100), "100");
}

}  // namespace
}  // namespace psc
