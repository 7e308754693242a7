#include "analysis/report_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "analysis/device_usage_report.h"
#include "analysis/layer_fold.h"
#include "analysis/report_json.h"

namespace psc {
namespace {

using Out = std::string;

std::string seconds_since(uint64_t time_ns, uint64_t first_ns) {
  const double s = time_ns >= first_ns ? static_cast<double>(time_ns - first_ns) / 1e9 : 0.0;
  return fmt::format("+{:.6f} s", s);
}

// "1 chunk", "3 chunks"
std::string count(uint64_t n, const char* noun) { return fmt::format("{} {}{}", grouped(n), noun, n == 1 ? "" : "s"); }

std::string layer_text(int32_t layer) { return layer == kNoLayer ? "-" : std::to_string(layer); }

std::string percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? "-" : fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

// "backward/layer.0 (backward, layer 0)"; "(no range)" when empty.
std::string where(const PeakSite& site) {
  const std::string name = site.range.empty() ? "(no range)" : site.range;
  if (site.parsed.has_layer())
    return fmt::format("{} ({}, layer {})", name, phase_name(site.parsed.phase), site.parsed.layer);
  return fmt::format("{} ({})", name, phase_name(site.parsed.phase));
}

void render_status(const Analysis& a, Out& out) {
  const TraceSummary& t = a.trace;
  const ReadStatus& s = t.status;
  out += fmt::format("trace      {}\n", printable_path(t.path));
  out +=
      fmt::format("status     {}: {} in {} ({} of {} bytes read{}){}\n", read_state_name(s.state),
                  count(s.events, "event"), count(s.chunks, "chunk"), grouped(s.good_bytes), grouped(s.file_bytes),
                  s.gaps ? fmt::format(", {} damaged skipped in {}", count(s.gap_bytes, "byte"), count(s.gaps, "gap"))
                         : std::string(),
                  t.clean_end       ? ", closed cleanly"
                  : t.being_written ? ", still being written"
                                    : ", not closed by the recorder");
  const size_t host_length = strnlen(t.header.hostname, sizeof t.header.hostname);
  out += fmt::format("process    pid {}", t.header.pid);
  if (t.header.rank >= 0) out += fmt::format(", rank {}", t.header.rank);
  if (t.header.local_rank >= 0) out += fmt::format(", local rank {}", t.header.local_rank);
  if (host_length) out += fmt::format(", host {}", std::string(t.header.hostname, host_length));
  out += fmt::format(", {}\n", count(t.threads, "thread"));
  if (!t.command.empty()) out += fmt::format("command    {}\n", printable_path(t.command));
}

void render_warnings(const Analysis& a, Out& out) {
  const TraceSummary& t = a.trace;
  if (t.status.state == ReadStatus::State::kGap)
    out += fmt::format(
        "WARNING    the trace has damaged bytes in the middle ({}); this report covers the {} events "
        "in the good chunks around them\n",
        t.status.reason, grouped(t.status.events));
  else if (!t.status.complete())
    out += fmt::format("WARNING    the trace is {} ({}); this report covers the {} events before that point{}\n",
                       read_state_name(t.status.state), t.status.reason, grouped(t.status.events),
                       t.status.gaps ? fmt::format(" (after skipping {} damaged bytes earlier: {})",
                                                   grouped(t.status.gap_bytes), t.status.gap_reason)
                                     : std::string());
  else if (t.being_written)
    out += fmt::format(
        "WARNING    the trace is still being written (pid {} runs on this host); this report covers the {} events "
        "written so far\n",
        t.header.pid, grouped(t.status.events));
  else if (!t.clean_end)
    out +=
        "WARNING    the recorder did not close the trace (the process was killed or crashed?); "
        "everything written before that is reported\n";
  if (t.dropped > 0) {
    std::string reasons;
    for (int r = 0; r < format::kDropReasonCount; ++r) {
      if (t.drops[static_cast<size_t>(r)] == 0) continue;
      if (!reasons.empty()) reasons += ", ";
      reasons += fmt::format("{} {}", drop_reason_name(static_cast<format::DropReason>(r)),
                             grouped(t.drops[static_cast<size_t>(r)]));
    }
    out += fmt::format("WARNING    the recorder dropped {} events ({}): figures may be low\n", grouped(t.dropped),
                       reasons);
  }
  if (t.missing_seqs > 0)
    out += fmt::format(
        "WARNING    {} sequence numbers between {} and {} are missing from the file: events were lost "
        "({} counted as dropped)\n",
        grouped(t.missing_seqs), t.first_seq, t.last_seq, grouped(t.dropped));
  if (t.late_events > 0)
    out += fmt::format("note       {} events were written after later ones (late); they are analysed in file order\n",
                       grouped(t.late_events));
  for (const std::string& w : a.warnings) out += fmt::format("WARNING    {}\n", w);
}

void render_memory(const Analysis& a, Out& out) {
  const MemorySummary& m = a.memory;
  const MemoryCounts& c = m.counts;
  out += fmt::format("memory     {} level: {} ({} in total), {}\n", memory_level_name(m.level),
                     count(c.allocs, "allocation"), format_bytes(c.allocated_bytes), count(c.frees, "free"));
  std::string ignored;
  auto add = [&](uint64_t n, const char* what) {
    if (n == 0) return;
    if (!ignored.empty()) ignored += ", ";
    ignored += fmt::format("{} {}", grouped(n), what);
  };
  add(c.nested, "nested");
  add(c.failed, "failed");
  add(c.unmatched_frees, "unmatched frees");
  add(c.replaced, "allocations over a live address");
  add(c.null_frees, "frees of address 0");
  add(m.other_level_events, m.level == MemoryLevel::kAllocated ? "reserved-level events" : "allocated-level events");
  if (!ignored.empty()) out += fmt::format("           not counted: {}\n", ignored);
  out += fmt::format("           live at the end: {} in {}\n", format_bytes(m.live_at_end_bytes),
                     count(m.live_at_end_allocations, "allocation"));
}

void render_peak(const Analysis& a, Out& out) {
  const PeakReport& p = a.peak;
  if (!p.site.reached) {
    out += "peak       nothing was ever live\n";
    return;
  }
  const std::string thread = p.site.thread_name.empty() ? std::to_string(p.site.thread)
                                                        : fmt::format("{} ({})", p.site.thread, p.site.thread_name);
  out += fmt::format("peak       {} ({} bytes) at {} (seq {}), thread {}\n", format_bytes(p.bytes), p.bytes,
                     seconds_since(p.site.time_ns, a.trace.first_time_ns), p.site.seq, thread);
  out += fmt::format("           reached in {}; {} live\n", where(p.site), count(p.live.allocations, "allocation"));
}

void render_categories(const LiveBreakdown& live, Out& out) {
  out += fmt::format("  {:<18} {:>12} {:>16} {:>7}\n", "category", "size", "bytes", "share");
  for (int c = 0; c < kCategoryCount; ++c) {
    const uint64_t bytes = live.category_bytes[static_cast<size_t>(c)];
    if (bytes == 0) continue;
    out += fmt::format("  {:<18} {:>12} {:>16} {:>7}\n", category_name(static_cast<Category>(c)), format_bytes(bytes),
                       bytes, percent(bytes, live.bytes));
  }
}

bool same_bytes(const LayerRow& a, const LayerRow& b) {
  return a.boundary_bytes == b.boundary_bytes && a.adapter_gradient_bytes == b.adapter_gradient_bytes &&
         a.workspace_bytes == b.workspace_bytes && a.other_bytes == b.other_bytes;
}

// Consecutive layers that hold the same bytes share one row ("0-30", each
// layer's bytes; analysis/layer_fold.h). JSON keeps every row.
void render_layers(const std::vector<LayerRow>& layers, Out& out, const char* indent) {
  if (layers.empty()) {
    out += fmt::format("{}(no per-layer bytes)\n", indent);
    return;
  }
  out += fmt::format("{}{:>7} {:>12} {:>17} {:>12} {:>12}\n", indent, "layer", "boundary", "adapter_gradient",
                     "workspace", "other");
  bool folded = false;
  const auto joins = [&](size_t first, size_t next) {
    return layers[next].layer == layers[next - 1].layer + 1 && same_bytes(layers[next], layers[first]);
  };
  fold_layer_rows(layers.size(), joins, [&](size_t first, size_t last) {
    const LayerRow& r = layers[first];
    folded = folded || last > first;
    out += fmt::format("{}{:>7} {:>12} {:>17} {:>12} {:>12}\n", indent, layer_span(r.layer, layers[last].layer),
                       format_bytes(r.boundary_bytes), format_bytes(r.adapter_gradient_bytes),
                       format_bytes(r.workspace_bytes), format_bytes(r.other_bytes));
  });
  if (folded) out += fmt::format("{}(a row of several layers gives each one's bytes)\n", indent);
}

// Rows of the "by range" table with the same size, count and category whose
// ranges differ only in one number ("forward/layer.3", "forward/layer.4") fold
// into one row, "forward/layer.{0-30}" with its count of ranges; so do rows of
// one range that differ only in layer.
struct RangeRow {
  const LiveGroup* first = nullptr;
  std::string pattern;           // the range with its number cut out (as it is when it has none)
  std::vector<int64_t> numbers;  // the range numbers folded in, in table order
  std::vector<int32_t> layers;
};

// The range's only run of digits, cut out: ("forward/layer.", ".x", 3). A
// range with none or several runs of digits is not folded.
bool split_number(const std::string& range, std::string& before, std::string& after, int64_t& number) {
  size_t begin = range.find_first_of("0123456789");
  if (begin == std::string::npos) return false;
  size_t end = range.find_first_not_of("0123456789", begin);
  if (end == std::string::npos) end = range.size();
  if (range.find_first_of("0123456789", end) != std::string::npos || end - begin > 9) return false;
  before = range.substr(0, begin);
  after = range.substr(end);
  number = std::stoll(range.substr(begin, end - begin));
  return true;
}

// "3", "0-30" for a run without holes, else "0,2,5" (or the count when long).
std::string number_set(std::vector<int64_t> numbers) {
  std::sort(numbers.begin(), numbers.end());
  if (numbers.size() == 1) return std::to_string(numbers.front());
  if (numbers.back() - numbers.front() + 1 == static_cast<int64_t>(numbers.size()))
    return fmt::format("{}-{}", numbers.front(), numbers.back());
  if (numbers.size() <= 4) return fmt::format("{}", fmt::join(numbers, ","));
  return fmt::format("{} values", numbers.size());
}

std::vector<RangeRow> fold_ranges(const std::vector<LiveGroup>& groups) {
  std::vector<RangeRow> rows;
  // A row by what folds into it: pattern, size, count and category.
  std::map<std::tuple<std::string, uint64_t, uint64_t, Category>, size_t> row_of;
  for (const LiveGroup& g : groups) {
    std::string before, after;
    int64_t number = 0;
    const bool numbered = !g.cupti_only && split_number(g.range, before, after, number);
    const std::string pattern = numbered ? before + '\x01' + after : g.range;
    size_t row = rows.size();
    if (!g.cupti_only)
      row = row_of.try_emplace({pattern, g.bytes, g.allocations, g.category}, rows.size()).first->second;
    if (row == rows.size()) rows.push_back({&g, pattern, {}, {}});
    if (numbered) rows[row].numbers.push_back(number);
    rows[row].layers.push_back(g.layer);
  }
  return rows;
}

std::string range_text(const RangeRow& r) {
  const LiveGroup& g = *r.first;
  if (r.numbers.size() > 1) {
    const size_t cut = r.pattern.find('\x01');
    return fmt::format("{}{{{}}}{}  ({} ranges, each)", r.pattern.substr(0, cut), number_set(r.numbers),
                       r.pattern.substr(cut + 1), r.numbers.size());
  }
  std::string range = g.range.empty() ? "(no range)" : g.range;
  if (r.layers.size() > 1) return fmt::format("{}  ({} layers, each)", range, r.layers.size());
  if (g.cupti_only) range += fmt::format(" [CUPTI-only: {}]", g.source.empty() ? "(unnamed)" : g.source);
  return range;
}

std::string layers_text(std::vector<int32_t> layers) {
  if (layers.size() == 1) return layer_text(layers.front());
  if (std::find(layers.begin(), layers.end(), kNoLayer) != layers.end()) return "-";
  std::vector<int64_t> wide(layers.begin(), layers.end());
  return number_set(wide);
}

void render_ranges(const LiveBreakdown& live, size_t max_rows, Out& out) {
  out += fmt::format("  {:>12} {:>8}  {:<18} {:>7}  {}\n", "size", "allocs", "category", "layer", "range");
  const std::vector<RangeRow> rows = fold_ranges(live.groups);
  for (size_t i = 0; i < rows.size() && i < max_rows; ++i) {
    const LiveGroup& g = *rows[i].first;
    out += fmt::format("  {:>12} {:>8}  {:<18} {:>7}  {}\n", format_bytes(g.bytes), grouped(g.allocations),
                       category_name(g.category), layers_text(rows[i].layers), range_text(rows[i]));
  }
  if (rows.size() > max_rows) out += fmt::format("  ... {} more rows (see --json)\n", rows.size() - max_rows);
}

std::string optional_text(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "-"; }

void render_waves(const Analysis& a, const TextOptions& options, Out& out) {
  if (a.waves.empty()) {
    out += "\nwaves: none (no `wave` ranges in the trace)\n";
    return;
  }
  out += fmt::format("\nwaves (peak is absolute; measured = peak - baseline)\n");
  out += fmt::format("  {:>4} {:>7} {:>5} {:>6} {:>12} {:>12} {:>12} {:>16}  {}\n", "wave", "tokens", "cold", "groups",
                     "baseline", "peak", "measured", "measured bytes", "peak in");
  for (const WaveReport& w : a.waves) {
    const WavePayload& p = w.span.payload;
    const std::string cold = p.cold ? (*p.cold ? "yes" : "no") : "-";
    std::string site = w.peak.site.reached ? where(w.peak.site) : "(no growth)";
    if (!w.span.ended) site += " [wave not closed]";
    out +=
        fmt::format("  {:>4} {:>7} {:>5} {:>6} {:>12} {:>12} {:>12} {:>16}  {}\n", w.span.index,
                    optional_text(p.tokens), cold, optional_text(p.groups), format_bytes(w.baseline_bytes),
                    format_bytes(w.peak.bytes), format_bytes(w.measured_peak_bytes()), w.measured_peak_bytes(), site);
    if (!p.error.empty()) out += fmt::format("       payload problem: {} (raw: {})\n", p.error, p.raw);
  }
  if (!options.wave_layers) return;
  for (const WaveReport& w : a.waves) {
    const std::string in = w.peak.site.reached ? ", in " + where(w.peak.site) : "";
    out += fmt::format("\nwave {} at its peak ({}{}): per layer\n", w.span.index, format_bytes(w.peak.bytes), in);
    render_layers(w.peak.live.layers, out, "  ");
  }
}

void render_step_end(const StepEnd& s, uint64_t first_ns, Out& out) {
  out += fmt::format("  {:>6} {:>14} {:>12} {:>10}  {}\n", s.step, format_bytes(s.live_bytes), grouped(s.live_bytes),
                     grouped(s.live_allocations), seconds_since(s.time_ns, first_ns));
}

// Live bytes at each optimizer step's end and the ranges whose live bytes
// keep rising (analysis/step_growth.h). A range "rose at" a step end when it
// holds more there than at the step end before. One line when nothing grows.
void render_growth(const Analysis& a, const TextOptions& options, Out& out) {
  const StepGrowth& g = a.growth;
  const char* title = "\ngrowth across optimizer steps:";
  if (g.steps == 0) {
    out += fmt::format("{} no optimizer steps (no `optimizer/step` range): growth not measured\n", title);
    return;
  }
  const StepEnd& first = g.step_ends.front();
  const StepEnd& last = g.step_ends.back();
  if (g.window == 0) {
    out += fmt::format("{} 1 step ({} live at its end): growth needs the ends of at least 2 steps\n", title,
                       format_bytes(last.live_bytes));
    return;
  }
  if (g.growing.empty()) {
    out += fmt::format(
        "{} nothing grows over {} step ends (no range's live bytes rose at each of the last {}; {} live at the "
        "first, {} at the last)\n",
        title, grouped(g.steps), g.window, format_bytes(first.live_bytes), format_bytes(last.live_bytes));
    return;
  }
  out += fmt::format("{} live at the end of each `optimizer/step` ({})\n", title, count(g.steps, "step"));
  out += fmt::format("  {:>6} {:>14} {:>12} {:>10}  {}\n", "step", "live", "live bytes", "allocs", "at");
  // The first and last few when there are many.
  constexpr size_t kEachSide = 3;
  const std::vector<StepEnd>& ends = g.step_ends;
  if (ends.size() <= 2 * kEachSide + 1) {
    for (const StepEnd& s : ends) render_step_end(s, a.trace.first_time_ns, out);
  } else {
    for (size_t i = 0; i < kEachSide; ++i) render_step_end(ends[i], a.trace.first_time_ns, out);
    out += fmt::format("  {:>6}\n", "...");
    for (size_t i = ends.size() - kEachSide; i < ends.size(); ++i) render_step_end(ends[i], a.trace.first_time_ns, out);
  }
  out += fmt::format("  growing: live bytes rose at each of the last {} of {} step ends ({})\n", g.window,
                     grouped(g.steps), count(g.growing.size(), "range"));
  out += fmt::format("  {:>12} {:>14} {:>8} {:>8} {:>7}  {}\n", "per step", "live at last", "allocs", "since", "layer",
                     "range");
  for (size_t i = 0; i < g.growing.size() && i < options.max_ranges; ++i) {
    const GrowingRange& r = g.growing[i];
    out += fmt::format("  {:>12} {:>14} {:>8} {:>8} {:>7}  {}\n", format_bytes(r.bytes_per_step()),
                       format_bytes(r.last_bytes), grouped(r.allocations), fmt::format("step {}", r.first_step),
                       layer_text(r.layer), r.range.empty() ? "(no range)" : r.range);
  }
  if (g.growing.size() > options.max_ranges)
    out += fmt::format("  ... {} more ranges (see --json)\n", g.growing.size() - options.max_ranges);
}

}  // namespace

std::string grouped(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string render_analysis_text(const Analysis& a, const TextOptions& options) {
  Out out;
  render_status(a, out);
  render_warnings(a, out);
  render_memory(a, out);
  render_peak(a, out);
  if (a.peak.site.reached) {
    out += "\nlive at peak by category\n";
    render_categories(a.peak.live, out);
    out += "\nlive at peak by layer\n";
    render_layers(a.peak.live.layers, out, "  ");
    out += "\nlive at peak by range\n";
    render_ranges(a.peak.live, options.max_ranges, out);
  }
  render_waves(a, options, out);
  render_growth(a, options, out);
  render_device_usage_text(a, out);
  return out;
}

}  // namespace psc
