#include "analysis/lifetime_pass.h"

#include <algorithm>

#include "analysis/peak_pass.h"

namespace psc {
namespace {

// How many events ahead the live table's slot is loaded (as in peak_pass.cc).
constexpr size_t kPrefetchAhead = 8;

bool outlives_next_wave(const Lifetime& l, const std::vector<WaveSpan>& waves) {
  if (l.alloc.wave >= 0) return false;
  if (l.end.kind == EndKind::kStillLive) return true;
  auto next = std::upper_bound(waves.begin(), waves.end(), l.alloc.ordinal,
                               [](uint64_t ordinal, const WaveSpan& w) { return ordinal < w.begin_ordinal; });
  return next != waves.end() && next->ended && l.end.ordinal > next->end_ordinal;
}

}  // namespace

AllocationFacts allocation_facts(const Lifetime& l, const std::vector<WaveSpan>& waves, RangeTable& ranges,
                                 const TraceMeta& meta) {
  AllocationFacts f;
  f.made_in = ranges.lookup(l.alloc.range, meta);
  f.end = l.end.kind;
  if (l.end.kind != EndKind::kStillLive) {
    f.ended_in = ranges.lookup(l.end.range, meta);
    f.ended_in_wave = l.end.wave;
  }
  f.made_in_wave = l.alloc.wave;
  f.outlives_next_wave = outlives_next_wave(l, waves);
  if (l.alloc.wave >= 0 && static_cast<size_t>(l.alloc.wave) < waves.size())
    f.made_in_cold_wave = waves[static_cast<size_t>(l.alloc.wave)].payload.cold.value_or(false);
  f.bytes = l.alloc.bytes;
  f.alloc_seq = l.alloc.seq;
  f.thread = l.alloc.thread;
  f.memory = l.alloc.memory;
  return f;
}

const AllocationFacts& LifetimeView::facts() {
  if (!facts_) facts_ = allocation_facts(lifetime, *waves_, *ranges_, *meta_);
  return *facts_;
}

const Attribution& LifetimeView::attribution() {
  if (!attribution_) attribution_ = classifier_->classify(facts());
  return *attribution_;
}

LifetimePass::LifetimePass(const Inputs& inputs, std::vector<LifetimeObserver*> observers)
    : in_(inputs), observers_(std::move(observers)), ranges_(*inputs.ranges), scope_(ranges_), replay_(this) {
  if (in_.peaks)
    for (LifetimeObserver* o : observers_) o->on_snapshot_moved(0, in_.peaks->peak.ordinal);
}

void LifetimePass::wave_changed(const ScopeTracker::Update& update, const Event& e, uint64_t ordinal) {
  const size_t snapshot = static_cast<size_t>(update.wave) + 1;
  if (update.change == ScopeTracker::Change::kWaveBegin) {
    in_.peaks->wave_begin(update.wave, replay_.live_bytes(), ordinal, e);
    for (LifetimeObserver* o : observers_) o->on_snapshot_moved(snapshot, ordinal);
  } else if (update.change == ScopeTracker::Change::kWaveEnd) {
    for (LifetimeObserver* o : observers_) o->on_snapshot_final(snapshot);
  }
}

void LifetimePass::on_events(const Event* events, size_t count, const TraceMeta& meta) {
  meta_ = &meta;
  for (size_t i = 0; i < count && ordinal_ < in_.event_limit; ++i) {
    if (i + kPrefetchAhead < count) {
      const Event& ahead = events[i + kPrefetchAhead];
      if (memory_level_of(ahead) == in_.level)
        replay_.prefetch(ahead);
      else if (in_.peaks)
        other_.prefetch(ahead);
    }
    const Event& e = events[i];
    const uint64_t ordinal = ordinal_++;
    for (LifetimeObserver* o : observers_) o->on_event(e, ordinal, scope_, meta);
    if (!is_memory_event(e.kind)) {
      const ScopeTracker::Update update = scope_.on_event(e, ordinal, meta);
      if (in_.peaks && update.change != ScopeTracker::Change::kNone) wave_changed(update, e, ordinal);
      continue;
    }
    if (memory_level_of(e) != in_.level) {
      // Only its counts are asked for: where it was made is never read.
      if (in_.peaks) other_.apply(e, EventSite{ordinal, {}, -1});
      continue;
    }
    const EventSite site{ordinal, scope_.attributed_range(e), scope_.current_wave()};
    const MemoryReplay::Effect effect = replay_.apply(e, site);
    // The lifetimes this allocation ended (one it replaced) were handed over
    // in apply, before the snapshots move to it.
    if (in_.peaks && effect == MemoryReplay::Effect::kAllocated) {
      in_.peaks->grew(replay_.live_bytes(), e, site, scope_.open_waves(), [&](size_t snapshot) {
        for (LifetimeObserver* o : observers_) o->on_snapshot_moved(snapshot, ordinal);
      });
    }
    // Most memory events of a long trace have no range: skip the table then.
    const RangeName range = site.range.empty() ? RangeName{} : ranges_.lookup(site.range, meta);
    const MemoryEventView view{e, site, range, effect, replay_};
    for (LifetimeObserver* o : observers_) o->on_memory_event(view);
  }
}

void LifetimePass::on_lifetime(const Lifetime& lifetime) {
  LifetimeView view(lifetime, *in_.waves, ranges_, *meta_, *in_.classifier);
  for (LifetimeObserver* o : observers_) o->on_lifetime(view);
}

void LifetimePass::on_end(const TraceMeta& meta, const ReadStatus&) {
  meta_ = &meta;
  for (LifetimeObserver* o : observers_) o->on_events_end(meta);
  live_at_end_bytes_ = replay_.live_bytes();
  live_at_end_allocations_ = replay_.live_allocations();
  replay_.finish();
  for (LifetimeObserver* o : observers_) o->on_finish(meta);
}

}  // namespace psc
