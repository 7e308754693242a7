#include "analysis/device_usage_report.h"

#include <fmt/format.h>

#include <map>

#include "analysis/report_text.h"

namespace psc {
namespace {

using json = nlohmann::ordered_json;

constexpr size_t kKernelsShown = 6;     // per range in the text form
constexpr size_t kResourcesShown = 32;  // streams and named resources in the text form

// A device is named by its ordinal; other resources by their handle's value.
std::string handle_text(const NamedResource& r) {
  return r.kind == "device" ? fmt::format("{}", r.device_ordinal()) : fmt::format("{:#x}", r.handle);
}
json handle_json(const NamedResource& r) { return r.kind == "device" ? json(r.device_ordinal()) : json(r.handle); }

json streams_to_json(const std::vector<CuptiStream>& streams) {
  json out = json::array();
  for (const CuptiStream& s : streams)
    out.push_back({{"stream", s.handle},
                   {"stream_id", s.stream_id},
                   {"context_id", s.context_id},
                   {"device", s.device},
                   {"destroyed", s.destroyed},
                   {"name", s.name.empty() ? json(nullptr) : json(s.name)}});
  return out;
}

json named_resources_to_json(const std::vector<NamedResource>& named) {
  json out = json::array();
  for (const NamedResource& r : named)
    out.push_back({{"kind", r.kind},
                   {"api", r.api},
                   {"handle", handle_json(r)},
                   {"name", r.name},
                   {"times_named", r.times_named},
                   {"cupti_stream", r.cupti_stream}});
  return out;
}

void render_resources(const DeviceUsage& d, std::string& out) {
  if (!d.cupti_streams.empty()) {
    out += "\nstreams (CUPTI; name = the last NVTX name of the handle)\n";
    for (size_t i = 0; i < d.cupti_streams.size() && i < kResourcesShown; ++i) {
      const CuptiStream& s = d.cupti_streams[i];
      out += fmt::format("  stream {:#x}  id {}  context {}  device {}{}  {}\n", s.handle, s.stream_id, s.context_id,
                         s.device, s.destroyed ? "  destroyed" : "", s.name.empty() ? "(unnamed)" : s.name);
    }
    if (d.cupti_streams.size() > kResourcesShown)
      out += fmt::format("  ... {} more\n", d.cupti_streams.size() - kResourcesShown);
  }
  if (!d.named_resources.empty()) {
    out += "\nnamed resources (NVTX; api cuda = nvtxNameCu*, cudart = nvtxNameCuda*)\n";
    for (size_t i = 0; i < d.named_resources.size() && i < kResourcesShown; ++i) {
      const NamedResource& r = d.named_resources[i];
      out += fmt::format("  {:<8} {:<7} {:<18} {}{}\n", r.kind, r.api, handle_text(r), r.name,
                         r.cupti_stream ? "  (CUPTI stream)" : "");
    }
    if (d.named_resources.size() > kResourcesShown)
      out += fmt::format("  ... {} more\n", d.named_resources.size() - kResourcesShown);
  }
}

json sample_to_json(const std::optional<DeviceSample>& s) {
  if (!s) return json(nullptr);
  return {{"seq", s->seq},
          {"time_ns", s->time_ns},
          {"device", s->device},
          {"used_bytes", s->used_bytes},
          {"accounted_bytes", s->accounted_bytes},
          {"pool_slack_bytes", s->pool_slack_bytes},
          {"outside_bytes", s->outside_bytes()},
          {"cupti_only_bytes", s->cupti_only_bytes},
          {"unexplained_bytes", s->unexplained_bytes()},
          {"wave", s->wave >= 0 ? json(s->wave) : json(nullptr)},
          {"range", s->range}};
}

json sources_to_json(const std::vector<SourceBytes>& rows, bool with_live) {
  json out = json::array();
  for (const SourceBytes& r : rows) {
    json row = {{"source", r.source}, {"allocations", r.allocations}, {"bytes", r.bytes}};
    if (with_live) {
      row["live_at_end_bytes"] = r.live_at_end_bytes;
      row["max_live_bytes"] = r.max_live_bytes;
    }
    out.push_back(std::move(row));
  }
  return out;
}

// CUPTI-only bytes live at a snapshot, by source, from its groups.
std::map<std::string, uint64_t> cupti_at(const LiveBreakdown& live) {
  std::map<std::string, uint64_t> out;
  for (const LiveGroup& g : live.groups)
    if (g.cupti_only) out[g.source] += g.bytes;
  return out;
}

json cupti_at_json(const LiveBreakdown& live) {
  json out = json::array();
  for (const auto& [source, bytes] : cupti_at(live)) out.push_back({{"source", source}, {"bytes", bytes}});
  return out;
}

json first_kernels_to_json(const FirstKernels& fk) {
  json ranges = json::array();
  for (const FirstKernelRange& r : fk.by_range)
    ranges.push_back({{"range", r.range}, {"count", r.count}, {"kernels", r.kernels}});
  return {{"count", fk.count},
          {"first_time_ns", fk.count ? json(fk.first_time_ns) : json(nullptr)},
          {"last_time_ns", fk.count ? json(fk.last_time_ns) : json(nullptr)},
          {"by_range", ranges}};
}

json window_to_json(const WaveDeviceWindow& w) {
  return {{"device", w.device},
          {"samples", w.samples},
          {"baseline", sample_to_json(w.baseline)},
          {"max_used", sample_to_json(w.max_used)},
          {"max_outside_bytes", w.max_outside_bytes},
          {"max_unexplained_bytes", w.max_unexplained_bytes},
          {"outside_growth_bytes", w.outside_growth_bytes},
          {"unexplained_growth_bytes", w.unexplained_growth_bytes}};
}

json cold_warm_to_json(const ColdWarmDelta& d) {
  json sources = json::array();
  for (const ColdWarmDelta::Source& s : d.cupti_only_by_source)
    sources.push_back({{"source", s.source},
                       {"cold_bytes", s.cold_bytes},
                       {"warm_bytes", s.warm_bytes},
                       {"delta_bytes", s.delta_bytes()}});
  return {{"cold_wave", d.cold_wave},
          {"warm_wave", d.warm_wave},
          {"has_samples", d.has_samples},
          {"outside_growth_delta_bytes", d.outside_growth_delta_bytes},
          {"unexplained_growth_delta_bytes", d.unexplained_growth_delta_bytes},
          {"outside_at_max_used_delta_bytes", d.outside_at_max_used_delta_bytes},
          {"cupti_only_delta_bytes", d.cupti_only_delta_bytes},
          {"cupti_only_by_source", sources},
          {"cold_first_kernels", d.cold_first_kernels},
          {"warm_first_kernels", d.warm_first_kernels}};
}

std::string signed_bytes(int64_t v) {
  return v < 0 ? "-" + format_bytes(static_cast<uint64_t>(-v)) : format_bytes(static_cast<uint64_t>(v));
}

std::string source_text(const std::string& source) { return source.empty() ? "(unnamed)" : source; }

std::string sample_text(const DeviceSample& s, uint64_t first_ns) {
  const double at = s.time_ns >= first_ns ? static_cast<double>(s.time_ns - first_ns) / 1e9 : 0.0;
  return fmt::format("+{:.6f} s  device {}  used {}  accounted {}  outside {}  cupti-only {}  in {}", at, s.device,
                     format_bytes(s.used_bytes), format_bytes(s.accounted_bytes), signed_bytes(s.outside_bytes()),
                     format_bytes(s.cupti_only_bytes), s.range.empty() ? "(no range)" : s.range);
}

void render_first_kernels(const FirstKernels& fk, const char* indent, std::string& out) {
  for (const FirstKernelRange& r : fk.by_range) {
    std::string names;
    for (size_t i = 0; i < r.kernels.size() && i < kKernelsShown; ++i) names += (i ? ", " : "") + r.kernels[i];
    if (r.kernels.size() > kKernelsShown) names += fmt::format(", ... {} more", r.kernels.size() - kKernelsShown);
    out += fmt::format("{}{:>6}  {}: {}\n", indent, r.count, r.range.empty() ? "(no range)" : r.range, names);
  }
}

void render_overview(const Analysis& a, std::string& out) {
  const DeviceUsage& d = a.device;
  out += fmt::format("\ndevice (samples of device_used_bytes; accounted = hooked allocations, {} level)\n",
                     memory_level_name(d.accounted_level));
  for (const std::string& notice : d.unavailable)
    out += fmt::format("  NOTE     CUPTI was not available: {}; recorded through the hooks only\n", notice);
  for (const DeviceInfo& info : d.devices)
    out += fmt::format("  device {}: total {}, {} samples, max used {}, max outside any allocator {}\n", info.device,
                       info.total_bytes ? format_bytes(info.total_bytes) : "-", grouped(info.samples),
                       format_bytes(info.max_used_bytes), signed_bytes(info.max_outside_bytes));
  if (d.devices.empty()) out += "  no device_used_bytes samples\n";
  const PlacementCounts& c = d.placement;
  if (c.cupti_allocs > 0 || c.cupti_frees > 0)
    out += fmt::format(
        "  CUPTI: {} allocation records: {} also hooked (counted once), {} CUPTI-only ({}), {} conflicting, "
        "{} unpaired frees\n",
        grouped(c.cupti_allocs), grouped(c.deduplicated), grouped(c.cupti_only), format_bytes(c.cupti_only_bytes),
        grouped(c.conflicting), grouped(c.unpaired_frees));
  if (d.modules_loaded || d.modules_unloaded || d.contexts || d.streams)
    out += fmt::format("  CUPTI: {} modules loaded ({}), {} unloaded, {} contexts, {} streams\n",
                       grouped(d.modules_loaded), format_bytes(d.module_bytes_loaded), grouped(d.modules_unloaded),
                       grouped(d.contexts), grouped(d.streams));
  if (!d.cupti_only_by_source.empty()) {
    out += "\nCUPTI-only allocations (outside any hooked allocator) by source\n";
    out += fmt::format("  {:<32} {:>8} {:>12} {:>12} {:>12}\n", "source", "allocs", "allocated", "max live",
                       "live at end");
    for (const SourceBytes& r : d.cupti_only_by_source)
      out += fmt::format("  {:<32} {:>8} {:>12} {:>12} {:>12}\n", source_text(r.source), grouped(r.allocations),
                         format_bytes(r.bytes), format_bytes(r.max_live_bytes), format_bytes(r.live_at_end_bytes));
    const auto at_peak = cupti_at(a.peak.live);
    for (const auto& [source, bytes] : at_peak)
      out += fmt::format("  live at the peak: {} from {}\n", format_bytes(bytes), source_text(source));
  }
  if (d.before_peak || d.after_peak) {
    out += "\ndevice around the peak\n";
    if (d.before_peak) out += "  before " + sample_text(*d.before_peak, a.trace.first_time_ns) + "\n";
    if (d.after_peak) out += "  after  " + sample_text(*d.after_peak, a.trace.first_time_ns) + "\n";
  }
}

void render_waves(const Analysis& a, std::string& out) {
  const DeviceUsage& d = a.device;
  bool any = false;
  for (const WaveDeviceUsage& w : d.waves) any |= !w.devices.empty() || w.cupti_only_bytes || w.first_kernels.count;
  if (!any) return;
  out += "\ndevice per wave (at the wave's sample with the most used bytes; growth = max - baseline sample)\n";
  out += fmt::format("  {:>4} {:>3} {:>7} {:>12} {:>12} {:>12} {:>12} {:>14} {:>14} {:>12} {:>7}\n", "wave", "dev",
                     "samples", "baseline", "max used", "accounted", "outside", "outside grow", "unexpl. grow",
                     "cupti-only", "kernels");
  for (const WaveDeviceUsage& w : d.waves) {
    if (w.devices.empty()) {
      if (w.cupti_only_bytes || w.first_kernels.count)
        out += fmt::format("  {:>4} {:>3} {:>7} {:>12} {:>12} {:>12} {:>12} {:>14} {:>14} {:>12} {:>7}\n", w.wave, "-",
                           0, "-", "-", "-", "-", "-", "-", format_bytes(w.cupti_only_bytes), w.first_kernels.count);
      continue;
    }
    for (const WaveDeviceWindow& win : w.devices)
      out += fmt::format("  {:>4} {:>3} {:>7} {:>12} {:>12} {:>12} {:>12} {:>14} {:>14} {:>12} {:>7}\n", w.wave,
                         win.device, win.samples, format_bytes(win.baseline.used_bytes),
                         format_bytes(win.max_used.used_bytes), format_bytes(win.max_used.accounted_bytes),
                         signed_bytes(win.max_used.outside_bytes()), signed_bytes(win.outside_growth_bytes),
                         signed_bytes(win.unexplained_growth_bytes), format_bytes(w.cupti_only_bytes),
                         w.first_kernels.count);
  }
  for (const WaveDeviceUsage& w : d.waves) {
    if (w.cupti_only_by_source.empty() && w.first_kernels.count == 0) continue;
    out += fmt::format("\nwave {}:", w.wave);
    for (const SourceBytes& r : w.cupti_only_by_source)
      out += fmt::format(" CUPTI-only {} from {} ({} allocs);", format_bytes(r.bytes), source_text(r.source),
                         grouped(r.allocations));
    out += fmt::format(" {} first kernel executions\n", grouped(w.first_kernels.count));
    render_first_kernels(w.first_kernels, "  ", out);
  }
  if (d.first_kernels.count > 0) {
    uint64_t in_waves = 0;
    for (const WaveDeviceUsage& w : d.waves) in_waves += w.first_kernels.count;
    if (in_waves < d.first_kernels.count)
      out += fmt::format("\nfirst kernel executions outside any wave: {}\n", grouped(d.first_kernels.count - in_waves));
  }
}

void render_cold_warm(const Analysis& a, std::string& out) {
  const DeviceUsage& d = a.device;
  if (d.cold_warm.empty()) return;
  out += "\ncold - warm (waves of the same shape; device growth, CUPTI-only bytes made, first kernels)\n";
  out += fmt::format("  {:>4} {:>4} {:>14} {:>14} {:>14} {:>14}\n", "cold", "warm", "outside grow", "unexpl. grow",
                     "cupti-only", "kernels c/w");
  for (const ColdWarmDelta& c : d.cold_warm) {
    out += fmt::format("  {:>4} {:>4} {:>14} {:>14} {:>14} {:>14}\n", c.cold_wave, c.warm_wave,
                       c.has_samples ? signed_bytes(c.outside_growth_delta_bytes) : "-",
                       c.has_samples ? signed_bytes(c.unexplained_growth_delta_bytes) : "-",
                       signed_bytes(c.cupti_only_delta_bytes),
                       fmt::format("{}/{}", c.cold_first_kernels, c.warm_first_kernels));
    for (const ColdWarmDelta::Source& s : c.cupti_only_by_source)
      if (s.delta_bytes() != 0)
        out += fmt::format("             {} {} (cold {}, warm {})\n", source_text(s.source),
                           signed_bytes(s.delta_bytes()), format_bytes(s.cold_bytes), format_bytes(s.warm_bytes));
  }
}

}  // namespace

json device_usage_to_json(const Analysis& a) {
  const DeviceUsage& d = a.device;
  json devices = json::array();
  for (const DeviceInfo& info : d.devices)
    devices.push_back({{"device", info.device},
                       {"total_bytes", info.total_bytes ? json(info.total_bytes) : json(nullptr)},
                       {"samples", info.samples},
                       {"max_used_bytes", info.max_used_bytes},
                       {"max_outside_bytes", info.max_outside_bytes}});
  const PlacementCounts& c = d.placement;
  json cupti = {{"unavailable", d.unavailable},
                {"allocation_records", c.cupti_allocs},
                {"free_records", c.cupti_frees},
                {"deduplicated", c.deduplicated},
                {"conflicting", c.conflicting},
                {"cupti_only", c.cupti_only},
                {"cupti_only_bytes", c.cupti_only_bytes},
                {"unpaired_frees", c.unpaired_frees},
                {"deferred_events", c.deferred_events},
                {"withheld_events", c.withheld},
                {"modules_loaded", d.modules_loaded},
                {"modules_unloaded", d.modules_unloaded},
                {"module_bytes_loaded", d.module_bytes_loaded},
                {"contexts", d.contexts},
                {"streams", d.streams}};
  json waves = json::array();
  for (const WaveDeviceUsage& w : d.waves) {
    json windows = json::array();
    for (const WaveDeviceWindow& win : w.devices) windows.push_back(window_to_json(win));
    const size_t i = static_cast<size_t>(w.wave);
    waves.push_back({{"index", w.wave},
                     {"devices", windows},
                     {"cupti_only_allocations", w.cupti_only_allocations},
                     {"cupti_only_bytes", w.cupti_only_bytes},
                     {"cupti_only_by_source", sources_to_json(w.cupti_only_by_source, false)},
                     {"cupti_only_at_peak", i < a.waves.size() ? cupti_at_json(a.waves[i].peak.live) : json::array()},
                     {"first_kernels", first_kernels_to_json(w.first_kernels)}});
  }
  json pools = json::array();
  for (const PoolCounter& p : d.pools)
    pools.push_back(
        {{"name", p.name}, {"samples", p.samples}, {"max_bytes", p.max_bytes}, {"last_bytes", p.last_bytes}});
  json cold_warm = json::array();
  for (const ColdWarmDelta& cw : d.cold_warm) cold_warm.push_back(cold_warm_to_json(cw));
  return {{"accounted_level", memory_level_name(d.accounted_level)},
          {"samples", d.samples},
          {"devices", devices},
          {"cupti", cupti},
          {"cupti_only_by_source", sources_to_json(d.cupti_only_by_source, true)},
          {"cupti_only_at_peak", cupti_at_json(a.peak.live)},
          {"before_peak", sample_to_json(d.before_peak)},
          {"after_peak", sample_to_json(d.after_peak)},
          {"waves", waves},
          {"first_kernels", first_kernels_to_json(d.first_kernels)},
          {"pools", pools},
          {"cupti_streams", streams_to_json(d.cupti_streams)},
          {"named_resources", named_resources_to_json(d.named_resources)},
          {"cold_minus_warm", cold_warm}};
}

void render_device_usage_text(const Analysis& a, std::string& out) {
  if (!a.device.present) return;
  render_overview(a, out);
  render_resources(a.device, out);
  render_waves(a, out);
  render_cold_warm(a, out);
}

}  // namespace psc
