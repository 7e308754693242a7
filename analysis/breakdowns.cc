#include "analysis/breakdowns.h"

#include <algorithm>
#include <numeric>

namespace psc {

SnapshotBreakdowns::SnapshotBreakdowns(const BreakdownInputs& inputs)
    : in_(inputs),
      timeline_(inputs.first_time_ns, inputs.last_time_ns, inputs.timeline_points),
      groups_(inputs.snapshot_ordinals.size() + inputs.found_snapshots) {
  std::vector<size_t> order(in_.snapshot_ordinals.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return in_.snapshot_ordinals[a] < in_.snapshot_ordinals[b]; });
  for (size_t i : order) {
    sorted_ordinals_.push_back(in_.snapshot_ordinals[i]);
    sorted_snapshot_.push_back(i);
  }
}

void SnapshotBreakdowns::on_snapshot_moved(size_t snapshot, uint64_t ordinal) {
  if (snapshot >= groups_.size()) return;
  for (Moving& m : moving_) {
    if (m.snapshot != snapshot) continue;
    m.ordinal = ordinal;
    m.held.clear();
    return;
  }
  moving_.push_back(Moving{snapshot, ordinal, {}});
}

void SnapshotBreakdowns::on_snapshot_final(size_t snapshot) {
  for (auto it = moving_.begin(); it != moving_.end(); ++it)
    if (it->snapshot == snapshot) return stop(it);
}

// Its held lifetimes classified and added; later ones find it where known
// snapshots are.
void SnapshotBreakdowns::stop(std::vector<Moving>::iterator moving) {
  Groups& groups = groups_[moving->snapshot];
  for (const Held& h : moving->held) {
    const Attribution a = in_.classifier->classify(h.facts);
    GroupTotal& total = groups[GroupKey{h.range, a.layer, a.category, h.source}];
    total.bytes += h.facts.bytes;
    ++total.allocations;
  }
  add_known(moving->snapshot, moving->ordinal);
  moving_.erase(moving);
}

void SnapshotBreakdowns::add_known(size_t snapshot, uint64_t ordinal) {
  const auto at = std::upper_bound(sorted_ordinals_.begin(), sorted_ordinals_.end(), ordinal);
  sorted_snapshot_.insert(sorted_snapshot_.begin() + (at - sorted_ordinals_.begin()), snapshot);
  sorted_ordinals_.insert(at, ordinal);
}

// Its facts now: a range name whose text arrives later reads as "outside"
// now, as the classification at this point always read it.
void SnapshotBreakdowns::hold(LifetimeView& view, uint32_t source) {
  const Lifetime& l = view.lifetime;
  for (Moving& m : moving_)
    if (l.alloc.ordinal <= m.ordinal && m.ordinal < l.end.ordinal)
      m.held.push_back(Held{view.facts(), l.alloc.range.value, source});
}

void SnapshotBreakdowns::on_memory_event(const MemoryEventView& m) {
  if (m.effect == MemoryReplay::Effect::kNone) return;
  if (m.effect == MemoryReplay::Effect::kAllocated && m.event.api == Api::kCupti)
    cupti_sources_[m.site.ordinal] = m.event.name;
  timeline_.record(m.event.time_ns, m.replay.live_bytes());
}

void SnapshotBreakdowns::on_lifetime(LifetimeView& view) {
  const Lifetime& l = view.lifetime;
  uint32_t source = 0;
  if (!cupti_sources_.empty()) {
    if (auto it = cupti_sources_.find(l.alloc.ordinal); it != cupti_sources_.end()) {
      source = it->second.value + 1;
      cupti_sources_.erase(it);
    }
  }
  if (!moving_.empty()) hold(view, source);
  // Most lifetimes cover no snapshot: find that out before classifying.
  auto lo = std::lower_bound(sorted_ordinals_.begin(), sorted_ordinals_.end(), l.alloc.ordinal);
  if (lo == sorted_ordinals_.end() || *lo >= l.end.ordinal) return;
  const Attribution& a = view.attribution();
  const GroupKey key{l.alloc.range.value, a.layer, a.category, source};
  for (auto it = lo; it != sorted_ordinals_.end() && *it < l.end.ordinal; ++it) {
    GroupTotal& total = groups_[sorted_snapshot_[static_cast<size_t>(it - sorted_ordinals_.begin())]][key];
    total.bytes += l.alloc.bytes;
    ++total.allocations;
  }
}

namespace {

// Dense rows 0..max layer, so a table reads as the model's layers; a hostile or
// odd range name with a huge layer number gets rows only for layers present.
constexpr int32_t kMaxDenseLayers = 4096;

std::vector<LayerRow> layer_rows(const std::vector<LiveGroup>& groups) {
  std::vector<int32_t> present;
  for (const LiveGroup& g : groups)
    if (g.layer >= 0) present.push_back(g.layer);
  std::sort(present.begin(), present.end());
  present.erase(std::unique(present.begin(), present.end()), present.end());
  if (!present.empty() && present.back() < kMaxDenseLayers) {
    present.resize(static_cast<size_t>(present.back()) + 1);
    std::iota(present.begin(), present.end(), 0);
  }
  std::vector<LayerRow> rows(present.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i].layer = present[i];
  for (const LiveGroup& g : groups) {
    if (g.layer < 0) continue;
    auto it = std::lower_bound(present.begin(), present.end(), g.layer);
    LayerRow& row = rows[static_cast<size_t>(it - present.begin())];
    switch (g.category) {
      case Category::kBoundary: row.boundary_bytes += g.bytes; break;
      case Category::kAdapterGradient: row.adapter_gradient_bytes += g.bytes; break;
      case Category::kWorkspace: row.workspace_bytes += g.bytes; break;
      default: row.other_bytes += g.bytes; break;
    }
  }
  return rows;
}

}  // namespace

void finish_breakdown(LiveBreakdown* b) {
  std::sort(b->groups.begin(), b->groups.end(), [](const LiveGroup& x, const LiveGroup& y) {
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    if (x.range != y.range) return x.range < y.range;
    if (x.layer != y.layer) return x.layer < y.layer;
    if (x.category != y.category) return x.category < y.category;
    if (x.cupti_only != y.cupti_only) return y.cupti_only;
    return x.source < y.source;
  });
  b->layers = layer_rows(b->groups);
}

LiveBreakdown SnapshotBreakdowns::breakdown(const Groups& groups, const TraceMeta& meta) const {
  LiveBreakdown b;
  for (const auto& [key, total] : groups) {
    b.bytes += total.bytes;
    b.allocations += total.allocations;
    b.category_bytes[static_cast<size_t>(key.category)] += total.bytes;
    b.groups.push_back(LiveGroup{std::string(meta.string(StringId{key.range})), key.layer, key.category, total.bytes,
                                 total.allocations, key.source != 0,
                                 key.source ? std::string(meta.string(StringId{key.source - 1})) : std::string()});
  }
  finish_breakdown(&b);
  return b;
}

void SnapshotBreakdowns::on_finish(const TraceMeta& meta) {
  while (!moving_.empty()) stop(moving_.begin());
  breakdowns_.clear();
  for (const Groups& g : groups_) breakdowns_.push_back(breakdown(g, meta));
}

}  // namespace psc
