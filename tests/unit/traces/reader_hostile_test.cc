// Crafted inputs (docs/recorder.md, the "bad files" row): each one crashed a reader, exhausted its
// memory or time, or escaped without naming the file. Now each is either a
// one-line error naming the file (and for traces the byte offset), or a read
// that completes quickly with the right counts. The traces are written byte
// by byte here, since the writers refuse to produce them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/report_json.h"
#include "cli/args.h"
#include "common/json_file.h"
#include "estimator/liveness.h"
#include "exchange/exporter.h"
#include "format/chunk_codec.h"
#include "format/crc32c.h"
#include "tests/support/export_fixture.h"
#include "tests/support/synthetic_trace.h"
#include "traces/reader.h"
#include "traces/writer.h"

namespace psc {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// One chunk's records, encoded by hand.
class RawChunk {
 public:
  void byte(uint8_t b) { payload_.push_back(b); }
  void varint(uint64_t v) {
    uint8_t buffer[format::kMaxVarint];
    const uint8_t* end = format::put_varint(buffer, v);
    payload_.insert(payload_.end(), static_cast<const uint8_t*>(buffer), end);
  }
  void text(std::string_view s) {
    varint(s.size());
    payload_.insert(payload_.end(), s.begin(), s.end());
  }
  void string(uint64_t id, std::string_view s) {
    byte(format::kMetaString);
    varint(id);
    text(s);
  }
  void thread(uint64_t index, std::string_view name) {
    byte(format::kMetaThread);
    varint(index);
    varint(index + 100);
    text(name);
  }
  // The first event of `thread` in this chunk: thread and context written.
  void event_head(EventKind kind, uint64_t thread, int64_t device, Api api, uint64_t time_delta = 1000) {
    byte(static_cast<uint8_t>(kind) | format::kFieldThread | format::kFieldContext);
    varint(format::zigzag(static_cast<int64_t>(time_delta)));
    varint(thread);
    varint(format::zigzag(device));
    varint(0);  // stream
    byte(static_cast<uint8_t>(device < 0 ? MemoryKind::kHost : MemoryKind::kDevice));
    byte(static_cast<uint8_t>(api));
    byte(0);  // flags
  }
  void alloc(uint64_t thread, int64_t device, uint64_t address, uint64_t bytes) {
    event_head(EventKind::kAlloc, thread, device, Api::kCudaMalloc);
    varint(format::zigzag(static_cast<int64_t>(address)));
    varint(bytes);
  }
  void mark(uint64_t thread, uint64_t name, uint64_t payload) {
    event_head(EventKind::kMark, thread, -1, Api::kPscApi);
    varint(name);
    varint(payload);
  }

  // Header and payload, both checksums valid.
  std::string sealed() const {
    format::ChunkHeader h{};
    h.magic = format::kChunkMagic;
    h.payload_bytes = static_cast<uint32_t>(payload_.size());
    h.record_count = 1;
    h.payload_crc = crc32c(payload_.data(), payload_.size());
    h.header_crc = crc32c(&h, offsetof(format::ChunkHeader, header_crc));
    std::string out(reinterpret_cast<const char*>(&h), sizeof h);
    out.append(reinterpret_cast<const char*>(payload_.data()), payload_.size());
    return out;
  }

 private:
  std::vector<uint8_t> payload_;
};

std::string file_header() {
  const format::FileHeader h = make_file_header(TraceWriterOptions{});
  return std::string(reinterpret_cast<const char*>(&h), sizeof h);
}

// A chunk with one host allocation: the good chunk placed around bad ones.
std::string good_chunk(uint64_t address) {
  RawChunk c;
  c.thread(0, "main");
  c.alloc(0, -1, address, 4096);
  return c.sealed();
}

// A TraceError whose message names the file and the offset, on one line.
void expect_trace_error(const std::string& path, const std::string& reason_part) {
  try {
    load_trace(path);
    ADD_FAILURE() << "no TraceError for " << path;
  } catch (const TraceError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.path(), path);
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
    EXPECT_NE(what.find(reason_part), std::string::npos) << what;
    EXPECT_NE(what.find(" at byte " + std::to_string(e.offset())), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

// An error of any kind whose message starts with the path and is one line.
template <typename Error, typename F>
void expect_one_line_error(F&& f, const std::string& path, const std::string& reason_part) {
  try {
    f();
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
    EXPECT_NE(what.find(reason_part), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

void export_to(const std::string& exporter, const std::string& trace, const std::string& output,
               std::vector<std::string>* warnings) {
  ExportOptions o;
  o.trace = trace;
  o.output = output;
  o.warn = [warnings](const std::string& w) { warnings->push_back(w); };
  find_exporter(exporter)->write(o);
}

bool warned(const std::vector<std::string>& warnings, const std::string& part) {
  return std::any_of(warnings.begin(), warnings.end(),
                     [&](const std::string& w) { return w.find(part) != std::string::npos; });
}

class Hostile : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_.file(name); }
  test::TempDir dir_;
};

// ---- 1. a negative device other than the host's -1 --------------------------------

TEST_F(Hostile, DeviceMinusTwoIsRefusedAtReadTimeAndEveryExporterSurvives) {
  const std::string trace = path("device.pstrace");
  RawChunk bad;
  bad.thread(0, "main");
  bad.alloc(0, -2, 0x1000, 4096);
  const std::string head = file_header() + good_chunk(0x10000);
  test::write_file(trace, head + bad.sealed() + good_chunk(0x20000));

  const LoadedTrace t = load_trace(trace);
  EXPECT_EQ(t.status.state, ReadStatus::State::kGap) << t.status.reason;
  EXPECT_EQ(t.status.events, 2u);
  EXPECT_EQ(t.status.gaps, 1u);
  EXPECT_NE(t.status.reason.find("device -2 out of range"), std::string::npos) << t.status.reason;
  EXPECT_NE(t.status.reason.find("at byte " + std::to_string(head.size())), std::string::npos) << t.status.reason;
  for (const char* exporter : {"perfetto", "chrome", "nsys-sqlite"}) {
    std::vector<std::string> warnings;
    ASSERT_NO_THROW(export_to(exporter, trace, path(std::string("out.") + exporter), &warnings)) << exporter;
    EXPECT_TRUE(warned(warnings, trace + " has a gap (undecodable chunk (device -2 out of range) at byte")) << exporter;
  }
}

// ---- 2. a string id of 2^32 - 1 ------------------------------------------------------

TEST_F(Hostile, StringIdOfTwoToThe32MinusOneIsRefusedAndPerfettoSurvives) {
  const std::string trace = path("name.pstrace");
  RawChunk bad;
  bad.thread(0, "main");
  bad.mark(0, UINT32_MAX, 0);
  const std::string head = file_header() + good_chunk(0x10000);
  test::write_file(trace, head + bad.sealed());

  const LoadedTrace t = load_trace(trace);
  EXPECT_EQ(t.status.state, ReadStatus::State::kCorrupt);
  EXPECT_EQ(t.status.events, 1u);
  EXPECT_EQ(t.status.reason,
            "undecodable chunk (string id 4294967295 out of range) at byte " + std::to_string(head.size()));
  std::vector<std::string> warnings;
  ASSERT_NO_THROW(export_to("perfetto", trace, path("out.perfetto"), &warnings));
  EXPECT_TRUE(warned(warnings, trace + " is corrupt (undecodable chunk (string id 4294967295 out of range)"));
}

// ---- 3. a payload nested 60,000 deep -----------------------------------------------

TEST_F(Hostile, DeeplyNestedPayloadsAreRefusedBeforeParsing) {
  const std::string trace = path("deep.pstrace");
  const std::string deep = std::string(60000, '[') + std::string(60000, ']');
  {
    SyntheticTrace t(trace);
    t.wave_begin(0, deep);
    t.alloc(0, 0x1000, 256);
    t.mark(0, "cupti.first_kernel", deep);
    t.mark(0, "nvtx.resource_name", deep);
    t.wave_end(0);
    t.wave_begin(0, R"({"tokens":16,"children":)" + deep + "}");
    t.free(0, 0x1000);
    t.wave_end(0);
    t.close();
  }
  const Analysis a = analyze_report(trace);  // liveness and the device section included
  ASSERT_EQ(a.waves.size(), 2u);
  EXPECT_EQ(a.waves[0].span.payload.error, "payload nests deeper than 64 levels");
  EXPECT_EQ(a.waves[1].span.payload.error, "payload nests deeper than 64 levels");
  const std::string json = analysis_to_json(a).dump();  // report --json
  EXPECT_NE(json.find("payload nests deeper than 64 levels"), std::string::npos);
  std::vector<std::string> warnings;
  EXPECT_NO_THROW(export_to("torch-snapshot", trace, path("out.pickle"), &warnings));

  EXPECT_TRUE(json_nested_deeper_than(deep, kMaxJsonDepth));
  EXPECT_FALSE(json_nested_deeper_than(std::string(64, '{') + std::string(64, '}'), 64));
  EXPECT_FALSE(json_nested_deeper_than(R"(["[[[[[[[[[[", "\"{{{{{{{{{"])", 2));
  EXPECT_TRUE(parse_json_payload(deep).is_discarded());
}

TEST_F(Hostile, DeeplyNestedJsonFilesAreOneLineErrors) {
  const std::string plan = path("plan.json");
  test::write_file(plan, std::string(60000, '{'));
  expect_one_line_error<JsonFileError>([&] { read_json_file(plan); }, plan,
                                       "not valid JSON: nested deeper than 64 levels");
  // Found by fuzz_plan: a number too large for a double was out_of_range, not parse_error.
  test::write_file(plan, R"({"layers": [44e21281]})");
  expect_one_line_error<JsonFileError>([&] { read_json_file(plan); }, plan, "not valid JSON: ");
  // A key given twice would keep its last value silently (a plan's safety factor).
  test::write_file(plan, R"({"a": {"safety_factor": 1.1, "safety_factor": 2}})");
  expect_one_line_error<JsonFileError>([&] { read_json_file(plan); }, plan,
                                       "the key \"safety_factor\" is given twice in one object");
  // The same key in two objects, and in an object and its parent, is fine.
  test::write_file(plan, R"({"k": 1, "a": {"k": 2}, "b": [{"k": 3}, {"k": 4}]})");
  EXPECT_EQ(read_json_file(plan)["b"][1]["k"], 4);
}

// ---- 4. string ids far beyond the bytes read ------------------------------------------

TEST_F(Hostile, StringTableIsBoundedByTheBytesRead) {
  // Each record names an id 2^20 past the table: the old cap let the table
  // grow by a million entries per record, 2 GB from a 356-byte file.
  const std::string trace = path("strings.pstrace");
  RawChunk bad;
  for (uint64_t k = 1; k <= 40; ++k) bad.string(k << 20, "x");
  test::write_file(trace, file_header() + bad.sealed());
  const auto start = Clock::now();
  const LoadedTrace t = load_trace(trace);
  EXPECT_LT(seconds_since(start), 1.0);
  EXPECT_EQ(t.status.state, ReadStatus::State::kCorrupt);
  EXPECT_EQ(t.status.reason, "undecodable chunk (string id 1048576 out of range) at byte 136");
  EXPECT_LE(t.meta.strings.size(), 1u);

  // Ids within the bytes read are fine, out of order or not.
  const std::string fine = path("strings_fine.pstrace");
  RawChunk ok;
  ok.string(7, "seven");
  ok.string(2, "two");
  test::write_file(fine, file_header() + ok.sealed());
  const LoadedTrace f = load_trace(fine);
  EXPECT_TRUE(f.status.complete()) << f.status.reason;
  EXPECT_EQ(f.meta.string(StringId{7}), "seven");
  EXPECT_EQ(f.meta.string(StringId{2}), "two");
}

// ---- 5. thread indices ---------------------------------------------------------------

TEST_F(Hostile, HugeThreadIndexIsRefusedQuickly) {
  // 2,000 chunks, each one event on thread 2^20: the old reader sized its
  // per-thread state by the index and reset all of it at every chunk.
  const std::string trace = path("threads.pstrace");
  std::string bytes = file_header();
  for (int k = 0; k < 2000; ++k) {
    RawChunk c;
    c.alloc(1u << 20, 0, 0x1000 + 16 * static_cast<uint64_t>(k), 16);
    bytes += c.sealed();
  }
  test::write_file(trace, bytes);
  const auto start = Clock::now();
  const LoadedTrace t = load_trace(trace);
  EXPECT_LT(seconds_since(start), 2.0);
  EXPECT_EQ(t.status.state, ReadStatus::State::kCorrupt);
  EXPECT_EQ(t.status.events, 0u);
  EXPECT_EQ(t.status.reason, "undecodable chunk (thread index 1048576 out of range) at byte 136");

  RawChunk meta;
  meta.thread(1u << 20, "far");
  test::write_file(trace, file_header() + meta.sealed());
  EXPECT_EQ(load_trace(trace).status.reason, "undecodable chunk (thread index 1048576 out of range) at byte 136");
}

TEST_F(Hostile, PerChunkResetCostFollowsTheThreadsUsed) {
  // The largest thread index a trace may hold, in every one of 20,000 chunks:
  // resetting all 65,536 threads' state per chunk would be 40 GB of stores.
  const std::string trace = path("last_thread.pstrace");
  std::string bytes = file_header();
  for (int k = 0; k < 20000; ++k) {
    RawChunk c;
    c.alloc(TraceWriter::kMaxThreads - 1, 0, 0x1000 + 16 * static_cast<uint64_t>(k), 16);
    bytes += c.sealed();
  }
  test::write_file(trace, bytes);
  const auto start = Clock::now();
  const LoadedTrace t = load_trace(trace);
  EXPECT_LT(seconds_since(start), 2.0);
  EXPECT_TRUE(t.status.complete()) << t.status.reason;
  ASSERT_EQ(t.events.size(), 20000u);
  EXPECT_EQ(t.events.back().thread, TraceWriter::kMaxThreads - 1);
  EXPECT_EQ(t.events.back().address, 0x1000u + 16 * 19999);
}

// ---- 6. allocation failures name the file --------------------------------------------

TEST_F(Hostile, AllocationFailuresBecomeTraceErrorsWithTheOffset) {
  const std::string trace = path("alloc.pstrace");
  test::write_file(trace, file_header() + good_chunk(0x1000));
  struct Throwing : TraceVisitor {
    bool length = false;
    void on_events(const Event*, size_t, const TraceMeta&) override {
      if (length) throw std::length_error("vector::_M_default_append");
      throw std::bad_alloc();
    }
  };
  Throwing visitor;
  for (bool length : {false, true}) {
    visitor.length = length;
    try {
      read_trace(trace, visitor);
      ADD_FAILURE() << "no error";
    } catch (const TraceError& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.path(), trace);
      EXPECT_EQ(e.offset(), sizeof(format::FileHeader));
      EXPECT_EQ(what.rfind(trace + ": ", 0), 0u) << what;
      EXPECT_NE(what.find(length ? "cannot hold what the trace describes" : "out of memory"), std::string::npos)
          << what;
      EXPECT_NE(what.find("at byte 136"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

// ---- 7. files that are not regular files ----------------------------------------------

// Opens the FIFO for writing after a while, so that a reader blocked in
// open() (the old behaviour) returns instead of hanging the test.
class FifoUnblocker {
 public:
  explicit FifoUnblocker(std::string path) : path_(std::move(path)) {
    thread_ = std::thread([this] {
      for (int i = 0; i < 30 && !done_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    });
  }
  ~FifoUnblocker() {
    done_ = true;
    thread_.join();
  }

 private:
  std::string path_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

TEST_F(Hostile, TraceReaderRefusesDevicesFifosAndDirectories) {
  expect_trace_error("/dev/zero", "not a regular file (a character device)");
  expect_trace_error(dir_.file(""), "cannot read: Is a directory");
  const std::string fifo = path("trace.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  FifoUnblocker unblock(fifo);
  const auto start = Clock::now();
  expect_trace_error(fifo, "not a regular file (a FIFO)");
  EXPECT_LT(seconds_since(start), 1.0);
}

// A run's folder: a .pstrace name that is not a regular file (a FIFO, a
// symlink to a device, a dangling one) is left out, and stderr says so by name.
TEST_F(Hostile, AFolderNamesEveryTraceNameItLeavesOut) {
  const std::string dir = path("run");
  ASSERT_TRUE(std::filesystem::create_directory(dir));
  SyntheticTrace(dir + "/rank0.pstrace").close();
  ASSERT_EQ(::mkfifo((dir + "/fifo.pstrace").c_str(), 0600), 0);
  ASSERT_EQ(::symlink("/dev/null", (dir + "/null.pstrace").c_str()), 0);
  ASSERT_EQ(::symlink((dir + "/gone").c_str(), (dir + "/dangling.pstrace").c_str()), 0);
  ASSERT_EQ(::symlink((dir + "/rank0.pstrace").c_str(), (dir + "/linked.pstrace").c_str()), 0);
  testing::internal::CaptureStderr();
  const std::vector<std::string> traces = cli::expand_trace_folders({dir});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(traces, (std::vector<std::string>{dir + "/linked.pstrace", dir + "/rank0.pstrace"}));
  EXPECT_NE(err.find(dir + "/fifo.pstrace is a FIFO, not a trace file: left out\n"), std::string::npos) << err;
  EXPECT_NE(err.find(dir + "/null.pstrace is a symbolic link to a character device, not a trace file: left out\n"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find(dir + "/dangling.pstrace is a broken symbolic link, not a trace file: left out\n"),
            std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 3) << err;
}

TEST_F(Hostile, ImportersAndJsonFilesRefuseDevicesAndFifos) {
  const std::string fifo = path("input.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  FifoUnblocker unblock(fifo);
  const auto start = Clock::now();
  for (const char* from : {"torch-snapshot", "nsys-sqlite"}) {
    for (const std::string& input : {std::string("/dev/zero"), fifo}) {
      ImportOptions o;
      o.input = input;
      o.output = path("imported.pstrace");
      expect_one_line_error<InputError>([&] { find_importer(from)->read(o); }, input, "not a regular file (a ");
    }
  }
  for (const std::string& input : {std::string("/dev/zero"), fifo})
    expect_one_line_error<JsonFileError>([&] { read_json_file(input); }, input, "not a regular file (a ");
  EXPECT_LT(seconds_since(start), 1.0);
}

// ---- 8. a recursive view in an nsys export -------------------------------------------

TEST_F(Hostile, NsysImportReadsTablesNotViews) {
  const std::string db_path = path("recursive.sqlite");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE VIEW CUDA_GPU_MEMORY_USAGE_EVENTS AS WITH RECURSIVE r(start, globalPid, deviceId, "
                         "address, bytes, memKind, memoryOperationType) AS (SELECT 0, 1, 0, 0, 1, 0, 0 UNION ALL "
                         "SELECT start + 1, globalPid + 1, 0, 0, 1, 0, 0 FROM r) SELECT * FROM r;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  ImportOptions o;
  o.input = db_path;
  o.output = path("imported.pstrace");
  const auto start = Clock::now();
  expect_one_line_error<InputError>([&] { find_importer("nsys-sqlite")->read(o); }, db_path,
                                    "neither CUDA_GPU_MEMORY_USAGE_EVENTS nor NVTX_EVENTS");
  EXPECT_LT(seconds_since(start), 2.0);
}

// ---- 9. chunks after a gap --------------------------------------------------------------

TEST_F(Hostile, ChunksAfterAGapAreRead) {
  const std::string head = file_header() + good_chunk(0x10000) + good_chunk(0x20000);
  const std::string garbage(1000, '\xa5');
  const std::string tail = good_chunk(0x30000) + good_chunk(0x40000);
  const std::string trace = path("gap.pstrace");
  test::write_file(trace, head + garbage + tail);
  LoadedTrace t = load_trace(trace);
  EXPECT_EQ(t.status.state, ReadStatus::State::kGap);
  EXPECT_EQ(t.status.chunks, 4u);
  ASSERT_EQ(t.events.size(), 4u);
  EXPECT_EQ(t.events[2].address, 0x30000u);
  EXPECT_EQ(t.status.gaps, 1u);
  EXPECT_EQ(t.status.gap_bytes, garbage.size());
  EXPECT_EQ(t.status.good_bytes, t.status.file_bytes);
  EXPECT_EQ(t.status.gap_reason, "bad chunk header at byte " + std::to_string(head.size()));
  EXPECT_EQ(t.status.reason, "bad chunk header at byte " + std::to_string(head.size()) +
                                 ": skipped 1000 bytes in 1 gap and read the chunks after");

  // A chunk cut short by a failed write, then chunks written fine.
  const std::string partial = good_chunk(0x50000).substr(0, 40);
  test::write_file(trace, head + partial + tail + garbage + tail);
  t = load_trace(trace);
  EXPECT_EQ(t.status.state, ReadStatus::State::kGap);
  EXPECT_EQ(t.status.gaps, 2u);
  EXPECT_EQ(t.status.gap_bytes, partial.size() + garbage.size());
  EXPECT_EQ(t.events.size(), 6u);
  EXPECT_EQ(t.status.gap_reason, "chunk payload checksum mismatch at byte " + std::to_string(head.size()));

  // A forged header in the gap claiming more than the file holds does not
  // stop the search for the next chunk.
  format::ChunkHeader forged{};
  forged.magic = format::kChunkMagic;
  forged.payload_bytes = UINT32_MAX;
  forged.header_crc = crc32c(&forged, offsetof(format::ChunkHeader, header_crc));
  const std::string forged_bytes(reinterpret_cast<const char*>(&forged), sizeof forged);
  test::write_file(trace, head + garbage + forged_bytes + tail);
  t = load_trace(trace);
  EXPECT_EQ(t.status.state, ReadStatus::State::kGap);
  EXPECT_EQ(t.status.gap_bytes, garbage.size() + sizeof forged);
  EXPECT_EQ(t.events.size(), 4u);

  // A gap, then a truncated tail: the tail decides the state, the gap is counted.
  test::write_file(trace, head + garbage + tail + tail.substr(0, 50));
  t = load_trace(trace);
  EXPECT_EQ(t.status.state, ReadStatus::State::kTruncated);
  EXPECT_EQ(t.status.reason,
            "file ends inside a chunk at byte " + std::to_string(head.size() + garbage.size() + tail.size()));
  EXPECT_EQ(t.status.gaps, 1u);
  EXPECT_EQ(t.events.size(), 4u);

  // Garbage to the end stays corrupt, where it starts.
  test::write_file(trace, head + garbage);
  t = load_trace(trace);
  EXPECT_EQ(t.status.state, ReadStatus::State::kCorrupt);
  EXPECT_EQ(t.status.reason, "bad chunk header at byte " + std::to_string(head.size()));
  EXPECT_EQ(t.status.gaps, 0u);

  // The analysis reads on too.
  test::write_file(trace, head + garbage + tail);
  const Analysis a = analyze_trace(trace);
  EXPECT_EQ(a.trace.status.state, ReadStatus::State::kGap);
  EXPECT_EQ(a.trace.status.events, 4u);
}

TEST_F(Hostile, ResyncOverForgedHeadersIsBounded) {
  // 100,000 forged headers, each with a valid header checksum and a payload
  // claiming the rest of the file: probing each in full would read 100 GB.
  const std::string trace = path("forged.pstrace");
  std::string bytes = file_header() + good_chunk(0x1000);
  bytes += std::string(8, '\0');  // damage
  const size_t forged = 100000;
  const size_t total = bytes.size() + forged * sizeof(format::ChunkHeader);
  for (size_t k = 0; k < forged; ++k) {
    format::ChunkHeader h{};
    h.magic = format::kChunkMagic;
    h.payload_bytes = static_cast<uint32_t>(total - bytes.size() - sizeof h);
    h.payload_crc = 0;
    h.header_crc = crc32c(&h, offsetof(format::ChunkHeader, header_crc));
    bytes.append(reinterpret_cast<const char*>(&h), sizeof h);
  }
  test::write_file(trace, bytes);
  const auto start = Clock::now();
  const LoadedTrace t = load_trace(trace);
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_EQ(t.status.state, ReadStatus::State::kCorrupt);
  EXPECT_EQ(t.events.size(), 1u);
}

}  // namespace
}  // namespace psc
