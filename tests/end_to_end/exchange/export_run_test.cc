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
#include "exchange/perfetto/perfetto_schema.h"
#include "exchange/run_window.h"
#include "tests/support/export_fixture.h"
#include "tests/support/protobuf_decode.h"
#include "tests/support/synthetic_trace.h"
#include "traces/reader.h"
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

// A rank from srun's or mpirun's variables (kHeaderTaskRank), with its local rank and world size.
RunMember task(RunMember m, int32_t world_size) {
  m.header.flags |= format::kHeaderTaskRank;
  m.header.local_rank = 0;
  m.header.world_size = world_size;
  return m;
}

TEST(RunGrouping, SrunTasksThatLaunchedRanksAreNotRanksThemselves) {
  // `srun --ntasks 2 peakscope record -- torchrun --nproc_per_node 2 ...`: each node's agent holds its srun
  // task's SLURM_PROCID (0, 1) and the job's id, its workers RANK 0..3 and the rendezvous id; each agent's
  // record ties it to its node's workers.
  std::vector<psc::Run> runs = group_members({
      task(member("agent-beta", 1, "beta", 20, 20, "42.0"), 2),
      member("r3", 3, "beta", 22, 20, "rdzv"),
      member("r0", 0, "alpha", 11, 10, "rdzv"),
      task(member("agent-alpha", 0, "alpha", 10, 10, "42.0"), 2),
      member("r1", 1, "alpha", 12, 10, "rdzv"),
      member("r2", 2, "beta", 21, 20, "rdzv"),
  });
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].id, "rdzv");  // a rank's id before a launcher's, whatever order the files come in
  EXPECT_EQ(paths_of(runs[0]), (std::vector<std::string>{"r0", "r1", "r2", "r3", "agent-alpha", "agent-beta"}));
  for (const RunMember& m : runs[0].members) {
    const bool agent = m.path.rfind("agent-", 0) == 0;
    EXPECT_EQ(is_rank_trace(m.header), !agent) << m.path;
    EXPECT_EQ(is_task_launcher(m.header), agent) << m.path;
    if (agent) {
      EXPECT_EQ(m.header.local_rank, -1);
      EXPECT_EQ(m.header.world_size, 0);
      EXPECT_EQ(member_label(m), "pid " + std::to_string(m.header.pid) + " (" + host_of(m.header) + ")");
    }
  }
  // Ranks that are all srun's tasks (`srun python train.py`) stay ranks, and so does a task beside a launcher
  // without a rank of its own.
  runs = group_members({task(member("t1", 1, "h", 2, 0, "7"), 2), task(member("t0", 0, "h", 1, 0, "7"), 2),
                        member("wrapper", -1, "h", 3, 0, "7")});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(paths_of(runs[0]), (std::vector<std::string>{"t0", "t1", "wrapper"}));
  EXPECT_TRUE(is_rank_trace(runs[0].members[0].header));
  EXPECT_EQ(runs[0].members[1].header.rank, 1);
  EXPECT_EQ(runs[0].members[1].header.world_size, 2);
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

// ---- a window of the run ---------------------------------------------------------------

// On the run's clock (ns after the launcher's start) the launcher's mark is
// at 1.001 ms, the run's earliest event; rank 0's fifteen events (wave push,
// its mark, three layers of push, alloc, pop, three frees, the wave's pop)
// run from 4.001 ms and rank 1's from 8.501 ms, 1 us apart.
class RunWindowExport : public RunExport {
 protected:
  static constexpr uint64_t kZero = 1'000'000 + SyntheticTrace::kTimeStepNs;  // the launcher's mark

  RunWindow window(const ExportWindow& w) { return write_run_window(run(), w, dir_.file("windowed"), written_); }
  // Every event of a member's window trace, placed on the run's clock.
  std::vector<uint64_t> placed_times(const RunWindow& w, size_t member, const Recorded& r) {
    std::vector<uint64_t> times;
    for (const Event& e : load_trace(w.members[member].window_path).events) times.push_back(placed(r, e.time_ns));
    return times;
  }

  std::vector<std::string> written_;
};

TEST_F(RunWindowExport, EveryMembersEventsLieInTheSameStretchOfTheRunsClock) {
  ExportWindow w;
  w.from_ns = 3'005'000;  // 4.006 ms: rank 0's second layer's push
  w.to_ns = 7'508'000;    // 8.509 ms: rank 1's third layer's push
  const RunWindow rw = window(w);
  EXPECT_EQ(rw.zero_ns, static_cast<int64_t>(kZero));
  ASSERT_EQ(rw.members.size(), 3u);
  const uint64_t begin = kZero + 3'005'000, end = kZero + 7'508'000;
  for (const auto& [member, r] : {std::pair{size_t{0}, &rank0()}, std::pair{size_t{1}, &rank1()}}) {
    SCOPED_TRACE(member);
    ASSERT_FALSE(rw.members[member].window_path.empty()) << rw.members[member].note;
    const std::vector<uint64_t> times = placed_times(rw, member, *r);
    ASSERT_FALSE(times.empty());
    for (uint64_t t : times) {
      EXPECT_GE(t, begin);
      EXPECT_LE(t, end);
    }
  }
  // Rank 0 is inside its wave and its first layer's block at the window's
  // start: the wave's push and mark and the block come first, at the start.
  const LoadedTrace r0 = load_trace(rw.members[0].window_path);
  EXPECT_EQ(rw.members[0].result.carried_events, 3u);
  ASSERT_GE(r0.events.size(), 4u);
  EXPECT_EQ(r0.events[0].kind, EventKind::kRangePush);
  EXPECT_EQ(r0.meta.string(r0.events[0].name), "wave");
  EXPECT_EQ(r0.events[1].kind, EventKind::kMark);
  EXPECT_EQ(r0.events[2].kind, EventKind::kAlloc);
  EXPECT_EQ(r0.events[2].bytes, 2u << 20);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(placed(rank0(), r0.events[i].time_ns), begin);
  EXPECT_EQ(placed(rank0(), r0.events[3].time_ns), begin) << "the second layer's push, at the start itself";
  EXPECT_EQ(r0.meta.string(r0.events[3].name), "forward/layer.1");
  // Rank 1 starts inside the window: nothing to carry, its first nine events.
  EXPECT_EQ(rw.members[1].result.carried_events, 0u);
  EXPECT_EQ(rw.members[1].result.output_events, 9u);
  EXPECT_EQ(placed_times(rw, 1, rank1()).front(), placed(rank1(), rank1().first_push_ns));
  // The launcher's one mark is before the window: nothing, and a note.
  EXPECT_TRUE(rw.members[2].window_path.empty());
  EXPECT_EQ(rw.members[2].note, "it ends before the window begins");

  // The export of what is in the window: two processes, every event in the
  // stretch on the run's clock (Chrome's ts from the members' earliest start).
  const psc::Run part = windowed_run(run(), rw);
  ASSERT_EQ(part.members.size(), 2u);
  EXPECT_EQ(part.hosts, (std::vector<std::string>{"alpha", "beta"}));
  ExportOptions options;
  options.output = dir_.file("window.json");
  options.warn = [](const std::string& warning) { ADD_FAILURE() << warning; };
  find_exporter("chrome")->write_run(part, options);
  const nlohmann::json j = nlohmann::json::parse(test::read_file(options.output));
  const double origin_us = static_cast<double>(j["otherData"]["origin_realtime_ns"].get<uint64_t>() - kRealtime) / 1e3;
  std::set<int64_t> pids;
  size_t timed = 0;
  for (const nlohmann::json& e : j["traceEvents"]) {
    if (e["ph"] == "M") {
      if (e["name"] == "process_name") pids.insert(e["pid"].get<int64_t>());
      continue;
    }
    if (!e.contains("ts")) continue;
    ++timed;
    const double t = e["ts"].get<double>() + origin_us;
    EXPECT_GE(t, begin / 1e3 - 1e-3) << e.dump();
    EXPECT_LE(t, end / 1e3 + 1e-3) << e.dump();
  }
  EXPECT_EQ(pids.size(), 2u);
  EXPECT_GT(timed, 10u);
}

TEST_F(RunWindowExport, AWaveIsTheSpanOfEveryRanksWaveTogether) {
  ExportWindow w;
  w.wave = 0;
  const RunWindow rw = window(w);
  // From rank 0's push (4.001 ms) to rank 1's pop (8.515 ms).
  EXPECT_EQ(rw.begin_ns, 3'000'000u);
  ASSERT_TRUE(rw.end_ns);
  EXPECT_EQ(*rw.end_ns, 7'514'000u);
  EXPECT_EQ(rw.members[0].result.output_events, 15u);
  EXPECT_EQ(rw.members[1].result.output_events, 15u);
  EXPECT_TRUE(rw.members[2].window_path.empty());
  EXPECT_EQ(rw.members[2].note, "it has no wave 0 (it has 0 waves)");
  for (const auto& [member, r] : {std::pair{size_t{0}, &rank0()}, std::pair{size_t{1}, &rank1()}})
    for (uint64_t t : placed_times(rw, member, *r)) {
      EXPECT_GE(t, kZero + rw.begin_ns);
      EXPECT_LE(t, kZero + *rw.end_ns);
    }

  w.wave = 1;
  try {
    window(w);
    ADD_FAILURE() << "no member has wave 1";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "run 'job-7': no member has wave 1 (rank 0 (alpha, pid 4242) has 1 wave, rank 1 (beta, pid 4242) has "
              "1 wave, pid 4000 (alpha) has 0 waves; numbered from 0)");
  }
}

TEST_F(RunWindowExport, MembersWithNothingInTheWindowAreLeftOutAndSaySo) {
  ExportWindow w;
  w.to_ns = 1'000'000;  // the launcher's mark only
  RunWindow rw = window(w);
  EXPECT_FALSE(rw.members[2].window_path.empty());
  EXPECT_EQ(rw.members[2].result.output_events, 1u);
  EXPECT_EQ(rw.members[0].note, "it begins 0.003000 s after the run's earliest event, after the window ends");
  EXPECT_EQ(rw.members[1].note, "it begins 0.007500 s after the run's earliest event, after the window ends");
  EXPECT_EQ(windowed_run(run(), rw).members.size(), 1u);
  // A summary of a window: the same members, counters in place of blocks.
  w.to_ns.reset();
  w.from_ns = 7'000'000;
  w.summary = true;
  rw = window(w);
  EXPECT_TRUE(rw.members[0].window_path.empty());
  EXPECT_EQ(rw.members[0].note, "it ends before the window begins");
  for (const Event& e : load_trace(rw.members[1].window_path).events) EXPECT_FALSE(is_memory_event(e.kind));
  // Nothing of any member: an error that says what each member lacks.
  w.from_ns = 20'000'000;
  try {
    window(w);
    ADD_FAILURE() << "the window is beyond every member";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("run 'job-7': no member has anything in the window 0.020000 s to its end"),
              std::string::npos)
        << e.what();
  }
  // Written window traces are named for the caller to remove.
  EXPECT_FALSE(written_.empty());
}

}  // namespace
}  // namespace psc
