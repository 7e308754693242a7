#include "traces/reader.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>
#include <utility>

#include "common/input_file.h"
#include "format/chunk_codec.h"
#include "format/crc32c.h"
#include "format/printable.h"

#define PSC_READER_LIKELY(x) __builtin_expect(!!(x), 1)
#define PSC_READER_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace psc {
namespace {

using format::ChunkHeader;
using format::FileHeader;

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

std::string at(uint64_t offset) { return " at byte " + std::to_string(offset); }

// A path as a shell word, for a command line a message suggests.
// A path as one shell word, on one line: '...' when every byte prints,
// else bash's $'...' with the escapes of printable_path.
std::string shell_word(const std::string& path) {
  const bool plain = !path.empty() && std::all_of(path.begin(), path.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || (c != 0 && std::strchr("/._-+,:@%=", c) != nullptr);
  });
  if (plain) return path;
  std::string quoted;
  if (format::needs_escaping(path.data(), path.size())) {
    quoted = "$'";
    format::put_printable(
        path.data(), path.size(), [&](const char* text, size_t n) { quoted.append(text, n); }, /*quote=*/true);
    return quoted + "'";
  }
  quoted = "'";
  for (char c : path) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

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
  void apply_to(TraceMeta& meta) {
    for (auto& [id, text] : strings) {
      if (id >= meta.strings.size()) meta.strings.resize(id + 1);
      meta.strings[id] = std::move(text);
    }
    for (Thread& t : threads) {
      if (t.index >= meta.threads.size()) meta.threads.resize(t.index + 1);
      meta.threads[t.index].index = t.index;
      meta.threads[t.index].os_tid = t.os_tid;
      meta.threads[t.index].name = std::move(t.name);
    }
    for (int i = 0; i < drop_counts; ++i) meta.drops[static_cast<size_t>(i)] = drops[static_cast<size_t>(i)];
    if (has_late) meta.late_events = late_events;
    if (clean_end) meta.clean_end = true;
    if (has_command) meta.command = std::move(command);
  }
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
  void decode(DecodedChunk& chunk) {
    chunk.count = 0;
    chunk.max_seq = 0;
    chunk.meta.clear();
    chunk.error.clear();
    chunk.failure = nullptr;
    try {
      chunk.error = decode(chunk.payload.data(), chunk.payload.data() + chunk.payload.size(), chunk);
    } catch (...) {
      chunk.failure = std::current_exception();
    }
    if (!chunk.error.empty() || chunk.failure) chunk.count = 0;
  }

 private:
  std::string decode(const uint8_t* p, const uint8_t* end, DecodedChunk& chunk) {
    string_id_limit_ = chunk.string_id_limit;
    error_.clear();
    state_ = format::ChunkCodecState{};
    // Only the threads the last chunk used: cost per chunk follows its records.
    for (uint32_t t : touched_) threads_[t] = format::ThreadCodecState{};
    touched_.clear();
    // One size for the file's largest chunk; a forged record count cannot inflate it.
    std::vector<Event>& batch = chunk.events;
    if (batch.size() < chunk.expected_events) batch.resize(chunk.expected_events);
    size_t& count = chunk.count;
    seq_before_jumps_ = 0;
    while (p < end) {
      const uint8_t tag = *p++;
      const uint8_t kind = tag & 0x0f;
      if (kind == 0) {
        p = decode_meta(tag, p, end, chunk.meta);
      } else if (kind <= kMaxEventKind) {
        // More events than the header counts (a forged count): grow, never
        // past one per two bytes of payload.
        if (PSC_READER_UNLIKELY(count == batch.size())) batch.resize(std::max<size_t>(64, 2 * batch.size()));
        p = decode_event(tag, p, end, batch[count]);
        if (p) ++count;
      } else {
        return "unknown record tag " + std::to_string(tag);
      }
      if (!p) return error_.empty() ? "truncated record" : error_;
    }
    // Seqs rise by one between jumps: the highest is the last, or one a jump left.
    chunk.max_seq = std::max(seq_before_jumps_, state_.seq);
    return {};
  }

 private:
  static const uint8_t* varint(const uint8_t* p, const uint8_t* end, uint64_t* v) {
    if (PSC_READER_LIKELY(p != nullptr && p < end && *p < 0x80)) {
      *v = *p;
      return p + 1;
    }
    return p ? format::get_varint(p, end, v) : nullptr;
  }

  const uint8_t* fail(std::string reason) {
    error_ = std::move(reason);
    return nullptr;
  }

  const uint8_t* decode_event(uint8_t tag, const uint8_t* p, const uint8_t* end, Event& e) {
    e = Event{};
    e.kind = static_cast<EventKind>(tag & 0x0f);
    uint64_t v = 0;
    e.seq = state_.seq + 1;
    if (tag & format::kFieldSeqJump) {
      seq_before_jumps_ = std::max(seq_before_jumps_, state_.seq);
      p = varint(p, end, &v);
      e.seq = state_.seq + 1 + static_cast<uint64_t>(format::unzigzag(v));
    }
    p = varint(p, end, &v);
    e.time_ns = state_.time_ns + static_cast<uint64_t>(format::unzigzag(v));
    e.thread = state_.thread;
    if (tag & format::kFieldThread) {
      p = varint(p, end, &v);
      if (p && v > kMaxThreadIndex) return fail("thread index " + std::to_string(v) + " out of range");
      e.thread = static_cast<uint32_t>(v);
    }
    if (!p) return nullptr;
    if (e.thread == UINT32_MAX) return fail("event before any thread was named");
    if (e.thread >= threads_.size()) threads_.resize(e.thread + 1);
    format::ThreadCodecState& t = threads_[e.thread];
    if (!t.touched) {
      t.touched = true;
      touched_.push_back(e.thread);
    }
    format::EventContext& c = t.contexts[format::context_slot(e.kind, per_kind_)];
    if (tag & format::kFieldContext) {
      p = varint(p, end, &v);
      // -1 is the host; every consumer indexes devices from there.
      const int64_t device = format::unzigzag(v);
      if (p && (device < -1 || device > INT16_MAX)) return fail("device " + std::to_string(device) + " out of range");
      c.device = static_cast<int16_t>(device);
      p = varint(p, end, &c.stream);
      if (!p || end - p < 3) return fail("truncated event context");
      c.memory = *p++;
      c.api = *p++;
      c.flags = *p++;
      c.seen = true;
    } else if (!c.seen) {
      // A thread's first event in a chunk (v4: of each kind) sets its context.
      return fail("event without context for thread " + std::to_string(e.thread));
    }
    if (tag & format::kFieldRange) {
      p = varint(p, end, &v);
      t.range = static_cast<uint32_t>(v);
    }
    const uint8_t fields = format::fields_of(e.kind, static_cast<Api>(c.api));
    if (fields & format::kHasAddress) {
      p = varint(p, end, &v);
      t.address += static_cast<uint64_t>(format::unzigzag(v));
      e.address = t.address;
    }
    if (fields & format::kHasBytes) p = varint(p, end, &e.bytes);
    if (fields & (format::kHasName | format::kHasPayload)) {
      if (fields & format::kHasName) {
        p = varint(p, end, &v);
        if (p && v > string_id_limit_) return fail("string id " + std::to_string(v) + " out of range");
        e.name.value = static_cast<uint32_t>(v);
      }
      if (fields & format::kHasPayload) {
        p = varint(p, end, &v);
        if (p && v > string_id_limit_) return fail("string id " + std::to_string(v) + " out of range");
        e.payload.value = static_cast<uint32_t>(v);
      }
    }
    if (!p) return nullptr;
    state_.seq = e.seq;
    state_.time_ns = e.time_ns;
    state_.thread = e.thread;
    e.device = c.device;
    e.stream = c.stream;
    e.memory = static_cast<MemoryKind>(c.memory);
    e.api = static_cast<Api>(c.api);
    e.flags = c.flags;
    e.range.value = t.range;
    return p;
  }

  const uint8_t* decode_blob(const uint8_t* p, const uint8_t* end, std::string* text) {
    uint64_t length = 0;
    p = varint(p, end, &length);
    if (!p) return nullptr;
    if (length > static_cast<uint64_t>(end - p)) return fail("string runs past the chunk");
    text->assign(reinterpret_cast<const char*>(p), length);
    return p + length;
  }

  const uint8_t* decode_meta(uint8_t tag, const uint8_t* p, const uint8_t* end, MetaRecords& meta) {
    uint64_t v = 0;
    switch (tag) {
      case format::kMetaString: {
        p = varint(p, end, &v);
        if (!p) return nullptr;
        if (v == 0 || v > string_id_limit_) return fail("string id " + std::to_string(v) + " out of range");
        meta.strings.emplace_back(static_cast<uint32_t>(v), std::string());
        return decode_blob(p, end, &meta.strings.back().second);
      }
      case format::kMetaThread: {
        uint64_t tid = 0;
        p = varint(varint(p, end, &v), end, &tid);
        if (!p) return nullptr;
        if (v > kMaxThreadIndex) return fail("thread index " + std::to_string(v) + " out of range");
        meta.threads.push_back(MetaRecords::Thread{static_cast<uint32_t>(v), tid, {}});
        return decode_blob(p, end, &meta.threads.back().name);
      }
      case format::kMetaDrops:
        // As many counts as the file's version has reasons (v2: no write_failed).
        for (int i = 0; i < drop_counts_; ++i) p = varint(p, end, &meta.drops[static_cast<size_t>(i)]);
        meta.drop_counts = drop_counts_;
        return p;
      case format::kMetaLate: meta.has_late = true; return varint(p, end, &meta.late_events);
      case format::kMetaEnd: meta.clean_end = true; return varint(p, end, &v);
      case format::kMetaCommand: meta.has_command = true; return decode_blob(p, end, &meta.command);
      default: return fail("unknown metadata tag " + std::to_string(tag));
    }
  }

  format::ChunkCodecState state_;
  uint64_t seq_before_jumps_ = 0;  // the highest seq a jump (a gap, a late event) left behind in this chunk
  std::vector<format::ThreadCodecState> threads_;
  std::vector<uint32_t> touched_;  // threads with state in this chunk
  bool per_kind_ = true;
  int drop_counts_ = 0;
  uint64_t string_id_limit_ = 0;
  std::string error_;
};

FileHeader read_header(const InputFile& file, const std::string& path) {
  FileHeader h{};
  size_t got = file.read_at(0, &h, sizeof h);
  if (got < sizeof h.magic || std::memcmp(h.magic, format::kMagic, sizeof h.magic) != 0)
    throw TraceError(path, 0, "not a peakscope trace (bad magic)");
  if (got < offsetof(FileHeader, header_bytes)) throw TraceError(path, got, "file ends inside the header");
  if (h.min_reader_version > format::kVersion)
    throw TraceError(path, 8,
                     "written in format v" + std::to_string(h.version) + ", which needs a reader of v" +
                         std::to_string(h.min_reader_version) + "; this peakscope reads up to v" +
                         std::to_string(format::kVersion));
  if (got < sizeof h) throw TraceError(path, got, "file ends inside the header");
  if (h.header_bytes < sizeof h || h.header_bytes > (1u << 20))
    throw TraceError(path, offsetof(FileHeader, header_bytes), "bad header size " + std::to_string(h.header_bytes));
  if (crc32c(&h, offsetof(FileHeader, header_crc)) != h.header_crc)
    throw TraceError(path, offsetof(FileHeader, header_crc), "header checksum mismatch");
  return h;
}

// The RunHeader after the FileHeader, when header_bytes has room for it;
// zeros (no run identity) in a file written before it existed.
format::RunHeader read_run_header(const InputFile& file, const FileHeader& h, const std::string& path) {
  format::RunHeader run{};
  if (h.header_bytes < sizeof h + sizeof run) return run;
  // Cut short before the run header was written: a trace without events,
  // and without an identity.
  if (file.read_at(sizeof h, &run, sizeof run) < sizeof run) return format::RunHeader{};
  if (crc32c(&run, offsetof(format::RunHeader, crc)) != run.crc)
    throw TraceError(path, sizeof h + offsetof(format::RunHeader, crc), "run header checksum mismatch");
  run.run_id[sizeof run.run_id - 1] = 0;
  return run;
}

// One chunk at an offset: its header and payload, checked. Failures say
// whether the file merely ends (truncated) or the bytes are wrong (corrupt).
struct Probe {
  // kFileHeader: the magic of a file header where a chunk should begin:
  // another trace appended to this one.
  enum class Result { kGood, kTruncated, kCorrupt, kFileHeader };
  Result result = Result::kGood;
  std::string reason;
  ChunkHeader header{};
};

class ChunkFile {
 public:
  ChunkFile(const InputFile& file, uint64_t file_bytes) : file_(file), file_bytes_(file_bytes) {}

  // Reads the chunk at offset into payload().
  Probe probe(uint64_t offset) {
    Probe p;
    ChunkHeader& h = p.header;
    auto bad = [&](Probe::Result result, std::string reason) {
      p.result = result;
      p.reason = std::move(reason);
      return p;
    };
    const size_t got = file_.read_at(offset, &h, sizeof h);
    if (got >= sizeof format::kMagic && std::memcmp(&h, format::kMagic, sizeof format::kMagic) == 0)
      return bad(Probe::Result::kFileHeader, "a second file header");
    if (got < sizeof h) return bad(Probe::Result::kTruncated, "file ends inside a chunk header");
    if (h.magic != format::kChunkMagic || crc32c(&h, offsetof(ChunkHeader, header_crc)) != h.header_crc)
      return bad(Probe::Result::kCorrupt, "bad chunk header");
    if (h.payload_bytes > format::kMaxChunkPayload)
      return bad(Probe::Result::kCorrupt, "chunk payload size " + std::to_string(h.payload_bytes) + " too large");
    if (offset + sizeof h + h.payload_bytes > file_bytes_)
      return bad(Probe::Result::kTruncated, "file ends inside a chunk");
    payload_.resize(h.payload_bytes);
    if (file_.read_at(offset + sizeof h, payload_.data(), h.payload_bytes) < h.payload_bytes)
      return bad(Probe::Result::kTruncated, "file ends inside a chunk");
    if (crc32c(payload_.data(), payload_.size()) != h.payload_crc)
      return bad(Probe::Result::kCorrupt, "chunk payload checksum mismatch");
    return p;
  }

  // The offset of the next whole, checksum-valid chunk after `from`, or
  // file_bytes when there is none: how the reader steps over a gap (a write
  // that failed mid-run, then later chunks written fine). Reads the file
  // once in blocks; only candidates whose header checksum holds cost a
  // payload read, and those are capped by the budget. A whole file header
  // (magic and checksum) found first ends the search there, *file_header
  // set: another trace begins inside the damage.
  uint64_t next_chunk(uint64_t from, bool* file_header) {
    *file_header = false;
    std::vector<uint8_t> block(size_t{1} << 16);
    const uint8_t magic[4] = {static_cast<uint8_t>(format::kChunkMagic), static_cast<uint8_t>(format::kChunkMagic >> 8),
                              static_cast<uint8_t>(format::kChunkMagic >> 16),
                              static_cast<uint8_t>(format::kChunkMagic >> 24)};
    for (uint64_t base = from; base + sizeof(ChunkHeader) <= file_bytes_;) {
      const size_t got = file_.read_at(base, block.data(), block.size());
      if (got < sizeof(ChunkHeader)) break;
      for (size_t i = 0; i + sizeof magic <= got; ++i) {
        if (block[i] != magic[0]) continue;
        if (std::memcmp(block.data() + i, magic, sizeof magic) != 0) {
          if (is_file_header(base + i, block.data() + i, got - i)) {
            *file_header = true;
            return base + i;
          }
          continue;
        }
        const uint64_t candidate = base + i;
        ChunkHeader h{};
        if (file_.read_at(candidate, &h, sizeof h) < sizeof h) return file_bytes_;
        if (crc32c(&h, offsetof(ChunkHeader, header_crc)) != h.header_crc) continue;
        // Sizes the probe refuses unread cost nothing; a payload it reads does.
        if (h.payload_bytes > format::kMaxChunkPayload || candidate + sizeof h + h.payload_bytes > file_bytes_)
          continue;
        if (resync_budget_ < h.payload_bytes) return file_bytes_;
        resync_budget_ -= h.payload_bytes;
        if (probe(candidate).result == Probe::Result::kGood) return candidate;
      }
      // A magic across the block boundary (a chunk's, a file header's) is seen next time.
      base += got - (sizeof format::kMagic - 1);
    }
    return file_bytes_;
  }

  std::vector<uint8_t>& payload() { return payload_; }

 private:
  // A file header at `offset`: its magic (the first of `bytes`, `n` of them
  // read) and its checksum.
  bool is_file_header(uint64_t offset, const uint8_t* bytes, size_t n) const {
    if (n < sizeof format::kMagic || std::memcmp(bytes, format::kMagic, sizeof format::kMagic) != 0) return false;
    FileHeader h{};
    return file_.read_at(offset, &h, sizeof h) == sizeof h &&
           crc32c(&h, offsetof(FileHeader, header_crc)) == h.header_crc;
  }

  const InputFile& file_;
  uint64_t file_bytes_;
  uint64_t resync_budget_ = kResyncBudgetPerByte * file_bytes_ + format::kMaxChunkPayload;
  std::vector<uint8_t> payload_;
};

// How many threads decode chunks beside the one that reads the file and
// calls the visitor: ReadOptions::decode_threads, else PEAKSCOPE_READ_THREADS
// (0: decode on the reading thread), else the processors shared among the
// reads under way (traces analysed side by side, common/parallel.h), up to
// 4; none where that leaves fewer than 2 (a decoding thread without a
// processor of its own gains nothing), nor for a file too small to be worth
// a thread.
constexpr uint64_t kParallelMinBytes = 4u << 20;
constexpr unsigned kMaxDecodeThreads = 4;
std::atomic<unsigned> g_reads{0};  // reads under way in this process

// Counts a read under way for as long as it lasts.
struct ReadUnderWay {
  ReadUnderWay() { g_reads.fetch_add(1, std::memory_order_relaxed); }
  ~ReadUnderWay() { g_reads.fetch_sub(1, std::memory_order_relaxed); }
  ReadUnderWay(const ReadUnderWay&) = delete;
  ReadUnderWay& operator=(const ReadUnderWay&) = delete;
};

unsigned decode_threads(const ReadOptions& options, uint64_t file_bytes) {
  if (options.decode_threads >= 0) return std::min<unsigned>(static_cast<unsigned>(options.decode_threads), 64);
  if (const char* text = std::getenv("PEAKSCOPE_READ_THREADS"); text && *text) {
    char* end = nullptr;
    const unsigned long n = std::strtoul(text, &end, 10);
    if (*end == '\0') return static_cast<unsigned>(std::min<unsigned long>(n, 64));
  }
  if (file_bytes < kParallelMinBytes) return 0;
  const unsigned share = std::thread::hardware_concurrency() / std::max(1u, g_reads.load(std::memory_order_relaxed));
  return share >= 2 ? std::min(share, kMaxDecodeThreads) : 0;
}

// Chunks decoding on other threads, in the order they were handed in. With
// no threads, a chunk decodes on the caller's thread when it is handed in.
// The destructor stops the threads (chunks not yet decoded are left), so a
// visitor that throws, or finishes early, ends the read cleanly.
class DecodePool {
 public:
  DecodePool(unsigned threads, uint16_t version) : version_(version), inline_(version) {
    for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  }
  ~DecodePool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    work_ready_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  DecodePool(const DecodePool&) = delete;
  DecodePool& operator=(const DecodePool&) = delete;

  void submit(DecodedChunk* chunk) {
    if (threads_.empty()) {
      inline_.decode(*chunk);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      chunk->decoded = false;
      queue_.push_back(chunk);
    }
    work_ready_.notify_one();
  }
  // Until the chunk has decoded.
  void wait(DecodedChunk* chunk) {
    if (threads_.empty()) return;
    std::unique_lock<std::mutex> lock(mutex_);
    chunk_done_.wait(lock, [&] { return chunk->decoded; });
  }

 private:
  void work() {
    ChunkDecoder decoder(version_);
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      work_ready_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      DecodedChunk* chunk = queue_.front();
      queue_.pop_front();
      lock.unlock();
      decoder.decode(*chunk);
      lock.lock();
      chunk->decoded = true;
      chunk_done_.notify_all();
    }
  }

  uint16_t version_;
  ChunkDecoder inline_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable chunk_done_;
  std::deque<DecodedChunk*> queue_;
  bool stop_ = false;
};

// Damage seen and not yet followed by a good chunk: at the end of the file
// it is the tail's (truncated or corrupt); followed by a good chunk, a gap.
struct Damage {
  ReadStatus::State state = ReadStatus::State::kComplete;
  std::string reason;
  uint64_t offset = 0;

  bool pending() const { return state != ReadStatus::State::kComplete; }
  // Damage at `where`; the first since the last good chunk is the one that says why.
  void note(ReadStatus::State found, const std::string& why, uint64_t where) {
    if (pending()) return;
    state = found;
    reason = why + at(where);
    offset = where;
  }
  // A good chunk at `where` after damage: the damage was a gap, counted in the status.
  void close_gap(uint64_t where, ReadStatus& status) {
    if (!pending()) return;
    ++status.gaps;
    status.gap_bytes += where - offset;
    if (status.gap_reason.empty()) status.gap_reason = reason;
    state = ReadStatus::State::kComplete;
  }
};

// Which header a file cut before its first chunk ends inside (FileHeader,
// then RunHeader: header_bytes): the recorder writes both before its first
// chunk.
const char* cut_header(const FileHeader& h, uint64_t file_bytes) {
  const bool in_run_header = h.header_bytes >= sizeof(FileHeader) + sizeof(format::RunHeader) &&
                             file_bytes < sizeof(FileHeader) + sizeof(format::RunHeader);
  return in_run_header ? "file ends inside the run header" : "file ends inside the header";
}

// Another trace appended to this one (ReadStatus) begins at `where`: an
// error that says what was found there and how to keep the first trace,
// or, when only the first is wanted, the end of the read.
void another_trace(const std::string& path, const ReadOptions& options, uint64_t where, const std::string& found,
                   ReadStatus& status) {
  if (!options.first_trace_only)
    throw TraceError(path, where, "another trace begins",
                     " (" + found + "); to read the first alone: head -c " + std::to_string(where) + " " +
                         shell_word(path) + " > first.pstrace");
  status.next_trace_at = where;
  status.next_trace = "another trace begins" + at(where) + " (" + found + ")";
  status.file_bytes = where;
}

// What follows the end mark that closed the trace, at `offset`: whatever it
// is was appended.
const char* after_end_mark(const InputFile& file, uint64_t offset) {
  char magic[sizeof format::kMagic] = {};
  const bool header = file.read_at(offset, magic, sizeof magic) == sizeof magic &&
                      std::memcmp(magic, format::kMagic, sizeof magic) == 0;
  return header ? "a second file header" : "data after the end mark that closed the first";
}

// What the chunks read so far say about the sequence: the lowest first_seq
// of a chunk (0: none yet) and the highest seq.
struct SequenceSeen {
  uint64_t lowest_first_seq = 0;
  uint64_t highest_seq = 0;

  // A sequence that starts over: the chunk begins at or below the first
  // seq read, and more of its events fall below the highest seq read than
  // the recorder counted as late (events written after a later seq, which
  // a forced flush can leave; `late_events`: the count so far).
  bool starts_over(uint64_t first_seq, const DecodedChunk& chunk, uint64_t late_events) const {
    if (first_seq == 0 || lowest_first_seq == 0 || first_seq > lowest_first_seq || !chunk.count) return false;
    uint64_t below = 0;
    uint64_t high = highest_seq;
    for (size_t i = 0; i < chunk.count; ++i) {
      if (chunk.events[i].seq < high)
        ++below;
      else
        high = chunk.events[i].seq;
    }
    return below > (chunk.meta.has_late ? chunk.meta.late_events : late_events);
  }
  // What starts_over found, for the message.
  std::string restart(uint64_t first_seq) const {
    return "the sequence starts over: a chunk from seq " + std::to_string(first_seq) + " after seqs up to " +
           std::to_string(highest_seq) + " were read";
  }
  // A chunk read: its header's first_seq and its highest seq.
  void add(uint64_t first_seq, uint64_t max_seq) {
    if (first_seq != 0 && (lowest_first_seq == 0 || first_seq < lowest_first_seq)) lowest_first_seq = first_seq;
    highest_seq = std::max(highest_seq, max_seq);
  }
};

// What the probe found at an offset, on its way to the visitor.
struct Found {
  uint64_t offset;                // where it was found
  uint64_t next;                  // where the probe went on: the chunk's end, or the next good chunk after damage
  DecodedChunk* chunk = nullptr;  // null: damage, or another trace
  ReadStatus::State state = ReadStatus::State::kComplete;
  std::string reason;
  uint64_t first_seq = 0;   // the chunk header's
  bool next_trace = false;  // a file header: another trace begins here
};

// The file is probed (chunk headers, payloads and their checksums, the
// search for the next good chunk after damage) in order on the reading
// thread, and up to `slots` chunks ahead of the visitor; they decode
// meanwhile. What the probe finds comes out in file order.
class ProbeAhead {
 public:
  ProbeAhead(const InputFile& file, uint64_t file_bytes, uint64_t from, unsigned threads, uint16_t version)
      : chunks_(file, file_bytes),
        file_bytes_(file_bytes),
        probe_at_(from),
        slots_(threads + 1),
        pool_(threads, version) {
    for (size_t i = 0; i < slots_; ++i) {
      storage_.push_back(std::make_unique<DecodedChunk>());
      free_chunks_.push_back(storage_.back().get());
    }
  }

  // Probes on while a slot is free and what was found has room.
  void probe() {
    while (probe_at_ < file_bytes_ && !free_chunks_.empty() && found_.size() < 2 * slots_) {
      const Probe probe = chunks_.probe(probe_at_);
      if (probe.result == Probe::Result::kFileHeader) {
        another_header(probe_at_);
        return;
      }
      if (probe.result != Probe::Result::kGood) {
        if (!step_over_damage(probe)) return;
        continue;
      }
      submit(probe.header);
    }
  }

  bool empty() const { return found_.empty(); }
  // The next thing found, in file order.
  Found next() {
    Found f = std::move(found_.front());
    found_.pop_front();
    return f;
  }
  // Until the chunk has decoded; its slot is free again once this turn is
  // over: the probe runs only after it.
  void wait(DecodedChunk* chunk) {
    pool_.wait(chunk);
    free_chunks_.push_back(chunk);
  }

 private:
  // Nothing after another trace's file header is this trace's: probing stops there.
  void another_header(uint64_t where) {
    found_.push_back(Found{where, where, nullptr, ReadStatus::State::kComplete, "a second file header", 0, true});
    probe_at_ = file_bytes_;
  }

  // Damage at probe_at_: found, and the probe goes on at the next good chunk
  // after it; false when another trace's file header comes first.
  bool step_over_damage(const Probe& probe) {
    const ReadStatus::State state =
        probe.result == Probe::Result::kTruncated ? ReadStatus::State::kTruncated : ReadStatus::State::kCorrupt;
    bool file_header = false;
    const uint64_t next = chunks_.next_chunk(probe_at_ + 1, &file_header);
    found_.push_back(Found{probe_at_, next, nullptr, state, probe.reason});
    probe_at_ = next;
    if (!file_header) return true;
    another_header(next);
    return false;
  }

  // The good chunk at probe_at_ (its payload just probed) into a free slot, to decode.
  void submit(const ChunkHeader& h) {
    const uint64_t chunk_end = probe_at_ + sizeof h + h.payload_bytes;
    DecodedChunk* chunk = free_chunks_.back();
    free_chunks_.pop_back();
    chunk->payload.swap(chunks_.payload());
    chunk->string_id_limit = std::min(kMaxStringId, chunk_end + kStringIdSlack);
    chunk->expected_events = std::min<size_t>(h.record_count, h.payload_bytes / 2);
    found_.push_back(Found{probe_at_, chunk_end, chunk, ReadStatus::State::kComplete, {}, h.first_seq});
    probe_at_ = chunk_end;
    pool_.submit(chunk);
  }

  ChunkFile chunks_;
  const uint64_t file_bytes_;
  uint64_t probe_at_;
  const size_t slots_;
  std::vector<std::unique_ptr<DecodedChunk>> storage_;
  std::vector<DecodedChunk*> free_chunks_;
  std::deque<Found> found_;
  DecodePool pool_;  // last: its threads stop before the chunks they decode go
};

// The read's state once the chunks are read: damage still pending is the
// tail's; else the gaps stepped over, if any.
void settle_state(const Damage& damage, ReadStatus& status) {
  if (damage.pending()) {
    status.state = damage.state;
    status.reason = damage.reason;
  } else if (status.gaps > 0) {
    status.state = ReadStatus::State::kGap;
    status.reason = status.gap_reason + ": skipped " + std::to_string(status.gap_bytes) + " bytes in " +
                    std::to_string(status.gaps) + (status.gaps == 1 ? " gap" : " gaps") + " and read the chunks after";
  }
}

// The read itself; *offset follows it so that a failure to allocate can be
// reported where it happened.
ReadStatus read_chunks(const std::string& path, TraceVisitor& visitor, const ReadOptions& options,
                       uint64_t* offset_out) {
  uint64_t& offset = *offset_out;
  InputFile file(path);
  if (!file.ok()) throw TraceError(path, 0, file.error());
  ReadStatus status;
  status.file_bytes = file.size();
  const uint64_t file_bytes = status.file_bytes;
  TraceMeta meta;
  meta.path = path;
  meta.header = read_header(file, path);
  meta.run = read_run_header(file, meta.header, path);
  visitor.on_begin(meta);

  offset = meta.header.header_bytes;
  Damage damage;
  if (file_bytes < meta.header.header_bytes) {
    offset = file_bytes;
    damage.note(ReadStatus::State::kTruncated, cut_header(meta.header, file_bytes), offset);
  }
  SequenceSeen sequence;
  const ReadUnderWay counted;
  ProbeAhead ahead(file, file_bytes, meta.header.header_bytes, decode_threads(options, file_bytes),
                   meta.header.version);
  for (;;) {
    ahead.probe();
    if (ahead.empty()) break;
    const Found f = ahead.next();
    offset = f.offset;
    if (f.next_trace) {
      another_trace(path, options, f.offset, f.reason, status);
      break;
    }
    if (!f.chunk) {
      damage.note(f.state, f.reason, offset);
      continue;
    }
    DecodedChunk& chunk = *f.chunk;
    ahead.wait(&chunk);
    if (chunk.failure) std::rethrow_exception(chunk.failure);
    if (!chunk.error.empty()) {
      // Its checksum holds, so its length does: the next chunk starts after it.
      damage.note(ReadStatus::State::kCorrupt, "undecodable chunk (" + chunk.error + ")", offset);
      continue;
    }
    if (sequence.starts_over(f.first_seq, chunk, meta.late_events)) {
      // Damage right before it is the other trace's (its file header, damaged).
      const uint64_t where = damage.pending() ? damage.offset : f.offset;
      damage.state = ReadStatus::State::kComplete;
      another_trace(path, options, where, sequence.restart(f.first_seq), status);
      break;
    }
    damage.close_gap(offset, status);
    chunk.meta.apply_to(meta);
    if (chunk.count) visitor.on_events(chunk.events.data(), chunk.count, meta);
    offset = f.next;
    status.good_bytes = offset;
    ++status.chunks;
    status.events += chunk.count;
    sequence.add(f.first_seq, chunk.max_seq);
    if (chunk.count && visitor.finished()) {
      status.stopped = true;
      break;
    }
    // The end mark closes the trace: whatever follows was appended.
    if (chunk.meta.clean_end && offset < file_bytes) {
      another_trace(path, options, offset, after_end_mark(file, offset), status);
      break;
    }
  }
  settle_state(damage, status);
  if (status.chunks == 0) status.good_bytes = std::min<uint64_t>(status.file_bytes, meta.header.header_bytes);
  visitor.on_end(meta, status);
  return status;
}

}  // namespace

TraceMeta read_trace_headers(const std::string& path) {
  InputFile file(path);
  if (!file.ok()) throw TraceError(path, 0, file.error());
  TraceMeta meta;
  meta.path = path;
  meta.header = read_header(file, path);
  meta.run = read_run_header(file, meta.header, path);
  return meta;
}

// ---- following a trace that is still being written ---------------------------------

const char* follow_state_name(FollowStatus::State state) {
  switch (state) {
    case FollowStatus::State::kWaiting: return "waiting for the trace";
    case FollowStatus::State::kFollowing: return "following";
    case FollowStatus::State::kClosed: return "closed by the recorder";
    case FollowStatus::State::kWriterGone: return "the writer ended without closing it";
    case FollowStatus::State::kStopped: return "stopped";
  }
  return "?";
}

struct TraceFollower::Open {
  explicit Open(const std::string& path) : file(path) {}
  InputFile file;
  std::unique_ptr<ChunkDecoder> decoder;
  DecodedChunk chunk;
};

TraceFollower::TraceFollower(std::string path, uint32_t writer_pid) : path_(std::move(path)), writer_pid_(writer_pid) {
  meta_.path = path_;
}

TraceFollower::~TraceFollower() = default;

// A process that no longer exists, or a zombie nobody reaped yet, has
// written all it will. Only a writer on this host can be asked.
bool TraceFollower::writer_alive() {
  uint32_t pid = writer_pid_;
  if (pid == 0 && open_) {
    char host[sizeof meta_.header.hostname + 1] = {};
    if (gethostname(host, sizeof host - 1) != 0 ||
        strncmp(host, meta_.header.hostname, sizeof meta_.header.hostname) != 0)
      return true;
    pid = meta_.header.pid;
  }
  if (pid == 0) return true;
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t name_end = line.rfind(')');
  return name_end == std::string::npos || name_end + 2 >= line.size() || line[name_end + 2] != 'Z';
}

void TraceFollower::finish(TraceVisitor& visitor, FollowStatus::State state, const std::string& reason) {
  status_.state = state;
  if (!reason.empty()) status_.reason = reason;
  if (!open_) return;
  ReadStatus read;
  read.file_bytes = open_->file.current_size();
  read.good_bytes = status_.bytes;
  read.chunks = status_.chunks;
  read.events = status_.events;
  read.gaps = status_.gaps;
  read.stopped = state == FollowStatus::State::kStopped;
  if (state == FollowStatus::State::kWriterGone && status_.bytes < read.file_bytes) {
    read.state = ReadStatus::State::kTruncated;
    read.reason = "file ends inside a chunk" + at(status_.bytes);
  } else if (status_.gaps > 0) {
    read.state = ReadStatus::State::kGap;
    read.reason = read.gap_reason = status_.reason;
  }
  visitor.on_end(meta_, read);
}

FollowStatus TraceFollower::poll(TraceVisitor& visitor) {
  if (status_.over()) return status_;
  if (!open_) {
    auto file = std::make_unique<Open>(path_);
    if (!file->file.ok()) {
      status_.reason = file->file.error();
      if (writer_ended_) finish(visitor, FollowStatus::State::kWriterGone, "no trace was written: " + status_.reason);
      return status_;
    }
    const uint64_t size = file->file.current_size();
    // The recorder writes both headers before its first chunk: wait for them.
    if (size < sizeof(FileHeader)) {
      char magic[sizeof format::kMagic] = {};
      if (writer_ended_ || (file->file.read_at(0, magic, sizeof magic) == sizeof magic &&
                            std::memcmp(magic, format::kMagic, sizeof magic) != 0))
        meta_.header = read_header(file->file, path_);  // throws: not a trace, or one that will not grow
      status_.reason = "the file's header is not written yet";
      return status_;
    }
    meta_.header = read_header(file->file, path_);
    if (size < meta_.header.header_bytes) {
      status_.reason = "the file's run header is not written yet";
      if (writer_ended_) throw TraceError(path_, size, "file ends inside the run header");
      return status_;
    }
    meta_.run = read_run_header(file->file, meta_.header, path_);
    file->decoder = std::make_unique<ChunkDecoder>(meta_.header.version);
    offset_ = meta_.header.header_bytes;
    status_.bytes = offset_;
    status_.reason.clear();
    status_.state = FollowStatus::State::kFollowing;
    open_ = std::move(file);
    visitor.on_begin(meta_);
  }
  // Asked before reading: whatever a writer wrote before it ended is in the file then.
  const bool alive = !writer_ended_ && writer_alive();
  for (;;) {
    const uint64_t size = open_->file.current_size();
    if (offset_ >= size) break;
    ChunkFile chunks(open_->file, size);
    const Probe probe = chunks.probe(offset_);
    if (probe.result == Probe::Result::kFileHeader) {
      finish(visitor, FollowStatus::State::kStopped, "another trace begins" + at(offset_) + " (a second file header)");
      return status_;
    }
    // The writer has not finished this chunk (it writes a chunk whole, in order).
    if (probe.result == Probe::Result::kTruncated) break;
    if (probe.result == Probe::Result::kCorrupt) {
      bool file_header = false;
      const uint64_t next = chunks.next_chunk(offset_ + 1, &file_header);
      if (next >= size) break;  // nothing whole after the damage yet
      if (file_header) {
        finish(visitor, FollowStatus::State::kStopped, "another trace begins" + at(next) + " (a second file header)");
        return status_;
      }
      if (status_.gaps++ == 0) status_.reason = probe.reason + at(offset_);
      offset_ = next;
      continue;
    }
    const uint64_t chunk_end = offset_ + sizeof(ChunkHeader) + probe.header.payload_bytes;
    DecodedChunk& chunk = open_->chunk;
    chunk.payload.swap(chunks.payload());
    chunk.string_id_limit = std::min(kMaxStringId, chunk_end + kStringIdSlack);
    chunk.expected_events = std::min<size_t>(probe.header.record_count, probe.header.payload_bytes / 2);
    open_->decoder->decode(chunk);
    if (chunk.failure) std::rethrow_exception(chunk.failure);
    offset_ = chunk_end;
    if (!chunk.error.empty()) {
      if (status_.gaps++ == 0) status_.reason = "undecodable chunk (" + chunk.error + ")" + at(offset_);
      continue;
    }
    chunk.meta.apply_to(meta_);
    if (chunk.count) visitor.on_events(chunk.events.data(), chunk.count, meta_);
    status_.bytes = offset_;
    ++status_.chunks;
    status_.events += chunk.count;
    if (chunk.count && visitor.finished()) {
      finish(visitor, FollowStatus::State::kStopped, "the reader had all it needed");
      return status_;
    }
    if (chunk.meta.clean_end) {
      finish(visitor, FollowStatus::State::kClosed);
      return status_;
    }
  }
  if (!alive) finish(visitor, FollowStatus::State::kWriterGone, "the writer's process ended without closing the trace");
  return status_;
}

TraceError::TraceError(std::string path, uint64_t offset, const std::string& reason, const std::string& detail)
    : std::runtime_error(printable_path(path) + ": " + reason + at(offset) + detail),
      path_(std::move(path)),
      offset_(offset) {}

std::string printable_path(std::string_view path) {
  std::string shown;
  shown.reserve(path.size());
  format::put_printable(path.data(), path.size(), [&](const char* text, size_t n) { shown.append(text, n); });
  return shown;
}

std::string path_bytes_hex(std::string_view path) {
  if (format::is_utf8(path.data(), path.size())) return {};
  constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * path.size());
  for (const char c : path) {
    const auto byte = static_cast<unsigned char>(c);
    hex += kHex[byte >> 4];
    hex += kHex[byte & 15];
  }
  return hex;
}

uint64_t TraceMeta::dropped_total() const {
  uint64_t total = 0;
  for (uint64_t d : drops) total += d;
  return total;
}

// The caps above bound what a file can make the reader allocate; an
// allocation that still fails (here or in a visitor) is reported like any
// other unreadable file, with the path and where the read was.
ReadStatus read_trace(const std::string& path, TraceVisitor& visitor, const ReadOptions& options) {
  uint64_t offset = 0;
  try {
    return read_chunks(path, visitor, options, &offset);
  } catch (const std::bad_alloc&) {
    throw TraceError(path, offset, "out of memory while reading the trace");
  } catch (const std::length_error& e) {
    throw TraceError(path, offset, std::string("cannot hold what the trace describes (") + e.what() + ")");
  }
}

LoadedTrace load_trace(const std::string& path, const ReadOptions& options) {
  struct Collector : TraceVisitor {
    LoadedTrace* out;
    void on_events(const Event* e, size_t n, const TraceMeta&) override {
      out->events.insert(out->events.end(), e, e + n);
    }
    void on_end(const TraceMeta& meta, const ReadStatus&) override { out->meta = meta; }
  };
  LoadedTrace loaded;
  Collector collector;
  collector.out = &loaded;
  loaded.status = read_trace(path, collector, options);
  return loaded;
}

const char* event_kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::kAlloc: return "alloc";
    case EventKind::kFree: return "free";
    case EventKind::kRangePush: return "range_push";
    case EventKind::kRangePop: return "range_pop";
    case EventKind::kMark: return "mark";
    case EventKind::kRangeStart: return "range_start";
    case EventKind::kRangeEnd: return "range_end";
    case EventKind::kCounter: return "counter";
    case EventKind::kMap: return "map";
    case EventKind::kUnmap: return "unmap";
  }
  return "unknown";
}

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kNone: return "none";
    case MemoryKind::kHost: return "host";
    case MemoryKind::kDevice: return "device";
    case MemoryKind::kManaged: return "managed";
    case MemoryKind::kPinnedHost: return "pinned_host";
    case MemoryKind::kPool: return "pool";
    case MemoryKind::kVmmPhysical: return "vmm_physical";
    case MemoryKind::kRegisteredHost: return "registered_host";
  }
  return "unknown";
}

const char* api_name(Api api) {
  switch (api) {
    case Api::kNone: return "none";
    case Api::kPscApi: return "psc";
    case Api::kNvtx: return "nvtx";
    case Api::kPosixMemalign: return "posix_memalign";
    case Api::kAlignedAlloc: return "aligned_alloc";
    case Api::kMemalign: return "memalign";
    case Api::kValloc: return "valloc";
    case Api::kPvalloc: return "pvalloc";
    case Api::kRealloc: return "realloc";
    case Api::kLibcFree: return "free";
    case Api::kCudaMalloc: return "cudaMalloc";
    case Api::kCudaFree: return "cudaFree";
    case Api::kCudaMallocAsync: return "cudaMallocAsync";
    case Api::kCudaFreeAsync: return "cudaFreeAsync";
    case Api::kCudaMallocFromPoolAsync: return "cudaMallocFromPoolAsync";
    case Api::kCudaMallocManaged: return "cudaMallocManaged";
    case Api::kCudaMallocHost: return "cudaMallocHost";
    case Api::kCudaHostAlloc: return "cudaHostAlloc";
    case Api::kCudaFreeHost: return "cudaFreeHost";
    case Api::kCudaHostRegister: return "cudaHostRegister";
    case Api::kCudaHostUnregister: return "cudaHostUnregister";
    case Api::kCuMemAlloc: return "cuMemAlloc";
    case Api::kCuMemFree: return "cuMemFree";
    case Api::kCuMemAllocAsync: return "cuMemAllocAsync";
    case Api::kCuMemFreeAsync: return "cuMemFreeAsync";
    case Api::kCuMemAllocFromPoolAsync: return "cuMemAllocFromPoolAsync";
    case Api::kCuMemAllocManaged: return "cuMemAllocManaged";
    case Api::kCuMemHostAlloc: return "cuMemHostAlloc";
    case Api::kCuMemFreeHost: return "cuMemFreeHost";
    case Api::kCuMemCreate: return "cuMemCreate";
    case Api::kCuMemRelease: return "cuMemRelease";
    case Api::kCuMemMap: return "cuMemMap";
    case Api::kCuMemUnmap: return "cuMemUnmap";
    case Api::kCuMemAllocHost: return "cuMemAllocHost";
    case Api::kCuMemHostRegister: return "cuMemHostRegister";
    case Api::kCuMemHostUnregister: return "cuMemHostUnregister";
    case Api::kTorchPluggable: return "torch_pluggable";
    case Api::kImported: return "imported";
    case Api::kCupti: return "cupti";
  }
  return "unknown";
}

const char* drop_reason_name(format::DropReason reason) {
  const auto index = static_cast<size_t>(reason);
  return index < std::size(format::kDropReasonNames) ? format::kDropReasonNames[index] : "unknown";
}

}  // namespace psc
