#include "analysis/device_usage.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "analysis/pool_reserve.h"
#include "common/json_file.h"
#include "traces/device_address.h"

namespace psc {
namespace {

constexpr std::string_view kUsedCounter = "device_used_bytes";
constexpr std::string_view kTotalCounter = "device_total_bytes";
constexpr std::string_view kPoolPrefix = "cupti.pool_used_bytes:";
constexpr std::string_view kFirstKernel = "cupti.first_kernel";
constexpr std::string_view kModule = "cupti.module";
constexpr std::string_view kContext = "cupti.context";
constexpr std::string_view kStream = "cupti.stream";
constexpr std::string_view kResourceName = "nvtx.resource_name";
constexpr std::string_view kUnavailable = "cupti.unavailable";

// Devices are small ordinals; a hostile number must not size a table.
constexpr int kMaxDevices = 1024;
// Samples come at range boundaries: a few per layer and wave. Past this many
// the rest are counted but not kept.
constexpr size_t kMaxSamples = 1u << 20;

bool device_index(int16_t device, size_t* index) {
  if (device < -1 || device >= kMaxDevices) return false;
  *index = static_cast<size_t>(device + 1);
  return true;
}

struct Made {
  uint64_t allocations = 0;
  uint64_t bytes = 0;
  uint64_t live = 0;
  uint64_t max_live = 0;
};

std::vector<SourceBytes> source_rows(const std::map<std::string, Made>& by_source, bool with_live) {
  std::vector<SourceBytes> rows;
  for (const auto& [source, m] : by_source) {
    SourceBytes row{source, m.allocations, m.bytes, 0, 0};
    if (with_live) {
      row.live_at_end_bytes = m.live;
      row.max_live_bytes = m.max_live;
    }
    rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const SourceBytes& a, const SourceBytes& b) { return a.bytes > b.bytes; });
  return rows;
}

void add_first_kernel(FirstKernels* fk, uint64_t time_ns, const std::string& range, const std::string& kernel) {
  if (fk->count == 0) fk->first_time_ns = time_ns;
  ++fk->count;
  fk->first_time_ns = std::min(fk->first_time_ns, time_ns);
  fk->last_time_ns = std::max(fk->last_time_ns, time_ns);
  auto it = std::find_if(fk->by_range.begin(), fk->by_range.end(),
                         [&](const FirstKernelRange& r) { return r.range == range; });
  if (it == fk->by_range.end()) {
    fk->by_range.push_back(FirstKernelRange{range, 0, {}});
    it = std::prev(fk->by_range.end());
  }
  ++it->count;
  it->kernels.push_back(kernel);
}

}  // namespace

struct DeviceUsagePass::State {
  struct Sample {
    uint64_t ordinal;
    uint64_t seq;
    uint64_t time_ns;
    int16_t device;
    uint64_t used;
    uint64_t live[kMemoryLevelCount];
    uint64_t cupti_only;
    int32_t wave;
    StringId range;
    uint64_t pool_reserved = 0;
    uint64_t pool_live[kMemoryLevelCount] = {0, 0};
  };
  struct FirstKernel {
    uint64_t time_ns;
    int32_t wave;
    StringId range;
    std::string kernel;
  };
  struct CuptiLive {
    uint64_t bytes;
    StringId source;
  };
  using Key = DeviceAddress;
  using KeyHash = DeviceAddressHash;

  explicit State(const Inputs& in) : inputs(in), ranges(*in.ranges), scope(ranges) {}

  Inputs inputs;
  RangeTable ranges;
  ScopeTracker scope;
  uint64_t ordinal = 0;
  // Hooked allocations per level and device (index device + 1).
  std::vector<MemoryReplay> replays[kMemoryLevelCount];
  uint64_t hooked_allocs[kMemoryLevelCount] = {0, 0};
  std::unordered_map<Key, CuptiLive, KeyHash> cupti_live;
  std::vector<uint64_t> cupti_live_by_device;
  std::map<uint32_t, Made> cupti_by_source;                    // source id → totals
  std::map<std::pair<int32_t, uint32_t>, Made> cupti_by_wave;  // (wave, source id) → made
  std::vector<Sample> samples;
  uint64_t samples_seen = 0;
  std::map<int16_t, uint64_t> totals;
  std::vector<FirstKernel> first_kernels;
  uint64_t modules_loaded = 0, modules_unloaded = 0, module_bytes = 0, contexts = 0, streams = 0;
  std::map<uint32_t, PoolCounter> pools;
  PoolReserve pool_reserve;
  std::vector<std::string> unavailable;
  std::map<std::pair<uint64_t, uint64_t>, size_t> stream_index;  // (context id, stream id) → cupti_streams
  std::vector<CuptiStream> cupti_streams;
  std::map<std::tuple<std::string, std::string, uint64_t>, size_t> named_index;  // (kind, api, handle)
  std::vector<NamedResource> named;
  std::map<uint64_t, std::string> stream_names;  // handle → last name, either API
  bool cupti_marks = false;
  std::vector<std::string> strings;  // the final string table, kept at the end

  uint64_t live_on(MemoryLevel level, size_t index) const {
    const auto& r = replays[static_cast<int>(level)];
    return index < r.size() ? r[index].live_bytes() : 0;
  }

  void memory(const Event& e) {
    size_t index = 0;
    if (!device_index(e.device, &index)) return;
    if (e.api == Api::kCupti) {
      cupti_memory(e, index);
      return;
    }
    const int level = static_cast<int>(memory_level_of(e));
    auto& r = replays[level];
    if (r.size() <= index) r.resize(index + 1);
    const uint64_t before = r[index].live_bytes();
    if (r[index].apply(e, EventSite{ordinal, {}, -1}) == MemoryReplay::Effect::kAllocated) ++hooked_allocs[level];
    if (e.memory == MemoryKind::kPool)
      pool_reserve.moved(index, static_cast<MemoryLevel>(level),
                         static_cast<int64_t>(r[index].live_bytes()) - static_cast<int64_t>(before));
  }

  void cupti_memory(const Event& e, size_t index) {
    if (cupti_live_by_device.size() <= index) cupti_live_by_device.resize(index + 1, 0);
    const Key key{e.device, e.address};
    if (e.kind == EventKind::kAlloc) {
      if (auto it = cupti_live.find(key); it != cupti_live.end()) cupti_end(it, index);
      cupti_live[key] = CuptiLive{e.bytes, e.name};
      cupti_live_by_device[index] += e.bytes;
      Made& m = cupti_by_source[e.name.value];
      ++m.allocations;
      m.bytes += e.bytes;
      m.live += e.bytes;
      m.max_live = std::max(m.max_live, m.live);
      const int32_t wave = scope.current_wave();
      if (wave >= 0) {
        Made& w = cupti_by_wave[{wave, e.name.value}];
        ++w.allocations;
        w.bytes += e.bytes;
      }
      return;
    }
    if (auto it = cupti_live.find(key); it != cupti_live.end()) cupti_end(it, index);
  }

  void cupti_end(std::unordered_map<Key, CuptiLive, KeyHash>::iterator it, size_t index) {
    cupti_live_by_device[index] -= it->second.bytes;
    cupti_by_source[it->second.source.value].live -= it->second.bytes;
    cupti_live.erase(it);
  }

  void counter(const Event& e, const TraceMeta& meta) {
    const std::string_view name = meta.string(e.name);
    if (name == kUsedCounter) {
      ++samples_seen;
      if (samples.size() >= kMaxSamples) return;
      size_t index = 0;
      if (!device_index(e.device, &index)) return;
      Sample s{ordinal, e.seq, e.time_ns, e.device, e.bytes, {}, 0, scope.current_wave(), scope.attributed_range(e)};
      for (int l = 0; l < kMemoryLevelCount; ++l) {
        s.live[l] = live_on(static_cast<MemoryLevel>(l), index);
        s.pool_live[l] = pool_reserve.live(index, static_cast<MemoryLevel>(l));
      }
      s.cupti_only = index < cupti_live_by_device.size() ? cupti_live_by_device[index] : 0;
      s.pool_reserved = pool_reserve.reserved(index);
      pool_reserve.sampled(index, samples.size(), ordinal);
      samples.push_back(s);
    } else if (name == kTotalCounter) {
      totals[e.device] = e.bytes;
    } else if (size_t index = 0; is_pool_reserved_counter(name) && device_index(e.device, &index)) {
      const size_t sample = pool_reserve.counter(index, e.name.value, e.bytes, ordinal);
      if (sample != PoolReserve::kNoSample) samples[sample].pool_reserved = pool_reserve.reserved(index);
    } else if (name.substr(0, kPoolPrefix.size()) == kPoolPrefix) {
      PoolCounter& p = pools[e.name.value];
      p.name = std::string(name);
      ++p.samples;
      p.max_bytes = std::max(p.max_bytes, e.bytes);
      p.last_bytes = e.bytes;
    }
  }

  void stream(const nlohmann::json& payload) {
    ++streams;
    const std::pair<uint64_t, uint64_t> key{json_unsigned_field(payload, "context_id"),
                                            json_unsigned_field(payload, "stream_id")};
    auto [it, fresh] = stream_index.emplace(key, cupti_streams.size());
    if (fresh) {
      CuptiStream s;
      s.handle = json_unsigned_field(payload, "stream");
      s.context_id = key.first;
      s.stream_id = key.second;
      const auto device = payload.find("device");
      if (device != payload.end() && device->is_number_integer()) s.device = device->get<int64_t>();
      cupti_streams.push_back(s);
    }
    if (json_string_field(payload, "event") == "destroy") cupti_streams[it->second].destroyed = true;
  }

  void resource_name(const nlohmann::json& payload) {
    const std::string kind = json_string_field(payload, "kind"), api = json_string_field(payload, "api");
    const auto handle = payload.find("handle");
    if (kind.empty() || handle == payload.end() || !handle->is_number_integer()) return;
    // A device ordinal may be negative: keep its bits.
    const uint64_t value =
        handle->is_number_unsigned() ? handle->get<uint64_t>() : static_cast<uint64_t>(handle->get<int64_t>());
    auto [it, fresh] = named_index.emplace(std::make_tuple(kind, api, value), named.size());
    if (fresh) named.push_back(NamedResource{kind, api, value, {}, 0, false});
    NamedResource& r = named[it->second];
    r.name = json_string_field(payload, "name");
    ++r.times_named;
    if (kind == "stream") stream_names[value] = r.name;
  }

  void mark(const Event& e, const TraceMeta& meta) {
    const std::string_view name = meta.string(e.name);
    if (name == kResourceName) {
      resource_name(parse_json_object(meta.string(e.payload)));
      return;
    }
    if (name.substr(0, 6) != "cupti.") return;
    cupti_marks = true;
    const nlohmann::json payload = parse_json_object(meta.string(e.payload));
    if (name == kFirstKernel) {
      first_kernels.push_back(FirstKernel{e.time_ns, scope.current_wave(), scope.attributed_range(e),
                                          json_string_field(payload, "kernel")});
    } else if (name == kModule) {
      if (json_string_field(payload, "event") == "unload") {
        ++modules_unloaded;
      } else {
        ++modules_loaded;
        module_bytes += json_unsigned_field(payload, "bytes");
      }
    } else if (name == kContext) {
      ++contexts;
    } else if (name == kStream) {
      stream(payload);
    } else if (name == kUnavailable) {
      const std::string reason = json_string_field(payload, "reason");
      const std::string tool = json_string_field(payload, "tool");
      std::string notice = reason.empty() ? "CUPTI unavailable" : reason;
      if (!tool.empty()) notice += " (" + tool + ")";
      if (std::find(unavailable.begin(), unavailable.end(), notice) == unavailable.end()) unavailable.push_back(notice);
    }
  }

  // The parts of DeviceUsagePass::result; `level` is the accounted level,
  // whose live bytes the samples report.
  DeviceSample sample_of(const Sample& x, int level) const;
  std::vector<DeviceInfo> device_infos(int level) const;
  void around_peak(int level, DeviceUsage* t) const;
  std::vector<SourceBytes> cupti_only_sources() const;
  std::vector<WaveDeviceUsage> wave_usage(const std::vector<WaveSpan>& spans, int level) const;
  std::vector<std::vector<size_t>> samples_by_wave(size_t waves) const;
  std::vector<std::map<std::string, Made>> cupti_sources_by_wave(size_t waves) const;
  std::map<int16_t, WaveDeviceWindow> wave_windows(const std::vector<size_t>& inside, int level) const;
  void baselines_before(const WaveSpan& span, int level, std::map<int16_t, WaveDeviceWindow>* windows) const;
  void add_first_kernels(DeviceUsage* t) const;
};

DeviceUsagePass::DeviceUsagePass(const Inputs& inputs) : state_(std::make_unique<State>(inputs)) {}
DeviceUsagePass::~DeviceUsagePass() = default;

void DeviceUsagePass::set_peak_ordinal(uint64_t ordinal) { state_->inputs.peak_ordinal = ordinal; }

void DeviceUsagePass::on_events(const Event* events, size_t count, const TraceMeta& meta) {
  State& s = *state_;
  for (size_t i = 0; i < count && s.ordinal < s.inputs.event_limit; ++i, ++s.ordinal) {
    const Event& e = events[i];
    switch (e.kind) {
      case EventKind::kAlloc:
      case EventKind::kFree:
        if (s.inputs.replay_memory) s.memory(e);
        break;
      case EventKind::kCounter: s.counter(e, meta); break;
      case EventKind::kMark:
        s.mark(e, meta);
        s.scope.on_event(e, s.ordinal, meta);
        break;
      default: s.scope.on_event(e, s.ordinal, meta); break;
    }
  }
}

void DeviceUsagePass::on_end(const TraceMeta& meta, const ReadStatus&) { state_->strings = meta.strings; }

namespace {

std::string name_of(const std::vector<std::string>& strings, StringId id) {
  return id.value < strings.size() ? strings[id.value] : std::string();
}

// Each CUPTI stream gets the last name NVTX gave its handle (a CUstream and a
// cudaStream_t of the same value are the same stream: either API's name).
void name_streams(const std::vector<CuptiStream>& streams, const std::map<uint64_t, std::string>& stream_names,
                  const std::vector<NamedResource>& named, DeviceUsage* t) {
  std::set<uint64_t> reported;
  for (CuptiStream s : streams) {
    if (auto it = stream_names.find(s.handle); it != stream_names.end()) s.name = it->second;
    reported.insert(s.handle);
    t->cupti_streams.push_back(s);
  }
  for (NamedResource r : named) {
    r.cupti_stream = r.kind == "stream" && reported.count(r.handle) > 0;
    t->named_resources.push_back(r);
  }
}

}  // namespace

// A kept sample as the result shows it.
DeviceSample DeviceUsagePass::State::sample_of(const Sample& x, int level) const {
  return DeviceSample{x.seq,
                      x.time_ns,
                      x.device,
                      x.used,
                      x.live[level],
                      x.cupti_only,
                      x.wave,
                      name_of(strings, x.range),
                      pool_slack(x.pool_reserved, x.pool_live[level])};
}

// Each device with a total or a sample: its size and the most it used, in
// all and outside any allocator.
std::vector<DeviceInfo> DeviceUsagePass::State::device_infos(int level) const {
  std::map<int16_t, DeviceInfo> devices;
  for (const auto& [device, total] : totals) {
    devices[device].device = device;
    devices[device].total_bytes = total;
  }
  for (const Sample& x : samples) {
    DeviceInfo& d = devices[x.device];
    const DeviceSample ds = sample_of(x, level);
    d.max_outside_bytes = d.samples == 0 ? ds.outside_bytes() : std::max(d.max_outside_bytes, ds.outside_bytes());
    d.device = x.device;
    ++d.samples;
    d.max_used_bytes = std::max(d.max_used_bytes, x.used);
  }
  std::vector<DeviceInfo> out;
  for (auto& [device, info] : devices) out.push_back(info);
  return out;
}

// The samples just before and just after the trace's peak.
void DeviceUsagePass::State::around_peak(int level, DeviceUsage* t) const {
  if (inputs.peak_ordinal == UINT64_MAX) return;
  auto after = std::upper_bound(samples.begin(), samples.end(), inputs.peak_ordinal,
                                [](uint64_t o, const Sample& x) { return o < x.ordinal; });
  if (after != samples.end()) t->after_peak = sample_of(*after, level);
  auto at_or_after = std::lower_bound(samples.begin(), samples.end(), inputs.peak_ordinal,
                                      [](const Sample& x, uint64_t o) { return x.ordinal < o; });
  if (at_or_after != samples.begin()) t->before_peak = sample_of(*std::prev(at_or_after), level);
}

// CUPTI-only allocations of the whole trace by source.
std::vector<SourceBytes> DeviceUsagePass::State::cupti_only_sources() const {
  std::map<std::string, Made> by_source;
  for (const auto& [id, m] : cupti_by_source) {
    Made& row = by_source[name_of(strings, StringId{id})];
    row.allocations += m.allocations;
    row.bytes += m.bytes;
    row.live += m.live;
    row.max_live = std::max(row.max_live, m.max_live);
  }
  return source_rows(by_source, true);
}

// Each wave: the CUPTI-only allocations made inside it, and per device the
// samples taken inside it against its baseline.
std::vector<WaveDeviceUsage> DeviceUsagePass::State::wave_usage(const std::vector<WaveSpan>& spans, int level) const {
  const size_t waves = std::max(inputs.waves, spans.size());
  std::vector<WaveDeviceUsage> out(waves);
  const std::vector<std::vector<size_t>> samples_of_wave = samples_by_wave(waves);
  const std::vector<std::map<std::string, Made>> wave_sources = cupti_sources_by_wave(waves);
  for (size_t w = 0; w < waves; ++w) {
    WaveDeviceUsage& wt = out[w];
    wt.wave = static_cast<int32_t>(w);
    wt.cupti_only_by_source = source_rows(wave_sources[w], false);
    for (const SourceBytes& r : wt.cupti_only_by_source) {
      wt.cupti_only_allocations += r.allocations;
      wt.cupti_only_bytes += r.bytes;
    }
    std::map<int16_t, WaveDeviceWindow> windows = wave_windows(samples_of_wave[w], level);
    if (w < spans.size()) baselines_before(spans[w], level, &windows);
    for (auto& [device, win] : windows) {
      win.outside_growth_bytes = win.max_outside_bytes - win.baseline.outside_bytes();
      win.unexplained_growth_bytes = win.max_unexplained_bytes - win.baseline.unexplained_bytes();
      wt.devices.push_back(win);
    }
  }
  return out;
}

// The indices of the samples taken inside each of the first `waves` waves.
std::vector<std::vector<size_t>> DeviceUsagePass::State::samples_by_wave(size_t waves) const {
  std::vector<std::vector<size_t>> samples_of_wave(waves);
  for (size_t i = 0; i < samples.size(); ++i)
    if (samples[i].wave >= 0 && static_cast<size_t>(samples[i].wave) < waves)
      samples_of_wave[static_cast<size_t>(samples[i].wave)].push_back(i);
  return samples_of_wave;
}

// The CUPTI-only allocations made inside each of the first `waves` waves, by source.
std::vector<std::map<std::string, Made>> DeviceUsagePass::State::cupti_sources_by_wave(size_t waves) const {
  std::vector<std::map<std::string, Made>> wave_sources(waves);
  for (const auto& [key, m] : cupti_by_wave) {
    if (key.first < 0 || static_cast<size_t>(key.first) >= waves) continue;
    Made& row = wave_sources[static_cast<size_t>(key.first)][name_of(strings, StringId{key.second})];
    row.allocations += m.allocations;
    row.bytes += m.bytes;
  }
  return wave_sources;
}

// Per device: the samples taken inside a wave (`inside`, indices into
// samples), their first as the baseline.
std::map<int16_t, WaveDeviceWindow> DeviceUsagePass::State::wave_windows(const std::vector<size_t>& inside,
                                                                         int level) const {
  std::map<int16_t, WaveDeviceWindow> windows;
  for (size_t i : inside) {
    const Sample& x = samples[i];
    const DeviceSample ds = sample_of(x, level);
    auto [it, fresh] = windows.try_emplace(x.device);
    WaveDeviceWindow& win = it->second;
    if (fresh) {
      win.device = x.device;
      win.max_used = ds;
      win.baseline = ds;
      win.max_outside_bytes = ds.outside_bytes();
      win.max_unexplained_bytes = ds.unexplained_bytes();
    }
    ++win.samples;
    if (x.used > win.max_used.used_bytes) win.max_used = ds;
    win.max_outside_bytes = std::max(win.max_outside_bytes, ds.outside_bytes());
    win.max_unexplained_bytes = std::max(win.max_unexplained_bytes, ds.unexplained_bytes());
  }
  return windows;
}

// Baseline: the last sample before the wave began, when it is closer in
// time to the begin than the wave's first sample (the recorder may sample
// just before or just after the push).
void DeviceUsagePass::State::baselines_before(const WaveSpan& span, int level,
                                              std::map<int16_t, WaveDeviceWindow>* windows) const {
  for (auto& [device, win] : *windows) {
    auto it = std::lower_bound(samples.begin(), samples.end(), span.begin_ordinal,
                               [](const Sample& x, uint64_t o) { return x.ordinal < o; });
    const Sample* before = nullptr;
    while (it != samples.begin() && !before) {
      --it;
      if (it->device == device) before = &*it;
    }
    if (!before) continue;
    const uint64_t gap_before = span.begin_time_ns - std::min(span.begin_time_ns, before->time_ns);
    const uint64_t gap_inside = win.baseline.time_ns - std::min(win.baseline.time_ns, span.begin_time_ns);
    if (gap_before < gap_inside) win.baseline = sample_of(*before, level);
  }
}

// First executions of kernels: the trace's, and each wave's.
void DeviceUsagePass::State::add_first_kernels(DeviceUsage* t) const {
  for (const FirstKernel& k : first_kernels) {
    const std::string range = name_of(strings, k.range);
    add_first_kernel(&t->first_kernels, k.time_ns, range, k.kernel);
    if (k.wave >= 0 && static_cast<size_t>(k.wave) < t->waves.size())
      add_first_kernel(&t->waves[static_cast<size_t>(k.wave)].first_kernels, k.time_ns, range, k.kernel);
  }
}

DeviceUsage DeviceUsagePass::result(const std::vector<WaveSpan>& spans) const {
  const State& s = *state_;
  DeviceUsage t;
  t.present =
      s.samples_seen > 0 || !s.cupti_by_source.empty() || s.cupti_marks || !s.totals.empty() || !s.named.empty();
  t.accounted_level =
      s.hooked_allocs[static_cast<int>(MemoryLevel::kReserved)] > 0 ? MemoryLevel::kReserved : MemoryLevel::kAllocated;
  t.samples = s.samples_seen;
  const int level = static_cast<int>(t.accounted_level);
  t.devices = s.device_infos(level);
  s.around_peak(level, &t);
  t.cupti_only_by_source = s.cupti_only_sources();
  t.waves = s.wave_usage(spans, level);
  s.add_first_kernels(&t);
  t.modules_loaded = s.modules_loaded;
  t.modules_unloaded = s.modules_unloaded;
  t.module_bytes_loaded = s.module_bytes;
  t.contexts = s.contexts;
  t.streams = s.streams;
  name_streams(s.cupti_streams, s.stream_names, s.named, &t);
  for (const auto& [id, p] : s.pools) t.pools.push_back(p);
  t.unavailable = s.unavailable;
  return t;
}

// ---- cold versus warm -------------------------------------------------------------

ColdWarmDelta cold_minus_warm(const DeviceUsage& truth, int32_t cold_wave, int32_t warm_wave) {
  ColdWarmDelta d;
  d.cold_wave = cold_wave;
  d.warm_wave = warm_wave;
  const auto valid = [&](int32_t w) { return w >= 0 && static_cast<size_t>(w) < truth.waves.size(); };
  if (!valid(cold_wave) || !valid(warm_wave)) return d;
  const WaveDeviceUsage& cold = truth.waves[static_cast<size_t>(cold_wave)];
  const WaveDeviceUsage& warm = truth.waves[static_cast<size_t>(warm_wave)];

  for (const WaveDeviceWindow& c : cold.devices) {
    auto w = std::find_if(warm.devices.begin(), warm.devices.end(),
                          [&](const WaveDeviceWindow& x) { return x.device == c.device; });
    if (w == warm.devices.end()) continue;
    const int64_t growth = c.outside_growth_bytes - w->outside_growth_bytes;
    const int64_t unexplained = c.unexplained_growth_bytes - w->unexplained_growth_bytes;
    const int64_t at_max = c.max_used.outside_bytes() - w->max_used.outside_bytes();
    if (!d.has_samples) {
      d.outside_growth_delta_bytes = growth;
      d.unexplained_growth_delta_bytes = unexplained;
      d.outside_at_max_used_delta_bytes = at_max;
    } else {
      d.outside_growth_delta_bytes = std::max(d.outside_growth_delta_bytes, growth);
      d.unexplained_growth_delta_bytes = std::max(d.unexplained_growth_delta_bytes, unexplained);
      d.outside_at_max_used_delta_bytes = std::max(d.outside_at_max_used_delta_bytes, at_max);
    }
    d.has_samples = true;
  }

  std::map<std::string, ColdWarmDelta::Source> sources;
  for (const SourceBytes& r : cold.cupti_only_by_source) {
    sources[r.source].source = r.source;
    sources[r.source].cold_bytes = r.bytes;
  }
  for (const SourceBytes& r : warm.cupti_only_by_source) {
    sources[r.source].source = r.source;
    sources[r.source].warm_bytes = r.bytes;
  }
  for (const auto& [name, s] : sources) {
    d.cupti_only_by_source.push_back(s);
    d.cupti_only_delta_bytes += s.delta_bytes();
  }
  std::stable_sort(
      d.cupti_only_by_source.begin(), d.cupti_only_by_source.end(),
      [](const ColdWarmDelta::Source& a, const ColdWarmDelta::Source& b) { return a.delta_bytes() > b.delta_bytes(); });
  d.cold_first_kernels = cold.first_kernels.count;
  d.warm_first_kernels = warm.first_kernels.count;
  return d;
}

void pair_cold_warm(const std::vector<WaveSpan>& spans, DeviceUsage* truth) {
  truth->cold_warm.clear();
  const auto same_shape = [](const WavePayload& a, const WavePayload& b) {
    return a.tokens == b.tokens && a.groups.value_or(1) == b.groups.value_or(1) && a.slots == b.slots;
  };
  for (const WaveSpan& cold : spans) {
    if (!cold.payload.cold.value_or(false) || !cold.payload.tokens) continue;
    for (const WaveSpan& warm : spans) {
      if (warm.index == cold.index || warm.payload.cold.value_or(false) || !same_shape(cold.payload, warm.payload))
        continue;
      truth->cold_warm.push_back(cold_minus_warm(*truth, cold.index, warm.index));
      break;
    }
  }
}

}  // namespace psc
