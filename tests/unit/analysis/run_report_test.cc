// A run of several traces (analysis/run_report.h): members ordered by rank,
// the busiest named, each wave's spread across ranks, and the notes a reader
// needs (a rank missing for WORLD_SIZE, a trace not closed, several hosts).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/run_report.h"
#include "tests/support/export_fixture.h"
#include "tests/support/synthetic_trace.h"

namespace psc {
namespace {

// One rank's trace: two waves whose peaks are `bytes` and 2 * `bytes`.
std::string write_rank(const test::TempDir& dir, int32_t rank, int32_t world, uint64_t bytes, bool clean = true) {
  TraceWriterOptions o;
  o.pid = 1000 + static_cast<uint32_t>(rank);
  o.rank = rank;
  o.local_rank = rank;
  o.world_size = world;
  const std::string path = dir.file("run.r" + std::to_string(rank) + ".pstrace");
  SyntheticTrace t(path, o);
  for (int w = 0; w < 2; ++w) {
    t.wave_begin(0, "{\"tokens\": 128, \"cold\": false}");
    t.alloc(0, 0x1000, bytes * (w + 1));
    t.free(0, 0x1000);
    t.wave_end(0);
  }
  t.close(clean);
  return path;
}

TEST(RunReport, OrdersByRankNamesTheBusiestAndSpreadsEachWave) {
  test::TempDir dir;
  std::vector<Analysis> analyses;
  // Given out of order: rank 1 busiest.
  analyses.push_back(analyze_trace(write_rank(dir, 1, 2, 3000)));
  analyses.push_back(analyze_trace(write_rank(dir, 0, 2, 1000)));
  const RunReport run = make_run_report(analyses);
  ASSERT_EQ(run.members.size(), 2u);
  EXPECT_EQ(run.members[0]->trace.header.rank, 0);
  EXPECT_EQ(run.members[1]->trace.header.rank, 1);
  ASSERT_EQ(run.busiest, 1);
  EXPECT_TRUE(run.notes.empty());
  const auto j = run_to_json(run);
  EXPECT_EQ(j["run"]["busiest"]["rank"], 1);
  EXPECT_EQ(j["run"]["busiest"]["peak_bytes"], 6000u);
  ASSERT_EQ(j["run"]["waves"].size(), 2u);
  EXPECT_EQ(j["run"]["waves"][1]["smallest_measured_peak_bytes"], 2000);
  EXPECT_EQ(j["run"]["waves"][1]["largest_measured_peak_bytes"], 6000);
  EXPECT_EQ(j["reports"].size(), 2u);
  const std::string text = render_run_text(run);
  EXPECT_NE(text.find("busiest    rank 1 (pid 1001): peak"), std::string::npos) << text;
  EXPECT_NE(text.find("200.0% above the least busy rank 0"), std::string::npos) << text;
  EXPECT_NE(text.find("== the busiest rank's report:"), std::string::npos) << text;
}

TEST(RunReport, SaysWhichRankIsMissingAndWhichTraceWasNotClosed) {
  test::TempDir dir;
  std::vector<Analysis> analyses;
  analyses.push_back(analyze_trace(write_rank(dir, 0, 3, 1000)));
  analyses.push_back(analyze_trace(write_rank(dir, 2, 3, 1000, /*clean=*/false)));
  const RunReport run = make_run_report(analyses);
  const std::string notes = run_to_json(run)["run"]["notes"].dump();
  EXPECT_NE(notes.find("WORLD_SIZE is 3 but no trace of rank 1"), std::string::npos) << notes;
  EXPECT_NE(notes.find("(rank 2) did not end cleanly"), std::string::npos) << notes;
}

// A trace copied beside itself is one process twice: its figures would count
// twice, said so (it carries no rank, so no rank repeats).
TEST(RunReport, SaysWhenOneProcesssTraceIsThereTwice) {
  test::TempDir dir;
  TraceWriterOptions o;
  o.pid = 77;
  const std::string path = dir.file("solo.pstrace");
  {
    SyntheticTrace t(path, o);
    t.alloc(0, 0x10, 8);
    t.close();
  }
  const std::string copy = dir.file("copy.pstrace");
  std::filesystem::copy_file(path, copy);
  std::vector<Analysis> analyses;
  analyses.push_back(analyze_trace(path));
  analyses.push_back(analyze_trace(copy));
  const std::string notes = run_to_json(make_run_report(analyses))["run"]["notes"].dump();
  EXPECT_NE(notes.find("are one process's trace (pid 77, started together): a copy?"), std::string::npos) << notes;
  // Another process of the same host: no such note.
  o.pid = 78;
  const std::string other = dir.file("other.pstrace");
  {
    SyntheticTrace t(other, o);
    t.alloc(0, 0x10, 8);
    t.close();
  }
  analyses.pop_back();
  analyses.push_back(analyze_trace(other));
  EXPECT_EQ(run_to_json(make_run_report(analyses))["run"]["notes"].dump().find("a copy?"), std::string::npos);
}

}  // namespace
}  // namespace psc
