#include "exchange/export_model.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <stdexcept>

#include <fmt/format.h>

#include "analysis/breakdowns.h"

namespace psc {

// ---- CategoryLog ----------------------------------------------------------------

CategoryLog::CategoryLog() : window_(kWindow, static_cast<uint8_t>(Category::kOutput)) {
  std::string dir = std::filesystem::temp_directory_path().string();
  std::string name = dir + "/peakscope-categories-XXXXXX";
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0) throw std::runtime_error("cannot create a temporary file in " + dir + ": " + std::strerror(errno));
  ::unlink(name.c_str());
}

CategoryLog::~CategoryLog() {
  if (fd_ >= 0) ::close(fd_);
}

void CategoryLog::write_at(uint64_t offset, const uint8_t* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::pwrite(fd_, data, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw std::runtime_error(std::string("temporary category log: write failed: ") + std::strerror(errno));
    data += w;
    offset += static_cast<uint64_t>(w);
    n -= static_cast<size_t>(w);
  }
}

void CategoryLog::slide_to(uint64_t new_base) {
  const uint64_t out = std::min<uint64_t>(new_base - base_, kWindow);
  write_at(base_, window_.data(), static_cast<size_t>(out));
  if (out < kWindow) {
    std::memmove(window_.data(), window_.data() + out, kWindow - out);
    std::fill(window_.begin() + static_cast<ptrdiff_t>(kWindow - out), window_.end(),
              static_cast<uint8_t>(Category::kOutput));
  } else {
    std::fill(window_.begin(), window_.end(), static_cast<uint8_t>(Category::kOutput));
  }
  base_ = new_base;
}

void CategoryLog::set(uint64_t index, Category category) {
  const uint8_t byte = static_cast<uint8_t>(category);
  if (index < base_) {  // a long-lived allocation, its slot already flushed
    write_at(index, &byte, 1);
    return;
  }
  if (index >= base_ + kWindow) slide_to(index - kWindow / 2);
  window_[static_cast<size_t>(index - base_)] = byte;
}

void CategoryLog::finish(uint64_t count) {
  count_ = count;
  if (count > base_) write_at(base_, window_.data(), static_cast<size_t>(std::min<uint64_t>(count - base_, kWindow)));
}

CategoryLog::Reader::Reader(const CategoryLog& log) : log_(&log), buffer_(1u << 16) {}

Category CategoryLog::Reader::next() {
  if (pos_ == size_) {
    if (offset_ >= log_->count_) return Category::kOutput;
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buffer_.size(), log_->count_ - offset_));
    ssize_t r;
    do r = ::pread(log_->fd_, buffer_.data(), want, static_cast<off_t>(offset_));
    while (r < 0 && errno == EINTR);
    if (r <= 0) throw std::runtime_error(std::string("temporary category log: read failed: ") + std::strerror(errno));
    offset_ += static_cast<uint64_t>(r);
    size_ = static_cast<size_t>(r);
    pos_ = 0;
  }
  const uint8_t byte = buffer_[pos_++];
  return byte < kCategoryCount ? static_cast<Category>(byte) : Category::kOutput;
}

// ---- the analysis' second read: classify every lifetime -------------------------

namespace {

// Classifies lifetimes exactly as the analysis' attribution pass does (the
// same allocation_facts, analysis/breakdowns.h): the
// exporters' category counters must add up to what `report` says is live at
// each peak, and a unit test holds them to it.
class CategoryPass : public LifetimeObserver {
 public:
  CategoryPass(CategoryLog* log, size_t sample_points) : log_(log), sample_points_(sample_points) {}

  // The samples include each peak's own event: where they are is needed from the start.
  bool needs_peaks() const override { return sample_points_ > 0; }

  void on_start(const Analysis& a) override {
    if (sample_points_ == 0) return;
    const uint64_t first = a.trace.first_time_ns, last = std::max(a.trace.last_time_ns, first);
    const size_t n = std::max<size_t>(sample_points_, 2);
    for (size_t k = 0; k < n; ++k)
      sample_times_.push_back(first + static_cast<uint64_t>(static_cast<long double>(last - first) * k / (n - 1)));
    if (a.peak.site.reached) peak_seqs_.push_back(a.peak.site.seq);
    for (const WaveReport& w : a.waves) peak_seqs_.push_back(w.peak.site.reached ? w.peak.site.seq : w.span.begin_seq);
    std::sort(peak_seqs_.begin(), peak_seqs_.end());
    peak_seqs_.erase(std::unique(peak_seqs_.begin(), peak_seqs_.end()), peak_seqs_.end());
  }

  void on_event(const Event& e, uint64_t ordinal, const ScopeTracker&, const TraceMeta&) override {
    sample_before(e, ordinal);
    last_seq_ = e.seq;
    last_ordinal_ = ordinal;
    last_time_ = std::max(last_time_, e.time_ns);
  }

  void on_memory_event(const MemoryEventView& m) override {
    if (log_ && m.effect == MemoryReplay::Effect::kAllocated) ++births_;
  }

  void on_events_end(const TraceMeta&) override {
    while (next_time_ < sample_times_.size()) add_sample(sample_times_[next_time_++], last_ordinal_, last_seq_);
  }

  void on_finish(const TraceMeta&) override {
    if (log_) log_->finish(births_);
  }

  std::vector<CategorySample> samples() const {
    std::vector<CategorySample> out;
    CategoryBytes running{};
    for (size_t i = 0; i < sample_ordinals_.size(); ++i) {
      CategorySample s;
      s.time_ns = sample_info_[i].time_ns;
      s.seq = sample_info_[i].seq;
      for (int c = 0; c < kCategoryCount; ++c) {
        running[c] += diff_[c][i];
        s.bytes[c] = running[c];
      }
      out.push_back(s);
    }
    return out;
  }

 private:
  struct SampleInfo {
    uint64_t time_ns;
    uint64_t seq;
  };

  // Registers the instants this event closes or opens: every sample time
  // earlier than it (live there = as of the previous event), and a peak's own
  // event (live there = as of that event, the allocation included).
  void sample_before(const Event& e, uint64_t ordinal) {
    const uint64_t now = std::max(last_time_, e.time_ns);
    while (next_time_ < sample_times_.size() && sample_times_[next_time_] < now) {
      if (ordinal == 0) {
        add_sample(sample_times_[next_time_++], UINT64_MAX, 0);  // before anything happened
      } else {
        add_sample(sample_times_[next_time_++], last_ordinal_, last_seq_);
      }
    }
    while (next_peak_ < peak_seqs_.size() && peak_seqs_[next_peak_] < e.seq) ++next_peak_;
    if (next_peak_ < peak_seqs_.size() && peak_seqs_[next_peak_] == e.seq) {
      add_sample(e.time_ns, ordinal, e.seq);
      ++next_peak_;
    }
  }

  void add_sample(uint64_t time_ns, uint64_t ordinal, uint64_t seq) {
    // UINT64_MAX: a sample before the first event, at which nothing is live.
    sample_ordinals_.push_back(ordinal == UINT64_MAX ? 0 : ordinal);
    sample_empty_.push_back(ordinal == UINT64_MAX);
    sample_info_.push_back({time_ns, seq});
    for (auto& d : diff_) d.push_back(0);
  }

  void on_lifetime(LifetimeView& view) override {
    const Lifetime& l = view.lifetime;
    const Category category = view.attribution().category;
    if (log_) log_->set(l.alloc.birth, category);  // counted as births_ counts them
    if (sample_ordinals_.empty()) return;
    // Covers the samples s with alloc ordinal <= s < end ordinal.
    const uint64_t end = l.end.kind == EndKind::kStillLive ? UINT64_MAX : l.end.ordinal;
    size_t i = static_cast<size_t>(std::lower_bound(sample_ordinals_.begin(), sample_ordinals_.end(), l.alloc.ordinal) -
                                   sample_ordinals_.begin());
    while (i < sample_empty_.size() && sample_empty_[i]) ++i;
    const size_t j = static_cast<size_t>(std::lower_bound(sample_ordinals_.begin(), sample_ordinals_.end(), end) -
                                         sample_ordinals_.begin());
    if (i >= j) return;
    auto& d = diff_[static_cast<size_t>(category)];
    d[i] += l.alloc.bytes;
    d[j] -= l.alloc.bytes;  // j <= samples so far, and d has one slot more
  }

  CategoryLog* log_;  // null: samples only
  size_t sample_points_;
  uint64_t births_ = 0;

  std::vector<uint64_t> sample_times_;
  std::vector<uint64_t> peak_seqs_;
  size_t next_time_ = 0;
  size_t next_peak_ = 0;
  uint64_t last_seq_ = 0;
  uint64_t last_ordinal_ = 0;
  uint64_t last_time_ = 0;
  std::vector<uint64_t> sample_ordinals_;  // non-decreasing
  std::vector<bool> sample_empty_;
  std::vector<SampleInfo> sample_info_;
  // Per category, one slot per sample plus one for the next sample to come: a
  // lifetime may end before that sample exists. Wraps modulo 2^64; the prefix
  // sums are exact.
  std::array<std::vector<uint64_t>, kCategoryCount> diff_ = make_diff();
  static std::array<std::vector<uint64_t>, kCategoryCount> make_diff() {
    std::array<std::vector<uint64_t>, kCategoryCount> d;
    for (auto& v : d) v.assign(1, 0);
    return d;
  }
};

}  // namespace

struct ExportModelCollector::Pass : CategoryPass {
  using CategoryPass::CategoryPass;
};

ExportModelCollector::ExportModelCollector(const ExportModelOptions& options) : options_(options) {
  if (!options.categories && options.sample_points == 0) return;
  if (options.categories) categories_ = std::make_unique<CategoryLog>();
  pass_ = std::make_unique<Pass>(categories_.get(), options.sample_points);
}

ExportModelCollector::~ExportModelCollector() = default;

void ExportModelCollector::add_to(AnalysisOptions* analysis_options) {
  analysis_options->timeline_points = options_.timeline_points;
  if (pass_) analysis_options->observers.push_back(pass_.get());
}

ExportModel ExportModelCollector::finish(const std::string& trace, Analysis analysis) {
  ExportModel model;
  model.trace = trace;
  model.analysis = std::move(analysis);
  model.level = model.analysis.memory.level;
  for (const WaveReport& w : model.analysis.waves) model.waves.push_back(w.span);
  if (pass_) model.samples = pass_->samples();
  model.categories = std::move(categories_);
  progress_stage("exporting " + trace, model.analysis.trace.status.events);
  return model;
}

ExportModel build_export_model(const std::string& trace, const ExportModelOptions& options) {
  ExportModelCollector collector(options);
  AnalysisOptions analysis_options;
  collector.add_to(&analysis_options);
  return collector.finish(trace, analyze_trace(trace, analysis_options));
}

// ---- the exporter's own read ------------------------------------------------------

ExportReplay::ExportReplay(const ExportModel& model, Listener* listener)
    : model_(&model), listener_(listener), ranges_(default_range_parser()), scope_(ranges_) {
  if (model.categories) categories_ = std::make_unique<CategoryLog::Reader>(*model.categories);
}

CategoryBytes& ExportReplay::live_slot(int16_t device) {
  const size_t slot = static_cast<size_t>(device + 1);  // device -1 (host) is slot 0
  if (slot >= live_bytes_.size()) {
    live_bytes_.resize(slot + 1, CategoryBytes{});
    lanes_.resize(slot + 1);
  }
  return live_bytes_[slot];
}

const CategoryBytes& ExportReplay::live(int16_t device) const {
  static const CategoryBytes kNone{};
  const size_t slot = static_cast<size_t>(device + 1);
  return slot < live_bytes_.size() ? live_bytes_[slot] : kNone;
}

uint64_t ExportReplay::live_total(int16_t device) const {
  uint64_t total = 0;
  for (uint64_t b : live(device)) total += b;
  return total;
}

uint32_t ExportReplay::take_lane(int16_t device) {
  Lanes& l = lanes_[static_cast<size_t>(device + 1)];
  if (l.free.empty()) return l.next++;
  std::pop_heap(l.free.begin(), l.free.end(), std::greater<uint32_t>());
  const uint32_t lane = l.free.back();
  l.free.pop_back();
  return lane;
}

void ExportReplay::release_lane(int16_t device, uint32_t lane) {
  Lanes& l = lanes_[static_cast<size_t>(device + 1)];
  l.free.push_back(lane);
  std::push_heap(l.free.begin(), l.free.end(), std::greater<uint32_t>());
}

void ExportReplay::end(const Key& key, const Event& at, EndKind how) {
  Allocation a;
  if (!live_.erase(key, &a)) return;
  live_slot(a.device)[static_cast<size_t>(a.category)] -= a.bytes;
  release_lane(a.device, a.lane);
  if (listener_) listener_->on_end(a, at, how);
}

void ExportReplay::on_event(const Event& e, const TraceMeta& meta) {
  const uint64_t ordinal = ordinal_++;
  if (!is_memory_event(e.kind)) {
    scope_.on_event(e, ordinal, meta);
    return;
  }
  if (memory_level_of(e) != model_->level) {
    if (e.kind == EventKind::kAlloc || e.kind == EventKind::kFree) listener_->on_other_level(e);
    return;
  }
  // The analysis' rules (MemoryReplay::apply) on this replay's own table: a
  // call that failed or ran inside another moves nothing, a free of address
  // 0 or of an address not live ends nothing, an allocation over a live one
  // ends it.
  if (!MemoryReplay::moves_memory(e)) return;
  const Key key{e.device, e.address};
  if (e.kind == EventKind::kFree) {
    if (e.address != 0) end(key, e, EndKind::kFreed);
  } else {
    const StringId range = scope_.attributed_range(e);
    end(key, e, EndKind::kReplaced);  // no-op unless the address was live
    Allocation a;
    a.index = births_++;
    a.address = e.address;
    a.bytes = e.bytes;
    a.time_ns = e.time_ns;
    a.seq = e.seq;
    a.stream = e.stream;
    a.thread = e.thread;
    a.device = e.device;
    a.category = categories_ ? categories_->next() : Category::kOutput;
    a.memory = e.memory;
    a.api = e.api;
    a.range = range;
    CategoryBytes& bytes = live_slot(e.device);
    if (std::find(devices_.begin(), devices_.end(), e.device) == devices_.end()) devices_.push_back(e.device);
    a.lane = take_lane(e.device);
    bytes[static_cast<size_t>(a.category)] += a.bytes;
    live_.insert(key, a);
    if (listener_) listener_->on_alloc(a, e);
  }
}

std::vector<ProcessPlacement> place_run(const Run& run) {
  const RunClock clock = run_clock(run);
  std::vector<ProcessPlacement> places;
  std::unordered_map<uint32_t, std::string> pid_host;  // pids taken, by the host that has them
  for (size_t i = 0; i < run.members.size(); ++i) {
    const RunMember& m = run.members[i];
    ProcessPlacement p;
    p.in_run = true;
    p.index = i;
    p.time_offset_ns = clock.offset(m.header);
    p.origin_realtime_ns = clock.origin_realtime_ns;
    const std::string host = host_of(m.header);
    p.host_index = static_cast<uint32_t>(std::find(run.hosts.begin(), run.hosts.end(), host) - run.hosts.begin());
    p.pid = m.header.pid ? m.header.pid : 1;
    if (auto [it, fresh] = pid_host.emplace(p.pid, host); !fresh) p.pid = 0x40000000u + static_cast<uint32_t>(i);
    p.name = member_label(m);
    places.push_back(std::move(p));
  }
  return places;
}

std::vector<ExportMember> export_members(const std::string& trace) { return {{trace, {}}}; }

std::vector<ExportMember> export_members(const Run& run) {
  const std::vector<ProcessPlacement> places = place_run(run);
  std::vector<ExportMember> members;
  for (size_t i = 0; i < run.members.size(); ++i) members.push_back({run.members[i].path, places[i]});
  return members;
}

void warn_if_incomplete(const ExportModel& model, const std::function<void(const std::string&)>& warn) {
  const std::string text = incomplete_read_note(model.trace, model.analysis.trace.status, "exported");
  if (text.empty()) return;
  if (warn) {
    warn(text);
  } else {
    std::fprintf(stderr, "peakscope: warning: %s\n", text.c_str());
  }
}

}  // namespace psc
