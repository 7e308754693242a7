#include "estimator/analysis.h"

#include <fmt/format.h>

#include "estimator/analysis_attribute.h"
#include "estimator/analysis_scan.h"

namespace psc {
namespace {

PeakSite site_of(const PeakPoint& p, const TraceMeta& meta, const RangeParser& parser) {
  PeakSite site;
  site.reached = p.reached;
  site.seq = p.seq;
  site.time_ns = p.time_ns;
  site.thread = p.thread;
  if (p.reached) {
    if (p.thread < meta.threads.size()) site.thread_name = meta.threads[p.thread].name;
    site.range = std::string(meta.string(p.range));
    site.parsed = parser.parse(site.range);
  }
  return site;
}

// Both passes describe the same events, so every snapshot's breakdown must add
// up to the live bytes pass 1 measured there. Say so if it does not.
void check_sum(const char* what, uint64_t expected, const LiveBreakdown& live, std::vector<std::string>* warnings) {
  if (live.bytes == expected) return;
  warnings->push_back(
      fmt::format("{}: live allocations add up to {} bytes but {} were measured", what, live.bytes, expected));
}

}  // namespace

Analysis analyze_trace(const std::string& path, const AnalysisOptions& options) {
  const RangeParser& parser = options.ranges ? *options.ranges : default_range_parser();
  const Classifier& classifier = options.classifier ? *options.classifier : default_classifier();

  ScanPass scan(parser);
  read_trace(path, scan);

  Analysis analysis;
  const MemoryLevel level = scan.chosen_level();
  scan.fill_summary(&analysis.trace, &analysis.memory, level);
  const LevelScan& measured = scan.level(level);

  AttributionInputs inputs;
  inputs.ranges = &parser;
  inputs.classifier = &classifier;
  inputs.level = level;
  inputs.event_limit = scan.events();
  inputs.waves = &scan.waves();
  inputs.first_time_ns = analysis.trace.first_time_ns;
  inputs.last_time_ns = analysis.trace.last_time_ns;
  inputs.timeline_points = options.timeline_points;
  inputs.snapshot_ordinals.push_back(measured.peak.ordinal);
  for (const LevelScan::Wave& w : measured.waves) inputs.snapshot_ordinals.push_back(w.peak.ordinal);

  AttributionPass attribute(inputs);
  read_trace(path, attribute);
  const std::vector<LiveBreakdown>& snapshots = attribute.snapshots();

  const TraceMeta& meta = scan.meta();
  analysis.peak.bytes = measured.peak.bytes;
  analysis.peak.site = site_of(measured.peak, meta, parser);
  analysis.peak.live = snapshots[0];
  check_sum("peak", measured.peak.bytes, analysis.peak.live, &analysis.warnings);

  for (size_t i = 0; i < measured.waves.size(); ++i) {
    const LevelScan::Wave& w = measured.waves[i];
    WaveReport report;
    report.span = scan.waves()[i];
    report.baseline_bytes = w.baseline_bytes;
    report.peak.bytes = w.peak.bytes;
    report.peak.site = site_of(w.peak, meta, parser);
    report.peak.live = snapshots[i + 1];
    check_sum(fmt::format("wave {} peak", i).c_str(), w.peak.bytes, report.peak.live, &analysis.warnings);
    analysis.waves.push_back(std::move(report));
  }
  analysis.timeline = attribute.timeline();
  return analysis;
}

}  // namespace psc
