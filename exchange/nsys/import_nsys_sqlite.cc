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
// The parser below reads the rows into an ImportSink, which orders and writes them.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "common/progress.h"
#include "exchange/export_formats.h"
#include "exchange/import_sink.h"
#include "exchange/nsys/nsys_import.h"
#include "exchange/nsys/nsys_nvtx.h"
#include "exchange/nsys/nsys_schema.h"

namespace psc {
namespace {

// Tie-breaks at equal times (see the top of the file).
enum Rank : int { kOpens = 0, kMarks = 1, kFrees = 2, kAllocs = 3, kCloses = 4 };
// ImportEvent::source: the table a memory event came from.
enum Source : uint8_t { kGpuRows = 0, kHostRows = 1 };

struct Counts {
  uint64_t allocations = 0, frees = 0, unmatched_frees = 0, replaced = 0, still_live = 0, host_rows = 0;
  uint64_t unknown_operations = 0, ranges = 0, unended_ranges = 0, marks = 0, ranges_ending_before_start = 0;
  uint64_t unknown_thread_events = 0;
};

class NsysParser {
 public:
  explicit NsysParser(const ImportOptions& options) : options_(options), db_(options.input, true), sink_(options) {}

  ImportSummary run() {
    // A file that is not SQLite fails on the first statement. A run profiled
    // without --cuda-memory-usage has no memory table, but its NVTX ranges
    // and wave marks are what calibration reads: it imports as ranges only.
    const bool has_memory = db_.has_table("CUDA_GPU_MEMORY_USAGE_EVENTS");
    const bool has_host = db_.has_table("PEAKSCOPE_HOST_MEMORY_EVENTS");
    check_tables(has_memory);
    process_ = nsys::read_process(db_, options_, has_memory, has_host);
    if (has_memory) read_memory();
    if (has_host) read_host_memory();
    read_runtime();
    read_nvtx();
    read_order();
    sink_.sort();
    const size_t threads = nsys::declare_threads(process_, options_, sink_);
    const uint64_t events =
        sink_.commit(nsys::trace_header(process_, counts_.host_rows != 0), ImportSink::Strings::kUpFront);
    return summary(events, threads);
  }

 private:
  void check_tables(bool has_memory) {
    if (!has_memory && !db_.has_table("NVTX_EVENTS"))
      throw InputError(options_.input,
                       "neither CUDA_GPU_MEMORY_USAGE_EVENTS nor NVTX_EVENTS: not an `nsys export --type sqlite` of a "
                       "run traced with nvtx or --cuda-memory-usage=true");
    if (has_memory)
      for (const char* column :
           {"start", "globalPid", "deviceId", "address", "bytes", "memKind", "memoryOperationType"})
        if (!db_.has_column("CUDA_GPU_MEMORY_USAGE_EVENTS", column))
          throw InputError(options_.input, std::string("CUDA_GPU_MEMORY_USAGE_EVENTS has no column ") + column);
    if (db_.has_table("NVTX_EVENTS") && !db_.has_column("NVTX_EVENTS", "globalTid"))
      throw InputError(options_.input, "NVTX_EVENTS has no column globalTid");
  }

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

  uint64_t time(int64_t start) const { return process_.base_ns + static_cast<uint64_t>(start); }

  // Calls read(event) for each row of a memory table `s` selects for the
  // process, the event holding what the row starts with (memory_row).
  template <typename Read>
  void each_memory_row(sqlite::Statement& s, const char* table, Read&& read) {
    s.bind(1, int64_t{process_.pid});
    progress_stage("reading " + options_.input + ": " + table, 0);
    ProgressBatch rows;
    while (s.next()) {
      rows.add();
      ImportEvent e = memory_row(s);
      read(e);
    }
    counts_.still_live = live_.size();
  }

  // What a memory row of either table starts with (rowid, start) and has in
  // columns 3 and 4 (address, bytes).
  ImportEvent memory_row(const sqlite::Statement& s) {
    ImportEvent e;
    e.row = e.key.row = static_cast<uint64_t>(s.integer(0));
    e.event.time_ns = e.key.primary = time(checked(s, 1, "start", 0, INT64_MAX / 2, e.row));
    if (process_.reserved) e.event.flags = kFlagReserved;
    return e;
  }
  void address_and_bytes(const sqlite::Statement& s, ImportEvent& e) {
    e.event.address = static_cast<uint64_t>(s.integer(3));
    e.event.bytes = static_cast<uint64_t>(checked(s, 4, "bytes", 0, INT64_MAX, e.row));
  }

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
    each_memory_row(s, "GPU memory rows", [&](ImportEvent& e) {
      e.event.device = static_cast<int16_t>(checked(s, 2, "deviceId", -1, INT16_MAX, e.row));
      address_and_bytes(s, e);
      e.event.stream = s.is_null(7) ? 0 : static_cast<uint64_t>(s.integer(7));
      e.event.memory = nsys::memory_kind_of(static_cast<int>(s.integer(5)), !s.is_null(9) && s.integer(9) != 0);
      if (!pair_row(e, s.integer(6))) return;
      if (sink_.events().size() >= UINT32_MAX) throw InputError(options_.input, "more than 4 billion memory rows");
      e.thread = nsys::kUnknownThread;  // until its API call says otherwise
      if (!s.is_null(8)) correlated_.emplace_back(s.integer(8), static_cast<uint32_t>(sink_.events().size()));
      sink_.add(e);
    });
  }

  // Host memory a peakscope export kept out of Nsight's CUDA tables: its
  // thread and call are in the row.
  void read_host_memory() {
    sqlite::Statement s(db_,
                        "SELECT rowid, start, globalTid, address, bytes, memoryOperationType, nameId FROM "
                        "PEAKSCOPE_HOST_MEMORY_EVENTS WHERE globalTid >> 24 & 16777215 = ? ORDER BY rowid");
    each_memory_row(s, "host memory rows", [&](ImportEvent& e) {
      e.source = kHostRows;
      e.thread = s.integer(2);
      e.event.device = -1;
      e.event.memory = MemoryKind::kHost;
      address_and_bytes(s, e);
      auto name = process_.string_ids.find(s.integer(6));
      e.event.api = name != process_.string_ids.end() ? nsys::api_of(name->second) : Api::kImported;
      if (!pair_row(e, s.integer(5))) return;
      sink_.add(e);
      ++counts_.host_rows;
    });
  }

  // A memory row's kind from its operation, paired by (device, address) with
  // what is live (host rows are device -1); false for an unknown operation.
  bool pair_row(ImportEvent& e, int64_t operation) {
    const std::pair<int16_t, uint64_t> key{e.event.device, e.event.address};
    if (operation == nsys::kOperAllocation) {
      e.event.kind = EventKind::kAlloc;
      e.key.rank = kAllocs;
      ++counts_.allocations;
      if (!live_.emplace(key, e.event.bytes).second) ++counts_.replaced;
      live_[key] = e.event.bytes;
    } else if (operation == nsys::kOperDeallocation) {
      e.event.kind = EventKind::kFree;
      e.key.rank = kFrees;
      ++counts_.frees;
      if (live_.erase(key) == 0) ++counts_.unmatched_frees;
    } else {
      ++counts_.unknown_operations;
      return false;
    }
    return true;
  }

  // Each memory row's thread and API, from the API call it came from.
  void read_runtime() {
    const bool usable = db_.has_table("CUPTI_ACTIVITY_KIND_RUNTIME") &&
                        db_.has_column("CUPTI_ACTIVITY_KIND_RUNTIME", "correlationId") &&
                        db_.has_column("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid");
    // (correlationId, event) sorted: 16 bytes a row, where a hash map of
    // vectors cost several times that on exports of millions of rows.
    std::sort(correlated_.begin(), correlated_.end());
    if (usable && !correlated_.empty()) read_calls();
    correlated_ = {};
    // Rows whose call was not traced keep the thread of their own.
    for (const ImportEvent& e : sink_.events()) counts_.unknown_thread_events += e.thread == nsys::kUnknownThread;
  }

  void read_calls() {
    const bool has_name = db_.has_column("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId");
    sqlite::Statement s(db_, fmt::format("SELECT correlationId, globalTid, {} FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE "
                                         "globalTid >> 24 & 16777215 = ? AND correlationId IS NOT NULL",
                                         has_name ? "nameId" : "NULL"));
    s.bind(1, int64_t{process_.pid});
    progress_stage("reading " + options_.input + ": CUDA API rows", 0);
    ProgressBatch rows;
    std::vector<ImportEvent>& events = sink_.events();
    while (s.next()) {
      rows.add();
      const int64_t correlation = s.integer(0);
      auto it = std::lower_bound(correlated_.begin(), correlated_.end(), std::make_pair(correlation, uint32_t{0}));
      if (it == correlated_.end() || it->first != correlation) continue;
      Api api = Api::kImported;
      if (!s.is_null(2)) {
        auto name = process_.string_ids.find(s.integer(2));
        if (name != process_.string_ids.end()) api = nsys::api_of(name->second);
      }
      for (; it != correlated_.end() && it->first == correlation; ++it) {
        events[it->second].thread = s.is_null(1) ? nsys::kUnknownThread : s.integer(1);
        if (!process_.reserved) events[it->second].event.api = api;
      }
    }
  }

  // Marks and ranges, named as the recorder names the same NVTX calls
  // (exchange/nsys/nsys_nvtx.h).
  void read_nvtx() {
    progress_stage("reading " + options_.input + ": NVTX rows", 0);
    ProgressBatch rows;
    nsys::read_nvtx_rows(db_, process_.pid, process_.string_ids, [&](const nsys::NvtxRow& r) {
      rows.add();
      add_nvtx(r);
    });
  }

  void add_nvtx(const nsys::NvtxRow& r) {
    const uint64_t start = time(checked_value(r.start, "NVTX start", r.row));
    const bool has_end = r.end.has_value();
    uint64_t end = has_end ? time(checked_value(*r.end, "NVTX end", r.row)) : 0;
    if (has_end && end < start) {
      ++counts_.ranges_ending_before_start;
      end = start;
    }
    ImportEvent open;
    open.row = open.key.row = r.row;
    open.event.time_ns = open.key.primary = start;
    open.thread = r.thread;
    open.name = sink_.intern(r.name);
    open.event.api = Api::kNvtx;
    if (r.type == nsys::kNvtxMark) {
      open.event.kind = EventKind::kMark;
      open.key.rank = kMarks;
      if (!r.payload.empty()) open.payload = sink_.intern(r.payload);
      nvtx_rows_.push_back({sink_.events().size(), SIZE_MAX});
      sink_.add(open);
      ++counts_.marks;
      return;
    }
    const bool push_pop = r.type == nsys::kNvtxPushPopRange || r.type == nsys::kNvtxtPushPopRange;
    open.event.kind = push_pop ? EventKind::kRangePush : EventKind::kRangeStart;
    open.key.rank = kOpens;
    open.key.nest = has_end ? -static_cast<int64_t>(end) : INT64_MIN;  // the longer range opens first
    const uint64_t id = r.range_id ? static_cast<uint64_t>(*r.range_id) : (1ull << 48) + r.row;
    if (!push_pop) {
      open.event.address = id;
      if (!r.payload.empty()) open.payload = sink_.intern(r.payload);
    }
    const size_t open_index = sink_.events().size();
    sink_.add(open);
    size_t close_index = SIZE_MAX;
    if (has_end) {
      ImportEvent close = open;
      close.event.time_ns = close.key.primary = end;
      close.event.kind = push_pop ? EventKind::kRangePop : EventKind::kRangeEnd;
      close.key.rank = kCloses;
      close.key.nest = -static_cast<int64_t>(start);  // the shorter range closes first
      close.thread = push_pop || !r.end_thread ? r.thread : *r.end_thread;
      close.event.address = push_pop ? 0 : id;
      close.payload = ImportEvent::kNoString;
      close_index = sink_.events().size();
      sink_.add(close);
    } else {
      ++counts_.unended_ranges;
    }
    nvtx_rows_.push_back({open_index, close_index});
    ++counts_.ranges;
  }

  // The exact order a peakscope export recorded; used only when it covers
  // every row, else the time order stands.
  void read_order() {
    if (!db_.has_table("PEAKSCOPE_EVENT_ORDER")) return;
    using Orders = std::unordered_map<uint64_t, std::pair<int64_t, std::optional<int64_t>>>;
    Orders memory, nvtx, host;
    sqlite::Statement s(db_, "SELECT tableName, rowId, startOrder, endOrder FROM PEAKSCOPE_EVENT_ORDER");
    while (s.next()) {
      const std::string table_name = s.text(0);
      Orders& table = table_name == "NVTX_EVENTS" ? nvtx : table_name == "PEAKSCOPE_HOST_MEMORY_EVENTS" ? host : memory;
      table[static_cast<uint64_t>(s.integer(1))] = {s.integer(2),
                                                    s.is_null(3) ? std::nullopt : std::optional<int64_t>(s.integer(3))};
    }
    std::vector<ImportEvent>& events = sink_.events();
    std::vector<uint64_t> orders(events.size(), 0);
    for (size_t i = 0; i < events.size(); ++i) {
      const ImportEvent& e = events[i];
      if (e.event.kind != EventKind::kAlloc && e.event.kind != EventKind::kFree) continue;
      const Orders& table = e.source == kHostRows ? host : memory;
      auto o = table.find(e.row);
      if (o == table.end() || o->second.first < 0) return;
      orders[i] = static_cast<uint64_t>(o->second.first);
    }
    for (const auto& [open, close] : nvtx_rows_) {
      auto o = nvtx.find(events[open].row);
      if (o == nvtx.end() || o->second.first < 0) return;
      orders[open] = static_cast<uint64_t>(o->second.first);
      if (close != SIZE_MAX) {
        if (!o->second.second || *o->second.second < 0) return;
        orders[close] = static_cast<uint64_t>(*o->second.second);
      }
    }
    for (size_t i = 0; i < events.size(); ++i) events[i].key = {orders[i], 0, 0, 0};
    exact_order_ = true;
  }

  ImportSummary summary(uint64_t events, size_t threads) const {
    const Counts& c = counts_;
    ImportSummary summary;
    summary.events = events;
    summary.lines = {
        fmt::format("process: pid {}", process_.pid),
        process_.ranges_only
            ? std::string("memory events: none (the file has no GPU memory rows of this process: profile "
                          "with --cuda-memory-usage=true for them); ranges and marks only")
            : std::string(),
        fmt::format("memory events: {} allocations, {} frees ({} matched no allocation), {} still live at the end{}",
                    c.allocations, c.frees, c.unmatched_frees, c.still_live,
                    c.replaced ? fmt::format(", {} allocations over a live address", c.replaced) : ""),
        fmt::format("NVTX: {} ranges ({} never ended), {} marks", c.ranges, c.unended_ranges, c.marks),
        fmt::format("threads: {}{}", threads,
                    c.unknown_thread_events
                        ? fmt::format(" ({} memory events had no recorded CUDA call: put on a thread of their own)",
                                      c.unknown_thread_events)
                        : ""),
        exact_order_ ? "order: exact (PEAKSCOPE_EVENT_ORDER)" : "order: by time",
    };
    summary.lines.erase(std::remove(summary.lines.begin(), summary.lines.end(), std::string()), summary.lines.end());
    if (c.unknown_operations)
      summary.lines.push_back(fmt::format("skipped: {} memory rows of unknown operation type", c.unknown_operations));
    if (c.ranges_ending_before_start)
      summary.lines.push_back(
          fmt::format("{} ranges ended before they started: ended at their start", c.ranges_ending_before_start));
    return summary;
  }

  const ImportOptions& options_;
  sqlite::Db db_;
  ImportSink sink_;
  nsys::ImportedProcess process_;
  Counts counts_;
  bool exact_order_ = false;
  std::map<std::pair<int16_t, uint64_t>, uint64_t> live_;  // (device, address) -> bytes, for pairing
  std::vector<std::pair<int64_t, uint32_t>> correlated_;   // correlationId, memory event
  std::vector<std::pair<size_t, size_t>> nvtx_rows_;       // open, close (SIZE_MAX: none) event indices
};

class NsysSqliteImporter : public Importer {
 public:
  std::string_view name() const override { return "nsys-sqlite"; }
  std::string_view description() const override {
    return "`nsys export --type sqlite` of a run with --cuda-memory-usage=true (memory events joined to NVTX ranges)";
  }
  ImportSummary read(const ImportOptions& options) const override { return NsysParser(options).run(); }
};

}  // namespace

const Importer& nsys_sqlite_importer() {
  static const NsysSqliteImporter importer;
  return importer;
}

}  // namespace psc
