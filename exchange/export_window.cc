#include "exchange/export_window.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "analysis/range_names.h"
#include "analysis/scope_tracker.h"
#include "common/progress.h"
#include "exchange/exporter.h"
#include "format/crc32c.h"
#include "traces/deferred.h"
#include "traces/device_address.h"
#include "traces/reader.h"
#include "traces/writer.h"

namespace psc {

uint64_t parse_duration_ns(std::string_view text) {
  const std::string s(text);
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = s.substr(used);
  double scale = 0;
  if (unit.empty() || unit == "ns")
    scale = 1;
  else if (unit == "us")
    scale = 1e3;
  else if (unit == "ms")
    scale = 1e6;
  else if (unit == "s")
    scale = 1e9;
  if (used == 0 || scale == 0 || !std::isfinite(value) || value < 0 || value * scale > 1.8e19)
    throw std::invalid_argument("'" + s + "' is not a time (a number with s, ms, us or ns; ns when bare)");
  return static_cast<uint64_t>(std::llround(value * scale));
}

std::string format_seconds(uint64_t ns) { return fmt::format("{:.6f} s", static_cast<double>(ns) / 1e9); }

namespace {

// What a viewer needs to see at the window's start, kept while reading up to it.
struct Frame {
  Event push;
  bool has_mark = false;
  Event mark;  // a wave's payload mark, right after its push
};

struct LevelKey {
  int level;
  int16_t device;
  friend bool operator==(const LevelKey&, const LevelKey&) = default;
};

// Live bytes of one memory level on one device, and what a summary still has
// to write of them: the bucket's maximum and its last value.
struct LiveCounter {
  uint64_t bytes = 0;
  bool pending = false;
  Event max;   // the event that reached the bucket's maximum (bytes = the value)
  Event last;  // the bucket's last change
  uint64_t last_seq = 0;
  uint32_t last_thread = 0;
  StringId last_range;
};

// What the file's end says of the trace, kept by the first pass over it (the
// deferred events' placement reads it to its end anyway), so that the window's
// pass can stop at the window's end and still close the window as the trace
// closed: every thread named, the drops, whether it ended cleanly.
class TraceEnd : public TraceVisitor {
 public:
  void on_events(const Event*, size_t, const TraceMeta&) override {}
  void on_end(const TraceMeta& meta, const ReadStatus&) override {
    threads = meta.threads;
    drops = meta.drops;
    clean_end = meta.clean_end;
    seen = true;
  }

  bool seen = false;
  std::vector<ThreadInfo> threads;
  std::array<uint64_t, format::kDropReasonCount> drops{};
  bool clean_end = false;
};

class WindowWriter : public TraceVisitor {
 public:
  WindowWriter(const ExportWindow& window, const std::string& output, const TraceEnd& trace_end)
      : window_(window), output_(output), trace_end_(trace_end), ranges_(default_range_parser()), scope_(ranges_) {
    live_[0].reserve(1024);
    live_[1].reserve(1024);
  }

  void on_events(const Event* events, size_t count, const TraceMeta& meta) override {
    for (size_t i = 0; i < count && phase_ != Phase::kAfter; ++i) on_event(events[i], meta);
    progress_advance(count);
  }

  void on_end(const TraceMeta& meta, const ReadStatus& status) override {
    // A summary of the whole of a trace without events (a launcher's own) is
    // that trace, empty, not an error.
    if (!writer_ && window_.summary && !window_.from_ns && !window_.wave && !window_.absolute &&
        result_.input_events == 0)
      open_writer(meta);
    if (!writer_) return;
    if (window_.summary) flush_summary(meta);
    // Stopped at the window's end: the threads named later, the drops and the
    // clean end are the first pass's, which read the file to its end.
    const bool stopped = status.stopped && trace_end_.seen;
    for (const ThreadInfo& t : stopped ? trace_end_.threads : meta.threads)
      if (t.os_tid != 0 || !t.name.empty()) writer_->thread(t.index, t.os_tid, t.name);
    writer_->drops(stopped ? trace_end_.drops : meta.drops);
    writer_->close(stopped ? trace_end_.clean_end : meta.clean_end);
    header_ = meta.header;
  }

  // Past the window's end nothing more is written or replayed. A wave that
  // was not found reads on to the end: the message counts every wave.
  bool finished() const override { return phase_ == Phase::kAfter; }

  bool started() const { return writer_ != nullptr; }
  const WindowResult& result() const { return result_; }
  int32_t waves_seen() const { return static_cast<int32_t>(scope_.waves().size()); }
  uint64_t last_time_ns() const { return last_time_; }
  const format::FileHeader& header() const { return header_; }

 private:
  enum class Phase { kBefore, kInside, kAfter };

  void on_event(const Event& e, const TraceMeta& meta) {
    if (result_.input_events++ == 0) {
      result_.first_time_ns = e.time_ns;
      const uint64_t base = window_.absolute ? 0 : e.time_ns;
      begin_ = base + window_.from_ns.value_or(0);
      end_ = window_.to_ns ? base + *window_.to_ns : UINT64_MAX;
      if (window_.absolute && !window_.wave && e.time_ns > end_) {
        // The trace begins after the window ends: nothing of it is in there.
        phase_ = Phase::kAfter;
        return;
      }
    }
    last_time_ = std::max(last_time_, e.time_ns);
    ScopeTracker::Update update;
    if (!is_memory_event(e.kind)) update = scope_.on_event(e, result_.input_events - 1, meta);
    if (window_.wave) {
      const bool ours = update.wave == *window_.wave;
      if (phase_ == Phase::kBefore && ours && update.change == ScopeTracker::Change::kWaveBegin) start(e.time_ns, meta);
      if (phase_ == Phase::kInside) write_inside(e, meta);
      if (phase_ == Phase::kInside && ours && update.change == ScopeTracker::Change::kWaveEnd) finish(e.time_ns);
    } else {
      if (phase_ == Phase::kBefore && e.time_ns >= begin_) start(begin_, meta);
      if (phase_ == Phase::kInside && e.time_ns > end_) {
        finish(end_);
        return;
      }
      if (phase_ == Phase::kInside) write_inside(e, meta);
    }
    if (phase_ == Phase::kBefore) keep_state(e);
    if (phase_ != Phase::kAfter) replay_memory(e);
  }

  // ---- the state before the window --------------------------------------------

  void keep_state(const Event& e) {
    switch (e.kind) {
      case EventKind::kRangePush: stack(e.thread).push_back(Frame{e, false, {}}); break;
      case EventKind::kRangePop:
        if (e.thread < stacks_.size() && !stacks_[e.thread].empty()) stacks_[e.thread].pop_back();
        break;
      case EventKind::kMark:
        if (e.thread < stacks_.size() && !stacks_[e.thread].empty()) {
          Frame& top = stacks_[e.thread].back();
          if (!top.has_mark && top.push.name == e.name) {
            top.has_mark = true;
            top.mark = e;
          }
        }
        break;
      case EventKind::kRangeStart: open_.push_back(e); break;
      case EventKind::kRangeEnd:
        for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
          if (it->address != e.address) continue;
          open_.erase(std::next(it).base());
          break;
        }
        break;
      case EventKind::kCounter:
        counters_[(static_cast<uint64_t>(e.name.value) << 16) | static_cast<uint16_t>(e.device)] = e;
        break;
      default: break;
    }
  }

  std::vector<Frame>& stack(uint32_t thread) {
    if (thread >= stacks_.size()) stacks_.resize(size_t{thread} + 1);
    return stacks_[thread];
  }

  // The analysis' rules (analysis/memory_replay.h): nested and failed events
  // move nothing, a free takes the allocation's own size, an allocation over a
  // live address replaces it.
  void replay_memory(const Event& e) {
    if (!is_memory_event(e.kind) || (e.flags & (kFlagFailed | kFlagNested))) return;
    const int level = (e.flags & kFlagReserved) ? 1 : 0;
    auto& live = live_[level];
    const DeviceAddress key{e.device, e.address};
    LiveCounter& counter = counter_of(level, e.device);
    if (e.kind == EventKind::kAlloc) {
      auto [it, fresh] = live.try_emplace(key, e);
      if (!fresh) {
        counter.bytes -= it->second.bytes;
        it->second = e;
      }
      counter.bytes += e.bytes;
    } else {
      if (e.address == 0) return;
      auto it = live.find(key);
      if (it == live.end()) return;
      counter.bytes -= it->second.bytes;
      live.erase(it);
    }
    counter.last_seq = e.seq;
    counter.last_thread = e.thread;
    counter.last_range = e.range;
    if (window_.summary && phase_ == Phase::kInside) note_summary(e, counter);
  }

  LiveCounter& counter_of(int level, int16_t device) {
    for (size_t i = 0; i < counter_keys_.size(); ++i)
      if (counter_keys_[i] == LevelKey{level, device}) return counter_values_[i];
    counter_keys_.push_back(LevelKey{level, device});
    counter_values_.emplace_back();
    return counter_values_.back();
  }

  // ---- the window ---------------------------------------------------------------

  void start(uint64_t time_ns, const TraceMeta& meta) {
    phase_ = Phase::kInside;
    result_.begin_ns = time_ns;
    open_writer(meta);
    // (event, whether its names are already ids of the output)
    std::vector<std::pair<Event, bool>> carried;
    for (const std::vector<Frame>& frames : stacks_)
      for (const Frame& f : frames) {
        carried.emplace_back(f.push, false);
        if (f.has_mark) carried.emplace_back(f.mark, false);
      }
    for (const Event& e : open_) carried.emplace_back(e, false);
    for (const auto& [key, e] : counters_) carried.emplace_back(e, false);
    if (!window_.summary) {
      for (const auto& live : live_)
        for (const auto& [key, e] : live) carried.emplace_back(e, false);
    } else {
      for (size_t i = 0; i < counter_keys_.size(); ++i) {
        const LiveCounter& c = counter_values_[i];
        carried.emplace_back(counter_event(counter_keys_[i], c.bytes, c.last_seq, time_ns, c.last_thread, c.last_range),
                             true);
      }
    }
    std::stable_sort(carried.begin(), carried.end(),
                     [](const auto& a, const auto& b) { return a.first.seq < b.first.seq; });
    uint64_t previous_seq = 0;
    for (auto [e, ours] : carried) {
      // A summary's first counters take the sequence number of the last
      // allocation or free before the window: one event each.
      if (result_.carried_events > 0 && e.seq == previous_seq) continue;
      previous_seq = e.seq;
      e.time_ns = time_ns;
      write(e, meta, ours);
      ++result_.carried_events;
    }
    stacks_.clear();
    open_.clear();
    counters_.clear();
  }

  void finish(uint64_t time_ns) {
    phase_ = Phase::kAfter;
    result_.end_ns = time_ns;
  }

  void write_inside(const Event& e, const TraceMeta& meta) {
    result_.end_ns = std::max(result_.end_ns, e.time_ns);
    if (!window_.summary) {
      write(e, meta);
      return;
    }
    if (is_memory_event(e.kind) || e.kind == EventKind::kMap || e.kind == EventKind::kUnmap) return;
    // Counters come out before the next event that is written, so the file
    // stays in sequence order.
    flush_summary(meta);
    write(e, meta);
  }

  void note_summary(const Event& e, LiveCounter& c) {
    const uint64_t bucket = (e.time_ns - std::min(e.time_ns, result_.begin_ns)) / bucket_ns();
    if (any_pending_ && bucket != bucket_) flush_summary(*meta_for_flush_);
    any_pending_ = true;
    bucket_ = bucket;
    Event now = e;
    now.bytes = c.bytes;
    if (!c.pending || c.bytes > c.max.bytes) c.max = now;
    c.last = now;
    c.pending = true;
  }

  uint64_t bucket_ns() const {
    if (window_.to_ns && result_.begin_ns <= end_)
      return std::max<uint64_t>(1000, (end_ - result_.begin_ns) / kSummaryBuckets + 1);
    return 1'000'000;  // the span is not known before the end: 1 ms
  }

  void flush_summary(const TraceMeta& meta) {
    if (!any_pending_) return;
    any_pending_ = false;
    std::vector<Event> out;
    for (size_t i = 0; i < counter_keys_.size(); ++i) {
      LiveCounter& c = counter_values_[i];
      if (!c.pending) continue;
      c.pending = false;
      out.push_back(counter_event(counter_keys_[i], c.max.bytes, c.max.seq, c.max.time_ns, c.max.thread, c.max.range));
      if (c.last.seq != c.max.seq)
        out.push_back(
            counter_event(counter_keys_[i], c.last.bytes, c.last.seq, c.last.time_ns, c.last.thread, c.last.range));
    }
    std::sort(out.begin(), out.end(), [](const Event& a, const Event& b) { return a.seq < b.seq; });
    for (const Event& e : out) write(e, meta, true);
  }

  Event counter_event(const LevelKey& key, uint64_t bytes, uint64_t seq, uint64_t time_ns, uint32_t thread,
                      StringId range) {
    Event e{};
    e.seq = seq;
    e.time_ns = time_ns;
    e.bytes = bytes;
    e.thread = thread;
    e.range = range;
    e.device = key.device;
    e.kind = EventKind::kCounter;
    e.name = counter_name(key);  // an id of the output: written as it is
    return e;
  }

  StringId counter_name(const LevelKey& key) {
    const std::string name =
        fmt::format("live bytes ({}{})", key.level ? "reserved" : "allocated",
                    key.device < 0 ? std::string(", host") : fmt::format(", device {}", key.device));
    return writer_->intern(name);
  }

  // ---- output ---------------------------------------------------------------------

  void open_writer(const TraceMeta& meta) {
    TraceWriterOptions o;
    o.pid = meta.header.pid;
    o.rank = meta.header.rank;
    o.local_rank = meta.header.local_rank;
    o.world_size = meta.header.world_size;
    o.record_pid = meta.header.record_pid;
    o.flags = meta.header.flags;
    o.realtime_ns = meta.header.realtime_ns;
    o.monotonic_ns = meta.header.monotonic_ns;
    o.monotonic_raw_ns = meta.header.monotonic_raw_ns;
    o.hostname.assign(meta.header.hostname, strnlen(meta.header.hostname, sizeof meta.header.hostname));
    o.run_id.assign(meta.run.run_id, strnlen(meta.run.run_id, sizeof meta.run.run_id));
    o.run_id_source = static_cast<format::RunIdSource>(meta.run.source);
    o.command = meta.command;
    writer_ = std::make_unique<TraceWriter>(output_, o);
    meta_for_flush_ = &meta;
  }

  StringId remap(StringId id, const TraceMeta& meta) {
    if (id.empty()) return id;
    if (id.value >= remapped_.size()) remapped_.resize(size_t{id.value} + 1, UINT32_MAX);
    uint32_t& to = remapped_[id.value];
    if (to == UINT32_MAX) to = writer_->intern(meta.string(id)).value;
    return StringId{to};
  }

  void write(Event e, const TraceMeta& meta, bool output_ids = false) {
    e.range = remap(e.range, meta);
    if (!output_ids) {
      e.name = remap(e.name, meta);
      e.payload = remap(e.payload, meta);
    }
    if (e.thread >= declared_.size()) declared_.resize(size_t{e.thread} + 1, false);
    if (!declared_[e.thread]) {
      declared_[e.thread] = true;
      if (e.thread < meta.threads.size())
        writer_->thread(e.thread, meta.threads[e.thread].os_tid, meta.threads[e.thread].name);
    }
    writer_->event(e);
    ++result_.output_events;
  }

  ExportWindow window_;
  std::string output_;
  const TraceEnd& trace_end_;
  RangeTable ranges_;
  ScopeTracker scope_;
  Phase phase_ = Phase::kBefore;
  uint64_t begin_ = 0;
  uint64_t end_ = UINT64_MAX;
  uint64_t last_time_ = 0;
  WindowResult result_;
  std::vector<std::vector<Frame>> stacks_;
  std::vector<Event> open_;
  std::unordered_map<uint64_t, Event> counters_;
  std::unordered_map<DeviceAddress, Event, DeviceAddressHash> live_[2];
  std::vector<LevelKey> counter_keys_;
  std::vector<LiveCounter> counter_values_;
  uint64_t bucket_ = 0;
  bool any_pending_ = false;
  std::unique_ptr<TraceWriter> writer_;
  const TraceMeta* meta_for_flush_ = nullptr;
  std::vector<uint32_t> remapped_;
  std::vector<bool> declared_;
  format::FileHeader header_{};
};

// The writer fills a header from its options; the input's own (host name and
// all) goes back over it: the same layout, its own checksum.
void keep_header(const std::string& output, format::FileHeader header) {
  const int fd = ::open(output.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return;
  // The window's own header says how long the headers it wrote are.
  format::FileHeader written{};
  if (::pread(fd, &written, sizeof written, 0) == static_cast<ssize_t>(sizeof written)) {
    header.header_bytes = written.header_bytes;
    header.header_crc = crc32c(&header, offsetof(format::FileHeader, header_crc));
    const ssize_t n = ::pwrite(fd, &header, sizeof(header), 0);
    (void)n;
  }
  ::close(fd);
}

}  // namespace

WindowResult write_window(const std::string& trace, const ExportWindow& window, const std::string& output) {
  if (window.from_ns && window.to_ns && *window.to_ns < *window.from_ns)
    throw InputError(trace, fmt::format("the window ends ({}) before it begins ({})", format_seconds(*window.to_ns),
                                        format_seconds(*window.from_ns)));
  if (window.wave && (window.from_ns || window.to_ns))
    throw InputError(trace, "a window is either --wave or --from/--to, not both");
  if (window.wave && *window.wave < 0) throw InputError(trace, fmt::format("there is no wave {}", *window.wave));
  // read_trace_placed's two passes, the first one keeping the file's end.
  TraceEnd trace_end;
  DeferredCollector collector(&trace_end);
  read_trace(trace, collector);
  const std::shared_ptr<const DeferredPlacement> placement =
      collector.found()
          ? build_placement(trace, std::move(collector.deferred()), collector.strings(), collector.events())
          : nullptr;
  WindowWriter writer(window, output, trace_end);
  progress_stage("reading " + trace + " for its window", 0);
  read_placed(trace, placement.get(), writer);
  progress_done();
  if (!writer.started() && window.absolute && !window.wave) {
    WindowResult empty = writer.result();
    empty.empty = true;
    return empty;
  }
  if (!writer.started()) {
    if (window.wave)
      throw InputError(trace, fmt::format("there is no wave {} (the trace has {} wave{}, numbered from 0)",
                                          *window.wave, writer.waves_seen(), writer.waves_seen() == 1 ? "" : "s"));
    const WindowResult& r = writer.result();
    const uint64_t span = writer.last_time_ns() - r.first_time_ns;
    throw InputError(trace, fmt::format("the window begins at {}, beyond the trace's end ({} after its first event)",
                                        format_seconds(window.from_ns.value_or(0)), format_seconds(span)));
  }
  keep_header(output, writer.header());
  return writer.result();
}

namespace {

class WindowProber : public TraceVisitor {
 public:
  explicit WindowProber(std::optional<int32_t> wave) : wave_(wave), ranges_(default_range_parser()), scope_(ranges_) {}

  void on_events(const Event* events, size_t count, const TraceMeta& meta) override {
    for (size_t i = 0; i < count && !finished(); ++i) on_event(events[i], meta);
  }
  void on_end(const TraceMeta&, const ReadStatus&) override {
    probe_.waves_seen = static_cast<int32_t>(scope_.waves().size());
  }
  bool finished() const override { return wave_ ? wave_done_ : probe_.any_events; }
  const WindowProbe& probe() const { return probe_; }

 private:
  void on_event(const Event& e, const TraceMeta& meta) {
    if (!probe_.any_events && !is_deferred(e)) {
      probe_.any_events = true;
      probe_.first_time_ns = e.time_ns;
    }
    const uint64_t ordinal = ordinal_++;
    if (!wave_) return;
    if (probe_.has_wave) probe_.wave_end_ns = std::max(probe_.wave_end_ns, e.time_ns);
    if (is_memory_event(e.kind)) return;
    // The window's own rules (WindowWriter::on_event): from the wave's push to its pop.
    const ScopeTracker::Update update = scope_.on_event(e, ordinal, meta);
    if (update.wave != *wave_) return;
    if (update.change == ScopeTracker::Change::kWaveBegin && !probe_.has_wave) {
      probe_.has_wave = true;
      probe_.wave_begin_ns = probe_.wave_end_ns = e.time_ns;
    } else if (update.change == ScopeTracker::Change::kWaveEnd && probe_.has_wave) {
      probe_.wave_end_ns = e.time_ns;
      wave_done_ = true;
    }
  }

  std::optional<int32_t> wave_;
  RangeTable ranges_;
  ScopeTracker scope_;
  WindowProbe probe_;
  uint64_t ordinal_ = 0;
  bool wave_done_ = false;
};

}  // namespace

WindowProbe probe_window(const std::string& trace, std::optional<int32_t> wave) {
  WindowProber prober(wave);
  // A wave is found as the window finds it, with deferred events placed; the
  // first event is the first chunk's.
  if (wave)
    read_trace_placed(trace, prober);
  else
    read_trace(trace, prober);
  return prober.probe();
}

}  // namespace psc
