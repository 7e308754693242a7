// The Perfetto export decoded back with a protobuf reader of our own (no
// protobuf library, no trace_processor on Debian): the file must be a valid
// `Trace` whose packets are all compressed_packets bundles (zlib, as
// Perfetto's tracing service writes them), which are inflated and read in
// their place as trace_processor does; then every event must name a described
// track and interned names, its delta-encoded timestamps must come back to the
// trace's own, and the figures it carries must be the analysis' figures. When
// `protoc` is installed (Debian: protobuf-compiler), it decodes the file and
// the inflated packets too, against a subset of Perfetto's schema written
// here, and must find no field it does not know.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "exchange/export_model.h"
#include "exchange/exporter.h"
#include "tests/support/export_fixture.h"
#include "tests/support/protobuf_decode.h"
#include "traces/reader.h"
#include "traces/writer.h"

namespace psc {
namespace {

// ---- the decoded trace -----------------------------------------------------------

struct Slice {
  uint64_t track;
  uint64_t name_iid;
  std::string name;
  uint64_t time;
  std::map<std::string, uint64_t> uints;
  std::map<std::string, std::string> strings;
};

// What TracePacketDefaults set for the packets after it (field numbers as in
// TracePacketDefaults / TrackEventDefaults).
struct Defaults {
  uint32_t clock = 0;
  uint64_t track = 0;
  std::vector<uint64_t> counter_tracks;
};

struct Decoded {
  std::vector<Bundle> bundles;  // the file's outer packets that were compressed_packets
  uint64_t plain_packets = 0;   // and those that were not
  uint64_t packets = 0;         // the packets read, bundles inflated

  std::map<uint64_t, std::string> track_names;  // uuid -> name ("" when unnamed)
  std::set<uint64_t> counter_tracks;
  std::map<uint64_t, std::string> event_names, annotation_names, string_values;  // the three iid tables
  std::vector<Slice> begins, instants;
  std::vector<uint64_t> event_times;  // every TrackEvent's absolute (MONOTONIC) time, in file order
  uint64_t ends = 0;
  std::map<uint64_t, int64_t> open_per_track;
  std::map<uint64_t, int64_t> counter_value;          // last value per track
  std::map<uint64_t, int64_t> counter_value_at_peak;  // values when the trace peak instant came
  bool saw_clock_snapshot = false, saw_clear = false, saw_incremental_clock = false;
  uint64_t primary_clock = 0;
  uint64_t explicit_clock_packets = 0;  // packets that named their clock (a step back in time)
  uint64_t defaults_packets = 0;
  uint64_t events_on_default_track = 0, events_with_default_counters = 0;
  std::vector<std::string> errors;
};

// Clocks as trace_processor reads a ClockSnapshot: a packet's timestamp on
// clock C is converted to MONOTONIC through the snapshot; on an incremental
// clock it is a delta from that clock's previous value.
struct Clocks {
  std::map<uint64_t, uint64_t> snapshot;  // clock id -> its reading in the snapshot
  std::map<uint64_t, uint64_t> now;       // incremental clocks: their current value
  bool to_monotonic(uint64_t clock, uint64_t timestamp, uint64_t* out) {
    if (clock == 3) {
      *out = timestamp;
      return true;
    }
    if (!snapshot.count(clock) || !snapshot.count(3)) return false;
    if (now.count(clock)) timestamp = now[clock] += timestamp;
    *out = timestamp - snapshot[clock] + snapshot[3];
    return true;
  }
};

void intern(std::map<uint64_t, std::string>& table, uint64_t iid, const std::string& value, Decoded& d) {
  if (iid == 0) d.errors.push_back("iid 0 interned");
  const auto [it, inserted] = table.emplace(iid, value);
  if (!inserted && it->second != value) d.errors.push_back("iid " + std::to_string(iid) + " interned twice");
}

Decoded decode_trace(const std::string& file) {
  Decoded d;
  Defaults defaults;
  Clocks clocks;
  const Expanded expanded = expand(file);
  d.bundles = expanded.bundles;
  d.plain_packets = expanded.plain_packets;
  for (const Field& packet_field : decode(expanded.packets)) {
    if (packet_field.number != 1 || packet_field.wire != 2) {
      d.errors.push_back("top-level field is not Trace.packet");
      continue;
    }
    ++d.packets;
    const std::vector<Field> packet = decode(packet_field.bytes);
    if (value_of(packet, 10) != 1) d.errors.push_back("packet off trusted sequence 1");
    const uint64_t flags = value_of(packet, 13);
    if (flags & 1) {
      if (d.saw_clear) d.errors.push_back("incremental state cleared twice");
      d.saw_clear = true;
      defaults = {};
    } else if (!(flags & 2)) {
      d.errors.push_back("packet after TracePacketDefaults without SEQ_NEEDS_INCREMENTAL_STATE");
    }
    if (const Field* defaults_field = find(packet, 59)) {
      ++d.defaults_packets;
      const std::vector<Field> td = decode(defaults_field->bytes);
      defaults = {};
      defaults.clock = static_cast<uint32_t>(value_of(td, 58));
      if (const Field* event_defaults = find(td, 11)) {
        const std::vector<Field> ted = decode(event_defaults->bytes);
        defaults.track = value_of(ted, 11);
        defaults.counter_tracks = values_of(ted, 31);
      }
    }
    if (const Field* clock = find(packet, 6)) {
      d.saw_clock_snapshot = true;
      const std::vector<Field> snapshot = decode(clock->bytes);
      d.primary_clock = value_of(snapshot, 2);
      for (const Field& c : snapshot) {
        if (c.number != 1) continue;
        const std::vector<Field> cf = decode(c.bytes);
        clocks.snapshot[value_of(cf, 1)] = value_of(cf, 2);
        if (value_of(cf, 3)) {
          if (value_of(cf, 1) < 64) d.errors.push_back("a builtin clock declared incremental");
          clocks.now[value_of(cf, 1)] = value_of(cf, 2);
          d.saw_incremental_clock = true;
        }
      }
    }
    if (const Field* interned = find(packet, 12)) {
      for (const Field& entry : decode(interned->bytes)) {
        const std::vector<Field> e = decode(entry.bytes);
        const uint64_t iid = value_of(e, 1);
        const std::string name(find(e, 2) ? find(e, 2)->bytes : "");
        if (entry.number == 2) intern(d.event_names, iid, name, d);
        if (entry.number == 3) intern(d.annotation_names, iid, name, d);
        if (entry.number == 29) intern(d.string_values, iid, name, d);
      }
    }
    if (const Field* td = find(packet, 60)) {
      const std::vector<Field> track = decode(td->bytes);
      const uint64_t uuid = value_of(track, 1);
      std::string name = find(track, 2) ? std::string(find(track, 2)->bytes) : "";
      if (const Field* thread = find(track, 4)) {
        const std::vector<Field> t = decode(thread->bytes);
        if (find(t, 5)) name = std::string(find(t, 5)->bytes);
      }
      if (find(track, 5) && !d.track_names.count(value_of(track, 5)))
        d.errors.push_back("track " + std::to_string(uuid) + " has an undescribed parent");
      d.track_names[uuid] = name;
      if (find(track, 8)) d.counter_tracks.insert(uuid);
    }
    if (const Field* te = find(packet, 11)) {
      if (!d.saw_clear) d.errors.push_back("track event before the incremental state was cleared");
      if (!(flags & 2)) d.errors.push_back("track event without SEQ_NEEDS_INCREMENTAL_STATE");
      const std::vector<Field> event = decode(te->bytes);
      uint64_t track = value_of(event, 11);
      if (!find(event, 11)) {
        track = defaults.track;
        ++d.events_on_default_track;
      }
      const uint64_t type = value_of(event, 9);
      if (!d.track_names.count(track)) d.errors.push_back("event on undescribed track " + std::to_string(track));
      Slice s;
      s.track = track;
      const uint32_t clock =
          find(packet, 58) ? static_cast<uint32_t>(value_of(packet, 58)) : (defaults.clock ? defaults.clock : 3);
      if (find(packet, 58)) ++d.explicit_clock_packets;
      if (!find(packet, 8)) d.errors.push_back("track event without a timestamp");
      if (!clocks.to_monotonic(clock, value_of(packet, 8), &s.time))
        d.errors.push_back("timestamp on clock " + std::to_string(clock) + ", which no snapshot declares");
      d.event_times.push_back(s.time);
      if (const Field* iid = find(event, 10)) {
        s.name_iid = iid->value;
        if (!d.event_names.count(iid->value))
          d.errors.push_back("name iid " + std::to_string(iid->value) + " used before it was interned");
        s.name = d.event_names[iid->value];
      } else if (const Field* name = find(event, 23)) {
        s.name = std::string(name->bytes);
      }
      for (const Field& f : event) {
        if (f.number != 4) continue;
        const std::vector<Field> a = decode(f.bytes);
        std::set<uint32_t> numbers;
        for (const Field& af : a)
          if (!numbers.insert(af.number).second) d.errors.push_back("a debug annotation repeats a field");
        const uint64_t name_iid = value_of(a, 1);
        if (!d.annotation_names.count(name_iid)) d.errors.push_back("annotation name not interned");
        const std::string key = d.annotation_names[name_iid];
        if (find(a, 3)) s.uints[key] = value_of(a, 3);
        if (find(a, 7)) s.uints[key] = value_of(a, 7);
        if (find(a, 6)) s.strings[key] = std::string(find(a, 6)->bytes);
        if (find(a, 17)) {
          if (!d.string_values.count(value_of(a, 17))) d.errors.push_back("string value iid used before interned");
          s.strings[key] = d.string_values[value_of(a, 17)];
        }
      }
      // Extra counter values: for the event's own tracks, else the defaults'.
      const std::vector<uint64_t> extra = values_of(event, 12);
      std::vector<uint64_t> extra_tracks = values_of(event, 31);
      if (extra_tracks.empty() && !extra.empty()) {
        extra_tracks = defaults.counter_tracks;
        ++d.events_with_default_counters;
      }
      if (extra.size() > extra_tracks.size()) d.errors.push_back("more extra counter values than tracks");
      for (size_t i = 0; i < extra.size() && i < extra_tracks.size(); ++i) {
        if (!d.counter_tracks.count(extra_tracks[i])) d.errors.push_back("extra counter value on a non-counter track");
        d.counter_value[extra_tracks[i]] = static_cast<int64_t>(extra[i]);
      }
      if (type != 4 && d.counter_tracks.count(track)) d.errors.push_back("a slice or instant on a counter track");
      switch (type) {
        case 1:
          d.begins.push_back(s);
          ++d.open_per_track[track];
          break;
        case 2:
          ++d.ends;
          if (--d.open_per_track[track] < 0) d.errors.push_back("slice end without a begin");
          break;
        case 3:
          d.instants.push_back(s);
          if (d.track_names[track] == "peaks" && s.name.rfind("peak:", 0) == 0)
            d.counter_value_at_peak = d.counter_value;
          break;
        case 4:
          if (!d.counter_tracks.count(track)) d.errors.push_back("counter value on a non-counter track");
          d.counter_value[track] = static_cast<int64_t>(value_of(event, 30));
          break;
        default: d.errors.push_back("unknown event type");
      }
    }
  }
  return d;
}

// A text dump for the golden file: one line per packet, nested messages in
// braces, where the schema below says which fields are messages.
void dump_message(std::string_view data, const std::string& type, std::string& out) {
  static const std::map<std::string, std::map<uint32_t, std::string>> kNested = {
      {"TracePacket",
       {{6, "ClockSnapshot"}, {11, "TrackEvent"}, {12, "InternedData"}, {59, "Defaults"}, {60, "Track"}}},
      {"ClockSnapshot", {{1, "Clock"}}},
      {"Defaults", {{11, "EventDefaults"}}},
      {"Track", {{3, "Process"}, {4, "Thread"}, {8, "Counter"}}},
      {"TrackEvent", {{4, "Annotation"}}},
      {"InternedData", {{2, "Name"}, {3, "Name"}, {29, "Name"}}},
  };
  const auto it = kNested.find(type);
  bool first = true;
  for (const Field& f : decode(data)) {
    out += first ? "" : " ";
    first = false;
    out += std::to_string(f.number);
    if (f.wire == 0) {
      out += "=" + std::to_string(f.value);
    } else if (it != kNested.end() && it->second.count(f.number)) {
      out += "{";
      dump_message(f.bytes, it->second.at(f.number), out);
      out += "}";
    } else {
      out += "=\"" + std::string(f.bytes) + "\"";
    }
  }
}

// A bundle is a line of its own, "50{N packets}", then its packets: the
// compressed bytes themselves depend on zlib's version.
std::string dump_trace(const std::string& file) {
  std::string out;
  for (const Field& outer : decode(file)) {
    const std::vector<Field> fields = decode(outer.bytes);
    const Field* compressed = find(fields, 50);
    if (!compressed) {
      dump_message(outer.bytes, "TracePacket", out);
      out += "\n";
      continue;
    }
    const std::string inflated = inflate_zlib(compressed->bytes);
    const std::vector<Field> packets = decode(inflated);
    out += "50{" + std::to_string(packets.size()) + " packets}\n";
    for (const Field& packet : packets) {
      dump_message(packet.bytes, "TracePacket", out);
      out += "\n";
    }
  }
  return out;
}

std::string export_perfetto(const std::string& trace, const std::string& output) {
  ExportOptions o;
  o.trace = trace;
  o.output = output;
  find_exporter("perfetto")->write(o);
  return test::read_file(output);
}

class PerfettoExport : public ::testing::Test {
 protected:
  void SetUp() override {
    trace_ = dir_.file("fixture.pstrace");
    out_ = dir_.file("fixture.pftrace");
    test::write_fixture_trace(trace_);
    file_ = export_perfetto(trace_, out_);
    packets_ = expand(file_).packets;
    analysis_ = analyze_trace(trace_);
    decoded_ = decode_trace(file_);
  }
  test::TempDir dir_;
  std::string trace_, out_, file_;
  std::string packets_;  // file_'s packets, bundles inflated
  Analysis analysis_;
  Decoded decoded_;
};

TEST_F(PerfettoExport, IsAWellFormedTrackEventTrace) {
  EXPECT_TRUE(decoded_.errors.empty()) << decoded_.errors.front();
  EXPECT_GT(decoded_.packets, 50u);
  EXPECT_TRUE(decoded_.saw_clock_snapshot);
  EXPECT_TRUE(decoded_.saw_incremental_clock);
  EXPECT_EQ(decoded_.primary_clock, 3u);  // MONOTONIC
}

// As Perfetto's tracing service writes a compressed trace: every top-level
// packet holds only compressed_packets, a zlib stream of whole packets.
TEST_F(PerfettoExport, EveryOuterPacketIsCompressedPackets) {
  EXPECT_EQ(decoded_.plain_packets, 0u);
  ASSERT_EQ(decoded_.bundles.size(), 1u);  // the fixture's few KiB of packets
  const Bundle& b = decoded_.bundles.front();
  EXPECT_TRUE(b.only_field);
  EXPECT_TRUE(b.zlib_header);
  EXPECT_EQ(b.outer_bytes, file_.size());
  EXPECT_EQ(b.packets, decoded_.packets);
  EXPECT_LT(file_.size(), b.inflated_bytes);
}

TEST_F(PerfettoExport, ThreadsCarryTheirRangesAsSlices) {
  std::map<std::string, int> by_thread;
  for (const Slice& s : decoded_.begins)
    if (decoded_.track_names[s.track] == "MainThread" || decoded_.track_names[s.track] == "autograd-worker")
      ++by_thread[decoded_.track_names[s.track] + ":" + s.name];
  EXPECT_EQ(by_thread["MainThread:wave"], 2);
  EXPECT_EQ(by_thread["MainThread:forward/layer.1"], 2);
  EXPECT_EQ(by_thread["autograd-worker:backward/layer.0"], 2);
  EXPECT_EQ(by_thread["autograd-worker:recompute/layer.2"], 2);
  EXPECT_EQ(by_thread["MainThread:step 0"], 0);  // start/end ranges go on lanes of their own
  int step = 0, loss = 0;
  for (const Slice& s : decoded_.begins)
    step += s.name == "step 0" && s.strings.count("payload") && s.strings.at("payload") == "{\"step\":0}";
  for (const Slice& s : decoded_.instants)
    loss += s.name == "loss" && s.strings.count("payload") && s.strings.at("payload") == "{\"value\": 2.5}";
  EXPECT_EQ(step, 1);
  EXPECT_EQ(loss, 2);
  for (const auto& [track, open] : decoded_.open_per_track) {
    if (decoded_.track_names[track] == "MainThread") {
      EXPECT_EQ(open, 0);
    }
  }
}

TEST_F(PerfettoExport, EveryAllocationIsASliceOnALane) {
  uint64_t lane_slices = 0, bytes = 0;
  std::map<std::string, int> by_range;
  for (const Slice& s : decoded_.begins)
    if (decoded_.track_names[s.track].rfind("lane ", 0) == 0 && s.uints.count("bytes")) {
      ++lane_slices;
      bytes += s.uints.at("bytes");
      EXPECT_TRUE(s.uints.count("address"));
      if (s.strings.count("range")) ++by_range[s.strings.at("range")];
    }
  EXPECT_EQ(lane_slices, analysis_.memory.counts.allocs);
  EXPECT_EQ(bytes, analysis_.memory.counts.allocated_bytes);
  // The range labels come back through InternedData.debug_annotation_string_values.
  EXPECT_EQ(by_range["forward/layer.0"], 4);  // per wave: a temporary and a boundary
  EXPECT_EQ(by_range["head/embedding"], 2);
  int64_t open = 0;
  for (const auto& [track, n] : decoded_.open_per_track)
    if (decoded_.track_names[track].rfind("lane ", 0) == 0) open += n;
  // Start/end lanes are named "lane N" too, but every start/end range closed.
  EXPECT_EQ(static_cast<uint64_t>(open), analysis_.memory.live_at_end_allocations);
}

TEST_F(PerfettoExport, CategoryCountersAddUpToTheReportAtThePeak) {
  ASSERT_FALSE(decoded_.counter_value_at_peak.empty());
  for (int c = 0; c < kCategoryCount; ++c) {
    const std::string suffix = std::string(category_name(static_cast<Category>(c))) + " (";
    int64_t sum = 0;
    for (const auto& [track, value] : decoded_.counter_value_at_peak)
      if (decoded_.track_names[track].rfind(suffix, 0) == 0) sum += value;
    EXPECT_EQ(static_cast<uint64_t>(sum), analysis_.peak.live.category_bytes[static_cast<size_t>(c)])
        << category_name(static_cast<Category>(c));
  }
  int64_t total = 0;
  for (const auto& [track, value] : decoded_.counter_value_at_peak)
    if (decoded_.track_names[track].rfind("live bytes (allocated", 0) == 0) total += value;
  EXPECT_EQ(static_cast<uint64_t>(total), analysis_.peak.bytes);
}

TEST_F(PerfettoExport, MarksThePeakOfTheTraceAndOfEachWave) {
  std::vector<const Slice*> peaks;
  for (const Slice& s : decoded_.instants)
    if (decoded_.track_names[s.track] == "peaks") peaks.push_back(&s);
  ASSERT_EQ(peaks.size(), analysis_.waves.size() + 1);
  std::set<uint64_t> want = {analysis_.peak.bytes};
  for (const WaveReport& w : analysis_.waves) want.insert(w.peak.bytes);
  for (const Slice* s : peaks) EXPECT_TRUE(want.count(s->uints.at("bytes"))) << s->name;
  bool trace_peak = false;
  for (const Slice* s : peaks)
    trace_peak |= s->time == analysis_.peak.site.time_ns && s->uints.at("bytes") == analysis_.peak.bytes;
  EXPECT_TRUE(trace_peak);
}

TEST_F(PerfettoExport, KeepsTheOtherLevelAndSampledCounters) {
  bool reserved = false, sampled = false;
  for (const auto& [track, name] : decoded_.track_names) {
    reserved |= name.rfind("live bytes (reserved", 0) == 0;
    sampled |= name == "reserved_bytes";
  }
  EXPECT_TRUE(reserved);
  EXPECT_TRUE(sampled);
}

TEST_F(PerfettoExport, DeltaTimestampsComeBackToTheTracesTimes) {
  const LoadedTrace loaded = load_trace(trace_);
  std::set<uint64_t> times = {loaded.meta.header.monotonic_ns};
  std::vector<uint64_t> main_pushes;
  std::map<std::pair<uint64_t, uint64_t>, std::set<uint64_t>> alloc_times;  // (address, bytes) -> times
  for (const Event& e : loaded.events) {
    times.insert(e.time_ns);
    if (e.kind == EventKind::kRangePush && e.thread == 0) main_pushes.push_back(e.time_ns);
    if (e.kind == EventKind::kAlloc) alloc_times[{e.address, e.bytes}].insert(e.time_ns);
  }
  for (uint64_t t : decoded_.event_times) EXPECT_TRUE(times.count(t)) << t << " is no event's time";
  std::vector<uint64_t> main_begins;
  for (const Slice& s : decoded_.begins) {
    if (decoded_.track_names[s.track] == "MainThread") main_begins.push_back(s.time);
    if (s.uints.count("address")) {
      const std::pair<uint64_t, uint64_t> key(s.uints.at("address"), s.uints.at("bytes"));
      EXPECT_TRUE(alloc_times[key].count(s.time)) << s.name;
    }
  }
  EXPECT_EQ(main_begins, main_pushes);
}

TEST_F(PerfettoExport, InternsEachRepeatedStringOnce) {
  auto occurrences = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t at = packets_.find(needle); at != std::string::npos; at = packets_.find(needle, at + 1)) ++n;
    return n;
  };
  // A slice name (event_names) and a range argument (debug_annotation_string_values):
  // once in each table, however many slices and allocations name it.
  EXPECT_EQ(occurrences("forward/layer.0"), 2u);
  std::set<std::pair<int, std::string>> distinct;  // no table holds a string twice
  for (const auto& [iid, s] : decoded_.event_names) distinct.insert({2, s});
  for (const auto& [iid, s] : decoded_.annotation_names) distinct.insert({3, s});
  for (const auto& [iid, s] : decoded_.string_values) distinct.insert({29, s});
  EXPECT_EQ(distinct.size(),
            decoded_.event_names.size() + decoded_.annotation_names.size() + decoded_.string_values.size());
  EXPECT_EQ(occurrences("address"), 1u);
}

TEST_F(PerfettoExport, MatchesTheGoldenFile) {
  EXPECT_TRUE(test::matches_golden("fixture.perfetto.txt", dump_trace(file_)));
}

TEST_F(PerfettoExport, NotATraceIsAnInputError) {
  const std::string bogus = dir_.file("bogus.pstrace");
  test::write_file(bogus, "this is not a trace");
  ExportOptions o;
  o.trace = bogus;
  o.output = dir_.file("bogus.pftrace");
  EXPECT_THROW(find_exporter("perfetto")->write(o), TraceError);
  EXPECT_FALSE(std::filesystem::exists(o.output));
}

// Threads take seq and time in either order, so a later event can be earlier:
// the delta clock cannot step back, that packet gives its MONOTONIC time.
TEST(PerfettoExportClock, AnEarlierEventAfterALaterOneKeepsItsTime) {
  test::TempDir dir;
  const std::string trace = dir.file("back.pstrace");
  TraceWriterOptions options;
  options.monotonic_ns = 5'000'000;
  TraceWriter writer(trace, options);
  const uint64_t times[] = {5'001'000, 5'003'000, 5'002'500, 5'002'900, 5'004'000, 5'003'100};
  uint64_t seq = 0;
  for (uint64_t t : times) {
    Event e{};
    e.seq = ++seq;
    e.time_ns = t;
    e.thread = static_cast<uint32_t>(seq % 2);
    e.kind = EventKind::kAlloc;
    e.address = 0x1000 * seq;
    e.bytes = 100 * seq;
    e.device = 0;
    e.api = Api::kCudaMalloc;
    writer.event(e);
  }
  writer.close();
  const Decoded d = decode_trace(export_perfetto(trace, dir.file("back.pftrace")));
  EXPECT_TRUE(d.errors.empty()) << d.errors.front();
  EXPECT_EQ(d.explicit_clock_packets, 4u);  // three allocations, and the peak mark at the last one
  std::map<uint64_t, uint64_t> time_by_address;
  for (const Slice& s : d.begins) time_by_address[s.uints.at("address")] = s.time;
  ASSERT_EQ(time_by_address.size(), 6u);
  for (uint64_t i = 1; i <= 6; ++i) EXPECT_EQ(time_by_address[0x1000 * i], times[i - 1]) << i;
}

// Alloc/free pairs on one address, as `host_pattern pairs` makes them: every
// event on lane 0 with the same two counters.
void write_pairs_trace(const std::string& path, int pairs) {
  SyntheticTrace t(path);
  for (int i = 0; i < pairs; ++i) {
    t.alloc(0, 0x7f1234560000ull, 4096);
    t.free(0, 0x7f1234560000ull);
  }
  t.close();
}

// There TracePacketDefaults name the lane and the counters instead of every
// event: under 30 bytes an event before compression, and a few after.
TEST(PerfettoExportSize, PairsUseTheDefaultsAndStayUnderThirtyBytesAnEvent) {
  test::TempDir dir;
  const std::string trace = dir.file("pairs.pstrace");
  write_pairs_trace(trace, 5000);
  const std::string file = export_perfetto(trace, dir.file("pairs.pftrace"));
  const Decoded d = decode_trace(file);
  EXPECT_TRUE(d.errors.empty()) << d.errors.front();
  EXPECT_GE(d.defaults_packets, 2u);  // the first and the one naming lane 0 and its counters
  EXPECT_GT(d.events_on_default_track, 9900u);
  EXPECT_GT(d.events_with_default_counters, 9900u);
  for (const auto& [track, value] : d.counter_value) EXPECT_EQ(value, 0) << d.track_names.at(track);
  EXPECT_EQ(d.begins.size(), 5000u);
  EXPECT_EQ(d.ends, 5000u);
  EXPECT_LT(static_cast<double>(expand(file).packets.size()) / 10000.0, 30.0);
  EXPECT_LT(static_cast<double>(file.size()) / 10000.0, 5.0);
}

// A trace of a few MiB of packets: bundles of whole packets, each outer packet
// under the 512 KB trace_packet.proto asks for, and the sequence's interning,
// defaults and delta clock carried from one bundle to the next.
TEST(PerfettoExportSize, ALongTraceIsManyBundlesOfWholePackets) {
  test::TempDir dir;
  const std::string trace = dir.file("long.pstrace");
  write_pairs_trace(trace, 100'000);
  const Decoded d = decode_trace(export_perfetto(trace, dir.file("long.pftrace")));
  EXPECT_TRUE(d.errors.empty()) << d.errors.front();
  EXPECT_EQ(d.plain_packets, 0u);
  ASSERT_GT(d.bundles.size(), 4u);
  uint64_t packets = 0;
  for (const Bundle& b : d.bundles) {
    EXPECT_TRUE(b.only_field);
    EXPECT_TRUE(b.zlib_header);
    EXPECT_LT(b.outer_bytes, 512u * 1024);
    EXPECT_LE(b.inflated_bytes, 256u * 1024);
    packets += b.packets;
  }
  EXPECT_EQ(packets, d.packets);
  EXPECT_EQ(d.begins.size(), 100'000u);
  EXPECT_EQ(d.ends, 100'000u);
  EXPECT_GT(d.events_on_default_track, 199'000u);  // defaults set in the first bundle, used in the last
}

// ---- protoc, when installed ------------------------------------------------------

// The messages and fields the exporter writes, with Perfetto's names and
// numbers (protos/perfetto/trace/..., see exchange/perfetto/perfetto_schema.h), so that
// `protoc --decode` prints any other field as a bare number.
constexpr const char* kPerfettoSubset = R"(syntax = "proto2";
package perfetto.protos;
enum BuiltinClock {
  BUILTIN_CLOCK_UNKNOWN = 0;
  BUILTIN_CLOCK_REALTIME = 1;
  BUILTIN_CLOCK_MONOTONIC = 3;
}
message Trace { repeated TracePacket packet = 1; }
message TracePacket {
  optional uint64 timestamp = 8;
  optional uint32 timestamp_clock_id = 58;
  oneof data {
    TrackEvent track_event = 11;
    TrackDescriptor track_descriptor = 60;
    ClockSnapshot clock_snapshot = 6;
    bytes compressed_packets = 50;
  }
  oneof optional_trusted_packet_sequence_id { uint32 trusted_packet_sequence_id = 10; }
  optional InternedData interned_data = 12;
  optional uint32 sequence_flags = 13;
  optional TracePacketDefaults trace_packet_defaults = 59;
}
message TracePacketDefaults {
  optional uint32 timestamp_clock_id = 58;
  optional TrackEventDefaults track_event_defaults = 11;
}
message TrackEventDefaults {
  optional uint64 track_uuid = 11;
  repeated uint64 extra_counter_track_uuids = 31;
}
message ClockSnapshot {
  message Clock {
    optional uint32 clock_id = 1;
    optional uint64 timestamp = 2;
    optional bool is_incremental = 3;
  }
  repeated Clock clocks = 1;
  optional BuiltinClock primary_trace_clock = 2;
}
message TrackDescriptor {
  optional uint64 uuid = 1;
  optional uint64 parent_uuid = 5;
  optional string name = 2;
  optional ProcessDescriptor process = 3;
  optional ThreadDescriptor thread = 4;
  optional CounterDescriptor counter = 8;
}
message ProcessDescriptor {
  optional int32 pid = 1;
  optional string process_name = 6;
}
message ThreadDescriptor {
  optional int32 pid = 1;
  optional int32 tid = 2;
  optional string thread_name = 5;
}
message CounterDescriptor {
  enum Unit {
    UNIT_UNSPECIFIED = 0;
    UNIT_SIZE_BYTES = 3;
  }
  optional Unit unit = 3;
}
message TrackEvent {
  enum Type {
    TYPE_UNSPECIFIED = 0;
    TYPE_SLICE_BEGIN = 1;
    TYPE_SLICE_END = 2;
    TYPE_INSTANT = 3;
    TYPE_COUNTER = 4;
  }
  optional Type type = 9;
  optional uint64 track_uuid = 11;
  oneof name_field {
    uint64 name_iid = 10;
    string name = 23;
  }
  optional int64 counter_value = 30;
  repeated uint64 extra_counter_track_uuids = 31;
  repeated int64 extra_counter_values = 12;
  repeated DebugAnnotation debug_annotations = 4;
}
message DebugAnnotation {
  oneof name_field {
    uint64 name_iid = 1;
    string name = 10;
  }
  oneof value {
    uint64 uint_value = 3;
    string string_value = 6;
    uint64 pointer_value = 7;
    uint64 string_value_iid = 17;
  }
}
message InternedData {
  repeated EventName event_names = 2;
  repeated DebugAnnotationName debug_annotation_names = 3;
  repeated InternedString debug_annotation_string_values = 29;
}
message EventName {
  optional uint64 iid = 1;
  optional string name = 2;
}
message DebugAnnotationName {
  optional uint64 iid = 1;
  optional string name = 2;
}
message InternedString {
  optional uint64 iid = 1;
  optional bytes str = 2;
}
)";

std::string run(const std::string& command, int* status) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  *status = ::pclose(pipe);
  return out;
}

// `protoc --decode=perfetto.protos.Trace` of a file; a field the schema
// lacks, which protoc prints as its number, is a failure.
std::string protoc_decode(const std::string& proto_dir, const std::string& file) {
  int status = 0;
  const std::string text = run("protoc --proto_path=" + proto_dir + " --decode=perfetto.protos.Trace " + proto_dir +
                                   "/perfetto_subset.proto <" + file + " 2>&1",
                               &status);
  EXPECT_EQ(status, 0) << file << ":\n" << text;
  std::smatch unknown;
  EXPECT_FALSE(std::regex_search(text, unknown, std::regex(R"((^|\n) *[0-9]+( \{|:))")))
      << file << ": a field outside the schema: " << unknown.str();
  return text;
}

// The fixture, and pairs (for TrackEventDefaults): the files as they are (a
// Trace of compressed_packets), and their packets inflated.
TEST_F(PerfettoExport, ProtocDecodesItWithPerfettosFieldNumbers) {
  if (std::system("command -v protoc >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "protoc is not installed (Debian: apt-get install protobuf-compiler)";
  const std::string proto_dir = dir_.file("proto");
  std::filesystem::create_directories(proto_dir);
  test::write_file(proto_dir + "/perfetto_subset.proto", kPerfettoSubset);
  write_pairs_trace(dir_.file("pairs.pstrace"), 100);
  export_perfetto(dir_.file("pairs.pstrace"), dir_.file("pairs.pftrace"));
  std::string all;
  for (const std::string& file : {out_, dir_.file("pairs.pftrace")}) {
    const std::string outer = protoc_decode(proto_dir, file);
    EXPECT_NE(outer.find("compressed_packets: \""), std::string::npos) << file;
    EXPECT_EQ(outer.find("track_event"), std::string::npos) << file << ": a packet outside a bundle";
    const std::string inflated = file + ".packets";
    test::write_file(inflated, expand(test::read_file(file)).packets);
    all += protoc_decode(proto_dir, inflated);
  }
  for (const char* expected : {"is_incremental: true", "primary_trace_clock: BUILTIN_CLOCK_MONOTONIC",
                               "timestamp_clock_id: 64", "string_value_iid:", "debug_annotation_string_values",
                               "extra_counter_track_uuids:", "extra_counter_values:", "type: TYPE_SLICE_BEGIN",
                               "unit: UNIT_SIZE_BYTES", "track_event_defaults"})
    EXPECT_NE(all.find(expected), std::string::npos) << expected;
}

}  // namespace
}  // namespace psc
