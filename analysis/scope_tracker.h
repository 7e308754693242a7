// Where in the step each event happened: the range it is attributed to and the
// wave that was open. Follows per-thread push/pop stacks, process-wide
// start/end ranges, and `wave` ranges with their payload marks.
//
// Attribution order: an event's own range (the innermost range open on its
// thread, recorded in Event::range) when it has one; else the most recently
// started process-wide range still open, because autograd's worker threads
// may have no ranges of their own; else, inside a wave, the range opened last
// on any thread. The last rule places the blocks of an intra-op pool's worker
// threads (a parallel region of a CPU run with several threads): the thread
// that started the region is the one that opened the latest range, and its
// blocks belong to the layer and phase it was in. Without it they read as
// "(no range)", outside every layer, and one thread count prices differently
// from another. Outside a wave nothing says whose work a rangeless thread
// does, and its events keep no range.
//
// A deferred event (kFlagDeferred: CUPTI's, placed by its time, see
// traces/deferred.h) has no thread's range: it gets the range opened last
// among all ranges open at its place in the stream, whichever thread pushed it
// and process-wide ones included: the innermost thing the process was doing
// then (the layer the autograd worker is in, while the main thread waits
// inside its wave).
//
// Memory: per-thread stacks bounded by kMaxDepth, open process-wide ranges
// bounded by kMaxOpenRanges, one small record per wave. Never O(events).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/range_names.h"
#include "format/event.h"
#include "traces/reader.h"

namespace psc {

// The wave mark's JSON: {"tokens":..,"slots":[..],"groups":..,"cold":..}.
// `groups` is a count of equal parts, or a list of each group's
// {"tokens", "sequence_lengths", "slot"} (its count here; liveness reads
// the sizes from the raw text).
// Fields that are absent or of the wrong type stay empty; the raw text is kept
// so a report can show everything the trainer wrote (split children, ...).
struct WavePayload {
  bool present = false;
  std::string raw;
  std::string error;  // why the payload did not parse; empty when it did
  std::optional<int64_t> tokens;
  std::optional<int64_t> groups;
  std::optional<bool> cold;
  std::vector<std::string> slots;
  // "sequence_lengths" given but not positive integers adding up to the
  // tokens: the wave's shape is not known (error says why).
  bool bad_lengths = false;
};
WavePayload parse_wave_payload(std::string_view json);

struct WaveSpan {
  int32_t index = 0;
  uint32_t thread = 0;
  uint64_t begin_ordinal = 0;
  uint64_t begin_seq = 0;
  uint64_t begin_time_ns = 0;
  bool ended = false;  // false when the trace stops inside the wave
  uint64_t end_ordinal = UINT64_MAX;
  uint64_t end_seq = 0;
  uint64_t end_time_ns = 0;
  // Another wave open at the same time (the one it began inside, or the
  // first that began inside it): the two figures mix; -1 for none.
  int32_t overlapped = -1;
  WavePayload payload;
};

class ScopeTracker {
 public:
  static constexpr size_t kMaxDepth = 4096;
  static constexpr size_t kMaxOpenRanges = 1u << 16;

  explicit ScopeTracker(RangeTable& ranges) : ranges_(&ranges) {}

  enum class Change { kNone, kWaveBegin, kWaveEnd };
  struct Update {
    Change change = Change::kNone;
    int32_t wave = -1;
  };
  // Feed every event in trace order; memory events pass through untouched.
  Update on_event(const Event& e, uint64_t ordinal, const TraceMeta& meta);

  StringId attributed_range(const Event& e) const {
    if (e.flags & kFlagDeferred) return latest_open_range();
    if (!e.range.empty()) return e.range;
    if (!open_ranges_.empty()) return open_ranges_.back().name;
    return open_frames_ > 0 && !open_waves_.empty() ? latest_open_range() : e.range;
  }
  // The range opened last among those open now, on any thread or process-wide.
  StringId latest_open_range() const;
  // The name of the range a pop or end event closes, before on_event applies
  // it (a pop's own name may be 0); empty for any other event, or when it
  // closes nothing this tracker follows.
  StringId closing_range(const Event& e) const;
  int32_t current_wave() const { return open_waves_.empty() ? -1 : open_waves_.back(); }
  // Waves open now, oldest first (almost always zero or one).
  const std::vector<int32_t>& open_waves() const { return open_waves_; }
  const std::vector<WaveSpan>& waves() const { return waves_; }
  std::vector<WaveSpan>& waves() { return waves_; }
  uint64_t unmatched_pops() const { return unmatched_pops_; }
  // The innermost range open on each thread now: f(thread, name), threads
  // with none left out.
  template <typename F>
  void for_each_innermost(F&& f) const {
    for (size_t t = 0; t < threads_.size(); ++t)
      if (!threads_[t].frames.empty()) f(static_cast<uint32_t>(t), threads_[t].frames.back().name);
  }

 private:
  struct Frame {
    StringId name;
    int32_t wave;      // the wave this frame opened, -1 for an ordinary range
    uint64_t ordinal;  // where it was opened
  };
  struct ThreadStack {
    std::vector<Frame> frames;
    uint64_t overflow = 0;  // pushes beyond kMaxDepth, popped before frames
  };
  struct OpenRange {
    uint64_t id;
    StringId name;
    int32_t wave;
    uint64_t ordinal;
  };

  bool is_wave(StringId name, const TraceMeta& meta) { return ranges_->lookup(name, meta).phase == Phase::kWave; }
  int32_t begin_wave(const Event& e, uint64_t ordinal);
  void end_wave(int32_t wave, const Event& e, uint64_t ordinal);
  void attach_payload(const Event& e, const TraceMeta& meta);
  Update push(const Event& e, uint64_t ordinal, const TraceMeta& meta);
  Update pop(const Event& e, uint64_t ordinal);
  Update start(const Event& e, uint64_t ordinal, const TraceMeta& meta);
  Update finish_range(const Event& e, uint64_t ordinal);

  RangeTable* ranges_;
  std::vector<ThreadStack> threads_;
  size_t open_frames_ = 0;  // frames on every thread's stack together
  std::vector<OpenRange> open_ranges_;
  std::vector<int32_t> open_waves_;
  std::vector<WaveSpan> waves_;
  uint64_t unmatched_pops_ = 0;
};

}  // namespace psc
