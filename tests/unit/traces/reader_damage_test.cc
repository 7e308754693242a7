// Damaged traces: cut at every byte, single bits flipped everywhere, bad
// headers. Damage never crashes and never loses the good chunks before it, nor
// (a gap) the good chunks after it; a file that is not a trace at all is a TraceError naming the file and the
// byte offset. The analysis survives the same damage.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "format/chunk_codec.h"
#include "format/crc32c.h"
#include "tests/support/synthetic_trace.h"
#include "tests/support/test_support.h"
#include "traces/reader.h"
#include "traces/writer.h"

namespace psc {
namespace {

using test_support::TempTrace;

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const uint8_t* data, size_t n) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n));
}

// The damaged copy is edited in place (ftruncate, pwrite) rather than
// rewritten: truncating and rewriting a file tens of thousands of times makes
// ext4 flush on every close (auto_da_alloc), which turns seconds into minutes.
class Scratch {
 public:
  explicit Scratch(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  ~Scratch() {
    if (fd_ >= 0) ::close(fd_);
  }
  void fill(const std::vector<uint8_t>& bytes) {
    ASSERT_EQ(::ftruncate(fd_, 0), 0);
    ASSERT_EQ(::pwrite(fd_, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  }
  void cut(uint64_t size) { ASSERT_EQ(::ftruncate(fd_, static_cast<off_t>(size)), 0); }
  void patch(uint64_t offset, uint8_t byte) { ASSERT_EQ(::pwrite(fd_, &byte, 1, static_cast<off_t>(offset)), 1); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// A small multi-chunk trace with ranges, waves and memory events.
void write_sample(const std::string& path, uint16_t format_version = format::kVersion) {
  TraceWriterOptions options;
  options.format_version = format_version;
  options.chunk_bytes = 4096;
  options.command = "sample";
  SyntheticTrace t(path, options);
  for (int wave = 0; wave < 3; ++wave) {
    t.wave_begin(0, R"({"tokens":16,"cold":false})");
    for (int layer = 0; layer < 4; ++layer) {
      t.push(0, "forward/layer." + std::to_string(layer));
      for (int k = 0; k < 150; ++k) t.alloc(0, 0x100000 * (wave + 1) + 0x1000 * layer + k * 16, 256 + k);
      t.pop(0);
    }
    t.push(1, "backward/layer.0");
    for (int layer = 0; layer < 4; ++layer)
      for (int k = 0; k < 150; ++k) t.free(1, 0x100000 * (wave + 1) + 0x1000 * layer + k * 16);
    t.pop(1);
    t.wave_end(0);
  }
  t.close();
}

// Chunk boundaries found by walking the chunk headers independently of the reader.
std::vector<uint64_t> chunk_ends(const std::vector<uint8_t>& bytes) {
  std::vector<uint64_t> ends;
  uint64_t offset = sizeof(format::FileHeader);
  while (offset + sizeof(format::ChunkHeader) <= bytes.size()) {
    format::ChunkHeader h;
    std::memcpy(&h, bytes.data() + offset, sizeof h);
    offset += sizeof h + h.payload_bytes;
    ends.push_back(offset);
  }
  return ends;
}

// A chunk (header and payload) whose checksums hold around `payload`,
// however wrong its records are.
std::vector<uint8_t> forged_chunk(const uint8_t* payload, size_t size) {
  format::ChunkHeader h{};
  h.magic = format::kChunkMagic;
  h.payload_bytes = static_cast<uint32_t>(size);
  h.record_count = 1;
  h.payload_crc = crc32c(payload, size);
  h.header_crc = crc32c(&h, offsetof(format::ChunkHeader, header_crc));
  std::vector<uint8_t> chunk(sizeof h + size);
  std::memcpy(chunk.data(), &h, sizeof h);
  std::memcpy(chunk.data() + sizeof h, payload, size);
  return chunk;
}

class Damage : public ::testing::Test {
 protected:
  void SetUp() override {
    write_sample(original_.path);
    bytes_ = slurp(original_.path);
    full_ = load_trace(original_.path);
    ends_ = chunk_ends(bytes_);
    ASSERT_GE(ends_.size(), 3u) << "the sample should span several chunks";
    ASSERT_EQ(ends_.back(), bytes_.size());
    // Events in each prefix of whole chunks.
    events_before_.push_back(0);
    for (uint64_t end : ends_) {
      scratch_.fill(bytes_);
      scratch_.cut(end);
      events_before_.push_back(load_trace(scratch_.path()).events.size());
    }
    scratch_.fill(bytes_);
  }
  // Events a reader must deliver from a file whose first `good` bytes are intact.
  size_t expected_events(uint64_t good) const {
    size_t chunks = 0;
    while (chunks < ends_.size() && ends_[chunks] <= good) ++chunks;
    return events_before_[chunks];
  }
  // The chunk holding byte `at`.
  size_t chunk_of(uint64_t at) const {
    size_t chunk = 0;
    while (ends_[chunk] <= at) ++chunk;
    return chunk;
  }
  // Every event of the full trace but those of one chunk, in order.
  void expect_all_but_chunk(const LoadedTrace& got, size_t chunk) const {
    const size_t skipped = events_before_[chunk + 1] - events_before_[chunk];
    ASSERT_EQ(got.events.size() + skipped, full_.events.size());
    for (size_t i = 0; i < got.events.size(); ++i) {
      const size_t j = i < events_before_[chunk] ? i : i + skipped;
      ASSERT_EQ(got.events[i].seq, full_.events[j].seq) << "event " << i;
      ASSERT_EQ(got.events[i].address, full_.events[j].address) << "event " << i;
    }
  }
  void expect_prefix(const LoadedTrace& got) const {
    ASSERT_LE(got.events.size(), full_.events.size());
    for (size_t i = 0; i < got.events.size(); ++i) {
      ASSERT_EQ(got.events[i].seq, full_.events[i].seq) << "event " << i;
      ASSERT_EQ(got.events[i].address, full_.events[i].address) << "event " << i;
    }
  }

  TempTrace original_{"original"};
  TempTrace cut_{"cut"};
  Scratch scratch_{cut_.path};
  std::vector<uint8_t> bytes_;
  LoadedTrace full_;
  std::vector<uint64_t> ends_;
  std::vector<size_t> events_before_;
};

TEST_F(Damage, EveryCutReadsTheChunksBeforeIt) {
  // Longest first, so each cut is one ftruncate of the previous one.
  for (uint64_t cut = bytes_.size() + 1; cut-- > 0;) {
    scratch_.cut(cut);
    if (cut < sizeof(format::FileHeader)) {
      EXPECT_THROW(load_trace(cut_.path), TraceError) << "cut at " << cut;
      continue;
    }
    LoadedTrace got;
    ASSERT_NO_THROW(got = load_trace(cut_.path)) << "cut at " << cut;
    const bool at_boundary =
        cut == sizeof(format::FileHeader) || std::find(ends_.begin(), ends_.end(), cut) != ends_.end();
    EXPECT_EQ(got.status.complete(), at_boundary) << "cut at " << cut;
    if (!at_boundary) {
      EXPECT_EQ(got.status.state, ReadStatus::State::kTruncated) << "cut at " << cut;
      EXPECT_NE(got.status.reason.find("at byte"), std::string::npos) << got.status.reason;
    }
    EXPECT_EQ(got.events.size(), expected_events(cut)) << "cut at " << cut;
    EXPECT_EQ(got.status.events, got.events.size());
    EXPECT_LE(got.status.good_bytes, cut);
    expect_prefix(got);
  }
}

TEST_F(Damage, EveryCutCanBeAnalysed) {
  // Analysis is two passes per file: every 13th cut keeps this quick while
  // landing in headers, payloads and boundaries alike.
  for (uint64_t cut = bytes_.size() + 1; cut-- > sizeof(format::FileHeader);) {
    if ((bytes_.size() - cut) % 13 != 0) continue;
    scratch_.cut(cut);
    Analysis a;
    ASSERT_NO_THROW(a = analyze_trace(cut_.path)) << "cut at " << cut;
    EXPECT_EQ(a.trace.status.events, expected_events(cut));
    EXPECT_EQ(a.peak.live.bytes, a.peak.bytes) << "cut at " << cut;
    EXPECT_TRUE(a.warnings.empty()) << "cut at " << cut;
  }
}

TEST_F(Damage, EveryBitFlipIsCaughtWithoutACrash) {
  for (size_t at = 0; at < bytes_.size(); ++at) {
    {  // one bit per byte, every bit position in turn
      const uint8_t bit = static_cast<uint8_t>(1u << (at % 8));
      scratch_.patch(at, bytes_[at] ^ bit);
      if (at < sizeof(format::FileHeader)) {
        try {
          load_trace(cut_.path);
          ADD_FAILURE() << "a flipped header byte at " << at << " was accepted";
        } catch (const TraceError& e) {
          EXPECT_LT(e.offset(), sizeof(format::FileHeader)) << e.what();
          EXPECT_EQ(e.path(), cut_.path);
        }
        scratch_.patch(at, bytes_[at]);
        continue;
      }
      LoadedTrace got;
      ASSERT_NO_THROW(got = load_trace(cut_.path)) << "flip at " << at;
      scratch_.patch(at, bytes_[at]);
      // CRC-32C catches every single-bit error: the damaged chunk is dropped.
      // The reader steps over it to the next chunk, so a flip in the last
      // chunk leaves the file corrupt and one before it leaves a gap.
      const size_t chunk = chunk_of(at);
      const bool last = chunk + 1 == ends_.size();
      EXPECT_EQ(got.status.state, last ? ReadStatus::State::kCorrupt : ReadStatus::State::kGap) << "flip at " << at;
      EXPECT_EQ(got.status.gaps, last ? 0u : 1u) << "flip at " << at;
      EXPECT_EQ(got.events.size(), full_.events.size() - (events_before_[chunk + 1] - events_before_[chunk]))
          << "flip at " << at;
      expect_all_but_chunk(got, chunk);
    }
  }
}

TEST_F(Damage, RandomGarbageInPayloadsNeverCrashesTheAnalysis) {
  uint64_t rng = 0xfeedface;
  for (int round = 0; round < 300; ++round) {
    std::vector<size_t> touched;
    for (int k = 0; k < 1 + round % 5; ++k) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      const size_t at = sizeof(format::FileHeader) + (rng >> 33) % (bytes_.size() - sizeof(format::FileHeader));
      scratch_.patch(at, static_cast<uint8_t>(rng >> 17));
      touched.push_back(at);
    }
    Analysis a;
    ASSERT_NO_THROW(a = analyze_trace(cut_.path)) << "round " << round;
    EXPECT_LE(a.trace.status.events, full_.events.size());
    for (size_t at : touched) scratch_.patch(at, bytes_[at]);
  }
}

// A payload that passes its CRC but does not decode (a writer bug, or a
// deliberately forged chunk) is reported corrupt, not trusted.
TEST_F(Damage, ForgedChunkWithValidChecksumIsCorrupt) {
  std::vector<uint8_t> forged(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(ends_[0]));
  const uint8_t payload[] = {0x0f, 0x01, 0x02};  // tag with unknown kind 15
  const std::vector<uint8_t> chunk = forged_chunk(payload, sizeof payload);
  forged.insert(forged.end(), chunk.begin(), chunk.end());
  spit(cut_.path, forged.data(), forged.size());
  const LoadedTrace got = load_trace(cut_.path);
  EXPECT_EQ(got.status.state, ReadStatus::State::kCorrupt);
  EXPECT_NE(got.status.reason.find("byte " + std::to_string(ends_[0])), std::string::npos) << got.status.reason;
  EXPECT_EQ(got.events.size(), events_before_[1]);
}

// ---- headers ---------------------------------------------------------------------------

format::FileHeader good_header() { return make_file_header(TraceWriterOptions{}); }

void reseal(format::FileHeader* h) { h->header_crc = crc32c(h, offsetof(format::FileHeader, header_crc)); }

uint64_t offset_of_error(const std::string& path) {
  try {
    load_trace(path);
  } catch (const TraceError& e) {
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("at byte " + std::to_string(e.offset())), std::string::npos) << e.what();
    return e.offset();
  }
  ADD_FAILURE() << "no TraceError for " << path;
  return UINT64_MAX;
}

TEST(ReaderHeaders, MissingFile) {
  const std::string path = (std::filesystem::temp_directory_path() / "psc_no_such_trace.pstrace").string();
  std::remove(path.c_str());
  EXPECT_EQ(offset_of_error(path), 0u);
}

TEST(ReaderHeaders, EmptyAndTextFilesHaveBadMagic) {
  TempTrace file("text");
  spit(file.path, nullptr, 0);
  EXPECT_EQ(offset_of_error(file.path), 0u);
  const char text[] = "PSTRACE";  // 7 bytes: almost the magic
  spit(file.path, reinterpret_cast<const uint8_t*>(text), 7);
  EXPECT_EQ(offset_of_error(file.path), 0u);
}

TEST(ReaderHeaders, NewerFormatIsRefusedWithTheVersion) {
  TempTrace file("newer");
  format::FileHeader h = good_header();
  h.version = format::kVersion + 1;
  h.min_reader_version = format::kVersion + 1;
  reseal(&h);
  spit(file.path, reinterpret_cast<const uint8_t*>(&h), sizeof h);
  EXPECT_EQ(offset_of_error(file.path), offsetof(format::FileHeader, version));
  const std::string newer = "v" + std::to_string(format::kVersion + 1);
  try {
    load_trace(file.path);
    ADD_FAILURE() << "a " << newer << "-only file was read";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find(newer), std::string::npos) << e.what();
  }
}

// v2 only added the name of CUPTI allocations and v3 a drop count; a v1 file
// (none of those) reads exactly as it did. v4 changed the encoding of
// contexts: the same events written as v3 and as v4 read back the same.
TEST(ReaderHeaders, VersionOneFilesStillRead) {
  TempTrace current("v4_src");
  write_sample(current.path);
  TempTrace original("v3_src");
  write_sample(original.path, 3);
  std::vector<uint8_t> bytes = slurp(original.path);
  format::FileHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  EXPECT_EQ(h.version, 3);
  EXPECT_EQ(h.min_reader_version, 3);
  {
    const LoadedTrace v3 = load_trace(original.path);
    const LoadedTrace v4 = load_trace(current.path);
    EXPECT_LT(v4.status.file_bytes, v3.status.file_bytes);
    ASSERT_EQ(v3.events.size(), v4.events.size());
    for (size_t i = 0; i < v3.events.size(); ++i)
      ASSERT_EQ(std::memcmp(&v3.events[i], &v4.events[i], sizeof(Event)), 0) << i;
  }
  h.version = 1;
  h.min_reader_version = 1;
  reseal(&h);
  std::memcpy(bytes.data(), &h, sizeof h);
  TempTrace file("v1");
  spit(file.path, bytes.data(), bytes.size());
  const LoadedTrace a = load_trace(original.path);
  const LoadedTrace b = load_trace(file.path);
  EXPECT_TRUE(b.status.complete()) << b.status.reason;
  ASSERT_EQ(a.events.size(), b.events.size());
  for (size_t i = 0; i < a.events.size(); ++i)
    ASSERT_EQ(std::memcmp(&a.events[i], &b.events[i], sizeof(Event)), 0) << i;
}

TEST(ReaderHeaders, BadHeaderSizeAndChecksum) {
  TempTrace file("size");
  format::FileHeader h = good_header();
  h.header_bytes = 16;
  reseal(&h);
  spit(file.path, reinterpret_cast<const uint8_t*>(&h), sizeof h);
  EXPECT_EQ(offset_of_error(file.path), offsetof(format::FileHeader, header_bytes));

  h = good_header();
  h.pid ^= 1;  // not resealed
  spit(file.path, reinterpret_cast<const uint8_t*>(&h), sizeof h);
  EXPECT_EQ(offset_of_error(file.path), offsetof(format::FileHeader, header_crc));
}

TEST(ReaderHeaders, ShortHeaderSaysWhereTheFileEnds) {
  TempTrace file("short");
  const format::FileHeader h = good_header();
  spit(file.path, reinterpret_cast<const uint8_t*>(&h), 100);
  EXPECT_EQ(offset_of_error(file.path), 100u);
}

// header_bytes lets the header grow: a reader skips what it does not know.
TEST(ReaderHeaders, LargerHeaderIsSkipped) {
  TempTrace original("grown_src");
  write_sample(original.path);
  const std::vector<uint8_t> bytes = slurp(original.path);
  format::FileHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  h.header_bytes = sizeof h + 64;
  reseal(&h);
  std::vector<uint8_t> grown(reinterpret_cast<uint8_t*>(&h), reinterpret_cast<uint8_t*>(&h) + sizeof h);
  grown.resize(grown.size() + 64, 0xAB);
  grown.insert(grown.end(), bytes.begin() + sizeof h, bytes.end());
  TempTrace file("grown");
  spit(file.path, grown.data(), grown.size());
  const LoadedTrace a = load_trace(original.path);
  const LoadedTrace b = load_trace(file.path);
  EXPECT_TRUE(b.status.complete()) << b.status.reason;
  EXPECT_EQ(a.events.size(), b.events.size());
}

}  // namespace
}  // namespace psc

namespace psc {
namespace {

// tests/golden/fixture.v3.pstrace is the export fixture as the v3 writer
// wrote it (one context per thread); the current writer's fixture.pstrace
// holds the same trace in v4. Both read to the same events and metadata.
TEST(ReaderHeaders, TheVersionThreeFixtureReadsAsTheCurrentOne) {
  const char* root = std::getenv("PSC_SOURCE_DIR");  // as the golden tests find it
  const std::string dir = (root ? std::string(root) + "/" : std::string()) + "tests/golden/";
  const LoadedTrace v3 = load_trace(dir + "fixture.v3.pstrace");
  const LoadedTrace v4 = load_trace(dir + "fixture.pstrace");
  EXPECT_EQ(v3.meta.header.version, 3);
  EXPECT_EQ(v4.meta.header.version, format::kVersion);
  EXPECT_TRUE(v3.status.complete()) << v3.status.reason;
  EXPECT_EQ(v3.meta.strings, v4.meta.strings);
  EXPECT_EQ(v3.meta.command, v4.meta.command);
  EXPECT_EQ(v3.meta.clean_end, v4.meta.clean_end);
  ASSERT_EQ(v3.events.size(), v4.events.size());
  for (size_t i = 0; i < v3.events.size(); ++i)
    ASSERT_EQ(std::memcmp(&v3.events[i], &v4.events[i], sizeof(Event)), 0) << "event " << i;
}

}  // namespace
}  // namespace psc

namespace psc {
namespace {

// What one read gives: the events, the status and the metadata, or the
// error a file that is not a trace throws.
struct ReadResult {
  bool threw = false;
  std::string error;
  uint64_t error_offset = 0;
  LoadedTrace trace;
};

ReadResult read_with(const std::string& path, int decode_threads) {
  ReadResult r;
  ReadOptions options;
  options.decode_threads = decode_threads;
  try {
    r.trace = load_trace(path, options);
  } catch (const TraceError& e) {
    r.threw = true;
    r.error = e.what();
    r.error_offset = e.offset();
  }
  return r;
}

// Chunks decoded on other threads read exactly as chunks decoded one by one
// on the reading thread: every event byte for byte, the status with its
// reasons and offsets, and the metadata.
void expect_same_read(const std::string& path, const std::string& what) {
  const ReadResult inline_read = read_with(path, 0);
  for (int threads : {1, 3}) {
    SCOPED_TRACE(what + ", " + std::to_string(threads) + " decoding threads");
    const ReadResult r = read_with(path, threads);
    ASSERT_EQ(r.threw, inline_read.threw);
    EXPECT_EQ(r.error, inline_read.error);
    EXPECT_EQ(r.error_offset, inline_read.error_offset);
    if (r.threw) continue;
    const ReadStatus& a = r.trace.status;
    const ReadStatus& b = inline_read.trace.status;
    EXPECT_EQ(a.state, b.state);
    EXPECT_EQ(a.reason, b.reason);
    EXPECT_EQ(a.gap_reason, b.gap_reason);
    EXPECT_EQ(a.good_bytes, b.good_bytes);
    EXPECT_EQ(a.chunks, b.chunks);
    EXPECT_EQ(a.events, b.events);
    EXPECT_EQ(a.gaps, b.gaps);
    EXPECT_EQ(a.gap_bytes, b.gap_bytes);
    EXPECT_EQ(r.trace.meta.strings, inline_read.trace.meta.strings);
    EXPECT_EQ(r.trace.meta.command, inline_read.trace.meta.command);
    EXPECT_EQ(r.trace.meta.clean_end, inline_read.trace.meta.clean_end);
    EXPECT_EQ(r.trace.meta.drops, inline_read.trace.meta.drops);
    EXPECT_EQ(r.trace.meta.late_events, inline_read.trace.meta.late_events);
    ASSERT_EQ(r.trace.meta.threads.size(), inline_read.trace.meta.threads.size());
    for (size_t i = 0; i < r.trace.meta.threads.size(); ++i) {
      EXPECT_EQ(r.trace.meta.threads[i].name, inline_read.trace.meta.threads[i].name);
      EXPECT_EQ(r.trace.meta.threads[i].os_tid, inline_read.trace.meta.threads[i].os_tid);
    }
    ASSERT_EQ(r.trace.events.size(), inline_read.trace.events.size());
    for (size_t i = 0; i < r.trace.events.size(); ++i)
      ASSERT_EQ(std::memcmp(&r.trace.events[i], &inline_read.trace.events[i], sizeof(Event)), 0) << "event " << i;
  }
}

class ThreadedDamage : public ::testing::Test {
 protected:
  void SetUp() override {
    write_sample(original_.path);
    bytes_ = slurp(original_.path);
    ends_ = chunk_ends(bytes_);
    ASSERT_GE(ends_.size(), 3u);
    scratch_.fill(bytes_);
  }
  TempTrace original_{"original"};
  TempTrace cut_{"cut"};
  Scratch scratch_{cut_.path};
  std::vector<uint8_t> bytes_;
  std::vector<uint64_t> ends_;
};

TEST_F(ThreadedDamage, CutsReadTheSameOnEveryThreadCount) {
  expect_same_read(original_.path, "the whole file");
  for (uint64_t cut = bytes_.size() + 1; cut-- > 0;) {
    if ((bytes_.size() - cut) % 7 != 0) continue;
    scratch_.cut(cut);
    expect_same_read(cut_.path, "cut at " + std::to_string(cut));
  }
}

TEST_F(ThreadedDamage, FlipsAndGarbageReadTheSameOnEveryThreadCount) {
  for (size_t at = sizeof(format::FileHeader); at < bytes_.size(); at += 13) {
    scratch_.patch(at, bytes_[at] ^ static_cast<uint8_t>(1u << (at % 8)));
    expect_same_read(cut_.path, "flip at " + std::to_string(at));
    scratch_.patch(at, bytes_[at]);
  }
  uint64_t rng = 0xdecade;
  for (int round = 0; round < 60; ++round) {
    std::vector<size_t> touched;
    for (int k = 0; k < 1 + round % 4; ++k) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      const size_t at = sizeof(format::FileHeader) + (rng >> 33) % (bytes_.size() - sizeof(format::FileHeader));
      scratch_.patch(at, static_cast<uint8_t>(rng >> 17));
      touched.push_back(at);
    }
    expect_same_read(cut_.path, "garbage round " + std::to_string(round));
    for (size_t at : touched) scratch_.patch(at, bytes_[at]);
  }
}

// A chunk whose checksum holds but whose records do not decode changes
// nothing: neither its events nor the strings it defined before the bad
// record reach the visitor, on any thread count.
TEST_F(ThreadedDamage, AnUndecodableChunkDefinesNoStrings) {
  std::vector<uint8_t> forged(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(ends_[0]));
  // A string record (id 4000, "leak"), then a record of unknown kind 15.
  const uint8_t payload[] = {format::kMetaString, 0xa0, 0x1f, 4, 'l', 'e', 'a', 'k', 0x0f, 0x01};
  const std::vector<uint8_t> chunk = forged_chunk(payload, sizeof payload);
  forged.insert(forged.end(), chunk.begin(), chunk.end());
  forged.insert(forged.end(), bytes_.begin() + static_cast<std::ptrdiff_t>(ends_[0]), bytes_.end());
  spit(cut_.path, forged.data(), forged.size());
  expect_same_read(cut_.path, "forged chunk");
  const ReadResult r = read_with(cut_.path, 2);
  ASSERT_FALSE(r.threw);
  EXPECT_EQ(r.trace.status.state, ReadStatus::State::kGap) << r.trace.status.reason;
  EXPECT_NE(r.trace.status.reason.find("unknown record tag 15"), std::string::npos) << r.trace.status.reason;
  EXPECT_EQ(r.trace.meta.string(StringId{4000}), "");
}

}  // namespace
}  // namespace psc

namespace psc {
namespace {

// ---- another trace appended --------------------------------------------------------------
//
// Two traces in one file (cat a b > ab, a trace appended to itself, a trace's
// chunks after another's end) are not one trace: the reader says where the
// other begins, and reads the first alone only when asked (first_trace_only).

// A trace of its own: one thread allocating and freeing 400 blocks from
// `base` inside a range, in 4 KiB chunks (several of them).
void write_process(const std::string& path, uint32_t pid, const std::string& command, uint64_t base,
                   bool clean_end = true, const std::string& run_id = "") {
  TraceWriterOptions options;
  options.pid = pid;
  options.command = command;
  options.chunk_bytes = 4096;
  if (!run_id.empty()) {
    options.run_id = run_id;
    options.run_id_source = format::RunIdSource::kPeakscope;
  }
  SyntheticTrace t(path, options);
  t.push(0, "forward");
  for (int k = 0; k < 400; ++k) t.alloc(0, base + 64 * k, 1000 + k);
  for (int k = 0; k < 400; ++k) t.free(0, base + 64 * k);
  t.pop(0);
  t.close(clean_end);
}

std::vector<uint8_t> joined(std::vector<uint8_t> a, const std::vector<uint8_t>& b, size_t from = 0) {
  a.insert(a.end(), b.begin() + static_cast<std::ptrdiff_t>(from), b.end());
  return a;
}

// The error a read of `path` ends in, on every thread count: the file, "another
// trace begins at byte N", what was found, and the way to keep the first, on
// one line. Returns N.
uint64_t another_trace_at(const std::string& path, const std::string& found) {
  uint64_t offset = UINT64_MAX;
  for (int threads : {0, 3}) {
    SCOPED_TRACE(std::to_string(threads) + " decoding threads");
    ReadOptions options;
    options.decode_threads = threads;
    try {
      load_trace(path, options);
      ADD_FAILURE() << path << " read as one trace";
    } catch (const TraceError& e) {
      const std::string what = e.what();
      const std::string n = std::to_string(e.offset());
      EXPECT_EQ(e.path(), path);
      EXPECT_EQ(what.rfind(path + ": another trace begins at byte " + n + " (", 0), 0u) << what;
      EXPECT_NE(what.find(found), std::string::npos) << what;
      EXPECT_NE(what.find("head -c " + n + " " + path + " > first.pstrace"), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      if (offset != UINT64_MAX) {
        EXPECT_EQ(e.offset(), offset);
      }
      offset = e.offset();
    }
  }
  return offset;
}

// first_trace_only reads `path` exactly as the file `first` alone reads:
// events byte for byte, metadata, status; next_trace_at says where the other
// trace begins (the first's size).
void expect_first_only_reads_as(const std::string& path, const std::string& first) {
  const LoadedTrace want = load_trace(first);
  for (int threads : {0, 3}) {
    SCOPED_TRACE(std::to_string(threads) + " decoding threads");
    ReadOptions options;
    options.decode_threads = threads;
    options.first_trace_only = true;
    LoadedTrace got;
    ASSERT_NO_THROW(got = load_trace(path, options));
    EXPECT_EQ(got.status.next_trace_at, want.status.file_bytes);
    EXPECT_EQ(got.status.next_trace.rfind("another trace begins at byte " + std::to_string(want.status.file_bytes), 0),
              0u)
        << got.status.next_trace;
    EXPECT_EQ(got.status.state, want.status.state);
    EXPECT_EQ(got.status.reason, want.status.reason);
    EXPECT_EQ(got.status.events, want.status.events);
    EXPECT_EQ(got.status.chunks, want.status.chunks);
    EXPECT_EQ(got.status.good_bytes, want.status.good_bytes);
    EXPECT_EQ(got.status.file_bytes, want.status.file_bytes);
    EXPECT_EQ(got.status.gaps, want.status.gaps);
    EXPECT_EQ(std::memcmp(&got.meta.header, &want.meta.header, sizeof want.meta.header), 0);
    EXPECT_EQ(got.meta.command, want.meta.command);
    EXPECT_EQ(got.meta.clean_end, want.meta.clean_end);
    EXPECT_EQ(got.meta.strings, want.meta.strings);
    EXPECT_EQ(got.meta.drops, want.meta.drops);
    EXPECT_EQ(got.meta.late_events, want.meta.late_events);
    ASSERT_EQ(got.events.size(), want.events.size());
    for (size_t i = 0; i < got.events.size(); ++i)
      ASSERT_EQ(std::memcmp(&got.events[i], &want.events[i], sizeof(Event)), 0) << "event " << i;
  }
}

class AnotherTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    write_process(a_.path, 111, "train --model a", 0x100000);
    write_process(b_.path, 222, "train --model b", 0x900000);
    a_bytes_ = slurp(a_.path);
    b_bytes_ = slurp(b_.path);
  }
  TempTrace a_{"a"};
  TempTrace b_{"b"};
  TempTrace file_{"joined"};
  std::vector<uint8_t> a_bytes_;
  std::vector<uint8_t> b_bytes_;
};

// cat a b: A's pid, B's command and a peak mixing both read as one clean trace before.
TEST_F(AnotherTrace, TwoTracesConcatenatedAreRefusedWhereTheSecondBegins) {
  const std::vector<uint8_t> ab = joined(a_bytes_, b_bytes_);
  spit(file_.path, ab.data(), ab.size());
  EXPECT_EQ(another_trace_at(file_.path, "a second file header"), a_bytes_.size());
  expect_first_only_reads_as(file_.path, a_.path);
  // Every consumer reads through the reader: the analysis refuses it too.
  try {
    analyze_trace(file_.path);
    ADD_FAILURE() << "analysed as one trace";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.offset(), a_bytes_.size()) << e.what();
  }
}

// cat a a: twice the events, no missing or late seq, before.
TEST_F(AnotherTrace, ATraceConcatenatedWithItselfIsRefused) {
  const std::vector<uint8_t> aa = joined(a_bytes_, a_bytes_);
  spit(file_.path, aa.data(), aa.size());
  EXPECT_EQ(another_trace_at(file_.path, "a second file header"), a_bytes_.size());
  expect_first_only_reads_as(file_.path, a_.path);
}

// Anything after the chunk holding the end mark: garbage, or another trace's
// chunks without their header.
TEST_F(AnotherTrace, DataAfterTheEndMarkIsRefused) {
  std::vector<uint8_t> tail(100, 0xa5);
  const std::vector<uint8_t> garbage = joined(a_bytes_, tail);
  spit(file_.path, garbage.data(), garbage.size());
  EXPECT_EQ(another_trace_at(file_.path, "data after the end mark"), a_bytes_.size());
  expect_first_only_reads_as(file_.path, a_.path);

  const std::vector<uint8_t> chunks = joined(a_bytes_, b_bytes_, sizeof(format::FileHeader));
  spit(file_.path, chunks.data(), chunks.size());
  EXPECT_EQ(another_trace_at(file_.path, "data after the end mark"), a_bytes_.size());
  expect_first_only_reads_as(file_.path, a_.path);
}

// A trace the recorder did not close (killed), then another trace whose file
// header is gone or damaged: its sequence starts over.
TEST_F(AnotherTrace, ASequenceThatStartsOverIsAnotherTrace) {
  TempTrace killed("killed");
  write_process(killed.path, 111, "train --model a", 0x100000, /*clean_end=*/false);
  const std::vector<uint8_t> k = slurp(killed.path);
  ASSERT_FALSE(load_trace(killed.path).meta.clean_end);

  const std::vector<uint8_t> headless = joined(k, k, sizeof(format::FileHeader));
  spit(file_.path, headless.data(), headless.size());
  EXPECT_EQ(another_trace_at(file_.path, "the sequence starts over: a chunk from seq 1 after seqs up to 802"),
            k.size());
  expect_first_only_reads_as(file_.path, killed.path);

  // B's header damaged (its magic): the damage is B's, the sequence starts over after it.
  std::vector<uint8_t> damaged = joined(k, b_bytes_);
  damaged[k.size()] ^= 0x01;
  spit(file_.path, damaged.data(), damaged.size());
  EXPECT_EQ(another_trace_at(file_.path, "the sequence starts over"), k.size());
  expect_first_only_reads_as(file_.path, killed.path);

  // B's header whole: found where A's chunks end.
  const std::vector<uint8_t> whole = joined(k, b_bytes_);
  spit(file_.path, whole.data(), whole.size());
  EXPECT_EQ(another_trace_at(file_.path, "a second file header"), k.size());
  expect_first_only_reads_as(file_.path, killed.path);
}

// A cut in A's last chunk, then B: B's header is found inside the damage,
// where it begins; the first trace's tail is damaged.
TEST_F(AnotherTrace, AHeaderInsideDamageIsWhereTheOtherTraceBegins) {
  const std::vector<uint64_t> ends = chunk_ends(a_bytes_);
  ASSERT_GE(ends.size(), 2u);
  const uint64_t cut = ends[ends.size() - 2] + 20;  // inside the last chunk's header
  std::vector<uint8_t> bytes(a_bytes_.begin(), a_bytes_.begin() + static_cast<std::ptrdiff_t>(cut));
  bytes = joined(bytes, b_bytes_);
  spit(file_.path, bytes.data(), bytes.size());
  EXPECT_EQ(another_trace_at(file_.path, "a second file header"), cut);
  // The first trace up to its damage: the chunks before the cut.
  TempTrace before("before");
  spit(before.path, a_bytes_.data(), ends[ends.size() - 2]);
  const LoadedTrace want = load_trace(before.path);
  ReadOptions first;
  first.first_trace_only = true;
  const LoadedTrace got = load_trace(file_.path, first);
  EXPECT_EQ(got.status.next_trace_at, cut);
  EXPECT_EQ(got.status.file_bytes, cut);
  EXPECT_EQ(got.status.state, ReadStatus::State::kCorrupt) << got.status.reason;
  EXPECT_EQ(got.status.good_bytes, ends[ends.size() - 2]);
  ASSERT_EQ(got.events.size(), want.events.size());
  for (size_t i = 0; i < got.events.size(); ++i)
    ASSERT_EQ(std::memcmp(&got.events[i], &want.events[i], sizeof(Event)), 0) << "event " << i;
}

// One chunk encoded by hand: the events (threads named by the encoder's
// context), then a late count when `late` is not 0.
std::vector<uint8_t> encoded_chunk(const std::vector<Event>& events, uint64_t late) {
  std::vector<uint8_t> buffer(1 << 16);
  std::vector<format::ThreadCodecState> threads(4);
  format::ChunkEncoder encoder(buffer.data(), buffer.size(), threads.data(), 4);
  encoder.begin();
  for (const Event& e : events) EXPECT_TRUE(encoder.add_event(e));
  if (late) {
    EXPECT_TRUE(encoder.add_counts(format::kMetaLate, &late, 1));
  }
  buffer.resize(encoder.finish());
  return buffer;
}

Event host_alloc(uint64_t seq) {
  Event e{};
  e.seq = seq;
  e.time_ns = 1000 * seq;
  e.kind = EventKind::kAlloc;
  e.device = -1;
  e.memory = MemoryKind::kHost;
  e.api = Api::kPosixMemalign;
  e.address = 0x1000 * seq;
  e.bytes = 64;
  return e;
}

// A forced flush can write seqs 2..50 while seq 1 is still being published:
// seq 1 then begins the next chunk, below every seq read, and the recorder
// counts it late. That is one trace; without the late count it is not.
TEST(AnotherTraceRule, AnEventTheRecorderCountedLateIsNotARestart) {
  std::vector<Event> first, second;
  for (uint64_t seq = 2; seq <= 50; ++seq) first.push_back(host_alloc(seq));
  second.push_back(host_alloc(1));
  for (uint64_t seq = 51; seq <= 60; ++seq) second.push_back(host_alloc(seq));
  const format::FileHeader h = make_file_header(TraceWriterOptions{});
  std::vector<uint8_t> bytes(reinterpret_cast<const uint8_t*>(&h), reinterpret_cast<const uint8_t*>(&h) + sizeof h);
  bytes = joined(bytes, encoded_chunk(first, 0));
  const size_t second_at = bytes.size();
  TempTrace file("late");

  const std::vector<uint8_t> counted = joined(bytes, encoded_chunk(second, 1));
  spit(file.path, counted.data(), counted.size());
  LoadedTrace t;
  ASSERT_NO_THROW(t = load_trace(file.path));
  EXPECT_TRUE(t.status.complete()) << t.status.reason;
  EXPECT_EQ(t.events.size(), 60u);
  EXPECT_EQ(t.meta.late_events, 1u);

  const std::vector<uint8_t> uncounted = joined(bytes, encoded_chunk(second, 0));
  spit(file.path, uncounted.data(), uncounted.size());
  EXPECT_EQ(another_trace_at(file.path, "the sequence starts over"), second_at);
}

// ---- a file cut inside its run header ------------------------------------------------------

// The recorder writes FileHeader and RunHeader (header_bytes counts both)
// before any chunk; a file that ends between them was cut, not complete.
TEST(ReaderHeaders, AFileCutInsideItsRunHeaderIsTruncated) {
  TempTrace original("run_src");
  write_process(original.path, 7, "ranked", 0x1000, true, "job-42");
  const std::vector<uint8_t> bytes = slurp(original.path);
  const uint64_t header_bytes = sizeof(format::FileHeader) + sizeof(format::RunHeader);
  format::FileHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  ASSERT_EQ(h.header_bytes, header_bytes);
  TempTrace cut_file("run_cut");
  Scratch scratch(cut_file.path);
  scratch.fill(bytes);
  for (uint64_t cut = header_bytes; cut >= sizeof(format::FileHeader); --cut) {
    scratch.cut(cut);
    LoadedTrace t;
    ASSERT_NO_THROW(t = load_trace(cut_file.path)) << "cut at " << cut;
    EXPECT_EQ(t.events.size(), 0u);
    if (cut == header_bytes) {
      EXPECT_TRUE(t.status.complete()) << t.status.reason;
      EXPECT_STREQ(t.meta.run.run_id, "job-42");
      continue;
    }
    EXPECT_EQ(t.status.state, ReadStatus::State::kTruncated) << "cut at " << cut;
    EXPECT_EQ(t.status.reason, "file ends inside the run header at byte " + std::to_string(cut));
    EXPECT_STREQ(t.meta.run.run_id, "") << "cut at " << cut;
    // What report prints.
    const Analysis a = analyze_trace(cut_file.path);
    EXPECT_EQ(a.trace.status.state, ReadStatus::State::kTruncated);
  }
}

}  // namespace
}  // namespace psc
