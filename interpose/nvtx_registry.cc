#include "interpose/nvtx_registry.h"

#include <cstring>

#include "runtime/drops.h"
#include "runtime/sys.h"

namespace psc::interpose::nvtx {
namespace {

constexpr size_t kArenaBytes = 16u << 20;  // NORESERVE: only touched pages cost memory

// Open addressing keyed by handle value; keys are never removed, so a probe
// stops at the first empty slot. Kept at most 3/4 full.
class HandleMap {
 public:
  bool init(uint32_t slots_log2) {
    if (slots_) return true;
    log2_ = slots_log2;
    slots_ = static_cast<Slot*>(sys::map_pages(sizeof(Slot) << slots_log2));
    return slots_ != nullptr;
  }

  bool insert(uintptr_t key, const char* value) {
    if (!slots_ || key == 0) return false;
    const uint32_t mask = (1u << log2_) - 1;
    for (uint32_t probe = 0, i = home(key); probe <= mask; ++probe, i = (i + 1) & mask) {
      uintptr_t current = slots_[i].key.load(std::memory_order_acquire);
      if (current == 0) {
        if (used_.load(std::memory_order_relaxed) >= (mask + 1) / 4 * 3) return false;
        if (slots_[i].key.compare_exchange_strong(current, key, std::memory_order_acq_rel)) {
          used_.fetch_add(1, std::memory_order_relaxed);
          current = key;
        }
      }
      if (current == key) {
        slots_[i].value.store(value, std::memory_order_release);
        return true;
      }
    }
    return false;
  }

  const char* lookup(uintptr_t key) const {
    if (!slots_ || key == 0) return nullptr;
    const uint32_t mask = (1u << log2_) - 1;
    for (uint32_t probe = 0, i = home(key); probe <= mask; ++probe, i = (i + 1) & mask) {
      const uintptr_t current = slots_[i].key.load(std::memory_order_acquire);
      if (current == key) return slots_[i].value.load(std::memory_order_acquire);
      if (current == 0) return nullptr;
    }
    return nullptr;
  }

 private:
  struct Slot {
    std::atomic<uintptr_t> key;
    std::atomic<const char*> value;
  };
  uint32_t home(uintptr_t key) const {
    return static_cast<uint32_t>((static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> (64 - log2_));
  }
  Slot* slots_ = nullptr;
  uint32_t log2_ = 0;
  std::atomic<uint32_t> used_{0};
};

struct ChainedId {
  std::atomic<uint64_t> ours;
  std::atomic<uint64_t> theirs;
};
constexpr uint32_t kChainedIdsLog2 = 16;

char* g_arena = nullptr;
std::atomic<size_t> g_arena_used{0};
HandleMap g_domains;
HandleMap g_strings;
DomainNaming g_naming = DomainNaming::kPrefixed;
std::atomic<uint64_t> g_next_range_id{0};
ChainedId* g_chained_ids = nullptr;

}  // namespace

bool registry_init(DomainNaming naming) {
  if (!g_arena) g_arena = static_cast<char*>(sys::map_pages(kArenaBytes));
  g_naming = naming;
  return g_arena && g_domains.init(12) && g_strings.init(16);
}

DomainNaming domain_naming() { return g_naming; }

const char* store_text(const char* prefix, const char* text) {
  if (!g_arena) return nullptr;
  const size_t prefix_length = prefix ? strnlen(prefix, kMaxName - 1) : 0;
  const size_t text_length = text ? strnlen(text, kMaxName - 1 - prefix_length) : 0;
  const size_t bytes = prefix_length + text_length + 1;
  const size_t offset = g_arena_used.fetch_add(bytes, std::memory_order_relaxed);
  if (offset + bytes > kArenaBytes) {
    rt::count_drop(format::DropReason::kStringTable);
    return nullptr;
  }
  char* out = g_arena + offset;
  if (prefix_length) memcpy(out, prefix, prefix_length);
  if (text_length) memcpy(out + prefix_length, text, text_length);
  out[prefix_length + text_length] = 0;
  return out;
}

bool domain_insert(const void* handle, const char* prefix) {
  if (g_domains.insert(reinterpret_cast<uintptr_t>(handle), prefix)) return true;
  rt::count_drop(format::DropReason::kStringTable);
  return false;
}

const char* domain_lookup(const void* handle) { return g_domains.lookup(reinterpret_cast<uintptr_t>(handle)); }

bool string_insert(const void* handle, const char* text) {
  if (g_strings.insert(reinterpret_cast<uintptr_t>(handle), text)) return true;
  rt::count_drop(format::DropReason::kStringTable);
  return false;
}

const char* string_lookup(const void* handle) { return g_strings.lookup(reinterpret_cast<uintptr_t>(handle)); }

const char* domain_prefix(const void* domain) {
  if (!domain || g_naming == DomainNaming::kPlain) return "";
  const char* prefix = domain_lookup(domain);
  return prefix ? prefix : "(unknown domain)::";
}

uint64_t next_range_id() { return g_next_range_id.fetch_add(1, std::memory_order_relaxed) + 1; }

bool chained_ids_init() {
  if (!g_chained_ids) g_chained_ids = static_cast<ChainedId*>(sys::map_pages(sizeof(ChainedId) << kChainedIdsLog2));
  return g_chained_ids != nullptr;
}

void chained_id_remember(uint64_t ours, uint64_t theirs) {
  if (!g_chained_ids) return;
  ChainedId& slot = g_chained_ids[ours & ((1u << kChainedIdsLog2) - 1)];
  slot.ours.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.theirs.store(theirs, std::memory_order_relaxed);
  slot.ours.store(ours, std::memory_order_release);
}

bool chained_id_lookup(uint64_t ours, uint64_t* theirs) {
  if (!g_chained_ids) return false;
  ChainedId& slot = g_chained_ids[ours & ((1u << kChainedIdsLog2) - 1)];
  if (slot.ours.load(std::memory_order_acquire) != ours) return false;
  const uint64_t value = slot.theirs.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  // A start 65536 ids later may have reused the slot meanwhile.
  if (slot.ours.load(std::memory_order_relaxed) != ours) return false;
  *theirs = value;
  return true;
}

}  // namespace psc::interpose::nvtx
