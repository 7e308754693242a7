#include "traces/writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace psc {
namespace {

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw std::runtime_error(path + ": write failed: " + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

format::FileHeader make_file_header(const TraceWriterOptions& options) {
  format::FileHeader h{};
  std::memcpy(h.magic, format::kMagic, sizeof h.magic);
  h.version = options.format_version;
  h.min_reader_version = options.format_version < format::kVersion ? options.format_version : format::kMinReaderVersion;
  const bool run = options.run_id_source != format::RunIdSource::kNone;
  h.header_bytes = sizeof h + (run ? sizeof(format::RunHeader) : 0);
  h.pid = options.pid;
  h.rank = options.rank;
  h.local_rank = options.local_rank;
  h.world_size = options.world_size;
  h.record_pid = options.record_pid;
  h.flags = options.flags;
  h.realtime_ns = options.realtime_ns;
  h.monotonic_ns = options.monotonic_ns;
  h.monotonic_raw_ns = options.monotonic_raw_ns;
  std::memcpy(h.hostname, options.hostname.data(), std::min(options.hostname.size(), sizeof h.hostname - 1));
  h.header_crc = crc32c(&h, offsetof(format::FileHeader, header_crc));
  return h;
}

format::RunHeader make_run_header(const TraceWriterOptions& options) {
  format::RunHeader r{};
  std::memcpy(r.run_id, options.run_id.data(), std::min(options.run_id.size(), sizeof r.run_id - 1));
  r.source = static_cast<uint32_t>(options.run_id_source);
  r.crc = crc32c(&r, offsetof(format::RunHeader, crc));
  return r;
}

TraceWriter::TraceWriter(const std::string& path, const TraceWriterOptions& options)
    : path_(path),
      buffer_(std::max<size_t>(options.chunk_bytes, 4096) + sizeof(format::ChunkHeader)),
      thread_states_(kInitialThreads),
      encoder_(buffer_.data(), buffer_.size(), thread_states_.data(), kInitialThreads) {
  per_kind_ = format::context_per_kind(options.format_version);
  encoder_.set_context_per_kind(per_kind_);
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(path + ": cannot create: " + std::strerror(errno));
  format::FileHeader h = make_file_header(options);
  write_all(fd_, &h, sizeof h, path_);
  if (h.header_bytes > sizeof h) {
    const format::RunHeader run = make_run_header(options);
    write_all(fd_, &run, sizeof run, path_);
  }
  encoder_.begin();
  if (!options.command.empty()) {
    ensure_room(options.command.size() + 32);
    encoder_.add_command(options.command.data(), options.command.size());
  }
}

TraceWriter::~TraceWriter() {
  try {
    if (!closed_) close(false);
  } catch (...) {
  }
  if (fd_ >= 0) ::close(fd_);
}

void TraceWriter::flush_chunk() {
  if (encoder_.record_count() == 0) return;
  size_t n = encoder_.finish();
  write_all(fd_, encoder_.data(), n, path_);
  encoder_.begin();
}

void TraceWriter::ensure_room(size_t bytes) {
  if (encoder_.room() >= bytes) return;
  flush_chunk();
  if (encoder_.room() < bytes) {
    // A record larger than the chunk buffer: grow the buffer for it.
    buffer_.resize(bytes + sizeof(format::ChunkHeader) + 64);
    encoder_ = format::ChunkEncoder(buffer_.data(), buffer_.size(), thread_states_.data(),
                                    static_cast<uint32_t>(thread_states_.size()));
    encoder_.set_context_per_kind(per_kind_);
    encoder_.begin();
  }
}

StringId TraceWriter::intern(std::string_view text) {
  if (text.empty()) return StringId{};
  auto [it, inserted] = string_ids_.emplace(std::string(text), static_cast<uint32_t>(string_ids_.size() + 1));
  if (inserted) {
    ensure_room(text.size() + 2 * format::kMaxVarint + 1);
    encoder_.add_string(it->second, text.data(), text.size());
  }
  return StringId{it->second};
}

void TraceWriter::thread(uint32_t index, uint64_t os_tid, std::string_view name) {
  ensure_room(name.size() + 3 * format::kMaxVarint + 1);
  encoder_.add_thread(index, os_tid, name.data(), name.size());
}

void TraceWriter::event(const Event& e) {
  if (e.thread >= kMaxThreads) throw std::runtime_error(path_ + ": thread index too large for the trace writer");
  if (e.thread >= thread_states_.size()) {
    // Grown on demand: a thread's state is a few hundred bytes, and most
    // traces have a handful of threads.
    thread_states_.resize(std::min<size_t>(kMaxThreads, std::max<size_t>(e.thread + 1, 2 * thread_states_.size())));
    encoder_.rebind_threads(thread_states_.data(), static_cast<uint32_t>(thread_states_.size()));
  }
  ensure_room(format::kMaxEventRecord);
  encoder_.add_event(e);
  ++events_;
}

void TraceWriter::drops(const std::array<uint64_t, format::kDropReasonCount>& counts) {
  ensure_room(format::kMaxVarint * counts.size() + 1);
  encoder_.add_counts(format::kMetaDrops, counts.data(), static_cast<int>(counts.size()));
}

void TraceWriter::close(bool clean_end) {
  if (closed_) return;
  if (clean_end) {
    ensure_room(format::kMaxVarint + 1);
    encoder_.add_counts(format::kMetaEnd, &events_, 1);
  }
  flush_chunk();
  closed_ = true;
}

}  // namespace psc
