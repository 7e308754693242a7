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
// The recorder samples each pool's reserved bytes at range boundaries, as
// `pool_reserved_bytes` (a device's current pool) and
// `pool_reserved_bytes:0x<pool>` counters, only when the value changed, and
// right after the device sample of the same boundary
// (interpose/cuda_pools.cc). So a pool counter also describes the device's
// last sample when no memory event on that device came between them.
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
  // Any hooked memory event on the device.
  void touched(size_t device);
  // A device sample was kept at `sample` (an index into the caller's samples).
  void sampled(size_t device, size_t sample);
  // A pool counter: records the pool's value and returns the index of the
  // device's last sample when the new reserve is also the one at that sample
  // (no memory event since), else kNoSample.
  size_t counter(size_t device, uint32_t pool, uint64_t value);

  uint64_t reserved(size_t device) const;
  uint64_t live(size_t device, MemoryLevel level) const;

 private:
  struct Device {
    uint64_t live[kMemoryLevelCount] = {0, 0};
    std::map<uint32_t, uint64_t> reserved;  // counter name id → last value
    size_t last_sample = kNoSample;
  };
  Device& at(size_t device);
  const Device* find(size_t device) const { return device < devices_.size() ? &devices_[device] : nullptr; }

  std::vector<Device> devices_;
};

// The pool's slack at a sample: what it reserves beyond its live allocations.
inline uint64_t pool_slack(uint64_t reserved, uint64_t live) { return reserved > live ? reserved - live : 0; }

}  // namespace psc
