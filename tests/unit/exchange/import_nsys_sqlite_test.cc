// nsys-sqlite both ways: the export in Nsight's schema and enum values, the
// round trip pstrace -> nsys-sqlite -> import giving the same report (same
// peak, same waves, same lifetimes), an Nsight-shaped file peakscope did not
// write (no order table, no runtime table, two processes), and bad input.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "analysis/memory_replay.h"
#include "analysis/report_json.h"
#include "common/progress.h"
#include "exchange/exporter.h"
#include "exchange/nsys/nsys_schema.h"
#include "tests/support/export_fixture.h"
#include "tests/support/progress_lines.h"

namespace psc {
namespace {

using json = nlohmann::ordered_json;

void sql(const std::string& db_path, const std::string& statements) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, statements.c_str(), nullptr, nullptr, &error);
  EXPECT_EQ(rc, SQLITE_OK) << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

// Every row of the tables, as text, for the golden file.
std::string dump(const std::string& db_path) {
  sqlite3* db = nullptr;
  sqlite3_open(db_path.c_str(), &db);
  std::string out;
  std::vector<std::string> tables;
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name", -1, &st, nullptr);
  while (sqlite3_step(st) == SQLITE_ROW) tables.push_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
  sqlite3_finalize(st);
  for (const std::string& t : tables) {
    out += "== " + t + "\n";
    sqlite3_prepare_v2(db, ("SELECT * FROM " + t + " ORDER BY rowid").c_str(), -1, &st, nullptr);
    while (sqlite3_step(st) == SQLITE_ROW) {
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        const unsigned char* v = sqlite3_column_text(st, c);
        out += (c ? "|" : "") + std::string(v ? reinterpret_cast<const char*>(v) : "NULL");
      }
      out += "\n";
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

int64_t scalar(const std::string& db_path, const std::string& query) {
  sqlite3* db = nullptr;
  sqlite3_open(db_path.c_str(), &db);
  sqlite3_stmt* st = nullptr;
  int64_t v = -1;
  if (sqlite3_prepare_v2(db, query.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

// (device, address, bytes, birth time, death time or UINT64_MAX) of every
// allocation of the analysed level.
using LifetimeRow = std::tuple<int16_t, uint64_t, uint64_t, uint64_t, uint64_t>;
std::vector<LifetimeRow> lifetimes(const std::string& trace) {
  struct Sink : LifetimeSink {
    std::vector<LifetimeRow> rows;
    void on_lifetime(const Lifetime& l) override {
      rows.emplace_back(l.device, l.address, l.alloc.bytes, l.alloc.time_ns,
                        l.end.kind == EndKind::kStillLive ? UINT64_MAX : l.end.time_ns);
    }
  } sink;
  const Analysis a = analyze_trace(trace);
  const LoadedTrace loaded = load_trace(trace);
  MemoryReplay replay(&sink);
  uint64_t ordinal = 0;
  for (const Event& e : loaded.events)
    if (is_memory_event(e.kind) && memory_level_of(e) == a.memory.level) replay.apply(e, EventSite{ordinal++, {}, -1});
  replay.finish();
  std::sort(sink.rows.begin(), sink.rows.end());
  return sink.rows;
}

// The figures a round trip must keep: everything but file positions, sequence
// numbers and the counts of events an Nsight file has no place for.
json comparable(const std::string& trace) {
  json r = analysis_to_json(analyze_trace(trace));
  json out;
  for (const char* k :
       {"level", "peak_bytes", "peak_time_ns", "live_at_peak", "live_at_peak_by_category", "layers_at_peak"})
    out[k] = r[k];
  for (const char* k : {"thread", "thread_name", "range", "phase", "layer", "time_ns"})
    out["peak_site"][k] = r["peak_site"][k];
  for (const char* k : {"allocs", "allocated_bytes", "live_at_end_bytes", "live_at_end_allocations"})
    out["memory"][k] = r["memory"][k];
  // An allocation replaced at a live address (its free was lost) ends with a
  // deallocation row in Nsight's form: count the allocations that ended.
  out["memory"]["ended"] = r["memory"]["frees"].get<uint64_t>() + r["memory"]["replaced_allocations"].get<uint64_t>();
  for (const char* k : {"pid", "rank", "local_rank", "command", "threads"}) out["trace"][k] = r["trace"][k];
  for (json w : r["waves"]) {
    for (const char* k : {"begin_seq", "end_seq"}) w.erase(k);
    w["peak_site"].erase("seq");
    out["waves"].push_back(w);
  }
  return out;
}

using test_support::last_line_of;
using test_support::progress_lines;

class NsysSqlite : public ::testing::Test {
 protected:
  void SetUp() override {
    trace_ = dir_.file("fixture.pstrace");
    db_ = dir_.file("fixture.sqlite");
    test::write_fixture_trace(trace_);
    ExportOptions o;
    o.trace = trace_;
    o.output = db_;
    find_exporter("nsys-sqlite")->write(o);
  }
  ImportSummary import(const std::string& from, const std::string& to, uint32_t pid = 0) {
    ImportOptions o;
    o.input = from;
    o.output = to;
    o.pid = pid;
    return find_importer("nsys-sqlite")->read(o);
  }
  test::TempDir dir_;
  std::string trace_, db_;
};

TEST_F(NsysSqlite, ExportUsesNsightsTablesAndEnumValues) {
  const Analysis a = analyze_trace(trace_);
  EXPECT_EQ(scalar(db_, "SELECT count(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memoryOperationType = 0"),
            static_cast<int64_t>(a.memory.counts.allocs));
  // One deallocation per allocation that ended (freed, or replaced at its address).
  EXPECT_EQ(scalar(db_, "SELECT count(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memoryOperationType = 1"),
            static_cast<int64_t>(a.memory.counts.allocs - a.memory.live_at_end_allocations));
  EXPECT_EQ(scalar(db_, "SELECT id FROM ENUM_CUDA_MEM_KIND WHERE name = 'CUDA_MEMOPR_MEMORY_KIND_DEVICE'"), 2);
  EXPECT_EQ(scalar(db_, "SELECT count(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memKind != 2"), 0);
  EXPECT_EQ(scalar(db_, "SELECT id FROM ENUM_NSYS_EVENT_TYPE WHERE name = 'NvtxPushPopRange'"), 59);
  EXPECT_EQ(scalar(db_, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59"),
            static_cast<int64_t>(a.trace.events_by_kind[static_cast<int>(EventKind::kRangePush)]));
  EXPECT_EQ(scalar(db_, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 60 AND rangeId = 77"), 1);
  EXPECT_EQ(scalar(db_, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 34 AND jsonText IS NOT NULL"), 4);
  EXPECT_EQ(scalar(db_, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME"), 1'700'000'000'000'000'000);
  // Every memory row joins to its API call, on a thread Nsight would name.
  EXPECT_EQ(scalar(db_,
                   "SELECT count(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS m JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                   "USING (correlationId) JOIN ThreadNames t ON t.globalTid = r.globalTid"),
            scalar(db_, "SELECT count(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS"));
  EXPECT_EQ(scalar(db_, "SELECT DISTINCT globalPid >> 24 FROM CUDA_GPU_MEMORY_USAGE_EVENTS"), 4242);
  // The script the Nsight exports' users run for a peak (live bytes by start order).
  EXPECT_EQ(scalar(db_,
                   "SELECT max(live) FROM (SELECT sum(CASE memoryOperationType WHEN 0 THEN bytes ELSE -bytes END) "
                   "OVER (ORDER BY start, rowid) AS live FROM CUDA_GPU_MEMORY_USAGE_EVENTS)"),
            static_cast<int64_t>(a.peak.bytes));
}

TEST_F(NsysSqlite, RoundTripGivesTheSameReportAndLifetimes) {
  const std::string back = dir_.file("back.pstrace");
  const ImportSummary summary = import(db_, back);
  EXPECT_NE(std::find(summary.lines.begin(), summary.lines.end(), "order: exact (PEAKSCOPE_EVENT_ORDER)"),
            summary.lines.end());
  const json a = comparable(back), b = comparable(trace_);
  for (const auto& [key, value] : b.items()) EXPECT_EQ(a[key], value) << key;
  EXPECT_EQ(lifetimes(back), lifetimes(trace_));
}

TEST_F(NsysSqlite, WithoutPeakscopesTablesTheTimeOrderGivesTheSamePeak) {
  sql(db_, "DROP TABLE PEAKSCOPE_EVENT_ORDER; DROP TABLE PEAKSCOPE_INFO;");
  const std::string back = dir_.file("back.pstrace");
  import(db_, back);
  json a = comparable(back), b = comparable(trace_);
  // Without the clock base, times are from the start of the session.
  EXPECT_EQ(a["peak_time_ns"].get<uint64_t>() + SyntheticTrace::kStartTimeNs, b["peak_time_ns"].get<uint64_t>());
  for (const char* k : {"peak_bytes", "live_at_peak", "live_at_peak_by_category", "layers_at_peak", "memory"})
    EXPECT_EQ(a[k], b[k]) << k;
  ASSERT_EQ(a["waves"].size(), b["waves"].size());
  for (size_t i = 0; i < a["waves"].size(); ++i)
    for (const char* k : {"baseline_bytes", "peak_bytes", "measured_peak_bytes", "live_at_peak", "layers_at_peak"})
      EXPECT_EQ(a["waves"][i][k], b["waves"][i][k]) << k;
}

// A file shaped like Nsight's own: two processes, NVTX start/end ranges, memory
// rows whose CUDA calls were not traced, a free of memory allocated before the
// capture.
class NsightShaped : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.file("nsight.sqlite");
    sql(db_, nsys::schema());
    const int64_t p1 = nsys::global_pid(100), p2 = nsys::global_pid(200);
    sql(db_, fmt::format(
                 "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '', '');"
                 "INSERT INTO StringIds VALUES (1, 'forward/layer.0'), (2, 'main');"
                 "INSERT INTO ThreadNames VALUES (2, 0, {t1});"
                 "INSERT INTO NVTX_EVENTS (start, end, eventType, textId, globalTid) VALUES (100, 500, 59, 1, {t1});"
                 "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, globalPid, deviceId, contextId, address, pc, bytes, "
                 "memKind, memoryOperationType, correlationId) VALUES"
                 " (200, {p1}, 0, 1, 4096, 0, 1000, 2, 0, 7),"
                 " (300, {p1}, 0, 1, 8192, 0, 3000, 2, 0, NULL),"
                 " (400, {p1}, 0, 1, 4096, 0, 1000, 2, 1, 8),"
                 " (450, {p1}, 0, 1, 65536, 0, 10, 2, 1, NULL),"
                 " (250, {p2}, 0, 1, 4096, 0, 99999, 2, 0, NULL);"
                 "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (190, 210, 0, {t1}, 7, 3, 0, NULL),"
                 " (390, 410, 0, {t1}, 8, 3, 0, NULL);"
                 "INSERT INTO StringIds VALUES (3, 'cudaMalloc_v3020');",
                 fmt::arg("p1", p1), fmt::arg("p2", p2), fmt::arg("t1", nsys::global_tid(100, 101))));
  }
  ImportSummary import(uint32_t pid) {
    ImportOptions o;
    o.input = db_;
    o.output = dir_.file("out.pstrace");
    o.pid = pid;
    return find_importer("nsys-sqlite")->read(o);
  }
  test::TempDir dir_;
  std::string db_;
};

TEST_F(NsightShaped, SeveralProcessesNeedAPid) {
  try {
    import(0);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--pid"), std::string::npos) << e.what();
  }
  EXPECT_THROW(import(300), InputError);
}

TEST_F(NsightShaped, JoinsMemoryToRangesByThreadAndTime) {
  const ImportSummary s = import(100);
  const Analysis a = analyze_trace(dir_.file("out.pstrace"));
  EXPECT_EQ(a.peak.bytes, 4000u);  // process 200's allocation is not in it
  EXPECT_EQ(a.memory.counts.allocs, 2u);
  EXPECT_EQ(a.memory.counts.unmatched_frees, 1u);
  EXPECT_EQ(a.trace.header.pid, 100u);
  EXPECT_EQ(a.trace.header.realtime_ns, 1'700'000'000'000'000'000ull);
  // The traced call ran on thread 101 inside forward/layer.0; the untraced one
  // has no thread to join, so no range.
  std::map<std::string, uint64_t> by_range;
  for (const LiveGroup& g : a.peak.live.groups) by_range[g.range] += g.bytes;
  EXPECT_EQ(by_range["forward/layer.0"], 1000u);
  EXPECT_EQ(by_range[""], 3000u);
  bool said = false;
  for (const std::string& line : s.lines) said |= line.find("had no recorded CUDA call") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(NsysSqliteBadInput, NamesTheFileAndNeverWritesAHalfTrace) {
  test::TempDir dir;
  ImportOptions o;
  o.output = dir.file("out.pstrace");
  o.input = dir.file("text.sqlite");
  test::write_file(o.input, "SQLite format 3 -- no, just text pretending");
  try {
    find_importer("nsys-sqlite")->read(o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), o.input);
  }
  o.input = dir.file("empty.sqlite");
  sql(o.input, "CREATE TABLE something_else (x);");
  EXPECT_THROW(find_importer("nsys-sqlite")->read(o), InputError);
  o.input = dir.file("negative.sqlite");
  sql(o.input,
      nsys::schema() +
          "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, globalPid, deviceId, contextId, address, pc, bytes, "
          "memKind, memoryOperationType) VALUES (-5, 16777216, 0, 1, 1, 0, 1, 2, 0);");
  try {
    find_importer("nsys-sqlite")->read(o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("start -5 out of range in row 1"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(o.output));
  EXPECT_FALSE(std::filesystem::exists(o.output + ".partial"));
}

TEST_F(NsysSqlite, ImportShowsItsStagesAsProgress) {
  const std::string back = dir_.file("back.pstrace");
  uint64_t events = 0;
  const std::vector<std::string> lines = progress_lines([&] { events = import(db_, back).events; });
  ASSERT_GT(events, 0u);
  EXPECT_NE(last_line_of(lines, "reading " + db_ + ": GPU memory rows: "), "") << ::testing::PrintToString(lines);
  EXPECT_NE(last_line_of(lines, "reading " + db_ + ": NVTX rows: "), "") << ::testing::PrintToString(lines);
  // Writing counts every event of the trace, and ends at all of them.
  const std::string writing = last_line_of(lines, "writing " + back + ": ");
  EXPECT_NE(writing.find(fmt::format("{:.1f} M of {:.1f} M (100%)", events / 1e6, events / 1e6)), std::string::npos)
      << writing;
}

TEST_F(NsysSqlite, MatchesTheGoldenFile) { EXPECT_TRUE(test::matches_golden("fixture.nsys.txt", dump(db_))); }

}  // namespace
}  // namespace psc
