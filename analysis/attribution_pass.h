// Pass 2 of the analysis: replays the chosen memory level again and, as each
// allocation's lifetime ends, classifies it and adds it to the snapshots
// (positions found by pass 1) that its lifetime covers. Memory: the live set
// plus one small aggregate table per snapshot.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/categories.h"
#include "analysis/memory_replay.h"
#include "analysis/range_names.h"
#include "analysis/scope_tracker.h"
#include "analysis/timeline.h"
#include "traces/reader.h"

namespace psc {

struct AttributionInputs {
  const RangeParser* ranges = nullptr;
  const Classifier* classifier = nullptr;
  MemoryLevel level = MemoryLevel::kAllocated;
  // Pass 1 saw this many events: a trace still being written may have grown
  // since, and both passes must describe the same prefix.
  uint64_t event_limit = 0;
  // Where to take snapshots: live there means alloc ordinal <= s < end ordinal.
  std::vector<uint64_t> snapshot_ordinals;
  const std::vector<WaveSpan>* waves = nullptr;  // from pass 1, for look-ahead
  uint64_t first_time_ns = 0;
  uint64_t last_time_ns = 0;
  size_t timeline_points = 0;
};

// The classifier's view of one lifetime (analysis/categories.h): the ranges
// and waves it was made and ended in, its size, and whether an allocation made
// outside every wave outlives the next wave to begin. `waves` in trace order.
// Every pass that classifies allocations (attribution, liveness, exports)
// builds its facts here.
AllocationFacts allocation_facts(const Lifetime& lifetime, const std::vector<WaveSpan>& waves, RangeTable& ranges,
                                 const TraceMeta& meta);

class AttributionPass : public TraceVisitor, private LifetimeSink {
 public:
  explicit AttributionPass(const AttributionInputs& inputs);

  void on_events(const Event* events, size_t count, const TraceMeta& meta) override;
  void on_end(const TraceMeta& meta, const ReadStatus& status) override;

  // Results, valid after read_trace returns; indexed like snapshot_ordinals.
  const std::vector<LiveBreakdown>& snapshots() const { return breakdowns_; }
  std::vector<TimelinePoint> timeline() const { return timeline_.finish(); }

 private:
  struct GroupKey {
    uint32_t range;
    int32_t layer;
    Category category;
    uint32_t source = 0;  // CUPTI-only: the source library's string id + 1; 0 for hooked
    friend bool operator==(const GroupKey&, const GroupKey&) = default;
  };
  struct GroupKeyHash {
    size_t operator()(const GroupKey& k) const {
      return (static_cast<size_t>(k.range) * 0x9E3779B97F4A7C15ull) ^
             (static_cast<size_t>(static_cast<uint32_t>(k.layer)) << 8) ^ static_cast<size_t>(k.category) ^
             (static_cast<size_t>(k.source) << 40);
    }
  };
  struct GroupTotal {
    uint64_t bytes = 0;
    uint64_t allocations = 0;
  };
  using Groups = std::unordered_map<GroupKey, GroupTotal, GroupKeyHash>;

  void on_lifetime(const Lifetime& lifetime) override;
  LiveBreakdown breakdown(const Groups& groups, const TraceMeta& meta) const;

  AttributionInputs in_;
  RangeTable ranges_;
  ScopeTracker scope_;
  MemoryReplay replay_;
  TimelineBuilder timeline_;
  // Snapshot positions sorted, with the snapshot each one belongs to.
  std::vector<uint64_t> sorted_ordinals_;
  std::vector<size_t> sorted_snapshot_;
  std::vector<Groups> groups_;
  std::vector<LiveBreakdown> breakdowns_;
  const TraceMeta* meta_ = nullptr;
  uint64_t ordinal_ = 0;
  // CUPTI-only allocations still live: birth ordinal → source library.
  std::unordered_map<uint64_t, StringId> cupti_sources_;
};

}  // namespace psc
