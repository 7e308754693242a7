// Lifetimes: which allocations are live, and when each one ends.
//
// A MemoryReplay takes the alloc/free events of one memory level in trace
// order and keeps the set of live allocations, keyed by (device, address). Its
// memory is O(live allocations), never O(events): an allocation is forgotten
// the moment its lifetime is handed to the sink. Rules (DESIGN.md, event.h):
//   - nested events (made inside another hooked call) and failed ones (no
//     memory changed hands) do not move live bytes; they are counted;
//   - a free matches the live allocation at its (device, address); a free that
//     matches nothing is counted, never fatal; a free of address 0 is a no-op;
//   - an allocation at an address that is already live ends the old one there
//     (a free the recorder lost), counted as "replaced";
//   - a free's own byte count is ignored (hooks may not know it): the
//     allocation's size is what leaves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "format/event.h"

namespace psc {

enum class MemoryLevel : uint8_t { kAllocated = 0, kReserved = 1 };
constexpr int kMemoryLevelCount = 2;
const char* memory_level_name(MemoryLevel level);

inline MemoryLevel memory_level_of(const Event& e) {
  return (e.flags & kFlagReserved) ? MemoryLevel::kReserved : MemoryLevel::kAllocated;
}

// What the analysis knows about an event beyond the record itself.
struct EventSite {
  uint64_t ordinal = 0;  // position in the trace (0-based, every kind counted)
  StringId range;        // the range it is attributed to (see ScopeTracker)
  int32_t wave = -1;     // innermost wave open when it happened, -1 for none
};

struct LiveAllocation {
  uint64_t ordinal;
  uint64_t seq;
  uint64_t time_ns;
  uint64_t bytes;
  StringId range;
  int32_t wave;
  uint32_t thread;
  MemoryKind memory;
};

enum class EndKind : uint8_t {
  kFreed,      // a matching free
  kReplaced,   // another allocation arrived at the same address
  kStillLive,  // live when the trace ended
};

struct EndSite {
  uint64_t ordinal = UINT64_MAX;  // UINT64_MAX for kStillLive
  uint64_t seq = 0;
  uint64_t time_ns = 0;
  StringId range;
  int32_t wave = -1;
  EndKind kind = EndKind::kStillLive;
};

struct Lifetime {
  int16_t device;
  uint64_t address;
  LiveAllocation alloc;
  EndSite end;
};

class LifetimeSink {
 public:
  virtual ~LifetimeSink() = default;
  virtual void on_lifetime(const Lifetime& lifetime) = 0;
};

struct MemoryCounts {
  uint64_t allocs = 0;           // allocations that became live
  uint64_t frees = 0;            // frees that matched a live allocation
  uint64_t nested = 0;           // ignored: made inside another hooked call
  uint64_t failed = 0;           // ignored: the real call failed
  uint64_t unmatched_frees = 0;  // frees of an address that was not live
  uint64_t replaced = 0;         // allocations over a live address (ends the old one)
  uint64_t null_frees = 0;       // frees of address 0
  uint64_t allocated_bytes = 0;  // sum of the sizes of counted allocations
};

// Open-addressing table of live allocations keyed by (device, address).
// Linear probing with backward-shift deletion: no tombstones, so a long trace
// with millions of alloc/free pairs keeps its probe lengths short.
class LiveTable {
 public:
  LiveTable();
  // Inserts or overwrites; returns the previous value's slot content through
  // *replaced (and true) when the key was already live.
  bool insert(int16_t device, uint64_t address, const LiveAllocation& value, LiveAllocation* replaced);
  // Removes the key; returns false when it was not live.
  bool erase(int16_t device, uint64_t address, LiveAllocation* removed);
  size_t size() const { return size_; }

  template <typename F>
  void for_each(F&& f) const {
    for (size_t i = 0; i < keys_.size(); ++i)
      if (keys_[i].used) f(keys_[i].device, keys_[i].address, values_[i]);
  }
  void clear();

 private:
  // Keys apart from values: probing touches 16-byte keys, four to a cache
  // line; the value is read once, on a hit.
  struct Key {
    uint64_t address;
    int16_t device;
    bool used;
  };
  size_t index_of(int16_t device, uint64_t address) const;
  void grow();

  std::vector<Key> keys_;
  std::vector<LiveAllocation> values_;
  size_t mask_;
  int shift_;  // 64 - log2(slots): the hash's top bits index the table
  size_t size_ = 0;
};

class MemoryReplay {
 public:
  explicit MemoryReplay(LifetimeSink* sink = nullptr) : sink_(sink) {}

  enum class Effect { kNone, kAllocated, kFreed };
  // Applies one kAlloc/kFree event; other kinds are kNone.
  Effect apply(const Event& e, const EventSite& site);
  // Ends every allocation still live (kStillLive) and hands it to the sink.
  void finish();

  uint64_t live_bytes() const { return live_bytes_; }
  size_t live_allocations() const { return table_.size(); }
  const MemoryCounts& counts() const { return counts_; }

 private:
  void end(int16_t device, uint64_t address, const LiveAllocation& a, const EndSite& site);

  LifetimeSink* sink_;
  LiveTable table_;
  uint64_t live_bytes_ = 0;
  MemoryCounts counts_;
};

}  // namespace psc
