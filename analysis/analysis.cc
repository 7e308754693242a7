#include "analysis/analysis.h"

#include <fmt/format.h>

#include <algorithm>

#include "analysis/breakdowns.h"
#include "analysis/lifetime_pass.h"
#include "analysis/peak_pass.h"
#include "analysis/step_growth.h"
#include "common/progress.h"
#include "traces/follower.h"

namespace psc {
namespace {

PeakSite site_of(const PeakPoint& p, const TraceMeta& meta, const RangeParser& parser) {
  PeakSite site;
  site.reached = p.reached;
  site.seq = p.seq;
  site.ordinal = p.ordinal;
  site.time_ns = p.time_ns;
  site.thread = p.thread;
  if (p.reached) {
    if (p.thread < meta.threads.size()) site.thread_name = meta.threads[p.thread].name;
    site.range = std::string(meta.string(p.range));
    site.parsed = parser.parse(site.range);
  }
  return site;
}

// Hands every batch to the attribution pass and, when there is one, to the
// device pass: one read of the file for both.
class TeeVisitor : public TraceVisitor {
 public:
  TeeVisitor(TraceVisitor& first, TraceVisitor* second) : first_(first), second_(second) {}
  void on_begin(const TraceMeta& meta) override {
    first_.on_begin(meta);
    if (second_) second_->on_begin(meta);
  }
  void on_events(const Event* events, size_t count, const TraceMeta& meta) override {
    first_.on_events(events, count, meta);
    if (second_) second_->on_events(events, count, meta);
  }
  void on_end(const TraceMeta& meta, const ReadStatus& status) override {
    first_.on_end(meta, status);
    if (second_) second_->on_end(meta, status);
  }

 private:
  TraceVisitor& first_;
  TraceVisitor* second_;
};

// Tells the command's progress reporter (common/progress.h) about each batch.
class ProgressVisitor : public TraceVisitor {
 public:
  explicit ProgressVisitor(TraceVisitor& inner) : inner_(inner) {}
  void on_begin(const TraceMeta& meta) override { inner_.on_begin(meta); }
  void on_events(const Event* events, size_t count, const TraceMeta& meta) override {
    inner_.on_events(events, count, meta);
    progress_advance(count);
  }
  void on_end(const TraceMeta& meta, const ReadStatus& status) override { inner_.on_end(meta, status); }

 private:
  TraceVisitor& inner_;
};

// Both passes describe the same events, so every snapshot's breakdown must add
// up to the live bytes pass 1 measured there. Say so if it does not.
void check_sum(const char* what, uint64_t expected, const LiveBreakdown& live, std::vector<std::string>* warnings) {
  if (live.bytes == expected) return;
  warnings->push_back(
      fmt::format("{}: live allocations add up to {} bytes but {} were measured", what, live.bytes, expected));
}

// What the first read leaves: the pass that scanned the trace (again, with
// its deferred events placed, when it has some) and whether it has device
// samples.
struct FirstRead {
  std::unique_ptr<PeakPass> scan;
  bool device_samples = false;
};

// Reads the trace placed (again), as the first read.
std::unique_ptr<PeakPass> scan_placed(const std::string& path, const RangeParser& parser, PeakPass::Mode mode,
                                      const Analysis& analysis, const std::string& stage, uint64_t events) {
  auto scan = std::make_unique<PeakPass>(parser, mode);
  if (analysis.placement) scan->count_withheld(analysis.placement->counts.withheld);
  progress_stage(stage, events);
  ProgressVisitor visitor(*scan);
  read_placed(path, analysis.placement.get(), visitor);
  return scan;
}

// A trace without deferred events is scanned once, as it always was; one
// with them is scanned again with the events placed by time.
FirstRead first_read(const std::string& path, const RangeParser& parser, PeakPass::Mode mode, Analysis* analysis) {
  FirstRead read;
  read.scan = std::make_unique<PeakPass>(parser, mode);
  DeferredCollector collector(read.scan.get());
  progress_stage("reading " + path + " (1 of 2)", 0);
  ProgressVisitor first(collector);
  read_trace(path, first);
  if (collector.found()) {
    analysis->placement =
        build_placement(path, std::move(collector.deferred()), collector.strings(), collector.events());
    read.scan = scan_placed(path, parser, mode, *analysis, "placing deferred events of " + path, collector.events());
  }
  read.device_samples = collector.device_samples();
  return read;
}

// The peaks, whichever read found them.
void add_peaks(const PeakPass& scan, const PeakTracker& measured, const RangeParser& parser, Analysis* analysis) {
  const TraceMeta& meta = scan.meta();
  analysis->peak.bytes = measured.peak.bytes;
  analysis->peak.site = site_of(measured.peak, meta, parser);
  analysis->waves.clear();
  for (size_t i = 0; i < measured.waves.size(); ++i) {
    const PeakTracker::Wave& w = measured.waves[i];
    WaveReport report;
    report.span = scan.waves()[i];
    report.baseline_bytes = w.baseline_bytes;
    report.peak.bytes = w.peak.bytes;
    report.peak.site = site_of(w.peak, meta, parser);
    analysis->waves.push_back(std::move(report));
  }
}

// The snapshots the breakdowns take: the peak, then each wave's; known
// (`measured`), or found by the second read.
BreakdownInputs breakdown_inputs(const Analysis& analysis, const PeakTracker* measured, const PeakPass& scan,
                                 const AnalysisOptions& options, const Classifier& classifier) {
  BreakdownInputs inputs;
  inputs.first_time_ns = analysis.trace.first_time_ns;
  inputs.last_time_ns = analysis.trace.last_time_ns;
  inputs.timeline_points = options.timeline_points;
  if (!measured) {
    inputs.found_snapshots = 1 + scan.waves().size();
    inputs.classifier = &classifier;
    return inputs;
  }
  inputs.snapshot_ordinals.push_back(measured->peak.ordinal);
  for (const PeakTracker::Wave& w : measured->waves) inputs.snapshot_ordinals.push_back(w.peak.ordinal);
  return inputs;
}

// The device pass, for a trace with CUPTI events, counters or marks; none
// for others. Its peak is set after the second read when that read finds it.
std::unique_ptr<DeviceUsagePass> device_pass(const Analysis& analysis, const PeakPass& scan,
                                             const PeakTracker* measured, bool device_samples,
                                             const RangeParser& parser) {
  const auto& by_kind = analysis.trace.events_by_kind;
  const bool has_counters = by_kind[static_cast<size_t>(EventKind::kCounter)] > 0;
  const bool has_marks = by_kind[static_cast<size_t>(EventKind::kMark)] > 0;
  if (!analysis.placement && !has_counters && !has_marks) return nullptr;
  DeviceUsagePass::Inputs device_inputs;
  device_inputs.ranges = &parser;
  // Per-device live bytes are only needed next to device samples or CUPTI.
  device_inputs.replay_memory = analysis.placement || device_samples;
  device_inputs.event_limit = scan.events();
  if (measured) device_inputs.peak_ordinal = measured->peak.reached ? measured->peak.ordinal : UINT64_MAX;
  device_inputs.waves = scan.waves().size();
  return std::make_unique<DeviceUsagePass>(device_inputs);
}

// The second read's breakdowns at the peak and at each wave's peak, checked
// against the bytes measured there.
void add_snapshots(const std::vector<LiveBreakdown>& snapshots, const PeakTracker& measured, Analysis* analysis) {
  analysis->peak.live = snapshots[0];
  check_sum("peak", measured.peak.bytes, analysis->peak.live, &analysis->warnings);
  for (size_t i = 0; i < analysis->waves.size(); ++i) {
    analysis->waves[i].peak.live = snapshots[i + 1];
    check_sum(fmt::format("wave {} peak", i).c_str(), analysis->waves[i].peak.bytes, analysis->waves[i].peak.live,
              &analysis->warnings);
  }
}

void add_device_usage(DeviceUsagePass& device, const PeakPass& scan, Analysis* analysis) {
  analysis->device = device.result(scan.waves());
  if (analysis->placement) analysis->device.placement = analysis->placement->counts;
  analysis->device.present = analysis->device.present || analysis->placement != nullptr;
  pair_cold_warm(scan.waves(), &analysis->device);
}

// Whether the first read only scans (the second finds the peaks): unless an
// observer needs the peaks before the second read.
bool peaks_found_second(const AnalysisOptions& options) {
  return std::none_of(options.observers.begin(), options.observers.end(),
                      [](const LifetimeObserver* o) { return o->needs_peaks(); });
}

// The first read, and what it tells of the trace. A scan-only read is done
// again with the replay when the trace had a hole in its string table (then
// the second read's range names depend on when they are looked up, and the
// snapshots' classification is only exact where the first read found them).
FirstRead read_first(const std::string& path, const RangeParser& parser, const AnalysisOptions& options,
                     Analysis* analysis) {
  const PeakPass::Mode mode = peaks_found_second(options) ? PeakPass::Mode::kScan : PeakPass::Mode::kReplay;
  FirstRead read = first_read(path, parser, mode, analysis);
  if (mode == PeakPass::Mode::kScan && read.scan->saw_string_hole())
    read.scan = scan_placed(path, parser, PeakPass::Mode::kReplay, *analysis, "reading " + path + " (1 of 2)",
                            read.scan->events());
  PeakPass& scan = *read.scan;
  const MemoryLevel level = scan.chosen_level();
  if (scan.replays())
    scan.fill_summary(&analysis->trace, &analysis->memory, level);
  else
    scan.fill_trace(&analysis->trace);
  // Asked of the OS once per analysis (a live view's snapshots do not).
  analysis->trace.being_written =
      !analysis->trace.clean_end && writer_state(analysis->trace.header) == WriterState::kRunning;
  if (scan.replays()) {
    add_peaks(scan, scan.level(level), parser, analysis);
  } else {
    // The observers start from the waves' spans; the peaks come with the second read.
    for (const WaveSpan& span : scan.waves()) analysis->waves.push_back(WaveReport{span, 0, {}});
  }
  return read;
}

// What the second read found, when it found the peaks: the memory summary
// and the peaks.
void add_second_read(const PeakPass& scan, const LifetimePass& lifetimes, const PeakTracker& peaks,
                     const RangeParser& parser, Analysis* analysis) {
  const MemoryLevel level = scan.chosen_level();
  scan.fill_memory(&analysis->memory, level, lifetimes.counts(), lifetimes.other_counts());
  analysis->memory.live_at_end_bytes = lifetimes.live_at_end_bytes();
  analysis->memory.live_at_end_allocations = lifetimes.live_at_end_allocations();
  add_peaks(scan, peaks, parser, analysis);
}

}  // namespace

std::string incomplete_read_note(const std::string& path, const ReadStatus& status, const char* verb) {
  if (status.complete()) return {};
  if (status.state == ReadStatus::State::kGap)
    return fmt::format("{} has a gap ({}); {} the {} events around it", path, status.reason, verb, status.events);
  return fmt::format("{} is {} ({}); {} the {} events before that", path,
                     status.state == ReadStatus::State::kTruncated ? "truncated" : "corrupt", status.reason, verb,
                     status.events);
}

Analysis analyze_trace(const std::string& path, const AnalysisOptions& options) {
  const RangeParser& parser = options.ranges ? *options.ranges : default_range_parser();
  const Classifier& classifier = options.classifier ? *options.classifier : default_classifier();

  Analysis analysis;
  const FirstRead read = read_first(path, parser, options, &analysis);
  PeakPass& scan = *read.scan;
  const MemoryLevel level = scan.chosen_level();
  // The peaks: the first read's, or (a scan-only first read) found by the second.
  PeakTracker found;
  const PeakTracker& measured = scan.replays() ? static_cast<const PeakTracker&>(scan.level(level)) : found;
  const PeakTracker* known = scan.replays() ? &measured : nullptr;

  SnapshotBreakdowns attribute(breakdown_inputs(analysis, known, scan, options, classifier));
  StepGrowthObserver growth(parser);
  std::vector<LifetimeObserver*> observers{&attribute};
  // Growth across optimizer steps costs a table update per memory event: only
  // when the first read saw a step range.
  if (scan.saw_step_range()) observers.push_back(&growth);
  observers.insert(observers.end(), options.observers.begin(), options.observers.end());
  for (LifetimeObserver* o : observers) o->on_start(analysis);
  LifetimePass::Inputs pass_inputs;
  pass_inputs.ranges = &parser;
  pass_inputs.classifier = &classifier;
  pass_inputs.level = level;
  pass_inputs.event_limit = scan.events();
  pass_inputs.waves = &scan.waves();
  if (!known) pass_inputs.peaks = &found;
  LifetimePass lifetimes(pass_inputs, observers);
  const std::unique_ptr<DeviceUsagePass> device = device_pass(analysis, scan, known, read.device_samples, parser);
  TeeVisitor both(lifetimes, device.get());
  progress_stage("reading " + path + " (2 of 2)", scan.events());
  ProgressVisitor second(both);
  read_placed(path, analysis.placement.get(), second);
  progress_done();

  if (!known) {
    add_second_read(scan, lifetimes, found, parser, &analysis);
    if (device) device->set_peak_ordinal(found.peak.reached ? found.peak.ordinal : UINT64_MAX);
  }
  add_snapshots(attribute.snapshots(), measured, &analysis);
  analysis.timeline = attribute.timeline();
  analysis.growth = growth.result();
  if (device) add_device_usage(*device, scan, &analysis);
  return analysis;
}

}  // namespace psc
