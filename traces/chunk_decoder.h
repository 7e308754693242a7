// The chunk level of the trace reader, private to traces/: the file's
// headers read and checked, a chunk probed at an offset (header, payload and
// checksums), the next good chunk found after damage, and a chunk's payload
// decoded into events. read_trace (traces/reader.cc) and TraceFollower
// (traces/follower.cc) share it; nothing outside traces/ includes it.
#pragma once

#include <array>
#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "common/input_file.h"
#include "format/chunk_codec.h"
#include "format/event.h"
#include "format/file_format.h"
#include "traces/reader.h"

namespace psc::trace_chunks {

// Caps that keep a hostile file from making the reader allocate, or work,
// beyond what its size warrants.
//
// String ids are dense from 1 and every string record takes at least 3 bytes,
// so no honest id exceeds the bytes read so far; the slack covers ids whose
// record was lost (a gap, a dropped string). The absolute cap bounds a huge file.
constexpr uint64_t kMaxStringId = 1u << 24;
constexpr uint64_t kStringIdSlack = 4096;
// The offline writer's limit (TraceWriter::kMaxThreads) and above the
// recorder's (1024): thread indices index per-thread state.
constexpr uint64_t kMaxThreadIndex = (1u << 16) - 1;
// Forged chunk headers (valid header CRC, bad payload) make each resync probe
// read a payload; past this many bytes per byte of file, the reader stops
// looking for the next chunk.
constexpr uint64_t kResyncBudgetPerByte = 4;

// " at byte OFFSET", the end of every message that says where.
std::string at(uint64_t offset);

// What a chunk's metadata records say (strings, thread names, drop and late
// counts, the command line, the end mark), gathered while it decodes and
// applied to the TraceMeta in file order, before its events are handed
// over: a chunk may decode on another thread while the visitor reads the
// one before it, and a chunk that fails to decode changes nothing.
struct MetaRecords {
  struct Thread {
    uint32_t index;
    uint64_t os_tid;
    std::string name;
  };
  std::vector<std::pair<uint32_t, std::string>> strings;
  std::vector<Thread> threads;
  int drop_counts = 0;  // how many of `drops` the chunk set (0: none)
  std::array<uint64_t, format::kDropReasonCount> drops{};
  bool has_late = false;
  uint64_t late_events = 0;
  bool clean_end = false;
  bool has_command = false;
  std::string command;

  void clear() { *this = MetaRecords{}; }
  void apply_to(TraceMeta& meta);
};

// One chunk on its way from the file to the visitor: the payload read (and
// CRC-checked) in file order, decoded on whichever thread is free, handed
// over in file order.
struct DecodedChunk {
  std::vector<uint8_t> payload;
  uint64_t string_id_limit = 0;
  size_t expected_events = 0;
  // The decode's results.
  std::vector<Event> events;  // the first `count` are the chunk's; never shrinks
  size_t count = 0;
  uint64_t max_seq = 0;  // the highest seq among them
  MetaRecords meta;
  std::string error;           // why it did not decode ("" when it did)
  std::exception_ptr failure;  // what the decode threw (an allocation that failed)
  bool decoded = false;        // guarded by the DecodePool's mutex when threads decode
};

// Decodes one CRC-checked chunk payload into its events, written in place
// into the chunk's buffer, reused from chunk to chunk (an event built on the
// stack and copied cost a store-forwarding stall per field). A chunk
// delivers all its events or none, and every string its events name is in
// meta when they arrive (MetaRecords). One decoder per decoding thread: it
// keeps per-thread delta state between calls only to reset it cheaply.
class ChunkDecoder {
 public:
  explicit ChunkDecoder(uint16_t version)
      : per_kind_(format::context_per_kind(version)), drop_counts_(format::drop_reason_count(version)) {}

  // chunk.string_id_limit: the largest string id this chunk may define or
  // name; chunk.expected_events: the events its header counts (at most one
  // per two bytes of payload, the smallest record). Sets chunk.error to the
  // reason when the payload does not decode (the caller adds the offset).
  void decode(DecodedChunk& chunk);

 private:
  std::string decode(const uint8_t* p, const uint8_t* end, DecodedChunk& chunk);
  // One byte (most of a record's fields) inline; longer ones out of line.
  __attribute__((always_inline)) static const uint8_t* varint(const uint8_t* p, const uint8_t* end, uint64_t* v) {
    if (__builtin_expect(p != nullptr && p < end && *p < 0x80, 1)) {
      *v = *p;
      return p + 1;
    }
    return long_varint(p, end, v);
  }
  static const uint8_t* long_varint(const uint8_t* p, const uint8_t* end, uint64_t* v);
  const uint8_t* fail(std::string reason);
  const uint8_t* decode_event(uint8_t tag, const uint8_t* p, const uint8_t* end, Event& e);
  const uint8_t* decode_blob(const uint8_t* p, const uint8_t* end, std::string* text);
  const uint8_t* decode_meta(uint8_t tag, const uint8_t* p, const uint8_t* end, MetaRecords& meta);

  format::ChunkCodecState state_;
  uint64_t seq_before_jumps_ = 0;  // the highest seq a jump (a gap, a late event) left behind in this chunk
  std::vector<format::ThreadCodecState> threads_;
  std::vector<uint32_t> touched_;  // threads with state in this chunk
  bool per_kind_ = true;
  int drop_counts_ = 0;
  uint64_t string_id_limit_ = 0;
  std::string error_;
};

// The FileHeader, checked (magic, reader version, size, checksum); throws
// TraceError for a file that is not a trace this reader can read.
format::FileHeader read_header(const InputFile& file, const std::string& path);
// The RunHeader after the FileHeader, when header_bytes has room for it;
// zeros (no run identity) in a file written before it existed.
format::RunHeader read_run_header(const InputFile& file, const format::FileHeader& h, const std::string& path);

// One chunk at an offset: its header and payload, checked. Failures say
// whether the file merely ends (truncated) or the bytes are wrong (corrupt).
struct Probe {
  // kFileHeader: the magic of a file header where a chunk should begin:
  // another trace appended to this one.
  enum class Result { kGood, kTruncated, kCorrupt, kFileHeader };
  Result result = Result::kGood;
  std::string reason;
  format::ChunkHeader header{};
};

class ChunkFile {
 public:
  ChunkFile(const InputFile& file, uint64_t file_bytes) : file_(file), file_bytes_(file_bytes) {}

  // Reads the chunk at offset into payload().
  Probe probe(uint64_t offset);

  // The offset of the next whole, checksum-valid chunk after `from`, or
  // file_bytes when there is none: how the reader steps over a gap (a write
  // that failed mid-run, then later chunks written fine). Reads the file
  // once in blocks; only candidates whose header checksum holds cost a
  // payload read, and those are capped by the budget. A whole file header
  // (magic and checksum) found first ends the search there, *file_header
  // set: another trace begins inside the damage.
  uint64_t next_chunk(uint64_t from, bool* file_header);

  std::vector<uint8_t>& payload() { return payload_; }

 private:
  // A file header at `offset`: its magic (the first of `bytes`, `n` of them
  // read) and its checksum.
  bool is_file_header(uint64_t offset, const uint8_t* bytes, size_t n) const;

  const InputFile& file_;
  uint64_t file_bytes_;
  uint64_t resync_budget_ = kResyncBudgetPerByte * file_bytes_ + format::kMaxChunkPayload;
  std::vector<uint8_t> payload_;
};

}  // namespace psc::trace_chunks
