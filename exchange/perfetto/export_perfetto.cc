// `export --format perfetto`: Perfetto's native protobuf trace (a `Trace` of
// `TracePacket`s), written packet by packet while the trace is read once more,
// so memory is O(live allocations + open ranges + threads + tracks), never
// O(events), plus one bundle of packets being compressed (PacketBundles).
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
//
// Size is what Perfetto's own SDK does to keep a TrackEvent small, on one
// trusted packet sequence:
//   - every repeated string is interned once (InternedData): event names,
//     argument names, and argument values such as range labels and payloads;
//     iids and track uuids are numbered from 1 in order of first use, so the
//     common ones are one-byte varints;
//   - timestamps are deltas on a clock of the sequence's own (id 64,
//     is_incremental, declared in the ClockSnapshot beside MONOTONIC and
//     REALTIME, and made every packet's clock by TracePacketDefaults); a
//     packet earlier than the one before it (threads take seq and time in
//     either order) gives its MONOTONIC time and clock id instead, which
//     leaves the delta clock where it was;
//   - an allocation's counter updates (its category and its device's total)
//     ride on its lane slice's begin and end as extra_counter_values, not as
//     packets of their own;
//   - a track, or a pair of counter tracks, that a run of events names is
//     named once by TrackEventDefaults instead (see "defaults" below).
// What is left is mostly content: on a training-like trace, of about 44
// bytes an event, 12 are the two counter values and 13 the arguments.
// Counters of the other memory level and those the recorder sampled stay
// TYPE_COUNTER events: they change without a slice to carry them.
//
// Then the packets are deflated, as Perfetto's tracing service does when a
// trace config asks for compression: runs of 256 KiB of packets, each the
// compressed_packets of one outer packet (PacketBundles). That content is
// repetitive (the same tracks, iids and sizes, small deltas): 44 -> 17.6
// bytes an event on the training-like trace, 27.8 -> 1.6 on alloc/free pairs,
// for about 0.35 us an event of deflate time, spent on threads of their own
// while the next bundles' packets are made (PacketBundles).
#include <algorithm>
#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "exchange/export_formats.h"
#include "exchange/export_model.h"
#include "exchange/export_output.h"
#include "exchange/perfetto/perfetto_packets.h"
#include "exchange/perfetto/perfetto_schema.h"
#include "exchange/perfetto/protobuf.h"

namespace psc {
namespace {

namespace pf = perfetto;
using pf::Arg;
using pf::CounterPair;
using pf::Interning;
using pf::LaneGroup;
using pf::SameValueRun;
using enum pf::Arg;
using pf::PacketBundles;

constexpr uint32_t kSequence = 1;
constexpr uint32_t kDeltaClock = pf::clock::kFirstSequenceClock;
// A device's counter tracks: one per category, then its total and the other level's.
constexpr size_t kTotalSlot = kCategoryCount, kOtherLevelSlot = kCategoryCount + 1;
constexpr size_t kMemorySlots = kCategoryCount + 2;

std::string device_label(int16_t device) { return device < 0 ? "host" : fmt::format("device {}", device); }

class PerfettoWriter : public BoundedVisitor, private ExportReplay::Listener {
 public:
  PerfettoWriter(const ExportModel& model, OutputFile& out, const ProcessPlacement& place = {})
      : BoundedVisitor(model.analysis.trace.status.events),
        model_(model),
        place_(place),
        sequence_(kSequence + static_cast<uint32_t>(place.index)),
        bundles_(out),
        replay_(model, this) {
    // A run's members: uuids of their own, and each sequence's times on
    // CLOCK_REALTIME (the run's clock: the member's monotonic time plus the
    // offset its header's pair of readings gives).
    next_uuid_ = 1 + (uint64_t{place.index} << 32);
    if (place.in_run) {
      shift_ns_ = place.time_offset_ns + static_cast<int64_t>(place.origin_realtime_ns);
      absolute_clock_ = pf::clock::kRealtime;
    }
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
      if (thread_uuid_[t] && thread_name(t) != described_name_[t]) describe_thread(t);
    bundles_.finish();
  }

 private:
  struct PeakMark {
    uint64_t seq;
    uint64_t time_ns;
    uint64_t bytes;
    std::string text;
  };

  // ---- packets ----------------------------------------------------------------

  void emit(const proto::Buffer& packet) { bundles_.add(packet); }

  // One packet clears the sequence's incremental state, sets its defaults and
  // declares its clocks, as Perfetto's SDK does when it starts a sequence.
  void write_preamble(const TraceMeta& meta) {
    preamble_written_ = true;
    proto::Buffer clocks, defaults, packet;
    const uint64_t start = placed(meta.header.monotonic_ns);
    if (!place_.in_run) add_clock(clocks, pf::clock::kMonotonic, meta.header.monotonic_ns, false);
    // In a run each member's times are already CLOCK_REALTIME: the snapshot
    // says so, and names no MONOTONIC, whose zero differs between machines.
    add_clock(clocks, pf::clock::kRealtime, place_.in_run ? start : meta.header.realtime_ns, false);
    add_clock(clocks, kDeltaClock, start, true);
    clocks.varint(pf::clock_snapshot::kPrimaryTraceClock, absolute_clock_);
    defaults.varint(pf::defaults::kTimestampClockId, kDeltaClock);
    packet.varint(pf::packet::kTrustedSequenceId, sequence_);
    packet.varint(pf::packet::kSequenceFlags, pf::packet::kIncrementalStateCleared);
    packet.message(pf::packet::kDefaults, defaults);
    packet.message(pf::packet::kClockSnapshot, clocks);
    emit(packet);
    clock_ns_ = start;  // the delta clock's first value

    proto::Buffer process, track;
    process_uuid_ = new_uuid();
    process.varint(pf::process::kPid, pid());
    std::string name = meta.command.empty() ? "peakscope trace" : meta.command;
    if (name.size() > 200) name = name.substr(0, 200) + "...";
    if (place_.in_run) name = place_.name + ": " + name;
    process.string(pf::process::kName, name);
    track.varint(pf::track::kUuid, process_uuid_);
    track.message(pf::track::kProcess, process);
    emit_descriptor(track);

    peaks_uuid_ = new_uuid();
    describe_track(peaks_uuid_, process_uuid_, "peaks");
  }

  static void add_clock(proto::Buffer& clocks, uint32_t id, uint64_t timestamp, bool incremental) {
    proto::Buffer clock;
    clock.varint(pf::clock::kId, id);
    clock.varint(pf::clock::kTimestamp, timestamp);
    if (incremental) clock.varint(pf::clock::kIsIncremental, 1);
    clocks.message(pf::clock_snapshot::kClocks, clock);
  }

  void emit_descriptor(const proto::Buffer& track) {
    packet_.clear();
    packet_.varint(pf::packet::kTrustedSequenceId, sequence_);
    packet_.varint(pf::packet::kSequenceFlags, pf::packet::kNeedsIncrementalState);
    packet_.message(pf::packet::kTrackDescriptor, track);
    emit(packet_);
  }

  // A TrackEvent packet: event_ holds the TrackEvent, interning_ what it names
  // for the first time.
  void emit_event(uint64_t trace_time_ns) {
    packet_.clear();
    const uint64_t time_ns = placed(trace_time_ns);
    if (time_ns >= clock_ns_) {
      packet_.varint(pf::packet::kTimestamp, time_ns - clock_ns_);
      clock_ns_ = time_ns;
    } else {  // before the last packet: a delta clock cannot go back
      packet_.varint(pf::packet::kTimestamp, time_ns);
      packet_.varint(pf::packet::kTimestampClockId, absolute_clock_);
    }
    packet_.varint(pf::packet::kTrustedSequenceId, sequence_);
    packet_.varint(pf::packet::kSequenceFlags, pf::packet::kNeedsIncrementalState);
    packet_.message(pf::packet::kTrackEvent, event_);
    if (!interning_.pending().empty()) {
      packet_.message(pf::packet::kInternedData, interning_.pending());
      interning_.clear_pending();
    }
    emit(packet_);
    if (defaults_pending_) {
      defaults_pending_ = false;
      write_defaults();
    }
  }

  // ---- interning ----------------------------------------------------------------

  uint64_t category_iid(Category c) { return interning_.category(c); }
  uint64_t name_iid(StringId id) { return interning_.name(id, *meta_); }
  uint64_t string_value_iid(StringId id) { return interning_.string_value(id, *meta_); }

  // value_field: DebugAnnotation's uint_value, pointer_value or string_value_iid.
  void annotate(Arg arg, uint32_t value_field, uint64_t value) {
    scratch_.clear();
    scratch_.varint(pf::annotation::kNameIid, interning_.arg(arg));
    scratch_.varint(value_field, value);
    event_.message(pf::event::kDebugAnnotations, scratch_);
  }

  // ---- tracks -----------------------------------------------------------------

  uint64_t new_uuid() { return next_uuid_++; }
  uint32_t pid() const {
    if (place_.in_run) return place_.pid;
    return meta_->header.pid ? meta_->header.pid : 1;
  }
  // A time of the trace on the clock the file uses: its own MONOTONIC, or
  // in a run CLOCK_REALTIME.
  uint64_t placed(uint64_t time_ns) const {
    const int64_t t = static_cast<int64_t>(time_ns) + shift_ns_;
    return t > 0 ? static_cast<uint64_t>(t) : 0;
  }

  void describe_track(uint64_t uuid, uint64_t parent, std::string_view name) {
    proto::Buffer track;
    track.varint(pf::track::kUuid, uuid);
    track.varint(pf::track::kParentUuid, parent);
    track.string(pf::track::kName, name);
    emit_descriptor(track);
  }

  std::string thread_name(uint32_t t) const {
    if (t < meta_->threads.size() && !meta_->threads[t].name.empty()) return meta_->threads[t].name;
    return fmt::format("thread {}", t);
  }

  void describe_thread(uint32_t t) {
    uint64_t tid = t < meta_->threads.size() ? meta_->threads[t].os_tid : 0;
    if (tid == 0 || tid > 0x7fffffff) tid = 0x70000000u + t;  // unknown: a tid no real thread has
    proto::Buffer thread, track;
    thread.varint(pf::thread::kPid, pid());
    thread.varint(pf::thread::kTid, tid);
    const std::string name = thread_name(t);
    thread.string(pf::thread::kName, name);
    track.varint(pf::track::kUuid, thread_uuid_[t]);
    track.varint(pf::track::kParentUuid, process_uuid_);
    track.message(pf::track::kThread, thread);
    emit_descriptor(track);
    described_name_[t] = name;
  }

  uint64_t thread_track(uint32_t t) {
    if (t >= thread_uuid_.size()) {
      thread_uuid_.resize(t + 1, 0);
      described_name_.resize(t + 1);
      depth_.resize(t + 1, 0);
    }
    if (!thread_uuid_[t]) {
      thread_uuid_[t] = new_uuid();
      describe_thread(t);
    }
    return thread_uuid_[t];
  }

  uint64_t memory_track(int16_t device, size_t slot) {
    const size_t d = static_cast<size_t>(device + 1);
    if (d >= memory_uuid_.size()) memory_uuid_.resize(d + 1, {});
    uint64_t& uuid = memory_uuid_[d][slot];
    if (uuid) return uuid;
    uuid = new_uuid();
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
    describe_counter(uuid, name, true);
    return uuid;
  }

  void describe_counter(uint64_t uuid, std::string_view name, bool bytes) {
    proto::Buffer counter, track;
    if (bytes) counter.varint(pf::counter::kUnit, pf::counter::kUnitSizeBytes);
    track.varint(pf::track::kUuid, uuid);
    track.varint(pf::track::kParentUuid, process_uuid_);
    track.string(pf::track::kName, name);
    track.message(pf::track::kCounter, counter);
    emit_descriptor(track);
  }

  uint64_t lane(LaneGroup& group, uint32_t index, std::string_view group_name) {
    if (!group.uuid) {
      group.uuid = new_uuid();
      describe_track(group.uuid, process_uuid_, group_name);
    }
    while (group.lanes.size() <= index) {
      group.lanes.push_back(new_uuid());
      describe_track(group.lanes.back(), group.uuid, fmt::format("lane {}", group.lanes.size() - 1));
    }
    return group.lanes[index];
  }
  uint64_t lane_track(int16_t device, uint32_t index) {
    const size_t d = static_cast<size_t>(device + 1);
    if (d >= lane_groups_.size()) lane_groups_.resize(d + 1);
    LaneGroup& group = lane_groups_[d];
    if (group.uuid && index < group.lanes.size()) return group.lanes[index];  // the hot path: no name to format
    return lane(group, index, fmt::format("allocations ({})", device_label(device)));
  }

  // ---- events -----------------------------------------------------------------

  void begin_event(uint32_t type, uint64_t track) {
    event_.clear();
    event_.varint(pf::event::kType, type);
    if (track == default_track_) return;
    event_.varint(pf::event::kTrackUuid, track);
    if (track_run_.extend(track)) set_default(default_track_, track);
  }
  void slice_end(uint64_t track, uint64_t time_ns) {
    begin_event(pf::event::kSliceEnd, track);
    emit_event(time_ns);
  }
  void counter(uint64_t track, uint64_t value, uint64_t time_ns) {
    begin_event(pf::event::kCounter, track);
    event_.int64(pf::event::kCounterValue, static_cast<int64_t>(value));
    emit_event(time_ns);
  }

  void push(const Event& e) {
    const uint64_t track = thread_track(e.thread);
    ++depth_[e.thread];
    begin_event(pf::event::kSliceBegin, track);
    event_.varint(pf::event::kNameIid, name_iid(e.name));
    emit_event(e.time_ns);
  }
  void pop(const Event& e) {
    const uint64_t track = thread_track(e.thread);
    if (depth_[e.thread] == 0) return;  // a pop with nothing open: nothing to close
    --depth_[e.thread];
    slice_end(track, e.time_ns);
  }
  void mark(const Event& e) {
    begin_event(pf::event::kInstant, thread_track(e.thread));
    event_.varint(pf::event::kNameIid, name_iid(e.name));
    if (!e.payload.empty()) annotate(kArgPayload, pf::annotation::kStringIid, string_value_iid(e.payload));
    emit_event(e.time_ns);
  }
  void range_start(const Event& e) {
    if (open_ranges_.count(e.address)) return;  // a second start of an open id: the analysis ignores it too
    uint32_t index;
    if (free_range_lanes_.empty()) {
      index = next_range_lane_++;
    } else {
      std::pop_heap(free_range_lanes_.begin(), free_range_lanes_.end(), std::greater<uint32_t>());
      index = free_range_lanes_.back();
      free_range_lanes_.pop_back();
    }
    open_ranges_[e.address] = index;
    begin_event(pf::event::kSliceBegin, lane(range_lanes_, index, "start/end ranges"));
    event_.varint(pf::event::kNameIid, name_iid(e.name));
    if (!e.payload.empty()) annotate(kArgPayload, pf::annotation::kStringIid, string_value_iid(e.payload));
    emit_event(e.time_ns);
  }
  void range_end(const Event& e) {
    auto it = open_ranges_.find(e.address);
    if (it == open_ranges_.end()) return;
    const uint32_t index = it->second;
    open_ranges_.erase(it);
    free_range_lanes_.push_back(index);
    std::push_heap(free_range_lanes_.begin(), free_range_lanes_.end(), std::greater<uint32_t>());
    slice_end(lane(range_lanes_, index, "start/end ranges"), e.time_ns);
  }
  void sampled_counter(const Event& e) {
    if (e.name.value >= counter_uuid_.size()) counter_uuid_.resize(size_t{e.name.value} + 1, 0);
    uint64_t& uuid = counter_uuid_[e.name.value];
    if (!uuid) {
      uuid = new_uuid();
      const std::string_view name = meta_->string(e.name);
      describe_counter(uuid, name.empty() ? std::string_view("counter") : name, false);
    }
    counter(uuid, e.bytes, e.time_ns);
  }
  void on_other_level(const Event& e) override {
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
    begin_event(pf::event::kInstant, peaks_uuid_);
    event_.string(pf::event::kName, m.text);  // each one different: interning would only add an iid
    annotate(kArgBytes, pf::annotation::kUint, m.bytes);
    emit_event(m.time_ns);
  }

  void on_alloc(const ExportReplay::Allocation& a, const Event& e) override {
    const uint64_t track = lane_track(a.device, a.lane);
    const MemoryCounters counters = memory_counters(a);  // described before the event names them
    begin_event(pf::event::kSliceBegin, track);
    event_.varint(pf::event::kNameIid, category_iid(a.category));
    annotate(kArgBytes, pf::annotation::kUint, a.bytes);
    annotate(kArgAddress, pf::annotation::kPointer, a.address);
    if (!a.range.empty()) annotate(kArgRange, pf::annotation::kStringIid, string_value_iid(a.range));
    add_counters(counters);
    emit_event(e.time_ns);
  }
  void on_end(const ExportReplay::Allocation& a, const Event& at, ExportReplay::EndKind) override {
    const uint64_t track = lane_track(a.device, a.lane);
    const MemoryCounters counters = memory_counters(a);
    begin_event(pf::event::kSliceEnd, track);
    add_counters(counters);
    emit_event(at.time_ns);
  }

  // The two counters an allocation moves, with their values after it moved them.
  struct MemoryCounters {
    uint64_t category_track, total_track;
    uint64_t category_bytes, total_bytes;
  };
  MemoryCounters memory_counters(const ExportReplay::Allocation& a) {
    const size_t slot = static_cast<size_t>(a.category);
    return {memory_track(a.device, slot), memory_track(a.device, kTotalSlot), replay_.live(a.device)[slot],
            replay_.live_total(a.device)};
  }
  // The values, and the tracks unless the sequence's TrackEventDefaults name
  // them. Not packed: TrackEvent declares both fields plain repeated (proto2),
  // and trace_processor's decoder reads them that way.
  void add_counters(const MemoryCounters& c) {
    const CounterPair pair{c.category_track, c.total_track};
    if (!(pair == default_counters_)) {
      event_.varint(pf::event::kExtraCounterTrackUuids, c.category_track);
      event_.varint(pf::event::kExtraCounterTrackUuids, c.total_track);
      if (counters_run_.extend(pair)) set_default(default_counters_, pair);
    }
    event_.int64(pf::event::kExtraCounterValues, static_cast<int64_t>(c.category_bytes));
    event_.int64(pf::event::kExtraCounterValues, static_cast<int64_t>(c.total_bytes));
  }

  // ---- defaults ---------------------------------------------------------------
  //
  // An event leaves out its track, and the two counter tracks an allocation
  // moves, when the sequence's TrackEventDefaults name them. Naming them costs
  // 2 to 6 bytes an event, a TracePacketDefaults about 20 once: so after a
  // run of SameValueRun::kDefaultsAfter events naming the same other value,
  // that value becomes the default (from the next packet on; the event in
  // hand names its own).
  // Runs are common: a short-lived allocation takes the lowest free lane,
  // which the next one takes again. New defaults replace the old ones whole;
  // interned data stays (trace_processor starts a new generation of the
  // sequence's state, same interning).
  template <typename T>
  void set_default(T& slot, const T& value) {
    slot = value;
    defaults_pending_ = true;  // written after the event in hand: its packet is being built
  }
  void write_defaults() {
    proto::Buffer event_defaults, defaults;
    if (default_track_) event_defaults.varint(pf::track_event_defaults::kTrackUuid, default_track_);
    if (default_counters_.total_track) {
      event_defaults.varint(pf::track_event_defaults::kExtraCounterTrackUuids, default_counters_.category_track);
      event_defaults.varint(pf::track_event_defaults::kExtraCounterTrackUuids, default_counters_.total_track);
    }
    defaults.varint(pf::defaults::kTimestampClockId, kDeltaClock);
    defaults.message(pf::defaults::kTrackEventDefaults, event_defaults);
    packet_.clear();
    packet_.varint(pf::packet::kTrustedSequenceId, sequence_);
    packet_.varint(pf::packet::kSequenceFlags, pf::packet::kNeedsIncrementalState);
    packet_.message(pf::packet::kDefaults, defaults);
    emit(packet_);
  }

  const ExportModel& model_;
  ProcessPlacement place_;
  uint32_t sequence_;
  int64_t shift_ns_ = 0;                             // trace time -> the file's clock
  uint32_t absolute_clock_ = pf::clock::kMonotonic;  // of timestamps not on the delta clock
  PacketBundles bundles_;
  ExportReplay replay_;
  const TraceMeta* meta_ = nullptr;
  bool preamble_written_ = false;
  uint64_t clock_ns_ = 0;  // the delta clock's value: the last delta-encoded packet's time
  proto::Buffer packet_, event_, scratch_;
  Interning interning_;
  uint64_t default_track_ = 0;  // TrackEventDefaults; 0 and {0, 0}: none
  CounterPair default_counters_;
  SameValueRun<uint64_t> track_run_;
  SameValueRun<CounterPair> counters_run_;
  bool defaults_pending_ = false;
  uint64_t next_uuid_ = 1;
  uint64_t process_uuid_ = 0, peaks_uuid_ = 0;
  std::vector<uint64_t> thread_uuid_;  // by thread index; 0 until described
  std::vector<std::string> described_name_;
  std::vector<uint32_t> depth_;
  std::vector<std::array<uint64_t, kMemorySlots>> memory_uuid_;  // by device + 1, slot
  std::vector<LaneGroup> lane_groups_;                           // by device + 1
  LaneGroup range_lanes_;
  std::unordered_map<uint64_t, uint32_t> open_ranges_;
  std::vector<uint32_t> free_range_lanes_;
  uint32_t next_range_lane_ = 0;
  std::vector<uint64_t> counter_uuid_;  // sampled counters, by name
  MemoryReplay other_replay_;
  std::vector<uint64_t> other_live_;
  std::vector<PeakMark> marks_;
  size_t next_mark_ = 0;
};

// A sequence per member of a run, one after the other in the file:
// trace_processor sorts every sequence's packets onto the one timeline.
class PerfettoExporter : public MembersExporter {
 public:
  PerfettoExporter()
      : MembersExporter(
            "perfetto",
            "Perfetto protobuf trace (ui.perfetto.dev): ranges, live bytes by category, allocation lanes, peaks") {}

 private:
  void write_members(const std::vector<ExportMember>& members, const Run*,
                     const ExportOptions& options) const override {
    LazyOutput out(options.output);
    replay_members(members, {}, options.warn, [&](const ExportModel& model, const ProcessPlacement& place) {
      return std::make_unique<PerfettoWriter>(model, out.get(), place);
    });
    out.commit();
  }
};

}  // namespace

const Exporter& perfetto_exporter() {
  static const PerfettoExporter exporter;
  return exporter;
}

}  // namespace psc
