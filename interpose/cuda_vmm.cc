// Virtual memory management (cuMemCreate / cuMemMap / ...), as PyTorch's
// expandable segments and NCCL use it.
//
// Physical memory is what counts: cuMemCreate is the allocation (MemoryKind
// kVmmPhysical, keyed by the handle), and it lives until the handle is
// released *and* no mapping uses it any more. NCCL releases a handle right
// after mapping it; the driver keeps the memory until cuMemUnmap, and so do
// we: the kFree is recorded by whichever call drops the last reference
// (cuMemRelease, or cuMemUnmap with api kCuMemUnmap). cuMemRetainAllocationHandle
// adds a reference. Mappings are recorded as kMap / kUnmap (address, bytes);
// cuMemAddressReserve is address space only and is not recorded.
//
// VMM calls are rare and slow in the driver (microseconds to milliseconds),
// so the two tables here sit behind one spinlock; they live in mmap'd memory,
// mapped on the first VMM call.
#include <sched.h>

#include "interpose/cuda_hooks.h"
#include "runtime/drops.h"

namespace psc::interpose::cuda {
namespace {

// Open addressing with linear probing and backward-shift deletion; only ever
// touched under g_lock. Key 0 is "empty".
template <typename Value>
class LockedMap {
 public:
  static constexpr uint32_t kSlots = 1u << 16;
  bool ready() {
    if (!slots_) slots_ = static_cast<Slot*>(sys::map_pages(sizeof(Slot) * kSlots));
    return slots_ != nullptr;
  }
  Value* find(uint64_t key) {
    for (uint32_t i = home(key), n = 0; n < kSlots; i = (i + 1) & kMask, ++n) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == 0) return nullptr;
    }
    return nullptr;
  }
  bool insert(uint64_t key, const Value& value) {
    if (size_ + 1 >= kSlots * 3 / 4) return false;
    uint32_t i = home(key);
    while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & kMask;
    if (slots_[i].key == 0) ++size_;
    slots_[i] = Slot{key, value};
    return true;
  }
  void erase(uint64_t key) {
    uint32_t hole = home(key);
    while (slots_[hole].key != key) {
      if (slots_[hole].key == 0) return;
      hole = (hole + 1) & kMask;
    }
    for (uint32_t j = (hole + 1) & kMask; slots_[j].key != 0; j = (j + 1) & kMask) {
      const uint32_t h = home(slots_[j].key);
      const bool stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
      if (stays) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole].key = 0;
    --size_;
  }

 private:
  struct Slot {
    uint64_t key;
    Value value;
  };
  static constexpr uint32_t kMask = kSlots - 1;
  static uint32_t home(uint64_t key) { return static_cast<uint32_t>((key * 0x9E3779B97F4A7C15ull) >> 48) & kMask; }
  Slot* slots_ = nullptr;
  uint32_t size_ = 0;
};

struct Handle {
  uint64_t bytes;
  int16_t device;
  int32_t references;  // cuMemCreate + retains - releases
  int32_t mappings;
};
struct Mapping {
  uint64_t bytes;
  uint64_t handle;
};

LockedMap<Handle> g_handles;
LockedMap<Mapping> g_mappings;
std::atomic<bool> g_lock{false};

class Locked {
 public:
  Locked() {
    while (g_lock.exchange(true, std::memory_order_acquire)) sched_yield();
  }
  ~Locked() { g_lock.store(false, std::memory_order_release); }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;
  bool ready() { return g_handles.ready() && g_mappings.ready(); }
};

// The physical memory of a handle with no reference and no mapping left is gone.
// Called under the lock; records the free (before the real call that frees it).
void release_if_unused(const rt::HookGuard& guard, uint64_t handle, Handle* h, Api api) {
  if (h->references > 0 || h->mappings > 0) return;
  rt::record_memory(
      {EventKind::kFree, handle, h->bytes, MemoryKind::kVmmPhysical, api, h->device, 0, guard.nested_flag()});
  g_handles.erase(handle);
}

}  // namespace

void vmm_created(const rt::HookGuard& guard, uint64_t handle, uint64_t bytes, int16_t device) {
  {
    Locked lock;
    if (!lock.ready() || !g_handles.insert(handle, Handle{bytes, device, 1, 0}))
      rt::count_drop(format::DropReason::kAddressTable);
  }
  rt::record_memory(
      {EventKind::kAlloc, handle, bytes, MemoryKind::kVmmPhysical, Api::kCuMemCreate, device, 0, guard.nested_flag()});
}

void vmm_retained(uint64_t handle) {
  Locked lock;
  if (!lock.ready()) return;
  if (Handle* h = g_handles.find(handle)) ++h->references;
}

void vmm_before_release(const rt::HookGuard& guard, uint64_t handle) {
  Locked lock;
  if (!lock.ready()) return;
  Handle* h = g_handles.find(handle);
  if (!h) {
    // Created before recording started, or a bad handle the driver will refuse.
    rt::record_memory(
        {EventKind::kFree, handle, 0, MemoryKind::kVmmPhysical, Api::kCuMemRelease, -1, 0, guard.nested_flag()});
    return;
  }
  if (h->references > 0) --h->references;
  release_if_unused(guard, handle, h, Api::kCuMemRelease);
}

void vmm_mapped(const rt::HookGuard& guard, uint64_t address, uint64_t bytes, uint64_t handle) {
  int16_t device = -1;
  {
    Locked lock;
    if (lock.ready()) {
      if (Handle* h = g_handles.find(handle)) {
        ++h->mappings;
        device = h->device;
      }
      if (!g_mappings.insert(address, Mapping{bytes, handle})) rt::count_drop(format::DropReason::kAddressTable);
    }
  }
  rt::record_memory(
      {EventKind::kMap, address, bytes, MemoryKind::kVmmPhysical, Api::kCuMemMap, device, 0, guard.nested_flag()});
}

// cuMemUnmap(address, bytes) unmaps every mapping in the range; they start at
// `address` and follow each other.
void vmm_before_unmap(const rt::HookGuard& guard, uint64_t address, uint64_t bytes) {
  Locked lock;
  if (!lock.ready()) return;
  int16_t device = -1;
  if (Mapping* m = g_mappings.find(address))
    if (Handle* h = g_handles.find(m->handle)) device = h->device;
  rt::record_memory(
      {EventKind::kUnmap, address, bytes, MemoryKind::kVmmPhysical, Api::kCuMemUnmap, device, 0, guard.nested_flag()});
  for (uint64_t at = address; at < address + bytes;) {
    Mapping* m = g_mappings.find(at);
    if (!m || m->bytes == 0) break;
    const Mapping mapping = *m;
    g_mappings.erase(at);
    if (Handle* h = g_handles.find(mapping.handle)) {
      if (h->mappings > 0) --h->mappings;
      release_if_unused(guard, mapping.handle, h, Api::kCuMemUnmap);
    }
    at += mapping.bytes;
  }
}

}  // namespace psc::interpose::cuda
