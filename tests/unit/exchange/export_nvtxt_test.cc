// The NVTXT export parsed back line by line: a header ImportNvtxt takes,
// balanced push/pop per thread on the OS thread ids, the start/end range whole,
// marks and peak marks at the analysis' times, and the golden file.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "exchange/exporter.h"
#include "tests/support/export_fixture.h"

namespace psc {
namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    if (c == ',' && !quoted) {
      out.push_back(cell);
      cell.clear();
      continue;
    }
    if (!(cell.empty() && c == ' ')) cell += c;
  }
  out.push_back(cell);
  return out;
}

class NvtxtExport : public ::testing::Test {
 protected:
  void SetUp() override {
    trace_ = dir_.file("fixture.pstrace");
    test::write_fixture_trace(trace_);
  }
  std::string export_nvtxt(const std::string& base = "") {
    ExportOptions o;
    o.trace = trace_;
    o.output = dir_.file("fixture.nvtxt");
    o.nvtxt_time_base = base;
    find_exporter("nvtxt")->write(o);
    return test::read_file(o.output);
  }
  test::TempDir dir_;
  std::string trace_;
};

TEST_F(NvtxtExport, RangesBalanceOnOsThreadsAndPeaksAreMarked) {
  const std::string text = export_nvtxt();
  const Analysis a = analyze_trace(trace_);
  std::istringstream in(text);
  std::string line;
  std::map<std::string, int> depth;
  int pushes = 0, markers = 0, start_end = 0, declarations = 0;
  std::vector<std::vector<std::string>> peaks;
  std::string category = "1";
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '@') {
      ++declarations;
      continue;
    }
    if (line.rfind("CategoryId = ", 0) == 0) category = line.substr(13);
    if (line.find(" = ") != std::string::npos || line.rfind("SetFileDisplayName", 0) == 0) continue;
    const std::vector<std::string> cells = split(line);
    if (cells[0] == "RangePush") {
      ++pushes;
      ++depth[cells[2]];
    } else if (cells[0] == "RangePop") {
      EXPECT_GE(--depth[cells[2]], 0);
    } else if (cells[0] == "Marker") {
      category == "2" ? peaks.push_back(cells) : void(++markers);
    } else if (cells[0] == "RangeStartEnd") {
      ++start_end;
      EXPECT_EQ(cells[4], "\"step 0\"");
      EXPECT_LT(std::stoull(cells[1]), std::stoull(cells[2]));
    } else {
      ADD_FAILURE() << "unexpected line: " << line;
    }
  }
  EXPECT_EQ(declarations, 4);
  for (const auto& [tid, d] : depth) EXPECT_EQ(d, 0) << tid;
  EXPECT_EQ(depth.count("5001"), 1u);  // the OS thread ids the recorder knew
  EXPECT_EQ(depth.count("5002"), 1u);
  EXPECT_EQ(static_cast<uint64_t>(pushes), a.trace.events_by_kind[static_cast<int>(EventKind::kRangePush)]);
  EXPECT_EQ(static_cast<uint64_t>(markers), a.trace.events_by_kind[static_cast<int>(EventKind::kMark)]);
  EXPECT_EQ(start_end, 1);
  ASSERT_EQ(peaks.size(), a.waves.size() + 1);
  bool found = false;
  for (const auto& p : peaks)
    found |= p[1] == std::to_string(a.peak.site.time_ns) &&
             p[3].find("(" + std::to_string(a.peak.bytes) + " bytes)") != std::string::npos;
  EXPECT_TRUE(found);
}

TEST_F(NvtxtExport, DeclaresItsTimeBase) {
  EXPECT_NE(export_nvtxt().find("TimeBase = ClockMonotonicRaw\n"), std::string::npos);
  const std::string manual = export_nvtxt("Manual");
  EXPECT_NE(manual.find("TimeBase = Manual\n"), std::string::npos);
  EXPECT_EQ(manual.find("ClockMonotonicRaw"), std::string::npos);
  EXPECT_NE(manual.find("CLOCK_REALTIME was 1700000000000000000 ns, CLOCK_MONOTONIC 1000000000 ns"), std::string::npos);
}

// First RangePush line's time.
int64_t first_push_time(const std::string& text) {
  const size_t at = text.find("\nRangePush, ");
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + 12));
}

// With the header's raw sample, ClockMonotonicRaw times are the trace's moved
// by the two clocks' difference; Manual keeps them as they are.
TEST_F(NvtxtExport, ConvertsToTheRawClockWhenTheHeaderHasIt) {
  const int64_t plain = first_push_time(export_nvtxt("Manual"));
  ASSERT_GT(plain, 0);
  constexpr int64_t kRawBehind = 250'000'000;  // CLOCK_MONOTONIC_RAW 250 ms behind CLOCK_MONOTONIC
  test::write_fixture_trace(trace_, SyntheticTrace::kStartTimeNs - kRawBehind);
  const std::string raw = export_nvtxt();
  EXPECT_EQ(first_push_time(raw), plain - kRawBehind);
  EXPECT_NE(raw.find("nanoseconds of CLOCK_MONOTONIC_RAW"), std::string::npos);
  EXPECT_EQ(first_push_time(export_nvtxt("Manual")), plain);
}

TEST_F(NvtxtExport, MatchesTheGoldenFile) { EXPECT_TRUE(test::matches_golden("fixture.nvtxt", export_nvtxt())); }

}  // namespace
}  // namespace psc
