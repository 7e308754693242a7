#include "analysis/live_view.h"

#include <algorithm>

#include "analysis/step_growth.h"

namespace psc {

LiveView::LiveView(const RangeParser& parser) : pass_(parser), ranges_(parser), parser_(parser) {}

void LiveView::on_begin(const TraceMeta& meta) {
  meta_ = &meta;
  pass_.on_begin(meta);
}

void LiveView::on_events(const Event* events, size_t count, const TraceMeta& meta) {
  meta_ = &meta;
  size_t deferred = 0;
  for (size_t i = 0; i < count; ++i) deferred += (events[i].flags & kFlagDeferred) != 0;
  if (deferred == 0) {
    feed(events, count, meta);
    return;
  }
  deferred_ += deferred;
  kept_.clear();
  for (size_t i = 0; i < count; ++i)
    if (!(events[i].flags & kFlagDeferred)) kept_.push_back(events[i]);
  pass_.count_withheld(deferred);
  if (!kept_.empty()) feed(kept_.data(), kept_.size(), meta);
}

// The pass is fed the events; the ranges opened among them say where waves
// and optimizer steps begin. Waves are numbered as the scope numbers them
// (each push or start of a `wave` range), each noted with whether a step
// began since the wave before it; at each step's begin the pass is fed up
// to it and the live bytes by range are taken.
void LiveView::feed(const Event* events, size_t count, const TraceMeta& meta) {
  size_t from = 0;
  for (size_t i = 0; i < count; ++i) {
    const Event& e = events[i];
    if (e.kind != EventKind::kRangePush && e.kind != EventKind::kRangeStart) continue;
    if (ranges_.lookup(e.name, meta).phase == Phase::kWave) {
      after_a_wave_.push_back(!step_began_);
      step_began_ = false;
      continue;
    }
    if (e.name.value >= meta.strings.size() || !parser_.ends_step(meta.string(e.name))) continue;
    step_began_ = true;
    pass_.on_events(events + from, i - from, meta);
    from = i;
    take_step();
  }
  if (from < count) pass_.on_events(events + from, count - from, meta);
}

void LiveView::take_step() {
  if (++step_begins_ < 2) return;  // the first step makes the optimizer's state
  std::unordered_map<uint32_t, uint64_t> bytes;
  pass_.level(pass_.chosen_level()).replay.for_each_live([&](int16_t, uint64_t, const LiveAllocation& a) {
    bytes[a.range.value] += a.bytes;
  });
  step_bytes_.push_back(std::move(bytes));
  if (step_bytes_.size() > kGrowthWindow + 1) step_bytes_.erase(step_bytes_.begin());
  ++steps_taken_;
}

void LiveView::on_end(const TraceMeta& meta, const ReadStatus& status) {
  meta_ = &meta;
  pass_.on_end(meta, status);
  ended_ = true;
  end_status_ = status;
}

LiveSnapshot LiveView::snapshot() const {
  LiveSnapshot s;
  s.level = pass_.chosen_level();
  s.events = pass_.events();
  s.deferred_left_out = deferred_;
  TraceSummary trace;
  MemorySummary memory;
  pass_.fill_summary(&trace, &memory, s.level);
  s.first_time_ns = trace.first_time_ns;
  s.last_time_ns = trace.last_time_ns;
  const LevelScan& level = pass_.level(s.level);
  s.live_bytes = level.replay.live_bytes();
  s.live_allocations = level.replay.live_allocations();
  s.peak_bytes = level.peak.bytes;
  s.peak_time_ns = level.peak.time_ns;
  if (level.peak.reached) s.peak_range = std::string(meta_->string(level.peak.range));
  level.replay.for_each_live([&](int16_t, uint64_t, const LiveAllocation& a) {
    const RangeName name = ranges_.lookup(a.range, *meta_);
    s.phase_bytes[static_cast<size_t>(name.phase)] += a.bytes;
    if (name.has_layer() && name.layer < (1 << 16)) {
      if (s.layer_bytes.size() <= static_cast<size_t>(name.layer)) s.layer_bytes.resize(name.layer + 1, 0);
      s.layer_bytes[static_cast<size_t>(name.layer)] += a.bytes;
    }
  });
  pass_.scope().for_each_innermost([&](uint32_t thread, StringId range) {
    LiveSnapshot::OpenRange open;
    open.thread = thread;
    if (thread < meta_->threads.size()) open.thread_name = meta_->threads[thread].name;
    open.range = std::string(meta_->string(range));
    s.open_ranges.push_back(std::move(open));
  });
  s.steps_compared = steps_taken_;
  if (step_bytes_.size() >= 2) {
    const size_t rises = step_bytes_.size() - 1;  // K: at most kGrowthWindow
    for (const auto& [range, last] : step_bytes_.back()) {
      bool rose = true;
      uint64_t first = 0;
      for (size_t k = step_bytes_.size() - 1 - rises; k + 1 < step_bytes_.size() && rose; ++k) {
        const auto before = step_bytes_[k].find(range);
        const auto after = step_bytes_[k + 1].find(range);
        const uint64_t b = before == step_bytes_[k].end() ? 0 : before->second;
        const uint64_t a = after == step_bytes_[k + 1].end() ? 0 : after->second;
        if (k == step_bytes_.size() - 1 - rises) first = b;
        rose = a > b;
      }
      if (rose) s.growing.push_back({std::string(meta_->string(StringId{range})), (last - first) / rises, last});
    }
    std::sort(s.growing.begin(), s.growing.end(), [](const LiveSnapshot::Growing& a, const LiveSnapshot::Growing& b) {
      return a.bytes_per_step > b.bytes_per_step;
    });
  }
  const std::vector<WaveSpan>& spans = pass_.waves();
  for (size_t i = 0; i < spans.size() && i < level.waves.size(); ++i) {
    LiveWave w;
    w.index = spans[i].index;
    w.payload = spans[i].payload;
    w.ended = spans[i].ended;
    w.after_a_wave_of_its_step = i < after_a_wave_.size() && after_a_wave_[i];
    w.baseline_bytes = level.waves[i].baseline_bytes;
    w.peak_bytes = level.waves[i].peak.bytes;
    if (level.waves[i].peak.reached) w.peak_range = std::string(meta_->string(level.waves[i].peak.range));
    s.waves.push_back(std::move(w));
  }
  return s;
}

}  // namespace psc
