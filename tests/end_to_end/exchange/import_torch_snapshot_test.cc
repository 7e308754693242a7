// torch memory snapshots both ways: the pickle subset reader (and what it
// refuses), the import of snapshots Python's pickle wrote (protocols 2, 4, 5;
// tests/golden/make_torch_snapshot.py), the round trip snapshot -> import ->
// export -> the same entries, the export of a recorder trace, and the opcodes
// pytorch.org/memory_viz's own unpickler reads. What memory_viz's views make
// of the files: torch_snapshot_viz_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "common/progress.h"
#include "exchange/exporter.h"
#include "exchange/torch_snapshot/pickle_reader.h"
#include "exchange/torch_snapshot/pickle_writer.h"
#include "tests/support/export_fixture.h"
#include "tests/support/pickle_json.h"
#include "tests/support/progress_lines.h"

namespace psc {
namespace {

using pickle::Document;
using pickle::Type;
using pickle::Value;
using json = nlohmann::json;

using test::load_pickle_json;

// Entries without their stack frames (a trace has no place for them).
json without_frames(json traces) {
  for (auto& device : traces)
    for (auto& e : device) e.erase("frames");
  return traces;
}

uint64_t parse_error_offset(const std::string& data) {
  try {
    pickle::parse(data);
  } catch (const pickle::ParseError& e) {
    return e.offset();
  }
  ADD_FAILURE() << "parsed";
  return UINT64_MAX;
}

TEST(PickleReader, ReadsWhatPythonWritesInEveryProtocolAlike) {
  const json p4 = load_pickle_json(test::golden_path("torch_snapshot.pickle"));
  EXPECT_EQ(load_pickle_json(test::golden_path("torch_snapshot_p2.pickle")), p4);
  EXPECT_EQ(load_pickle_json(test::golden_path("torch_snapshot_p5.pickle")), p4);
  EXPECT_EQ(p4["device_traces"].size(), 2u);
  EXPECT_EQ(p4["allocator_settings"]["max_split_size"], -1);
  EXPECT_EQ(p4["segments"][0]["segment_pool_id"], json::array({0, 0}));
  // Frames shared between entries come through the memo as the same value.
  EXPECT_EQ(p4["device_traces"][0][0]["frames"], p4["device_traces"][0][3]["frames"]);
}

TEST(PickleReader, RefusesCodeAndDamageWithTheOffset) {
  // The evil fixture's REDUCE of os.system: refused at its STACK_GLOBAL.
  const std::string evil = test::read_file(test::golden_path("torch_snapshot_evil.pickle"));
  const uint64_t at = parse_error_offset(evil);
  ASSERT_LT(at, evil.size());
  EXPECT_EQ(static_cast<uint8_t>(evil[at]), 0x93);
  EXPECT_EQ(parse_error_offset(std::string("\x80\x02") + "cos\nsystem\n(S'x'\ntR."), 2u);  // GLOBAL
  const std::string good = test::read_file(test::golden_path("torch_snapshot.pickle"));
  for (size_t cut : {size_t{1}, size_t{7}, good.size() / 2, good.size() - 1})
    EXPECT_LT(parse_error_offset(good.substr(0, cut)), cut + 1) << "cut at " << cut;
  EXPECT_EQ(parse_error_offset("\x80\x04\x8c\xff"
                               "abc"),
            2u);                                                                       // string past the end
  EXPECT_EQ(parse_error_offset(std::string("\x80\x04h\x05.", 5)), 2u);                 // memo read before written
  EXPECT_EQ(parse_error_offset(std::string("\x80\x04K\x01K\x02.", 7)), 6u);            // two values at STOP
  EXPECT_EQ(parse_error_offset(std::string("\x80\x04(K\x01u.", 7)), 5u);               // SETITEMS with no dict
  EXPECT_EQ(parse_error_offset(std::string("\x80\x04\x8b\xff\xff\xff\x7f.", 8)), 2u);  // a huge LONG4
  EXPECT_EQ(parse_error_offset(std::string("\x80\x09.", 3)), 0u);                      // protocol 9
}

TEST(PickleReader, SignExtendsLong1AndKeepsTheLastOfEqualKeys) {
  const Document doc =
      pickle::parse(std::string("\x80\x04}(\x8c\x01k\x8a\x02\x00\x80\x8c\x01kJ\xff\xff\xff\xffu.", 21));
  const Value* k = doc.find(doc.at(doc.root()), "k");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->integer, -1);
  const Document neg = pickle::parse(std::string("\x80\x04\x8a\x02\x00\x80.", 7));
  EXPECT_EQ(neg.at(neg.root()).integer, -32768);
}

// The opcodes pytorch.org/memory_viz's unpickler handles
// (torch/utils/viz/MemoryViz.js, `unpickle`), walked over a whole file.
bool memory_viz_reads(const std::string& data, std::string* why) {
  const std::set<uint8_t> known = {'e',  'h',  'J', 'K',  'M',  '}',  ']', 0x95, 0x8a, 'j', '(',
                                   0x94, 0x80, 'u', 0x8c, '.',  0x86, 'a', 0x89, 'q',  'X', ')',
                                   0x88, 'N',  'G', 't',  0x85, 0x87, 'r', 'l',  'd',  's'};
  size_t i = 0;
  auto u4 = [&](size_t at) {
    return static_cast<size_t>(static_cast<uint8_t>(data[at])) |
           static_cast<size_t>(static_cast<uint8_t>(data[at + 1])) << 8 |
           static_cast<size_t>(static_cast<uint8_t>(data[at + 2])) << 16 |
           static_cast<size_t>(static_cast<uint8_t>(data[at + 3])) << 24;
  };
  while (i < data.size()) {
    const uint8_t op = static_cast<uint8_t>(data[i++]);
    if (!known.count(op)) {
      *why = "opcode " + std::to_string(op) + " at " + std::to_string(i - 1);
      return false;
    }
    switch (op) {
      case 0x80:
        if (data[i] < 2 || data[i] > 4) {
          *why = "protocol";
          return false;
        }
        i += 1;
        break;
      case 'h':
      case 'q':
      case 'K': i += 1; break;
      case 'M': i += 2; break;
      case 'J':
      case 'j':
      case 'r': i += 4; break;
      case 'G':
      case 0x95: i += 8; break;
      case 0x8a: i += 1 + static_cast<uint8_t>(data[i]); break;
      case 0x8c: i += 1 + static_cast<uint8_t>(data[i]); break;
      case 'X': i += 4 + u4(i); break;
      case '.': return i == data.size();
      default: break;
    }
  }
  *why = "no STOP";
  return false;
}

TEST(PickleWriter, WritesOnlyWhatMemoryVizReads) {
  uint64_t memo = 0;
  pickle::Writer w(&memo);
  w.proto();
  w.empty_list();
  w.mark();
  for (int64_t v : {int64_t{0}, int64_t{255}, int64_t{256}, int64_t{65535}, int64_t{65536}, int64_t{-1},
                    int64_t{1} << 40, -(int64_t{1} << 40), INT64_MAX, INT64_MIN})
    w.integer(v);
  w.interned("key");
  w.interned("key");
  w.string(std::string(300, 'x'));
  w.real(-2.5);  // allocator_settings' garbage_collection_threshold is a float
  w.appends();
  w.stop();
  std::string why;
  EXPECT_TRUE(memory_viz_reads(w.out(), &why)) << why;
  const Document doc = pickle::parse(w.out());
  const Value& list = doc.at(doc.root());
  ASSERT_EQ(list.items.size(), 14u);
  EXPECT_EQ(doc.at(list.items[13]).real, -2.5);
  const int64_t want[] = {0, 255, 256, 65535, 65536, -1, int64_t{1} << 40, -(int64_t{1} << 40), INT64_MAX, INT64_MIN};
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(doc.at(list.items[i]).integer, want[i]) << i;
  EXPECT_EQ(doc.at(list.items[11]).text, "key");
  EXPECT_EQ(doc.at(list.items[12]).text.size(), 300u);
}

using test_support::last_line_of;
using test_support::progress_lines;

class TorchSnapshot : public ::testing::Test {
 protected:
  ImportSummary import(const std::string& from, const std::string& to) {
    ImportOptions o;
    o.input = from;
    o.output = to;
    return find_importer("torch-snapshot")->read(o);
  }
  void export_snapshot(const std::string& from, const std::string& to) {
    ExportOptions o;
    o.trace = from;
    o.output = to;
    o.warn = [this](const std::string& w) { warnings_.push_back(w); };
    find_exporter("torch-snapshot")->write(o);
  }
  test::TempDir dir_;
  std::vector<std::string> warnings_;
};

TEST_F(TorchSnapshot, ImportCarriesEveryEntryAndTheMemoryBeforeTheHistory) {
  const std::string trace = dir_.file("snapshot.pstrace");
  import(test::golden_path("torch_snapshot.pickle"), trace);
  const json snapshot = load_pickle_json(test::golden_path("torch_snapshot.pickle"));
  std::map<std::string, uint64_t> actions;
  for (const auto& device : snapshot["device_traces"])
    for (const auto& e : device) ++actions[e["action"].get<std::string>()];
  const Analysis a = analyze_trace(trace);
  const auto& kinds = a.trace.events_by_kind;
  // Three allocations the history never saw: a block it frees, a block and a
  // segment the segments list holds (make_torch_snapshot.py); and the mapped
  // pages' memory (reserved level) from each map to its unmap.
  EXPECT_EQ(kinds[static_cast<int>(EventKind::kAlloc)],
            actions["alloc"] + actions["segment_alloc"] + actions["segment_map"] + 3);
  EXPECT_EQ(kinds[static_cast<int>(EventKind::kFree)],
            actions["free_completed"] + actions["segment_free"] + actions["segment_unmap"]);
  // Marks: the entries that are not memory, each segment, allocator_settings.
  EXPECT_EQ(kinds[static_cast<int>(EventKind::kMark)],
            actions["free_requested"] + actions["oom"] + actions["snapshot"] + snapshot["segments"].size() + 1);
  EXPECT_EQ(kinds[static_cast<int>(EventKind::kMap)], actions["segment_map"]);
  EXPECT_EQ(kinds[static_cast<int>(EventKind::kRangeStart)], 2u);
  EXPECT_EQ(a.memory.counts.unmatched_frees, 0u);  // the block freed first was allocated at the start
  // What is live at the end is what the segments list holds allocated, at
  // its requested size (what the history's entries and memory_viz count).
  uint64_t allocated = 0;
  for (const auto& s : snapshot["segments"])
    for (const auto& b : s["blocks"])
      if (b["state"] == "active_allocated") allocated += b["requested_size"].get<uint64_t>();
  EXPECT_EQ(a.memory.live_at_end_bytes, allocated);
  EXPECT_EQ(a.trace.header.realtime_ns, a.trace.header.monotonic_ns);
  EXPECT_EQ(a.trace.first_time_ns, snapshot["device_traces"][0][0]["time_us"].get<uint64_t>() * 1000);
  // Annotations attribute the history's allocations (process-wide ranges).
  EXPECT_EQ(a.peak.site.range, "backward/layer.0");
}

TEST_F(TorchSnapshot, ImportShowsItsStagesAsProgress) {
  const std::string pickle = test::golden_path("torch_snapshot.pickle"), trace = dir_.file("snapshot.pstrace");
  uint64_t events = 0;
  const std::vector<std::string> lines = progress_lines([&] { events = import(pickle, trace).events; });
  ASSERT_GT(events, 0u);
  const std::string device = last_line_of(lines, "reading " + pickle + ": device_traces[0]: ");
  EXPECT_NE(device.find("(100%)"), std::string::npos) << ::testing::PrintToString(lines);
  const std::string writing = last_line_of(lines, "writing " + trace + ": ");
  EXPECT_NE(writing.find(fmt::format("{:.1f} M of {:.1f} M (100%)", events / 1e6, events / 1e6)), std::string::npos)
      << ::testing::PrintToString(lines);
}

TEST_F(TorchSnapshot, RoundTripGivesBackTheSameEntries) {
  for (const char* name :
       {"torch_snapshot.pickle", "torch_snapshot_p2.pickle", "torch_snapshot_p5.pickle",
        "torch_snapshot_segments.pickle", "torch_snapshot_expandable.pickle", "torch_snapshot_ring.pickle"}) {
    const std::string trace = dir_.file("rt.pstrace"), back = dir_.file("rt.pickle");
    import(test::golden_path(name), trace);
    export_snapshot(trace, back);
    const json original = load_pickle_json(test::golden_path(name)), again = load_pickle_json(back);
    EXPECT_EQ(without_frames(again["device_traces"]), without_frames(original["device_traces"])) << name;
    EXPECT_EQ(again["external_annotations"], original["external_annotations"]) << name;
    EXPECT_EQ(again["allocator_settings"], original["allocator_settings"]) << name;
    // Segments: the same reserved ranges, the same blocks allocated in them.
    std::set<std::tuple<int64_t, int64_t, int64_t>> want, got;
    for (const auto& s : original["segments"])
      for (const auto& b : s["blocks"])
        if (b["state"] == "active_allocated") want.emplace(s["device"], s["address"], b["address"]);
    for (const auto& s : again["segments"])
      for (const auto& b : s["blocks"])
        if (b["state"] == "active_allocated") got.emplace(s["device"], s["address"], b["address"]);
    EXPECT_EQ(got, want) << name;
    std::string why;
    EXPECT_TRUE(memory_viz_reads(test::read_file(back), &why)) << why;
  }
}

TEST_F(TorchSnapshot, ExportOfARecorderTraceIsWhatMemoryVizDraws) {
  const std::string trace = dir_.file("fixture.pstrace"), out = dir_.file("fixture.pickle");
  test::write_fixture_trace(trace);
  export_snapshot(trace, out);
  const Analysis a = analyze_trace(trace);
  const json s = load_pickle_json(out);
  std::map<std::string, uint64_t> actions;
  for (const auto& device : s["device_traces"])
    for (const auto& e : device) {
      ++actions[e["action"].get<std::string>()];
      for (const char* k : {"size", "stream", "time_us", "frames"}) EXPECT_TRUE(e.contains(k)) << k;
    }
  EXPECT_EQ(actions["alloc"], a.memory.counts.allocs);
  // A replaced allocation's lost free is written; a free of memory never
  // allocated is left out (warned about).
  EXPECT_EQ(actions["free_completed"], a.memory.counts.frees + a.memory.counts.replaced);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find(std::to_string(a.memory.counts.unmatched_frees) + " frees"), std::string::npos)
      << warnings_[0];
  EXPECT_EQ(actions["free_requested"], actions["free_completed"]);
  EXPECT_EQ(actions["oom"], a.memory.counts.failed);
  // The two recorded segments, and one made up for each block (the fixture's
  // blocks lie outside its segments): every alloc lies in a live segment, as
  // memory_viz's Allocator State History needs (torch_snapshot_viz_test.cc).
  EXPECT_EQ(actions["segment_alloc"], 2u + actions["alloc"]);
  EXPECT_EQ(actions["segment_free"], 1u + actions["free_completed"]);
  EXPECT_EQ(s["device_traces"].size(), 2u);  // devices 0 and 1
  // Reserved at the end: the second segment and the live blocks' own; each
  // tiled by its blocks.
  uint64_t blocks = 0, block_bytes = 0;
  for (const auto& seg : s["segments"]) {
    uint64_t at = seg["address"], tiled = 0;
    for (const auto& b : seg["blocks"]) {
      EXPECT_EQ(b["address"].get<uint64_t>(), at);
      at += b["size"].get<uint64_t>();
      tiled += b["size"].get<uint64_t>();
      if (b["state"] == "active_allocated") {
        ++blocks;
        block_bytes += b["size"].get<uint64_t>();
      }
    }
    EXPECT_EQ(tiled, seg["total_size"].get<uint64_t>());
  }
  EXPECT_EQ(blocks, a.memory.live_at_end_allocations);
  EXPECT_EQ(block_bytes, a.memory.live_at_end_bytes);
  std::string why;
  EXPECT_TRUE(memory_viz_reads(test::read_file(out), &why)) << why;
  // Python's pickle reads it too, when there is a Python to ask.
  if (std::system("/usr/bin/python3 -c 'import pickle' >/dev/null 2>&1") == 0) {
    const std::string cmd =
        "/usr/bin/python3 -c \"import pickle,sys; s=pickle.load(open(sys.argv[1],'rb')); "
        "sys.exit(0 if sum(len(d) for d in s['device_traces'])==" +
        std::to_string(s["device_traces"][0].size() + s["device_traces"][1].size()) + " else 1)\" " + out;
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  EXPECT_TRUE(test::matches_golden("fixture.torch.json", without_frames(s["device_traces"]).dump(1) + "\n"));
}

TEST_F(TorchSnapshot, BadSnapshotsAreInputErrorsNamingTheFile) {
  const std::string out = dir_.file("out.pstrace");
  auto error_of = [&](const std::string& path) -> std::string {
    try {
      import(path, out);
    } catch (const InputError& e) {
      EXPECT_EQ(e.path(), path);
      return e.what();
    }
    ADD_FAILURE() << "imported " << path;
    return "";
  };
  EXPECT_NE(error_of(test::golden_path("torch_snapshot_evil.pickle")).find("names or builds a Python object"),
            std::string::npos);
  const std::string not_dict = dir_.file("list.pickle");
  test::write_file(not_dict, std::string("\x80\x04]\x94.", 5));
  EXPECT_NE(error_of(not_dict).find("is a list, not a dict"), std::string::npos);
  const std::string no_history = dir_.file("nohist.pickle");
  test::write_file(no_history, std::string("\x80\x04}\x94.", 5));
  EXPECT_NE(error_of(no_history).find("no device_traces"), std::string::npos);
  const std::string wrong_type = dir_.file("wrong.pickle");
  // pickle.dumps({"device_traces": [[{"action": "alloc", "addr": "x"}]]}, protocol=4)
  test::write_file(wrong_type,
                   std::string("\x80\x04\x95:\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\rdevice_traces\x94]\x94]\x94}"
                               "\x94(\x8c\x06"
                               "action\x94\x8c\x05"
                               "alloc\x94\x8c\x04"
                               "addr\x94\x8c\x01x\x94uaas.",
                               69));
  EXPECT_NE(error_of(wrong_type).find("device_traces[0][0].addr is a str, not an int"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out));
}

// Found by tests/fuzz (fuzz_torch_snapshot): an entry whose dict key is not
// UTF-8 made the payload's JSON serialiser throw past every handler.
TEST_F(TorchSnapshot, KeysThatAreNotUtf8AreReplacedNotFatal) {
  const std::string out = dir_.file("out.pstrace");
  try {
    import("tests/fuzz/corpus/pickle/regression_invalid_utf8_key", out);
  } catch (const InputError&) {
    // a damaged pickle may be refused; anything else is a bug
  }
}

}  // namespace
}  // namespace psc
