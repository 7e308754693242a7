// Analysis of one trace: the peak, what is live at it and why, and each wave's
// baseline and peak. What `peakscope report` prints (through
// estimator/liveness.h's analyze_report, which adds the categories decided
// from whole waves); calibration and the exporters build on it.
//
// Streaming in two reads of the file, memory O(live allocations + waves)
// (one more read, and the deferred events in memory, when the trace has
// CUPTI's deferred events: see traces/deferred.h). The memory levels are
// replayed once, in the second read:
//   1. scan (peak_pass.h, PeakPass::Mode::kScan): no live table; the trace's
//      counts and span (the timeline's buckets), the waves' spans and
//      payloads (classification looks ahead to them), which level to
//      analyse, and whether there are step ranges;
//   2. lifetime pass (lifetime_pass.h): replay both levels (the other one
//      for its counts), find the peak (first time reached) and each wave's
//      baseline and peak as live bytes rise; when each allocation of the
//      chosen level ends (freed, replaced, or still live at the end) classify
//      it from where it was made and where it died, and hand it to the
//      observers: the report's breakdowns (breakdowns.h: its bytes added to
//      every snapshot its lifetime covers, the peak and each wave's peak) and
//      any the caller adds (liveness, the exporters' category log); and the
//      live bytes by range at each optimizer step's end (step_growth.h).
// A snapshot found by the second read moves until it is final: what covers
// it is held (bounded by what is live there) and dropped when it moves, and
// classified once it stops (breakdowns.h).
//
// Two cases keep the reads' older order, the first read replaying both
// levels and finding the peaks: an observer that needs the peaks before the
// second read (LifetimeObserver::needs_peaks: the exporters' samples at each
// peak), and a trace whose string table had a hole (PeakPass::saw_string_hole,
// then the first read is done again). The answers are the same either way.
//
// An allocation live at the peak is classified by where it is freed later:
// the peak's breakdown is complete only at the end of the second read. The
// first read is what one read could not do without keeping every event: the
// timeline's buckets need the trace's last time before its first sample, and
// the classification the waves that have not begun yet.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "analysis/categories.h"
#include "analysis/device_usage.h"
#include "analysis/memory_replay.h"
#include "analysis/range_names.h"
#include "analysis/scope_tracker.h"
#include "traces/deferred.h"
#include "traces/reader.h"

namespace psc {

class LifetimeObserver;

struct AnalysisOptions {
  const RangeParser* ranges = nullptr;     // default_range_parser() when null
  const Classifier* classifier = nullptr;  // default_classifier() when null
  size_t timeline_points = 100;            // buckets of the live-bytes timeline; 0 for none
  // More observers of the second read (analysis/lifetime_pass.h), beside the
  // report's own: what liveness and the exporters collect from the same read.
  // One whose needs_peaks() says so has the peaks found by the first read.
  std::vector<LifetimeObserver*> observers;
};

// Where a peak was reached: the allocation that first took live bytes there.
struct PeakSite {
  bool reached = false;  // false when nothing was ever live
  uint64_t seq = 0;
  uint64_t ordinal = 0;  // the snapshot's position in the trace (what is live there)
  uint64_t time_ns = 0;
  uint32_t thread = 0;
  std::string thread_name;  // as the recorder named it ("" when unknown)
  std::string range;        // the attributed range name ("" for none)
  RangeName parsed;
};

// Bytes live at one instant with one (range, layer, category).
struct LiveGroup {
  std::string range;
  int32_t layer = kNoLayer;  // the category's layer, else the range's, else none
  Category category = Category::kOutput;
  uint64_t bytes = 0;
  uint64_t allocations = 0;
  // Allocations only CUPTI saw (traces/deferred.h), with the library CUPTI
  // named; false and "" for everything the hooks recorded.
  bool cupti_only = false;
  std::string source;
};

struct LayerRow {
  int32_t layer = 0;
  uint64_t boundary_bytes = 0;
  uint64_t adapter_gradient_bytes = 0;
  uint64_t workspace_bytes = 0;
  uint64_t other_bytes = 0;  // anything else charged to this layer
};

// What was live at a snapshot, broken down.
struct LiveBreakdown {
  uint64_t bytes = 0;
  uint64_t allocations = 0;
  std::vector<LiveGroup> groups;  // largest first
  std::array<uint64_t, kCategoryCount> category_bytes{};
  std::vector<LayerRow> layers;  // 0..max layer seen, dense (only layers present beyond 4096)
};

struct PeakReport {
  uint64_t bytes = 0;  // absolute live bytes
  PeakSite site;
  LiveBreakdown live;
};

struct WaveReport {
  WaveSpan span;                // index, payload, where it began and ended
  uint64_t baseline_bytes = 0;  // live just before the push
  PeakReport peak;              // max live inside the wave (absolute)

  uint64_t measured_peak_bytes() const { return peak.bytes - baseline_bytes; }
};

struct TimelinePoint {
  uint64_t time_ns = 0;     // end of the bucket's last sample
  uint64_t live_bytes = 0;  // live at that sample
  uint64_t max_bytes = 0;   // max live within the bucket
};

struct TraceSummary {
  std::string path;
  ReadStatus status;
  format::FileHeader header{};
  format::RunHeader run{};
  std::string command;
  size_t threads = 0;
  std::array<uint64_t, format::kDropReasonCount> drops{};
  uint64_t dropped = 0;
  uint64_t late_events = 0;
  bool clean_end = false;
  // Not closed, and the process writing it still runs (on this host): the
  // analysis covers what was written so far.
  bool being_written = false;
  uint64_t first_time_ns = 0;
  uint64_t last_time_ns = 0;
  std::array<uint64_t, kMaxEventKind + 1> events_by_kind{};
  uint64_t unmatched_range_ends = 0;  // pops/ends with no open range
  // Sequence numbers are global and consecutive: numbers between the first and
  // last that never appear are events lost (dropped, or lost without a count).
  uint64_t first_seq = 0;
  uint64_t last_seq = 0;
  uint64_t missing_seqs = 0;
};

// Live bytes at the end of one optimizer step (analysis/step_growth.h).
struct StepEnd {
  uint64_t step = 0;  // 1 for the first optimizer step
  uint64_t seq = 0;   // of the event that closed the step's range
  uint64_t time_ns = 0;
  uint64_t live_bytes = 0;
  uint64_t live_allocations = 0;
};

// A range whose allocations still live at the step ends rose at each of the
// last ones compared (the rule: analysis/step_growth.h).
struct GrowingRange {
  std::string range;  // the attributed range ("" for none)
  int32_t layer = kNoLayer;
  uint64_t first_step = 0;    // the step end where the rise began
  uint64_t first_bytes = 0;   // live then
  uint64_t last_bytes = 0;    // live at the last step end
  uint64_t allocations = 0;   // live at the last step end
  uint64_t rising_steps = 0;  // step ends in a row at which its live bytes rose

  uint64_t bytes_per_step() const { return rising_steps ? (last_bytes - first_bytes) / rising_steps : 0; }
};

// Memory that stays live across optimizer steps and grows.
struct StepGrowth {
  uint64_t steps = 0;   // optimizer steps that ended
  uint64_t window = 0;  // rises in a row that make a range growing; 0 below 2 steps
  // Every step end, or the first and the last kKeptStepEnds / 2 when there are more.
  std::vector<StepEnd> step_ends;
  std::vector<GrowingRange> growing;  // most bytes per step first
};

struct MemorySummary {
  MemoryLevel level = MemoryLevel::kAllocated;
  MemoryCounts counts;              // of the analysed level
  uint64_t other_level_events = 0;  // alloc/free events of the level not analysed
  uint64_t maps = 0;                // kMap/kUnmap: VMM mappings, not memory by themselves
  uint64_t unmaps = 0;
  uint64_t counters = 0;
  uint64_t live_at_end_bytes = 0;
  uint64_t live_at_end_allocations = 0;
};

struct Analysis {
  TraceSummary trace;
  MemorySummary memory;
  PeakReport peak;
  std::vector<WaveReport> waves;
  std::vector<TimelinePoint> timeline;
  std::vector<std::string> warnings;  // internal inconsistencies, never expected
  // Where CUPTI's deferred events were placed; null when the trace has none.
  // Every later pass over the same trace reads through it (read_placed) so
  // that its events and ordinals are the ones analysed here.
  std::shared_ptr<const DeferredPlacement> placement;
  DeviceUsage device;  // device samples and CUPTI (present only when the trace has them)
  StepGrowth growth;   // live memory at each optimizer step's end, and what grows
};

// Throws TraceError when the file is not a readable trace. A truncated or
// corrupt tail is not an error: the analysis covers what was read before it.
Analysis analyze_trace(const std::string& path, const AnalysisOptions& options = {});

// What a reader of `path` must be told when it was not read whole: "P is
// truncated (REASON); VERB the N events before that" (or "P has a gap
// (REASON); VERB the N events around it"); empty when it was.
std::string incomplete_read_note(const std::string& path, const ReadStatus& status, const char* verb);

}  // namespace psc
