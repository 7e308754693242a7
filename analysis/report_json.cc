#include "analysis/report_json.h"

#include <cstring>

#include "analysis/device_usage_report.h"
#include "common/json_file.h"
#include "traces/reader.h"

namespace psc {
namespace {

using json = nlohmann::ordered_json;

json layer_or_null(int32_t layer) { return layer == kNoLayer ? json(nullptr) : json(layer); }

template <typename T>
json optional_or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json site_to_json(const PeakSite& site) {
  if (!site.reached) return json(nullptr);
  return {{"seq", site.seq},
          {"time_ns", site.time_ns},
          {"thread", site.thread},
          {"thread_name", site.thread_name},
          {"range", site.range},
          {"phase", phase_name(site.parsed.phase)},
          {"layer", layer_or_null(site.parsed.layer)}};
}

json trace_fields(const TraceSummary& t) {
  json by_kind = json::object();
  for (uint8_t k = 1; k <= kMaxEventKind; ++k)
    by_kind[event_kind_name(static_cast<EventKind>(k))] = t.events_by_kind[k];
  const size_t host_length = strnlen(t.header.hostname, sizeof t.header.hostname);
  return {{"path", t.path},
          {"status", read_state_name(t.status.state)},
          {"reason", t.status.reason},
          {"good_bytes", t.status.good_bytes},
          {"file_bytes", t.status.file_bytes},
          {"chunks", t.status.chunks},
          {"gaps", t.status.gaps},
          {"gap_bytes", t.status.gap_bytes},
          {"clean_end", t.clean_end},
          {"being_written", t.being_written},
          {"format_version", t.header.version},
          {"pid", t.header.pid},
          {"parent_pid", t.header.parent_pid},
          {"rank", t.header.rank},
          {"local_rank", t.header.local_rank},
          {"world_size", t.header.world_size},
          {"record_pid", t.header.record_pid},
          {"run_id",
           t.run.source ? json(std::string(t.run.run_id, strnlen(t.run.run_id, sizeof t.run.run_id))) : json(nullptr)},
          {"run_id_source", t.run.source ? json(format::run_id_source_name(t.run.source)) : json(nullptr)},
          {"start_realtime_ns", t.header.realtime_ns},
          {"start_monotonic_ns", t.header.monotonic_ns},
          {"hostname", std::string(t.header.hostname, host_length)},
          {"host_mode", (t.header.flags & format::kHeaderHostMode) != 0},
          {"command", t.command},
          {"threads", t.threads},
          {"first_time_ns", t.first_time_ns},
          {"last_time_ns", t.last_time_ns},
          {"events_by_kind", by_kind},
          {"unmatched_range_ends", t.unmatched_range_ends},
          {"first_seq", t.first_seq},
          {"last_seq", t.last_seq},
          {"missing_seqs", t.missing_seqs}};
}

json trace_to_json(const TraceSummary& t) {
  json out = trace_fields(t);
  // A path that is not UTF-8 loses bytes in "path" (U+FFFD): its exact bytes too.
  if (std::string bytes = path_bytes_hex(t.path); !bytes.empty()) out["path_bytes"] = bytes;
  return out;
}

json memory_to_json(const MemorySummary& m) {
  return {{"allocs", m.counts.allocs},
          {"frees", m.counts.frees},
          {"nested", m.counts.nested},
          {"failed", m.counts.failed},
          {"unmatched_frees", m.counts.unmatched_frees},
          {"replaced_allocations", m.counts.replaced},
          {"null_frees", m.counts.null_frees},
          {"allocated_bytes", m.counts.allocated_bytes},
          {"other_level_events", m.other_level_events},
          {"maps", m.maps},
          {"unmaps", m.unmaps},
          {"counters", m.counters},
          {"live_at_end_bytes", m.live_at_end_bytes},
          {"live_at_end_allocations", m.live_at_end_allocations}};
}

json groups_to_json(const std::vector<LiveGroup>& groups) {
  json out = json::array();
  for (const LiveGroup& g : groups) {
    json row = {{"range", g.range},
                {"layer", layer_or_null(g.layer)},
                {"category", category_name(g.category)},
                {"bytes", g.bytes},
                {"allocations", g.allocations}};
    // Only CUPTI-only groups carry these: reports of traces without CUPTI
    // stay as they were.
    if (g.cupti_only) {
      row["cupti_only"] = true;
      row["source"] = g.source;
    }
    out.push_back(std::move(row));
  }
  return out;
}

json categories_to_json(const LiveBreakdown& live) {
  json out = json::object();
  for (int c = 0; c < kCategoryCount; ++c) out[category_name(static_cast<Category>(c))] = live.category_bytes[c];
  return out;
}

json layers_to_json(const std::vector<LayerRow>& layers) {
  json out = json::array();
  for (const LayerRow& r : layers)
    out.push_back({{"layer", r.layer},
                   {"boundary_bytes", r.boundary_bytes},
                   {"adapter_gradient_bytes", r.adapter_gradient_bytes},
                   {"workspace_bytes", r.workspace_bytes},
                   {"other_bytes", r.other_bytes}});
  return out;
}

json payload_to_json(const WavePayload& p) {
  if (!p.present) return json(nullptr);
  json parsed = parse_json_payload(p.raw);
  return parsed.is_discarded() ? json(p.raw) : parsed;
}

json wave_to_json(const WaveReport& w) {
  const WaveSpan& s = w.span;
  return {{"index", s.index},
          {"tokens", optional_or_null(s.payload.tokens)},
          {"cold", optional_or_null(s.payload.cold)},
          {"groups", optional_or_null(s.payload.groups)},
          {"slots", s.payload.slots},
          {"payload", payload_to_json(s.payload)},
          {"payload_error", s.payload.error.empty() ? json(nullptr) : json(s.payload.error)},
          {"thread", s.thread},
          {"complete", s.ended},
          {"begin_seq", s.begin_seq},
          {"begin_time_ns", s.begin_time_ns},
          {"end_seq", s.ended ? json(s.end_seq) : json(nullptr)},
          {"end_time_ns", s.ended ? json(s.end_time_ns) : json(nullptr)},
          {"baseline_bytes", w.baseline_bytes},
          {"peak_bytes", w.peak.bytes},
          {"measured_peak_bytes", w.measured_peak_bytes()},
          {"peak_time_ns", w.peak.site.reached ? json(w.peak.site.time_ns) : json(nullptr)},
          {"peak_site", site_to_json(w.peak.site)},
          {"live_at_peak", groups_to_json(w.peak.live.groups)},
          {"live_at_peak_by_category", categories_to_json(w.peak.live)},
          {"layers_at_peak", layers_to_json(w.peak.live.layers)}};
}

json growth_to_json(const StepGrowth& g) {
  json steps = json::array();
  for (const StepEnd& s : g.step_ends)
    steps.push_back({{"step", s.step},
                     {"seq", s.seq},
                     {"time_ns", s.time_ns},
                     {"live_bytes", s.live_bytes},
                     {"live_allocations", s.live_allocations}});
  json growing = json::array();
  for (const GrowingRange& r : g.growing)
    growing.push_back({{"range", r.range},
                       {"layer", layer_or_null(r.layer)},
                       {"bytes_per_step", r.bytes_per_step()},
                       {"first_step", r.first_step},
                       {"first_bytes", r.first_bytes},
                       {"last_step", g.steps},
                       {"last_bytes", r.last_bytes},
                       {"allocations", r.allocations},
                       {"rising_steps", r.rising_steps}});
  return {{"step_count", g.steps}, {"window", g.window}, {"steps", steps}, {"growing", growing}};
}

}  // namespace

const char* read_state_name(ReadStatus::State state) {
  switch (state) {
    case ReadStatus::State::kComplete: return "complete";
    case ReadStatus::State::kGap: return "gap";
    case ReadStatus::State::kTruncated: return "truncated";
    case ReadStatus::State::kCorrupt: return "corrupt";
  }
  return "unknown";
}

json live_breakdown_to_json(const LiveBreakdown& live) {
  return {{"bytes", live.bytes},
          {"allocations", live.allocations},
          {"groups", groups_to_json(live.groups)},
          {"by_category", categories_to_json(live)},
          {"layers", layers_to_json(live.layers)}};
}

json analysis_to_json(const Analysis& a) {
  json drops = json::object();
  for (int r = 0; r < format::kDropReasonCount; ++r)
    drops[drop_reason_name(static_cast<format::DropReason>(r))] = a.trace.drops[static_cast<size_t>(r)];
  json waves = json::array();
  for (const WaveReport& w : a.waves) waves.push_back(wave_to_json(w));
  json timeline = json::array();
  for (const TimelinePoint& p : a.timeline)
    timeline.push_back({{"time_ns", p.time_ns}, {"live_bytes", p.live_bytes}, {"max_bytes", p.max_bytes}});

  json out = {{"events", a.trace.status.events},
              {"dropped", a.trace.dropped},
              {"drops", drops},
              {"late_events", a.trace.late_events},
              {"trace", trace_to_json(a.trace)},
              {"level", memory_level_name(a.memory.level)},
              {"memory", memory_to_json(a.memory)},
              {"unmatched_frees", a.memory.counts.unmatched_frees},
              {"peak_bytes", a.peak.bytes},
              {"peak_time_ns", a.peak.site.reached ? a.peak.site.time_ns : 0},
              {"peak_seq", a.peak.site.reached ? json(a.peak.site.seq) : json(nullptr)},
              {"peak_site", site_to_json(a.peak.site)},
              {"live_at_peak", groups_to_json(a.peak.live.groups)},
              {"live_at_peak_by_category", categories_to_json(a.peak.live)},
              {"layers_at_peak", layers_to_json(a.peak.live.layers)},
              {"waves", waves},
              {"timeline", timeline},
              {"warnings", a.warnings},
              {"growth", growth_to_json(a.growth)}};
  if (a.device.present) out["device"] = device_usage_to_json(a);
  return out;
}

}  // namespace psc
