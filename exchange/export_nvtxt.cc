// `export --format nvtxt`: the NVTXT text that Nsight Systems' ImportNvtxt
// merges into a report (`ImportNvtxt --cmd merge -i run.nsys-rep --nvtxt
// trace.nvtxt -o merged.nsys-rep`), so the ranges and marks peakscope recorded
// and the peaks it found sit on Nsight's timeline next to the CUDA activity.
//
// The format (NVIDIA's "NVTXT File Extension" page; docs/viewers.md): one
// instruction per line; `@Name, Param...` declares an instruction's
// parameters, the `Variable = value` lines after it its defaults; then
// `RangePush, Time, ThreadId, "Message"` and so on.
//
// Clock base: times are the trace's CLOCK_MONOTONIC nanoseconds, written as
// they are. The header declares `TimeBase = ClockMonotonicRaw` by default, the
// closest base Nsight offers on Linux (what KernelAbstractions.jl's NVTXT
// writer declares for the same clock); CLOCK_MONOTONIC is slewed by NTP and
// CLOCK_MONOTONIC_RAW is not, so the two drift apart (at most 500 ppm) since
// boot. `--nvtxt-time-base Manual` writes `TimeBase = Manual` instead, for
// ImportNvtxt --cmd create. The file's comments carry the trace's REALTIME /
// MONOTONIC pair for aligning it by hand.
//
// NVTXT has ranges and marks, no counters: live bytes are not exported here
// (use nsys-sqlite or perfetto); the peaks are marks.
#include <algorithm>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "exchange/export_formats.h"
#include "exchange/export_model.h"
#include "exchange/export_output.h"
#include "exchange/export_text.h"

namespace psc {
namespace {

// NVTXT messages are double-quoted; we found no escape for a quote, so quotes
// become apostrophes and line breaks spaces.
std::string message(std::string_view raw) {
  std::string s = sanitize_utf8(raw);
  for (char& c : s) {
    if (c == '"') c = '\'';
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return "\"" + s + "\"";
}

class NvtxtWriter : public BoundedVisitor {
 public:
  NvtxtWriter(const ExportModel& model, OutputFile& out, std::string time_base)
      : BoundedVisitor(model.analysis.trace.status.events), model_(model), out_(out), time_base_(std::move(time_base)) {
    const Analysis& a = model.analysis;
    if (a.peak.site.reached)
      marks_.push_back({a.peak.site.seq, a.peak.site.time_ns, a.peak.site.thread,
                        fmt::format("peak: {} ({} bytes) in {}", format_bytes(a.peak.bytes), a.peak.bytes,
                                    a.peak.site.range.empty() ? "(no range)" : a.peak.site.range)});
    for (const WaveReport& w : a.waves) {
      const bool reached = w.peak.site.reached;
      marks_.push_back({reached ? w.peak.site.seq : w.span.begin_seq,
                        reached ? w.peak.site.time_ns : w.span.begin_time_ns,
                        reached ? w.peak.site.thread : w.span.thread,
                        fmt::format("wave {} peak: {} ({} bytes), baseline {}, measured {} bytes", w.span.index,
                                    format_bytes(w.peak.bytes), w.peak.bytes, format_bytes(w.baseline_bytes),
                                    w.measured_peak_bytes())});
    }
    std::stable_sort(marks_.begin(), marks_.end(), [](const Mark& x, const Mark& y) { return x.seq < y.seq; });
  }

  void on_event(const Event& e, const TraceMeta& meta) override {
    meta_ = &meta;
    if (!header_written_) header(meta);
    while (next_mark_ < marks_.size() && marks_[next_mark_].seq < e.seq) peak_mark(marks_[next_mark_++]);
    switch (e.kind) {
      case EventKind::kRangePush:
        depth(e.thread)++;
        out_.write(fmt::format("RangePush, {}, {}, {}\n", e.time_ns, tid(e.thread), message(meta.string(e.name))));
        break;
      case EventKind::kRangePop:
        if (depth(e.thread) == 0) break;  // nothing open on that thread
        depth(e.thread)--;
        out_.write(fmt::format("RangePop, {}, {}\n", e.time_ns, tid(e.thread)));
        break;
      case EventKind::kMark: {
        std::string text(meta.string(e.name));
        if (!e.payload.empty()) text += " " + std::string(meta.string(e.payload));
        out_.write(fmt::format("Marker, {}, {}, {}\n", e.time_ns, tid(e.thread), message(text)));
        break;
      }
      case EventKind::kRangeStart: open_.emplace(e.address, Open{e.time_ns, e.thread, e.name}); break;
      case EventKind::kRangeEnd: {
        auto it = open_.find(e.address);
        if (it == open_.end()) break;
        // The whole range on one line, on the thread that started it.
        out_.write(fmt::format("RangeStartEnd, {}, {}, {}, {}\n", it->second.time_ns, e.time_ns, tid(it->second.thread),
                               message(meta.string(it->second.name))));
        open_.erase(it);
        break;
      }
      default: break;
    }
    while (next_mark_ < marks_.size() && marks_[next_mark_].seq <= e.seq) peak_mark(marks_[next_mark_++]);
  }

  void on_end(const TraceMeta& meta, const ReadStatus&) override {
    meta_ = &meta;
    if (!header_written_) header(meta);
    while (next_mark_ < marks_.size()) peak_mark(marks_[next_mark_++]);
    if (!open_.empty())
      out_.write(fmt::format("# {} start/end ranges were still open at the end of the trace and are not written\n",
                             open_.size()));
  }

 private:
  struct Mark {
    uint64_t seq, time_ns;
    uint32_t thread;
    std::string text;
  };
  struct Open {
    uint64_t time_ns;
    uint32_t thread;
    StringId name;
  };

  uint32_t& depth(uint32_t thread) {
    if (thread >= depth_.size()) depth_.resize(thread + 1, 0);
    return depth_[thread];
  }
  // The OS thread id where the recorder knew it, so the ranges land on the
  // threads Nsight itself traced; else the recorder's index.
  uint64_t tid(uint32_t thread) const {
    if (thread < meta_->threads.size() && meta_->threads[thread].os_tid) return meta_->threads[thread].os_tid;
    return thread;
  }

  void header(const TraceMeta& meta) {
    header_written_ = true;
    const uint32_t pid = meta.header.pid;
    out_.write(fmt::format(
        "# Written by peakscope export --format nvtxt from {}.\n"
        "# Times are CLOCK_MONOTONIC nanoseconds of the traced process (pid {}); at the start of recording\n"
        "# CLOCK_REALTIME was {} ns when CLOCK_MONOTONIC was {} ns. TimeBase below: see docs/viewers.md.\n"
        "# Peak marks: category 2. Ranges and marks of the trace: category 1.\n",
        std::string(std::filesystem::path(model_.trace).filename()), pid, meta.header.realtime_ns,
        meta.header.monotonic_ns));
    out_.write("SetFileDisplayName, peakscope\n");
    // The shape of a header ImportNvtxt is known to take (KernelAbstractions.jl
    // writes the same). Variables hold from their assignment to the next one,
    // so every block assigns the same values.
    const std::string values =
        fmt::format("ProcessId = {}\nCategoryId = 1\nColor = Blue\nTimeBase = {}\n", pid, time_base_);
    out_.write("@RangeStartEnd, Start, End, ThreadId, Message\n" + values);
    out_.write("@RangePush, Time, ThreadId, Message\n" + values);
    out_.write("@RangePop, Time, ThreadId\n" + values);
    out_.write("@Marker, Time, ThreadId, Message\n" + values);
  }

  void peak_mark(const Mark& m) {
    // Peaks in their own category and colour, then back to the defaults.
    out_.write(fmt::format("CategoryId = 2\nColor = Red\nMarker, {}, {}, {}\nCategoryId = 1\nColor = Blue\n", m.time_ns,
                           tid(m.thread), message(m.text)));
  }

  const ExportModel& model_;
  OutputFile& out_;
  std::string time_base_;
  const TraceMeta* meta_ = nullptr;
  bool header_written_ = false;
  std::vector<uint32_t> depth_;
  std::unordered_map<uint64_t, Open> open_;
  std::vector<Mark> marks_;
  size_t next_mark_ = 0;
};

class NvtxtExporter : public Exporter {
 public:
  std::string_view name() const override { return "nvtxt"; }
  std::string_view description() const override {
    return "NVTXT text for Nsight Systems' ImportNvtxt: ranges, marks, peak marks (CLOCK_MONOTONIC times)";
  }
  void write(const ExportOptions& options) const override {
    std::string base = options.nvtxt_time_base.empty() ? "ClockMonotonicRaw" : options.nvtxt_time_base;
    if (base != "ClockMonotonicRaw" && base != "Manual")
      throw InputError(options.trace, "--nvtxt-time-base must be ClockMonotonicRaw or Manual, not '" + base + "'");
    ExportModelOptions model_options;
    model_options.categories = false;
    const ExportModel model = build_export_model(options.trace, model_options);
    warn_if_incomplete(model, options.warn);
    OutputFile out(options.output);
    NvtxtWriter writer(model, out, base);
    read_placed(options.trace, model.analysis.placement.get(), writer);
    out.commit();
  }
};

}  // namespace

const Exporter& nvtxt_exporter() {
  static const NvtxtExporter exporter;
  return exporter;
}

}  // namespace psc
