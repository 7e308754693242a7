// The report's part of the second read (lifetime_pass.h): as each
// allocation's lifetime ends, classifies it and adds it to the snapshots
// that its lifetime covers; and the live-bytes timeline.
//
// The snapshots' positions are either known before the read (found by the
// first read) or found by this one as it goes (on_snapshot_moved). A snapshot
// still moving holds what it would add, each covering lifetime's facts
// (taken when it ends, as the classification then would take them), and
// drops them when it moves: none of them covers the new position, which is an
// allocation later than each of their ends. Once it stops, what it holds is
// classified and added, and it takes later lifetimes as a known one does.
// Memory: one small aggregate table per snapshot, and for each one still
// moving at most what is live at it (held records).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/categories.h"
#include "analysis/lifetime_pass.h"
#include "analysis/memory_replay.h"
#include "analysis/range_names.h"
#include "analysis/scope_tracker.h"
#include "analysis/timeline.h"
#include "traces/reader.h"

namespace psc {

struct BreakdownInputs {
  uint64_t first_time_ns = 0;
  uint64_t last_time_ns = 0;
  size_t timeline_points = 0;
  // Where to take snapshots: live there means alloc ordinal <= s < end ordinal.
  std::vector<uint64_t> snapshot_ordinals;
  // Or this many snapshots, found by the read (on_snapshot_moved), whose
  // held lifetimes are classified by `classifier` (the read's).
  size_t found_snapshots = 0;
  const Classifier* classifier = nullptr;
};

// Sorts the groups (largest first) and derives the per-layer rows from them:
// after the groups of a breakdown change.
void finish_breakdown(LiveBreakdown* breakdown);

// The report's breakdowns: an observer of the second read (lifetime_pass.h).
class SnapshotBreakdowns : public LifetimeObserver {
 public:
  explicit SnapshotBreakdowns(const BreakdownInputs& inputs);

  void on_memory_event(const MemoryEventView& memory) override;
  void on_lifetime(LifetimeView& lifetime) override;
  void on_finish(const TraceMeta& meta) override;
  void on_snapshot_moved(size_t snapshot, uint64_t ordinal) override;
  void on_snapshot_final(size_t snapshot) override;

  // Results, valid after the read; indexed like snapshot_ordinals.
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
  // A lifetime covering a moving snapshot, classified once the snapshot stops.
  struct Held {
    AllocationFacts facts;
    uint32_t range;   // where it was made (the group's range)
    uint32_t source;  // as GroupKey::source
  };
  struct Moving {
    size_t snapshot;
    uint64_t ordinal;
    std::vector<Held> held;
  };

  LiveBreakdown breakdown(const Groups& groups, const TraceMeta& meta) const;
  void hold(LifetimeView& view, uint32_t source);
  void add_known(size_t snapshot, uint64_t ordinal);
  void stop(std::vector<Moving>::iterator moving);

  BreakdownInputs in_;
  TimelineBuilder timeline_;
  // Snapshot positions sorted, with the snapshot each one belongs to.
  std::vector<uint64_t> sorted_ordinals_;
  std::vector<size_t> sorted_snapshot_;
  std::vector<Moving> moving_;  // the snapshots found by the read that still move (the peak's, open waves')
  std::vector<Groups> groups_;
  std::vector<LiveBreakdown> breakdowns_;
  // CUPTI-only allocations still live: birth ordinal → source library.
  std::unordered_map<uint64_t, StringId> cupti_sources_;
};

}  // namespace psc
