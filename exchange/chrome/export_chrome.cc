// `export --format chrome`: the JSON trace-event format (chrome://tracing, and
// ui.perfetto.dev's legacy JSON importer). Same content as the Perfetto export
// (export_perfetto.cc) in the JSON vocabulary:
//   - B/E slices for push/pop ranges, b/e async slices for start/end ranges,
//     instants for marks, M metadata for process and thread names;
//   - one "C" counter event per device whose arguments are the live bytes of
//     each category, which the viewers draw stacked;
//   - each allocation as an "X" slice on a lane pseudo-thread of its device,
//     written when it ends (or at the end of the trace, still live);
//   - global instants at the trace's peak and at each wave's peak.
// Written as a stream; viewers load the whole file, so above ~100 MB it warns
// and suggests --format perfetto.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "exchange/export_formats.h"
#include "exchange/export_model.h"
#include "exchange/export_output.h"
#include "exchange/export_text.h"

namespace psc {
namespace {

constexpr uint32_t kLaneTidBase = 0x40000000;  // pseudo-thread ids of allocation lanes
constexpr uint32_t kMaxLane = (1u << 20) - 1;

std::string device_label(int16_t device) { return device < 0 ? "host" : fmt::format("device {}", device); }

// What the writers of one file share: the comma between records, the size
// warning given once.
struct ChromeFile {
  OutputFile& out;
  bool first = true;
  bool warned = false;
};

class ChromeWriter : public BoundedVisitor, private ExportReplay::Listener {
 public:
  ChromeWriter(const ExportModel& model, ChromeFile& file, const ExportOptions& options,
               const ProcessPlacement& place = {})
      : BoundedVisitor(model.analysis.trace.status.events),
        model_(model),
        file_(file),
        out_(file.out),
        warn_(options.warn),
        warn_bytes_(options.chrome_warn_bytes),
        place_(place),
        replay_(model, this) {}

  // The file's opening, up to the array of events: "otherData" describes the
  // trace, or with `run` the run.
  static void open(ChromeFile& file, const std::string& other_data) {
    file.out.write("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"peakscope export --format chrome\",");
    file.out.write(other_data);
    file.out.write("},\n\"traceEvents\":[\n");
  }
  static void close(ChromeFile& file) { file.out.write("\n]}\n"); }

  void on_event(const Event& e, const TraceMeta& meta) override {
    meta_ = &meta;
    if (!begun_) begin(meta);
    event(e, meta);
  }

  void begin(const TraceMeta& meta) {
    // Not in on_begin: the command line arrives with the first chunk.
    begun_ = true;
    pid_ = place_.in_run ? place_.pid : (meta.header.pid ? meta.header.pid : 1);
    if (!place_.in_run)
      open(file_, fmt::format("\"trace\":{},\"level\":\"{}\",\"peak_bytes\":{}",
                              json_quote(std::filesystem::path(model_.trace).filename().string()),
                              memory_level_name(model_.level), model_.analysis.peak.bytes));
    std::string name = meta.command.empty() ? "peakscope trace" : meta.command;
    if (place_.in_run) name = place_.name + ": " + name;
    record(
        fmt::format(R"J({{"ph":"M","name":"process_name","pid":{},"args":{{"name":{}}}}})J", pid_, json_quote(name)));
    if (place_.in_run)
      record(fmt::format(R"J({{"ph":"M","name":"process_sort_index","pid":{},"args":{{"sort_index":{}}}}})J", pid_,
                         place_.index));
  }

  void event(const Event& e, const TraceMeta& meta) {
    last_time_ = std::max(last_time_, e.time_ns);
    switch (e.kind) {
      case EventKind::kRangePush:
        thread(e.thread);
        ++depth_[e.thread];
        record(fmt::format(R"J({{"ph":"B","name":{},"pid":{},"tid":{},"ts":{}}})J", name(e.name), pid_, e.thread,
                           micros(t(e.time_ns))));
        break;
      case EventKind::kRangePop:
        thread(e.thread);
        if (depth_[e.thread] == 0) break;
        --depth_[e.thread];
        record(fmt::format(R"J({{"ph":"E","pid":{},"tid":{},"ts":{}}})J", pid_, e.thread, micros(t(e.time_ns))));
        break;
      case EventKind::kMark:
        thread(e.thread);
        record(fmt::format(R"J({{"ph":"i","s":"t","name":{},"pid":{},"tid":{},"ts":{}{}}})J", name(e.name), pid_,
                           e.thread, micros(t(e.time_ns)), payload_args(e.payload)));
        break;
      case EventKind::kRangeStart:
        if (open_ranges_.emplace(e.address, e.name.value).second)
          record(fmt::format(R"J({{"ph":"b","cat":"range","id":"0x{:x}","name":{},"pid":{},"tid":{},"ts":{}{}}})J",
                             e.address, name(e.name), pid_, e.thread, micros(t(e.time_ns)), payload_args(e.payload)));
        break;
      case EventKind::kRangeEnd: {
        auto it = open_ranges_.find(e.address);
        if (it == open_ranges_.end()) break;
        record(fmt::format(R"J({{"ph":"e","cat":"range","id":"0x{:x}","name":{},"pid":{},"tid":{},"ts":{}}})J",
                           e.address, name(StringId{it->second}), pid_, e.thread, micros(t(e.time_ns))));
        open_ranges_.erase(it);
        break;
      }
      case EventKind::kCounter:
        record(fmt::format(R"J({{"ph":"C","name":{},"pid":{},"ts":{},"args":{{"value":{}}}}})J", name(e.name), pid_,
                           micros(t(e.time_ns)), e.bytes));
        break;
      default: break;
    }
    replay_.on_event(e, meta);
  }

  void on_end(const TraceMeta& meta, const ReadStatus&) override {
    meta_ = &meta;
    if (!begun_) begin(meta);
    std::vector<ExportReplay::Allocation> still_live;
    replay_.for_each_live([&](const ExportReplay::Allocation& a) { still_live.push_back(a); });
    std::sort(still_live.begin(), still_live.end(),
              [](const ExportReplay::Allocation& x, const ExportReplay::Allocation& y) { return x.index < y.index; });
    for (const ExportReplay::Allocation& a : still_live) allocation_slice(a, last_time_, true);
    peaks();
    for (uint32_t t = 0; t < thread_named_.size(); ++t)
      if (thread_named_[t] && thread_label(t) != thread_names_[t]) name_thread(t);
    if (!place_.in_run) close(file_);
  }

 private:
  // A trace's time in the file: its own MONOTONIC, or in a run nanoseconds
  // from the run's origin.
  uint64_t t(uint64_t time_ns) const { return place_.in_run ? place_.placed(time_ns) : time_ns; }

  void record(const std::string& json) {
    if (!file_.first) out_.write(",\n");
    file_.first = false;
    out_.write(json);
    if (!file_.warned && out_.bytes_written() > warn_bytes_) {
      file_.warned = true;
      emit_warning(warn_,
                   out_.path() +
                       fmt::format(": the Chrome JSON output passed {}; JSON viewers", format_bytes(warn_bytes_)) +
                       " load the whole file and slow down "
                       "or fail beyond this size: use --format perfetto for large traces");
    }
  }

  std::string name(StringId id) const { return json_quote(meta_->string(id)); }
  std::string payload_args(StringId payload) const {
    if (payload.empty()) return "";
    return fmt::format(R"J(,"args":{{"payload":{}}})J", json_quote(meta_->string(payload)));
  }

  std::string thread_label(uint32_t t) const {
    if (t < meta_->threads.size() && !meta_->threads[t].name.empty()) return meta_->threads[t].name;
    return fmt::format("thread {}", t);
  }
  void name_thread(uint32_t t) {
    thread_names_[t] = thread_label(t);
    record(fmt::format(R"J({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})J", pid_, t,
                       json_quote(thread_names_[t])));
  }
  void thread(uint32_t t) {
    if (t >= thread_named_.size()) {
      thread_named_.resize(t + 1, false);
      thread_names_.resize(t + 1);
      depth_.resize(t + 1, 0);
    }
    if (!thread_named_[t]) {
      thread_named_[t] = true;
      name_thread(t);
    }
  }

  uint32_t lane_tid(int16_t device, uint32_t lane) {
    const uint32_t tid =
        kLaneTidBase + (static_cast<uint32_t>(static_cast<uint16_t>(device + 1)) << 20) + std::min(lane, kMaxLane);
    if (named_lanes_.insert(tid).second) {
      record(fmt::format(
          R"J({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":"allocations {} lane {}"}}}})J", pid_,
          tid, device_label(device), lane));
      record(fmt::format(R"J({{"ph":"M","name":"thread_sort_index","pid":{},"tid":{},"args":{{"sort_index":{}}}}})J",
                         pid_, tid, tid));
    }
    return tid;
  }

  void allocation_slice(const ExportReplay::Allocation& a, uint64_t end_ns, bool still_live) {
    const uint64_t dur = end_ns > a.time_ns ? end_ns - a.time_ns : 0;
    record(fmt::format(
        R"J({{"ph":"X","name":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"bytes":{},"address":"0x{:x}","range":{},"thread":{}{}}}}})J",
        category_name(a.category), pid_, lane_tid(a.device, a.lane), micros(t(a.time_ns)), micros(dur), a.bytes,
        a.address, name(a.range), a.thread, still_live ? ",\"still_live\":true" : ""));
  }

  void counters(int16_t device, uint64_t time_ns) {
    const CategoryBytes& live = replay_.live(device);
    std::string args;
    for (int c = 0; c < kCategoryCount; ++c)
      args += fmt::format("{}\"{}\":{}", c ? "," : "", category_name(static_cast<Category>(c)), live[c]);
    record(fmt::format(R"J({{"ph":"C","name":"live bytes ({}, {})","pid":{},"ts":{},"args":{{{}}}}})J",
                       memory_level_name(model_.level), device_label(device), pid_, micros(t(time_ns)), args));
  }

  void on_other_level(const Event& e) override {
    const uint64_t before = other_replay_.live_bytes();
    if (other_replay_.apply(e, EventSite{0, {}, -1}) == MemoryReplay::Effect::kNone) return;
    const size_t slot = static_cast<size_t>(e.device + 1);
    if (slot >= other_live_.size()) other_live_.resize(slot + 1, 0);
    other_live_[slot] = other_live_[slot] + other_replay_.live_bytes() - before;
    const MemoryLevel other =
        model_.level == MemoryLevel::kAllocated ? MemoryLevel::kReserved : MemoryLevel::kAllocated;
    record(fmt::format(R"J({{"ph":"C","name":"live bytes ({}, {})","pid":{},"ts":{},"args":{{"total":{}}}}})J",
                       memory_level_name(other), device_label(e.device), pid_, micros(t(e.time_ns)),
                       other_live_[slot]));
  }

  void peaks() {
    const Analysis& a = model_.analysis;
    if (a.peak.site.reached)
      record(fmt::format(R"J({{"ph":"i","s":"g","name":"peak: {}","pid":{},"tid":0,"ts":{},"args":{{"bytes":{}}}}})J",
                         format_bytes(a.peak.bytes), pid_, micros(t(a.peak.site.time_ns)), a.peak.bytes));
    for (const WaveReport& w : a.waves) {
      const uint64_t at = w.peak.site.reached ? w.peak.site.time_ns : w.span.begin_time_ns;
      record(fmt::format(
          R"J({{"ph":"i","s":"g","name":"wave {} peak: {}","pid":{},"tid":0,"ts":{},"args":{{"bytes":{},"baseline_bytes":{},"measured_peak_bytes":{}}}}})J",
          w.span.index, format_bytes(w.peak.bytes), pid_, micros(t(at)), w.peak.bytes, w.baseline_bytes,
          w.measured_peak_bytes()));
    }
  }

  void on_alloc(const ExportReplay::Allocation& a, const Event& e) override { counters(a.device, e.time_ns); }
  void on_end(const ExportReplay::Allocation& a, const Event& at, ExportReplay::EndKind) override {
    allocation_slice(a, at.time_ns, false);
    counters(a.device, at.time_ns);
  }

  const ExportModel& model_;
  ChromeFile& file_;
  OutputFile& out_;
  const WarningSink& warn_;
  uint64_t warn_bytes_;
  ProcessPlacement place_;
  ExportReplay replay_;
  const TraceMeta* meta_ = nullptr;
  uint32_t pid_ = 1;
  bool begun_ = false;
  uint64_t last_time_ = 0;
  std::vector<bool> thread_named_;
  std::vector<std::string> thread_names_;
  std::vector<uint32_t> depth_;
  std::unordered_map<uint64_t, uint32_t> open_ranges_;  // id -> name
  std::unordered_set<uint32_t> named_lanes_;
  MemoryReplay other_replay_;
  std::vector<uint64_t> other_live_;
};

// A run: a process per member, in the run's order; ts counts from the run's
// origin (the earliest member's start) on CLOCK_REALTIME.
class ChromeExporter : public MembersExporter {
 public:
  ChromeExporter()
      : MembersExporter(
            "chrome",
            "JSON trace events (chrome://tracing, Perfetto's JSON import); for small traces, warns above 100 MB") {}

 private:
  void write_members(const std::vector<ExportMember>& members, const Run* run,
                     const ExportOptions& options) const override {
    LazyOutput out(options.output);
    std::optional<ChromeFile> file;
    replay_members(members, {}, options.warn, [&](const ExportModel& model, const ProcessPlacement& place) {
      if (!file) {
        file.emplace(out.get());
        // A single trace's writer opens the file with its own "otherData".
        if (run) ChromeWriter::open(*file, run_data(*run, members));
      }
      return std::make_unique<ChromeWriter>(model, *file, options, place);
    });
    if (run && file) ChromeWriter::close(*file);
    out.commit();
  }

  // The run's "otherData": its id, origin and members.
  static std::string run_data(const Run& run, const std::vector<ExportMember>& members) {
    std::string listed;
    for (size_t i = 0; i < members.size(); ++i)
      listed += fmt::format("{}{{\"trace\":{},\"process\":{},\"pid\":{}}}", i ? "," : "",
                            json_quote(std::filesystem::path(members[i].trace).filename().string()),
                            json_quote(members[i].place.name), members[i].place.pid);
    return fmt::format("\"run\":{},\"origin_realtime_ns\":{},\"members\":[{}]", json_quote(run.id),
                       members.empty() ? 0 : members[0].place.origin_realtime_ns, listed);
  }
};

}  // namespace

const Exporter& chrome_exporter() {
  static const ChromeExporter exporter;
  return exporter;
}

}  // namespace psc
