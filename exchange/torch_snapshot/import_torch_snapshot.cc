// `import --from torch-snapshot`: a `torch.cuda.memory._dump_snapshot` pickle
// into a .pstrace. The pickle is read by exchange/torch_snapshot/pickle_reader.h (data only; no
// code named or run). What a snapshot holds (torch/cuda/memory.py, _snapshot):
//   {"segments": [...], "device_traces": [[entry, ...] per device],
//    "external_annotations": [{"device", "stage": "START"|"END", "name",
//    "time_us"}], "allocator_settings": {...}}
// with entries {"action", "addr", "size", "stream", "time_us", "frames",
// "user_metadata", "compile_context"}.
//
// Mapping (docs/viewers.md):
//   alloc / free_completed        -> alloc / free, allocated level
//   segment_alloc / segment_free  -> alloc / free, reserved level
//   segment_map / segment_unmap   -> map / unmap, and the mapped pieces as
//                                    reserved-level alloc / free (memory kind
//                                    vmm_physical, keyed by mapped address): an
//                                    expandable segment's reserved memory
//   free_requested, oom, snapshot, annotate and any other action
//                                 -> a mark "torch.<action>" whose payload
//                                    holds the entry's other scalar fields
//   external_annotations          -> process-wide ranges (start/end)
// The memory is live from alloc to free_completed: that is when the caching
// allocator can hand it out again (memory_viz draws it so too).
//
// What a trace has no field for is kept in marks an export writes back
// (kFieldsMark and the snapshot-level marks below): the extra scalar fields
// of memory entries (user_metadata, compile_context), the segments at
// snapshot time with their blocks (size and requested_size, state: the
// fragmentation), and allocator_settings.
//
// History that began after memory was already allocated (the ring buffer of
// _record_memory_history wrapped, or recording started late) frees blocks it
// never saw allocated, unmaps pages it never saw mapped, and the segments list
// holds blocks still allocated that the history never mentions. All are
// allocated (mapped) at the start of the trace (api "none", so an export can
// tell them from recorded ones), so live bytes are right from the first event.
// A block the history never saw counts at its requested_size, as the
// history's own entries and memory_viz's timeline do.
//
// Times: time_us (microseconds of CLOCK_REALTIME) become nanoseconds, and the
// header says CLOCK_REALTIME and the trace's clock agree at the first event.
// One thread: a snapshot does not say which thread did what.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/input_file.h"
#include "common/progress.h"
#include "exchange/export_formats.h"
#include "exchange/export_text.h"
#include "exchange/import_sink.h"
#include "exchange/torch_snapshot/pickle_reader.h"
#include "exchange/torch_snapshot/snapshot_shared.h"
#include "exchange/torch_snapshot/snapshot_values.h"

namespace psc {
namespace {

using pickle::Type;
using pickle::Value;

constexpr const char* kCommandPrefix = "peakscope import --from torch-snapshot";
// The pickle is read whole and parsed into a document several times its
// size: snapshots of real runs are megabytes to a few hundred.
constexpr size_t kMaxSnapshotBytes = size_t{1} << 30;
constexpr size_t kMaxDevices = 4096;

pickle::Document parse_snapshot(const ImportOptions& options) {
  std::string data;
  std::string error;
  if (!read_input_file(options.input, kMaxSnapshotBytes, "memory snapshot", &data, &error))
    throw InputError(options.input, error);
  try {
    return pickle::parse(data);
  } catch (const pickle::ParseError& e) {
    throw InputError(options.input, std::string("not a memory snapshot pickle: ") + e.what(), e.offset());
  }
}

// Reads the snapshot's history, annotations and segments into lists of
// events, then hands them to the sink in the trace's order.
class SnapshotParser {
 public:
  SnapshotParser(const ImportOptions& options, const pickle::Document& doc)
      : options_(options), values_(options.input, doc), sink_(options) {}

  ImportSummary run() {
    const Value& root = values_.at(values_.doc().root());
    if (root.type != Type::kDict)
      values_.fail("the snapshot is a " + std::string(pickle::type_name(root.type)) + ", not a dict");
    const Value* traces = values_.find(root, "device_traces");
    if (!traces)
      values_.fail(
          "no device_traces: the snapshot was taken without memory history "
          "(torch.cuda.memory._record_memory_history)");
    values_.expect(*traces, Type::kList, "device_traces");
    if (traces->items.size() > kMaxDevices) values_.fail(fmt::format("{} devices", traces->items.size()));
    for (size_t d = 0; d < traces->items.size(); ++d) read_device(d, values_.at(traces->items[d]));
    if (const Value* annotations = values_.find(root, "external_annotations")) read_annotations(*annotations);
    if (const Value* segments = values_.find(root, "segments")) read_segments(*segments);
    if (const Value* settings = values_.find(root, "allocator_settings")) read_settings(*settings);
    const uint64_t first = hand_over();
    TraceWriterOptions header;
    header.realtime_ns = first;  // time_us is CLOCK_REALTIME: the trace's clock is it
    header.monotonic_ns = first;
    header.command = std::string(kCommandPrefix) + " " + std::filesystem::path(options_.input).filename().string();
    sink_.thread(0, 0, 0, "torch memory snapshot");
    return summary(sink_.commit(header, ImportSink::Strings::kAsUsed));
  }

 private:
  // The device's state while its history is read, and after.
  struct DeviceState {
    std::set<uint64_t> live_blocks, live_segments;
    MappedRanges mapped;        // expandable segments' pieces
    std::string fields = "{}";  // the extra fields of the last memory entry
  };

  uint32_t string(const std::string& s) { return s.empty() ? ImportEvent::kNoString : sink_.intern(s); }

  // A snapshot's event on `device`: the one thread, every field but these unset.
  static ImportEvent event(EventKind kind, int16_t device) {
    ImportEvent e;
    e.event.kind = kind;
    e.event.device = device;
    e.thread = 0;
    return e;
  }
  ImportEvent mark(int16_t device, std::string_view name, const std::string& payload) {
    ImportEvent m = event(EventKind::kMark, device);
    m.name = string(std::string(name));
    m.payload = string(payload);
    return m;
  }

  uint64_t time_of(const Value& entry, const std::string& where) {
    const Value* v = values_.find(entry, "time_us");
    if (!v) {
      ++without_time_;
      return last_time_ns_;  // older snapshots: keep the order, no times
    }
    if (v->type != Type::kInt || v->integer < 0 || v->integer > INT64_MAX / 1000)
      values_.fail(fmt::format("{}.time_us is not a time in microseconds", where));
    last_time_ns_ = static_cast<uint64_t>(v->integer) * 1000;
    return last_time_ns_;
  }

  void grow_devices(size_t d) {
    if (d < devices_.size()) return;
    devices_.resize(d + 1);
    state_.resize(d + 1);
  }

  void read_device(size_t d, const Value& trace) {
    const std::string where = fmt::format("device_traces[{}]", d);
    values_.expect(trace, Type::kList, where);
    grow_devices(d);
    last_time_ns_ = 0;
    progress_stage("reading " + options_.input + ": " + where, trace.items.size());
    ProgressBatch entries;
    for (size_t i = 0; i < trace.items.size(); ++i) {
      entries.add();
      read_entry(d, values_.at(trace.items[i]), fmt::format("{}[{}]", where, i));
    }
  }

  void read_entry(size_t d, const Value& entry, const std::string& at) {
    values_.expect(entry, Type::kDict, at);
    const std::string action = values_.text(entry, "action", at);
    ImportEvent p = event(EventKind::kMark, static_cast<int16_t>(d));
    p.event.time_ns = time_of(entry, at);
    p.event.stream = static_cast<uint64_t>(values_.integer(entry, "stream", at, false));
    ++counts_[action];
    // "free": what snapshots before free_requested/free_completed wrote.
    const bool block = action == "alloc" || action == "free_completed" || action == "free";
    const bool segment = action == "segment_alloc" || action == "segment_free";
    const bool mapping = action == "segment_map" || action == "segment_unmap";
    if (!block && !segment && !mapping) {
      p.name = string("torch." + sanitize_utf8(action));
      p.payload = string(values_.other_fields(entry, {"action", "time_us", "frames"}));
      devices_[d].push_back(p);
      return;
    }
    p.event.address = values_.unsigned_integer(entry, "addr", at, true);
    p.event.bytes = values_.unsigned_integer(entry, "size", at, true);
    p.event.memory = MemoryKind::kDevice;
    fields(d, p, values_.other_fields(entry, {"action", "addr", "size", "stream", "time_us", "frames"}));
    if (mapping) {
      map_or_unmap(d, p, action == "segment_map");
      return;
    }
    p.event.flags = segment ? kFlagReserved : 0;
    std::set<uint64_t>& live = block ? state_[d].live_blocks : state_[d].live_segments;
    if (action == "alloc" || action == "segment_alloc") {
      p.event.kind = EventKind::kAlloc;
      live.insert(p.event.address);
    } else {
      p.event.kind = EventKind::kFree;
      if (!live.erase(p.event.address)) before_history(p);  // allocated before the history began
    }
    devices_[d].push_back(p);
  }

  // A kFieldsMark before the first memory entry whose extra fields differ
  // from the last one's.
  void fields(size_t d, const ImportEvent& entry, std::string fields) {
    if (fields == state_[d].fields) return;
    ImportEvent m = mark(entry.event.device, kFieldsMark, fields);
    m.event.time_ns = entry.event.time_ns;
    devices_[d].push_back(m);
    state_[d].fields = std::move(fields);
    ++field_changes_;
  }

  // segment_map: the map and the piece's reserved memory. segment_unmap: the
  // unmap, and the pieces it covers freed (the part of a cut piece that stays
  // mapped allocated again); what no piece held was mapped before the history
  // began.
  void map_or_unmap(size_t d, ImportEvent p, bool map) {
    std::vector<ImportEvent>& out = devices_[d];
    ImportEvent piece = p;
    piece.event.flags = kFlagReserved;
    piece.event.memory = MemoryKind::kVmmPhysical;
    auto piece_event = [&](EventKind kind, const MappedRanges::Piece& r) {
      ImportEvent e = piece;
      e.event.kind = kind;
      e.event.address = r.address;
      e.event.bytes = r.bytes;
      out.push_back(e);
    };
    auto freed = [&](const MappedRanges::Piece& r) { piece_event(EventKind::kFree, r); };
    auto kept = [&](const MappedRanges::Piece& r) { piece_event(EventKind::kAlloc, r); };
    p.event.kind = map ? EventKind::kMap : EventKind::kUnmap;
    p.event.flags = kFlagReserved;
    p.event.memory = MemoryKind::kVmmPhysical;
    MappedRanges& mapped = state_[d].mapped;
    if (map) {
      // A map over mapped pages (a damaged history) replaces them.
      mapped.remove(p.event.address, p.event.bytes, freed, kept, [](const MappedRanges::Piece&) {});
      piece_event(EventKind::kAlloc, {p.event.address, p.event.bytes});
      mapped.add(p.event.address, p.event.bytes);
      out.push_back(p);
      return;
    }
    out.push_back(p);
    mapped.remove(p.event.address, p.event.bytes, freed, kept, [&](const MappedRanges::Piece& r) {
      mapped_before_history(piece, r);
      piece_event(EventKind::kFree, r);
    });
  }

  // Memory the history frees without having allocated it: allocated at the start.
  void before_history(const ImportEvent& free) {
    ImportEvent a = free;
    a.event.kind = EventKind::kAlloc;
    a.event.api = Api::kNone;
    initial_.push_back(a);
  }
  // Pages mapped before the history began: their memory and their map.
  void mapped_before_history(const ImportEvent& piece, const MappedRanges::Piece& r) {
    ImportEvent a = piece;
    a.event.address = r.address;
    a.event.bytes = r.bytes;
    before_history(a);
    a.event.kind = EventKind::kMap;
    initial_.push_back(a);
  }

  void read_annotations(const Value& list) {
    values_.expect(list, Type::kList, "external_annotations");
    std::map<std::string, std::vector<uint64_t>> open;  // name -> ids of open ranges
    uint64_t next_id = 1;
    last_time_ns_ = 0;
    for (size_t i = 0; i < list.items.size(); ++i) {
      const Value& a = values_.at(list.items[i]);
      const std::string at = fmt::format("external_annotations[{}]", i);
      values_.expect(a, Type::kDict, at);
      const std::string stage = values_.text(a, "stage", at);
      const std::string name = sanitize_utf8(values_.text(a, "name", at));
      ImportEvent p = event(EventKind::kRangeStart, 0);
      p.event.time_ns = time_of(a, at);
      p.event.device =
          static_cast<int16_t>(std::clamp<int64_t>(values_.integer(a, "device", at, false), -1, INT16_MAX));
      p.name = string(name);
      if (stage == "START") {
        p.event.address = next_id++;
        open[name].push_back(p.event.address);
      } else if (stage == "END") {
        auto it = open.find(name);
        if (it == open.end() || it->second.empty()) {
          ++unmatched_annotation_ends_;
          continue;
        }
        p.event.kind = EventKind::kRangeEnd;
        p.event.address = it->second.back();
        it->second.pop_back();
      } else {
        values_.fail(fmt::format("{}.stage is '{}', not START or END", at, stage));
      }
      annotations_.push_back(p);
      ++annotation_count_;
    }
  }

  // Segments at snapshot time: each kept as a kSegmentMark; the memory in
  // them the history does not hold (segments still reserved, pages still
  // mapped, blocks still allocated) allocated at the start.
  void read_segments(const Value& list) {
    values_.expect(list, Type::kList, "segments");
    for (size_t i = 0; i < list.items.size(); ++i) {
      const Value& s = values_.at(list.items[i]);
      const std::string at = fmt::format("segments[{}]", i);
      values_.expect(s, Type::kDict, at);
      const int64_t device = values_.integer(s, "device", at, true);
      if (device < 0 || device >= static_cast<int64_t>(kMaxDevices))
        values_.fail(fmt::format("{}.device is {}", at, device));
      const size_t d = static_cast<size_t>(device);
      grow_devices(d);
      ImportEvent seg = event(EventKind::kMark, static_cast<int16_t>(d));
      seg.event.address = values_.unsigned_integer(s, "address", at, true);
      seg.event.bytes = values_.unsigned_integer(s, "total_size", at, true);
      seg.event.stream = static_cast<uint64_t>(values_.integer(s, "stream", at, false));
      seg.event.flags = kFlagReserved;
      seg.event.memory = MemoryKind::kDevice;
      reserve_segment(state_[d], s, at, seg);
      ++segments_kept_;
      segment_marks_.push_back(mark(seg.event.device, kSegmentMark, values_.json(s)));
      if (const Value* blocks = values_.find(s, "blocks")) read_blocks(state_[d], *blocks, at, seg);
    }
  }

  // A segment's memory that neither the history nor earlier segments hold.
  void reserve_segment(DeviceState& state, const Value& s, const std::string& at, ImportEvent& seg) {
    if (values_.integer(s, "is_expandable", at, false) != 0) {
      // One segment per stretch of mapped pages (PyTorch's snapshot()).
      seg.event.memory = MemoryKind::kVmmPhysical;
      std::vector<MappedRanges::Piece> unmapped;
      state.mapped.gaps(seg.event.address, seg.event.bytes,
                        [&](const MappedRanges::Piece& r) { unmapped.push_back(r); });
      for (const MappedRanges::Piece& r : unmapped) {
        mapped_before_history(seg, r);
        state.mapped.add(r.address, r.bytes);
      }
    } else if (!state.live_segments.count(seg.event.address)) {
      before_history(seg);
      state.live_segments.insert(seg.event.address);
    }
  }

  // The segment's blocks still allocated that the history never saw allocated.
  void read_blocks(const DeviceState& state, const Value& blocks, const std::string& at, const ImportEvent& seg) {
    values_.expect(blocks, Type::kList, at + ".blocks");
    uint64_t address = seg.event.address;
    for (size_t b = 0; b < blocks.items.size(); ++b) {
      const Value& block = values_.at(blocks.items[b]);
      const std::string bat = fmt::format("{}.blocks[{}]", at, b);
      values_.expect(block, Type::kDict, bat);
      const uint64_t size = values_.unsigned_integer(block, "size", bat, true);
      const Value* state_name = values_.find(block, "state");
      const bool active = state_name && state_name->type == Type::kString && state_name->text == "active_allocated";
      // Blocks tile their segment in order (memory_viz reads them so).
      const uint64_t block_address =
          values_.find(block, "address") ? values_.unsigned_integer(block, "address", bat, true) : address;
      if (active && !state.live_blocks.count(block_address)) {
        ImportEvent a = seg;
        a.event.flags = 0;
        a.event.memory = MemoryKind::kDevice;
        a.event.address = block_address;
        a.event.bytes = requested_size(block, bat, size);
        before_history(a);
        ++blocks_before_history_;
      }
      address = MappedRanges::end_of(block_address, size);
    }
  }

  // What the block holds: requested_size (older snapshots: the first
  // history entry's real_size; or the rounded size), as memory_viz reads it.
  uint64_t requested_size(const Value& block, const std::string& at, uint64_t size) {
    if (values_.find(block, "requested_size"))
      return values_.unsigned_integer(block, "requested_size", at, false, size);
    if (const Value* history = values_.find(block, "history"))
      if (history->type == Type::kList && !history->items.empty()) {
        const Value& first = values_.at(history->items[0]);
        if (first.type == Type::kDict)
          return values_.unsigned_integer(first, "real_size", at + ".history[0]", false, size);
      }
    return size;
  }

  void read_settings(const Value& settings) {
    values_.expect(settings, Type::kDict, "allocator_settings");
    segment_marks_.insert(segment_marks_.begin(), mark(0, kSettingsMark, values_.json(settings)));
    settings_kept_ = true;
  }

  // Gives the sink every event in the trace's order: what was allocated
  // before the history began (segments and mapped pages first, then the
  // blocks in them) at the first time; the devices' histories and the
  // annotations merged by time, each list in its own order (ties: lower
  // device first, annotations last); what the snapshot held at its end.
  // Returns the first time.
  uint64_t hand_over() {
    uint64_t first = UINT64_MAX, last = 0;
    for (const auto& list : devices_)
      for (const ImportEvent& p : list) {
        first = std::min(first, p.event.time_ns);
        last = std::max(last, p.event.time_ns);
      }
    for (const ImportEvent& p : annotations_) {
      first = std::min(first, p.event.time_ns);
      last = std::max(last, p.event.time_ns);
    }
    if (first == UINT64_MAX) first = 0;
    std::stable_partition(initial_.begin(), initial_.end(),
                          [](const ImportEvent& p) { return p.event.flags & kFlagReserved; });
    for (ImportEvent p : initial_) {
      p.event.time_ns = first;
      add(p);
    }
    std::vector<const std::vector<ImportEvent>*> lists;
    for (const auto& l : devices_) lists.push_back(&l);
    lists.push_back(&annotations_);
    std::vector<size_t> next(lists.size(), 0);
    while (true) {
      size_t best = SIZE_MAX;
      for (size_t l = 0; l < lists.size(); ++l)
        if (next[l] < lists[l]->size() &&
            (best == SIZE_MAX || (*lists[l])[next[l]].event.time_ns < (*lists[best])[next[best]].event.time_ns))
          best = l;
      if (best == SIZE_MAX) break;
      add((*lists[best])[next[best]++]);
    }
    for (ImportEvent p : segment_marks_) {
      p.event.time_ns = std::max(first, last);
      add(p);
    }
    return first;
  }

  // Marks and ranges are the snapshot's own annotations, not recorded calls.
  void add(ImportEvent e) {
    if (e.event.kind == EventKind::kMark || e.event.kind == EventKind::kRangeStart ||
        e.event.kind == EventKind::kRangeEnd)
      e.event.api = Api::kPscApi;
    sink_.add(e);
  }

  ImportSummary summary(uint64_t events) const {
    ImportSummary summary;
    summary.events = events;
    std::string actions;
    for (const auto& [action, n] : counts_) actions += fmt::format("{}{} {}", actions.empty() ? "" : ", ", n, action);
    summary.lines.push_back(fmt::format("devices: {}", devices_.size()));
    summary.lines.push_back("history: " + (actions.empty() ? std::string("empty") : actions));
    summary.lines.push_back(fmt::format(
        "annotations: {} (as process-wide ranges){}", annotation_count_,
        unmatched_annotation_ends_ ? fmt::format(", {} ENDs without a START skipped", unmatched_annotation_ends_)
                                   : ""));
    if (!initial_.empty())
      summary.lines.push_back(
          fmt::format("{} blocks, segments and mapped pages allocated before the history began: allocated at its start "
                      "({} blocks live at the snapshot at their requested_size)",
                      initial_.size(), blocks_before_history_));
    if (without_time_) summary.lines.push_back(fmt::format("{} entries without time_us: kept in order", without_time_));
    summary.lines.push_back(
        fmt::format("kept as marks: {} segments with their blocks{}, {} changes of the entries' other fields "
                    "(user_metadata, compile_context, ...)",
                    segments_kept_, settings_kept_ ? ", allocator_settings" : "", field_changes_));
    summary.lines.push_back("not kept: stack frames (a trace has no place for them)");
    return summary;
  }

  const ImportOptions& options_;
  SnapshotValues values_;
  ImportSink sink_;
  std::vector<std::vector<ImportEvent>> devices_;  // each device's history
  std::vector<DeviceState> state_;
  std::vector<ImportEvent> annotations_;
  std::vector<ImportEvent> initial_;        // allocated before the history began
  std::vector<ImportEvent> segment_marks_;  // at snapshot time: settings first, then segments
  std::map<std::string, uint64_t> counts_;
  uint64_t last_time_ns_ = 0;
  uint64_t without_time_ = 0;
  uint64_t field_changes_ = 0;
  uint64_t blocks_before_history_ = 0;
  uint64_t segments_kept_ = 0;
  bool settings_kept_ = false;
  uint64_t annotation_count_ = 0;
  uint64_t unmatched_annotation_ends_ = 0;
};

class TorchSnapshotImporter : public Importer {
 public:
  std::string_view name() const override { return "torch-snapshot"; }
  std::string_view description() const override {
    return "torch.cuda.memory._dump_snapshot pickle (read as data: no code runs from the file)";
  }
  ImportSummary read(const ImportOptions& options) const override {
    const pickle::Document doc = parse_snapshot(options);
    return SnapshotParser(options, doc).run();
  }
};

}  // namespace

const Importer& torch_snapshot_importer() {
  static const TorchSnapshotImporter importer;
  return importer;
}

}  // namespace psc
