// Pass 1 of the analysis: live bytes of both memory levels, the peak (first
// time reached), each wave's baseline and peak, the waves themselves, and the
// trace's counts. Which level to analyse is only known at the end (any
// allocated-level allocation wins), so both are replayed side by side.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/memory_replay.h"
#include "analysis/range_names.h"
#include "analysis/scope_tracker.h"
#include "traces/reader.h"

namespace psc {

// A point where live bytes reached a new maximum. `ordinal` is where the
// snapshot of what is live there is taken; `reached` is false when no
// allocation raised live bytes to it (a wave that never grew: its snapshot is
// its start).
struct PeakPoint {
  uint64_t bytes = 0;
  bool reached = false;
  uint64_t ordinal = 0;
  uint64_t seq = 0;
  uint64_t time_ns = 0;
  StringId range;
  uint32_t thread = 0;
};

struct LevelScan {
  struct Wave {
    uint64_t baseline_bytes = 0;
    PeakPoint peak;
  };
  MemoryReplay replay;
  PeakPoint peak;
  std::vector<Wave> waves;  // indexed like the ScopeTracker's waves
};

class PeakPass : public TraceVisitor {
 public:
  explicit PeakPass(const RangeParser& parser) : parser_(&parser), ranges_(parser), scope_(ranges_) {}

  void on_events(const Event* events, size_t count, const TraceMeta& meta) override;
  void on_end(const TraceMeta& meta, const ReadStatus& status) override;

  // Results, valid after read_trace returns.
  const LevelScan& level(MemoryLevel l) const { return levels_[static_cast<int>(l)]; }
  // Allocated level when it has any counted allocation; else reserved when it
  // has; else the header's default level.
  MemoryLevel chosen_level() const;
  const std::vector<WaveSpan>& waves() const { return scope_.waves(); }
  const ScopeTracker& scope() const { return scope_; }
  // Whether a range that ends an optimizer step was opened (RangeParser::ends_step):
  // the second read measures growth across steps only then (step_growth.h).
  bool saw_step_range() const { return saw_step_range_; }
  uint64_t events() const { return ordinal_; }
  const TraceMeta& meta() const { return meta_; }
  void fill_summary(TraceSummary* trace, MemorySummary* memory, MemoryLevel level) const;
  // Events of the file the pass was not shown (deferred events withheld by
  // the placement): not lost, so not counted as missing sequence numbers.
  void count_withheld(uint64_t events) { withheld_ += events; }

 private:
  void grew(LevelScan& level, const Event& e, const EventSite& site);
  void check_step_range(const Event& e, const TraceMeta& meta);

  const RangeParser* parser_;
  RangeTable ranges_;
  ScopeTracker scope_;
  bool saw_step_range_ = false;
  std::unordered_map<uint32_t, bool> step_names_;  // range names checked so far, by string id
  std::array<LevelScan, kMemoryLevelCount> levels_;
  uint64_t ordinal_ = 0;
  uint64_t withheld_ = 0;
  uint64_t first_time_ns_ = UINT64_MAX;
  uint64_t last_time_ns_ = 0;
  uint64_t first_seq_ = UINT64_MAX;
  uint64_t last_seq_ = 0;
  std::array<uint64_t, kMaxEventKind + 1> by_kind_{};
  TraceMeta meta_;
  ReadStatus status_;
};

}  // namespace psc
