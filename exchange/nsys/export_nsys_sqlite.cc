// `export --format nsys-sqlite`: a SQLite file in the schema of
// `nsys export --type sqlite` (exchange/nsys/nsys_schema.h), so queries and
// scripts written for Nsight exports run on a peakscope trace:
//   - CUDA_GPU_MEMORY_USAGE_EVENTS: one allocation row and one deallocation
//     row per allocation of the analysed level (nested and failed calls, and
//     frees that matched nothing, are not memory events and are left out; an
//     allocation replaced at a live address gets its deallocation row at the
//     replacement), each linked by correlationId to
//   - CUPTI_ACTIVITY_KIND_RUNTIME: the API call that made it, on its thread;
//   - NVTX_EVENTS: push/pop ranges (59), start/end ranges (60), marks (34,
//     payload in jsonText);
//   - StringIds, ThreadNames, PROCESSES, TARGET_INFO_SESSION_START_TIME,
//     META_DATA_EXPORT, and the ENUM tables with Nsight's values;
//   - PEAKSCOPE_INFO and PEAKSCOPE_EVENT_ORDER: what `import --from
//     nsys-sqlite` needs to give back the same trace (the clock base, the
//     level, the order of events with equal timestamps).
// Timestamps are nanoseconds from the start of recording, as Nsight's are from
// the start of its session; utcEpochNs is CLOCK_REALTIME at that start.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "exchange/export_formats.h"
#include "exchange/export_model.h"
#include "exchange/export_output.h"
#include "exchange/nsys/nsys_schema.h"
#include "exchange/nsys/sqlite_db.h"

namespace psc {
namespace {

std::string utc_text(uint64_t epoch_ns) {
  const std::time_t seconds = static_cast<std::time_t>(epoch_ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:09}Z", buf, epoch_ns % 1'000'000'000);
}

// Times count from the session start, as in Nsight's exports, where
// startTime is the analysis' start on the report's own timeline.
void analysis_details(sqlite::Db& db, int64_t end) {
  sqlite::Statement s(db, "INSERT INTO ANALYSIS_DETAILS VALUES (?,?,0,?)");
  s.bind(1, nsys::global_vid());
  s.bind(2, end);
  s.bind(3, end);
  s.run();
}

// What the writers of one file share: StringIds and correlation ids are the
// file's, whichever process a row is of.
struct NsysFile {
  std::unordered_map<std::string, int64_t> strings;
  int64_t correlation = 0;
};

class NsysWriter : public BoundedVisitor, private ExportReplay::Listener {
 public:
  NsysWriter(const ExportModel& model, sqlite::Db& db, NsysFile& file, const ProcessPlacement& place = {})
      : BoundedVisitor(model.analysis.trace.status.events),
        model_(model),
        db_(db),
        file_(file),
        place_(place),
        replay_(model, this),
        memory_(db,
                "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, globalPid, deviceId, contextId, address, pc, "
                "bytes, memKind, memoryOperationType, correlationId, streamId) VALUES (?,?,?,?,?,0,?,?,?,?,?)"),
        runtime_(db,
                 "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, "
                 "nameId, returnValue) VALUES (?,?,?,?,?,?,0)"),
        nvtx_(db,
              "INSERT INTO NVTX_EVENTS (start, end, eventType, rangeId, text, globalTid, endGlobalTid, domainId, "
              "jsonText) VALUES (?,?,?,?,?,?,?,0,?)"),
        host_(
            db,
            "INSERT INTO PEAKSCOPE_HOST_MEMORY_EVENTS (start, globalTid, address, bytes, memoryOperationType, nameId) "
            "VALUES (?,?,?,?,?,?)"),
        order_(db, "INSERT INTO PEAKSCOPE_EVENT_ORDER (tableName, rowId, startOrder, endOrder) VALUES (?,?,?,?)"),
        string_(db, "INSERT INTO StringIds (id, value) VALUES (?,?)") {
    const format::FileHeader& h = model.analysis.trace.header;
    const uint64_t first = model.analysis.trace.status.events ? model.analysis.trace.first_time_ns : h.monotonic_ns;
    session_start_ = std::min(h.monotonic_ns, first);
    utc_epoch_ns_ = h.realtime_ns - (h.monotonic_ns - session_start_);
    pid_ = h.pid;
    if (place.in_run) {
      // The run's session starts at its origin; a member's times count from
      // there (ProcessPlacement::placed), so its session start on its own
      // clock is the origin less its offset, which may lie before its zero:
      // kept modulo 2^64, as an import adds it back.
      session_start_ = static_cast<uint64_t>(-place.time_offset_ns);
      utc_epoch_ns_ = place.origin_realtime_ns;
      // Nsight's process ids have 24 bits: a made-up one above any real one
      // for a pid that is taken or does not fit.
      pid_ = place.pid <= 0xFFFFFF ? place.pid : 0xF00000u + static_cast<uint32_t>(place.index);
    }
  }

  int64_t end_time() const {
    return std::max(last_time_,
                    model_.analysis.trace.status.events ? at(model_.analysis.trace.last_time_ns) : int64_t{0});
  }

  void on_event(const Event& e, const TraceMeta& meta) override {
    meta_ = &meta;
    switch (e.kind) {
      case EventKind::kRangePush: stack(e.thread).push_back({e.time_ns, e.name, e.seq}); break;
      case EventKind::kRangePop: {
        auto& open = stack(e.thread);
        if (open.empty()) break;
        const Open o = open.back();
        open.pop_back();
        nvtx_row(nsys::kNvtxPushPopRange, o.time_ns, e.time_ns, std::nullopt, o.name, e.thread, std::nullopt, {},
                 o.seq * 2, e.seq * 2);
        break;
      }
      case EventKind::kMark:
        nvtx_row(nsys::kNvtxMark, e.time_ns, std::nullopt, std::nullopt, e.name, e.thread, std::nullopt, e.payload,
                 e.seq * 2, std::nullopt);
        break;
      case EventKind::kRangeStart:
        if (!starts_.count(e.address))
          starts_.emplace(e.address, StartOpen{{e.time_ns, e.name, e.seq}, e.thread, e.payload});
        break;
      case EventKind::kRangeEnd: {
        auto it = starts_.find(e.address);
        if (it == starts_.end()) break;
        const StartOpen o = it->second;
        starts_.erase(it);
        nvtx_row(nsys::kNvtxStartEndRange, o.open.time_ns, e.time_ns, static_cast<int64_t>(e.address), o.open.name,
                 o.thread, e.thread, o.payload, o.open.seq * 2, e.seq * 2);
        break;
      }
      default: break;
    }
    replay_.on_event(e, meta);
  }

  void on_end(const TraceMeta& meta, const ReadStatus&) override {
    meta_ = &meta;
    // Ranges still open when the trace ended: rows without an end, as Nsight
    // writes them for a range the process never closed.
    for (uint32_t t = 0; t < stacks_.size(); ++t)
      for (const Open& o : stacks_[t])
        nvtx_row(nsys::kNvtxPushPopRange, o.time_ns, std::nullopt, std::nullopt, o.name, t, std::nullopt, {}, o.seq * 2,
                 std::nullopt);
    for (const auto& [id, o] : starts_)
      nvtx_row(nsys::kNvtxStartEndRange, o.open.time_ns, std::nullopt, static_cast<int64_t>(id), o.open.name, o.thread,
               std::nullopt, o.payload, o.open.seq * 2, std::nullopt);
    metadata(meta);
  }

 private:
  struct Open {
    uint64_t time_ns;
    StringId name;
    uint64_t seq;
  };
  struct StartOpen {
    Open open;
    uint32_t thread;
    StringId payload;
  };

  std::vector<Open>& stack(uint32_t thread) {
    if (thread >= stacks_.size()) stacks_.resize(thread + 1);
    return stacks_[thread];
  }

  int64_t at(uint64_t time_ns) const {
    if (place_.in_run) return static_cast<int64_t>(place_.placed(time_ns));
    return time_ns >= session_start_ ? static_cast<int64_t>(time_ns - session_start_) : 0;
  }

  // The OS thread id where it fits Nsight's 24 bits and is unique, else one
  // made up above any real one.
  int64_t gtid(uint32_t thread) {
    if (thread >= tids_.size()) tids_.resize(thread + 1, UINT32_MAX);
    if (tids_[thread] == UINT32_MAX) {
      uint64_t os = thread < meta_->threads.size() ? meta_->threads[thread].os_tid : 0;
      uint32_t tid = static_cast<uint32_t>(os);
      if (os == 0 || os > 0xFFFFFF || std::find(tids_.begin(), tids_.end(), tid) != tids_.end())
        tid = 0xF00000u + (thread & 0xFFFFF);
      tids_[thread] = tid;
    }
    return nsys::global_tid(pid_, tids_[thread]);
  }

  int64_t string_id(std::string_view s) {
    auto it = file_.strings.find(std::string(s));
    if (it != file_.strings.end()) return it->second;
    const int64_t id = static_cast<int64_t>(file_.strings.size()) + 1;
    file_.strings.emplace(std::string(s), id);
    string_.bind(1, id);
    string_.bind(2, s);
    string_.run();
    return id;
  }

  void order(const char* table, std::optional<int64_t> end) {
    order_.bind(1, std::string_view(table));
    order_.bind(2, sqlite3_last_insert_rowid(db_.get()));
    order_.bind(3, pending_order_);
    order_.bind(4, end);
    order_.run();
  }

  void nvtx_row(int type, uint64_t start, std::optional<uint64_t> end, std::optional<int64_t> range_id, StringId name,
                uint32_t thread, std::optional<uint32_t> end_thread, StringId payload, uint64_t start_order,
                std::optional<uint64_t> end_order) {
    nvtx_.bind(1, at(start));
    nvtx_.bind(2, end ? std::optional<int64_t>(at(*end)) : std::nullopt);
    nvtx_.bind(3, int64_t{type});
    nvtx_.bind(4, range_id);
    nvtx_.bind(5, meta_->string(name));
    nvtx_.bind(6, gtid(thread));
    nvtx_.bind(7, end_thread ? std::optional<int64_t>(gtid(*end_thread)) : std::nullopt);
    if (payload.empty()) {
      nvtx_.bind_null(8);
    } else {
      nvtx_.bind(8, meta_->string(payload));
    }
    nvtx_.run();
    pending_order_ = static_cast<int64_t>(start_order);
    order("NVTX_EVENTS", end_order ? std::optional<int64_t>(static_cast<int64_t>(*end_order)) : std::nullopt);
  }

  int64_t stream_id(uint64_t stream) {
    auto it = streams_.find(stream);
    if (it != streams_.end()) return it->second;
    const int64_t id = static_cast<int64_t>(streams_.size()) + 1;  // CUDA's small stream ids start at 1 too
    streams_.emplace(stream, id);
    return id;
  }

  void memory_row(const ExportReplay::Allocation& a, const Event& at_event, int operation, Api api, uint64_t position) {
    const int64_t t = at(at_event.time_ns);
    last_time_ = std::max(last_time_, t);
    if (a.memory == MemoryKind::kHost) {
      // Not CUDA: Nsight's tables and `nsys stats` would list malloc as a
      // CUDA call and the block as GPU memory of device -1.
      host_.bind(1, t);
      host_.bind(2, gtid(at_event.thread));
      host_.bind(3, static_cast<int64_t>(a.address));
      host_.bind(4, static_cast<int64_t>(a.bytes));
      host_.bind(5, int64_t{operation});
      host_.bind(6, string_id(api_name(api)));
      host_.run();
      pending_order_ = static_cast<int64_t>(position);
      order("PEAKSCOPE_HOST_MEMORY_EVENTS", std::nullopt);
      return;
    }
    const int64_t correlation = ++file_.correlation;
    runtime_.bind(1, t);
    runtime_.bind(2, t);
    runtime_.bind(3, int64_t{nsys::is_driver_api(api) ? nsys::kClassCudaDriver : nsys::kClassCudaRuntime});
    runtime_.bind(4, gtid(at_event.thread));
    runtime_.bind(5, correlation);
    runtime_.bind(6, string_id(api_name(api)));
    runtime_.run();

    memory_.bind(1, t);
    memory_.bind(2, nsys::global_pid(pid_));
    memory_.bind(3, int64_t{a.device});
    memory_.bind(4, int64_t{a.device} + 1);
    memory_.bind(5, static_cast<int64_t>(a.address));
    memory_.bind(6, static_cast<int64_t>(a.bytes));
    memory_.bind(7, int64_t{nsys::mem_kind_of(a.memory)});
    memory_.bind(8, int64_t{operation});
    memory_.bind(9, correlation);
    memory_.bind(10, a.stream ? std::optional<int64_t>(stream_id(a.stream)) : std::nullopt);
    memory_.run();
    pending_order_ = static_cast<int64_t>(position);
    order("CUDA_GPU_MEMORY_USAGE_EVENTS", std::nullopt);
  }

  void on_alloc(const ExportReplay::Allocation& a, const Event& e) override {
    memory_row(a, e, nsys::kOperAllocation, e.api, e.seq * 2);
  }
  void on_end(const ExportReplay::Allocation& a, const Event& at_event, ExportReplay::EndKind how) override {
    // A replaced allocation ends just before the one that replaced it.
    const bool replaced = how == ExportReplay::EndKind::kReplaced;
    const Api api = replaced ? Api::kImported : at_event.api;
    memory_row(a, at_event, nsys::kOperDeallocation, api, at_event.seq * 2 - (replaced ? 1 : 0));
  }

  void metadata(const TraceMeta& meta) {
    const format::FileHeader& h = meta.header;
    const bool first_member = place_.index == 0;
    if (first_member) {
      sqlite::Statement s(db_, "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?,?,?)");
      s.bind(1, static_cast<int64_t>(utc_epoch_ns_));
      const std::string utc = utc_text(utc_epoch_ns_);
      s.bind(2, utc);
      s.bind(3, utc);  // the recorder does not know the target's time zone
      s.run();
    }
    {
      sqlite::Statement s(db_, "INSERT INTO PROCESSES VALUES (?,?,?)");
      s.bind(1, nsys::global_pid(pid_));
      s.bind(2, int64_t{pid_});
      s.bind(3, place_.in_run ? place_.name + ": " + meta.command : meta.command);
      s.run();
    }
    {
      sqlite::Statement s(db_, "INSERT INTO ThreadNames (nameId, priority, globalTid) VALUES (?,NULL,?)");
      for (uint32_t t = 0; t < meta.threads.size(); ++t) {
        if (meta.threads[t].name.empty() && meta.threads[t].os_tid == 0) continue;
        const std::string name = meta.threads[t].name.empty() ? fmt::format("thread {}", t) : meta.threads[t].name;
        s.bind(1, string_id(name));
        s.bind(2, gtid(t));
        s.run();
      }
    }
    // Both names of the export's metadata table: META_DATA_EXPORT (2024.6),
    // EXPORT_META_DATA (2022.4, where `nsys stats` looks).
    for (const char* table : {"META_DATA_EXPORT", "EXPORT_META_DATA"}) {
      if (!first_member) break;
      sqlite::Statement s(db_, fmt::format("INSERT INTO {} VALUES (?,?)", table));
      for (const auto& [k, v] : {std::pair<const char*, std::string>{"EXPORT_PRODUCT_NAME", "peakscope"},
                                 {"EXPORT_PRODUCT_VERSION", "peakscope"},
                                 {"EXPORT_SCHEMA_VERSION", "3.16.1"}}) {
        s.bind(1, std::string_view(k));
        s.bind(2, v);
        s.run();
      }
    }
    if (!place_.in_run) analysis_details(db_, end_time());  // a run's: once, after every member
    sqlite::Statement s(db_, "INSERT INTO PEAKSCOPE_INFO VALUES (?,?)");
    // A run's members each have their keys under "process.<pid>.", which an
    // import of that process reads as a single trace's.
    const std::string prefix = place_.in_run ? fmt::format("process.{}.", pid_) : std::string();
    const std::pair<const char*, std::string> info[] = {
        {"generator", "peakscope export --format nsys-sqlite"},
        {"trace", std::filesystem::path(model_.trace).filename().string()},
        {"level", memory_level_name(model_.level)},
        {"pid", std::to_string(h.pid)},
        {"rank", std::to_string(h.rank)},
        {"local_rank", std::to_string(h.local_rank)},
        {"monotonic_session_start_ns", std::to_string(session_start_)},
        {"realtime_ns", std::to_string(h.realtime_ns)},
        {"monotonic_ns", std::to_string(h.monotonic_ns)},
        {"command", meta.command},
    };
    for (const auto& [k, v] : info) {
      s.bind(1, prefix + k);
      s.bind(2, v);
      s.run();
    }
    if (place_.in_run) {
      s.bind(1, prefix + "process");
      s.bind(2, place_.name);
      s.run();
    }
    // Each thread's index in this trace, for an import to give it back.
    for (uint32_t t = 0; t < tids_.size(); ++t) {
      if (tids_[t] == UINT32_MAX) continue;
      s.bind(1, fmt::format("thread.{}", nsys::global_tid(pid_, tids_[t])));
      s.bind(2, std::to_string(t));
      s.run();
    }
  }

  const ExportModel& model_;
  sqlite::Db& db_;
  NsysFile& file_;
  ProcessPlacement place_;
  ExportReplay replay_;
  sqlite::Statement memory_, runtime_, nvtx_, host_, order_, string_;
  const TraceMeta* meta_ = nullptr;
  uint64_t session_start_ = 0;
  uint64_t utc_epoch_ns_ = 0;
  uint32_t pid_ = 0;
  int64_t pending_order_ = 0;
  int64_t last_time_ = 0;
  std::vector<std::vector<Open>> stacks_;
  std::unordered_map<uint64_t, StartOpen> starts_;
  std::vector<uint32_t> tids_;
  std::unordered_map<uint64_t, int64_t> streams_;
};

// A process per member of a run, in the run's order; times count from the
// run's origin (the earliest member's start on CLOCK_REALTIME), which is the
// session start TARGET_INFO_SESSION_START_TIME gives.
class NsysSqliteExporter : public MembersExporter {
 public:
  NsysSqliteExporter()
      : MembersExporter("nsys-sqlite",
                        "SQLite in the schema of `nsys export --type sqlite` (memory events, NVTX, threads; Nsight's "
                        "enum values)") {}

 private:
  void write_members(const std::vector<ExportMember>& members, const Run*,
                     const ExportOptions& options) const override {
    // A database cannot go to a device or a pipe: OutputFile would write it in place.
    if (!replaceable_by_rename(options.output))
      throw std::runtime_error(options.output + ": a SQLite database must be written to a regular file");
    // SQLite writes the file itself, at OutputFile's temporary path, which
    // OutputFile renames into place once the database is closed.
    OutputFile out(options.output, 0);
    {
      sqlite::Db db(out.temp_path(), false);
      db.exec("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; BEGIN;");
      db.exec(nsys::schema());
      NsysFile file;
      int64_t end = 0;
      ExportModelOptions model_options;
      model_options.categories = false;
      replay_members(
          members, model_options, options.warn,
          [&](const ExportModel& model, const ProcessPlacement& place) {
            if (!place.in_run && model.analysis.trace.header.pid > 0xFFFFFF)
              emit_warning(options.warn,
                           fmt::format("pid {} does not fit Nsight's 24-bit process id; written truncated",
                                       model.analysis.trace.header.pid));
            return std::make_unique<NsysWriter>(model, db, file, place);
          },
          [&](const NsysWriter& writer) { end = std::max(end, writer.end_time()); });
      if (members.size() > 1 || members.front().place.in_run) analysis_details(db, end);
      db.exec("COMMIT;");
    }
    out.commit();
  }
};

}  // namespace

const Exporter& nsys_sqlite_exporter() {
  static const NsysSqliteExporter exporter;
  return exporter;
}

}  // namespace psc
