// What a trace says so far, for a trace still being written (`peakscope top`,
// traces/reader.h TraceFollower): live bytes now and where they were made, the
// peak so far, the range open on each thread, each wave's baseline and peak.
// It is the report's first pass (analysis/peak_pass.h) fed as chunks land, so
// when the trace ends its peak and waves are the report's, byte for byte.
//
// CUPTI-only allocations (deferred events, traces/deferred.h) need the whole
// trace to be placed by time: the live view leaves them out and counts them.
// Memory: the first pass' (O(live allocations + waves)); a snapshot walks the
// live allocations once.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/peak_pass.h"
#include "analysis/range_names.h"
#include "traces/follower.h"
#include "traces/reader.h"

namespace psc {

struct LiveWave {
  int32_t index = 0;
  WavePayload payload;
  bool ended = false;
  // No optimizer step began since the wave before it: a later wave of
  // gradient accumulation, whose gradients already exist.
  bool after_a_wave_of_its_step = false;
  uint64_t baseline_bytes = 0;
  uint64_t peak_bytes = 0;  // absolute
  std::string peak_range;   // where its peak was reached ("" when it never grew)
  uint64_t measured_bytes() const { return peak_bytes - baseline_bytes; }
};

struct LiveSnapshot {
  MemoryLevel level = MemoryLevel::kAllocated;
  uint64_t events = 0;
  uint64_t deferred_left_out = 0;  // CUPTI-only events: placed by `report`, not here
  uint64_t first_time_ns = 0;
  uint64_t last_time_ns = 0;
  uint64_t live_bytes = 0;
  uint64_t live_allocations = 0;
  uint64_t peak_bytes = 0;
  uint64_t peak_time_ns = 0;
  std::string peak_range;  // "" for none
  // Live now by the phase of the range that made each allocation (forward,
  // backward, ..., outside), and by the decoder layer of that range; the
  // category needs the allocation's death, which has not happened yet.
  std::array<uint64_t, kPhaseCount> phase_bytes{};
  std::vector<uint64_t> layer_bytes;  // index: layer
  struct OpenRange {
    uint32_t thread = 0;
    std::string thread_name;
    std::string range;
  };
  std::vector<OpenRange> open_ranges;
  std::vector<LiveWave> waves;  // every wave so far, in order
  // Growth across optimizer steps as the run goes: the live bytes by the
  // range that made them, taken as each optimizer step begins (from the
  // second on: the first step makes the optimizer's state); a range is
  // growing when its bytes rose at each of the last K of these, K =
  // min(taken - 1, 3), as `report` judges growth at step ends
  // (analysis/step_growth.h).
  size_t steps_compared = 0;
  struct Growing {
    std::string range;
    uint64_t bytes_per_step = 0;
    uint64_t live_bytes = 0;
  };
  std::vector<Growing> growing;  // the fastest first
};

class LiveView : public TraceVisitor {
 public:
  explicit LiveView(const RangeParser& parser = default_range_parser());

  void on_begin(const TraceMeta& meta) override;
  void on_events(const Event* events, size_t count, const TraceMeta& meta) override;
  void on_end(const TraceMeta& meta, const ReadStatus& status) override;

  LiveSnapshot snapshot() const;
  const TraceMeta& meta() const { return *meta_; }
  bool ended() const { return ended_; }
  const ReadStatus& end_status() const { return end_status_; }

 private:
  PeakPass pass_;
  mutable RangeTable ranges_;
  // The reader's, not a copy (a batch's copy would cost the string table each
  // time): a TraceFollower keeps it for as long as it follows.
  static inline const TraceMeta kNoMeta{};
  const TraceMeta* meta_ = &kNoMeta;
  void feed(const Event* events, size_t count, const TraceMeta& meta);
  void take_step();

  const RangeParser& parser_;
  std::vector<Event> kept_;  // a batch without its deferred events
  bool step_began_ = true;   // since the last wave began (the trace's start counts)
  std::vector<bool> after_a_wave_;
  size_t step_begins_ = 0;
  size_t steps_taken_ = 0;
  std::vector<std::unordered_map<uint32_t, uint64_t>> step_bytes_;  // the last kGrowthWindow + 1 taken
  uint64_t deferred_ = 0;
  bool ended_ = false;
  ReadStatus end_status_;
};

}  // namespace psc
