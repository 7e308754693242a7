// `import --from torch-snapshot`: a `torch.cuda.memory._dump_snapshot` pickle
// into a .pstrace. The pickle is read by exchange/import_pickle.h (data only; no
// code named or run). What a snapshot holds (torch/cuda/memory.py, _snapshot):
//   {"segments": [...], "device_traces": [[entry, ...] per device],
//    "external_annotations": [{"device", "stage": "START"|"END", "name",
//    "time_us"}], "allocator_settings": {...}}
// with entries {"action", "addr", "size", "stream", "time_us", "frames"}.
//
// Mapping (docs/viewers.md):
//   alloc / free_completed        -> alloc / free, allocated level
//   segment_alloc / segment_free  -> alloc / free, reserved level
//   segment_map / segment_unmap   -> map / unmap
//   free_requested, oom, snapshot, annotate and any other action
//                                 -> a mark "torch.<action>" whose payload
//                                    holds the entry's other scalar fields
//   external_annotations          -> process-wide ranges (start/end)
// The memory is live from alloc to free_completed: that is when the caching
// allocator can hand it out again (memory_viz draws it so too).
//
// History that began after memory was already allocated (the ring buffer of
// _record_memory_history wrapped, or recording started late) frees blocks it
// never saw allocated, and the segments list holds blocks still allocated that
// the history never mentions. Both are allocated at the start of the trace
// (api "none", so an export can tell them from recorded ones), so live bytes
// are right from the first event.
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
#include "exchange/export_formats.h"
#include "exchange/export_output.h"
#include "exchange/export_text.h"
#include "exchange/import_pickle.h"
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
    if (traces->items.size() > 4096) fail(fmt::format("{} devices", traces->items.size()));
    for (size_t d = 0; d < traces->items.size(); ++d) read_device(d, doc_.at(traces->items[d]));
    if (const Value* annotations = doc_.find(root, "external_annotations")) read_annotations(*annotations);
    if (const Value* segments = doc_.find(root, "segments")) read_segments(*segments);
    return write();
  }

 private:
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
  uint64_t unsigned_integer(const Value& entry, const char* key, const std::string& where, bool required) {
    const int64_t v = integer(entry, key, where, required);
    if (v < 0) fail(fmt::format("{}.{} is negative ({})", where, key, v));
    return static_cast<uint64_t>(v);
  }
  std::string text(const Value& entry, const char* key, const std::string& where) {
    const Value* v = doc_.find(entry, key);
    if (!v) fail(fmt::format("{} has no {}", where, key));
    if (v->type != Type::kString) fail(fmt::format("{}.{} is a {}, not a str", where, key, pickle::type_name(v->type)));
    return v->text;
  }

  // The entry's scalar fields other than these, as a JSON object: a mark's payload.
  std::string other_fields(const Value& entry, std::initializer_list<std::string_view> skip) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (size_t i = 0; i + 1 < entry.items.size(); i += 2) {
      const Value& k = doc_.at(entry.items[i]);
      const Value& v = doc_.at(entry.items[i + 1]);
      if (k.type != Type::kString) continue;
      if (std::find(skip.begin(), skip.end(), k.text) != skip.end()) continue;
      const std::string key = sanitize_utf8(k.text);  // pickled str may hold any bytes
      switch (v.type) {
        case Type::kInt: j[key] = v.integer; break;
        case Type::kBool: j[key] = v.boolean; break;
        case Type::kFloat: j[key] = v.real; break;
        case Type::kString: j[key] = sanitize_utf8(v.text); break;
        case Type::kNone: j[key] = nullptr; break;
        default: ++dropped_fields_; break;  // frames and other structure: not kept
      }
    }
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
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

  void read_device(size_t d, const Value& trace) {
    const std::string where = fmt::format("device_traces[{}]", d);
    expect(trace, Type::kList, where);
    std::vector<Pending>& out = devices_.emplace_back();
    last_time_ns_ = 0;
    std::set<uint64_t> live_blocks, live_segments;
    for (size_t i = 0; i < trace.items.size(); ++i) {
      const Value& entry = doc_.at(trace.items[i]);
      const std::string at = fmt::format("{}[{}]", where, i);
      expect(entry, Type::kDict, at);
      const std::string action = text(entry, "action", at);
      Pending p;
      p.device = static_cast<int16_t>(d);
      p.time_ns = time_of(entry, at);
      p.stream = static_cast<uint64_t>(integer(entry, "stream", at, false));
      // "free": what snapshots before free_requested/free_completed wrote.
      const bool block = action == "alloc" || action == "free_completed" || action == "free";
      const bool segment = action == "segment_alloc" || action == "segment_free";
      if (block || segment || action == "segment_map" || action == "segment_unmap") {
        p.address = unsigned_integer(entry, "addr", at, true);
        p.bytes = unsigned_integer(entry, "size", at, true);
        p.flags = segment ? kFlagReserved : 0;
        p.memory = MemoryKind::kDevice;
        std::set<uint64_t>& live = block ? live_blocks : live_segments;
        if (action == "alloc" || action == "segment_alloc") {
          p.kind = EventKind::kAlloc;
          live.insert(p.address);
          ++counts_[action];
        } else if (action == "free_completed" || action == "free" || action == "segment_free") {
          p.kind = EventKind::kFree;
          if (!live.erase(p.address)) before_history(d, p);  // allocated before the history began
          ++counts_[action];
        } else {
          p.kind = action == "segment_map" ? EventKind::kMap : EventKind::kUnmap;
          ++counts_[action];
        }
      } else {
        p.kind = EventKind::kMark;
        p.name = "torch." + sanitize_utf8(action);
        p.payload = other_fields(entry, {"action", "time_us", "frames"});
        ++counts_[action];
      }
      out.push_back(std::move(p));
    }
    live_blocks_.push_back(std::move(live_blocks));
    live_segments_.push_back(std::move(live_segments));
  }

  void before_history(size_t d, const Pending& free) {
    Pending a = free;
    a.kind = EventKind::kAlloc;
    a.api = Api::kNone;
    a.device = static_cast<int16_t>(d);
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

  // Blocks still allocated (and segments still reserved) at the snapshot
  // whose allocation the history does not hold.
  void read_segments(const Value& list) {
    expect(list, Type::kList, "segments");
    for (size_t i = 0; i < list.items.size(); ++i) {
      const Value& s = doc_.at(list.items[i]);
      const std::string at = fmt::format("segments[{}]", i);
      expect(s, Type::kDict, at);
      const int64_t device = integer(s, "device", at, true);
      if (device < 0 || device >= 4096) fail(fmt::format("{}.device is {}", at, device));
      const size_t d = static_cast<size_t>(device);
      if (d >= live_segments_.size()) {
        live_segments_.resize(d + 1);
        live_blocks_.resize(d + 1);
        devices_.resize(d + 1);
      }
      Pending seg;
      seg.device = static_cast<int16_t>(d);
      seg.address = unsigned_integer(s, "address", at, true);
      seg.bytes = unsigned_integer(s, "total_size", at, true);
      seg.stream = static_cast<uint64_t>(integer(s, "stream", at, false));
      seg.flags = kFlagReserved;
      seg.memory = MemoryKind::kDevice;
      if (!live_segments_[d].count(seg.address)) before_history(d, seg);
      const Value* blocks = doc_.find(s, "blocks");
      if (!blocks) continue;
      expect(*blocks, Type::kList, at + ".blocks");
      uint64_t address = seg.address;
      for (size_t b = 0; b < blocks->items.size(); ++b) {
        const Value& block = doc_.at(blocks->items[b]);
        const std::string bat = fmt::format("{}.blocks[{}]", at, b);
        expect(block, Type::kDict, bat);
        const uint64_t size = unsigned_integer(block, "size", bat, true);
        const Value* state = doc_.find(block, "state");
        const bool active = state && state->type == Type::kString && state->text == "active_allocated";
        // Blocks tile their segment in order (memory_viz reads them so).
        const uint64_t block_address =
            doc_.find(block, "address") ? unsigned_integer(block, "address", bat, true) : address;
        if (active && !live_blocks_[d].count(block_address)) {
          Pending a = seg;
          a.flags = 0;
          a.address = block_address;
          a.bytes = size;
          before_history(d, a);
        }
        address = block_address + size;
      }
    }
  }

  ImportSummary write() {
    uint64_t first = UINT64_MAX;
    for (const auto& list : devices_)
      if (!list.empty()) first = std::min(first, list.front().time_ns);
    if (!annotations_.empty()) first = std::min(first, annotations_.front().time_ns);
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
    auto emit = [&](const Pending& p) {
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
    writer.close();
    if (rename_into_place && std::rename(partial.c_str(), options_.output.c_str()) != 0)
      throw std::runtime_error(options_.output + ": cannot rename " + partial + " into place");
    cleanup.keep = true;

    ImportSummary summary;
    summary.events = writer.events_written();
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
          fmt::format("{} blocks and segments allocated before the history began: allocated at "
                      "its start",
                      initial_.size()));
    if (without_time_) summary.lines.push_back(fmt::format("{} entries without time_us: kept in order", without_time_));
    summary.lines.push_back("not kept: stack frames (a trace has no place for them)");
    return summary;
  }

  const ImportOptions& options_;
  Document doc_;
  std::vector<std::vector<Pending>> devices_;
  std::vector<Pending> annotations_;
  std::vector<Pending> initial_;
  std::vector<std::set<uint64_t>> live_blocks_, live_segments_;
  std::map<std::string, uint64_t> counts_;
  uint64_t last_time_ns_ = 0;
  uint64_t without_time_ = 0;
  uint64_t dropped_fields_ = 0;
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
