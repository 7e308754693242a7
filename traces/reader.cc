#include "traces/reader.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>
#include <utility>

#include "common/input_file.h"
#include "format/printable.h"
#include "traces/chunk_decoder.h"

namespace psc {
namespace {

using format::ChunkHeader;
using format::FileHeader;
using trace_chunks::at;
using trace_chunks::ChunkDecoder;
using trace_chunks::ChunkFile;
using trace_chunks::DecodedChunk;
using trace_chunks::kMaxStringId;
using trace_chunks::kStringIdSlack;
using trace_chunks::Probe;
using trace_chunks::read_header;
using trace_chunks::read_run_header;

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

}  // namespace psc
