// A hash map in one flat array, for the per-event tables of a trace's reads
// (an exporter's live allocations, a pass's birth indices): open addressing,
// linear probing, backward-shift deletion (no tombstones, so millions of
// insert/erase pairs keep probes short), load factor at most 1/2.
//
// Against std::unordered_map, whose every insert allocates a node and every
// lookup follows a pointer to it, a lookup here touches one slot, or a few
// neighbouring ones. Iteration order is the table's: callers that need an
// order sort.
//
// Hash must spread keys over all 64 bits: the top bits index the table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace psc {

// MurmurHash3's 64-bit finalizer: aligned, clustered addresses and small
// counters alike come out spread over every bit.
inline uint64_t mix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

struct Mix64Hash {
  uint64_t operator()(uint64_t k) const { return mix64(k); }
};

template <typename Key, typename Value, typename Hash>
class FlatMap {
 public:
  FlatMap() { reset(); }

  size_t size() const { return size_; }

  // The value at `key`, or nullptr. Valid until the next insert or erase.
  Value* find(const Key& key) {
    for (size_t i = index_of(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.key == key) return &s.value;
    }
  }

  // Stores `value` at `key`, over any value there. Returns where it is.
  Value* insert(const Key& key, const Value& value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    size_t i = index_of(key);
    while (slots_[i].used) {
      if (slots_[i].key == key) {
        slots_[i].value = value;
        return &slots_[i].value;
      }
      i = (i + 1) & mask_;
    }
    slots_[i] = Slot{key, value, true};
    ++size_;
    return &slots_[i].value;
  }

  // Removes `key`, its value copied to *removed; false when it is not there.
  bool erase(const Key& key, Value* removed) {
    size_t i = index_of(key);
    for (;; i = (i + 1) & mask_) {
      if (!slots_[i].used) return false;
      if (slots_[i].key == key) break;
    }
    *removed = std::move(slots_[i].value);
    // Pull later members of the probe run into the hole unless their home
    // slot lies (cyclically) between the hole and them.
    size_t hole = i;
    for (size_t j = (i + 1) & mask_; slots_[j].used; j = (j + 1) & mask_) {
      const size_t home = index_of(slots_[j].key);
      const bool home_in_gap = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (home_in_gap) continue;
      slots_[hole] = std::move(slots_[j]);
      hole = j;
    }
    slots_[hole].used = false;
    --size_;
    return true;
  }

  // f(key, value) for every entry, in the table's order.
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.used) f(s.key, s.value);
  }

 private:
  static constexpr size_t kInitialSlots = 64;
  struct Slot {
    Key key{};
    Value value{};
    bool used = false;
  };

  size_t index_of(const Key& key) const { return static_cast<size_t>(Hash{}(key) >> shift_); }

  void reset() {
    slots_.assign(kInitialSlots, Slot{});
    mask_ = kInitialSlots - 1;
    shift_ = 64 - __builtin_ctzll(kInitialSlots);
    size_ = 0;
  }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    --shift_;
    for (Slot& s : old) {
      if (!s.used) continue;
      size_t i = index_of(s.key);
      while (slots_[i].used) i = (i + 1) & mask_;
      slots_[i] = std::move(s);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 0;
  size_t size_ = 0;
};

}  // namespace psc
