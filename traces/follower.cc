#include "traces/follower.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <utility>

#include "common/input_file.h"
#include "traces/chunk_decoder.h"

namespace psc {

using format::ChunkHeader;
using format::FileHeader;
using trace_chunks::at;
using trace_chunks::ChunkDecoder;
using trace_chunks::ChunkFile;
using trace_chunks::DecodedChunk;
using trace_chunks::Probe;

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

WriterState process_state(uint32_t pid) {
  if (pid == 0) return WriterState::kUnknown;
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return WriterState::kEnded;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return WriterState::kRunning;
  const size_t name_end = line.rfind(')');
  const bool zombie = name_end != std::string::npos && name_end + 2 < line.size() && line[name_end + 2] == 'Z';
  return zombie ? WriterState::kEnded : WriterState::kRunning;
}

WriterState writer_state(const format::FileHeader& header) {
  char host[sizeof header.hostname + 1] = {};
  if (gethostname(host, sizeof host - 1) != 0 || strncmp(host, header.hostname, sizeof header.hostname) != 0)
    return WriterState::kUnknown;
  return process_state(header.pid);
}

// A process that no longer exists, or a zombie nobody reaped yet, has
// written all it will. Only a writer on this host can be asked.
bool TraceFollower::writer_alive() {
  if (writer_pid_ != 0) return process_state(writer_pid_) != WriterState::kEnded;
  return !open_ || writer_state(meta_.header) != WriterState::kEnded;
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

// The file's headers, once both are written: the follow begins (on_begin).
// False while they are not, or when no trace was written.
bool TraceFollower::open_headers(TraceVisitor& visitor) {
  auto file = std::make_unique<Open>(path_);
  if (!file->file.ok()) {
    status_.reason = file->file.error();
    if (writer_ended_) finish(visitor, FollowStatus::State::kWriterGone, "no trace was written: " + status_.reason);
    // A file may yet be made in a folder that exists, never in one that does not.
    std::error_code ec;
    const std::filesystem::path folder = std::filesystem::path(path_).parent_path();
    if (!writer_ended_ && !folder.empty() && !std::filesystem::is_directory(folder, ec))
      throw TraceError(path_, 0, "cannot be followed: its folder " + folder.string() + " does not exist");
    return false;
  }
  const uint64_t size = file->file.current_size();
  // The recorder writes both headers before its first chunk: wait for them,
  // unless what is there already is not how a trace begins.
  if (size < sizeof(FileHeader)) {
    char magic[sizeof format::kMagic] = {};
    const size_t have = file->file.read_at(0, magic, std::min<uint64_t>(size, sizeof magic));
    if (writer_ended_ || std::memcmp(magic, format::kMagic, have) != 0)
      meta_.header = trace_chunks::read_header(file->file, path_);  // throws: not a trace, or one that will not grow
    status_.reason = "the file's header is not written yet";
    return false;
  }
  meta_.header = trace_chunks::read_header(file->file, path_);
  if (size < meta_.header.header_bytes) {
    status_.reason = "the file's run header is not written yet";
    if (writer_ended_) throw TraceError(path_, size, "file ends inside the run header");
    return false;
  }
  meta_.run = trace_chunks::read_run_header(file->file, meta_.header, path_);
  file->decoder = std::make_unique<ChunkDecoder>(meta_.header.version);
  offset_ = meta_.header.header_bytes;
  status_.bytes = offset_;
  status_.reason.clear();
  status_.state = FollowStatus::State::kFollowing;
  open_ = std::move(file);
  visitor.on_begin(meta_);
  return true;
}

// The chunk at offset_, the file being `size` bytes long: to the visitor, or
// stepped over as a gap, or the end of the follow.
TraceFollower::Step TraceFollower::read_chunk(TraceVisitor& visitor, uint64_t size) {
  ChunkFile chunks(open_->file, size);
  const Probe probe = chunks.probe(offset_);
  if (probe.result == Probe::Result::kFileHeader) {
    finish(visitor, FollowStatus::State::kStopped, "another trace begins" + at(offset_) + " (a second file header)");
    return Step::kOver;
  }
  // The writer has not finished this chunk (it writes a chunk whole, in order).
  if (probe.result == Probe::Result::kTruncated) return Step::kWait;
  if (probe.result == Probe::Result::kCorrupt) {
    bool file_header = false;
    const uint64_t next = chunks.next_chunk(offset_ + 1, &file_header);
    if (next >= size) return Step::kWait;  // nothing whole after the damage yet
    if (file_header) {
      finish(visitor, FollowStatus::State::kStopped, "another trace begins" + at(next) + " (a second file header)");
      return Step::kOver;
    }
    if (status_.gaps++ == 0) status_.reason = probe.reason + at(offset_);
    offset_ = next;
    return Step::kRead;
  }
  const uint64_t chunk_end = offset_ + sizeof(ChunkHeader) + probe.header.payload_bytes;
  DecodedChunk& chunk = open_->chunk;
  chunk.payload.swap(chunks.payload());
  chunk.string_id_limit = std::min(trace_chunks::kMaxStringId, chunk_end + trace_chunks::kStringIdSlack);
  chunk.expected_events = std::min<size_t>(probe.header.record_count, probe.header.payload_bytes / 2);
  open_->decoder->decode(chunk);
  if (chunk.failure) std::rethrow_exception(chunk.failure);
  offset_ = chunk_end;
  if (!chunk.error.empty()) {
    if (status_.gaps++ == 0) status_.reason = "undecodable chunk (" + chunk.error + ")" + at(offset_);
    return Step::kRead;
  }
  chunk.meta.apply_to(meta_);
  if (chunk.count) visitor.on_events(chunk.events.data(), chunk.count, meta_);
  status_.bytes = offset_;
  ++status_.chunks;
  status_.events += chunk.count;
  if (chunk.count && visitor.finished()) {
    finish(visitor, FollowStatus::State::kStopped, "the reader had all it needed");
    return Step::kOver;
  }
  if (chunk.meta.clean_end) {
    finish(visitor, FollowStatus::State::kClosed);
    return Step::kOver;
  }
  return Step::kRead;
}

FollowStatus TraceFollower::poll(TraceVisitor& visitor) {
  if (status_.over()) return status_;
  if (!open_ && !open_headers(visitor)) return status_;
  // Asked before reading: whatever a writer wrote before it ended is in the file then.
  const bool alive = !writer_ended_ && writer_alive();
  for (;;) {
    const uint64_t size = open_->file.current_size();
    if (offset_ >= size) break;
    const Step step = read_chunk(visitor, size);
    if (step == Step::kWait) break;
    if (step == Step::kOver) return status_;
  }
  if (!alive) finish(visitor, FollowStatus::State::kWriterGone, "the writer's process ended without closing the trace");
  return status_;
}

}  // namespace psc
