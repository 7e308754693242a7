// Host mode: which blocks we recorded, so that free() — called for every heap
// block in the process — records only those, with their size.
//
// Lock-free open addressing in mmap'd memory. Keys are block addresses (never
// 0 or 1); a removed entry becomes a tombstone that later inserts reuse, so the
// table stays short under alloc/free churn. A lookup for an address that was
// never inserted probes to the first empty slot; callers filter by
// malloc_usable_size first so that only large blocks are looked up at all.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace psc::interpose {

class BlockTable {
 public:
  static constexpr uint32_t kSlotsLog2 = 21;
  static constexpr uint64_t kEmpty = 0;
  static constexpr uint64_t kTombstone = 1;

  bool init();
  // False when the table is full (the caller counts a drop and does not record).
  bool insert(uint64_t address, uint64_t bytes);
  // Removes the entry; returns its size, or 0 when the block was not recorded.
  uint64_t remove(uint64_t address);

 private:
  struct Slot {
    std::atomic<uint64_t> address;
    std::atomic<uint64_t> bytes;
  };
  static uint32_t home(uint64_t address) {
    return static_cast<uint32_t>(((address >> 4) * 0x9E3779B97F4A7C15ull) >> (64 - kSlotsLog2));
  }
  static constexpr uint32_t kMask = (1u << kSlotsLog2) - 1;
  static constexpr uint32_t kMaxProbe = 4096;
  Slot* slots_ = nullptr;
};

}  // namespace psc::interpose
