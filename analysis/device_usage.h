// Device-level truth: what the device as a whole used, next to what the
// allocators the hooks see account for, and what CUPTI saw that no hook did.
//
// Inputs (format/event.h, traces/deferred.h):
//   - `device_used_bytes` counters: total − free from cuMemGetInfo, sampled by
//     the recorder at wave and layer range boundaries (in true order);
//     `device_total_bytes` once per device;
//   - CUPTI-only allocations (Api::kCupti that survived deduplication), placed
//     by time, with their source library in Event::name;
//   - marks: `cupti.first_kernel` (the first execution of each kernel
//     function, placed at the kernel's start), `cupti.module`,
//     `cupti.context`, `cupti.stream`, `cupti.unavailable`;
//   - `nvtx.resource_name` marks: names given to CUDA devices, contexts,
//     streams and events through NVTX (nvtxNameCudaStreamA ...), matched to
//     CUPTI's streams by handle (CUPTI's context marks carry no handle, so
//     contexts are listed by the handle NVTX was given only).
//
// At each sample: accounted = bytes live on that device in the hooked
// allocations of the outermost level the trace has (reserved when it has
// segment-level allocations, else allocated); outside = used − accounted:
// context, modules, library workspaces, the caching allocator's slack when
// only tensors are hooked (a memory pool's slack is subtracted too:
// analysis/pool_reserve.h). Of the outside bytes, CUPTI-only allocations
// explain some (by source); the rest is `unexplained`.
//
// Cold versus warm (cold_minus_warm): a wave's device-level growth is its
// largest outside (or unexplained) bytes minus those at its baseline sample
// (the sample closest to its begin); a cold wave's growth beyond its warm
// twin's is first-execution memory at the device level.
//
// Memory: one small record per sample and per first kernel, the CUPTI-only
// live set, and per-device live totals of the hooked allocations (a replay
// per device and level: O(live allocations)).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/memory_replay.h"
#include "analysis/range_names.h"
#include "analysis/scope_tracker.h"
#include "traces/deferred.h"
#include "traces/reader.h"

namespace psc {

struct DeviceSample {
  uint64_t seq = 0;
  uint64_t time_ns = 0;
  int16_t device = 0;
  uint64_t used_bytes = 0;        // device_used_bytes
  uint64_t accounted_bytes = 0;   // hooked allocations live on the device (accounted level)
  uint64_t cupti_only_bytes = 0;  // CUPTI-only allocations live on the device
  int32_t wave = -1;
  std::string range;              // range open where the sample was taken
  uint64_t pool_slack_bytes = 0;  // memory pools' reserve beyond their live allocations (pool_reserve.h)

  // Outside any allocator: a pool's slack is its allocator's memory.
  int64_t outside_bytes() const {
    return static_cast<int64_t>(used_bytes) - static_cast<int64_t>(accounted_bytes) -
           static_cast<int64_t>(pool_slack_bytes);
  }
  int64_t unexplained_bytes() const { return outside_bytes() - static_cast<int64_t>(cupti_only_bytes); }
};

struct SourceBytes {
  std::string source;  // library CUPTI named ("" when it named none)
  uint64_t allocations = 0;
  uint64_t bytes = 0;              // allocated
  uint64_t live_at_end_bytes = 0;  // trace-level rows only
  uint64_t max_live_bytes = 0;     // trace-level rows only
};

struct FirstKernelRange {
  std::string range;  // "" for none
  uint64_t count = 0;
  std::vector<std::string> kernels;  // in time order
};

struct FirstKernels {
  uint64_t count = 0;
  uint64_t first_time_ns = 0;
  uint64_t last_time_ns = 0;
  std::vector<FirstKernelRange> by_range;  // in order of first appearance
};

// One device inside one wave.
struct WaveDeviceWindow {
  int16_t device = 0;
  uint64_t samples = 0;
  DeviceSample baseline;  // the sample closest to the wave's begin (before it or inside)
  DeviceSample max_used;  // the wave's sample with the most used bytes
  int64_t max_outside_bytes = 0;
  int64_t max_unexplained_bytes = 0;
  int64_t outside_growth_bytes = 0;      // max outside − baseline's outside
  int64_t unexplained_growth_bytes = 0;  // max unexplained − baseline's unexplained
};

struct WaveDeviceUsage {
  int32_t wave = 0;
  std::vector<WaveDeviceWindow> devices;
  uint64_t cupti_only_allocations = 0;  // made inside the wave
  uint64_t cupti_only_bytes = 0;
  std::vector<SourceBytes> cupti_only_by_source;  // made inside the wave, largest first
  FirstKernels first_kernels;                     // first executions inside the wave
};

struct DeviceInfo {
  int16_t device = 0;
  uint64_t total_bytes = 0;  // device_total_bytes; 0 when not sampled
  uint64_t samples = 0;
  uint64_t max_used_bytes = 0;
  int64_t max_outside_bytes = 0;
};

struct PoolCounter {
  std::string name;  // "cupti.pool_used_bytes:0x..."
  uint64_t samples = 0;
  uint64_t max_bytes = 0;
  uint64_t last_bytes = 0;
};

// The cold − warm difference of two waves of the same shape.
struct ColdWarmDelta {
  int32_t cold_wave = 0;
  int32_t warm_wave = 0;
  bool has_samples = false;  // both waves have device samples on a common device
  // (a) device level, the largest per-device difference:
  int64_t outside_growth_delta_bytes = 0;
  int64_t unexplained_growth_delta_bytes = 0;
  int64_t outside_at_max_used_delta_bytes = 0;
  // (b) CUPTI-only bytes made inside each wave, by source
  struct Source {
    std::string source;
    uint64_t cold_bytes = 0;
    uint64_t warm_bytes = 0;
    int64_t delta_bytes() const { return static_cast<int64_t>(cold_bytes) - static_cast<int64_t>(warm_bytes); }
  };
  std::vector<Source> cupti_only_by_source;  // largest delta first
  int64_t cupti_only_delta_bytes = 0;
  // (c) first executions of kernels
  uint64_t cold_first_kernels = 0;
  uint64_t warm_first_kernels = 0;
};

// A stream CUPTI reported (cupti.stream), with the name NVTX gave its handle.
struct CuptiStream {
  uint64_t handle = 0;  // the CUstream / cudaStream_t value
  uint64_t stream_id = 0;
  uint64_t context_id = 0;
  int64_t device = -1;
  bool destroyed = false;
  std::string name;  // the last name NVTX gave the handle; "" when none
};

// A name given through NVTX's CUDA (driver) or CUDART (runtime) naming calls.
struct NamedResource {
  std::string kind;     // "device", "context", "stream", "event"
  std::string api;      // "cuda" (nvtxNameCu*) or "cudart" (nvtxNameCuda*)
  uint64_t handle = 0;  // the handle's value; a device's ordinal (as int64_t)
  std::string name;     // the last name given (later names replace earlier ones)
  uint64_t times_named = 0;
  bool cupti_stream = false;  // a stream whose handle CUPTI reported
  int64_t device_ordinal() const { return static_cast<int64_t>(handle); }
};

struct DeviceUsage {
  // The trace has device samples, CUPTI events or notices, or NVTX resource names.
  bool present = false;
  MemoryLevel accounted_level = MemoryLevel::kAllocated;
  PlacementCounts placement;  // how CUPTI's allocations were placed and deduplicated
  std::vector<DeviceInfo> devices;
  uint64_t samples = 0;
  std::vector<SourceBytes> cupti_only_by_source;  // the whole trace, largest first
  // The samples just before and just after the trace's peak (either may be absent).
  std::optional<DeviceSample> before_peak;
  std::optional<DeviceSample> after_peak;
  std::vector<WaveDeviceUsage> waves;  // indexed like Analysis::waves
  FirstKernels first_kernels;          // every first execution in the trace
  uint64_t modules_loaded = 0;
  uint64_t modules_unloaded = 0;
  uint64_t module_bytes_loaded = 0;
  uint64_t contexts = 0;
  uint64_t streams = 0;
  std::vector<CuptiStream> cupti_streams;      // in order of first report
  std::vector<NamedResource> named_resources;  // in order of first naming
  std::vector<PoolCounter> pools;
  std::vector<std::string> unavailable;  // "reason (tool)" of each cupti.unavailable mark
  std::vector<ColdWarmDelta> cold_warm;  // each cold wave with its warm twin
};

// Pass over the placed stream (traces/deferred.h), alongside the analysis's
// attribution pass. `replay_memory` is false when the trace has neither
// samples nor CUPTI allocations: the pass then only looks at marks.
class DeviceUsagePass : public TraceVisitor {
 public:
  struct Inputs {
    const RangeParser* ranges = nullptr;
    bool replay_memory = true;
    uint64_t event_limit = UINT64_MAX;
    uint64_t peak_ordinal = UINT64_MAX;  // the trace's peak, UINT64_MAX for none
    size_t waves = 0;
  };
  explicit DeviceUsagePass(const Inputs& inputs);
  ~DeviceUsagePass() override;

  void on_events(const Event* events, size_t count, const TraceMeta& meta) override;
  void on_end(const TraceMeta& meta, const ReadStatus& status) override;

  // Where the trace's peak is, when the read this pass runs beside finds it
  // (Inputs::peak_ordinal's meaning); before result().
  void set_peak_ordinal(uint64_t ordinal);
  // Valid after the pass; spans give each wave's begin (for its baseline).
  DeviceUsage result(const std::vector<WaveSpan>& spans) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The cold − warm difference of two waves (indices into truth.waves).
ColdWarmDelta cold_minus_warm(const DeviceUsage& truth, int32_t cold_wave, int32_t warm_wave);

// Pairs each cold wave with the first warm wave of the same shape (tokens,
// groups and slots of the payload, as liveness pairs them) and fills
// truth->cold_warm.
void pair_cold_warm(const std::vector<WaveSpan>& spans, DeviceUsage* truth);

}  // namespace psc
