// What the exporters share beyond the reader: the analysis of the trace (peaks,
// waves, what is live at each peak) and every allocation's liveness category.
//
// A category is decided when an allocation dies (analysis/categories.h), but
// a streaming exporter has to draw the allocation when it is born. So:
//   1. the analysis (analysis/analysis.h, two reads), whose second read also
//      runs the model's observer (CategoryPass): it classifies every lifetime
//      as it ends and writes one byte per allocation, in birth order, to an
//      unlinked temporary file (CategoryLog), and samples live bytes by
//      category;
//   2. the exporter's own read, with an ExportReplay that reads the log back
//      in step with the allocations it sees.
// Memory stays O(live allocations + waves): the log lives on disk, written
// through a window that long-lived allocations bypass with a one-byte pwrite.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/categories.h"
#include "analysis/memory_replay.h"
#include "analysis/range_names.h"
#include "analysis/scope_tracker.h"
#include "common/bytes.h"
#include "common/flat_map.h"
#include "common/progress.h"
#include "exchange/exporter.h"
#include "traces/deferred.h"
#include "traces/device_address.h"
#include "traces/reader.h"
#include "traces/run.h"

namespace psc {

using CategoryBytes = std::array<uint64_t, kCategoryCount>;

// One byte per allocation, indexed by birth order. Not copyable; the file is
// unlinked at creation, so it disappears with the process whatever happens.
class CategoryLog {
 public:
  CategoryLog();
  ~CategoryLog();
  CategoryLog(const CategoryLog&) = delete;
  CategoryLog& operator=(const CategoryLog&) = delete;

  void set(uint64_t index, Category category);
  // Flushes everything; `count` allocations were logged.
  void finish(uint64_t count);
  uint64_t count() const { return count_; }

  // Sequential reader over the finished log.
  class Reader {
   public:
    explicit Reader(const CategoryLog& log);
    // The category of the next allocation; output (what no rule names) past
    // the end of the log.
    Category next();

   private:
    const CategoryLog* log_;
    std::vector<uint8_t> buffer_;
    size_t pos_ = 0;
    size_t size_ = 0;
    uint64_t offset_ = 0;
  };

 private:
  static constexpr size_t kWindow = 1u << 20;
  void write_at(uint64_t offset, const uint8_t* data, size_t n);
  void slide_to(uint64_t new_base);

  int fd_ = -1;
  std::vector<uint8_t> window_;
  uint64_t base_ = 0;  // index of window_[0]
  uint64_t count_ = 0;
};

// Live bytes by category at one instant.
struct CategorySample {
  uint64_t time_ns = 0;
  uint64_t seq = 0;  // the last event at or before the instant (0: before the first)
  CategoryBytes bytes{};
  uint64_t total() const {
    uint64_t t = 0;
    for (uint64_t b : bytes) t += b;
    return t;
  }
};

struct ExportModel {
  std::string trace;
  Analysis analysis;
  MemoryLevel level = MemoryLevel::kAllocated;
  std::vector<WaveSpan> waves;              // analysis.waves' spans, for the classifier's look-ahead
  std::unique_ptr<CategoryLog> categories;  // null when not asked for
  // Samples of live bytes by category: `sample_points` instants evenly spaced
  // over the trace, plus one exactly at the peak and at each wave's peak
  // (live there means what the analysis counts: allocated at or before the
  // event, not yet freed). Sorted by seq.
  std::vector<CategorySample> samples;
};

struct ExportModelOptions {
  bool categories = true;    // false: no category log (ExportReplay then calls everything output)
  size_t sample_points = 0;  // 0: no samples (only exporters that draw charts need them)
  size_t timeline_points = 100;
};

// Analyses the trace (both reads) with the model's observers. Throws
// TraceError when the file is not a trace.
ExportModel build_export_model(const std::string& trace, const ExportModelOptions& options = {});

// The same in steps, for a caller whose own analysis of the trace (liveness,
// for the HTML report's accuracy table) should collect the model in the same
// read: add_to() the analysis' options, analyse, then finish() with it.
class ExportModelCollector {
 public:
  explicit ExportModelCollector(const ExportModelOptions& options);
  ~ExportModelCollector();
  void add_to(AnalysisOptions* analysis_options);
  ExportModel finish(const std::string& trace, Analysis analysis);

 private:
  struct Pass;
  ExportModelOptions options_;
  std::unique_ptr<CategoryLog> categories_;
  std::unique_ptr<Pass> pass_;
};

// The exporter's own read: follows ranges and waves like the analysis, replays the
// analysed level with the analysis' rules (lifetimes.h), and tells a listener
// about each allocation born and each one that ended, with its category and a
// lane: the lowest lane index of its device free at its birth, so allocations
// on one lane never overlap in time.
class ExportReplay {
 public:
  struct Allocation {
    uint64_t index = 0;  // birth order
    uint64_t address = 0;
    uint64_t bytes = 0;
    uint64_t time_ns = 0;
    uint64_t seq = 0;
    uint64_t stream = 0;
    uint32_t thread = 0;
    uint32_t lane = 0;
    int16_t device = 0;
    Category category = Category::kOutput;
    MemoryKind memory = MemoryKind::kNone;
    Api api = Api::kNone;
    StringId range;  // the range it is attributed to
  };
  enum class EndKind { kFreed, kReplaced };

  class Listener {
   public:
    virtual ~Listener() = default;
    virtual void on_alloc(const Allocation& a, const Event& e) = 0;
    virtual void on_end(const Allocation& a, const Event& at, EndKind how) = 0;
    // An allocation or free of the level not analysed (the writers that
    // draw both levels' totals follow it on a replay of their own).
    virtual void on_other_level(const Event&) {}
  };

  ExportReplay(const ExportModel& model, Listener* listener);

  // Feed every event in trace order.
  void on_event(const Event& e, const TraceMeta& meta);

  // Live bytes of the analysed level on a device, by category.
  const CategoryBytes& live(int16_t device) const;
  uint64_t live_total(int16_t device) const;
  const std::vector<int16_t>& devices() const { return devices_; }  // in order of first use
  StringId attributed_range(const Event& e) const { return scope_.attributed_range(e); }
  // Still-live allocations, in no particular order.
  template <typename F>
  void for_each_live(F&& f) const {
    live_.for_each([&](const Key&, const Allocation& a) { f(a); });
  }
  uint64_t live_count() const { return live_.size(); }

 private:
  using Key = DeviceAddress;
  using KeyHash = DeviceAddressMix;
  struct Lanes {
    std::vector<uint32_t> free;  // min-heap of released lanes
    uint32_t next = 0;
  };

  CategoryBytes& live_slot(int16_t device);
  uint32_t take_lane(int16_t device);
  void release_lane(int16_t device, uint32_t lane);
  void end(const Key& key, const Event& at, EndKind how);

  const ExportModel* model_;
  Listener* listener_;
  RangeTable ranges_;
  ScopeTracker scope_;
  std::unique_ptr<CategoryLog::Reader> categories_;
  FlatMap<Key, Allocation, KeyHash> live_;
  std::vector<CategoryBytes> live_bytes_;  // indexed by device + 1
  std::vector<Lanes> lanes_;               // indexed by device + 1
  std::vector<int16_t> devices_;
  uint64_t ordinal_ = 0;
  uint64_t births_ = 0;
};

// A visitor that stops where the analysis stopped (a trace still being written
// may have grown since), so every pass describes the same events.
class BoundedVisitor : public TraceVisitor {
 public:
  explicit BoundedVisitor(uint64_t limit) : limit_(limit) {}
  void on_events(const Event* events, size_t count, const TraceMeta& meta) final {
    for (size_t i = 0; i < count && seen_ < limit_; ++i, ++seen_) on_event(events[i], meta);
    progress_advance(count);
  }

 protected:
  virtual void on_event(const Event& e, const TraceMeta& meta) = 0;

 private:
  uint64_t limit_;
  uint64_t seen_ = 0;
};

// Where one trace goes in the export of a run (Exporter::write_run): its
// process and its place on the run's clock. The default is a single trace's
// export: its own pid, command line and clock.
struct ProcessPlacement {
  bool in_run = false;
  size_t index = 0;  // the member's index in the run: sequence ids, track uuids
  // Added to the trace's CLOCK_MONOTONIC times: nanoseconds from the run's
  // origin (RunClock), by the header's realtime/monotonic pair.
  int64_t time_offset_ns = 0;
  uint64_t origin_realtime_ns = 0;  // CLOCK_REALTIME of the run's origin
  // The pid to write: the trace's own, or, when an earlier member on another
  // host has the same pid, one made up above any real one.
  uint32_t pid = 0;
  uint32_t host_index = 0;  // which of the run's hosts (Run::hosts)
  std::string name;         // "rank 3 (host, pid 1234)"
  // The trace's CLOCK_MONOTONIC time on the run's clock, in nanoseconds
  // from the origin (0 for a time before it).
  uint64_t placed(uint64_t time_ns) const {
    const int64_t t = static_cast<int64_t>(time_ns) + time_offset_ns;
    return t > 0 ? static_cast<uint64_t>(t) : 0;
  }
};

// One placement per member of the run, in the run's order.
std::vector<ProcessPlacement> place_run(const Run& run);

// Warns that a truncated or corrupt trace was exported up to its damage (the
// same events `report` reads; a killed process leaves such a file).
void warn_if_incomplete(const ExportModel& model, const std::function<void(const std::string&)>& warn);

// One trace of an export and where it goes in the file.
struct ExportMember {
  std::string trace;
  ProcessPlacement place;
};
// The one trace of a single trace's export (its own pid and clock).
std::vector<ExportMember> export_members(const std::string& trace);
// Every member of a run, in the run's order, placed on the run's clock.
std::vector<ExportMember> export_members(const Run& run);

// An exporter whose file holds one trace or every member of a run (a process
// each): both come to write_members().
class MembersExporter : public Exporter {
 public:
  MembersExporter(std::string_view name, std::string_view description) : name_(name), description_(description) {}
  std::string_view name() const final { return name_; }
  std::string_view description() const final { return description_; }
  void write(const ExportOptions& options) const final {
    write_members(export_members(options.trace), nullptr, options);
  }
  bool writes_runs() const final { return true; }
  void write_run(const Run& run, const ExportOptions& options) const final {
    write_members(export_members(run), &run, options);
  }

 protected:
  // run: null for a single trace's export.
  virtual void write_members(const std::vector<ExportMember>& members, const Run* run,
                             const ExportOptions& options) const = 0;

 private:
  std::string_view name_, description_;  // string literals
};

// What every exporter does with each trace it writes: builds the model
// (warning when the trace is damaged), then reads the trace once more, with
// the model's placement, through the writer make(model, place) returns (a
// pointer-like owner of a TraceVisitor), and hands that writer to after()
// once the read is done.
template <typename Make, typename After>
void replay_members(const std::vector<ExportMember>& members, const ExportModelOptions& model_options,
                    const std::function<void(const std::string&)>& warn, Make&& make, After&& after) {
  for (const ExportMember& m : members) {
    const ExportModel model = build_export_model(m.trace, model_options);
    warn_if_incomplete(model, warn);
    auto writer = make(model, m.place);
    read_placed(m.trace, model.analysis.placement.get(), *writer);
    after(*writer);
  }
}
template <typename Make>
void replay_members(const std::vector<ExportMember>& members, const ExportModelOptions& model_options,
                    const std::function<void(const std::string&)>& warn, Make&& make) {
  replay_members(members, model_options, warn, std::forward<Make>(make), [](auto&) {});
}

}  // namespace psc
