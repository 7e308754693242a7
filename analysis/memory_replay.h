// Lifetimes: which allocations are live, and when each one ends.
//
// A MemoryReplay takes the alloc/free events of one memory level in trace
// order and keeps the set of live allocations, keyed by (device, address). Its
// memory is O(live allocations), never O(events): an allocation is forgotten
// the moment its lifetime is handed to the sink. Rules (format/event.h; docs/report.md,
// "How live bytes are counted"):
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
#include "traces/device_address.h"

namespace psc {

enum class MemoryLevel : uint8_t { kAllocated = 0, kReserved = 1 };
constexpr int kMemoryLevelCount = 2;
const char* memory_level_name(MemoryLevel level);

inline MemoryLevel other_level(MemoryLevel level) {
  return level == MemoryLevel::kAllocated ? MemoryLevel::kReserved : MemoryLevel::kAllocated;
}

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
  // How many allocations became live before it in its replay (0-based): an
  // index a pass can keep per allocation without a table of its own.
  uint64_t birth;
  StringId range;
  int32_t wave;
  uint32_t thread;
  MemoryKind memory;
  // The live table's own: how far the slot holding it lies past its home
  // slot (kFarFromHome when that far or farther). Whatever a caller sets is
  // overwritten when the value is stored.
  uint8_t probe_distance;
  int16_t device;
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
//
// A slot is one cache line, key and value together: with a working set of
// thousands of live blocks every lookup misses the cache, and a hit then costs
// one line, not two. prefetch() lets a caller that sees events ahead (a
// batch) start that miss early.
//
// Where each allocation sits is part of the outputs: for_each visits slots in
// order, so MemoryReplay::finish hands the allocations still live over in
// that order, and liveness pairs a cold wave's survivors with a warm wave's
// in the order it is given them (estimator/wave_rules.cc). A table that
// places them otherwise (tombstones, Robin Hood, another growth rule) changes
// what calibrate and report print on some traces.
class LiveTable {
 public:
  LiveTable();
  // Inserts or overwrites; returns the previous value's slot content through
  // *replaced (and true) when the key was already live. The value's device
  // is set to `device`; its ordinal must not be UINT64_MAX (a free slot's).
  bool insert(int16_t device, uint64_t address, const LiveAllocation& value, LiveAllocation* replaced);
  // Removes the key; returns false when it was not live.
  bool erase(int16_t device, uint64_t address, LiveAllocation* removed);
  size_t size() const { return size_; }
  void prefetch(int16_t device, uint64_t address) const {
    // The slot and the next one: a free's backward shift reads on until an
    // empty slot. (Past the table's end, a prefetch loads nothing and never faults.)
    const Slot* slot = slots_.data() + index_of(device, address);
#if defined(__x86_64__)
    // GCC drops a __builtin_prefetch here (it has no effect it must keep).
    asm volatile("prefetcht0 %0" : : "m"(*slot));
    asm volatile("prefetcht0 %0" : : "m"(*reinterpret_cast<const char*>(slot + 1)));
#else
    __builtin_prefetch(slot);
    __builtin_prefetch(slot + 1);
#endif
  }

  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.used()) f(s.value.device, s.address, s.value);
  }
  void clear();

 private:
  // The key's device is the value's own; a slot is free when its value's
  // ordinal is kFree (no event's: ordinals count a trace's events).
  static constexpr uint64_t kFree = UINT64_MAX;
  // Each value keeps its slot's distance from its home slot (probe_distance),
  // so that a free's backward shift, which asks it of every member of the
  // probe run after the hole, need not hash their keys again: the slots
  // stay where they were (the order for_each visits is unchanged).
  static constexpr uint8_t kFarFromHome = UINT8_MAX;
  static uint8_t stored_distance(size_t distance) {
    return static_cast<uint8_t>(distance < kFarFromHome ? distance : kFarFromHome);
  }
  struct alignas(64) Slot {
    uint64_t address = 0;
    LiveAllocation value = free_value();
    bool used() const { return value.ordinal != kFree; }
  };
  static constexpr LiveAllocation free_value() {
    LiveAllocation v{};
    v.ordinal = kFree;
    return v;
  }
  static_assert(sizeof(Slot) == 64, "a slot is one cache line");

  // The high bits of the mixed key index the table.
  size_t index_of(int16_t device, uint64_t address) const {
    return static_cast<size_t>(device_address_mix(device, address) >> shift_);
  }
  void grow();

  std::vector<Slot> slots_;
  size_t mask_;
  int shift_;  // 64 - log2(slots): the hash's top bits index the table
  size_t size_ = 0;
};

class MemoryReplay {
 public:
  explicit MemoryReplay(LifetimeSink* sink = nullptr) : sink_(sink) {}

  enum class Effect { kNone, kAllocated, kFreed };
  // Whether an event is an allocation or free that moves memory at all: a
  // call that failed, or one made inside another hooked call, does not (what
  // apply() counts as failed and nested).
  static bool moves_memory(const Event& e) {
    return is_memory_event(e.kind) && !(e.flags & (kFlagFailed | kFlagNested));
  }
  // Applies one kAlloc/kFree event; other kinds are kNone.
  Effect apply(const Event& e, const EventSite& site);
  // Starts loading what apply() will touch for this event (any kind).
  void prefetch(const Event& e) const {
    if (is_memory_event(e.kind)) table_.prefetch(e.device, e.address);
  }
  // Ends every allocation still live (kStillLive) and hands it to the sink.
  void finish();

  uint64_t live_bytes() const { return live_bytes_; }
  size_t live_allocations() const { return table_.size(); }
  // Every allocation live now, in no order: f(device, address, allocation).
  template <typename F>
  void for_each_live(F&& f) const {
    table_.for_each(f);
  }
  const MemoryCounts& counts() const { return counts_; }

 private:
  void end(int16_t device, uint64_t address, const LiveAllocation& a, const EndSite& site);

  LifetimeSink* sink_;
  LiveTable table_;
  uint64_t live_bytes_ = 0;
  MemoryCounts counts_;
};

}  // namespace psc
