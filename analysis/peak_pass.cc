#include "analysis/peak_pass.h"

#include <algorithm>

namespace psc {
namespace {

// How many events ahead the live table's slot is loaded: enough to cover a
// miss to memory at the pass' cost per event.
constexpr size_t kPrefetchAhead = 8;

}  // namespace

void PeakPass::check_step_range(const Event& e, const TraceMeta& meta) {
  // A name whose text has not arrived is not cached: it may still come.
  if (e.name.empty() || e.name.value >= meta.strings.size()) return;
  auto [it, added] = step_names_.try_emplace(e.name.value, false);
  if (added) it->second = parser_->ends_step(meta.string(e.name));
  saw_step_range_ = it->second;
  if (saw_step_range_) step_names_.clear();
}

void PeakPass::check_strings(const TraceMeta& meta) {
  // Entries already looked at stay non-empty: a string's text arrives once.
  for (; strings_checked_ < meta.strings.size() && !string_hole_; ++strings_checked_)
    string_hole_ = meta.strings[strings_checked_].empty();
}

void PeakPass::on_events(const Event* events, size_t count, const TraceMeta& meta) {
  if (!string_hole_) check_strings(meta);
  for (size_t i = 0; i < count; ++i) {
    if (replay_ && i + kPrefetchAhead < count) {
      const Event& ahead = events[i + kPrefetchAhead];
      levels_[static_cast<int>(memory_level_of(ahead))].replay.prefetch(ahead);
    }
    const Event& e = events[i];
    const uint64_t ordinal = ordinal_++;
    if (static_cast<uint8_t>(e.kind) <= kMaxEventKind) ++by_kind_[static_cast<uint8_t>(e.kind)];
    first_time_ns_ = std::min(first_time_ns_, e.time_ns);
    last_time_ns_ = std::max(last_time_ns_, e.time_ns);
    first_seq_ = std::min(first_seq_, e.seq);
    last_seq_ = std::max(last_seq_, e.seq);

    if (is_memory_event(e.kind)) {
      if (!replay_) {
        count_allocation(e);
        continue;
      }
      LevelScan& level = levels_[static_cast<int>(memory_level_of(e))];
      const EventSite site{ordinal, scope_.attributed_range(e), scope_.current_wave()};
      if (level.replay.apply(e, site) == MemoryReplay::Effect::kAllocated)
        level.grew(level.replay.live_bytes(), e, site, scope_.open_waves(), [](size_t) {});
      continue;
    }
    if (!saw_step_range_ && (e.kind == EventKind::kRangePush || e.kind == EventKind::kRangeStart))
      check_step_range(e, meta);
    const ScopeTracker::Update update = scope_.on_event(e, ordinal, meta);
    if (update.change != ScopeTracker::Change::kWaveBegin) continue;
    for (LevelScan& level : levels_) level.wave_begin(update.wave, level.replay.live_bytes(), ordinal, e);
  }
}

void PeakPass::on_end(const TraceMeta& meta, const ReadStatus& status) {
  meta_ = meta;
  status_ = status;
}

MemoryLevel PeakPass::chosen_level() const {
  auto allocations = [&](MemoryLevel l) {
    return replay_ ? level(l).replay.counts().allocs : allocations_[static_cast<int>(l)];
  };
  if (allocations(MemoryLevel::kAllocated) > 0) return MemoryLevel::kAllocated;
  if (allocations(MemoryLevel::kReserved) > 0) return MemoryLevel::kReserved;
  return (meta_.header.flags & format::kHeaderReservedLevel) ? MemoryLevel::kReserved : MemoryLevel::kAllocated;
}

void PeakPass::fill_trace(TraceSummary* trace) const {
  trace->path = meta_.path;
  trace->status = status_;
  trace->header = meta_.header;
  trace->run = meta_.run;
  trace->command = meta_.command;
  trace->threads =
      static_cast<size_t>(std::count_if(meta_.threads.begin(), meta_.threads.end(),
                                        [](const ThreadInfo& t) { return t.os_tid != 0 || !t.name.empty(); }));
  trace->drops = meta_.drops;
  trace->dropped = meta_.dropped_total();
  trace->late_events = meta_.late_events;
  trace->clean_end = meta_.clean_end;
  trace->first_time_ns = ordinal_ ? first_time_ns_ : 0;
  trace->last_time_ns = last_time_ns_;
  if (ordinal_) {
    trace->first_seq = first_seq_;
    trace->last_seq = last_seq_;
    const uint64_t span = last_seq_ - first_seq_ + 1;
    const uint64_t seen = ordinal_ + withheld_;
    trace->missing_seqs = span > seen ? span - seen : 0;
  }
  trace->events_by_kind = by_kind_;
  trace->unmatched_range_ends = scope_.unmatched_pops();
}

void PeakPass::fill_summary(TraceSummary* trace, MemorySummary* memory, MemoryLevel chosen) const {
  fill_trace(trace);
  const LevelScan& analysed = level(chosen);
  fill_memory(memory, chosen, analysed.replay.counts(), level(other_level(chosen)).replay.counts());
  memory->live_at_end_bytes = analysed.replay.live_bytes();
  memory->live_at_end_allocations = analysed.replay.live_allocations();
}

void PeakPass::fill_memory(MemorySummary* memory, MemoryLevel chosen, const MemoryCounts& analysed,
                           const MemoryCounts& other) const {
  memory->level = chosen;
  memory->counts = analysed;
  memory->other_level_events =
      other.allocs + other.frees + other.nested + other.failed + other.unmatched_frees + other.null_frees;
  memory->maps = by_kind_[static_cast<int>(EventKind::kMap)];
  memory->unmaps = by_kind_[static_cast<int>(EventKind::kUnmap)];
  memory->counters = by_kind_[static_cast<int>(EventKind::kCounter)];
}

}  // namespace psc
