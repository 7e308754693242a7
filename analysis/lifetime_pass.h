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
  };
  LifetimePass(const Inputs& inputs, std::vector<LifetimeObserver*> observers);

  void on_events(const Event* events, size_t count, const TraceMeta& meta) override;
  void on_end(const TraceMeta& meta, const ReadStatus& status) override;

 private:
  void on_lifetime(const Lifetime& lifetime) override;

  Inputs in_;
  std::vector<LifetimeObserver*> observers_;
  RangeTable ranges_;
  ScopeTracker scope_;
  MemoryReplay replay_;
  const TraceMeta* meta_ = nullptr;
  uint64_t ordinal_ = 0;
};

}  // namespace psc
