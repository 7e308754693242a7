// `export --format torch-snapshot`: a pickle in the shape of
// `torch.cuda.memory._dump_snapshot` that pytorch.org/memory_viz opens (and
// that `import --from torch-snapshot` reads back to the same events).
//   - device_traces[d]: one entry per memory event of device d, in trace order:
//     allocated level -> alloc, free_requested + free_completed (a free is both
//     for the recorder: the hooks see the memory handed back); reserved level ->
//     segment_alloc / segment_free; VMM map / unmap -> segment_map /
//     segment_unmap at the mapped addresses (PyTorch's expandable segments);
//     a failed allocation -> oom (device_free unknown: 0). VMM physical memory
//     (cuMemCreate, keyed by handle) is not an entry: its maps are. A mapping
//     at the allocated level (VMM used directly, not under a caching
//     allocator) is the allocation too: an alloc at the mapped address.
//   - Every alloc lies in a segment that is live when it is made, as PyTorch
//     writes them and as memory_viz's Allocator State History needs: a block
//     outside every recorded segment and mapped range (a trace with no
//     reserved level: plain cudaMalloc, host memory, cudaMallocAsync) gets a
//     segment of its own, segment_alloc before the alloc and segment_free
//     after its free; so does a live block whose segment goes away.
//   - Frees of memory the trace never saw allocated (and unmaps of pages it
//     never saw mapped) are left out, with a warning: the analysis counts
//     them as nothing, and memory_viz would draw them as memory live from the
//     start. An allocation over a live address ends the old one (the
//     analysis does so too): its free is written before the new alloc.
//   - Host memory: a trace with no device memory (`peakscope record --host`)
//     shows it as device 0, with a warning and a "peakscope" note in the
//     file; in a trace with device memory it is left out, with a warning. A
//     trace with neither is refused (InputError): memory_viz cannot open a
//     snapshot without a device trace.
//   - A trace imported from a snapshot carries its free_requested, oom and
//     other entries as "torch.<action>" marks, written back as they were, and
//     the rest in the marks of exchange/torch_snapshot/snapshot_shared.h: its entries'
//     other fields, its segments and allocator_settings, written back too.
//   - external_annotations: push/pop and start/end ranges as START / END.
//   - segments: what is reserved at the end (recorded segments, each stretch
//     of mapped pages as an expandable segment, the segments made up for
//     blocks), each with its blocks tiling it (allocated blocks, and inactive
//     gaps between them), as memory_viz expects.
// frames are empty lists: a trace has no stacks. Streamed: each device's
// entries go to a temporary file and are copied into place at the end.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/json_file.h"
#include "exchange/export_formats.h"
#include "exchange/export_model.h"
#include "exchange/export_output.h"
#include "exchange/torch_snapshot/pickle_writer.h"
#include "exchange/torch_snapshot/snapshot_pickle.h"
#include "exchange/torch_snapshot/snapshot_shared.h"

namespace psc {
namespace {

constexpr std::string_view kImportedCommand = "peakscope import --from torch-snapshot";

class SnapshotWriter : public BoundedVisitor {
 public:
  SnapshotWriter(const ExportModel& model, const ExportOptions& options)
      : BoundedVisitor(model.analysis.trace.status.events), options_(options), annotations_(&memo_) {}

  void on_event(const Event& e, const TraceMeta& meta) override {
    meta_ = &meta;
    if (!checked_command_) {
      checked_command_ = true;
      from_snapshot_ = meta.command.rfind(kImportedCommand, 0) == 0;
    }
    switch (e.kind) {
      case EventKind::kAlloc:
      case EventKind::kFree: memory(e); break;
      case EventKind::kMap:
        if (!(e.flags & kFlagNested)) map(e);
        break;
      case EventKind::kUnmap:
        if (!(e.flags & kFlagNested)) unmap(e);
        break;
      case EventKind::kMark: mark(e); break;
      case EventKind::kRangePush:
        if (e.thread >= stacks_.size()) stacks_.resize(e.thread + 1);
        stacks_[e.thread].push_back(e.name);
        annotation(e, "START", meta.string(e.name));
        break;
      case EventKind::kRangePop:
        if (e.thread < stacks_.size() && !stacks_[e.thread].empty()) {
          annotation(e, "END", meta.string(stacks_[e.thread].back()));
          stacks_[e.thread].pop_back();
        }
        break;
      case EventKind::kRangeStart:
        if (starts_.emplace(e.address, e.name).second) annotation(e, "START", meta.string(e.name));
        break;
      case EventKind::kRangeEnd: {
        auto it = starts_.find(e.address);
        if (it == starts_.end()) break;
        annotation(e, "END", meta.string(it->second));
        starts_.erase(it);
        break;
      }
      default: break;
    }
  }

  void on_end(const TraceMeta& meta, const ReadStatus&) override { meta_ = &meta; }

  // After the read: where host memory goes. Throws InputError when there is
  // nothing a snapshot could show.
  void decide() {
    const bool device_memory = has_device_memory();
    host_as_device_ = !device_memory && (host_ || live_on(kHost));
    if (!device_memory && !host_as_device_)
      throw InputError(options_.trace,
                       "nothing to export as a memory snapshot: the trace has no memory events (allocations, "
                       "frees, VMM maps, failed allocations) on a device or the host");
  }

  void write(OutputFile& out) {
    pickle::Writer w(&memo_);
    w.proto();
    w.empty_dict();
    w.mark();
    w.string("segments");
    if (from_snapshot_ && !segment_marks_.empty())
      write_recorded_segments(w, segment_marks_);
    else
      segments(w);
    w.string("device_traces");
    w.empty_list();
    out.write(w.out());
    w.clear();
    write_device_traces(out);
    w.string("allocator_settings");
    json_value(w, settings_.is_object() ? settings_ : nlohmann::ordered_json::object());
    w.string("external_annotations");
    out.write(w.out());
    w.clear();
    annotations_.copy_to(out);
    if (host_as_device_) {
      // memory_viz ignores keys it does not know; a reader of the file sees it.
      w.string("peakscope");
      json_value(w, {{"note", kHostNote}, {"host_memory_as_device", 0}});
    }
    w.setitems();
    w.stop();
    out.write(w.out());
    warnings();
  }

 private:
  static constexpr int16_t kHost = -1;
  static constexpr const char* kHostNote =
      "host memory (a trace of peakscope record --host, no device memory) shown as device 0";
  using Key = std::pair<int16_t, uint64_t>;

  struct Block {
    uint64_t bytes;
    uint64_t stream;
    bool owns_segment;  // sits in a segment made up for it
    bool mapping;       // an allocated-level VMM mapping's own block
  };
  struct Segment {
    uint64_t bytes;
    uint64_t stream;
  };

  int64_t time_us(uint64_t time_ns) const {
    const format::FileHeader& h = meta_->header;
    const int64_t realtime =
        static_cast<int64_t>(h.realtime_ns) + (static_cast<int64_t>(time_ns) - static_cast<int64_t>(h.monotonic_ns));
    return realtime / 1000;
  }

  // Host memory (device -1) has its own list until write() decides where it goes.
  ListFile* device_list(int16_t device) {
    if (device < 0) {
      if (!host_) host_ = std::make_unique<ListFile>(&memo_);
      return host_.get();
    }
    const size_t d = static_cast<size_t>(device);
    if (d >= devices_.size()) devices_.resize(d + 1);
    if (!devices_[d]) devices_[d] = std::make_unique<ListFile>(&memo_);
    return devices_[d].get();
  }

  bool has_device_memory() const {
    for (const auto& d : devices_)
      if (d) return true;
    for (const auto* segments : {&segments_, &made_up_})
      for (const auto& [key, seg] : *segments)
        if (key.first >= 0) return true;
    for (const auto& [device, ranges] : mapped_)
      if (device >= 0 && !ranges.pieces().empty()) return true;
    return !segment_marks_.empty();
  }
  bool live_on(int16_t device) const {
    auto it = blocks_.lower_bound({device, 0});
    return it != blocks_.end() && it->first.first == device;
  }

  void write_device_traces(OutputFile& out) {
    std::vector<ListFile*> lists;
    if (host_as_device_) {
      lists.push_back(host_.get());
    } else {
      for (const auto& d : devices_) lists.push_back(d.get());
    }
    // At most one batch per kBatch devices; devices are few.
    for (size_t d = 0; d < lists.size(); ++d) {
      if (d % pickle::kBatch == 0) out.put('(');
      if (lists[d]) {
        lists[d]->copy_to(out);
      } else {
        out.put(']');
      }
      if (d % pickle::kBatch == pickle::kBatch - 1 || d + 1 == lists.size()) out.put('e');
    }
  }

  void warnings() const {
    if (host_as_device_) {
      emit_warning(options_.warn, fmt::format("{}: {} allocations, {} frees", kHostNote, host_allocs_, host_frees_));
    } else if (host_allocs_ + host_frees_) {
      emit_warning(options_.warn,
                   fmt::format("host memory left out ({} allocations, {} frees): a snapshot has device traces only, "
                               "and this trace has device memory",
                               host_allocs_, host_frees_));
    }
    if (unmatched_)
      emit_warning(options_.warn,
                   fmt::format("{} frees and unmaps of memory the trace never saw allocated or mapped left out "
                               "(the analysis counts them as nothing)",
                               unmatched_));
  }

  // {'action', 'addr', 'size', 'stream', 'time_us', 'frames': [], ...fields}
  // at e's time, on e's stream unless one is given (an entry made up for a block).
  void entry(const Event& e, int16_t device, std::string_view action, uint64_t addr, uint64_t size,
             const uint64_t* stream = nullptr) {
    pickle::Writer& w = device_list(device)->item();
    w.empty_dict();
    w.mark();
    w.interned("action");
    w.interned(action);
    if (action == "oom") {
      w.interned("device_free");
      w.integer(uint64_t{0});
    } else {
      w.interned("addr");
      w.integer(addr);
    }
    w.interned("size");
    w.integer(size);
    w.interned("stream");
    w.integer(stream ? *stream : e.stream);
    w.interned("time_us");
    w.integer(time_us(e.time_ns));
    w.interned("frames");
    w.empty_list();
    auto fields = fields_.find(device);
    if (fields != fields_.end()) write_extra(w, fields->second);
    w.setitems();
    device_list(device)->done();
  }

  // A mark's JSON payload with its keys in their order (a snapshot's own);
  // discarded when it is not JSON or nests too deep.
  nlohmann::ordered_json payload_of(const Event& e) const {
    const std::string_view text = meta_->string(e.payload);
    if (json_nested_deeper_than(text, kMaxJsonDepth))
      return nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
    return nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  }

  // ---- the live state: segments, mapped pages, blocks --------------------------

  // In a segment the trace recorded, or in mapped pages.
  bool in_recorded_segment(int16_t device, uint64_t address) const {
    auto it = segments_.upper_bound({device, address});
    if (it != segments_.begin()) {
      --it;
      if (it->first.first == device && address < MappedRanges::end_of(it->first.second, it->second.bytes)) return true;
    }
    auto m = mapped_.find(device);
    MappedRanges::Piece piece;
    return m != mapped_.end() && m->second.find(address, &piece);
  }

  // A block outside every recorded segment gets one of its own, made up,
  // keyed by the block: blocks never share one, so none is freed under a
  // live block.
  void give_segment(const Event& e, const Key& key, Block& block) {
    if (block.owns_segment || in_recorded_segment(key.first, key.second)) return;
    const uint64_t bytes = std::max<uint64_t>(block.bytes, 1);
    made_up_[key] = Segment{bytes, block.stream};
    block.owns_segment = true;
    entry(e, key.first, "segment_alloc", key.second, bytes, &block.stream);
  }
  // Called when a recorded segment or mapped range [address, +bytes) has
  // left the state and before its segment_free / segment_unmap is written:
  // memory_viz must never draw a live block outside every segment.
  void rehome(const Event& e, int16_t device, uint64_t address, uint64_t bytes) {
    const uint64_t end = MappedRanges::end_of(address, bytes);
    for (auto it = blocks_.lower_bound({device, address});
         it != blocks_.end() && it->first.first == device && it->first.second < end; ++it)
      give_segment(e, it->first, it->second);
  }

  void allocate(const Event& e, int16_t device, uint64_t address, uint64_t bytes, bool mapping) {
    const Key key{device, address};
    if (blocks_.count(key)) release(e, key, 0, true);  // the old allocation's free was lost
    Block& block = blocks_[key] = Block{bytes, e.stream, false, mapping};
    // Blocks a snapshot import made up for memory allocated before its history
    // began: the history never held their allocation (nor their segment's).
    if (from_snapshot_ && e.api == Api::kNone) return;
    give_segment(e, key, block);
    entry(e, device, "alloc", address, bytes);
  }

  // made_up: a free the trace does not hold (a lost one, a mapping's block
  // going with its pages), on the block's stream.
  void release(const Event& e, const Key key, uint64_t bytes, bool made_up) {  // key by value: callers pass map keys
    auto it = blocks_.find(key);
    const Block block = it->second;
    blocks_.erase(it);
    const uint64_t size = bytes ? bytes : block.bytes;
    const uint64_t* stream = made_up ? &block.stream : nullptr;
    if (!from_snapshot_) entry(e, key.first, "free_requested", key.second, size, stream);
    entry(e, key.first, "free_completed", key.second, size, stream);
    auto seg = made_up_.find(key);
    if (!block.owns_segment || seg == made_up_.end()) return;
    entry(e, key.first, "segment_free", key.second, seg->second.bytes, &block.stream);
    made_up_.erase(seg);
  }

  void memory(const Event& e) {
    if (e.flags & kFlagNested) return;  // the outer call is the event
    // VMM physical memory is keyed by handle, not address: its maps are the entries.
    if (e.memory == MemoryKind::kVmmPhysical) return;
    const bool reserved = e.flags & kFlagReserved;
    if (e.device < 0) ++(e.kind == EventKind::kAlloc ? host_allocs_ : host_frees_);
    if (e.flags & kFlagFailed) {
      if (e.kind == EventKind::kAlloc && !reserved) entry(e, e.device, "oom", 0, e.bytes);
      return;
    }
    const Key key{e.device, e.address};
    if (!reserved) {
      if (e.kind == EventKind::kAlloc) {
        allocate(e, e.device, e.address, e.bytes, false);
      } else if (e.address != 0 && blocks_.count(key)) {
        release(e, key, e.bytes, false);
      } else if (e.address != 0) {
        ++unmatched_;
      }
      return;
    }
    if (e.kind == EventKind::kAlloc) {
      segments_[key] = Segment{e.bytes, e.stream};
      if (!(from_snapshot_ && e.api == Api::kNone)) entry(e, e.device, "segment_alloc", e.address, e.bytes);
      return;
    }
    if (e.address == 0) return;
    auto it = segments_.find(key);
    if (it == segments_.end()) {
      ++unmatched_;
      return;
    }
    const uint64_t size = e.bytes ? e.bytes : it->second.bytes;
    const uint64_t bytes = it->second.bytes;
    segments_.erase(it);
    rehome(e, e.device, e.address, bytes);
    entry(e, e.device, "segment_free", e.address, size);
  }

  // A VMM map whose handle the recorder did not see has no device: device 0.
  static int16_t map_device(const Event& e) { return std::max<int16_t>(e.device, 0); }

  void map(const Event& e) {
    const int16_t device = map_device(e);
    MappedRanges& mapped = mapped_[device];
    const bool recorded = !(from_snapshot_ && e.api == Api::kNone);
    // A map over mapped pages (a lost unmap) replaces them.
    mapped.remove(
        e.address, e.bytes, [](const MappedRanges::Piece&) {}, [](const MappedRanges::Piece&) {},
        [](const MappedRanges::Piece&) {});
    mapped.add(e.address, e.bytes);
    if (recorded) entry(e, device, "segment_map", e.address, e.bytes);
    if (!(e.flags & kFlagReserved)) allocate(e, device, e.address, e.bytes, true);
  }

  void unmap(const Event& e) {
    const int16_t device = map_device(e);
    MappedRanges& mapped = mapped_[device];
    const bool allocated_level = !(e.flags & kFlagReserved);
    const uint64_t end = MappedRanges::end_of(e.address, e.bytes);
    // The mapping's own blocks are freed before their pages go.
    std::vector<MappedRanges::Piece> removed, kept;
    mapped.remove(
        e.address, e.bytes, [&](const MappedRanges::Piece& p) { removed.push_back(p); },
        [&](const MappedRanges::Piece& p) { kept.push_back(p); }, [&](const MappedRanges::Piece&) { ++unmatched_; });
    std::vector<bool> had_block(removed.size(), false);
    for (size_t i = 0; i < removed.size(); ++i) {
      auto it = blocks_.find({device, removed[i].address});
      if (it == blocks_.end() || !it->second.mapping) continue;
      had_block[i] = true;
      release(e, it->first, 0, true);
    }
    // One segment_unmap per stretch of pages it unmapped.
    std::vector<MappedRanges::Piece> stretches;
    for (size_t i = 0; i < removed.size();) {
      const uint64_t from = std::max(removed[i].address, e.address);
      uint64_t to = std::min(removed[i].end(), end);
      size_t j = i + 1;
      while (j < removed.size() && removed[j].address == to) to = std::min(removed[j++].end(), end);
      stretches.push_back({from, to - from});
      i = j;
    }
    for (const MappedRanges::Piece& p : stretches) rehome(e, device, p.address, p.bytes);
    for (const MappedRanges::Piece& p : stretches) entry(e, device, "segment_unmap", p.address, p.bytes);
    if (!allocated_level) return;
    for (const MappedRanges::Piece& p : kept)
      for (size_t i = 0; i < removed.size(); ++i)
        if (had_block[i] && p.address >= removed[i].address && p.address < removed[i].end())
          allocate(e, device, p.address, p.bytes, true);
  }

  void mark(const Event& e) {
    const std::string_view name = meta_->string(e.name);
    if (name == kFieldsMark || name == kSegmentMark || name == kSettingsMark) {
      snapshot_mark(e, name);
      return;
    }
    if (!from_snapshot_ || name.rfind("torch.", 0) != 0) return;
    const nlohmann::ordered_json payload = payload_of(e);
    const nlohmann::ordered_json fields = payload.is_object() ? payload : nlohmann::ordered_json::object();
    auto number = [&](const char* k) -> uint64_t {
      auto it = fields.find(k);
      return it != fields.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
    };
    const std::string action(name.substr(6));
    ListFile* list = device_list(e.device);
    pickle::Writer& w = list->item();
    w.empty_dict();
    w.mark();
    w.interned("action");
    w.interned(action);
    for (const char* k : {"addr", "device_free", "size", "stream"})
      if (fields.contains(k)) {
        w.interned(k);
        w.integer(number(k));
      }
    w.interned("time_us");
    w.integer(time_us(e.time_ns));
    w.interned("frames");
    w.empty_list();
    write_extra(w, fields);
    w.setitems();
    list->done();
  }

  // The marks an import keeps what a trace has no field for in.
  void snapshot_mark(const Event& e, std::string_view name) {
    nlohmann::ordered_json payload = payload_of(e);
    if (!payload.is_object()) return;
    if (name == kFieldsMark) {
      fields_[e.device] = std::move(payload);
    } else if (name == kSettingsMark) {
      settings_ = std::move(payload);
    } else if (from_snapshot_) {
      segment_marks_.push_back(std::move(payload));
    }
  }

  void annotation(const Event& e, std::string_view stage, std::string_view name) {
    pickle::Writer& w = annotations_.item();
    w.empty_dict();
    w.mark();
    w.interned("stage");
    w.interned(stage);
    w.interned("name");
    w.string(name);
    w.interned("device");
    w.integer(int64_t{std::max<int16_t>(e.device, 0)});
    w.interned("time_us");
    w.integer(time_us(e.time_ns));
    w.setitems();
    annotations_.done();
  }

  // ---- segments at the end ----------------------------------------------------

  // What is live at the end: recorded and made-up segments, and each stretch
  // of mapped pages as one expandable segment (PyTorch's snapshot() reports
  // one per contiguous mapped range).
  std::vector<EndSegment> end_segments() const {
    std::vector<EndSegment> out;
    auto shown = [&](int16_t device) { return device >= 0 || host_as_device_; };
    for (const auto& [key, seg] : segments_)
      if (shown(key.first)) out.push_back({key.first, key.second, seg.bytes, seg.stream, false, false});
    for (const auto& [key, seg] : made_up_)
      if (shown(key.first)) out.push_back({key.first, key.second, seg.bytes, seg.stream, false, true});
    for (const auto& [device, ranges] : mapped_) {
      if (!shown(device)) continue;
      for (const auto& [address, bytes] : ranges.pieces()) {
        if (!out.empty() && out.back().expandable && out.back().device == device &&
            MappedRanges::end_of(out.back().address, out.back().bytes) == address) {
          out.back().bytes += bytes;
        } else {
          out.push_back({device, address, bytes, 0, true, false});
        }
      }
    }
    std::sort(out.begin(), out.end(), [](const EndSegment& a, const EndSegment& b) {
      return std::pair(a.device, a.address) < std::pair(b.device, b.address);
    });
    return out;
  }

  // Each segment tiled by its blocks: allocated ones and the inactive gaps.
  void segments(pickle::Writer& w) {
    write_segments(w, end_segments(), [&](const EndSegment& seg) { return allocated_in(seg); });
  }

  // The blocks allocated in a segment, in address order, cut to its end
  // (overlapping ones left out): address, size.
  std::vector<std::pair<uint64_t, uint64_t>> allocated_in(const EndSegment& seg) const {
    const uint64_t seg_end = MappedRanges::end_of(seg.address, seg.bytes);
    std::vector<std::pair<uint64_t, uint64_t>> inside;
    for (auto it = blocks_.lower_bound({seg.device, seg.address});
         it != blocks_.end() && it->first.first == seg.device && it->first.second < seg_end; ++it) {
      const uint64_t address = it->first.second;
      if (seg.made_up && address != seg.address) continue;
      if (!inside.empty() && address < inside.back().first + inside.back().second) continue;  // overlaps
      const uint64_t end = std::min(MappedRanges::end_of(address, it->second.bytes), seg_end);
      inside.emplace_back(address, end - address);
    }
    return inside;
  }

  const ExportOptions& options_;
  const TraceMeta* meta_ = nullptr;
  uint64_t memo_ = 0;
  bool checked_command_ = false;
  bool from_snapshot_ = false;
  bool host_as_device_ = false;
  uint64_t host_allocs_ = 0, host_frees_ = 0;
  uint64_t unmatched_ = 0;
  std::vector<std::unique_ptr<ListFile>> devices_;
  std::unique_ptr<ListFile> host_;
  ListFile annotations_;
  std::vector<std::vector<StringId>> stacks_;
  std::map<uint64_t, StringId> starts_;
  std::map<Key, Block> blocks_;
  std::map<Key, Segment> segments_;  // recorded (reserved level)
  std::map<Key, Segment> made_up_;   // a block's own, keyed by the block
  std::map<int16_t, MappedRanges> mapped_;
  std::map<int16_t, nlohmann::ordered_json> fields_;  // kFieldsMark: each device's entries' other fields
  nlohmann::ordered_json settings_;                   // kSettingsMark
  std::vector<nlohmann::ordered_json> segment_marks_;
};

class TorchSnapshotExporter : public Exporter {
 public:
  std::string_view name() const override { return "torch-snapshot"; }
  std::string_view description() const override {
    return "pickle in the shape of torch.cuda.memory._dump_snapshot, for pytorch.org/memory_viz";
  }
  void write(const ExportOptions& options) const override {
    ExportModelOptions model_options;
    model_options.categories = false;
    // A snapshot is written whole once the trace is read: the output is
    // created only then.
    replay_members(
        export_members(options.trace), model_options, options.warn,
        [&](const ExportModel& model, const ProcessPlacement&) {
          return std::make_unique<SnapshotWriter>(model, options);
        },
        [&](SnapshotWriter& writer) {
          writer.decide();
          OutputFile out(options.output);
          writer.write(out);
          out.commit();
        });
  }
};

}  // namespace

const Exporter& torch_snapshot_exporter() {
  static const TorchSnapshotExporter exporter;
  return exporter;
}

}  // namespace psc
