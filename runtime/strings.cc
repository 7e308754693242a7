#include "runtime/strings.h"

#include <atomic>
#include <cstring>

#include "runtime/drops.h"
#include "runtime/sys.h"

namespace psc::rt {
namespace {

constexpr uint32_t kSlots = 1u << 16;      // open-addressing table
constexpr uint32_t kMaxIds = kSlots / 2;   // keep the table at most half full
constexpr size_t kArenaBytes = 32u << 20;  // text storage, touched lazily
constexpr size_t kMaxText = 64u << 10;     // longer payloads are cut
constexpr uint32_t kClaimed = UINT32_MAX;
constexpr int kClaimSpinLimit = 1 << 20;  // a slot claimed by a thread that died (fork) is skipped

struct Slot {
  std::atomic<uint32_t> id;  // 0 empty, kClaimed while being filled, else the id
  uint32_t length;
  uint64_t hash;
  uint64_t offset;  // into the arena
};

Slot* g_slots = nullptr;
std::atomic<uint32_t>* g_slot_of_id = nullptr;  // id -> slot index + 1, 0 until published
char* g_arena = nullptr;
std::atomic<uint64_t> g_arena_used{0};
std::atomic<uint32_t> g_next_id{0};

uint64_t hash_text(const char* s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(s[i])) * 1099511628211ull;
  return h | 1;
}

bool same(const Slot& slot, uint64_t hash, const char* text, size_t n) {
  return slot.hash == hash && slot.length == n && std::memcmp(g_arena + slot.offset, text, n) == 0;
}

// Waits (bounded) while another thread fills the slot; returns the published id or 0.
uint32_t wait_published(Slot& slot) {
  for (int spin = 0; spin < kClaimSpinLimit; ++spin) {
    uint32_t id = slot.id.load(std::memory_order_acquire);
    if (id != kClaimed) return id;
    __builtin_ia32_pause();
  }
  return 0;
}

uint32_t publish(Slot& slot, uint32_t index, uint64_t hash, const char* text, size_t n) {
  const uint64_t offset = g_arena_used.fetch_add(n + 1, std::memory_order_relaxed);
  const uint32_t id = offset + n + 1 <= kArenaBytes ? g_next_id.fetch_add(1, std::memory_order_relaxed) + 1 : 0;
  if (id == 0 || id > kMaxIds) {
    slot.id.store(0, std::memory_order_release);  // give the slot back
    count_drop(format::DropReason::kStringTable);
    return 0;
  }
  std::memcpy(g_arena + offset, text, n);
  g_arena[offset + n] = 0;
  slot.length = static_cast<uint32_t>(n);
  slot.hash = hash;
  slot.offset = offset;
  slot.id.store(id, std::memory_order_release);
  g_slot_of_id[id].store(index + 1, std::memory_order_release);
  return id;
}

}  // namespace

bool strings_init() {
  if (g_slots) return true;
  g_slots = static_cast<Slot*>(sys::map_pages(sizeof(Slot) * kSlots));
  g_slot_of_id = static_cast<std::atomic<uint32_t>*>(sys::map_pages(sizeof(uint32_t) * (kMaxIds + 2)));
  g_arena = static_cast<char*>(sys::map_pages(kArenaBytes));
  return g_slots && g_slot_of_id && g_arena;
}

uint32_t intern(const char* text) {
  if (!text || !*text || !g_slots) return 0;
  size_t n = strnlen(text, kMaxText);
  const uint64_t hash = hash_text(text, n);
  for (uint32_t probe = 0; probe < kSlots; ++probe) {
    const uint32_t index = static_cast<uint32_t>(hash + probe) & (kSlots - 1);
    Slot& slot = g_slots[index];
    uint32_t id = slot.id.load(std::memory_order_acquire);
    if (id == 0) {
      uint32_t expected = 0;
      if (slot.id.compare_exchange_strong(expected, kClaimed, std::memory_order_acquire)) {
        return publish(slot, index, hash, text, n);
      }
      id = expected;
    }
    if (id == kClaimed) id = wait_published(slot);
    if (id != 0 && id != kClaimed && same(slot, hash, text, n)) return id;
  }
  count_drop(format::DropReason::kStringTable);
  return 0;
}

uint32_t strings_allocated() {
  uint32_t n = g_next_id.load(std::memory_order_acquire);
  return n > kMaxIds ? kMaxIds : n;
}

const char* string_text(uint32_t id, size_t* length) {
  if (id == 0 || id > kMaxIds || !g_slot_of_id) return nullptr;
  uint32_t index = g_slot_of_id[id].load(std::memory_order_acquire);
  if (index == 0) return nullptr;
  const Slot& slot = g_slots[index - 1];
  *length = slot.length;
  return g_arena + slot.offset;
}

}  // namespace psc::rt
