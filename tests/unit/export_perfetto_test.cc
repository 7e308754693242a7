// The Perfetto export decoded back with a protobuf reader of our own (no
// protobuf library, no trace_processor on Debian): the file must be a valid
// `Trace`, every event must name a described track and an interned name, and
// the figures it carries must be the analysis' figures.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "exchange/export_model.h"
#include "exchange/exporter.h"
#include "tests/support/export_fixture.h"

namespace psc {
namespace {

// ---- a minimal protobuf reader -------------------------------------------------

struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  uint64_t value = 0;      // varint / fixed
  std::string_view bytes;  // length-delimited
};

std::vector<Field> decode(std::string_view data) {
  std::vector<Field> out;
  size_t i = 0;
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (i >= data.size()) throw std::runtime_error("truncated varint");
      const uint8_t b = static_cast<uint8_t>(data[i++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("varint too long");
  };
  while (i < data.size()) {
    const uint64_t key = varint();
    Field f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<uint32_t>(key & 7);
    if (f.number == 0) throw std::runtime_error("field number 0");
    switch (f.wire) {
      case 0: f.value = varint(); break;
      case 1:
        if (i + 8 > data.size()) throw std::runtime_error("truncated fixed64");
        i += 8;
        break;
      case 2: {
        const uint64_t n = varint();
        if (n > data.size() - i) throw std::runtime_error("length past the end");
        f.bytes = data.substr(i, n);
        i += n;
        break;
      }
      case 5:
        if (i + 4 > data.size()) throw std::runtime_error("truncated fixed32");
        i += 4;
        break;
      default: throw std::runtime_error("bad wire type " + std::to_string(f.wire));
    }
    out.push_back(f);
  }
  return out;
}

const Field* find(const std::vector<Field>& fields, uint32_t number) {
  for (const Field& f : fields)
    if (f.number == number) return &f;
  return nullptr;
}
uint64_t value_of(const std::vector<Field>& fields, uint32_t number, uint64_t missing = 0) {
  const Field* f = find(fields, number);
  return f ? f->value : missing;
}

// ---- the decoded trace -----------------------------------------------------------

struct Slice {
  uint64_t track;
  uint64_t name_iid;
  std::string name;
  uint64_t time;
  std::map<std::string, uint64_t> uints;
  std::map<std::string, std::string> strings;
};

struct Decoded {
  uint64_t packets = 0;
  std::map<uint64_t, std::string> track_names;  // uuid -> name ("" when unnamed)
  std::set<uint64_t> counter_tracks;
  std::map<uint64_t, std::string> event_names, annotation_names;
  std::vector<Slice> begins, instants;
  uint64_t ends = 0;
  std::map<uint64_t, int64_t> open_per_track;
  std::map<uint64_t, int64_t> counter_value;          // last value per track
  std::map<uint64_t, int64_t> counter_value_at_peak;  // values when the trace peak instant came
  bool saw_clock_snapshot = false, saw_clear = false;
  uint64_t primary_clock = 0;
  std::vector<std::string> errors;
};

Decoded decode_trace(const std::string& file) {
  Decoded d;
  for (const Field& packet_field : decode(file)) {
    if (packet_field.number != 1 || packet_field.wire != 2) {
      d.errors.push_back("top-level field is not Trace.packet");
      continue;
    }
    ++d.packets;
    const std::vector<Field> packet = decode(packet_field.bytes);
    if (const Field* clock = find(packet, 6)) {
      d.saw_clock_snapshot = true;
      d.primary_clock = value_of(decode(clock->bytes), 2);
    }
    if (value_of(packet, 13) & 1) d.saw_clear = true;
    if (const Field* interned = find(packet, 12)) {
      for (const Field& entry : decode(interned->bytes)) {
        const std::vector<Field> e = decode(entry.bytes);
        const uint64_t iid = value_of(e, 1);
        const std::string name(find(e, 2) ? find(e, 2)->bytes : "");
        if (entry.number == 2) d.event_names[iid] = name;
        if (entry.number == 3) d.annotation_names[iid] = name;
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
      if (!(value_of(packet, 13) & 2)) d.errors.push_back("track event without SEQ_NEEDS_INCREMENTAL_STATE");
      const std::vector<Field> event = decode(te->bytes);
      const uint64_t track = value_of(event, 11);
      const uint64_t type = value_of(event, 9);
      if (!d.track_names.count(track)) d.errors.push_back("event on undescribed track " + std::to_string(track));
      Slice s;
      s.track = track;
      s.time = value_of(packet, 8);
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
      }
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
      {"Track", {{3, "Process"}, {4, "Thread"}, {8, "Counter"}}},
      {"TrackEvent", {{4, "Annotation"}}},
      {"InternedData", {{2, "Name"}, {3, "Name"}}},
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

std::string dump_trace(const std::string& file) {
  std::string out;
  for (const Field& packet : decode(file)) {
    dump_message(packet.bytes, "TracePacket", out);
    out += "\n";
  }
  return out;
}

class PerfettoExport : public ::testing::Test {
 protected:
  void SetUp() override {
    trace_ = dir_.file("fixture.pstrace");
    out_ = dir_.file("fixture.pftrace");
    test::write_fixture_trace(trace_);
    ExportOptions o;
    o.trace = trace_;
    o.output = out_;
    find_exporter("perfetto")->write(o);
    analysis_ = analyze_trace(trace_);
    decoded_ = decode_trace(test::read_file(out_));
  }
  test::TempDir dir_;
  std::string trace_, out_;
  Analysis analysis_;
  Decoded decoded_;
};

TEST_F(PerfettoExport, IsAWellFormedTrackEventTrace) {
  EXPECT_TRUE(decoded_.errors.empty()) << decoded_.errors.front();
  EXPECT_GT(decoded_.packets, 50u);
  EXPECT_TRUE(decoded_.saw_clock_snapshot);
  EXPECT_EQ(decoded_.primary_clock, 3u);  // MONOTONIC
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
  for (const Slice& s : decoded_.begins) step += s.name == "step 0";
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
  for (const Slice& s : decoded_.begins)
    if (decoded_.track_names[s.track].rfind("lane ", 0) == 0 && s.uints.count("bytes")) {
      ++lane_slices;
      bytes += s.uints.at("bytes");
      EXPECT_TRUE(s.uints.count("address"));
    }
  EXPECT_EQ(lane_slices, analysis_.memory.counts.allocs);
  EXPECT_EQ(bytes, analysis_.memory.counts.allocated_bytes);
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

TEST_F(PerfettoExport, MatchesTheGoldenFile) {
  EXPECT_TRUE(test::matches_golden("fixture.perfetto.txt", dump_trace(test::read_file(out_))));
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

}  // namespace
}  // namespace psc
