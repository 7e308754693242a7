// One allocation's identity while it is live: the device it is on (-1 for the
// host) and its address. The key every replay of a trace's memory events uses.
#pragma once

#include <cstddef>
#include <cstdint>

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

}  // namespace psc
