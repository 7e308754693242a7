// Writes .pstrace files outside the recorder: test fixtures, importers,
// converters. Uses the same chunk encoder as the recorder's writer thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/chunk_codec.h"
#include "format/event.h"
#include "format/file_format.h"

namespace psc {

struct TraceWriterOptions {
  uint32_t pid = 0;
  int32_t rank = -1;
  int32_t local_rank = -1;
  int32_t world_size = 0;   // 0: unknown
  uint32_t record_pid = 0;  // 0: unknown
  std::string hostname;     // cut to the header's 63 bytes
  uint32_t flags = 0;       // format::HeaderFlag
  uint64_t realtime_ns = 0;
  uint64_t monotonic_ns = 0;
  uint64_t monotonic_raw_ns = 0;  // 0: unknown
  std::string command;
  std::string run_id;  // format::RunHeader, written only when the source is not kNone
  format::RunIdSource run_id_source = format::RunIdSource::kNone;
  size_t chunk_bytes = 1u << 20;
  // The format version to write: format::kVersion, or 3 (one context per
  // thread), for tests that need a file as an older recorder wrote it.
  uint16_t format_version = format::kVersion;
};

class TraceWriter {
 public:
  static constexpr uint32_t kMaxThreads = 1u << 16;
  static constexpr uint32_t kInitialThreads = 64;  // the state table grows from here

  // Throws std::runtime_error when the file cannot be created.
  TraceWriter(const std::string& path, const TraceWriterOptions& options);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Interns a string; the record is written before any event that names it.
  StringId intern(std::string_view text);
  void thread(uint32_t index, uint64_t os_tid, std::string_view name);
  // Events must come in sequence order; thread indices below kMaxThreads.
  void event(const Event& event);
  void drops(const std::array<uint64_t, format::kDropReasonCount>& counts);
  // Writes the pending chunk; with clean_end, marks the trace as properly closed.
  void close(bool clean_end = true);
  uint64_t events_written() const { return events_; }

 private:
  void flush_chunk();
  void ensure_room(size_t bytes);

  int fd_ = -1;
  std::string path_;
  std::vector<uint8_t> buffer_;
  std::vector<format::ThreadCodecState> thread_states_;
  format::ChunkEncoder encoder_;
  std::unordered_map<std::string, uint32_t> string_ids_;
  uint64_t events_ = 0;
  bool closed_ = false;
  bool per_kind_ = true;  // format::context_per_kind(options.format_version)
};

// Fills a FileHeader (magic, version, CRC) from the options; header_bytes
// counts the RunHeader that follows it when the options name a run (without
// one the file has the layout from before RunHeader, which is still valid).
format::FileHeader make_file_header(const TraceWriterOptions& options);
// The RunHeader written right after it (run id cut to fit, CRC).
format::RunHeader make_run_header(const TraceWriterOptions& options);

}  // namespace psc
