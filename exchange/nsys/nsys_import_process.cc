#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "exchange/nsys/nsys_import.h"
#include "exchange/nsys/nsys_nvtx.h"
#include "exchange/nsys/nsys_schema.h"

namespace psc::nsys {
namespace {

std::vector<uint32_t> distinct_pids(sqlite::Db& db, const char* sql) {
  std::vector<uint32_t> pids;
  sqlite::Statement s(db, sql);
  while (s.next()) pids.push_back(static_cast<uint32_t>(s.integer(0)));
  return pids;
}

// The process whose memory rows (or, without any, whose NVTX events) the
// file holds; --pid chooses among several.
void choose_process(sqlite::Db& db, const ImportOptions& options, bool has_memory, bool has_host, ImportedProcess& p) {
  std::vector<uint32_t> pids;
  const char* source = "CUDA_GPU_MEMORY_USAGE_EVENTS";
  if (has_memory) {
    sqlite::Statement s(db, "SELECT DISTINCT globalPid FROM CUDA_GPU_MEMORY_USAGE_EVENTS");
    while (s.next()) pids.push_back(pid_of(s.integer(0)));
  }
  if (has_host)
    for (uint32_t pid :
         distinct_pids(db, "SELECT DISTINCT globalTid >> 24 & 16777215 FROM PEAKSCOPE_HOST_MEMORY_EVENTS"))
      pids.push_back(pid);
  if (pids.empty() && db.has_table("NVTX_EVENTS")) {
    source = "NVTX_EVENTS";
    pids = distinct_pids(db,
                         "SELECT DISTINCT globalTid >> 24 & 16777215 FROM NVTX_EVENTS WHERE eventType IN "
                         "(34, 59, 60, 70, 71)");
  }
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  if (pids.empty())
    throw InputError(options.input, "no GPU memory rows and no NVTX ranges or marks: nothing to import");
  p.ranges_only = std::string_view(source) == "NVTX_EVENTS";
  const char* what = p.ranges_only ? "NVTX events" : "memory events";
  if (options.pid) {
    if (std::find(pids.begin(), pids.end(), options.pid) == pids.end())
      throw InputError(options.input,
                       fmt::format("no {} of pid {} (there are: {})", what, options.pid, fmt::join(pids, ", ")));
    p.pid = options.pid;
  } else if (pids.size() > 1) {
    throw InputError(options.input, fmt::format("{} of {} processes ({}); choose one with --pid", what, pids.size(),
                                                fmt::join(pids, ", ")));
  } else {
    p.pid = pids[0];
  }
}

uint64_t unsigned_info(const ImportedProcess& p, const char* key, uint64_t fallback) {
  auto it = p.info.find(key);
  if (it == p.info.end() || it->second.empty() || it->second.size() > 20 ||
      it->second.find_first_not_of("0123456789") != std::string::npos)
    return fallback;
  return std::stoull(it->second);
}

int32_t signed_info(const ImportedProcess& p, const char* key, int32_t fallback) {
  auto it = p.info.find(key);
  if (it == p.info.end()) return fallback;
  const std::string& v = it->second;
  const size_t digits = v.size() - (!v.empty() && v[0] == '-');
  if (digits == 0 || digits > 9 || v.find_first_not_of("0123456789", v[0] == '-') != std::string::npos) return fallback;
  return static_cast<int32_t>(std::stol(v));
}

void read_info(sqlite::Db& db, ImportedProcess& p) {
  if (db.has_table("TARGET_INFO_SESSION_START_TIME") && db.has_column("TARGET_INFO_SESSION_START_TIME", "utcEpochNs")) {
    sqlite::Statement s(db, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1");
    if (s.next() && !s.is_null(0) && s.integer(0) > 0) p.utc_epoch_ns = static_cast<uint64_t>(s.integer(0));
  }
  if (db.has_table("PROCESSES") && db.has_column("PROCESSES", "name")) {
    sqlite::Statement s(db, "SELECT name FROM PROCESSES WHERE pid = ? LIMIT 1");
    s.bind(1, int64_t{p.pid});
    if (s.next()) p.command = s.text(0);
  }
  if (db.has_table("PEAKSCOPE_INFO")) {
    sqlite::Statement s(db, "SELECT name, value FROM PEAKSCOPE_INFO");
    while (s.next()) p.info[s.text(0)] = s.text(1);
    // The export of a run keeps each process's keys under "process.<pid>.".
    const std::string prefix = fmt::format("process.{}.", p.pid);
    std::map<std::string, std::string> own;
    for (const auto& [k, v] : p.info)
      if (k.compare(0, prefix.size(), prefix) == 0) own[k.substr(prefix.size())] = v;
    for (auto& [k, v] : own) p.info[k] = std::move(v);
  }
  p.base_ns = unsigned_info(p, "monotonic_session_start_ns", 0);
  p.reserved = p.info.count("level") && p.info["level"] == "reserved";
  if (p.info.count("command")) p.command = p.info["command"];
  p.rank = signed_info(p, "rank", -1);
  p.local_rank = signed_info(p, "local_rank", -1);
}

void read_strings(sqlite::Db& db, ImportedProcess& p) {
  if (!db.has_table("StringIds")) return;
  p.string_ids = read_string_ids(db);
  if (db.has_table("ThreadNames") && db.has_column("ThreadNames", "nameId")) {
    sqlite::Statement t(db, "SELECT nameId, globalTid FROM ThreadNames");
    while (t.next())
      if (!t.is_null(1) && pid_of(t.integer(1)) == p.pid) p.thread_names[t.integer(1)] = p.string_ids[t.integer(0)];
  }
}

// A peakscope export names each thread's index in the trace it came from;
// false when any is missing or two share one.
bool recorded_indices(const ImportedProcess& p, const std::vector<int64_t>& globals,
                      std::unordered_map<int64_t, uint32_t>& index) {
  for (int64_t g : globals) {
    auto it = p.info.find(fmt::format("thread.{}", g));
    if (g == kUnknownThread) continue;
    if (it == p.info.end() || it->second.empty() || it->second.size() > 5 ||
        it->second.find_first_not_of("0123456789") != std::string::npos)
      return false;
    index.emplace(g, static_cast<uint32_t>(std::stoul(it->second)));
  }
  std::vector<uint32_t> taken;
  for (const auto& [g, t] : index) taken.push_back(t);
  std::sort(taken.begin(), taken.end());
  return std::adjacent_find(taken.begin(), taken.end()) == taken.end();
}

}  // namespace

ImportedProcess read_process(sqlite::Db& db, const ImportOptions& options, bool has_memory, bool has_host) {
  ImportedProcess p;
  choose_process(db, options, has_memory, has_host, p);
  read_info(db, p);
  read_strings(db, p);
  return p;
}

size_t declare_threads(const ImportedProcess& process, const ImportOptions& options, ImportSink& sink) {
  std::vector<int64_t> globals;
  for (const ImportEvent& e : sink.events()) globals.push_back(e.thread);
  std::sort(globals.begin(), globals.end());
  globals.erase(std::unique(globals.begin(), globals.end()), globals.end());
  // The same map refilled, not a fresh one: the order threads are declared in
  // is the map's, and the trace's bytes follow it.
  std::unordered_map<int64_t, uint32_t> index;
  if (!recorded_indices(process, globals, index)) {
    index.clear();
    for (int64_t g : globals)
      if (g != kUnknownThread) index.emplace(g, static_cast<uint32_t>(index.size()));
  }
  uint32_t next_index = 0;
  for (const auto& [g, t] : index) next_index = std::max(next_index, t + 1);
  if (std::binary_search(globals.begin(), globals.end(), kUnknownThread)) index.emplace(kUnknownThread, next_index++);
  if (next_index > TraceWriter::kMaxThreads)
    throw InputError(options.input,
                     fmt::format("{} threads; a trace holds at most {}", index.size(), TraceWriter::kMaxThreads));
  for (const auto& [global, t] : index) {
    if (global == kUnknownThread) {
      sink.thread(global, t, 0, "(memory events with no recorded CUDA call)");
      continue;
    }
    auto name = process.thread_names.find(global);
    sink.thread(global, t, tid_of(global),
                name != process.thread_names.end() ? name->second : fmt::format("thread {}", tid_of(global)));
  }
  return index.size();
}

TraceWriterOptions trace_header(const ImportedProcess& process, bool host_rows) {
  // The session start on both clocks.
  return TraceWriterOptions{.pid = process.pid,
                            .rank = process.rank,
                            .local_rank = process.local_rank,
                            .flags = host_rows ? uint32_t{format::kHeaderHostMode} : 0u,
                            .realtime_ns = process.utc_epoch_ns,
                            .monotonic_ns = process.base_ns,
                            .command = process.command};
}

}  // namespace psc::nsys
