#include "interpose/block_table.h"

#include "runtime/sys.h"

namespace psc::interpose {

bool BlockTable::init() {
  if (!slots_) slots_ = static_cast<Slot*>(sys::map_pages(sizeof(Slot) << kSlotsLog2));
  return slots_ != nullptr;
}

bool BlockTable::insert(uint64_t address, uint64_t bytes) {
  if (!slots_) return false;
  uint32_t i = home(address);
  for (uint32_t probe = 0; probe < kMaxProbe; ++probe, i = (i + 1) & kMask) {
    uint64_t current = slots_[i].address.load(std::memory_order_relaxed);
    if (current != kEmpty && current != kTombstone) continue;
    // The key goes in first and the size right after: the block is not yet
    // visible to the application, so nobody can free it in between.
    if (slots_[i].address.compare_exchange_strong(current, address, std::memory_order_acq_rel)) {
      slots_[i].bytes.store(bytes, std::memory_order_release);
      return true;
    }
  }
  return false;
}

uint64_t BlockTable::remove(uint64_t address) {
  if (!slots_) return 0;
  uint32_t i = home(address);
  for (uint32_t probe = 0; probe < kMaxProbe; ++probe, i = (i + 1) & kMask) {
    const uint64_t current = slots_[i].address.load(std::memory_order_acquire);
    if (current == kEmpty) return 0;
    if (current != address) continue;
    const uint64_t bytes = slots_[i].bytes.load(std::memory_order_acquire);
    // A store, not a CAS (one locked instruction less per free): only the
    // thread freeing a block removes its key (another free of it at the same
    // time would be the application's double free), and inserts never take a
    // slot that holds a key.
    slots_[i].address.store(kTombstone, std::memory_order_release);
    return bytes;
  }
  return 0;
}

}  // namespace psc::interpose
