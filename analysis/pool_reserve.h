// What stream-ordered memory pools hold beyond their live allocations.
//
// A pool keeps freed memory for reuse (the recorder's PyTorch allocator sets
// the default pool's release threshold to the maximum, as PyTorch's own
// cudaMallocAsync backend does), so a device's used bytes hold each pool's
// reserve: its live allocations and its slack. The slack is an allocator's
// memory, not memory outside any allocator; counted as outside, a wave that
// grows the pool looks like first-execution growth at the device level (a
// real GPU run priced a cold wave 2 GiB over its twin that way).
//
// The recorder samples each pool's reserved bytes at every range boundary, as
// `pool_reserved_bytes` (a device's current pool) and
// `pool_reserved_bytes:0x<pool>` counters, only when the value changed; at a
// wave or layer boundary right after that boundary's device sample
// (interpose/cuda_pools.cc, interpose/device_samples.cc). So a pool counter
// also describes the device's last sample when it follows that sample
// directly in the trace (or follows another such counter): anything between
// them, another thread's event or a boundary with no device sample, and the
// sample keeps the reserve it was taken with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "analysis/memory_replay.h"

namespace psc {

bool is_pool_reserved_counter(std::string_view name);

class PoolReserve {
 public:
  static constexpr size_t kNoSample = SIZE_MAX;

  // A hooked pool allocation or free moved the live bytes of `level` on the
  // device (index = device + 1) by `delta`.
  void moved(size_t device, MemoryLevel level, int64_t delta);
  // A device sample was kept at `sample` (an index into the caller's
  // samples); `ordinal` is its position in the trace.
  void sampled(size_t device, size_t sample, uint64_t ordinal);
  // A pool counter at `ordinal`: records the pool's value and returns the
  // index of the device's last sample when the counter follows it directly
  // (the new reserve is the one at that sample), else kNoSample.
  size_t counter(size_t device, uint32_t pool, uint64_t value, uint64_t ordinal);

  uint64_t reserved(size_t device) const;
  uint64_t live(size_t device, MemoryLevel level) const;

 private:
  struct Device {
    uint64_t live[kMemoryLevelCount] = {0, 0};
    std::map<uint32_t, uint64_t> reserved;  // counter name id → last value
    size_t last_sample = kNoSample;
    uint64_t last_ordinal = 0;  // the sample's, or the last counter's that followed it
  };
  Device& at(size_t device);
  const Device* find(size_t device) const { return device < devices_.size() ? &devices_[device] : nullptr; }

  std::vector<Device> devices_;
};

// The pool's slack at a sample: what it reserves beyond its live allocations.
inline uint64_t pool_slack(uint64_t reserved, uint64_t live) { return reserved > live ? reserved - live : 0; }

}  // namespace psc
