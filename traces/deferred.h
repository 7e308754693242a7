// Placement of deferred events: what CUPTI reported after the fact, put back
// where it happened.
//
// The recorder writes events in sequence order, which is true order for
// everything the hooks record. CUPTI activity records (Api::kCupti
// allocations and frees, `cupti.first_kernel` marks, pool counters) arrive
// later, flagged kFlagDeferred: their time_ns says when they happened, their
// seq only when the recorder learnt it. Every consumer that replays memory
// must therefore see them at their time, and must not count twice an
// allocation that a hook recorded too (CUPTI reports every allocation it sees,
// cudaMalloc included).
//
// build_placement() reads the trace once or twice (only the deferred events
// are kept in memory; the hooks' live allocations are replayed in a table that
// is O(live allocations)) and decides, for each CUPTI allocation:
//   - deduplicated: a hooked allocation (not nested, not failed, any level)
//     with the same device, address and bytes whose lifetime overlaps it,
//     within kMatchToleranceNs (the hook records after the real call returns,
//     CUPTI timestamps the call itself). The CUPTI alloc and its free are
//     withheld: the hook's events count;
//   - conflicting: it overlaps a hooked allocation at the same device and
//     address but with other bytes. Withheld too (the same memory seen at two
//     sizes, or a segment under a tensor): a replay keyed by address cannot
//     hold both;
//   - CUPTI-only: everything else (workspaces inside static runtimes: cuBLAS,
//     NCCL). Placed by time, its free with it, marked with the level the
//     analysis will read (kFlagReserved set or cleared) so every consumer
//     counts it with the allocator's bytes. Its Event::name is the source
//     library reported by CUPTI.
// A CUPTI free with no CUPTI alloc (memory made before CUPTI attached) is
// withheld. Deferred marks and counters are placed as they are.
//
// PlacedReader is the merge: it drops the file's deferred events and inserts
// the placed ones before the first non-deferred event with a later time_ns.
// A placed event takes the seq of the event it is placed before (the last
// event's at the end of the trace), so seq stays non-decreasing for consumers
// that step through the stream by seq (exporters' peak marks, liveness's
// live-at-peak test); the seq at which the recorder learnt of it is in the
// file. Its range stays 0: the analysis attributes it by time (see
// ScopeTracker::attributed_range). The TraceMeta handed on carries the whole
// string table from the start, because a placed event names strings that the
// file interned only when the recorder learnt of it.
//
// A trace without deferred events is read exactly as before: read_placed()
// with no placement is read_trace().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/event.h"
#include "traces/reader.h"

namespace psc {

inline bool is_deferred(const Event& e) { return (e.flags & kFlagDeferred) != 0; }
inline bool is_cupti_memory(const Event& e) { return e.api == Api::kCupti && is_memory_event(e.kind); }

// Hook and CUPTI timestamps of one call differ by the call's duration and by
// the two clocks' alignment; within this they still count as overlapping.
constexpr uint64_t kMatchToleranceNs = 100'000;

struct PlacementCounts {
  uint64_t deferred_events = 0;   // in the file
  uint64_t cupti_allocs = 0;      // CUPTI allocation records
  uint64_t cupti_frees = 0;       // CUPTI free records
  uint64_t deduplicated = 0;      // CUPTI allocations a hook also recorded
  uint64_t conflicting = 0;       // overlapping a hooked allocation of another size
  uint64_t cupti_only = 0;        // CUPTI allocations placed into the stream
  uint64_t cupti_only_bytes = 0;  // their bytes
  uint64_t unpaired_frees = 0;    // CUPTI frees of memory CUPTI never saw allocated
  uint64_t withheld = 0;          // deferred events of the file left out of the stream
  uint64_t other_deferred = 0;    // marks, counters: placed as they are
};

struct DeferredPlacement {
  std::vector<Event> events;         // to insert, by (time_ns, seq)
  std::vector<std::string> strings;  // the file's whole string table
  bool reserved_level = false;       // the level CUPTI-only events were marked with
  PlacementCounts counts;

  bool empty() const { return counts.deferred_events == 0; }
};

// Forwards every event to `inner` and keeps a copy of the deferred ones, so a
// first pass that needs no placement (a trace without CUPTI) costs nothing
// more. After read_trace: found() says whether build_placement is needed.
class DeferredCollector : public TraceVisitor {
 public:
  explicit DeferredCollector(TraceVisitor* inner = nullptr) : inner_(inner) {}
  void on_begin(const TraceMeta& meta) override;
  void on_events(const Event* events, size_t count, const TraceMeta& meta) override;
  void on_end(const TraceMeta& meta, const ReadStatus& status) override;

  bool found() const { return !deferred_.empty(); }
  // Whether a `device_used_bytes` counter (a device sample) was read.
  bool device_samples() const { return device_samples_; }
  std::vector<Event>& deferred() { return deferred_; }
  const std::vector<std::string>& strings() const { return strings_; }
  uint64_t events() const { return events_; }

 private:
  TraceVisitor* inner_;
  std::vector<Event> deferred_;
  std::vector<std::string> strings_;
  uint64_t events_ = 0;  // events read (deferred or not)
  bool device_samples_ = false;
};

// One more pass over the file: replays the hooks' allocations and decides
// each CUPTI allocation (see the top of this file). `deferred` and `strings`
// come from a DeferredCollector's pass over the same file; the collector's
// `events` bounds this pass to the same prefix of a file still being written.
std::shared_ptr<const DeferredPlacement> build_placement(const std::string& path, std::vector<Event> deferred,
                                                         std::vector<std::string> strings, uint64_t event_limit);
// Both passes; nullptr when the trace has no deferred events.
std::shared_ptr<const DeferredPlacement> build_placement(const std::string& path);

class PlacedReader : public TraceVisitor {
 public:
  PlacedReader(const DeferredPlacement& placement, TraceVisitor& inner) : placement_(placement), inner_(inner) {}
  void on_begin(const TraceMeta& meta) override;
  void on_events(const Event* events, size_t count, const TraceMeta& meta) override;
  void on_end(const TraceMeta& meta, const ReadStatus& status) override;
  bool finished() const override { return inner_.finished(); }

 private:
  void sync_meta(const TraceMeta& meta);

  const DeferredPlacement& placement_;
  TraceVisitor& inner_;
  TraceMeta meta_;
  size_t next_ = 0;
  uint64_t last_seq_ = 0;  // of the last non-deferred event handed on
  std::vector<Event> batch_;
};

// read_trace with deferred events placed; plain read_trace when `placement` is
// null or empty.
ReadStatus read_placed(const std::string& path, const DeferredPlacement* placement, TraceVisitor& visitor);
// Builds the placement itself (one more pass when the trace has deferred events).
ReadStatus read_trace_placed(const std::string& path, TraceVisitor& visitor);

}  // namespace psc
