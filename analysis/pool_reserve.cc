#include "analysis/pool_reserve.h"

namespace psc {

bool is_pool_reserved_counter(std::string_view name) {
  constexpr std::string_view kName = "pool_reserved_bytes";
  return name.substr(0, kName.size()) == kName && (name.size() == kName.size() || name[kName.size()] == ':');
}

PoolReserve::Device& PoolReserve::at(size_t device) {
  if (devices_.size() <= device) devices_.resize(device + 1);
  return devices_[device];
}

void PoolReserve::moved(size_t device, MemoryLevel level, int64_t delta) {
  uint64_t& live = at(device).live[static_cast<int>(level)];
  // A free the pool never saw allocated moves nothing below zero.
  live = delta < 0 && static_cast<uint64_t>(-delta) > live ? 0 : live + static_cast<uint64_t>(delta);
}

void PoolReserve::sampled(size_t device, size_t sample, uint64_t ordinal) {
  Device& d = at(device);
  d.last_sample = sample;
  d.last_ordinal = ordinal;
}

size_t PoolReserve::counter(size_t device, uint32_t pool, uint64_t value, uint64_t ordinal) {
  Device& d = at(device);
  d.reserved[pool] = value;
  if (d.last_sample == kNoSample || ordinal != d.last_ordinal + 1) {
    d.last_sample = kNoSample;
    return kNoSample;
  }
  d.last_ordinal = ordinal;
  return d.last_sample;
}

uint64_t PoolReserve::reserved(size_t device) const {
  const Device* d = find(device);
  uint64_t total = 0;
  if (d)
    for (const auto& [pool, bytes] : d->reserved) total += bytes;
  return total;
}

uint64_t PoolReserve::live(size_t device, MemoryLevel level) const {
  const Device* d = find(device);
  return d ? d->live[static_cast<int>(level)] : 0;
}

}  // namespace psc
