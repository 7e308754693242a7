// `export --format html`: one self-contained HTML file (no script, no font,
// no request of any kind) that shows what `report` says, drawn:
//   - the peak table: absolute peak, where and when, live bytes by category
//     and the largest (range, category) groups;
//   - live bytes over time stacked by liveness category (SVG), sampled at
//     evenly spaced instants plus exactly at the trace's and each wave's peak,
//     with the analysis' per-bucket maximum drawn over it so no spike hides
//     between samples;
//   - per wave: the wave table and the per-layer bars (boundary, adapter
//     gradient, workspace, other) at the wave's peak;
//   - the accuracy table when a calibration is given: each wave priced as
//     `peakscope check` prices it (estimator/check.h), against its measured peak.
// Every figure is also in a data-psc attribute with its exact value, so a test
// can read the rendered DOM and compare it with `report --json`.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/report_json.h"
#include "estimator/calibration.h"
#include "estimator/check.h"
#include "estimator/liveness.h"
#include "exchange/export_formats.h"
#include "exchange/export_model.h"
#include "exchange/export_output.h"
#include "exchange/export_text.h"

namespace psc {
namespace {

constexpr size_t kSamplePoints = 600;
constexpr size_t kMaxWaveCharts = 12;
constexpr size_t kMaxGroups = 20;

// One colour per category, in Category order; the rendering test looks for them.
constexpr const char* kColors[kCategoryCount] = {"#8c8c8c", "#1f77b4", "#d62728", "#2ca02c",
                                                 "#17becf", "#9467bd", "#bcbd22", "#ff7f0e"};
// The layer chart's fourth part: whatever else is charged to the layer.
constexpr const char* kOtherLayerColor = "#c7c7c7";

constexpr const char* kStyle = R"CSS(
body{font-family:sans-serif;margin:24px;color:#222;background:#fff;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}.meta{color:#555}.note{color:#8a4b00;background:#fff6e5;padding:8px}
.swatch{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}
svg text{font-size:11px;fill:#333}.axis{stroke:#999;stroke-width:1}.maxline{fill:none;stroke:#000;stroke-width:1}
.waves{display:flex;flex-wrap:wrap;gap:16px}.wave{border:1px solid #ddd;padding:8px}
)CSS";

std::string bytes_cell(uint64_t bytes, const std::string& attr) {
  return fmt::format(R"(<td data-psc="{}" data-bytes="{}">{} <span class="meta">({} B)</span></td>)", attr, bytes,
                     format_bytes(bytes), bytes);
}

// The y-axis top: the smallest 2^k or 3 x 2^(k-1) at or above v, so the
// quarter ticks are round binary sizes.
uint64_t axis_top(uint64_t v) {
  if (v <= 4) return 4;
  uint64_t p = 4;
  while (p < v && p < (1ull << 62)) {
    if (p / 2 * 3 >= v) return p / 2 * 3;
    p *= 2;
  }
  return p;
}

class HtmlWriter {
 public:
  HtmlWriter(const ExportModel& model, OutputFile& out, const ExportOptions& options,
             const std::vector<CheckRow>* check)
      : model_(model), a_(model.analysis), out_(out), options_(options), check_(check) {}

  void write() {
    const std::string title = std::filesystem::path(model_.trace).filename().string();
    out_.write(
        fmt::format("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                    "<title>peakscope: {}</title>\n<style>{}</style></head>\n<body>\n",
                    html_escape(title), kStyle));
    out_.write(fmt::format("<h1>peakscope report: {}</h1>\n", html_escape(title)));
    summary();
    peak();
    timeline();
    waves();
    accuracy();
    out_.write(
        "<p class=\"meta\">Written by <code>peakscope export --format html</code>. Figures are those of "
        "<code>peakscope report --json</code> for the same trace.</p>\n</body></html>\n");
  }

 private:
  void summary() {
    const TraceSummary& t = a_.trace;
    out_.write("<p class=\"meta\">");
    out_.write(fmt::format("status <b data-psc=\"status\">{}</b>", read_state_name(t.status.state)));
    if (!t.status.complete()) out_.write(fmt::format(" ({})", html_escape(t.status.reason)));
    out_.write(
        fmt::format(", <span data-psc=\"events\">{}</span> events, pid {}, {} threads, memory level <b "
                    "data-psc=\"level\">{}</b>",
                    t.status.events, t.header.pid, t.threads, memory_level_name(a_.memory.level)));
    if (t.dropped) out_.write(fmt::format(", <b>{} events dropped by the recorder</b>", t.dropped));
    if (!t.command.empty()) out_.write(fmt::format("<br>command <code>{}</code>", html_escape(t.command)));
    out_.write("</p>\n");
  }

  void peak() {
    out_.write("<h2>Peak</h2>\n<table id=\"peak-table\">\n");
    out_.write(
        fmt::format("<tr><th class=\"l\">peak (absolute)</th>{}</tr>\n", bytes_cell(a_.peak.bytes, "peak_bytes")));
    const PeakSite& s = a_.peak.site;
    if (s.reached) {
      const double at = static_cast<double>(s.time_ns - a_.trace.first_time_ns) / 1e9;
      out_.write(
          fmt::format("<tr><th class=\"l\">reached at</th><td data-psc=\"peak_time_ns\" data-value=\"{}\">+{:.6f} "
                      "s (seq {})</td></tr>\n",
                      s.time_ns, at, s.seq));
      out_.write(fmt::format(
          "<tr><th class=\"l\">in</th><td class=\"l\">{} <span class=\"meta\">thread {} {}</span></td></tr>\n",
          s.range.empty() ? "(no range)" : html_escape(s.range), s.thread, html_escape(s.thread_name)));
    }
    out_.write(
        fmt::format("<tr><th class=\"l\">live allocations</th><td>{}</td></tr>\n</table>\n", a_.peak.live.allocations));

    out_.write(
        "<table id=\"peak-categories\"><tr><th class=\"l\">category</th><th>live at peak</th><th>share</th></tr>\n");
    for (int c = 0; c < kCategoryCount; ++c) {
      const uint64_t b = a_.peak.live.category_bytes[static_cast<size_t>(c)];
      const double share = a_.peak.bytes ? 100.0 * static_cast<double>(b) / static_cast<double>(a_.peak.bytes) : 0.0;
      const char* name = category_name(static_cast<Category>(c));
      out_.write(fmt::format(
          "<tr><td class=\"l\"><span class=\"swatch\" style=\"background:{}\"></span>{}</td>{}<td>{:.1f}%</td></tr>\n",
          kColors[c], name, bytes_cell(b, std::string("peak_category_") + name), share));
    }
    out_.write("</table>\n");

    out_.write(
        "<table id=\"live-at-peak\"><tr><th>bytes</th><th>allocations</th><th class=\"l\">category</th>"
        "<th>layer</th><th class=\"l\">range</th></tr>\n");
    const auto& groups = a_.peak.live.groups;
    for (size_t i = 0; i < groups.size() && i < kMaxGroups; ++i) {
      const LiveGroup& g = groups[i];
      out_.write(fmt::format("<tr>{}<td>{}</td><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td></tr>\n",
                             bytes_cell(g.bytes, fmt::format("group_{}", i)), g.allocations, category_name(g.category),
                             g.layer == kNoLayer ? std::string("-") : std::to_string(g.layer),
                             g.range.empty() ? "(no range)" : html_escape(g.range)));
    }
    if (groups.size() > kMaxGroups)
      out_.write(fmt::format("<tr><td colspan=\"5\" class=\"l meta\">and {} smaller groups</td></tr>\n",
                             groups.size() - kMaxGroups));
    out_.write("</table>\n");
  }

  // The timeline's plot area and its scales.
  struct Chart {
    static constexpr double width = 1100, height = 320, left = 70, right = 10, top = 20, bottom = 30;
    static constexpr double plot_w = width - left - right, plot_h = height - top - bottom;
    uint64_t t0 = 0, t1 = 1, ytop = 1;
    double x(uint64_t t) const {
      return left + plot_w * static_cast<double>(std::clamp(t, t0, t1) - t0) / static_cast<double>(t1 - t0);
    }
    double y(uint64_t b) const { return top + plot_h * (1.0 - static_cast<double>(b) / static_cast<double>(ytop)); }
  };

  void timeline() {
    out_.write("<h2>Live bytes over time, by category</h2>\n");
    const std::vector<CategorySample>& samples = model_.samples;
    if (samples.empty() || a_.trace.status.events == 0) {
      out_.write("<p>No events.</p>\n");
      return;
    }
    Chart chart;
    chart.t0 = a_.trace.first_time_ns;
    chart.t1 = std::max(a_.trace.last_time_ns, chart.t0 + 1);
    uint64_t ymax = a_.peak.bytes;
    for (const CategorySample& s : samples) ymax = std::max(ymax, s.total());
    for (const TimelinePoint& p : a_.timeline) ymax = std::max(ymax, p.max_bytes);
    chart.ytop = axis_top(ymax);
    out_.write(
        fmt::format("<svg id=\"timeline\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
                    "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">\n",
                    Chart::width, Chart::height, Chart::width, Chart::height));
    stacked_areas(chart, samples);
    timeline_axes(chart);
    timeline_peak(chart, samples);
    out_.write("</svg>\n<p>");
    for (int c = 0; c < kCategoryCount; ++c)
      out_.write(fmt::format("<span class=\"swatch\" style=\"background:{}\"></span>{} &nbsp; ", kColors[c],
                             category_name(static_cast<Category>(c))));
    out_.write(
        fmt::format("<br><span class=\"meta\">Stacked live bytes at {} instants (evenly spaced, plus exactly at "
                    "each peak); the black line is the maximum within each time bucket.</span></p>\n",
                    samples.size()));
  }

  // Stacked areas, bottom category first: each is the band between the
  // running total below it and the total including it; then the line of
  // each time bucket's maximum.
  void stacked_areas(const Chart& chart, const std::vector<CategorySample>& samples) {
    std::vector<uint64_t> below(samples.size(), 0);
    for (int c = 0; c < kCategoryCount; ++c) {
      bool any = false;
      for (const CategorySample& s : samples) any |= s.bytes[static_cast<size_t>(c)] != 0;
      if (!any) continue;
      std::string d;
      for (size_t i = 0; i < samples.size(); ++i)
        d += fmt::format("{}{:.1f},{:.1f}", i ? " L" : "M", chart.x(samples[i].time_ns),
                         chart.y(below[i] + samples[i].bytes[static_cast<size_t>(c)]));
      for (size_t i = samples.size(); i-- > 0;)
        d += fmt::format(" L{:.1f},{:.1f}", chart.x(samples[i].time_ns), chart.y(below[i]));
      out_.write(fmt::format("<path d=\"{} Z\" fill=\"{}\" stroke=\"none\"><title>{}</title></path>\n", d, kColors[c],
                             category_name(static_cast<Category>(c))));
      for (size_t i = 0; i < samples.size(); ++i) below[i] += samples[i].bytes[static_cast<size_t>(c)];
    }
    if (!a_.timeline.empty()) {
      std::string d;
      for (size_t i = 0; i < a_.timeline.size(); ++i)
        d += fmt::format("{}{:.1f},{:.1f}", i ? " L" : "M", chart.x(a_.timeline[i].time_ns),
                         chart.y(a_.timeline[i].max_bytes));
      out_.write(
          fmt::format("<path class=\"maxline\" d=\"{}\"><title>maximum within each of {} time buckets</title></path>\n",
                      d, a_.timeline.size()));
    }
  }

  void timeline_axes(const Chart& chart) {
    constexpr double left = Chart::left, top = Chart::top, plot_w = Chart::plot_w, plot_h = Chart::plot_h;
    out_.write(fmt::format("<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", left, top + plot_h,
                           left + plot_w, top + plot_h));
    out_.write(
        fmt::format("<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", left, top, left, top + plot_h));
    for (int k = 0; k <= 4; ++k) {
      const uint64_t b = chart.ytop / 4 * static_cast<uint64_t>(k);
      out_.write(fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 4, chart.y(b) + 4,
                             format_bytes(b)));
    }
    out_.write(fmt::format(
        "<text x=\"{}\" y=\"{}\">0 s</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">+{:.6f} s</text>\n", left,
        Chart::height - 8, left + plot_w, Chart::height - 8, static_cast<double>(chart.t1 - chart.t0) / 1e9));
  }

  // The peak, exactly: the sample taken at the peak's own event.
  void timeline_peak(const Chart& chart, const std::vector<CategorySample>& samples) {
    const CategorySample* at_peak = nullptr;
    for (const CategorySample& s : samples)
      if (a_.peak.site.reached && s.seq == a_.peak.site.seq) at_peak = &s;
    if (!at_peak) return;
    const double px = chart.x(at_peak->time_ns), py = chart.y(at_peak->total());
    const bool near_right = px > Chart::left + Chart::plot_w * 0.8;
    out_.write(fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#000\"/>\n", px, py));
    out_.write(
        fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\">peak <tspan data-psc=\"chart_peak_bytes\" "
                    "data-bytes=\"{}\">{}</tspan></text>\n",
                    px + (near_right ? -6 : 6), std::max(py - 6, Chart::top + 10), near_right ? "end" : "start",
                    at_peak->total(), format_bytes(at_peak->total())));
  }

  void waves() {
    out_.write("<h2>Waves</h2>\n");
    if (a_.waves.empty()) {
      out_.write("<p>No <code>wave</code> ranges in this trace.</p>\n");
      return;
    }
    out_.write(
        "<table id=\"wave-table\"><tr><th>wave</th><th>tokens</th><th>cold</th><th>baseline</th><th>peak "
        "(absolute)</th><th>measured peak</th><th class=\"l\">peak in</th></tr>\n");
    for (const WaveReport& w : a_.waves) {
      const WavePayload& p = w.span.payload;
      const std::string i = std::to_string(w.span.index);
      out_.write(
          fmt::format("<tr data-wave=\"{}\"><td>{}</td><td data-psc=\"wave_{}_tokens\">{}</td><td>{}</td>{}{}{}"
                      "<td class=\"l\">{}</td></tr>\n",
                      i, i, i, p.tokens ? std::to_string(*p.tokens) : "-", p.cold ? (*p.cold ? "yes" : "no") : "-",
                      bytes_cell(w.baseline_bytes, "wave_" + i + "_baseline_bytes"),
                      bytes_cell(w.peak.bytes, "wave_" + i + "_peak_bytes"),
                      bytes_cell(w.measured_peak_bytes(), "wave_" + i + "_measured_peak_bytes"),
                      w.peak.site.reached ? html_escape(w.peak.site.range) : "(never above its baseline)"));
    }
    out_.write("</table>\n");

    std::vector<const WaveReport*> shown;
    for (const WaveReport& w : a_.waves) shown.push_back(&w);
    if (shown.size() > kMaxWaveCharts) {
      std::stable_sort(shown.begin(), shown.end(), [](const WaveReport* x, const WaveReport* y) {
        return x->measured_peak_bytes() > y->measured_peak_bytes();
      });
      shown.resize(kMaxWaveCharts);
      std::sort(shown.begin(), shown.end(),
                [](const WaveReport* x, const WaveReport* y) { return x->span.index < y->span.index; });
      out_.write(fmt::format("<p class=\"meta\">Per-layer bars for the {} waves with the largest measured peaks.</p>\n",
                             kMaxWaveCharts));
    }
    out_.write("<div class=\"waves\">\n");
    for (const WaveReport* w : shown) layer_bars(*w);
    out_.write("</div>\n");
  }

  void layer_bars(const WaveReport& w) {
    const std::vector<LayerRow>& rows = w.peak.live.layers;
    const std::string i = std::to_string(w.span.index);
    out_.write(fmt::format("<div class=\"wave\"><b>wave {}</b> at its peak ({})<br>\n", i, format_bytes(w.peak.bytes)));
    if (rows.empty()) {
      out_.write("<span class=\"meta\">nothing charged to a decoder layer</span></div>\n");
      return;
    }
    uint64_t ymax = 0;
    for (const LayerRow& r : rows)
      ymax = std::max(ymax, r.boundary_bytes + r.adapter_gradient_bytes + r.workspace_bytes + r.other_bytes);
    const uint64_t ytop = axis_top(ymax);
    const double bar = std::clamp(480.0 / static_cast<double>(rows.size()), 3.0, 28.0);
    const double plot_h = 160, left = 64, top = 10;
    const double width = left + bar * static_cast<double>(rows.size()) + 10, height = top + plot_h + 24;
    out_.write(
        fmt::format("<svg class=\"layers\" width=\"{:.0f}\" height=\"{:.0f}\" xmlns=\"http://www.w3.org/2000/svg\">\n",
                    width, height));
    auto y = [&](uint64_t b) { return top + plot_h * (1.0 - static_cast<double>(b) / static_cast<double>(ytop)); };
    for (size_t k = 0; k < rows.size(); ++k) {
      const LayerRow& r = rows[k];
      const uint64_t parts[4] = {r.boundary_bytes, r.adapter_gradient_bytes, r.workspace_bytes, r.other_bytes};
      const char* const names[4] = {category_name(Category::kBoundary), category_name(Category::kAdapterGradient),
                                    category_name(Category::kWorkspace), "other"};
      const char* const colors[4] = {kColors[static_cast<int>(Category::kBoundary)],
                                     kColors[static_cast<int>(Category::kAdapterGradient)],
                                     kColors[static_cast<int>(Category::kWorkspace)], kOtherLayerColor};
      uint64_t base = 0;
      for (int p = 0; p < 4; ++p) {
        if (!parts[p]) continue;
        const double y0 = y(base + parts[p]), y1 = y(base);
        out_.write(
            fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>layer "
                        "{} {}: {} B</title></rect>\n",
                        left + bar * static_cast<double>(k) + 1, y0, std::max(bar - 2, 1.0), y1 - y0, colors[p],
                        r.layer, names[p], parts[p]));
        base += parts[p];
      }
    }
    out_.write(
        fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text><text x=\"{}\" y=\"{:.1f}\" "
                    "text-anchor=\"end\">0</text>\n",
                    left - 4, top + 8, format_bytes(ytop), left - 4, top + plot_h));
    out_.write(
        fmt::format("<text x=\"{}\" y=\"{:.0f}\">layer {}</text><text x=\"{:.0f}\" y=\"{:.0f}\" "
                    "text-anchor=\"end\">{}</text>\n</svg>\n",
                    left, height - 4, rows.front().layer, width - 10, height - 4, rows.back().layer));
    // The same figures as a table, exact.
    out_.write(
        fmt::format("<table class=\"layer-table\" data-wave=\"{}\"><tr><th>layer</th><th>boundary</th><th>adapter "
                    "gradient</th><th>workspace</th><th>other</th></tr>\n",
                    i));
    for (const LayerRow& r : rows)
      out_.write(
          fmt::format("<tr><td>{}</td><td data-psc=\"wave_{}_layer_{}_boundary_bytes\">{}</td><td "
                      "data-psc=\"wave_{}_layer_{}_adapter_gradient_bytes\">{}</td><td "
                      "data-psc=\"wave_{}_layer_{}_workspace_bytes\">{}</td><td "
                      "data-psc=\"wave_{}_layer_{}_other_bytes\">{}</td></tr>\n",
                      r.layer, i, r.layer, r.boundary_bytes, i, r.layer, r.adapter_gradient_bytes, i, r.layer,
                      r.workspace_bytes, i, r.layer, r.other_bytes));
    out_.write("</table></div>\n");
  }

  void accuracy() {
    out_.write("<h2>Accuracy</h2>\n");
    if (!check_) {
      out_.write("<p>No calibration given (<code>--calibration CAL.json</code>), so no accuracy table.</p>\n");
      return;
    }
    out_.write(
        fmt::format("<p class=\"meta\">Each wave priced with <code>{}</code> (what <code>peakscope check</code> "
                    "prints); raw error = raw / measured &minus; 1, admitted error = required / measured "
                    "&minus; 1. An under-estimate is an OOM.</p>\n",
                    html_escape(options_.calibration)));
    out_.write(
        "<table id=\"accuracy-table\"><tr><th>wave</th><th>tokens</th><th>cold</th><th>measured peak</th>"
        "<th>raw</th><th>required</th><th>raw error</th><th>admitted error</th><th class=\"l\"></th></tr>\n");
    size_t under[2] = {0, 0}, waves[2] = {0, 0};
    for (const CheckRow& r : *check_) {
      const std::string i = std::to_string(r.wave);
      const double admitted = r.admitted_error_of(false);
      const bool is_under = r.under_estimate(false);
      under[r.cold] += is_under;
      ++waves[r.cold];
      out_.write(fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td>{}{}{}<td data-psc=\"accuracy_{}_raw_error\" data-value=\"{:.6f}\">"
          "{:+.2f}%</td><td data-psc=\"accuracy_{}_admitted_error\" data-value=\"{:.6f}\">{:+.2f}%</td><td "
          "class=\"l\">{}</td></tr>\n",
          i, r.tokens, r.cold ? "yes" : "no",
          bytes_cell(r.measured_peak_bytes, "accuracy_" + i + "_measured_peak_bytes"),
          bytes_cell(static_cast<uint64_t>(r.price.raw_bytes), "accuracy_" + i + "_raw_bytes"),
          bytes_cell(static_cast<uint64_t>(r.price.required_bytes), "accuracy_" + i + "_required_bytes"), i,
          r.raw_error, r.raw_error * 100, i, admitted, admitted * 100, is_under ? "<b>UNDER-ESTIMATE</b>" : ""));
    }
    out_.write("</table>\n");
    out_.write(
        fmt::format("<p>cold waves: {}, under-estimates <b>{}</b>; warm waves: {}, under-estimates <b>{}</b>; "
                    "<span data-psc=\"under_estimates\">{}</span> in all.</p>\n",
                    waves[1], under[1], waves[0], under[0], under[0] + under[1]));
  }

  const ExportModel& model_;
  const Analysis& a_;
  OutputFile& out_;
  const ExportOptions& options_;
  const std::vector<CheckRow>* check_;  // null without a calibration
};

Calibration load_calibration(const std::string& path) {
  try {
    return read_calibration(path);
  } catch (const CalibrationError& e) {
    // Its message starts with the path, which InputError adds again.
    std::string reason = e.what();
    if (reason.rfind(path + ": ", 0) == 0) reason.erase(0, path.size() + 2);
    throw InputError(path, reason);
  }
}

class HtmlExporter : public Exporter {
 public:
  std::string_view name() const override { return "html"; }
  std::string_view description() const override {
    return "one self-contained HTML report: live bytes by category over time, per-layer bars per wave, peak table";
  }
  void write(const ExportOptions& options) const override {
    ExportModelOptions model_options;
    model_options.sample_points = kSamplePoints;
    // One read of the trace for the model and the categories decided from
    // whole waves (first_execution), so the page shows what `report` shows;
    // with a calibration, the accuracy rows `peakscope check` would print.
    ExportModelCollector collector(model_options);
    AnalysisOptions analysis_options;
    collector.add_to(&analysis_options);
    LivenessOptions what;
    what.categories_only = options.calibration.empty();
    Liveness liveness = analyze_liveness(options.trace, analysis_options, what);
    std::vector<CheckRow> rows;
    if (!options.calibration.empty()) {
      const Calibration calibration = load_calibration(options.calibration);
      if (liveness.layers != calibration.layers)
        throw InputError(options.calibration, fmt::format("calibrated for {} decoder layers, but {} has {}",
                                                          calibration.layers, options.trace, liveness.layers));
      rows = check_trace(calibration, liveness);
    }
    apply_category_changes(liveness.category_changes, &liveness.analysis);
    write(options, collector.finish(options.trace, std::move(liveness.analysis)),
          options.calibration.empty() ? nullptr : &rows);
  }

 private:
  static void write(const ExportOptions& options, const ExportModel& model, const std::vector<CheckRow>* rows) {
    warn_if_incomplete(model, options.warn);
    OutputFile out(options.output);
    HtmlWriter(model, out, options, rows).write();
    out.commit();
  }
};

}  // namespace

const Exporter& html_exporter() {
  static const HtmlExporter exporter;
  return exporter;
}

}  // namespace psc
