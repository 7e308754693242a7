// The Chrome JSON export: valid JSON, balanced slices, one slice per
// allocation, counters that add up to the report's figures at the peak, the
// size warning, and the golden file.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "exchange/exporter.h"
#include "tests/support/export_fixture.h"

namespace psc {
namespace {

using json = nlohmann::json;

class ChromeExport : public ::testing::Test {
 protected:
  void SetUp() override {
    trace_ = dir_.file("fixture.pstrace");
    test::write_fixture_trace(trace_);
    analysis_ = analyze_trace(trace_);
  }
  json export_json(uint64_t warn_bytes = 100ull << 20) {
    ExportOptions o;
    o.trace = trace_;
    o.output = dir_.file("fixture.json");
    o.chrome_warn_bytes = warn_bytes;
    o.warn = [this](const std::string& w) { warnings_.push_back(w); };
    find_exporter("chrome")->write(o);
    text_ = test::read_file(o.output);
    return json::parse(text_);
  }
  test::TempDir dir_;
  std::string trace_, text_;
  Analysis analysis_;
  std::vector<std::string> warnings_;
};

TEST_F(ChromeExport, SlicesBalanceAndEveryAllocationIsThere) {
  const json doc = export_json();
  std::map<std::string, int> depth;
  uint64_t x_slices = 0, x_bytes = 0, still_live = 0, async_begin = 0, async_end = 0;
  for (const json& e : doc["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "B") ++depth[std::to_string(e["tid"].get<uint64_t>())];
    if (ph == "E") {
      EXPECT_GE(--depth[std::to_string(e["tid"].get<uint64_t>())], 0);
    }
    if (ph == "b") ++async_begin;
    if (ph == "e") ++async_end;
    if (ph == "X") {
      ++x_slices;
      x_bytes += e["args"]["bytes"].get<uint64_t>();
      still_live += e["args"].contains("still_live");
    }
  }
  for (const auto& [tid, d] : depth) EXPECT_EQ(d, 0) << "thread " << tid;
  EXPECT_EQ(async_begin, 1u);
  EXPECT_EQ(async_end, 1u);
  EXPECT_EQ(x_slices, analysis_.memory.counts.allocs);
  EXPECT_EQ(x_bytes, analysis_.memory.counts.allocated_bytes);
  EXPECT_EQ(still_live, analysis_.memory.live_at_end_allocations);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(ChromeExport, CountersAtThePeakMatchTheReport) {
  const json doc = export_json();
  // The last counter of each device at or before the peak's timestamp.
  std::map<std::string, json> at_peak;
  const uint64_t peak_us_times_1000 = analysis_.peak.site.time_ns;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "C") continue;
    const std::string name = e["name"];
    if (name.rfind("live bytes (allocated", 0) != 0) continue;
    const double ts = e["ts"];
    if (static_cast<uint64_t>(ts * 1000 + 0.5) <= peak_us_times_1000) at_peak[name] = e["args"];
  }
  ASSERT_FALSE(at_peak.empty());
  for (int c = 0; c < kCategoryCount; ++c) {
    uint64_t sum = 0;
    for (const auto& [name, args] : at_peak) sum += args[category_name(static_cast<Category>(c))].get<uint64_t>();
    EXPECT_EQ(sum, analysis_.peak.live.category_bytes[static_cast<size_t>(c)])
        << category_name(static_cast<Category>(c));
  }
  int peaks = 0;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "i" && e["s"] == "g") {
      ++peaks;
      if (e["name"].get<std::string>().rfind("peak:", 0) == 0) {
        EXPECT_EQ(e["args"]["bytes"], analysis_.peak.bytes);
      }
    }
  EXPECT_EQ(peaks, static_cast<int>(analysis_.waves.size()) + 1);
}

TEST_F(ChromeExport, WarnsOnceWhenTheOutputPassesTheLimit) {
  export_json(2000);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("--format perfetto"), std::string::npos);
}

TEST_F(ChromeExport, MatchesTheGoldenFile) {
  export_json();
  EXPECT_TRUE(test::matches_golden("fixture.chrome.json", text_));
}

}  // namespace
}  // namespace psc
