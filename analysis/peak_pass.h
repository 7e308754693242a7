// The analysis' first read: the trace's counts, span and waves, and (unless
// told to scan only) live bytes of both memory levels, the peak (first time
// reached) and each wave's baseline and peak. Which level to analyse is only
// known at the end (any allocated-level allocation wins), so both are replayed
// side by side.
//
// A scan-only first read (Mode::kScan) keeps no live table: analyze_trace then
// finds the peaks in its second read, which replays the chosen level anyway
// (analysis.h), and this read tells it what that read needs first: the span
// (the timeline's buckets), the waves (classification looks ahead to their
// ends and payloads), the level, and whether the trace has step ranges.
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

// The peaks of one memory level as its replay goes: the trace's, and each
// wave's from its start. The analysis' snapshots are numbered the same way:
// 0 the peak, 1 + w wave w's.
struct PeakTracker {
  struct Wave {
    uint64_t baseline_bytes = 0;
    PeakPoint peak;
  };
  PeakPoint peak;
  std::vector<Wave> waves;  // indexed like the ScopeTracker's waves

  // An allocation raised live bytes to `live`: the peak and every open wave's
  // rise when it is a new maximum (strictly greater: the first time one is
  // reached), and moved(snapshot) is told of each that did.
  template <typename Moved>
  void grew(uint64_t live, const Event& e, const EventSite& site, const std::vector<int32_t>& open_waves,
            Moved&& moved) {
    if (live > peak.bytes) {
      peak = PeakPoint{live, true, site.ordinal, e.seq, e.time_ns, site.range, e.thread};
      moved(size_t{0});
    }
    for (int32_t w : open_waves) {
      PeakPoint& p = waves[static_cast<size_t>(w)].peak;
      if (live <= p.bytes) continue;
      p = PeakPoint{live, true, site.ordinal, e.seq, e.time_ns, site.range, e.thread};
      moved(static_cast<size_t>(w) + 1);
    }
  }
  // Wave `wave` began at `e` with `live` bytes live: a wave that never grows
  // peaks at its baseline, snapshotted at its start.
  void wave_begin(int32_t wave, uint64_t live, uint64_t ordinal, const Event& e) {
    waves.resize(static_cast<size_t>(wave) + 1);
    Wave& w = waves.back();
    w.baseline_bytes = live;
    w.peak = PeakPoint{live, false, ordinal, e.seq, e.time_ns, {}, e.thread};
  }
};

struct LevelScan : PeakTracker {
  MemoryReplay replay;
};

class PeakPass : public TraceVisitor {
 public:
  enum class Mode {
    kReplay,  // both levels replayed: live bytes, peaks, counts
    kScan,    // no replay: counts, span, waves, and the allocations of each level
  };
  explicit PeakPass(const RangeParser& parser, Mode mode = Mode::kReplay)
      : parser_(&parser), ranges_(parser), scope_(ranges_), replay_(mode == Mode::kReplay) {}

  void on_events(const Event* events, size_t count, const TraceMeta& meta) override;
  void on_end(const TraceMeta& meta, const ReadStatus& status) override;

  bool replays() const { return replay_; }
  // Results, valid after read_trace returns. level() only when replaying.
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
  // fill_summary only when replaying. Without, fill_trace and fill_memory
  // with the counts of the read that replayed the levels (the live bytes at
  // the end are that read's to fill).
  void fill_summary(TraceSummary* trace, MemorySummary* memory, MemoryLevel level) const;
  void fill_trace(TraceSummary* trace) const;
  void fill_memory(MemorySummary* memory, MemoryLevel level, const MemoryCounts& analysed,
                   const MemoryCounts& other) const;
  // Whether an event was handed over while the string table had an empty
  // entry past 0: a hole, a string that arrived after a later one (or an
  // empty name). A range name looked up then is cached as "outside" even
  // once its text comes (RangeTable), so what a lookup answers depends on
  // when it is made; analyze_trace then keeps to the reads' old order.
  bool saw_string_hole() const { return string_hole_; }
  // Events of the file the pass was not shown (deferred events withheld by
  // the placement): not lost, so not counted as missing sequence numbers.
  void count_withheld(uint64_t events) { withheld_ += events; }

 private:
  void check_step_range(const Event& e, const TraceMeta& meta);
  void check_strings(const TraceMeta& meta);
  void count_allocation(const Event& e) {
    // MemoryReplay::apply's rule: an allocation that is neither failed nor
    // nested becomes live (replacing one at its address counts too).
    if (e.kind == EventKind::kAlloc && MemoryReplay::moves_memory(e))
      ++allocations_[static_cast<int>(memory_level_of(e))];
  }

  const RangeParser* parser_;
  RangeTable ranges_;
  ScopeTracker scope_;
  bool saw_step_range_ = false;
  std::unordered_map<uint32_t, bool> step_names_;  // range names checked so far, by string id
  bool replay_;
  std::array<LevelScan, kMemoryLevelCount> levels_;
  // Without a replay: allocations that would become live, by level (what
  // chosen_level asks of the replays' counts).
  std::array<uint64_t, kMemoryLevelCount> allocations_{};
  bool string_hole_ = false;
  size_t strings_checked_ = 1;  // entries of meta.strings looked at (0 is always "")
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
