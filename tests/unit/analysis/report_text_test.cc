// What `peakscope report` prints for a person: identical consecutive layers
// share one row, ranges that differ only in their number (or only in layer)
// share one row of the "by range" table, and each wave's per-layer table
// appears only when asked for (--waves). JSON keeps every row.
#include <gtest/gtest.h>

#include <string>

#include "analysis/analysis.h"
#include "analysis/report_text.h"

namespace psc {
namespace {

LiveGroup group(const std::string& range, int32_t layer, Category category, uint64_t bytes, uint64_t allocations) {
  LiveGroup g;
  g.range = range;
  g.layer = layer;
  g.category = category;
  g.bytes = bytes;
  g.allocations = allocations;
  return g;
}

// A peak in layer 3's backward of a four-layer model: layers 0-2 alike.
Analysis four_layer_peak() {
  Analysis a;
  a.peak.bytes = 10000;
  a.peak.site.reached = true;
  a.peak.site.range = "backward/layer.3";
  a.peak.live.bytes = 10000;
  for (int32_t l = 0; l < 4; ++l) {
    LayerRow r;
    r.layer = l;
    r.boundary_bytes = 1024;
    r.adapter_gradient_bytes = 512;
    if (l == 3) r.workspace_bytes = 4096;
    a.peak.live.layers.push_back(r);
  }
  a.peak.live.groups = {
      group("backward/layer.3", 3, Category::kWorkspace, 4096, 2),
      group("forward/layer.0", 1, Category::kBoundary, 1024, 1),
      group("forward/layer.1", 2, Category::kBoundary, 1024, 1),
      group("forward/layer.2", 3, Category::kBoundary, 1024, 1),
      group("head/embedding", 0, Category::kBoundary, 1024, 1),
      group("wave", 0, Category::kAdapterGradient, 512, 1),
      group("wave", 1, Category::kAdapterGradient, 512, 1),
      group("wave", 2, Category::kAdapterGradient, 512, 1),
      group("wave", 3, Category::kAdapterGradient, 512, 1),
      group("forward/layer.9", 4, Category::kBoundary, 8, 1),  // another size: its own row
  };
  WaveReport w;
  w.span.index = 0;
  w.peak = a.peak;
  a.waves.push_back(w);
  return a;
}

std::string section(const std::string& text, const std::string& title) {
  const size_t begin = text.find(title);
  if (begin == std::string::npos) return "";
  const size_t end = text.find("\n\n", begin);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end + 1 - begin);
}

TEST(ReportText, IdenticalConsecutiveLayersShareOneRow) {
  const std::string layers = section(render_analysis_text(four_layer_peak()), "live at peak by layer");
  EXPECT_NE(layers.find("\n      0-2     1.00 KiB             512 B          0 B "), std::string::npos) << layers;
  EXPECT_NE(layers.find("\n        3     1.00 KiB             512 B     4.00 KiB "), std::string::npos) << layers;
  EXPECT_EQ(layers.find("\n        1 "), std::string::npos) << layers;
  EXPECT_NE(layers.find("gives each one's bytes"), std::string::npos) << layers;
}

TEST(ReportText, LayersThatDifferKeepTheirRows) {
  Analysis a = four_layer_peak();
  a.peak.live.layers[1].boundary_bytes = 2048;  // 0 | 1 | 2 | 3
  const std::string layers = section(render_analysis_text(a), "live at peak by layer");
  for (const char* row : {"\n        0 ", "\n        1 ", "\n        2 ", "\n        3 "})
    EXPECT_NE(layers.find(row), std::string::npos) << row << "\n" << layers;
  EXPECT_EQ(layers.find("each one's bytes"), std::string::npos) << layers;
}

TEST(ReportText, RangesThatDifferOnlyInTheirNumberShareOneRow) {
  const std::string ranges = section(render_analysis_text(four_layer_peak()), "live at peak by range");
  EXPECT_NE(ranges.find("boundary               1-3  forward/layer.{0-2}  (3 ranges, each)"), std::string::npos)
      << ranges;
  // Same range, one row per layer before: folded by layer.
  EXPECT_NE(ranges.find("adapter_gradient       0-3  wave  (4 layers, each)"), std::string::npos) << ranges;
  // Another size, another category or another name stays apart.
  EXPECT_NE(ranges.find("forward/layer.9\n"), std::string::npos) << ranges;
  EXPECT_NE(ranges.find("head/embedding\n"), std::string::npos) << ranges;
  EXPECT_EQ(ranges.find("forward/layer.1\n"), std::string::npos) << ranges;
}

TEST(ReportText, TopCountsFoldedRows) {
  TextOptions options;
  options.max_ranges = 2;
  const std::string ranges = section(render_analysis_text(four_layer_peak(), options), "live at peak by range");
  // Five rows after folding (10 groups): two shown, three left.
  EXPECT_NE(ranges.find("... 3 more rows (see --json)"), std::string::npos) << ranges;
}

TEST(ReportText, EachWavesLayersOnlyWhenAskedFor) {
  const Analysis a = four_layer_peak();
  EXPECT_EQ(render_analysis_text(a).find("wave 0 at its peak"), std::string::npos);
  TextOptions options;
  options.wave_layers = true;
  EXPECT_NE(render_analysis_text(a, options).find("wave 0 at its peak"), std::string::npos);
}

}  // namespace
}  // namespace psc
