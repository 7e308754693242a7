// One allocation's identity while it is live: the device it is on (-1 for the
// host) and its address. The key every replay of a trace's memory events uses.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/flat_map.h"

namespace psc {

struct DeviceAddress {
  int16_t device;
  uint64_t address;
  friend bool operator==(const DeviceAddress&, const DeviceAddress&) = default;
};

struct DeviceAddressHash {
  size_t operator()(const DeviceAddress& k) const {
    return static_cast<size_t>(k.address * 0x9E3779B97F4A7C15ull ^ static_cast<uint16_t>(k.device));
  }
};

// For the flat tables (common/flat_map.h), which index by a hash's top bits:
// addresses are aligned (low bits zero) and clustered, so the key goes
// through a full 64-bit mixer.
inline uint64_t device_address_mix(int16_t device, uint64_t address) {
  return mix64(address ^ (static_cast<uint64_t>(static_cast<uint16_t>(device)) << 48));
}

struct DeviceAddressMix {
  uint64_t operator()(const DeviceAddress& k) const { return device_address_mix(k.device, k.address); }
};

}  // namespace psc
