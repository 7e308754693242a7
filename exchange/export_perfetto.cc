// `export --format perfetto`: Perfetto's native protobuf trace (a `Trace` of
// `TracePacket`s), written packet by packet while the trace is read once more,
// so memory is O(live allocations + open ranges + threads), never O(events).
//
// What it holds (docs/viewers.md):
//   - one process track; a thread track per recorder thread, with NVTX / psc
//     push-pop ranges as slices and marks as instants;
//   - process-wide (start/end) ranges as slices on lanes of their own;
//   - counter tracks of live bytes per liveness category and device, plus the
//     device's total, and the other memory level's total when the trace has it;
//   - every allocation of the analysed level as a slice on a lane of its device,
//     named by its category, with bytes / address / range as arguments;
//   - instants on a "peaks" track at the trace's peak and at each wave's peak;
//   - counters the recorder sampled (kCounter) as counter tracks.
// Names are interned (InternedData.event_names / debug_annotation_names) on
// one trusted packet sequence; timestamps are CLOCK_MONOTONIC, declared with a
// ClockSnapshot (primary trace clock MONOTONIC, REALTIME from the header).
//
// Field numbers: perfetto/protos/perfetto/trace/trace_packet.proto,
// track_event/track_event.proto, track_descriptor.proto,
// counter_descriptor.proto, debug_annotation.proto, interned_data.proto,
// clock_snapshot.proto (see docs/viewers.md for the list and sources).
#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "exchange/export_formats.h"
#include "exchange/export_model.h"
#include "exchange/export_output.h"
#include "exchange/export_protobuf.h"

namespace psc {
namespace {

namespace field {
// Trace
constexpr uint32_t kTracePacket = 1;
// TracePacket
constexpr uint32_t kClockSnapshot = 6;
constexpr uint32_t kTimestamp = 8;
constexpr uint32_t kTrustedSequenceId = 10;
constexpr uint32_t kTrackEvent = 11;
constexpr uint32_t kInternedData = 12;
constexpr uint32_t kSequenceFlags = 13;
constexpr uint32_t kPacketDefaults = 59;
constexpr uint32_t kTrackDescriptor = 60;
// TracePacketDefaults
constexpr uint32_t kDefaultsClockId = 58;
// ClockSnapshot / ClockSnapshot.Clock
constexpr uint32_t kClocks = 1;
constexpr uint32_t kPrimaryTraceClock = 2;
constexpr uint32_t kClockId = 1;
constexpr uint32_t kClockTimestamp = 2;
// TrackDescriptor
constexpr uint32_t kTrackUuid = 1;
constexpr uint32_t kTrackName = 2;
constexpr uint32_t kTrackProcess = 3;
constexpr uint32_t kTrackThread = 4;
constexpr uint32_t kTrackParent = 5;
constexpr uint32_t kTrackCounter = 8;
// ProcessDescriptor
constexpr uint32_t kProcessPid = 1;
constexpr uint32_t kProcessName = 6;
// ThreadDescriptor
constexpr uint32_t kThreadPid = 1;
constexpr uint32_t kThreadTid = 2;
constexpr uint32_t kThreadName = 5;
// CounterDescriptor
constexpr uint32_t kCounterUnit = 3;
// TrackEvent
constexpr uint32_t kEventDebugAnnotations = 4;
constexpr uint32_t kEventType = 9;
constexpr uint32_t kEventNameIid = 10;
constexpr uint32_t kEventTrackUuid = 11;
constexpr uint32_t kEventName = 23;
constexpr uint32_t kEventCounterValue = 30;
// DebugAnnotation
constexpr uint32_t kAnnotationNameIid = 1;
constexpr uint32_t kAnnotationUint = 3;
constexpr uint32_t kAnnotationString = 6;
constexpr uint32_t kAnnotationPointer = 7;
// InternedData, EventName / DebugAnnotationName
constexpr uint32_t kInternedEventNames = 2;
constexpr uint32_t kInternedAnnotationNames = 3;
constexpr uint32_t kInternedIid = 1;
constexpr uint32_t kInternedName = 2;
}  // namespace field

constexpr uint32_t kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounter = 4;  // TrackEvent.Type
constexpr uint32_t kClockRealtime = 1, kClockMonotonic = 3;                     // BuiltinClock
constexpr uint32_t kIncrementalStateCleared = 1, kNeedsIncrementalState = 2;    // SequenceFlags
constexpr uint32_t kUnitSizeBytes = 3;                                          // CounterDescriptor.Unit
constexpr uint32_t kSequence = 1;

// Track uuids: the kind above bit 40, the rest says which one. Small enough
// to stay a short varint: every event packet carries one.
constexpr uint64_t kProcessTrack = 1;
constexpr uint64_t kKindThread = 1ull << 40, kKindMemory = 2ull << 40, kKindLane = 3ull << 40,
                   kKindRangeLane = 4ull << 40, kKindCounter = 5ull << 40, kPeaksTrack = 6ull << 40;
constexpr uint64_t kGroupLane = 0xFFFFFFull;  // lanes are below it; more are folded onto the last one
constexpr uint32_t kMaxLane = 0xFFFFFE;
constexpr uint32_t kTotalSlot = 15, kOtherLevelSlot = 16;

// Interned names of our own live above every trace string id.
constexpr uint64_t kOwnNames = 1ull << 40;
enum OwnName : uint64_t {
  kNameCategory0 = 0,
  kNameBytes = kCategoryCount,
  kNameAddress,
  kNameRange,
  kNamePayload,
  kOwnNameCount
};
const char* own_name(uint64_t n) {
  if (n < static_cast<uint64_t>(kCategoryCount)) return category_name(static_cast<Category>(n));
  switch (n) {
    case kNameBytes: return "bytes";
    case kNameAddress: return "address";
    case kNameRange: return "range";
    case kNamePayload: return "payload";
  }
  return "";
}

std::string device_label(int16_t device) { return device < 0 ? "host" : fmt::format("device {}", device); }

class PerfettoWriter : public BoundedVisitor, private ExportReplay::Listener {
 public:
  PerfettoWriter(const ExportModel& model, OutputFile& out)
      : BoundedVisitor(model.analysis.trace.status.events), model_(model), out_(out), replay_(model, this) {
    for (const WaveReport& w : model.analysis.waves) {
      PeakMark m;
      m.seq = w.peak.site.reached ? w.peak.site.seq : w.span.begin_seq;
      m.time_ns = w.peak.site.reached ? w.peak.site.time_ns : w.span.begin_time_ns;
      m.bytes = w.peak.bytes;
      m.text = fmt::format("wave {} peak: {} (baseline {}, measured {})", w.span.index, format_bytes(w.peak.bytes),
                           format_bytes(w.baseline_bytes), format_bytes(w.measured_peak_bytes()));
      marks_.push_back(m);
    }
    if (model.analysis.peak.site.reached) {
      const PeakSite& s = model.analysis.peak.site;
      marks_.push_back(
          {s.seq, s.time_ns, model.analysis.peak.bytes,
           fmt::format("peak: {} ({} bytes)", format_bytes(model.analysis.peak.bytes), model.analysis.peak.bytes)});
    }
    std::stable_sort(marks_.begin(), marks_.end(), [](const PeakMark& a, const PeakMark& b) { return a.seq < b.seq; });
  }

  void on_event(const Event& e, const TraceMeta& meta) override {
    meta_ = &meta;
    // Not in on_begin: the command line and thread names arrive with the first chunk.
    if (!preamble_written_) write_preamble(meta);
    while (next_mark_ < marks_.size() && marks_[next_mark_].seq < e.seq) emit_mark(marks_[next_mark_++]);
    switch (e.kind) {
      case EventKind::kRangePush: push(e); break;
      case EventKind::kRangePop: pop(e); break;
      case EventKind::kMark: mark(e); break;
      case EventKind::kRangeStart: range_start(e); break;
      case EventKind::kRangeEnd: range_end(e); break;
      case EventKind::kCounter: sampled_counter(e); break;
      case EventKind::kAlloc:
      case EventKind::kFree:
        if (memory_level_of(e) != model_.level) other_level(e);
        break;
      default: break;
    }
    replay_.on_event(e, meta);
    while (next_mark_ < marks_.size() && marks_[next_mark_].seq <= e.seq) emit_mark(marks_[next_mark_++]);
  }

  void on_end(const TraceMeta& meta, const ReadStatus&) override {
    meta_ = &meta;
    if (!preamble_written_) write_preamble(meta);
    while (next_mark_ < marks_.size()) emit_mark(marks_[next_mark_++]);
    // Thread names the recorder wrote after a thread's first event.
    for (uint32_t t = 0; t < described_name_.size(); ++t)
      if (thread_known_[t] && thread_name(t) != described_name_[t]) describe_thread(t);
  }

 private:
  struct PeakMark {
    uint64_t seq;
    uint64_t time_ns;
    uint64_t bytes;
    std::string text;
  };

  // ---- packets ----------------------------------------------------------------

  void emit(const proto::Buffer& packet) {
    proto::Buffer& framed = framed_;
    framed.clear();
    framed.message(field::kTracePacket, packet);
    out_.write(framed.data());
  }

  void write_preamble(const TraceMeta& meta) {
    preamble_written_ = true;
    proto::Buffer clock, clocks, packet;
    clock.varint(field::kClockId, kClockMonotonic);
    clock.varint(field::kClockTimestamp, meta.header.monotonic_ns);
    clocks.message(field::kClocks, clock);
    clock.clear();
    clock.varint(field::kClockId, kClockRealtime);
    clock.varint(field::kClockTimestamp, meta.header.realtime_ns);
    clocks.message(field::kClocks, clock);
    clocks.varint(field::kPrimaryTraceClock, kClockMonotonic);
    packet.message(field::kClockSnapshot, clocks);
    packet.varint(field::kTimestamp, meta.header.monotonic_ns);
    packet.varint(field::kTrustedSequenceId, kSequence + 1);
    emit(packet);

    proto::Buffer defaults;
    defaults.varint(field::kDefaultsClockId, kClockMonotonic);
    packet.clear();
    packet.varint(field::kTrustedSequenceId, kSequence);
    packet.varint(field::kSequenceFlags, kIncrementalStateCleared);
    packet.message(field::kPacketDefaults, defaults);
    emit(packet);

    proto::Buffer process, track;
    const uint32_t pid = meta.header.pid ? meta.header.pid : 1;
    process.varint(field::kProcessPid, pid);
    std::string name = meta.command.empty() ? "peakscope trace" : meta.command;
    if (name.size() > 200) name = name.substr(0, 200) + "...";
    process.string(field::kProcessName, name);
    track.varint(field::kTrackUuid, kProcessTrack);
    track.message(field::kTrackProcess, process);
    emit_descriptor(track);

    track.clear();
    track.varint(field::kTrackUuid, kPeaksTrack);
    track.varint(field::kTrackParent, kProcessTrack);
    track.string(field::kTrackName, "peaks");
    emit_descriptor(track);
  }

  void emit_descriptor(const proto::Buffer& track) {
    packet_.clear();
    packet_.varint(field::kTrustedSequenceId, kSequence);
    packet_.message(field::kTrackDescriptor, track);
    emit(packet_);
  }

  // A TrackEvent packet: event_ holds the TrackEvent, interned_ what it names
  // for the first time.
  void emit_event(uint64_t time_ns) {
    packet_.clear();
    packet_.varint(field::kTimestamp, time_ns);
    packet_.varint(field::kTrustedSequenceId, kSequence);
    packet_.varint(field::kSequenceFlags, kNeedsIncrementalState);
    packet_.message(field::kTrackEvent, event_);
    if (!interned_.empty()) {
      packet_.message(field::kInternedData, interned_);
      interned_.clear();
    }
    emit(packet_);
  }

  // ---- interning --------------------------------------------------------------

  uint64_t trace_name_iid(StringId id) {
    if (id.value >= trace_interned_.size()) trace_interned_.resize(size_t{id.value} + 1, false);
    if (!trace_interned_[id.value]) {
      trace_interned_[id.value] = true;
      add_interned(field::kInternedEventNames, id.value, meta_->string(id));
    }
    return id.value;
  }
  uint64_t own_iid(uint64_t n, uint32_t table) {
    const size_t slot = static_cast<size_t>(n) * 2 + (table == field::kInternedAnnotationNames);
    if (!own_interned_[slot]) {
      own_interned_[slot] = true;
      add_interned(table, kOwnNames + n, own_name(n));
    }
    return kOwnNames + n;
  }
  void add_interned(uint32_t table, uint64_t iid, std::string_view name) {
    entry_.clear();
    entry_.varint(field::kInternedIid, iid);
    entry_.string(field::kInternedName, name);
    interned_.message(table, entry_);
  }

  void annotate_uint(uint64_t name, uint64_t value) {
    const uint64_t iid = own_iid(name, field::kInternedAnnotationNames);
    scratch_.clear();
    scratch_.varint(field::kAnnotationNameIid, iid);
    scratch_.varint(field::kAnnotationUint, value);
    event_.message(field::kEventDebugAnnotations, scratch_);
  }
  void annotate_pointer(uint64_t name, uint64_t value) {
    const uint64_t iid = own_iid(name, field::kInternedAnnotationNames);
    scratch_.clear();
    scratch_.varint(field::kAnnotationNameIid, iid);
    scratch_.varint(field::kAnnotationPointer, value);
    event_.message(field::kEventDebugAnnotations, scratch_);
  }
  void annotate_string(uint64_t name, std::string_view value) {
    const uint64_t iid = own_iid(name, field::kInternedAnnotationNames);
    scratch_.clear();
    scratch_.varint(field::kAnnotationNameIid, iid);
    scratch_.string(field::kAnnotationString, value);
    event_.message(field::kEventDebugAnnotations, scratch_);
  }

  // ---- tracks -----------------------------------------------------------------

  std::string thread_name(uint32_t t) const {
    if (t < meta_->threads.size() && !meta_->threads[t].name.empty()) return meta_->threads[t].name;
    return fmt::format("thread {}", t);
  }

  void describe_thread(uint32_t t) {
    const uint32_t pid = meta_->header.pid ? meta_->header.pid : 1;
    uint64_t tid = t < meta_->threads.size() ? meta_->threads[t].os_tid : 0;
    if (tid == 0 || tid > 0x7fffffff) tid = 0x70000000u + t;  // unknown: a tid no real thread has
    proto::Buffer thread, track;
    thread.varint(field::kThreadPid, pid);
    thread.varint(field::kThreadTid, tid);
    const std::string name = thread_name(t);
    thread.string(field::kThreadName, name);
    track.varint(field::kTrackUuid, kKindThread | t);
    track.varint(field::kTrackParent, kProcessTrack);
    track.message(field::kTrackThread, thread);
    emit_descriptor(track);
    described_name_[t] = name;
  }

  uint64_t thread_track(uint32_t t) {
    if (t >= thread_known_.size()) {
      thread_known_.resize(t + 1, false);
      described_name_.resize(t + 1);
      depth_.resize(t + 1, 0);
    }
    if (!thread_known_[t]) {
      thread_known_[t] = true;
      describe_thread(t);
    }
    return kKindThread | t;
  }

  uint64_t memory_track(int16_t device, uint32_t slot) {
    const uint64_t uuid = kKindMemory | (static_cast<uint64_t>(static_cast<uint16_t>(device + 1)) << 8) | slot;
    if (std::find(memory_tracks_.begin(), memory_tracks_.end(), uuid) != memory_tracks_.end()) return uuid;
    memory_tracks_.push_back(uuid);
    std::string name;
    if (slot == kTotalSlot) {
      name = fmt::format("live bytes ({}, {})", memory_level_name(model_.level), device_label(device));
    } else if (slot == kOtherLevelSlot) {
      const MemoryLevel other =
          model_.level == MemoryLevel::kAllocated ? MemoryLevel::kReserved : MemoryLevel::kAllocated;
      name = fmt::format("live bytes ({}, {})", memory_level_name(other), device_label(device));
    } else {
      name = fmt::format("{} ({})", category_name(static_cast<Category>(slot)), device_label(device));
    }
    proto::Buffer counter, track;
    counter.varint(field::kCounterUnit, kUnitSizeBytes);
    track.varint(field::kTrackUuid, uuid);
    track.varint(field::kTrackParent, kProcessTrack);
    track.string(field::kTrackName, name);
    track.message(field::kTrackCounter, counter);
    emit_descriptor(track);
    return uuid;
  }

  uint64_t lane_track(int16_t device, uint32_t lane) {
    lane = std::min(lane, kMaxLane);
    const uint64_t dev = static_cast<uint64_t>(static_cast<uint16_t>(device + 1)) << 24;
    const size_t slot = static_cast<size_t>(device + 1);
    if (slot >= lanes_described_.size()) lanes_described_.resize(slot + 1, 0);
    uint32_t& described = lanes_described_[slot];
    if (described == 0) {  // the group first
      proto::Buffer track;
      track.varint(field::kTrackUuid, kKindLane | dev | kGroupLane);
      track.varint(field::kTrackParent, kProcessTrack);
      track.string(field::kTrackName, fmt::format("allocations ({})", device_label(device)));
      emit_descriptor(track);
    }
    while (described <= lane) {
      proto::Buffer track;
      track.varint(field::kTrackUuid, kKindLane | dev | described);
      track.varint(field::kTrackParent, kKindLane | dev | kGroupLane);
      track.string(field::kTrackName, fmt::format("lane {}", described));
      emit_descriptor(track);
      ++described;
    }
    return kKindLane | dev | lane;
  }

  uint64_t range_lane_track(uint32_t lane) {
    lane = std::min(lane, kMaxLane);
    if (range_lanes_described_ == 0) {
      proto::Buffer track;
      track.varint(field::kTrackUuid, kKindRangeLane | kGroupLane);
      track.varint(field::kTrackParent, kProcessTrack);
      track.string(field::kTrackName, "start/end ranges");
      emit_descriptor(track);
    }
    while (range_lanes_described_ <= lane) {
      proto::Buffer track;
      track.varint(field::kTrackUuid, kKindRangeLane | range_lanes_described_);
      track.varint(field::kTrackParent, kKindRangeLane | kGroupLane);
      track.string(field::kTrackName, fmt::format("lane {}", range_lanes_described_));
      emit_descriptor(track);
      ++range_lanes_described_;
    }
    return kKindRangeLane | lane;
  }

  // ---- events -----------------------------------------------------------------

  void slice_begin(uint64_t track, uint64_t name_iid) {
    event_.clear();
    event_.varint(field::kEventType, kSliceBegin);
    event_.varint(field::kEventTrackUuid, track);
    event_.varint(field::kEventNameIid, name_iid);
  }
  void slice_end(uint64_t track, uint64_t time_ns) {
    event_.clear();
    event_.varint(field::kEventType, kSliceEnd);
    event_.varint(field::kEventTrackUuid, track);
    emit_event(time_ns);
  }
  void counter(uint64_t track, uint64_t value, uint64_t time_ns) {
    event_.clear();
    event_.varint(field::kEventType, kCounter);
    event_.varint(field::kEventTrackUuid, track);
    event_.int64(field::kEventCounterValue, static_cast<int64_t>(value));
    emit_event(time_ns);
  }

  void push(const Event& e) {
    const uint64_t track = thread_track(e.thread);
    ++depth_[e.thread];
    slice_begin(track, trace_name_iid(e.name));
    emit_event(e.time_ns);
  }
  void pop(const Event& e) {
    const uint64_t track = thread_track(e.thread);
    if (depth_[e.thread] == 0) return;  // a pop with nothing open: nothing to close
    --depth_[e.thread];
    slice_end(track, e.time_ns);
  }
  void mark(const Event& e) {
    event_.clear();
    event_.varint(field::kEventType, kInstant);
    event_.varint(field::kEventTrackUuid, thread_track(e.thread));
    event_.varint(field::kEventNameIid, trace_name_iid(e.name));
    if (!e.payload.empty()) annotate_string(kNamePayload, meta_->string(e.payload));
    emit_event(e.time_ns);
  }
  void range_start(const Event& e) {
    if (open_ranges_.count(e.address)) return;  // a second start of an open id: the analysis ignores it too
    uint32_t lane;
    if (free_range_lanes_.empty()) {
      lane = next_range_lane_++;
    } else {
      std::pop_heap(free_range_lanes_.begin(), free_range_lanes_.end(), std::greater<uint32_t>());
      lane = free_range_lanes_.back();
      free_range_lanes_.pop_back();
    }
    open_ranges_[e.address] = lane;
    slice_begin(range_lane_track(lane), trace_name_iid(e.name));
    if (!e.payload.empty()) annotate_string(kNamePayload, meta_->string(e.payload));
    emit_event(e.time_ns);
  }
  void range_end(const Event& e) {
    auto it = open_ranges_.find(e.address);
    if (it == open_ranges_.end()) return;
    const uint32_t lane = it->second;
    open_ranges_.erase(it);
    free_range_lanes_.push_back(lane);
    std::push_heap(free_range_lanes_.begin(), free_range_lanes_.end(), std::greater<uint32_t>());
    slice_end(range_lane_track(lane), e.time_ns);
  }
  void sampled_counter(const Event& e) {
    const uint64_t uuid = kKindCounter | e.name.value;
    if (e.name.value >= counter_described_.size()) counter_described_.resize(size_t{e.name.value} + 1, false);
    if (!counter_described_[e.name.value]) {
      counter_described_[e.name.value] = true;
      proto::Buffer track, c;
      track.varint(field::kTrackUuid, uuid);
      track.varint(field::kTrackParent, kProcessTrack);
      const std::string_view name = meta_->string(e.name);
      track.string(field::kTrackName, name.empty() ? std::string_view("counter") : name);
      track.message(field::kTrackCounter, c);
      emit_descriptor(track);
    }
    counter(uuid, e.bytes, e.time_ns);
  }
  void other_level(const Event& e) {
    const uint64_t before = other_replay_.live_bytes();
    const EventSite site{0, {}, -1};
    const MemoryReplay::Effect effect = other_replay_.apply(e, site);
    if (effect == MemoryReplay::Effect::kNone) return;
    const size_t slot = static_cast<size_t>(e.device + 1);
    if (slot >= other_live_.size()) other_live_.resize(slot + 1, 0);
    // The replay knows the size a free releases even when the free event does not.
    other_live_[slot] = other_live_[slot] + other_replay_.live_bytes() - before;
    counter(memory_track(e.device, kOtherLevelSlot), other_live_[slot], e.time_ns);
  }

  void emit_mark(const PeakMark& m) {
    event_.clear();
    event_.varint(field::kEventType, kInstant);
    event_.varint(field::kEventTrackUuid, kPeaksTrack);
    event_.string(field::kEventName, m.text);
    annotate_uint(kNameBytes, m.bytes);
    emit_event(m.time_ns);
  }

  void on_alloc(const ExportReplay::Allocation& a, const Event& e) override {
    const uint64_t track = lane_track(a.device, a.lane);
    slice_begin(track, own_iid(static_cast<uint64_t>(a.category), field::kInternedEventNames));
    annotate_uint(kNameBytes, a.bytes);
    annotate_pointer(kNameAddress, a.address);
    if (!a.range.empty()) annotate_string(kNameRange, meta_->string(a.range));
    emit_event(e.time_ns);
    memory_counters(a, e.time_ns);
  }
  void on_end(const ExportReplay::Allocation& a, const Event& at, ExportReplay::EndKind) override {
    slice_end(lane_track(a.device, a.lane), at.time_ns);
    memory_counters(a, at.time_ns);
  }
  void memory_counters(const ExportReplay::Allocation& a, uint64_t time_ns) {
    const uint32_t slot = static_cast<uint32_t>(a.category);
    counter(memory_track(a.device, slot), replay_.live(a.device)[slot], time_ns);
    counter(memory_track(a.device, kTotalSlot), replay_.live_total(a.device), time_ns);
  }

  const ExportModel& model_;
  OutputFile& out_;
  ExportReplay replay_;
  const TraceMeta* meta_ = nullptr;
  bool preamble_written_ = false;
  proto::Buffer framed_, packet_, event_, interned_, scratch_, entry_;
  std::vector<bool> trace_interned_;
  std::vector<bool> own_interned_ = std::vector<bool>(kOwnNameCount * 2, false);
  std::vector<bool> thread_known_;
  std::vector<std::string> described_name_;
  std::vector<uint32_t> depth_;
  std::vector<uint64_t> memory_tracks_;
  std::vector<uint32_t> lanes_described_;
  uint32_t range_lanes_described_ = 0;
  std::unordered_map<uint64_t, uint32_t> open_ranges_;
  std::vector<uint32_t> free_range_lanes_;
  uint32_t next_range_lane_ = 0;
  std::vector<bool> counter_described_;
  MemoryReplay other_replay_;
  std::vector<uint64_t> other_live_;
  std::vector<PeakMark> marks_;
  size_t next_mark_ = 0;
};

class PerfettoExporter : public Exporter {
 public:
  std::string_view name() const override { return "perfetto"; }
  std::string_view description() const override {
    return "Perfetto protobuf trace (ui.perfetto.dev): ranges, live bytes by category, allocation lanes, peaks";
  }
  void write(const ExportOptions& options) const override {
    const ExportModel model = build_export_model(options.trace);
    warn_if_incomplete(model, options.warn);
    OutputFile out(options.output);
    PerfettoWriter writer(model, out);
    read_placed(options.trace, model.analysis.placement.get(), writer);
    out.commit();
  }
};

}  // namespace

const Exporter& perfetto_exporter() {
  static const PerfettoExporter exporter;
  return exporter;
}

}  // namespace psc
