#include "traces/deferred.h"

#include <algorithm>
#include <unordered_map>

#include "traces/device_address.h"

namespace psc {
namespace {

using Key = DeviceAddress;
using KeyHash = DeviceAddressHash;

constexpr uint64_t kOpen = UINT64_MAX;
uint64_t plus(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// One CUPTI allocation and, when CUPTI saw it, its free.
struct CuptiLife {
  enum class Fate : uint8_t { kOnly, kDeduplicated, kConflicting };
  size_t alloc = 0;        // index into the sorted deferred events
  size_t free = SIZE_MAX;  // SIZE_MAX when CUPTI never reported the free
  uint64_t begin = 0;
  uint64_t end = kOpen;
  uint64_t bytes = 0;
  Fate fate = Fate::kOnly;
};

bool before(const Event& a, const Event& b) {
  if (a.time_ns != b.time_ns) return a.time_ns < b.time_ns;
  return a.seq < b.seq;
}

// Replays the hooks' allocations (every level) and, as each lifetime ends,
// settles the CUPTI allocations at its address. Only a lifetime's bounds are
// kept while it is live.
class HookMatcher : public TraceVisitor {
 public:
  HookMatcher(std::vector<CuptiLife>& lives, const std::unordered_map<Key, std::vector<uint32_t>, KeyHash>& by_key,
              uint64_t event_limit)
      : lives_(lives), by_key_(by_key), limit_(event_limit) {}

  void on_events(const Event* events, size_t count, const TraceMeta&) override {
    for (size_t i = 0; i < count && seen_ < limit_; ++i, ++seen_) {
      const Event& e = events[i];
      if (!is_memory_event(e.kind) || is_deferred(e) || e.api == Api::kCupti) continue;
      if (e.flags & (kFlagNested | kFlagFailed)) continue;
      // Tensors from the C API (psc_record_tensor_event) share addresses with
      // the segments they sit in (a segment's first block): only the segments
      // stand for what CUPTI saw.
      if (e.api == Api::kPscApi) {
        if (e.kind == EventKind::kAlloc) ++hooked_allocs_[0];
        continue;
      }
      const Key key{e.device, e.address};
      if (e.kind == EventKind::kAlloc) {
        ++hooked_allocs_[(e.flags & kFlagReserved) ? 1 : 0];
        auto [it, inserted] = live_.try_emplace(key, Live{e.bytes, e.time_ns});
        if (!inserted) {
          settle(key, it->second, e.time_ns);
          it->second = Live{e.bytes, e.time_ns};
        }
        continue;
      }
      auto it = live_.find(key);
      if (it == live_.end()) continue;
      settle(key, it->second, e.time_ns);
      live_.erase(it);
    }
  }
  void on_end(const TraceMeta& meta, const ReadStatus&) override {
    for (const auto& [key, live] : live_) settle(key, live, kOpen);
    live_.clear();
    header_reserved_ = (meta.header.flags & format::kHeaderReservedLevel) != 0;
  }

  // The level the analysis will read (PeakPass::chosen_level's rule).
  bool reserved_level() const {
    if (hooked_allocs_[0] > 0) return false;
    if (hooked_allocs_[1] > 0) return true;
    return header_reserved_;
  }

 private:
  struct Live {
    uint64_t bytes;
    uint64_t begin;
  };

  void settle(const Key& key, const Live& hook, uint64_t end) {
    auto found = by_key_.find(key);
    if (found == by_key_.end()) return;
    const std::vector<uint32_t>& at = found->second;
    // CUPTI lifetimes at one address never overlap each other: sorted by
    // begin, they are sorted by end too. Look only at those near the hook's.
    auto lo = std::partition_point(at.begin(), at.end(),
                                   [&](uint32_t i) { return plus(lives_[i].end, kMatchToleranceNs) < hook.begin; });
    CuptiLife* best = nullptr;
    uint64_t best_distance = UINT64_MAX;
    for (auto it = lo; it != at.end() && lives_[*it].begin <= plus(end, kMatchToleranceNs); ++it) {
      CuptiLife& c = lives_[*it];
      if (c.fate != CuptiLife::Fate::kOnly || c.bytes != hook.bytes) continue;
      const uint64_t distance = c.begin > hook.begin ? c.begin - hook.begin : hook.begin - c.begin;
      if (distance < best_distance) {
        best = &c;
        best_distance = distance;
      }
    }
    if (best) best->fate = CuptiLife::Fate::kDeduplicated;
    // Anything else truly overlapping the hook's allocation at this address
    // would collide with it in a replay keyed by address.
    for (auto it = lo; it != at.end() && lives_[*it].begin < end; ++it) {
      CuptiLife& c = lives_[*it];
      if (c.fate == CuptiLife::Fate::kOnly && hook.begin < c.end) c.fate = CuptiLife::Fate::kConflicting;
    }
  }

  std::vector<CuptiLife>& lives_;
  const std::unordered_map<Key, std::vector<uint32_t>, KeyHash>& by_key_;
  std::unordered_map<Key, Live, KeyHash> live_;
  uint64_t limit_;
  uint64_t seen_ = 0;
  uint64_t hooked_allocs_[2] = {0, 0};
  bool header_reserved_ = false;
};

}  // namespace

// ---- DeferredCollector ------------------------------------------------------------

void DeferredCollector::on_begin(const TraceMeta& meta) {
  if (inner_) inner_->on_begin(meta);
}

void DeferredCollector::on_events(const Event* events, size_t count, const TraceMeta& meta) {
  events_ += count;
  for (size_t i = 0; i < count; ++i) {
    if (is_deferred(events[i])) deferred_.push_back(events[i]);
    if (events[i].kind == EventKind::kCounter && !device_samples_)
      device_samples_ = meta.string(events[i].name) == "device_used_bytes";
  }
  if (inner_) inner_->on_events(events, count, meta);
}

void DeferredCollector::on_end(const TraceMeta& meta, const ReadStatus& status) {
  if (found()) strings_ = meta.strings;
  if (inner_) inner_->on_end(meta, status);
}

// ---- build_placement --------------------------------------------------------------

std::shared_ptr<const DeferredPlacement> build_placement(const std::string& path, std::vector<Event> deferred,
                                                         std::vector<std::string> strings, uint64_t event_limit) {
  auto placement = std::make_shared<DeferredPlacement>();
  DeferredPlacement& p = *placement;
  p.strings = std::move(strings);
  p.counts.deferred_events = deferred.size();
  std::stable_sort(deferred.begin(), deferred.end(), before);

  // CUPTI allocations paired with their frees, in time order per address.
  std::vector<CuptiLife> lives;
  std::vector<size_t> life_of_free(deferred.size(), SIZE_MAX);
  std::unordered_map<Key, size_t, KeyHash> open;
  std::unordered_map<Key, std::vector<uint32_t>, KeyHash> by_key;
  for (size_t i = 0; i < deferred.size(); ++i) {
    const Event& e = deferred[i];
    if (!is_memory_event(e.kind)) continue;
    const Key key{e.device, e.address};
    if (e.kind == EventKind::kAlloc) {
      ++p.counts.cupti_allocs;
      if (auto it = open.find(key); it != open.end()) lives[it->second].end = e.time_ns;  // its free was lost
      CuptiLife life;
      life.alloc = i;
      life.begin = e.time_ns;
      life.bytes = e.bytes;
      open[key] = lives.size();
      by_key[key].push_back(static_cast<uint32_t>(lives.size()));
      lives.push_back(life);
      continue;
    }
    ++p.counts.cupti_frees;
    auto it = open.find(key);
    if (it == open.end()) continue;  // unpaired: withheld below
    lives[it->second].free = i;
    lives[it->second].end = e.time_ns;
    life_of_free[i] = it->second;
    open.erase(it);
  }

  HookMatcher matcher(lives, by_key, event_limit);
  if (!lives.empty()) read_trace(path, matcher);
  const bool reserved = matcher.reserved_level();
  p.reserved_level = reserved;

  std::vector<size_t> life_of_alloc(deferred.size(), SIZE_MAX);
  for (size_t l = 0; l < lives.size(); ++l) life_of_alloc[lives[l].alloc] = l;
  for (size_t i = 0; i < deferred.size(); ++i) {
    Event e = deferred[i];
    if (!is_memory_event(e.kind)) {
      ++p.counts.other_deferred;
      p.events.push_back(e);
      continue;
    }
    const size_t l = e.kind == EventKind::kAlloc ? life_of_alloc[i] : life_of_free[i];
    if (l == SIZE_MAX) {
      ++p.counts.unpaired_frees;
      ++p.counts.withheld;
      continue;
    }
    const CuptiLife& life = lives[l];
    if (life.fate != CuptiLife::Fate::kOnly) {
      if (e.kind == EventKind::kAlloc)
        ++(life.fate == CuptiLife::Fate::kDeduplicated ? p.counts.deduplicated : p.counts.conflicting);
      ++p.counts.withheld;
      continue;
    }
    if (e.kind == EventKind::kAlloc) {
      ++p.counts.cupti_only;
      p.counts.cupti_only_bytes += e.bytes;
    }
    e.flags = static_cast<uint8_t>(reserved ? (e.flags | kFlagReserved) : (e.flags & ~kFlagReserved));
    p.events.push_back(e);
  }
  return placement;
}

std::shared_ptr<const DeferredPlacement> build_placement(const std::string& path) {
  DeferredCollector collector;
  read_trace(path, collector);
  if (!collector.found()) return nullptr;
  return build_placement(path, std::move(collector.deferred()), collector.strings(), collector.events());
}

// ---- PlacedReader -----------------------------------------------------------------

void PlacedReader::sync_meta(const TraceMeta& meta) {
  meta_.path = meta.path;
  meta_.header = meta.header;
  meta_.run = meta.run;
  meta_.threads = meta.threads;
  meta_.drops = meta.drops;
  meta_.late_events = meta.late_events;
  meta_.command = meta.command;
  meta_.clean_end = meta.clean_end;
  // The file may have grown since the placement was built.
  for (size_t i = meta_.strings.size(); i < meta.strings.size(); ++i) meta_.strings.push_back(meta.strings[i]);
}

void PlacedReader::on_begin(const TraceMeta& meta) {
  meta_ = meta;
  if (placement_.strings.size() > meta_.strings.size()) meta_.strings = placement_.strings;
  inner_.on_begin(meta_);
}

void PlacedReader::on_events(const Event* events, size_t count, const TraceMeta& meta) {
  batch_.clear();
  const std::vector<Event>& placed = placement_.events;
  for (size_t i = 0; i < count; ++i) {
    const Event& e = events[i];
    if (is_deferred(e)) continue;
    while (next_ < placed.size() && placed[next_].time_ns < e.time_ns) {
      batch_.push_back(placed[next_++]);
      batch_.back().seq = e.seq;
    }
    batch_.push_back(e);
    last_seq_ = e.seq;
  }
  sync_meta(meta);
  if (!batch_.empty()) inner_.on_events(batch_.data(), batch_.size(), meta_);
}

void PlacedReader::on_end(const TraceMeta& meta, const ReadStatus& status) {
  sync_meta(meta);
  const std::vector<Event>& placed = placement_.events;
  if (next_ < placed.size()) {
    batch_.assign(placed.begin() + static_cast<std::ptrdiff_t>(next_), placed.end());
    if (last_seq_)
      for (Event& e : batch_) e.seq = last_seq_;
    inner_.on_events(batch_.data(), batch_.size(), meta_);
  }
  next_ = placed.size();
  inner_.on_end(meta_, status);
}

ReadStatus read_placed(const std::string& path, const DeferredPlacement* placement, TraceVisitor& visitor) {
  if (!placement || placement->empty()) return read_trace(path, visitor);
  PlacedReader reader(*placement, visitor);
  return read_trace(path, reader);
}

ReadStatus read_trace_placed(const std::string& path, TraceVisitor& visitor) {
  const std::shared_ptr<const DeferredPlacement> placement = build_placement(path);
  return read_placed(path, placement.get(), visitor);
}

}  // namespace psc
