// The one reader of .pstrace files. Streams a trace chunk by chunk and hands
// events to a visitor in batches, in file order (which is global sequence order:
// the recorder's writer merges threads before encoding). Every consumer —
// report, exporters, importers' round trips, calibration — reads through here;
// a trace still being written is followed by traces/follower.h.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "format/event.h"
#include "format/file_format.h"

namespace psc {

// A file that is not a readable trace at all (missing, not a regular file, bad
// header, newer format, more than memory holds).
// Tools turn it into exit code 2 with the file and byte offset.
class TraceError : public std::runtime_error {
 public:
  // what(): "PATH: REASON at byte OFFSET", then DETAIL when there is one
  // (what was found there, the way on), all on one line.
  TraceError(std::string path, uint64_t offset, const std::string& reason, const std::string& detail = {});
  const std::string& path() const { return path_; }
  uint64_t offset() const { return offset_; }

 private:
  std::string path_;
  uint64_t offset_;
};

struct ThreadInfo {
  uint32_t index = 0;
  uint64_t os_tid = 0;
  std::string name;
};

// What the reader has learnt so far besides events.
struct TraceMeta {
  std::string path;
  format::FileHeader header{};
  format::RunHeader run{};               // zeros (no run identity) in files written before it
  std::vector<std::string> strings{""};  // indexed by StringId; 0 is ""
  std::vector<ThreadInfo> threads;       // indexed by thread index (gaps have empty names)
  std::array<uint64_t, format::kDropReasonCount> drops{};
  uint64_t late_events = 0;
  std::string command;
  bool clean_end = false;  // the recorder closed the file (no crash, no kill)

  std::string_view string(StringId id) const {
    return id.value < strings.size() ? std::string_view(strings[id.value]) : std::string_view();
  }
  uint64_t dropped_total() const;
};

// How far the reader got. Damage is not an error: the events in the good
// chunks were delivered. Damage at the end of the file (the chunks after it
// are missing or bad) makes the read truncated or corrupt; damage with good
// chunks after it is a gap: the reader steps over it to the next valid chunk
// (by its magic and checksums), counts it, and reads on. A file cut inside
// its headers (FileHeader, then RunHeader: header_bytes) is truncated.
//
// Another trace appended to the first is not damage: a file header (magic)
// where a chunk or damage begins, any byte after the chunk holding the end
// mark, or a chunk whose sequence starts over (its first_seq at or below the
// first seq read, with more of its events below the highest seq read than
// the trace counts as late) each say that another trace begins there. The
// file holds two traces, and read_trace throws TraceError at that offset,
// naming what was found and how to keep the first (head -c), unless
// ReadOptions::first_trace_only: then the first trace is read as if the file
// ended there, and next_trace_at says where the other begins.
struct ReadStatus {
  enum class State { kComplete, kGap, kTruncated, kCorrupt };
  State state = State::kComplete;
  uint64_t good_bytes = 0;  // the end of the last good chunk
  // The file's size; with first_trace_only and another trace appended, where
  // the other trace begins (the first trace's bytes).
  uint64_t file_bytes = 0;
  uint64_t chunks = 0;
  uint64_t events = 0;
  uint64_t gaps = 0;       // damaged stretches with good chunks after them ...
  uint64_t gap_bytes = 0;  // ... the bytes they cover ...
  std::string gap_reason;  // ... and what was wrong with the first, with its byte offset
  // Why reading stopped early, with the byte offset; for kGap, the first gap
  // and the totals.
  std::string reason;
  bool stopped = false;  // the visitor finished early (TraceVisitor::finished): the rest was not read
  // first_trace_only: where another trace begins (0: none found), and what
  // was found there with the offset ("another trace begins at byte N (...)").
  uint64_t next_trace_at = 0;
  std::string next_trace;

  bool complete() const { return state == State::kComplete; }
};

class TraceVisitor {
 public:
  virtual ~TraceVisitor() = default;
  virtual void on_begin(const TraceMeta& /*meta*/) {}
  // A batch of events in sequence order; strings they name are already in meta.
  virtual void on_events(const Event* events, size_t count, const TraceMeta& meta) = 0;
  virtual void on_end(const TraceMeta& /*meta*/, const ReadStatus& /*status*/) {}
  // Asked after every batch: true when the visitor has seen all it needs (a
  // window that ended). The reader then reads no further chunk and calls
  // on_end with the status of what it read; ReadStatus::stopped says so.
  virtual bool finished() const { return false; }
};

struct ReadOptions {
  // Threads that decode chunks while the visitor reads the ones before
  // (chunks decode on their own: delta state resets at each). -1: the
  // environment's PEAKSCOPE_READ_THREADS, else, for a file of 4 MiB or more,
  // the processors shared among this process' reads under way, up to 4 (none
  // when that is fewer than 2); 0: every chunk decodes on the calling thread.
  // The visitor is called on the calling thread, in file order, either way.
  int decode_threads = -1;
  // A file holding another trace after the first (ReadStatus): read the
  // first and stop where the other begins, instead of throwing TraceError.
  bool first_trace_only = false;
};

// Reads the whole file (or until the visitor is finished). Throws TraceError
// when the file cannot be read as a trace.
ReadStatus read_trace(const std::string& path, TraceVisitor& visitor, const ReadOptions& options = {});

// Collects every event into memory: for tests and small traces only.
struct LoadedTrace {
  TraceMeta meta;
  ReadStatus status;
  std::vector<Event> events;
};
LoadedTrace load_trace(const std::string& path, const ReadOptions& options = {});
// Only the headers (FileHeader, RunHeader) in meta, nothing else read; throws
// TraceError as read_trace does for a file that is not a trace.
TraceMeta read_trace_headers(const std::string& path);

// A path as messages show it: one line, control bytes and bytes that are not
// UTF-8 escaped as bash's $'...' does (\n, \xNN; format/printable.h).
// TraceError's what() shows its path so; so does every command that names
// a trace in a message.
std::string printable_path(std::string_view path);
// A path as machine-readable output keeps it: JSON strings are UTF-8, and a
// path that is not is written there with U+FFFD in place of each bad byte,
// which loses them. Such a path also gets its exact bytes, as lowercase hex
// (Python: bytes.fromhex); "" for a path that is UTF-8, whose JSON string
// is exact. `report --json` writes it as "path_bytes" beside "path".
std::string path_bytes_hex(std::string_view path);

const char* event_kind_name(EventKind kind);
const char* memory_kind_name(MemoryKind kind);
const char* api_name(Api api);
const char* drop_reason_name(format::DropReason reason);

}  // namespace psc
