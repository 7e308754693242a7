// The second read of a trace, shared by everything that needs each
// allocation's whole lifetime: one replay of the analysed memory level, with
// the range and wave of every event (ScopeTracker), that hands each lifetime,
// as it ends, to observers. The report's breakdowns (breakdowns.h), the
// liveness terms (estimator/liveness.h) and the exporters' category log
// (exchange/export_model.h) are observers of one LifetimePass: analyze_trace
// reads the file once for all of them.
//
// A lifetime's facts and category are computed on first request and shared by
// the observers, so a lifetime nobody asks about is never classified.
//
// The read may also find the peaks itself (Inputs::peaks, analysis.h): the
// observers are then told where each snapshot is as it moves, and when it
// stops moving.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/categories.h"
#include "analysis/memory_replay.h"
#include "analysis/range_names.h"
#include "analysis/scope_tracker.h"
#include "traces/reader.h"

namespace psc {

struct Analysis;
struct PeakTracker;

// The classifier's view of one lifetime (analysis/categories.h): the ranges
// and waves it was made and ended in, its size, and whether an allocation made
// outside every wave outlives the next wave to begin. `waves` in trace order.
AllocationFacts allocation_facts(const Lifetime& lifetime, const std::vector<WaveSpan>& waves, RangeTable& ranges,
                                 const TraceMeta& meta);

// One ended lifetime, classified lazily.
class LifetimeView {
 public:
  LifetimeView(const Lifetime& lifetime, const std::vector<WaveSpan>& waves, RangeTable& ranges, const TraceMeta& meta,
               const Classifier& classifier)
      : lifetime(lifetime), waves_(&waves), ranges_(&ranges), meta_(&meta), classifier_(&classifier) {}

  const Lifetime& lifetime;
  const AllocationFacts& facts();
  const Attribution& attribution();

 private:
  const std::vector<WaveSpan>* waves_;
  RangeTable* ranges_;
  const TraceMeta* meta_;
  const Classifier* classifier_;
  std::optional<AllocationFacts> facts_;
  std::optional<Attribution> attribution_;
};

// One memory event of the analysed level, after the pass applied it.
struct MemoryEventView {
  const Event& event;
  const EventSite& site;
  RangeName range;  // the attributed range, parsed
  MemoryReplay::Effect effect;
  const MemoryReplay& replay;
};

class LifetimeObserver {
 public:
  virtual ~LifetimeObserver() = default;
  // Before the first event: what the first read found (summary, level, peaks,
  // waves; not yet the breakdowns the observers compute).
  virtual void on_start(const Analysis& /*first_read*/) {}
  // Every event the pass reads, in order, before it is applied.
  virtual void on_event(const Event& /*e*/, uint64_t /*ordinal*/, const ScopeTracker& /*scope*/,
                        const TraceMeta& /*meta*/) {}
  // A memory event of the analysed level, after it was applied.
  virtual void on_memory_event(const MemoryEventView& /*memory*/) {}
  // After the last event, before the lifetimes still live then are handed over.
  virtual void on_events_end(const TraceMeta& /*meta*/) {}
  // A lifetime ended: freed, replaced, or (at the end of the read) still live.
  virtual void on_lifetime(LifetimeView& lifetime) = 0;
  // After the last lifetime.
  virtual void on_finish(const TraceMeta& /*meta*/) {}

  // Whether on_start needs the peaks (Analysis::peak, each wave's peak) and
  // the memory summary: the analysis then finds them in a read before this
  // one. Without, on_start is given the trace's summary and the waves' spans.
  virtual bool needs_peaks() const { return false; }
  // In a read that finds the peaks (LifetimePass::Inputs::peaks): snapshot
  // `snapshot` (0 the peak, 1 + w wave w's, as PeakTracker numbers them) is
  // now at `ordinal` (live there: made at or before it, ended after it). Told
  // after the allocation that moved it was applied (so after the lifetime it
  // replaced, if any, was handed over), before on_memory_event. The peak's
  // begins at 0 (told before the first event), a wave's at its start.
  virtual void on_snapshot_moved(size_t /*snapshot*/, uint64_t /*ordinal*/) {}
  // Wave w's snapshot (1 + w) moves no more: the wave ended. The peak's, and
  // those of waves the trace stops inside, stop with the read (on_finish).
  virtual void on_snapshot_final(size_t /*snapshot*/) {}
};

class LifetimePass : public TraceVisitor, private LifetimeSink {
 public:
  struct Inputs {
    const RangeParser* ranges = nullptr;
    const Classifier* classifier = nullptr;
    MemoryLevel level = MemoryLevel::kAllocated;
    // The first read saw this many events: a trace still being written may
    // have grown since, and both reads must describe the same prefix.
    uint64_t event_limit = 0;
    const std::vector<WaveSpan>* waves = nullptr;  // from the first read, for look-ahead
    // Non-null: this read finds the analysed level's peaks (into *peaks),
    // tells the observers where the snapshots are, and replays the other
    // level for its counts; the first read replayed neither.
    PeakTracker* peaks = nullptr;
  };
  LifetimePass(const Inputs& inputs, std::vector<LifetimeObserver*> observers);

  void on_events(const Event* events, size_t count, const TraceMeta& meta) override;
  void on_end(const TraceMeta& meta, const ReadStatus& status) override;

  // After the read: each level's counts (the other's only with Inputs::peaks),
  // and what was live when the events ended.
  const MemoryCounts& counts() const { return replay_.counts(); }
  const MemoryCounts& other_counts() const { return other_.counts(); }
  uint64_t live_at_end_bytes() const { return live_at_end_bytes_; }
  uint64_t live_at_end_allocations() const { return live_at_end_allocations_; }

 private:
  void on_lifetime(const Lifetime& lifetime) override;
  void wave_changed(const ScopeTracker::Update& update, const Event& e, uint64_t ordinal);

  Inputs in_;
  std::vector<LifetimeObserver*> observers_;
  RangeTable ranges_;
  ScopeTracker scope_;
  MemoryReplay replay_;
  MemoryReplay other_;  // the level not analysed, with Inputs::peaks only
  const TraceMeta* meta_ = nullptr;
  uint64_t ordinal_ = 0;
  uint64_t live_at_end_bytes_ = 0;
  size_t live_at_end_allocations_ = 0;
};

}  // namespace psc
