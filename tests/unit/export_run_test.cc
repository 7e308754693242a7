// A run of several traces (traces/run.h): how traces group into runs by their
// headers, and the export of a run as one file with a process per member on
// the run's clock, in each format that can hold several processes, read back
// with the format's own vocabulary (JSON, SQL, protobuf).
//
// The run here is three traces: rank 0 and the launcher of one
// `peakscope record` on host "alpha", and rank 1 on host "beta" with the same
// pid as rank 0, tied to it by the run id. Every trace's clock starts at the
// same CLOCK_MONOTONIC reading (SyntheticTrace's), but their headers pair it
// with other CLOCK_REALTIME readings, as machines booted at other times do:
// the placed times must follow the headers, not the raw clocks.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "exchange/export_model.h"
#include "exchange/exporter.h"
#include "exchange/perfetto_schema.h"
#include "tests/support/export_fixture.h"
#include "tests/support/protobuf_decode.h"
#include "tests/support/synthetic_trace.h"
#include "traces/run.h"

namespace psc {
namespace {

namespace pf = perfetto;
using test::TempDir;

constexpr uint64_t kRealtime = 1'800'000'000'000'000'000ull;  // the launcher's start
constexpr uint64_t kRank0Late = 3'000'000;                    // rank 0 starts 3 ms after it ...
constexpr uint64_t kRank1Late = 7'500'000;                    // ... rank 1 7.5 ms after it

// ---- grouping ---------------------------------------------------------------------------

RunMember member(const std::string& path, int32_t rank, const std::string& host, uint32_t pid, uint32_t record_pid,
                 const std::string& run_id = "") {
  RunMember m;
  m.path = path;
  m.header.rank = rank;
  m.header.pid = pid;
  m.header.record_pid = record_pid;
  std::snprintf(m.header.hostname, sizeof m.header.hostname, "%s", host.c_str());
  if (!run_id.empty()) {
    std::snprintf(m.run.run_id, sizeof m.run.run_id, "%s", run_id.c_str());
    m.run.source = static_cast<uint32_t>(format::RunIdSource::kPeakscope);
  }
  return m;
}

std::vector<std::string> paths_of(const psc::Run& run) {
  std::vector<std::string> out;
  for (const RunMember& m : run.members) out.push_back(m.path);
  return out;
}

TEST(RunGrouping, AnIdTiesHostsAndARecordTiesALauncherToItsRanks) {
  const std::vector<psc::Run> runs = group_members({
      member("launcher", -1, "alpha", 10, 10),
      member("r1", 1, "beta", 42, 77, "job-7"),
      member("r0", 0, "alpha", 42, 10, "job-7"),
  });
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].id, "job-7");
  EXPECT_EQ(runs[0].id_source, "PEAKSCOPE_RUN_ID");
  EXPECT_EQ(paths_of(runs[0]), (std::vector<std::string>{"r0", "r1", "launcher"}));  // by rank, unranked last
  EXPECT_EQ(runs[0].hosts, (std::vector<std::string>{"alpha", "beta"}));
}

TEST(RunGrouping, TwoIdsAreTwoRunsAndOneRecordWithoutAnIdIsNamedByIt) {
  const std::vector<psc::Run> runs = group_members({
      member("a0", 0, "h", 1, 0, "first"),
      member("b0", 0, "h", 2, 0, "second"),
      member("c0", 0, "h", 3, 99),
      member("c1", 1, "h", 4, 99),
  });
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].id, "first");
  EXPECT_EQ(runs[1].id, "second");
  EXPECT_EQ(runs[2].id, "h:99");
  EXPECT_EQ(runs[2].id_source, "peakscope record");
  EXPECT_EQ(paths_of(runs[2]), (std::vector<std::string>{"c0", "c1"}));
}

TEST(RunGrouping, TracesThatNothingNamesJoinTheOnlyRunOrStandAlone) {
  // Older traces (no run id, no record pid) with one named run: they join it.
  std::vector<psc::Run> runs = group_members({member("old", 0, "h", 1, 0), member("new", 1, "h", 2, 0, "job")});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].members.size(), 2u);
  // Only such traces: one run without an id.
  runs = group_members({member("x", 0, "h", 1, 0), member("y", 1, "h", 2, 0)});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].id, "");
  // Beside two named runs nothing says which: it stands alone.
  runs = group_members({member("old", 0, "h", 1, 0), member("a", 0, "h", 2, 0, "a"), member("b", 0, "h", 3, 0, "b")});
  EXPECT_EQ(runs.size(), 3u);
}

TEST(RunGrouping, ReadsTheRunIdFromTheHeaderAndOlderFilesHaveNone) {
  TempDir dir;
  TraceWriterOptions named;
  named.rank = 0;
  named.run_id = "slurm-123.0";
  named.run_id_source = format::RunIdSource::kSlurm;
  SyntheticTrace(dir.file("named.pstrace"), named).close();
  SyntheticTrace(dir.file("older.pstrace")).close();  // no RunHeader: the layout before it
  const std::vector<psc::Run> runs = group_runs({dir.file("named.pstrace"), dir.file("older.pstrace")});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].id, "slurm-123.0");
  EXPECT_EQ(runs[0].id_source, "SLURM_JOB_ID");
  EXPECT_EQ(runs[0].members.size(), 2u);
}

// ---- the export of a run ---------------------------------------------------------------

struct Recorded {
  std::string path;
  uint64_t realtime_ns;    // its header's pair ...
  uint64_t monotonic_ns;   // ...
  uint64_t first_push_ns;  // its first event, a push, on its own clock
  uint64_t peak_bytes;
};

// A rank: one wave whose size grows with the rank, inside ranges.
Recorded write_member(const std::string& path, const TraceWriterOptions& options, int layers, uint64_t bytes) {
  SyntheticTrace t(path, options);
  t.name_thread(0, "main", 1000 + options.pid);
  // The first event comes one step after the clock's start.
  Recorded r{path, options.realtime_ns, options.monotonic_ns, t.now_ns() + SyntheticTrace::kTimeStepNs, 0};
  if (layers > 0) {
    t.wave_begin(0, R"({"tokens": 512})");
    for (int l = 0; l < layers; ++l) {
      t.push(0, "forward/layer." + std::to_string(l));
      t.alloc(0, 0x1000 + 0x100000 * static_cast<uint64_t>(l), bytes);
      t.pop(0);
    }
    for (int l = layers - 1; l >= 0; --l) t.free(0, 0x1000 + 0x100000 * static_cast<uint64_t>(l));
    t.wave_end(0);
  } else {
    t.mark(0, "launched");
  }
  t.close();
  return r;
}

class RunExport : public ::testing::Test {
 protected:
  void SetUp() override {
    const uint64_t mono = SyntheticTrace::kStartTimeNs - 1'000'000;  // each header 1 ms before its first event
    TraceWriterOptions launcher;
    launcher.pid = 4000;
    launcher.record_pid = 4000;
    launcher.hostname = "alpha";
    launcher.realtime_ns = kRealtime;
    launcher.monotonic_ns = mono;
    TraceWriterOptions r0 = launcher;
    r0.pid = 4242;
    r0.rank = 0;
    r0.world_size = 2;
    r0.run_id = "job-7";
    r0.run_id_source = format::RunIdSource::kPeakscope;
    r0.realtime_ns = kRealtime + kRank0Late;
    TraceWriterOptions r1 = r0;
    r1.rank = 1;
    r1.hostname = "beta";
    r1.record_pid = 5000;
    r1.realtime_ns = kRealtime + kRank1Late;
    // Written in this order so the run's order (by rank) is not the file order.
    members_.push_back(write_member(dir_.file("run.r1.beta.p4242.pstrace"), r1, 3, 3 << 20));
    members_.push_back(write_member(dir_.file("run.pstrace"), launcher, 0, 0));
    members_.push_back(write_member(dir_.file("run.r0.alpha.p4242.pstrace"), r0, 3, 2 << 20));
    runs_ = group_runs({members_[0].path, members_[1].path, members_[2].path});
  }

  const psc::Run& run() const { return runs_.front(); }
  // Where a member's time lands on the run's clock: ns after the launcher's start.
  static uint64_t placed(const Recorded& r, uint64_t time_ns) {
    return time_ns - r.monotonic_ns + (r.realtime_ns - kRealtime);
  }
  std::string export_run(const char* format) {
    ExportOptions options;
    options.output = dir_.file(std::string("run.") + format);
    options.warn = [](const std::string& w) { ADD_FAILURE() << w; };
    find_exporter(format)->write_run(run(), options);
    return options.output;
  }
  const Recorded& rank0() const { return members_[2]; }
  const Recorded& rank1() const { return members_[0]; }
  const Recorded& launcher() const { return members_[1]; }

  TempDir dir_;
  std::vector<Recorded> members_;
  std::vector<psc::Run> runs_;
};

TEST_F(RunExport, TheTracesAreOneRunInRankOrder) {
  ASSERT_EQ(runs_.size(), 1u);
  EXPECT_EQ(paths_of(run()), (std::vector<std::string>{rank0().path, rank1().path, launcher().path}));
  const std::vector<ProcessPlacement> places = place_run(run());
  ASSERT_EQ(places.size(), 3u);
  EXPECT_EQ(places[0].name, "rank 0 (alpha, pid 4242)");
  EXPECT_EQ(places[1].name, "rank 1 (beta, pid 4242)");
  EXPECT_EQ(places[2].name, "pid 4000 (alpha)");
  // Rank 1 has rank 0's pid on another host: it gets one of its own.
  EXPECT_EQ(places[0].pid, 4242u);
  EXPECT_NE(places[1].pid, 4242u);
  EXPECT_EQ(places[2].pid, 4000u);
  EXPECT_EQ(places[1].host_index, 1u);
  EXPECT_EQ(places[0].placed(rank0().first_push_ns), placed(rank0(), rank0().first_push_ns));
}

TEST_F(RunExport, FormatsOfOneProcessRefuseARun) {
  for (const char* format : {"html", "nvtxt", "torch-snapshot"}) {
    ExportOptions options;
    options.output = dir_.file("refused");
    EXPECT_THROW(find_exporter(format)->write_run(run(), options), std::invalid_argument) << format;
    EXPECT_FALSE(find_exporter(format)->writes_runs());
  }
}

TEST_F(RunExport, ChromeHasAProcessPerMemberOnTheRunsClock) {
  const nlohmann::json j = nlohmann::json::parse(test::read_file(export_run("chrome")));
  EXPECT_EQ(j["otherData"]["run"], "job-7");
  EXPECT_EQ(j["otherData"]["origin_realtime_ns"], kRealtime);
  std::map<int64_t, std::string> names;
  std::map<int64_t, int64_t> sort_index;
  std::map<int64_t, std::vector<double>> begins;
  for (const nlohmann::json& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "process_sort_index") sort_index[e["pid"]] = e["args"]["sort_index"];
    if (e["ph"] == "B") begins[e["pid"]].push_back(e["ts"].get<double>());
  }
  ASSERT_EQ(names.size(), 3u);
  const std::vector<ProcessPlacement> places = place_run(run());
  for (size_t i = 0; i < places.size(); ++i) {
    EXPECT_EQ(names[places[i].pid].rfind(places[i].name + ":", 0), 0u) << names[places[i].pid];
    EXPECT_EQ(sort_index[places[i].pid], static_cast<int64_t>(i));
  }
  // ts in microseconds from the run's origin: each rank's first range where
  // its header places it, and each rank's ranges in order.
  for (const auto& [r, place] : {std::pair{&rank0(), places[0]}, std::pair{&rank1(), places[1]}}) {
    const std::vector<double>& b = begins[place.pid];
    ASSERT_FALSE(b.empty());
    EXPECT_NEAR(b.front(), static_cast<double>(placed(*r, r->first_push_ns)) / 1000.0, 1e-3);
    EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  }
  EXPECT_NEAR(begins[places[1].pid].front() - begins[places[0].pid].front(), (kRank1Late - kRank0Late) / 1000.0, 1e-3);
}

struct Sql {
  explicit Sql(const std::string& path) {
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), 0);
  }
  ~Sql() { sqlite3_close(db); }
  std::vector<std::vector<std::string>> rows(const std::string& query) const {
    std::vector<std::vector<std::string>> out;
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, query.c_str(), -1, &s, nullptr), SQLITE_OK) << query;
    while (s && sqlite3_step(s) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int c = 0; c < sqlite3_column_count(s); ++c) {
        const unsigned char* text = sqlite3_column_text(s, c);
        row.push_back(text ? reinterpret_cast<const char*>(text) : "NULL");
      }
      out.push_back(row);
    }
    sqlite3_finalize(s);
    return out;
  }
  sqlite3* db = nullptr;
};

TEST_F(RunExport, NsysSqliteHoldsEveryMembersRowsFromOneSessionStart) {
  const std::string file = export_run("nsys-sqlite");
  Sql sql(file);
  EXPECT_EQ(sql.rows("SELECT count(*) FROM PROCESSES")[0][0], "3");
  EXPECT_EQ(sql.rows("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")[0][0], std::to_string(kRealtime));
  EXPECT_EQ(sql.rows("SELECT count(*) FROM TARGET_INFO_SESSION_START_TIME")[0][0], "1");
  EXPECT_EQ(sql.rows("SELECT count(*) FROM ANALYSIS_DETAILS")[0][0], "1");
  // Every allocation of both ranks, each under its own process.
  const auto memory = sql.rows(
      "SELECT globalPid >> 24, count(*), sum(bytes) FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memoryOperationType = 0 "
      "GROUP BY 1 ORDER BY 3");
  ASSERT_EQ(memory.size(), 2u);
  EXPECT_EQ(memory[0][1], "3");
  EXPECT_EQ(memory[0][2], std::to_string(3 * (2 << 20)));
  EXPECT_EQ(memory[1][2], std::to_string(3 * (3 << 20)));
  EXPECT_NE(memory[0][0], memory[1][0]);  // one pid on two hosts: two processes
  // The first range of each rank where its header places it.
  const auto first = sql.rows(
      "SELECT globalTid >> 24, min(start) FROM NVTX_EVENTS WHERE text = 'forward/layer.0' GROUP BY 1 ORDER BY 2");
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0][0], "4242");
  EXPECT_EQ(first[0][1], std::to_string(placed(rank0(), rank0().first_push_ns + 2 * SyntheticTrace::kTimeStepNs)));
  EXPECT_EQ(first[1][1], std::to_string(placed(rank1(), rank1().first_push_ns + 2 * SyntheticTrace::kTimeStepNs)));
}

TEST_F(RunExport, AnImportOfOneProcessOfTheRunGivesBackItsTrace) {
  const std::string file = export_run("nsys-sqlite");
  const std::vector<ProcessPlacement> places = place_run(run());
  const Analysis original = analyze_trace(rank1().path);
  ImportOptions options;
  options.input = file;
  options.output = dir_.file("rank1.pstrace");
  options.pid = places[1].pid <= 0xFFFFFF ? places[1].pid : 0xF00000u + 1;
  find_importer("nsys-sqlite")->read(options);
  const Analysis imported = analyze_trace(options.output);
  EXPECT_EQ(imported.peak.bytes, original.peak.bytes);
  EXPECT_EQ(imported.trace.header.rank, 1);
  EXPECT_EQ(imported.trace.first_time_ns, original.trace.first_time_ns);
  ASSERT_EQ(imported.waves.size(), 1u);
  EXPECT_EQ(imported.waves[0].measured_peak_bytes(), original.waves[0].measured_peak_bytes());
}

// Perfetto: a sequence per member, each with a ClockSnapshot that puts its
// delta clock on CLOCK_REALTIME and names no MONOTONIC (whose zero differs
// between machines), and a process descriptor named after the member.
TEST_F(RunExport, PerfettoHasASequenceAndAProcessPerMemberOnRealtime) {
  const Expanded x = expand(test::read_file(export_run("perfetto")));
  struct Sequence {
    std::map<uint64_t, uint64_t> snapshot;  // clock id -> reading
    uint64_t primary = 0;
    uint64_t delta = 0;  // the incremental clock's value
    std::vector<uint64_t> times;
    std::set<std::string> processes;
  };
  std::map<uint64_t, Sequence> sequences;
  std::map<uint64_t, uint64_t> process_pids;  // pid -> sequence
  for (const Field& pf_field : decode(x.packets)) {
    const std::vector<Field> packet = decode(pf_field.bytes);
    Sequence& s = sequences[value_of(packet, pf::packet::kTrustedSequenceId)];
    if (const Field* c = find(packet, pf::packet::kClockSnapshot)) {
      const std::vector<Field> snapshot = decode(c->bytes);
      s.primary = value_of(snapshot, pf::clock_snapshot::kPrimaryTraceClock);
      for (const Field& clock : snapshot)
        if (clock.number == pf::clock_snapshot::kClocks) {
          const std::vector<Field> fields = decode(clock.bytes);
          s.snapshot[value_of(fields, pf::clock::kId)] = value_of(fields, pf::clock::kTimestamp);
        }
      s.delta = s.snapshot[pf::clock::kFirstSequenceClock];
    }
    if (const Field* t = find(packet, pf::packet::kTrackDescriptor)) {
      const std::vector<Field> track = decode(t->bytes);  // find() points into it
      if (const Field* p = find(track, pf::track::kProcess)) {
        const std::vector<Field> process = decode(p->bytes);
        const Field* name = find(process, pf::process::kName);
        if (name) s.processes.insert(std::string(name->bytes));
        process_pids[value_of(process, pf::process::kPid)] = value_of(packet, pf::packet::kTrustedSequenceId);
      }
    }
    if (find(packet, pf::packet::kTrackEvent)) {
      const uint64_t ts = value_of(packet, pf::packet::kTimestamp);
      if (find(packet, pf::packet::kTimestampClockId)) {
        EXPECT_EQ(value_of(packet, pf::packet::kTimestampClockId), pf::clock::kRealtime);
        s.times.push_back(ts);
      } else {
        s.times.push_back(s.delta += ts);
      }
    }
  }
  ASSERT_EQ(sequences.size(), 3u);
  ASSERT_EQ(process_pids.size(), 3u);  // three processes, none merged by their pid
  const std::vector<ProcessPlacement> places = place_run(run());
  const Recorded* recorded[] = {&rank0(), &rank1(), &launcher()};
  for (size_t i = 0; i < places.size(); ++i) {
    SCOPED_TRACE(places[i].name);
    ASSERT_TRUE(process_pids.count(places[i].pid));
    const Sequence& s = sequences[process_pids[places[i].pid]];
    EXPECT_EQ(s.primary, pf::clock::kRealtime);
    EXPECT_FALSE(s.snapshot.count(pf::clock::kMonotonic));
    EXPECT_EQ(s.snapshot.at(pf::clock::kRealtime), recorded[i]->realtime_ns);
    ASSERT_EQ(s.processes.size(), 1u);
    EXPECT_EQ(s.processes.begin()->rfind(places[i].name + ":", 0), 0u) << *s.processes.begin();
    ASSERT_FALSE(s.times.empty());
    // The first event where its header places it, on CLOCK_REALTIME.
    EXPECT_EQ(s.times.front(), kRealtime + placed(*recorded[i], recorded[i]->first_push_ns));
    EXPECT_TRUE(std::is_sorted(s.times.begin(), s.times.end()));
  }
}

}  // namespace
}  // namespace psc
