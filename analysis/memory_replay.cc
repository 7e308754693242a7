#include "analysis/memory_replay.h"

#include <cstring>

namespace psc {
namespace {

constexpr size_t kInitialSlots = 1024;

// Copies a value with its padding: a member-wise copy of the 45 bytes moves
// them with overlapping 16-byte stores, and the read of `bytes` that follows
// (the free of a just-made allocation) then cannot be forwarded from them and
// stalls. Whole 16-byte pieces forward.
inline void copy_value(LiveAllocation* to, const LiveAllocation& from) {
  std::memcpy(static_cast<void*>(to), &from, sizeof(LiveAllocation));
}

inline uint64_t mix(int16_t device, uint64_t address) {
  // Addresses are aligned (low bits zero) and clustered: a full 64-bit mixer
  // (MurmurHash3's fmix64) spreads them; the high bits index the table.
  uint64_t k = address ^ (static_cast<uint64_t>(static_cast<uint16_t>(device)) << 48);
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

}  // namespace

const char* memory_level_name(MemoryLevel level) { return level == MemoryLevel::kReserved ? "reserved" : "allocated"; }

// ---- LiveTable ------------------------------------------------------------------

LiveTable::LiveTable()
    : keys_(kInitialSlots),
      values_(kInitialSlots),
      mask_(kInitialSlots - 1),
      shift_(64 - __builtin_ctzll(kInitialSlots)) {}

void LiveTable::clear() {
  keys_.assign(kInitialSlots, Key{});
  values_.assign(kInitialSlots, LiveAllocation{});
  mask_ = kInitialSlots - 1;
  shift_ = 64 - __builtin_ctzll(kInitialSlots);
  size_ = 0;
}

size_t LiveTable::index_of(int16_t device, uint64_t address) const {
  return static_cast<size_t>(mix(device, address) >> shift_);
}

void LiveTable::grow() {
  std::vector<Key> old_keys(keys_.size() * 2);
  std::vector<LiveAllocation> old_values(values_.size() * 2);
  old_keys.swap(keys_);
  old_values.swap(values_);
  mask_ = keys_.size() - 1;
  --shift_;
  for (size_t k = 0; k < old_keys.size(); ++k) {
    if (!old_keys[k].used) continue;
    size_t i = index_of(old_keys[k].device, old_keys[k].address);
    while (keys_[i].used) i = (i + 1) & mask_;
    keys_[i] = old_keys[k];
    values_[i] = old_values[k];
  }
}

bool LiveTable::insert(int16_t device, uint64_t address, const LiveAllocation& value, LiveAllocation* replaced) {
  // Load factor at most 1/2 keeps linear probes short.
  if ((size_ + 1) * 2 > keys_.size()) grow();
  size_t i = index_of(device, address);
  while (keys_[i].used) {
    if (keys_[i].address == address && keys_[i].device == device) {
      copy_value(replaced, values_[i]);
      copy_value(&values_[i], value);
      return true;
    }
    i = (i + 1) & mask_;
  }
  keys_[i] = Key{address, device, true};
  copy_value(&values_[i], value);
  ++size_;
  return false;
}

bool LiveTable::erase(int16_t device, uint64_t address, LiveAllocation* removed) {
  size_t i = index_of(device, address);
  while (true) {
    if (!keys_[i].used) return false;
    if (keys_[i].address == address && keys_[i].device == device) break;
    i = (i + 1) & mask_;
  }
  copy_value(removed, values_[i]);
  // Backward-shift deletion: pull later members of the probe run into the hole
  // when their home slot does not lie (cyclically) between the hole and them.
  size_t hole = i;
  size_t j = i;
  while (true) {
    j = (j + 1) & mask_;
    if (!keys_[j].used) break;
    const size_t home = index_of(keys_[j].device, keys_[j].address);
    const bool home_in_gap = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (home_in_gap) continue;
    keys_[hole] = keys_[j];
    copy_value(&values_[hole], values_[j]);
    hole = j;
  }
  keys_[hole].used = false;
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
    const LiveAllocation a{site.ordinal, e.seq, e.time_ns, e.bytes, site.range, site.wave, e.thread, e.memory};
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
