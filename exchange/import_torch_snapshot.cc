// `import --from torch-snapshot`: a `torch.cuda.memory._dump_snapshot` pickle
// into a .pstrace. The pickle is read by exchange/import_pickle.h (data only; no
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
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/input_file.h"
#include "common/progress.h"
#include "exchange/export_formats.h"
#include "exchange/export_output.h"
#include "exchange/export_text.h"
#include "exchange/import_pickle.h"
#include "exchange/torch_snapshot_shared.h"
#include "traces/writer.h"

namespace psc {
namespace {

using pickle::Document;
using pickle::Type;
using pickle::Value;

constexpr const char* kCommandPrefix = "peakscope import --from torch-snapshot";
// The pickle is read whole and parsed into a document several times its
// size: snapshots of real runs are megabytes to a few hundred.
constexpr size_t kMaxSnapshotBytes = size_t{1} << 30;

struct Pending {
  uint64_t time_ns = 0;
  EventKind kind = EventKind::kMark;
  uint8_t flags = 0;
  int16_t device = 0;
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t stream = 0;
  MemoryKind memory = MemoryKind::kNone;
  Api api = Api::kImported;
  std::string name;
  std::string payload;
};

class SnapshotImport {
 public:
  explicit SnapshotImport(const ImportOptions& options) : options_(options) {}

  ImportSummary run() {
    std::string data;
    std::string error;
    if (!read_input_file(options_.input, kMaxSnapshotBytes, "memory snapshot", &data, &error))
      throw InputError(options_.input, error);
    try {
      doc_ = pickle::parse(data);
    } catch (const pickle::ParseError& e) {
      throw InputError(options_.input, std::string("not a memory snapshot pickle: ") + e.what(), e.offset());
    }
    const Value& root = doc_.at(doc_.root());
    if (root.type != Type::kDict)
      fail("the snapshot is a " + std::string(pickle::type_name(root.type)) + ", not a dict");
    const Value* traces = doc_.find(root, "device_traces");
    if (!traces)
      fail(
          "no device_traces: the snapshot was taken without memory history "
          "(torch.cuda.memory._record_memory_history)");
    expect(*traces, Type::kList, "device_traces");
    if (traces->items.size() > kMaxDevices) fail(fmt::format("{} devices", traces->items.size()));
    for (size_t d = 0; d < traces->items.size(); ++d) read_device(d, doc_.at(traces->items[d]));
    if (const Value* annotations = doc_.find(root, "external_annotations")) read_annotations(*annotations);
    if (const Value* segments = doc_.find(root, "segments")) read_segments(*segments);
    if (const Value* settings = doc_.find(root, "allocator_settings")) read_settings(*settings);
    return write();
  }

 private:
  static constexpr size_t kMaxDevices = 4096;
  // Nesting kept in a mark's payload (allocator_settings, a segment's
  // blocks); the memo can make a value contain itself.
  static constexpr int kMaxNesting = 16;

  [[noreturn]] void fail(const std::string& reason) const { throw InputError(options_.input, reason); }

  void expect(const Value& v, Type type, const std::string& where) const {
    if (v.type != type)
      fail(fmt::format("{} is a {}, not a {}", where, pickle::type_name(v.type), pickle::type_name(type)));
  }
  int64_t integer(const Value& entry, const char* key, const std::string& where, bool required, int64_t fallback = 0) {
    const Value* v = doc_.find(entry, key);
    if (!v || v->type == Type::kNone) {
      if (required) fail(fmt::format("{} has no {}", where, key));
      return fallback;
    }
    if (v->type == Type::kBool) return v->boolean;
    if (v->type != Type::kInt) fail(fmt::format("{}.{} is a {}, not an int", where, key, pickle::type_name(v->type)));
    return v->integer;
  }
  uint64_t unsigned_integer(const Value& entry, const char* key, const std::string& where, bool required,
                            uint64_t fallback = 0) {
    const int64_t v = integer(entry, key, where, required, static_cast<int64_t>(fallback));
    if (v < 0) fail(fmt::format("{}.{} is negative ({})", where, key, v));
    return static_cast<uint64_t>(v);
  }
  std::string text(const Value& entry, const char* key, const std::string& where) {
    const Value* v = doc_.find(entry, key);
    if (!v) fail(fmt::format("{} has no {}", where, key));
    if (v->type != Type::kString) fail(fmt::format("{}.{} is a {}, not a str", where, key, pickle::type_name(v->type)));
    return v->text;
  }

  // A value as JSON, frames left out (a trace has no stacks).
  nlohmann::ordered_json to_json(const Value& v, int depth) {
    if (depth > kMaxNesting) {
      ++dropped_fields_;
      return nullptr;
    }
    switch (v.type) {
      case Type::kNone: return nullptr;
      case Type::kBool: return v.boolean;
      case Type::kInt: return v.integer;
      case Type::kFloat: return v.real;
      case Type::kString: return sanitize_utf8(v.text);  // pickled str may hold any bytes
      case Type::kBytes: ++dropped_fields_; return nullptr;
      case Type::kList:
      case Type::kTuple: {
        nlohmann::ordered_json a = nlohmann::ordered_json::array();
        for (pickle::Ref r : v.items) a.push_back(to_json(doc_.at(r), depth + 1));
        return a;
      }
      case Type::kDict: {
        nlohmann::ordered_json o = nlohmann::ordered_json::object();
        for (size_t i = 0; i + 1 < v.items.size(); i += 2) {
          const Value& k = doc_.at(v.items[i]);
          if (k.type != Type::kString || k.text == "frames") continue;
          o[sanitize_utf8(k.text)] = to_json(doc_.at(v.items[i + 1]), depth + 1);
        }
        return o;
      }
    }
    return nullptr;
  }
  static std::string dump(const nlohmann::ordered_json& j) {
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }

  // The entry's scalar fields other than these, as a JSON object: a mark's payload.
  std::string other_fields(const Value& entry, std::initializer_list<std::string_view> skip) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (size_t i = 0; i + 1 < entry.items.size(); i += 2) {
      const Value& k = doc_.at(entry.items[i]);
      const Value& v = doc_.at(entry.items[i + 1]);
      if (k.type != Type::kString) continue;
      if (std::find(skip.begin(), skip.end(), k.text) != skip.end()) continue;
      switch (v.type) {
        case Type::kInt:
        case Type::kBool:
        case Type::kFloat:
        case Type::kString:
        case Type::kNone: j[sanitize_utf8(k.text)] = to_json(v, 0); break;
        default: ++dropped_fields_; break;  // frames and other structure: not kept
      }
    }
    return dump(j);
  }

  uint64_t time_of(const Value& entry, const std::string& where) {
    const Value* v = doc_.find(entry, "time_us");
    if (!v) {
      ++without_time_;
      return last_time_ns_;  // older snapshots: keep the order, no times
    }
    if (v->type != Type::kInt || v->integer < 0 || v->integer > INT64_MAX / 1000)
      fail(fmt::format("{}.time_us is not a time in microseconds", where));
    last_time_ns_ = static_cast<uint64_t>(v->integer) * 1000;
    return last_time_ns_;
  }

  // The device's state while its history is read, and after.
  struct DeviceState {
    std::set<uint64_t> live_blocks, live_segments;
    MappedRanges mapped;        // expandable segments' pieces
    std::string fields = "{}";  // the extra fields of the last memory entry
  };

  void grow_devices(size_t d) {
    if (d < devices_.size()) return;
    devices_.resize(d + 1);
    state_.resize(d + 1);
  }

  void read_device(size_t d, const Value& trace) {
    const std::string where = fmt::format("device_traces[{}]", d);
    expect(trace, Type::kList, where);
    grow_devices(d);
    last_time_ns_ = 0;
    progress_stage("reading " + options_.input + ": " + where, trace.items.size());
    ProgressBatch entries;
    for (size_t i = 0; i < trace.items.size(); ++i) {
      entries.add();
      const Value& entry = doc_.at(trace.items[i]);
      const std::string at = fmt::format("{}[{}]", where, i);
      expect(entry, Type::kDict, at);
      const std::string action = text(entry, "action", at);
      Pending p;
      p.device = static_cast<int16_t>(d);
      p.time_ns = time_of(entry, at);
      p.stream = static_cast<uint64_t>(integer(entry, "stream", at, false));
      ++counts_[action];
      // "free": what snapshots before free_requested/free_completed wrote.
      const bool block = action == "alloc" || action == "free_completed" || action == "free";
      const bool segment = action == "segment_alloc" || action == "segment_free";
      const bool mapping = action == "segment_map" || action == "segment_unmap";
      if (!block && !segment && !mapping) {
        p.kind = EventKind::kMark;
        p.name = "torch." + sanitize_utf8(action);
        p.payload = other_fields(entry, {"action", "time_us", "frames"});
        devices_[d].push_back(std::move(p));
        continue;
      }
      p.address = unsigned_integer(entry, "addr", at, true);
      p.bytes = unsigned_integer(entry, "size", at, true);
      p.memory = MemoryKind::kDevice;
      fields(d, p, other_fields(entry, {"action", "addr", "size", "stream", "time_us", "frames"}));
      if (mapping) {
        map_or_unmap(d, p, action == "segment_map");
        continue;
      }
      p.flags = segment ? kFlagReserved : 0;
      std::set<uint64_t>& live = block ? state_[d].live_blocks : state_[d].live_segments;
      if (action == "alloc" || action == "segment_alloc") {
        p.kind = EventKind::kAlloc;
        live.insert(p.address);
      } else {
        p.kind = EventKind::kFree;
        if (!live.erase(p.address)) before_history(p);  // allocated before the history began
      }
      devices_[d].push_back(std::move(p));
    }
  }

  // A kFieldsMark before the first memory entry whose extra fields differ
  // from the last one's.
  void fields(size_t d, const Pending& entry, std::string fields) {
    if (fields == state_[d].fields) return;
    Pending m;
    m.kind = EventKind::kMark;
    m.device = entry.device;
    m.time_ns = entry.time_ns;
    m.name = kFieldsMark;
    m.payload = fields;
    devices_[d].push_back(std::move(m));
    state_[d].fields = std::move(fields);
    ++field_changes_;
  }

  // segment_map: the map and the piece's reserved memory. segment_unmap: the
  // unmap, and the pieces it covers freed (the part of a cut piece that stays
  // mapped allocated again); what no piece held was mapped before the history
  // began.
  void map_or_unmap(size_t d, Pending p, bool map) {
    std::vector<Pending>& out = devices_[d];
    Pending piece = p;
    piece.flags = kFlagReserved;
    piece.memory = MemoryKind::kVmmPhysical;
    auto piece_event = [&](EventKind kind, const MappedRanges::Piece& r) {
      Pending e = piece;
      e.kind = kind;
      e.address = r.address;
      e.bytes = r.bytes;
      out.push_back(e);
    };
    p.kind = map ? EventKind::kMap : EventKind::kUnmap;
    p.flags = kFlagReserved;
    p.memory = MemoryKind::kVmmPhysical;
    MappedRanges& mapped = state_[d].mapped;
    if (map) {
      // A map over mapped pages (a damaged history) replaces them.
      mapped.remove(
          p.address, p.bytes, [&](const MappedRanges::Piece& r) { piece_event(EventKind::kFree, r); },
          [&](const MappedRanges::Piece& r) { piece_event(EventKind::kAlloc, r); }, [](const MappedRanges::Piece&) {});
      piece_event(EventKind::kAlloc, {p.address, p.bytes});
      mapped.add(p.address, p.bytes);
      out.push_back(p);
      return;
    }
    out.push_back(p);
    mapped.remove(
        p.address, p.bytes, [&](const MappedRanges::Piece& r) { piece_event(EventKind::kFree, r); },
        [&](const MappedRanges::Piece& r) { piece_event(EventKind::kAlloc, r); },
        [&](const MappedRanges::Piece& r) {
          mapped_before_history(piece, r);
          piece_event(EventKind::kFree, r);
        });
  }

  // Memory the history frees without having allocated it: allocated at the start.
  void before_history(const Pending& free) {
    Pending a = free;
    a.kind = EventKind::kAlloc;
    a.api = Api::kNone;
    initial_.push_back(a);
  }
  // Pages mapped before the history began: their memory and their map.
  void mapped_before_history(const Pending& piece, const MappedRanges::Piece& r) {
    Pending a = piece;
    a.address = r.address;
    a.bytes = r.bytes;
    before_history(a);
    a.kind = EventKind::kMap;
    initial_.push_back(a);
  }

  void read_annotations(const Value& list) {
    expect(list, Type::kList, "external_annotations");
    std::map<std::string, std::vector<uint64_t>> open;  // name -> ids of open ranges
    uint64_t next_id = 1;
    last_time_ns_ = 0;
    for (size_t i = 0; i < list.items.size(); ++i) {
      const Value& a = doc_.at(list.items[i]);
      const std::string at = fmt::format("external_annotations[{}]", i);
      expect(a, Type::kDict, at);
      const std::string stage = text(a, "stage", at);
      const std::string name = sanitize_utf8(text(a, "name", at));
      Pending p;
      p.time_ns = time_of(a, at);
      p.device = static_cast<int16_t>(std::clamp<int64_t>(integer(a, "device", at, false), -1, INT16_MAX));
      p.name = name;
      if (stage == "START") {
        p.kind = EventKind::kRangeStart;
        p.address = next_id++;
        open[name].push_back(p.address);
      } else if (stage == "END") {
        auto it = open.find(name);
        if (it == open.end() || it->second.empty()) {
          ++unmatched_annotation_ends_;
          continue;
        }
        p.kind = EventKind::kRangeEnd;
        p.address = it->second.back();
        it->second.pop_back();
      } else {
        fail(fmt::format("{}.stage is '{}', not START or END", at, stage));
      }
      annotations_.push_back(std::move(p));
      ++annotation_count_;
    }
  }

  // Segments at snapshot time: each kept as a kSegmentMark; the memory in
  // them the history does not hold (segments still reserved, pages still
  // mapped, blocks still allocated) allocated at the start.
  void read_segments(const Value& list) {
    expect(list, Type::kList, "segments");
    for (size_t i = 0; i < list.items.size(); ++i) {
      const Value& s = doc_.at(list.items[i]);
      const std::string at = fmt::format("segments[{}]", i);
      expect(s, Type::kDict, at);
      const int64_t device = integer(s, "device", at, true);
      if (device < 0 || device >= static_cast<int64_t>(kMaxDevices)) fail(fmt::format("{}.device is {}", at, device));
      const size_t d = static_cast<size_t>(device);
      grow_devices(d);
      DeviceState& state = state_[d];
      Pending seg;
      seg.device = static_cast<int16_t>(d);
      seg.address = unsigned_integer(s, "address", at, true);
      seg.bytes = unsigned_integer(s, "total_size", at, true);
      seg.stream = static_cast<uint64_t>(integer(s, "stream", at, false));
      seg.flags = kFlagReserved;
      seg.memory = MemoryKind::kDevice;
      if (integer(s, "is_expandable", at, false) != 0) {
        // One segment per stretch of mapped pages (PyTorch's snapshot()).
        seg.memory = MemoryKind::kVmmPhysical;
        std::vector<MappedRanges::Piece> unmapped;
        state.mapped.gaps(seg.address, seg.bytes, [&](const MappedRanges::Piece& r) { unmapped.push_back(r); });
        for (const MappedRanges::Piece& r : unmapped) {
          mapped_before_history(seg, r);
          state.mapped.add(r.address, r.bytes);
        }
      } else if (!state.live_segments.count(seg.address)) {
        before_history(seg);
        state.live_segments.insert(seg.address);
      }
      ++segments_kept_;
      segment_marks_.push_back(Pending{});
      Pending& mark = segment_marks_.back();
      mark.kind = EventKind::kMark;
      mark.device = seg.device;
      mark.name = kSegmentMark;
      mark.payload = dump(to_json(s, 0));
      const Value* blocks = doc_.find(s, "blocks");
      if (!blocks) continue;
      expect(*blocks, Type::kList, at + ".blocks");
      uint64_t address = seg.address;
      for (size_t b = 0; b < blocks->items.size(); ++b) {
        const Value& block = doc_.at(blocks->items[b]);
        const std::string bat = fmt::format("{}.blocks[{}]", at, b);
        expect(block, Type::kDict, bat);
        const uint64_t size = unsigned_integer(block, "size", bat, true);
        const Value* state_name = doc_.find(block, "state");
        const bool active = state_name && state_name->type == Type::kString && state_name->text == "active_allocated";
        // Blocks tile their segment in order (memory_viz reads them so).
        const uint64_t block_address =
            doc_.find(block, "address") ? unsigned_integer(block, "address", bat, true) : address;
        if (active && !state.live_blocks.count(block_address)) {
          Pending a = seg;
          a.flags = 0;
          a.memory = MemoryKind::kDevice;
          a.address = block_address;
          a.bytes = requested_size(block, bat, size);
          before_history(a);
          ++blocks_before_history_;
        }
        address = MappedRanges::end_of(block_address, size);
      }
    }
  }

  // What the block holds: requested_size (older snapshots: the first
  // history entry's real_size; or the rounded size), as memory_viz reads it.
  uint64_t requested_size(const Value& block, const std::string& at, uint64_t size) {
    if (doc_.find(block, "requested_size")) return unsigned_integer(block, "requested_size", at, false, size);
    if (const Value* history = doc_.find(block, "history"))
      if (history->type == Type::kList && !history->items.empty()) {
        const Value& first = doc_.at(history->items[0]);
        if (first.type == Type::kDict) return unsigned_integer(first, "real_size", at + ".history[0]", false, size);
      }
    return size;
  }

  void read_settings(const Value& settings) {
    expect(settings, Type::kDict, "allocator_settings");
    Pending mark;
    mark.kind = EventKind::kMark;
    mark.name = kSettingsMark;
    mark.payload = dump(to_json(settings, 0));
    segment_marks_.insert(segment_marks_.begin(), std::move(mark));
    settings_kept_ = true;
  }

  ImportSummary write() {
    uint64_t first = UINT64_MAX, last = 0;
    for (const auto& list : devices_)
      for (const Pending& p : list) {
        first = std::min(first, p.time_ns);
        last = std::max(last, p.time_ns);
      }
    for (const Pending& p : annotations_) {
      first = std::min(first, p.time_ns);
      last = std::max(last, p.time_ns);
    }
    if (first == UINT64_MAX) first = 0;

    TraceWriterOptions wo;
    wo.realtime_ns = first;  // time_us is CLOCK_REALTIME: the trace's clock is it
    wo.monotonic_ns = first;
    wo.command = std::string(kCommandPrefix) + " " + std::filesystem::path(options_.input).filename().string();
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
    writer.thread(0, 0, "torch memory snapshot");
    uint64_t seq = 0;
    uint64_t total = initial_.size() + annotations_.size() + segment_marks_.size();
    for (const auto& list : devices_) total += list.size();
    progress_stage("writing " + options_.output, total);
    ProgressBatch written;
    auto emit = [&](const Pending& p) {
      written.add();
      Event e{};
      e.seq = ++seq;
      e.time_ns = p.time_ns;
      e.kind = p.kind;
      e.flags = p.flags;
      e.device = p.device;
      e.address = p.address;
      e.bytes = p.bytes;
      e.stream = p.stream;
      e.memory = p.memory;
      e.api = p.kind == EventKind::kMark || p.kind == EventKind::kRangeStart || p.kind == EventKind::kRangeEnd
                  ? Api::kPscApi
                  : p.api;
      if (!p.name.empty()) e.name = writer.intern(p.name);
      if (!p.payload.empty()) e.payload = writer.intern(p.payload);
      writer.event(e);
    };
    // Segments and mapped pages first, then the blocks in them.
    std::stable_partition(initial_.begin(), initial_.end(), [](const Pending& p) { return p.flags & kFlagReserved; });
    for (Pending p : initial_) {
      p.time_ns = first;
      emit(p);
    }
    // Merge the devices' histories and the annotations by time, each list in
    // its own order (ties: lower device first, annotations last).
    std::vector<const std::vector<Pending>*> lists;
    for (const auto& l : devices_) lists.push_back(&l);
    lists.push_back(&annotations_);
    std::vector<size_t> next(lists.size(), 0);
    while (true) {
      size_t best = SIZE_MAX;
      for (size_t l = 0; l < lists.size(); ++l)
        if (next[l] < lists[l]->size() &&
            (best == SIZE_MAX || (*lists[l])[next[l]].time_ns < (*lists[best])[next[best]].time_ns))
          best = l;
      if (best == SIZE_MAX) break;
      emit((*lists[best])[next[best]++]);
    }
    // What the snapshot held at its end.
    for (Pending p : segment_marks_) {
      p.time_ns = std::max(first, last);
      emit(p);
    }
    written.flush();
    writer.close();
    if (rename_into_place && std::rename(partial.c_str(), options_.output.c_str()) != 0)
      throw std::runtime_error(options_.output + ": cannot rename " + partial + " into place");
    cleanup.keep = true;
    return summary(writer.events_written());
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
  Document doc_;
  std::vector<std::vector<Pending>> devices_;  // each device's history
  std::vector<DeviceState> state_;
  std::vector<Pending> annotations_;
  std::vector<Pending> initial_;        // allocated before the history began
  std::vector<Pending> segment_marks_;  // at snapshot time: settings first, then segments
  std::map<std::string, uint64_t> counts_;
  uint64_t last_time_ns_ = 0;
  uint64_t without_time_ = 0;
  uint64_t dropped_fields_ = 0;
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
  ImportSummary read(const ImportOptions& options) const override { return SnapshotImport(options).run(); }
};

}  // namespace

const Importer& torch_snapshot_importer() {
  static const TorchSnapshotImporter importer;
  return importer;
}

}  // namespace psc
