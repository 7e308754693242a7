// `import --from nsys-sqlite`: a SQLite file from `nsys export --type sqlite`
// of a run made with `--cuda-memory-usage=true` (or one peakscope wrote) into
// a .pstrace that report, calibrate and check read.
//
//   - CUDA_GPU_MEMORY_USAGE_EVENTS rows become allocations and frees (paired
//     by device and address: a free names the allocation it ends; one that
//     names nothing is kept, and counted, as the analysis counts it);
//   - each memory row's thread is the thread of the CUDA API call that made it
//     (correlationId -> CUPTI_ACTIVITY_KIND_RUNTIME.globalTid); a row with no
//     such call goes on a thread of its own, where only process-wide ranges
//     can attribute it;
//   - NVTX push/pop ranges become pushes and pops on their threads, start/end
//     ranges process-wide ranges, marks marks; so every event is joined to the
//     ranges open on its thread at its time, which is what Event::range holds;
//   - order: by time; at equal times a range opens before, and closes after,
//     what happens at that instant (Nsight's ranges include their end points),
//     frees before allocations. A file peakscope exported carries the exact
//     order (PEAKSCOPE_EVENT_ORDER) and the clock base (PEAKSCOPE_INFO), so a
//     round trip gives back the same events.
// Not streaming: the rows of one process are read, sorted, then written.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "common/progress.h"
#include "exchange/export_formats.h"
#include "exchange/export_nsys_schema.h"
#include "exchange/export_output.h"
#include "exchange/export_sqlite.h"
#include "exchange/nsys_nvtx.h"
#include "traces/writer.h"

namespace psc {
namespace {

constexpr uint32_t kNoString = UINT32_MAX;

// One event to write, before its thread index, range and sequence are known.
struct Item {
  uint64_t time_ns = 0;
  uint64_t order = 0;  // PEAKSCOPE_EVENT_ORDER when present
  int rank = 0;        // tie-break at equal times (see the top of the file)
  int64_t nest = 0;    // pushes: later end first; pops: later start first
  uint64_t row = 0;    // last tie-break: the row's position in its table
  EventKind kind = EventKind::kMark;
  int64_t thread = 0;  // globalTid
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t stream = 0;
  int16_t device = -1;
  MemoryKind memory = MemoryKind::kNone;
  Api api = Api::kImported;
  uint32_t name = kNoString;
  uint32_t payload = kNoString;
  bool host_row = false;  // from PEAKSCOPE_HOST_MEMORY_EVENTS (row numbers its own)
};

enum Rank : int { kOpens = 0, kMarks = 1, kFrees = 2, kAllocs = 3, kCloses = 4 };

class NsysImport {
 public:
  NsysImport(const ImportOptions& options) : options_(options), db_(options.input, true) {}

  ImportSummary run() {
    // A file that is not SQLite fails on the first statement. A run profiled
    // without --cuda-memory-usage has no memory table, but its NVTX ranges
    // and wave marks are what calibration reads: it imports as ranges only.
    has_memory_ = db_.has_table("CUDA_GPU_MEMORY_USAGE_EVENTS");
    has_host_ = db_.has_table("PEAKSCOPE_HOST_MEMORY_EVENTS");
    if (!has_memory_ && !db_.has_table("NVTX_EVENTS"))
      throw InputError(options_.input,
                       "neither CUDA_GPU_MEMORY_USAGE_EVENTS nor NVTX_EVENTS: not an `nsys export --type sqlite` of a "
                       "run traced with nvtx or --cuda-memory-usage=true");
    if (has_memory_)
      for (const char* column :
           {"start", "globalPid", "deviceId", "address", "bytes", "memKind", "memoryOperationType"})
        if (!db_.has_column("CUDA_GPU_MEMORY_USAGE_EVENTS", column))
          throw InputError(options_.input, std::string("CUDA_GPU_MEMORY_USAGE_EVENTS has no column ") + column);
    if (db_.has_table("NVTX_EVENTS") && !db_.has_column("NVTX_EVENTS", "globalTid"))
      throw InputError(options_.input, "NVTX_EVENTS has no column globalTid");
    choose_process();
    read_info();
    read_strings();
    if (has_memory_) read_memory();
    if (has_host_) read_host_memory();
    read_runtime();
    read_nvtx();
    read_order();
    return write();
  }

 private:
  // ---- input ------------------------------------------------------------------

  int64_t checked(const sqlite::Statement& s, int column, const char* what, int64_t min, int64_t max, uint64_t row) {
    if (s.is_null(column)) throw InputError(options_.input, fmt::format("{} is NULL in row {}", what, row));
    const int64_t v = s.integer(column);
    if (v < min || v > max) throw InputError(options_.input, fmt::format("{} {} out of range in row {}", what, v, row));
    return v;
  }

  int64_t checked_value(int64_t v, const char* what, uint64_t row) const {
    if (v < 0 || v > INT64_MAX / 2)
      throw InputError(options_.input, fmt::format("{} {} out of range in row {}", what, v, row));
    return v;
  }

  uint32_t intern(const std::string& s) {
    auto it = string_index_.find(s);
    if (it != string_index_.end()) return it->second;
    const uint32_t id = static_cast<uint32_t>(strings_.size());
    strings_.push_back(s);
    string_index_.emplace(s, id);
    return id;
  }

  // The process whose memory rows (or, without any, whose NVTX events) the
  // file holds; --pid chooses among several.
  void choose_process() {
    std::vector<uint32_t> pids;
    const char* source = "CUDA_GPU_MEMORY_USAGE_EVENTS";
    if (has_memory_) {
      sqlite::Statement s(db_, "SELECT DISTINCT globalPid FROM CUDA_GPU_MEMORY_USAGE_EVENTS");
      while (s.next()) pids.push_back(nsys::pid_of(s.integer(0)));
    }
    if (has_host_) {
      sqlite::Statement s(db_, "SELECT DISTINCT globalTid >> 24 & 16777215 FROM PEAKSCOPE_HOST_MEMORY_EVENTS");
      while (s.next()) pids.push_back(static_cast<uint32_t>(s.integer(0)));
    }
    if (pids.empty() && db_.has_table("NVTX_EVENTS")) {
      source = "NVTX_EVENTS";
      sqlite::Statement s(db_,
                          "SELECT DISTINCT globalTid >> 24 & 16777215 FROM NVTX_EVENTS WHERE eventType IN "
                          "(34, 59, 60, 70, 71)");
      while (s.next()) pids.push_back(static_cast<uint32_t>(s.integer(0)));
    }
    std::sort(pids.begin(), pids.end());
    pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
    if (pids.empty())
      throw InputError(options_.input, "no GPU memory rows and no NVTX ranges or marks: nothing to import");
    ranges_only_ = std::string_view(source) == "NVTX_EVENTS";
    if (options_.pid) {
      if (std::find(pids.begin(), pids.end(), options_.pid) == pids.end())
        throw InputError(options_.input,
                         fmt::format("no {} of pid {} (there are: {})", ranges_only_ ? "NVTX events" : "memory events",
                                     options_.pid, fmt::join(pids, ", ")));
      pid_ = options_.pid;
    } else if (pids.size() > 1) {
      throw InputError(options_.input,
                       fmt::format("{} of {} processes ({}); choose one with --pid",
                                   ranges_only_ ? "NVTX events" : "memory events", pids.size(), fmt::join(pids, ", ")));
    } else {
      pid_ = pids[0];
    }
  }

  void read_info() {
    if (db_.has_table("TARGET_INFO_SESSION_START_TIME") &&
        db_.has_column("TARGET_INFO_SESSION_START_TIME", "utcEpochNs")) {
      sqlite::Statement s(db_, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1");
      if (s.next() && !s.is_null(0) && s.integer(0) > 0) utc_epoch_ns_ = static_cast<uint64_t>(s.integer(0));
    }
    if (db_.has_table("PROCESSES") && db_.has_column("PROCESSES", "name")) {
      sqlite::Statement s(db_, "SELECT name FROM PROCESSES WHERE pid = ? LIMIT 1");
      s.bind(1, int64_t{pid_});
      if (s.next()) command_ = s.text(0);
    }
    if (db_.has_table("PEAKSCOPE_INFO")) {
      sqlite::Statement s(db_, "SELECT name, value FROM PEAKSCOPE_INFO");
      while (s.next()) info_[s.text(0)] = s.text(1);
      // The export of a run keeps each process's keys under "process.<pid>.".
      const std::string prefix = fmt::format("process.{}.", pid_);
      std::map<std::string, std::string> own;
      for (const auto& [k, v] : info_)
        if (k.compare(0, prefix.size(), prefix) == 0) own[k.substr(prefix.size())] = v;
      for (auto& [k, v] : own) info_[k] = std::move(v);
    }
    auto number = [&](const char* key, uint64_t fallback) -> uint64_t {
      auto it = info_.find(key);
      if (it == info_.end() || it->second.empty() || it->second.size() > 20 ||
          it->second.find_first_not_of("0123456789") != std::string::npos)
        return fallback;
      return std::stoull(it->second);
    };
    base_ns_ = number("monotonic_session_start_ns", 0);
    reserved_ = info_.count("level") && info_["level"] == "reserved";
    if (info_.count("command")) command_ = info_["command"];
    rank_ = signed_number("rank", -1);
    local_rank_ = signed_number("local_rank", -1);
  }

  int32_t signed_number(const char* key, int32_t fallback) const {
    auto it = info_.find(key);
    if (it == info_.end()) return fallback;
    const std::string& v = it->second;
    const size_t digits = v.size() - (!v.empty() && v[0] == '-');
    if (digits == 0 || digits > 9 || v.find_first_not_of("0123456789", v[0] == '-') != std::string::npos)
      return fallback;
    return static_cast<int32_t>(std::stol(v));
  }

  void read_strings() {
    if (!db_.has_table("StringIds")) return;
    string_ids_ = nsys::read_string_ids(db_);
    if (db_.has_table("ThreadNames") && db_.has_column("ThreadNames", "nameId")) {
      sqlite::Statement t(db_, "SELECT nameId, globalTid FROM ThreadNames");
      while (t.next())
        if (!t.is_null(1) && nsys::pid_of(t.integer(1)) == pid_)
          thread_names_[t.integer(1)] = string_ids_[t.integer(0)];
    }
  }

  uint64_t time(int64_t start) const { return base_ns_ + static_cast<uint64_t>(start); }

  void read_memory() {
    const bool has_stream = db_.has_column("CUDA_GPU_MEMORY_USAGE_EVENTS", "streamId");
    const bool has_correlation = db_.has_column("CUDA_GPU_MEMORY_USAGE_EVENTS", "correlationId");
    const bool has_pool = db_.has_column("CUDA_GPU_MEMORY_USAGE_EVENTS", "localMemoryPoolAddress");
    sqlite::Statement s(db_,
                        fmt::format("SELECT rowid, start, deviceId, address, bytes, memKind, memoryOperationType, "
                                    "{}, {}, {} FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE globalPid >> 24 & 16777215 "
                                    "= ? ORDER BY rowid",
                                    has_stream ? "streamId" : "NULL", has_correlation ? "correlationId" : "NULL",
                                    has_pool ? "localMemoryPoolAddress" : "NULL"));
    s.bind(1, int64_t{pid_});
    progress_stage("reading " + options_.input + ": GPU memory rows", 0);
    ProgressBatch rows;
    while (s.next()) {
      rows.add();
      const uint64_t row = static_cast<uint64_t>(s.integer(0));
      Item it;
      it.row = row;
      it.time_ns = time(checked(s, 1, "start", 0, INT64_MAX / 2, row));
      it.device = static_cast<int16_t>(checked(s, 2, "deviceId", -1, INT16_MAX, row));
      it.address = static_cast<uint64_t>(s.integer(3));
      it.bytes = static_cast<uint64_t>(checked(s, 4, "bytes", 0, INT64_MAX, row));
      const int64_t kind = s.integer(5);
      const int64_t operation = s.integer(6);
      it.stream = s.is_null(7) ? 0 : static_cast<uint64_t>(s.integer(7));
      it.memory = nsys::memory_kind_of(static_cast<int>(kind), !s.is_null(9) && s.integer(9) != 0);
      if (!pair_row(it, operation)) continue;
      if (items_.size() >= UINT32_MAX) throw InputError(options_.input, "more than 4 billion memory rows");
      it.thread = kUnknownThread;  // until its API call says otherwise
      if (!s.is_null(8)) correlated_.emplace_back(s.integer(8), static_cast<uint32_t>(items_.size()));
      items_.push_back(it);
    }
    still_live_ = live_.size();
  }

  // Host memory a peakscope export kept out of Nsight's CUDA tables: its
  // thread and call are in the row.
  void read_host_memory() {
    sqlite::Statement s(db_,
                        "SELECT rowid, start, globalTid, address, bytes, memoryOperationType, nameId FROM "
                        "PEAKSCOPE_HOST_MEMORY_EVENTS WHERE globalTid >> 24 & 16777215 = ? ORDER BY rowid");
    s.bind(1, int64_t{pid_});
    progress_stage("reading " + options_.input + ": host memory rows", 0);
    ProgressBatch rows;
    while (s.next()) {
      rows.add();
      const uint64_t row = static_cast<uint64_t>(s.integer(0));
      Item it;
      it.row = row;
      it.host_row = true;
      it.time_ns = time(checked(s, 1, "start", 0, INT64_MAX / 2, row));
      it.thread = s.integer(2);
      it.device = -1;
      it.memory = MemoryKind::kHost;
      it.address = static_cast<uint64_t>(s.integer(3));
      it.bytes = static_cast<uint64_t>(checked(s, 4, "bytes", 0, INT64_MAX, row));
      auto name = string_ids_.find(s.integer(6));
      it.api = name != string_ids_.end() ? nsys::api_of(name->second) : Api::kImported;
      if (!pair_row(it, s.integer(5))) continue;
      items_.push_back(it);
      ++host_rows_;
    }
    still_live_ = live_.size();
  }

  // A memory row's kind from its operation, paired by (device, address) with
  // what is live (host rows are device -1); false for an unknown operation.
  bool pair_row(Item& it, int64_t operation) {
    const std::pair<int16_t, uint64_t> key{it.device, it.address};
    if (operation == nsys::kOperAllocation) {
      it.kind = EventKind::kAlloc;
      it.rank = kAllocs;
      ++allocations_;
      if (!live_.emplace(key, it.bytes).second) ++replaced_;
      live_[key] = it.bytes;
    } else if (operation == nsys::kOperDeallocation) {
      it.kind = EventKind::kFree;
      it.rank = kFrees;
      ++frees_;
      if (live_.erase(key) == 0) ++unmatched_frees_;
    } else {
      ++unknown_operations_;
      return false;
    }
    return true;
  }

  // Each memory row's thread and API, from the API call it came from.
  void read_runtime() {
    const bool usable = db_.has_table("CUPTI_ACTIVITY_KIND_RUNTIME") &&
                        db_.has_column("CUPTI_ACTIVITY_KIND_RUNTIME", "correlationId") &&
                        db_.has_column("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid");
    // (correlationId, item) sorted: 16 bytes a row, where a hash map of
    // vectors cost several times that on exports of millions of rows.
    std::sort(correlated_.begin(), correlated_.end());
    if (usable && !correlated_.empty()) {
      const bool has_name = db_.has_column("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId");
      sqlite::Statement s(db_, fmt::format("SELECT correlationId, globalTid, {} FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE "
                                           "globalTid >> 24 & 16777215 = ? AND correlationId IS NOT NULL",
                                           has_name ? "nameId" : "NULL"));
      s.bind(1, int64_t{pid_});
      progress_stage("reading " + options_.input + ": CUDA API rows", 0);
      ProgressBatch rows;
      while (s.next()) {
        rows.add();
        const int64_t correlation = s.integer(0);
        auto it = std::lower_bound(correlated_.begin(), correlated_.end(), std::make_pair(correlation, uint32_t{0}));
        if (it == correlated_.end() || it->first != correlation) continue;
        Api api = Api::kImported;
        if (!s.is_null(2)) {
          auto name = string_ids_.find(s.integer(2));
          if (name != string_ids_.end()) api = nsys::api_of(name->second);
        }
        for (; it != correlated_.end() && it->first == correlation; ++it) {
          items_[it->second].thread = s.is_null(1) ? kUnknownThread : s.integer(1);
          if (!reserved_) items_[it->second].api = api;
        }
      }
    }
    correlated_ = {};
    // Rows whose call was not traced keep the thread of their own.
    for (const Item& it : items_) unknown_thread_events_ += it.thread == kUnknownThread;
  }

  // Marks and ranges, named as the recorder names the same NVTX calls
  // (exchange/nsys_nvtx.h).
  void read_nvtx() {
    progress_stage("reading " + options_.input + ": NVTX rows", 0);
    ProgressBatch rows;
    nsys::read_nvtx_rows(db_, pid_, string_ids_, [&](const nsys::NvtxRow& r) {
      rows.add();
      add_nvtx(r);
    });
  }

  void add_nvtx(const nsys::NvtxRow& r) {
    const uint64_t row = r.row;
    const uint64_t start = time(checked_value(r.start, "NVTX start", row));
    const bool has_end = r.end.has_value();
    uint64_t end = has_end ? time(checked_value(*r.end, "NVTX end", row)) : 0;
    if (has_end && end < start) {
      ++ranges_ending_before_start_;
      end = start;
    }
    const int type = r.type;
    const std::string& payload = r.payload;
    const uint32_t name = intern(r.name);
    const int64_t thread = r.thread;
    Item open;
    open.row = row;
    open.time_ns = start;
    open.thread = thread;
    open.name = name;
    if (type == nsys::kNvtxMark) {
      open.kind = EventKind::kMark;
      open.rank = kMarks;
      if (!payload.empty()) open.payload = intern(payload);
      nvtx_rows_.push_back({items_.size(), SIZE_MAX});
      items_.push_back(open);
      ++marks_;
      return;
    }
    const bool push_pop = type == nsys::kNvtxPushPopRange || type == nsys::kNvtxtPushPopRange;
    open.kind = push_pop ? EventKind::kRangePush : EventKind::kRangeStart;
    open.rank = kOpens;
    open.nest = has_end ? -static_cast<int64_t>(end) : INT64_MIN;  // the longer range opens first
    const uint64_t id = r.range_id ? static_cast<uint64_t>(*r.range_id) : (1ull << 48) + row;
    if (!push_pop) {
      open.address = id;
      if (!payload.empty()) open.payload = intern(payload);
    }
    const size_t open_index = items_.size();
    items_.push_back(open);
    size_t close_index = SIZE_MAX;
    if (has_end) {
      Item close;
      close.row = row;
      close.time_ns = end;
      close.kind = push_pop ? EventKind::kRangePop : EventKind::kRangeEnd;
      close.rank = kCloses;
      close.nest = -static_cast<int64_t>(start);  // the shorter range closes first
      close.thread = push_pop || !r.end_thread ? thread : *r.end_thread;
      close.name = name;
      close.address = push_pop ? 0 : id;
      close_index = items_.size();
      items_.push_back(close);
    } else {
      ++unended_ranges_;
    }
    nvtx_rows_.push_back({open_index, close_index});
    ++ranges_;
  }

  // The exact order a peakscope export recorded; used only when it covers
  // every row, else the time order stands.
  void read_order() {
    if (!db_.has_table("PEAKSCOPE_EVENT_ORDER")) return;
    std::unordered_map<uint64_t, std::pair<int64_t, std::optional<int64_t>>> memory, nvtx, host;
    sqlite::Statement s(db_, "SELECT tableName, rowId, startOrder, endOrder FROM PEAKSCOPE_EVENT_ORDER");
    while (s.next()) {
      const std::string table_name = s.text(0);
      auto& table = table_name == "NVTX_EVENTS" ? nvtx : table_name == "PEAKSCOPE_HOST_MEMORY_EVENTS" ? host : memory;
      table[static_cast<uint64_t>(s.integer(1))] = {s.integer(2),
                                                    s.is_null(3) ? std::nullopt : std::optional<int64_t>(s.integer(3))};
    }
    std::vector<uint64_t> orders(items_.size(), 0);
    for (size_t i = 0; i < items_.size(); ++i) {
      const Item& it = items_[i];
      if (it.kind != EventKind::kAlloc && it.kind != EventKind::kFree) continue;
      auto o = (it.host_row ? host : memory).find(it.row);
      if (o == memory.end() || o->second.first < 0) return;
      orders[i] = static_cast<uint64_t>(o->second.first);
    }
    for (const auto& [open, close] : nvtx_rows_) {
      auto o = nvtx.find(items_[open].row);
      if (o == nvtx.end() || o->second.first < 0) return;
      orders[open] = static_cast<uint64_t>(o->second.first);
      if (close != SIZE_MAX) {
        if (!o->second.second || *o->second.second < 0) return;
        orders[close] = static_cast<uint64_t>(*o->second.second);
      }
    }
    for (size_t i = 0; i < items_.size(); ++i) items_[i].order = orders[i];
    exact_order_ = true;
  }

  // ---- output -----------------------------------------------------------------

  ImportSummary write() {
    std::vector<size_t> order(items_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      const Item& a = items_[x];
      const Item& b = items_[y];
      if (exact_order_) return a.order < b.order;
      if (a.time_ns != b.time_ns) return a.time_ns < b.time_ns;
      if (a.rank != b.rank) return a.rank < b.rank;
      if (a.nest != b.nest) return a.nest < b.nest;
      return a.row < b.row;
    });

    // Thread indices in the order of their global ids; the unknown thread last.
    std::vector<int64_t> globals;
    for (const Item& it : items_) globals.push_back(it.thread);
    std::sort(globals.begin(), globals.end());
    globals.erase(std::unique(globals.begin(), globals.end()), globals.end());
    std::unordered_map<int64_t, uint32_t> index;
    // A peakscope export names each thread's index in the trace it came from.
    bool known = true;
    for (int64_t g : globals) {
      auto it = info_.find(fmt::format("thread.{}", g));
      if (g == kUnknownThread) continue;
      if (it == info_.end() || it->second.empty() || it->second.size() > 5 ||
          it->second.find_first_not_of("0123456789") != std::string::npos) {
        known = false;
        break;
      }
      index.emplace(g, static_cast<uint32_t>(std::stoul(it->second)));
    }
    std::vector<uint32_t> taken;
    for (const auto& [g, t] : index) taken.push_back(t);
    std::sort(taken.begin(), taken.end());
    if (!known || std::adjacent_find(taken.begin(), taken.end()) != taken.end()) {
      index.clear();
      for (int64_t g : globals)
        if (g != kUnknownThread) index.emplace(g, static_cast<uint32_t>(index.size()));
    }
    uint32_t next_index = 0;
    for (const auto& [g, t] : index) next_index = std::max(next_index, t + 1);
    if (std::binary_search(globals.begin(), globals.end(), kUnknownThread)) index.emplace(kUnknownThread, next_index++);

    TraceWriterOptions wo;
    wo.pid = pid_;
    wo.rank = rank_;
    wo.local_rank = local_rank_;
    wo.realtime_ns = utc_epoch_ns_;
    wo.monotonic_ns = base_ns_;
    wo.command = command_;
    if (host_rows_) wo.flags |= format::kHeaderHostMode;
    if (next_index > TraceWriter::kMaxThreads)
      throw InputError(options_.input,
                       fmt::format("{} threads; a trace holds at most {}", index.size(), TraceWriter::kMaxThreads));
    // Written under a temporary name, renamed when complete.
    // Under a temporary name, renamed when complete; a device, pipe or link
    // is written in place (renaming over it would replace it).
    const bool rename_into_place = replaceable_by_rename(options_.output);
    const std::string partial = rename_into_place ? options_.output + ".partial" : options_.output;
    struct Cleanup {
      const std::string& path;
      bool keep = false;
      ~Cleanup() {
        if (!keep) std::remove(path.c_str());
      }
    } cleanup{partial, !rename_into_place};
    TraceWriter writer(partial, wo);
    for (const auto& [global, t] : index) {
      if (global == kUnknownThread) {
        writer.thread(t, 0, "(memory events with no recorded CUDA call)");
        continue;
      }
      auto name = thread_names_.find(global);
      writer.thread(t, nsys::tid_of(global),
                    name != thread_names_.end() ? name->second : fmt::format("thread {}", nsys::tid_of(global)));
    }
    std::vector<StringId> ids(strings_.size());
    for (size_t i = 0; i < strings_.size(); ++i) ids[i] = writer.intern(strings_[i]);
    auto id = [&](uint32_t s) { return s == kNoString ? StringId{} : ids[s]; };

    std::vector<std::vector<StringId>> stacks(next_index);
    uint64_t seq = 0;
    progress_stage("writing " + options_.output, order.size());
    ProgressBatch written;
    for (size_t i : order) {
      written.add();
      const Item& it = items_[i];
      Event e{};
      e.seq = ++seq;
      e.time_ns = it.time_ns;
      e.thread = index.at(it.thread);
      e.kind = it.kind;
      e.address = it.address;
      e.bytes = it.bytes;
      e.stream = it.stream;
      e.device = it.device;
      e.memory = it.memory;
      e.name = id(it.name);
      e.payload = id(it.payload);
      e.api = is_memory_event(it.kind) ? it.api : Api::kNvtx;
      if (is_memory_event(it.kind) && reserved_) e.flags = kFlagReserved;
      std::vector<StringId>& open = stacks[e.thread];
      if (!open.empty()) e.range = open.back();
      if (it.kind == EventKind::kRangePush) open.push_back(e.name);
      if (it.kind == EventKind::kRangePop && !open.empty()) open.pop_back();
      writer.event(e);
    }
    written.flush();
    writer.close();
    if (rename_into_place && std::rename(partial.c_str(), options_.output.c_str()) != 0)
      throw std::runtime_error(options_.output + ": cannot rename " + partial + " into place");
    cleanup.keep = true;

    ImportSummary summary;
    summary.events = writer.events_written();
    summary.lines = {
        fmt::format("process: pid {}", pid_),
        ranges_only_ ? std::string("memory events: none (the file has no GPU memory rows of this process: profile "
                                   "with --cuda-memory-usage=true for them); ranges and marks only")
                     : std::string(),
        fmt::format("memory events: {} allocations, {} frees ({} matched no allocation), {} still live at the end{}",
                    allocations_, frees_, unmatched_frees_, still_live_,
                    replaced_ ? fmt::format(", {} allocations over a live address", replaced_) : ""),
        fmt::format("NVTX: {} ranges ({} never ended), {} marks", ranges_, unended_ranges_, marks_),
        fmt::format("threads: {}{}", index.size(),
                    unknown_thread_events_
                        ? fmt::format(" ({} memory events had no recorded CUDA call: put on a thread of their own)",
                                      unknown_thread_events_)
                        : ""),
        exact_order_ ? "order: exact (PEAKSCOPE_EVENT_ORDER)" : "order: by time",
    };
    summary.lines.erase(std::remove(summary.lines.begin(), summary.lines.end(), std::string()), summary.lines.end());
    if (unknown_operations_)
      summary.lines.push_back(fmt::format("skipped: {} memory rows of unknown operation type", unknown_operations_));
    if (ranges_ending_before_start_)
      summary.lines.push_back(
          fmt::format("{} ranges ended before they started: ended at their start", ranges_ending_before_start_));
    return summary;
  }

  static constexpr int64_t kUnknownThread = -1;

  const ImportOptions& options_;
  sqlite::Db db_;
  uint32_t pid_ = 0;
  int32_t rank_ = -1;
  int32_t local_rank_ = -1;
  uint64_t utc_epoch_ns_ = 0;
  uint64_t base_ns_ = 0;
  bool reserved_ = false;
  bool exact_order_ = false;
  std::map<std::pair<int16_t, uint64_t>, uint64_t> live_;  // (device, address) -> bytes, for pairing
  bool has_memory_ = false;
  bool has_host_ = false;
  uint64_t host_rows_ = 0;
  bool ranges_only_ = false;
  std::string command_;
  std::map<std::string, std::string> info_;
  std::unordered_map<int64_t, std::string> string_ids_;
  std::unordered_map<int64_t, std::string> thread_names_;
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t> string_index_;
  std::vector<Item> items_;
  std::vector<std::pair<int64_t, uint32_t>> correlated_;  // correlationId, memory item
  std::vector<std::pair<size_t, size_t>> nvtx_rows_;      // open, close (SIZE_MAX: none) item indices
  uint64_t allocations_ = 0, frees_ = 0, unmatched_frees_ = 0, replaced_ = 0, still_live_ = 0;
  uint64_t unknown_operations_ = 0, ranges_ = 0, unended_ranges_ = 0, marks_ = 0, ranges_ending_before_start_ = 0;
  uint64_t unknown_thread_events_ = 0;
};

class NsysSqliteImporter : public Importer {
 public:
  std::string_view name() const override { return "nsys-sqlite"; }
  std::string_view description() const override {
    return "`nsys export --type sqlite` of a run with --cuda-memory-usage=true (memory events joined to NVTX ranges)";
  }
  ImportSummary read(const ImportOptions& options) const override { return NsysImport(options).run(); }
};

}  // namespace

const Importer& nsys_sqlite_importer() {
  static const NsysSqliteImporter importer;
  return importer;
}

}  // namespace psc
