// The HTML report and the category samples it draws: samples checked against
// a brute-force replay of the trace, the figures in the page against
// `report --json`'s, the calibration note, and the golden file. The rendering
// itself is checked in headless Chromium by tests/html/check_html.sh.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "analysis/memory_replay.h"
#include "analysis/report_json.h"
#include "estimator/calibration.h"
#include "estimator/check.h"
#include "estimator/liveness.h"
#include "exchange/export_model.h"
#include "exchange/exporter.h"
#include "tests/support/export_fixture.h"

namespace psc {
namespace {

class HtmlExport : public ::testing::Test {
 protected:
  void SetUp() override {
    trace_ = dir_.file("fixture.pstrace");
    test::write_fixture_trace(trace_);
  }
  std::string export_html(const std::string& calibration = "") {
    ExportOptions o;
    o.trace = trace_;
    o.output = dir_.file("fixture.html");
    o.calibration = calibration;
    o.warn = [this](const std::string& w) { warnings_.push_back(w); };
    find_exporter("html")->write(o);
    return test::read_file(o.output);
  }
  // data-psc="name" ... data-bytes="N" (or data-value, or the element's text).
  static std::map<std::string, std::string> figures(const std::string& html) {
    std::map<std::string, std::string> out;
    static const std::regex with_attr(R"re(data-psc="([^"]+)" data-(?:bytes|value)="([^"]*)")re");
    static const std::regex with_text(R"re(data-psc="([^"]+)">([^<]*)<)re");
    for (std::sregex_iterator it(html.begin(), html.end(), with_text), end; it != end; ++it) out[(*it)[1]] = (*it)[2];
    for (std::sregex_iterator it(html.begin(), html.end(), with_attr), end; it != end; ++it) out[(*it)[1]] = (*it)[2];
    return out;
  }
  test::TempDir dir_;
  std::string trace_;
  std::vector<std::string> warnings_;
};

// Live bytes of the analysed level after each event, by plain replay.
std::map<uint64_t, uint64_t> live_after_each_event(const std::string& trace, MemoryLevel level) {
  const LoadedTrace loaded = load_trace(trace);
  MemoryReplay replay;
  std::map<uint64_t, uint64_t> out;
  uint64_t ordinal = 0;
  for (const Event& e : loaded.events) {
    if (is_memory_event(e.kind) && memory_level_of(e) == level) replay.apply(e, EventSite{ordinal, {}, -1});
    ++ordinal;
    out[e.seq] = replay.live_bytes();
  }
  return out;
}

TEST_F(HtmlExport, SamplesAreTheLiveBytesOfABruteForceReplay) {
  ExportModelOptions options;
  options.sample_points = 50;
  const ExportModel model = build_export_model(trace_, options);
  const std::map<uint64_t, uint64_t> live = live_after_each_event(trace_, model.level);
  ASSERT_GE(model.samples.size(), 50u);
  for (const CategorySample& s : model.samples) {
    const uint64_t expected = s.seq == 0 ? 0 : live.at(s.seq);
    EXPECT_EQ(s.total(), expected) << "at seq " << s.seq;
  }
  for (size_t i = 1; i < model.samples.size(); ++i) EXPECT_LE(model.samples[i - 1].seq, model.samples[i].seq);
}

TEST_F(HtmlExport, SamplesAtThePeaksSplitByCategoryLikeTheReport) {
  ExportModelOptions options;
  options.sample_points = 10;
  const ExportModel model = build_export_model(trace_, options);
  const Analysis& a = model.analysis;
  auto sample_at = [&](uint64_t seq) -> const CategorySample* {
    for (const CategorySample& s : model.samples)
      if (s.seq == seq) return &s;
    return nullptr;
  };
  const CategorySample* peak = sample_at(a.peak.site.seq);
  ASSERT_NE(peak, nullptr);
  for (int c = 0; c < kCategoryCount; ++c) EXPECT_EQ(peak->bytes[c], a.peak.live.category_bytes[c]) << c;
  for (const WaveReport& w : a.waves) {
    const CategorySample* s = sample_at(w.peak.site.seq);
    ASSERT_NE(s, nullptr);
    for (int c = 0; c < kCategoryCount; ++c) EXPECT_EQ(s->bytes[c], w.peak.live.category_bytes[c]) << c;
  }
}

TEST_F(HtmlExport, FiguresInThePageAreTheReportsFigures) {
  const std::string html = export_html();
  const nlohmann::json report = analysis_to_json(analyze_trace(trace_));
  const auto f = figures(html);
  EXPECT_EQ(f.at("peak_bytes"), std::to_string(report["peak_bytes"].get<uint64_t>()));
  EXPECT_EQ(f.at("chart_peak_bytes"), std::to_string(report["peak_bytes"].get<uint64_t>()));
  EXPECT_EQ(f.at("peak_time_ns"), std::to_string(report["peak_time_ns"].get<uint64_t>()));
  EXPECT_EQ(f.at("events"), std::to_string(report["events"].get<uint64_t>()));
  for (const auto& [category, bytes] : report["live_at_peak_by_category"].items())
    EXPECT_EQ(f.at("peak_category_" + category), std::to_string(bytes.get<uint64_t>())) << category;
  ASSERT_EQ(report["waves"].size(), 2u);
  for (const auto& w : report["waves"]) {
    const std::string i = std::to_string(w["index"].get<int>());
    EXPECT_EQ(f.at("wave_" + i + "_tokens"), std::to_string(w["tokens"].get<int64_t>()));
    for (const char* field : {"baseline_bytes", "peak_bytes", "measured_peak_bytes"})
      EXPECT_EQ(f.at("wave_" + i + "_" + field), std::to_string(w[field].get<uint64_t>())) << field;
    for (const auto& row : w["layers_at_peak"]) {
      const std::string prefix = "wave_" + i + "_layer_" + std::to_string(row["layer"].get<int>()) + "_";
      for (const char* field : {"boundary_bytes", "adapter_gradient_bytes", "workspace_bytes", "other_bytes"})
        EXPECT_EQ(f.at(prefix + field), std::to_string(row[field].get<uint64_t>())) << prefix << field;
    }
  }
}

TEST_F(HtmlExport, IsSelfContained) {
  const std::string html = export_html();
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // only the SVG namespace
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
}

TEST_F(HtmlExport, AccuracyTableIsWhatCheckPrices) {
  EXPECT_NE(export_html().find("No calibration given"), std::string::npos);
  const Liveness liveness = analyze_liveness(trace_);
  const Calibration calibration = calibrate({liveness});
  const std::string cal = dir_.file("cal.json");
  test::write_file(cal, calibration_to_json(calibration).dump());
  const std::vector<CheckRow> rows = check_trace(calibration, liveness);
  ASSERT_EQ(rows.size(), 2u);
  const auto f = figures(export_html(cal));
  size_t under = 0;
  for (const CheckRow& r : rows) {
    const std::string i = "accuracy_" + std::to_string(r.wave) + "_";
    EXPECT_EQ(f.at(i + "measured_peak_bytes"), std::to_string(r.measured_peak_bytes));
    EXPECT_EQ(f.at(i + "raw_bytes"), std::to_string(r.price.raw_bytes));
    EXPECT_EQ(f.at(i + "required_bytes"), std::to_string(r.price.required_bytes));
    EXPECT_NEAR(std::stod(f.at(i + "raw_error")), r.raw_error, 1e-6);
    under += r.under_estimate(false);
  }
  EXPECT_EQ(f.at("under_estimates"), std::to_string(under));
  EXPECT_THROW(export_html(dir_.file("missing.json")), InputError);
  test::write_file(cal, "{\"not\": \"a calibration\"}");
  EXPECT_THROW(export_html(cal), InputError);
}

// tests/html/check_html.sh renders the export of this committed copy.
TEST_F(HtmlExport, CommittedFixtureTraceIsCurrent) {
  EXPECT_TRUE(test::matches_golden("fixture.pstrace", test::read_file(trace_)));
}

TEST_F(HtmlExport, MatchesTheGoldenFile) { EXPECT_TRUE(test::matches_golden("fixture.html", export_html())); }

}  // namespace
}  // namespace psc
