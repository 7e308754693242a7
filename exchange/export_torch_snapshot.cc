// `export --format torch-snapshot`: a pickle in the shape of
// `torch.cuda.memory._dump_snapshot` that pytorch.org/memory_viz opens (and
// that `import --from torch-snapshot` reads back to the same events).
//   - device_traces[d]: one entry per memory event of device d, in trace order:
//     allocated level -> alloc, free_requested + free_completed (a free is both
//     for the recorder: the hooks see the memory handed back); reserved level ->
//     segment_alloc / segment_free; map / unmap -> segment_map / segment_unmap;
//     a failed allocation -> oom (device_free unknown: 0). A trace that was
//     itself imported from a snapshot carries its free_requested, oom and other
//     entries as "torch.<action>" marks, written back as they were.
//   - external_annotations: push/pop and start/end ranges as START / END.
//   - segments: what is reserved at the end, each with its blocks tiling it
//     (allocated blocks, and inactive gaps between them), as memory_viz
//     expects; a live block in no recorded segment gets one of its own.
// frames are empty lists: a trace has no stacks. Streamed: each device's
// entries go to a temporary file and are copied into place at the end.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/json_file.h"
#include "exchange/export_formats.h"
#include "exchange/export_model.h"
#include "exchange/export_output.h"
#include "exchange/export_pickle.h"

namespace psc {
namespace {

constexpr std::string_view kImportedCommand = "peakscope import --from torch-snapshot";

// A list's pickle, written to an unlinked temporary file as it grows.
class ListFile {
 public:
  explicit ListFile(uint64_t* memo) : writer_(memo) {
    std::string name = std::filesystem::temp_directory_path().string() + "/peakscope-pickle-XXXXXX";
    fd_ = ::mkstemp(name.data());
    if (fd_ < 0) throw std::runtime_error(std::string("cannot create a temporary file: ") + std::strerror(errno));
    ::unlink(name.c_str());
    writer_.empty_list();
  }
  ~ListFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  ListFile(const ListFile&) = delete;
  ListFile& operator=(const ListFile&) = delete;

  // The writer for the next item; call done() after writing it.
  pickle::Writer& item() {
    if (in_batch_ == 0) writer_.mark();
    return writer_;
  }
  void done() {
    if (++in_batch_ == pickle::kBatch) close_batch();
    if (writer_.out().size() > (1u << 20)) flush();
  }
  // Appends the whole list to `out`.
  void copy_to(OutputFile& out) {
    close_batch();
    flush();
    std::vector<char> buf(1u << 20);
    for (off_t at = 0;;) {
      const ssize_t r = ::pread(fd_, buf.data(), buf.size(), at);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw std::runtime_error(std::string("temporary pickle: read failed: ") + std::strerror(errno));
      if (r == 0) break;
      out.write(buf.data(), static_cast<size_t>(r));
      at += r;
    }
  }

 private:
  void close_batch() {
    if (in_batch_ == 0) return;
    writer_.appends();
    in_batch_ = 0;
  }
  void flush() {
    const std::string& s = writer_.out();
    size_t done = 0;
    while (done < s.size()) {
      const ssize_t w = ::write(fd_, s.data() + done, s.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) throw std::runtime_error(std::string("temporary pickle: write failed: ") + std::strerror(errno));
      done += static_cast<size_t>(w);
    }
    writer_.clear();
  }

  int fd_ = -1;
  pickle::Writer writer_;
  size_t in_batch_ = 0;
};

class SnapshotWriter : public BoundedVisitor {
 public:
  SnapshotWriter(const ExportModel& model, const WarningSink& warn)
      : BoundedVisitor(model.analysis.trace.status.events), warn_(warn), annotations_(&memo_) {}

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
      case EventKind::kUnmap:
        entry(e, e.kind == EventKind::kMap ? "segment_map" : "segment_unmap", e.address, e.bytes);
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

  void write(OutputFile& out) {
    pickle::Writer w(&memo_);
    w.proto();
    w.empty_dict();
    w.mark();
    w.string("segments");
    segments(w);
    w.string("device_traces");
    w.empty_list();
    out.write(w.out());
    w.clear();
    if (!devices_.empty()) {
      // At most one batch per kBatch devices; devices are few.
      for (size_t d = 0; d < devices_.size(); ++d) {
        if (d % pickle::kBatch == 0) out.put('(');
        if (devices_[d]) {
          devices_[d]->copy_to(out);
        } else {
          out.put(']');
        }
        if (d % pickle::kBatch == pickle::kBatch - 1 || d + 1 == devices_.size()) out.put('e');
      }
    }
    w.string("allocator_settings");
    w.empty_dict();
    w.string("external_annotations");
    out.write(w.out());
    w.clear();
    annotations_.copy_to(out);
    w.setitems();
    w.stop();
    out.write(w.out());
    if (host_events_)
      emit_warning(warn_,
                   fmt::format("{} host-memory events left out: a snapshot has device traces only", host_events_));
  }

 private:
  struct Live {
    uint64_t bytes;
    uint64_t stream;
  };
  using Key = std::pair<int16_t, uint64_t>;

  int64_t time_us(uint64_t time_ns) const {
    const format::FileHeader& h = meta_->header;
    const int64_t realtime =
        static_cast<int64_t>(h.realtime_ns) + (static_cast<int64_t>(time_ns) - static_cast<int64_t>(h.monotonic_ns));
    return realtime / 1000;
  }

  ListFile* device_list(int16_t device) {
    if (device < 0) {
      ++host_events_;
      return nullptr;
    }
    const size_t d = static_cast<size_t>(device);
    if (d >= devices_.size()) devices_.resize(d + 1);
    if (!devices_[d]) devices_[d] = std::make_unique<ListFile>(&memo_);
    return devices_[d].get();
  }

  // {'action', 'addr', 'size', 'stream', 'time_us', 'frames': [], ...extra}
  void entry(const Event& e, std::string_view action, uint64_t addr, uint64_t size,
             const nlohmann::json* extra = nullptr) {
    ListFile* list = device_list(e.device);
    if (!list) return;
    pickle::Writer& w = list->item();
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
    w.integer(e.stream);
    w.interned("time_us");
    w.integer(time_us(e.time_ns));
    w.interned("frames");
    w.empty_list();
    if (extra) write_extra(w, *extra);
    w.setitems();
    list->done();
  }

  void write_extra(pickle::Writer& w, const nlohmann::json& j) {
    for (const auto& [k, v] : j.items()) {
      if (k == "addr" || k == "size" || k == "stream" || k == "device_free") continue;  // written already
      w.interned(k);
      if (v.is_number_unsigned())
        w.integer(v.get<uint64_t>());
      else if (v.is_number_integer())
        w.integer(v.get<int64_t>());
      else if (v.is_boolean())
        w.boolean(v.get<bool>());
      else if (v.is_string())
        w.string(v.get<std::string>());
      else
        w.none();
    }
  }

  void memory(const Event& e) {
    if (e.flags & kFlagNested) return;  // the outer call is the event
    const bool reserved = e.flags & kFlagReserved;
    std::map<Key, Live>& live = reserved ? segments_ : blocks_;
    const Key key{e.device, e.address};
    if (e.flags & kFlagFailed) {
      if (e.kind == EventKind::kAlloc && !reserved) entry(e, "oom", 0, e.bytes);
      return;
    }
    if (e.kind == EventKind::kAlloc) {
      live[key] = {e.bytes, e.stream};
      // Blocks a snapshot import made up for memory allocated before its
      // history began: the history never held their allocation.
      if (from_snapshot_ && e.api == Api::kNone) return;
      entry(e, reserved ? "segment_alloc" : "alloc", e.address, e.bytes);
      return;
    }
    if (e.address == 0) return;
    auto it = live.find(key);
    const uint64_t size = e.bytes ? e.bytes : (it != live.end() ? it->second.bytes : 0);
    if (it != live.end()) live.erase(it);
    if (reserved) {
      entry(e, "segment_free", e.address, size);
    } else {
      if (!from_snapshot_) entry(e, "free_requested", e.address, size);
      entry(e, "free_completed", e.address, size);
    }
  }

  void mark(const Event& e) {
    const std::string_view name = meta_->string(e.name);
    if (!from_snapshot_ || name.rfind("torch.", 0) != 0) return;
    const nlohmann::json payload = parse_json_payload(meta_->string(e.payload));
    const nlohmann::json fields = payload.is_object() ? payload : nlohmann::json::object();
    auto number = [&](const char* k) -> uint64_t {
      auto it = fields.find(k);
      return it != fields.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
    };
    const std::string action(name.substr(6));
    ListFile* list = device_list(e.device);
    if (!list) return;
    pickle::Writer& w = list->item();
    w.empty_dict();
    w.mark();
    w.interned("action");
    w.interned(action);
    for (const char* k : {"addr", "device_free"})
      if (fields.contains(k)) {
        w.interned(k);
        w.integer(number(k));
      }
    if (fields.contains("size")) {
      w.interned("size");
      w.integer(number("size"));
    }
    if (fields.contains("stream")) {
      w.interned("stream");
      w.integer(number("stream"));
    }
    w.interned("time_us");
    w.integer(time_us(e.time_ns));
    w.interned("frames");
    w.empty_list();
    write_extra(w, fields);
    w.setitems();
    list->done();
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

  // What is reserved at the end, blocks tiling each segment.
  void segments(pickle::Writer& w) {
    // A live block outside every reserved segment (no reserved level in the
    // trace, or a segment it did not record) gets a segment of its own:
    // memory_viz places every block in a segment.
    std::map<Key, Live> segments = segments_;
    for (const auto& [key, block] : blocks_) {
      auto it = segments_.upper_bound(key);
      const bool inside = it != segments_.begin() && (--it)->first.first == key.first &&
                          key.second < it->first.second + it->second.bytes;
      if (!inside) segments[key] = block;
    }
    w.empty_list();
    size_t in_batch = 0;
    for (const auto& [key, seg] : segments) {
      if (in_batch == 0) w.mark();
      uint64_t active = 0;
      std::vector<std::pair<uint64_t, uint64_t>> inside;  // address, size of allocated blocks
      for (auto it = blocks_.lower_bound({key.first, key.second});
           it != blocks_.end() && it->first.first == key.first && it->first.second < key.second + seg.bytes; ++it) {
        const uint64_t end = std::min(it->first.second + it->second.bytes, key.second + seg.bytes);
        inside.emplace_back(it->first.second, end - it->first.second);
        active += end - it->first.second;
      }
      w.empty_dict();
      w.mark();
      for (const auto& [k, v] : std::initializer_list<std::pair<const char*, uint64_t>>{
               {"device", static_cast<uint64_t>(std::max<int16_t>(key.first, 0))},
               {"address", key.second},
               {"total_size", seg.bytes},
               {"allocated_size", active},
               {"active_size", active},
               {"requested_size", active},
               {"stream", seg.stream}}) {
        w.interned(k);
        w.integer(v);
      }
      w.interned("segment_type");
      w.interned(seg.bytes >= (1u << 20) ? "large" : "small");
      w.interned("segment_pool_id");
      w.integer(int64_t{0});
      w.integer(int64_t{0});
      w.tuple2();
      w.interned("is_expandable");
      w.boolean(false);
      w.interned("frames");
      w.empty_list();
      w.interned("blocks");
      w.empty_list();
      w.mark();
      uint64_t at = key.second;
      auto block = [&](uint64_t address, uint64_t size, bool allocated) {
        w.empty_dict();
        w.mark();
        w.interned("address");
        w.integer(address);
        w.interned("size");
        w.integer(size);
        w.interned("requested_size");
        w.integer(size);
        w.interned("state");
        w.interned(allocated ? "active_allocated" : "inactive");
        w.interned("frames");
        w.empty_list();
        w.setitems();
      };
      size_t in_blocks = 0;
      auto next_block = [&](uint64_t address, uint64_t size, bool allocated) {
        block(address, size, allocated);
        if (++in_blocks % pickle::kBatch == 0) {
          w.appends();
          w.mark();
        }
      };
      for (const auto& [address, size] : inside) {
        if (address > at) next_block(at, address - at, false);
        next_block(address, size, true);
        at = address + size;
      }
      if (at < key.second + seg.bytes) next_block(at, key.second + seg.bytes - at, false);
      w.appends();
      w.setitems();
      if (++in_batch == pickle::kBatch) {
        w.appends();
        in_batch = 0;
      }
    }
    if (in_batch) w.appends();
  }

  const WarningSink& warn_;
  const TraceMeta* meta_ = nullptr;
  uint64_t memo_ = 0;
  bool checked_command_ = false;
  bool from_snapshot_ = false;
  uint64_t host_events_ = 0;
  std::vector<std::unique_ptr<ListFile>> devices_;
  ListFile annotations_;
  std::vector<std::vector<StringId>> stacks_;
  std::map<uint64_t, StringId> starts_;
  std::map<Key, Live> blocks_, segments_;
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
    const ExportModel model = build_export_model(options.trace, model_options);
    warn_if_incomplete(model, options.warn);
    SnapshotWriter writer(model, options.warn);
    read_placed(options.trace, model.analysis.placement.get(), writer);
    OutputFile out(options.output);
    writer.write(out);
    out.commit();
  }
};

}  // namespace

const Exporter& torch_snapshot_exporter() {
  static const TorchSnapshotExporter exporter;
  return exporter;
}

}  // namespace psc
