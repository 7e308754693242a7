#include "analysis/step_growth.h"

#include <algorithm>

namespace psc {

bool StepGrowthObserver::ends_step(StringId name, const TraceMeta& meta) {
  if (name.empty()) return false;
  if (auto it = step_names_.find(name.value); it != step_names_.end()) return it->second;
  // A string that has not arrived (the recorder's table was full) is no step,
  // and is not cached: its text may still come.
  if (name.value >= meta.strings.size()) return false;
  const bool step = parser_->ends_step(meta.string(name));
  step_names_.emplace(name.value, step);
  return step;
}

void StepGrowthObserver::on_event(const Event& e, uint64_t, const ScopeTracker& scope, const TraceMeta& meta) {
  switch (e.kind) {
    case EventKind::kRangePush:
    case EventKind::kRangeStart:
      if (ends_step(e.name, meta)) ++open_steps_;
      return;
    case EventKind::kRangePop:
    case EventKind::kRangeEnd:
      if (!ends_step(scope.closing_range(e), meta)) return;
      if (open_steps_ > 0) --open_steps_;
      if (open_steps_ == 0) step_end(e);  // the outermost step range
      return;
    default: return;
  }
}

void StepGrowthObserver::on_memory_event(const MemoryEventView& m) {
  if (m.effect != MemoryReplay::Effect::kAllocated) return;
  RangeState& r = ranges_[m.site.range.value];
  r.live_bytes += m.event.bytes;
  ++r.live_allocations;
}

void StepGrowthObserver::on_lifetime(LifetimeView& view) {
  const Lifetime& l = view.lifetime;
  if (l.end.kind == EndKind::kStillLive) return;
  auto it = ranges_.find(l.alloc.range.value);
  if (it == ranges_.end()) return;
  RangeState& r = it->second;
  r.live_bytes -= std::min(r.live_bytes, l.alloc.bytes);
  r.live_allocations -= std::min<uint64_t>(r.live_allocations, 1);
}

void StepGrowthObserver::step_end(const Event& e) {
  StepEnd end;
  end.step = ++result_.steps;
  end.seq = e.seq;
  end.time_ns = e.time_ns;
  for (auto& [id, r] : ranges_) {
    end.live_bytes += r.live_bytes;
    end.live_allocations += r.live_allocations;
    if (end.step > 1 && r.live_bytes > r.step_bytes) {
      ++r.rises;
    } else {
      r.rises = 0;
      r.rise_from = r.live_bytes;
    }
    r.step_bytes = r.live_bytes;
    r.step_allocations = r.live_allocations;
  }
  constexpr size_t kHalf = kKeptStepEnds / 2;
  if (result_.step_ends.size() < kHalf) {
    result_.step_ends.push_back(end);
  } else if (last_.size() < kHalf) {
    last_.push_back(end);
  } else {
    last_[last_next_] = end;
    last_next_ = (last_next_ + 1) % kHalf;
  }
}

void StepGrowthObserver::on_finish(const TraceMeta& meta) {
  std::rotate(last_.begin(), last_.begin() + static_cast<std::ptrdiff_t>(last_next_), last_.end());
  result_.step_ends.insert(result_.step_ends.end(), last_.begin(), last_.end());
  last_.clear();
  last_next_ = 0;
  const uint64_t steps = result_.steps;
  result_.window = steps < 2 ? 0 : std::min(steps - 1, kGrowthWindow);
  if (result_.window == 0) return;
  for (const auto& [id, r] : ranges_) {
    if (r.rises < result_.window) continue;
    GrowingRange g;
    g.range = std::string(meta.string(StringId{id}));
    g.layer = table_.lookup(StringId{id}, meta).layer;
    g.first_step = steps - r.rises;
    g.first_bytes = r.rise_from;
    g.last_bytes = r.step_bytes;
    g.allocations = r.step_allocations;
    g.rising_steps = r.rises;
    result_.growing.push_back(std::move(g));
  }
  std::sort(result_.growing.begin(), result_.growing.end(), [](const GrowingRange& a, const GrowingRange& b) {
    if (a.bytes_per_step() != b.bytes_per_step()) return a.bytes_per_step() > b.bytes_per_step();
    return a.range < b.range;
  });
}

}  // namespace psc
