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
// Clock base: `TimeBase = ClockMonotonicRaw` (the default) is Nsight's own
// clock on Linux, so times are written as CLOCK_MONOTONIC_RAW nanoseconds: the
// trace's CLOCK_MONOTONIC times moved by the difference of the two clocks read
// together at the start of recording (FileHeader::monotonic_raw_ns). The two
// differ by what NTP slewed since boot (hundreds of milliseconds after a few
// days); during one recording they drift apart by at most 500 ppm of its
// length. A trace without the raw sample (an older recorder, an import) is
// written in CLOCK_MONOTONIC with a warning. `--nvtxt-time-base Manual` writes
// the trace's times as they are under `TimeBase = Manual`, for ImportNvtxt
// --cmd create. The file's comments carry the trace's clock samples.
//
// ImportNvtxt 2022.4 converts CLOCK_MONOTONIC_RAW to the right time from the
// start of the report's analysis, but then places it as if it were from the
// report's own time origin: the merged ranges land early by the analysis'
// start (ANALYSIS_DETAILS.startTime, hundreds of milliseconds; measured in
// docs/viewers.md). `--nvtxt-align REPORT.sqlite` (the `nsys export --type
// sqlite` of the report to merge into) writes `TimeBase = Manual` values on
// the report's own timeline instead: the NVTX events both tools saw (under
// `nsys profile -t nvtx`, peakscope chains to Nsight, so both see every call)
// are paired by kind, text and occurrence; the median of their offsets, plus
// the analysis' start (SQLite times count from it), moves every time.
//
// NVTXT has ranges and marks, no counters: live bytes are not exported here
// (use nsys-sqlite or perfetto); the peaks are marks.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "exchange/export_formats.h"
#include "exchange/export_model.h"
#include "exchange/export_output.h"
#include "exchange/export_text.h"
#include "exchange/nsys/nsys_nvtx.h"
#include "exchange/nsys/nsys_schema.h"
#include "exchange/nsys/sqlite_db.h"

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

// ---- alignment to an Nsight report (--nvtxt-align) ------------------------------

// The key two tools give the same NVTX call: its kind and its text as
// peakscope names it (`<domain>::<message>`, a mark's payload after a space).
std::string anchor_key(char kind, std::string_view text) { return std::string(1, kind) + std::string(text); }

// The trace's NVTX pushes, starts and marks, in order: the first kMaxAnchors.
class TraceAnchors : public BoundedVisitor {
 public:
  static constexpr size_t kMaxAnchors = 1u << 20;
  explicit TraceAnchors(uint64_t limit) : BoundedVisitor(limit) {}
  std::vector<std::pair<std::string, uint64_t>> anchors;

 protected:
  void on_event(const Event& e, const TraceMeta& meta) override {
    if (e.api != Api::kNvtx || anchors.size() >= kMaxAnchors) return;
    switch (e.kind) {
      case EventKind::kRangePush: anchors.emplace_back(anchor_key('P', meta.string(e.name)), e.time_ns); break;
      case EventKind::kRangeStart: anchors.emplace_back(anchor_key('S', meta.string(e.name)), e.time_ns); break;
      case EventKind::kMark: {
        std::string text(meta.string(e.name));
        if (!e.payload.empty()) text += " " + std::string(meta.string(e.payload));
        anchors.emplace_back(anchor_key('M', text), e.time_ns);
        break;
      }
      default: break;
    }
  }
};

struct Alignment {
  int64_t shift_ns = 0;  // report time = trace time + shift_ns
  size_t matched = 0;
  int64_t spread_ns = 0;  // largest minus smallest offset of the pairs
};

// The report's NVTX events of `pid`, keyed as the trace's (named as the
// recorder names the same calls, exchange/nsys/nsys_nvtx.h), each key's in time order.
std::unordered_map<std::string, std::vector<int64_t>> report_anchors(const std::string& path, uint32_t pid) {
  sqlite::Db db(path, true);
  if (!db.has_table("NVTX_EVENTS"))
    throw InputError(path, "no NVTX_EVENTS table: not an `nsys export --type sqlite` of a run traced with -t nvtx");
  std::unordered_map<std::string, std::vector<int64_t>> out;
  nsys::read_nvtx_rows(db, pid, nsys::read_string_ids(db), [&](const nsys::NvtxRow& r) {
    const bool mark = r.type == nsys::kNvtxMark;
    const bool push = r.type == nsys::kNvtxPushPopRange || r.type == nsys::kNvtxtPushPopRange;
    const std::string text = mark && !r.payload.empty() ? r.name + " " + r.payload : r.name;
    out[anchor_key(mark ? 'M' : push ? 'P' : 'S', text)].push_back(r.start);
  });
  for (auto& [key, times] : out) std::sort(times.begin(), times.end());
  return out;
}

// Where the report's analysis starts on its own timeline: what its SQLite
// export's times count from. 0 when the export does not say.
int64_t analysis_start(const std::string& path) {
  sqlite::Db db(path, true);
  if (!db.has_table("ANALYSIS_DETAILS") || !db.has_column("ANALYSIS_DETAILS", "startTime")) return 0;
  sqlite::Statement s(db, "SELECT MIN(startTime) FROM ANALYSIS_DETAILS");
  return s.next() && !s.is_null(0) ? s.integer(0) : 0;
}

Alignment align_to_report(const ExportModel& model, const std::string& report) {
  const uint32_t pid = model.analysis.trace.header.pid;
  const auto theirs = report_anchors(report, pid);
  if (theirs.empty())
    throw InputError(report, fmt::format("no NVTX events of pid {} (the traced process): was it profiled with "
                                         "`nsys profile -t nvtx` around `peakscope record`?",
                                         pid));
  TraceAnchors ours(model.analysis.trace.status.events);
  read_placed(model.trace, model.analysis.placement.get(), ours);
  std::unordered_map<std::string, size_t> seen;
  std::vector<int64_t> offsets;
  for (const auto& [key, time_ns] : ours.anchors) {
    auto it = theirs.find(key);
    const size_t k = seen[key]++;
    if (it == theirs.end() || k >= it->second.size()) continue;
    offsets.push_back(it->second[k] - static_cast<int64_t>(time_ns));
  }
  if (offsets.empty())
    throw InputError(report, fmt::format("none of the trace's {} NVTX events is in the report's NVTX_EVENTS of pid {}; "
                                         "nothing to align by",
                                         ours.anchors.size(), pid));
  std::sort(offsets.begin(), offsets.end());
  Alignment a;
  a.shift_ns = offsets[offsets.size() / 2] + analysis_start(report);
  a.matched = offsets.size();
  a.spread_ns = offsets.back() - offsets.front();
  return a;
}

class NvtxtWriter : public BoundedVisitor {
 public:
  // Times move by `shift_ns` (the raw clock's offset, or 0).
  NvtxtWriter(const ExportModel& model, OutputFile& out, std::string time_base, int64_t shift_ns,
              std::string aligned_to)
      : BoundedVisitor(model.analysis.trace.status.events),
        model_(model),
        out_(out),
        time_base_(std::move(time_base)),
        shift_ns_(shift_ns),
        aligned_to_(std::move(aligned_to)) {
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
        out_.write(fmt::format("RangePush, {}, {}, {}\n", at(e.time_ns), tid(e.thread), message(meta.string(e.name))));
        break;
      case EventKind::kRangePop:
        if (depth(e.thread) == 0) break;  // nothing open on that thread
        depth(e.thread)--;
        out_.write(fmt::format("RangePop, {}, {}\n", at(e.time_ns), tid(e.thread)));
        break;
      case EventKind::kMark: {
        std::string text(meta.string(e.name));
        if (!e.payload.empty()) text += " " + std::string(meta.string(e.payload));
        out_.write(fmt::format("Marker, {}, {}, {}\n", at(e.time_ns), tid(e.thread), message(text)));
        break;
      }
      case EventKind::kRangeStart: open_.emplace(e.address, Open{e.time_ns, e.thread, e.name}); break;
      case EventKind::kRangeEnd: {
        auto it = open_.find(e.address);
        if (it == open_.end()) break;
        // The whole range on one line, on the thread that started it.
        out_.write(fmt::format("RangeStartEnd, {}, {}, {}, {}\n", at(it->second.time_ns), at(e.time_ns),
                               tid(it->second.thread), message(meta.string(it->second.name))));
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

  int64_t at(uint64_t time_ns) const { return static_cast<int64_t>(time_ns) + shift_ns_; }

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
    const std::string clock =
        !aligned_to_.empty()
            ? fmt::format("on the timeline of the Nsight report exported as {} (the trace's times {} {} ns)",
                          aligned_to_, shift_ns_ < 0 ? '-' : '+', shift_ns_ < 0 ? -shift_ns_ : shift_ns_)
        : time_base_ != "Manual" && meta.header.monotonic_raw_ns
            ? "of CLOCK_MONOTONIC_RAW (the trace's CLOCK_MONOTONIC times moved by the clocks' offset)"
            : "of CLOCK_MONOTONIC, as the trace holds them";
    out_.write(fmt::format(
        "# Written by peakscope export --format nvtxt from {}.\n"
        "# Times are nanoseconds {}; the traced process is pid {}.\n"
        "# At the start of recording CLOCK_REALTIME was {} ns, CLOCK_MONOTONIC {} ns, CLOCK_MONOTONIC_RAW {} ns\n"
        "# (0: not recorded). TimeBase below: see docs/viewers.md.\n"
        "# Peak marks: category 2. Ranges and marks of the trace: category 1.\n",
        std::string(std::filesystem::path(model_.trace).filename()), clock, pid, meta.header.realtime_ns,
        meta.header.monotonic_ns, meta.header.monotonic_raw_ns));
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
    out_.write(fmt::format("CategoryId = 2\nColor = Red\nMarker, {}, {}, {}\nCategoryId = 1\nColor = Blue\n",
                           at(m.time_ns), tid(m.thread), message(m.text)));
  }

  const ExportModel& model_;
  OutputFile& out_;
  std::string time_base_;
  int64_t shift_ns_;
  std::string aligned_to_;  // the report export aligned to, or ""
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
    return "NVTXT text for Nsight Systems' ImportNvtxt: ranges, marks, peak marks (CLOCK_MONOTONIC_RAW times)";
  }
  void write(const ExportOptions& options) const override {
    std::string base = options.nvtxt_time_base.empty() ? (options.nvtxt_align.empty() ? "ClockMonotonicRaw" : "Manual")
                                                       : options.nvtxt_time_base;
    if (base != "ClockMonotonicRaw" && base != "Manual")
      throw InputError(options.trace, "--nvtxt-time-base must be ClockMonotonicRaw or Manual, not '" + base + "'");
    ExportModelOptions model_options;
    model_options.categories = false;
    LazyOutput out(options.output);
    replay_members(export_members(options.trace), model_options, options.warn,
                   [&](const ExportModel& model, const ProcessPlacement&) {
                     const int64_t shift_ns = time_shift(model, options, base);
                     return std::make_unique<NvtxtWriter>(
                         model, out.get(), base, shift_ns,
                         options.nvtxt_align.empty()
                             ? std::string()
                             : std::string(std::filesystem::path(options.nvtxt_align).filename()));
                   });
    out.commit();
  }

 private:
  // What the trace's CLOCK_MONOTONIC times are shifted by: onto the report
  // aligned to, onto CLOCK_MONOTONIC_RAW, or not at all.
  static int64_t time_shift(const ExportModel& model, const ExportOptions& options, const std::string& base) {
    const format::FileHeader& h = model.analysis.trace.header;
    int64_t shift_ns = 0;
    if (!options.nvtxt_align.empty()) {
      const Alignment a = align_to_report(model, options.nvtxt_align);
      shift_ns = a.shift_ns;
      emit_warning(options.warn, fmt::format("aligned to {}: {} NVTX events paired, report time = trace time {} {} ns "
                                             "(pairs within {} ns of each other)",
                                             options.nvtxt_align, a.matched, shift_ns < 0 ? '-' : '+',
                                             shift_ns < 0 ? -shift_ns : shift_ns, a.spread_ns));
    } else if (base == "ClockMonotonicRaw" && h.monotonic_raw_ns) {
      shift_ns = static_cast<int64_t>(h.monotonic_raw_ns) - static_cast<int64_t>(h.monotonic_ns);
    } else if (base == "ClockMonotonicRaw") {
      emit_warning(options.warn,
                   fmt::format("{}: the trace has no CLOCK_MONOTONIC_RAW sample (an older recorder, or an import): "
                               "its CLOCK_MONOTONIC times are written as they are, off Nsight's clock by the two "
                               "clocks' difference (see docs/viewers.md)",
                               options.trace));
    }
    return shift_ns;
  }
};

}  // namespace

const Exporter& nvtxt_exporter() {
  static const NvtxtExporter exporter;
  return exporter;
}

}  // namespace psc
