#include "analysis/memory_replay.h"

#include <cstring>
#include <stdexcept>

namespace psc {
namespace {

constexpr size_t kInitialSlots = 1024;

// Copies a value with its padding: a member-wise copy of the 55 bytes moves
// them with overlapping 16-byte stores, and the read of `bytes` that follows
// (the free of a just-made allocation) then cannot be forwarded from them and
// stalls. Whole 16-byte pieces forward.
inline void copy_value(LiveAllocation* to, const LiveAllocation& from) {
  std::memcpy(static_cast<void*>(to), &from, sizeof(LiveAllocation));
}

}  // namespace

const char* memory_level_name(MemoryLevel level) { return level == MemoryLevel::kReserved ? "reserved" : "allocated"; }

// ---- LiveTable ------------------------------------------------------------------

LiveTable::LiveTable() : slots_(kInitialSlots), mask_(kInitialSlots - 1), shift_(64 - __builtin_ctzll(kInitialSlots)) {}

void LiveTable::clear() {
  slots_.assign(kInitialSlots, Slot{});
  mask_ = kInitialSlots - 1;
  shift_ = 64 - __builtin_ctzll(kInitialSlots);
  size_ = 0;
}

void LiveTable::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  mask_ = slots_.size() - 1;
  --shift_;
  for (const Slot& s : old) {
    if (!s.used()) continue;
    const size_t home = index_of(s.value.device, s.address);
    size_t i = home;
    while (slots_[i].used()) i = (i + 1) & mask_;
    slots_[i] = s;
    slots_[i].value.probe_distance = stored_distance((i - home) & mask_);
  }
}

bool LiveTable::insert(int16_t device, uint64_t address, const LiveAllocation& value, LiveAllocation* replaced) {
  if (value.ordinal == kFree) throw std::invalid_argument("LiveTable::insert: ordinal UINT64_MAX marks a free slot");
  // Load factor at most 1/2 keeps linear probes short.
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const size_t home = index_of(device, address);
  size_t i = home;
  while (slots_[i].used()) {
    Slot& s = slots_[i];
    if (s.address == address && s.value.device == device) {
      const uint8_t distance = s.value.probe_distance;
      copy_value(replaced, s.value);
      copy_value(&s.value, value);
      s.value.device = device;
      s.value.probe_distance = distance;
      return true;
    }
    i = (i + 1) & mask_;
  }
  Slot& s = slots_[i];
  s.address = address;
  copy_value(&s.value, value);
  s.value.device = device;
  s.value.probe_distance = stored_distance((i - home) & mask_);
  ++size_;
  return false;
}

bool LiveTable::erase(int16_t device, uint64_t address, LiveAllocation* removed) {
  size_t i = index_of(device, address);
  while (true) {
    const Slot& s = slots_[i];
    if (!s.used()) return false;
    if (s.address == address && s.value.device == device) break;
    i = (i + 1) & mask_;
  }
  copy_value(removed, slots_[i].value);
  // Backward-shift deletion: pull later members of the probe run into the hole
  // when their home slot does not lie (cyclically) between the hole and them.
  size_t hole = i;
  size_t j = i;
  while (true) {
    j = (j + 1) & mask_;
    if (!slots_[j].used()) break;
    // Its home lies in (hole, j] when it sits fewer than j - hole slots past
    // it: its kept distance spares the key's hash here.
    const size_t gap = (j - hole) & mask_;
    size_t distance = slots_[j].value.probe_distance;
    if (distance == kFarFromHome) distance = (j - index_of(slots_[j].value.device, slots_[j].address)) & mask_;
    if (distance < gap) continue;
    slots_[hole] = slots_[j];
    slots_[hole].value.probe_distance = stored_distance(distance - gap);
    hole = j;
  }
  slots_[hole].value.ordinal = kFree;
  --size_;
  return true;
}

// ---- MemoryReplay ----------------------------------------------------------------

void MemoryReplay::end(int16_t device, uint64_t address, const LiveAllocation& a, const EndSite& site) {
  live_bytes_ -= a.bytes;
  if (sink_) sink_->on_lifetime(Lifetime{device, address, a, site});
}

MemoryReplay::Effect MemoryReplay::apply(const Event& e, const EventSite& site) {
  if (!is_memory_event(e.kind)) return Effect::kNone;
  if (e.flags & kFlagFailed) {
    ++counts_.failed;
    return Effect::kNone;
  }
  if (e.flags & kFlagNested) {
    ++counts_.nested;
    return Effect::kNone;
  }
  if (e.kind == EventKind::kAlloc) {
    const LiveAllocation a{site.ordinal, e.seq,    e.time_ns, e.bytes, counts_.allocs, site.range,
                           site.wave,    e.thread, e.memory,  0,       e.device};
    LiveAllocation old;
    if (table_.insert(e.device, e.address, a, &old)) {
      ++counts_.replaced;
      end(e.device, e.address, old, EndSite{site.ordinal, e.seq, e.time_ns, site.range, site.wave, EndKind::kReplaced});
    }
    ++counts_.allocs;
    counts_.allocated_bytes += e.bytes;
    live_bytes_ += e.bytes;
    return Effect::kAllocated;
  }
  if (e.address == 0) {
    ++counts_.null_frees;
    return Effect::kNone;
  }
  LiveAllocation a;
  if (!table_.erase(e.device, e.address, &a)) {
    ++counts_.unmatched_frees;
    return Effect::kNone;
  }
  ++counts_.frees;
  end(e.device, e.address, a, EndSite{site.ordinal, e.seq, e.time_ns, site.range, site.wave, EndKind::kFreed});
  return Effect::kFreed;
}

void MemoryReplay::finish() {
  // Hand the survivors over before clearing, so the sink sees a consistent
  // live_bytes() that falls to zero.
  std::vector<Lifetime> survivors;
  survivors.reserve(table_.size());
  table_.for_each([&](int16_t device, uint64_t address, const LiveAllocation& a) {
    survivors.push_back(Lifetime{device, address, a, EndSite{}});
  });
  table_.clear();
  for (const Lifetime& l : survivors) end(l.device, l.address, l.alloc, l.end);
}

}  // namespace psc
