#include "traces/reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "format/chunk_codec.h"
#include "format/crc32c.h"

namespace psc {
namespace {

using format::ChunkHeader;
using format::FileHeader;

// Caps that keep a hostile file from making the reader allocate without bound.
constexpr uint64_t kMaxStringIdAhead = 1u << 20;
constexpr uint64_t kMaxThreadIndex = 1u << 20;

std::string at(uint64_t offset) { return " at byte " + std::to_string(offset); }

class File {
 public:
  explicit File(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  bool ok() const { return fd_ >= 0; }
  uint64_t size() const {
    off_t end = ::lseek(fd_, 0, SEEK_END);
    return end < 0 ? 0 : static_cast<uint64_t>(end);
  }
  // Reads exactly n bytes at offset; returns how many were read.
  size_t read_at(uint64_t offset, void* out, size_t n) const {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, static_cast<char*>(out) + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      done += static_cast<size_t>(r);
    }
    return done;
  }

 private:
  int fd_;
};

// Decodes one CRC-checked chunk payload. Returns an empty string on success,
// else the reason (the caller adds the offset).
class ChunkDecoder {
 public:
  std::string decode(const uint8_t* p, const uint8_t* end, TraceMeta& meta, std::vector<Event>& out) {
    state_ = format::ChunkCodecState{};
    for (auto& t : threads_) t = format::ThreadCodecState{};
    while (p < end) {
      const uint8_t tag = *p++;
      const uint8_t kind = tag & 0x0f;
      if (kind == 0) {
        p = decode_meta(tag, p, end, meta);
      } else if (kind <= kMaxEventKind) {
        p = decode_event(tag, p, end, out);
      } else {
        return "unknown record tag " + std::to_string(tag);
      }
      if (!p) return error_.empty() ? "truncated record" : error_;
    }
    return {};
  }

 private:
  const uint8_t* varint(const uint8_t* p, const uint8_t* end, uint64_t* v) {
    return p ? format::get_varint(p, end, v) : nullptr;
  }

  const uint8_t* fail(std::string reason) {
    error_ = std::move(reason);
    return nullptr;
  }

  const uint8_t* decode_event(uint8_t tag, const uint8_t* p, const uint8_t* end, std::vector<Event>& out) {
    Event e{};
    e.kind = static_cast<EventKind>(tag & 0x0f);
    uint64_t v = 0;
    e.seq = state_.seq + 1;
    if (tag & format::kFieldSeqJump) {
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
    if (tag & format::kFieldContext) {
      p = varint(p, end, &v);
      t.device = static_cast<int16_t>(format::unzigzag(v));
      p = varint(p, end, &t.stream);
      if (!p || end - p < 3) return fail("truncated event context");
      t.memory = *p++;
      t.api = *p++;
      t.flags = *p++;
      t.seen = true;
    } else if (!t.seen) {
      return fail("event without context for thread " + std::to_string(e.thread));
    }
    if (tag & format::kFieldRange) {
      p = varint(p, end, &v);
      t.range = static_cast<uint32_t>(v);
    }
    const uint8_t fields = format::fields_of(e.kind, static_cast<Api>(t.api));
    if (fields & format::kHasAddress) {
      p = varint(p, end, &v);
      t.address += static_cast<uint64_t>(format::unzigzag(v));
      e.address = t.address;
    }
    if (fields & format::kHasBytes) p = varint(p, end, &e.bytes);
    if (fields & format::kHasName) {
      p = varint(p, end, &v);
      e.name.value = static_cast<uint32_t>(v);
    }
    if (fields & format::kHasPayload) {
      p = varint(p, end, &v);
      e.payload.value = static_cast<uint32_t>(v);
    }
    if (!p) return nullptr;
    e.device = t.device;
    e.stream = t.stream;
    e.memory = static_cast<MemoryKind>(t.memory);
    e.api = static_cast<Api>(t.api);
    e.flags = t.flags;
    e.range.value = t.range;
    state_.seq = e.seq;
    state_.time_ns = e.time_ns;
    state_.thread = e.thread;
    out.push_back(e);
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

  const uint8_t* decode_meta(uint8_t tag, const uint8_t* p, const uint8_t* end, TraceMeta& meta) {
    uint64_t v = 0;
    switch (tag) {
      case format::kMetaString: {
        p = varint(p, end, &v);
        if (!p) return nullptr;
        if (v == 0 || v > meta.strings.size() + kMaxStringIdAhead)
          return fail("string id " + std::to_string(v) + " out of range");
        if (v >= meta.strings.size()) meta.strings.resize(v + 1);
        return decode_blob(p, end, &meta.strings[v]);
      }
      case format::kMetaThread: {
        uint64_t tid = 0;
        p = varint(varint(p, end, &v), end, &tid);
        if (!p) return nullptr;
        if (v > kMaxThreadIndex) return fail("thread index " + std::to_string(v) + " out of range");
        if (v >= meta.threads.size()) meta.threads.resize(v + 1);
        meta.threads[v].index = static_cast<uint32_t>(v);
        meta.threads[v].os_tid = tid;
        return decode_blob(p, end, &meta.threads[v].name);
      }
      case format::kMetaDrops:
        for (auto& count : meta.drops) p = varint(p, end, &count);
        return p;
      case format::kMetaLate: return varint(p, end, &meta.late_events);
      case format::kMetaEnd: meta.clean_end = true; return varint(p, end, &v);
      case format::kMetaCommand: return decode_blob(p, end, &meta.command);
      default: return fail("unknown metadata tag " + std::to_string(tag));
    }
  }

  format::ChunkCodecState state_;
  std::vector<format::ThreadCodecState> threads_;
  std::string error_;
};

FileHeader read_header(const File& file, const std::string& path) {
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

}  // namespace

TraceError::TraceError(std::string path, uint64_t offset, const std::string& reason)
    : std::runtime_error(path + ": " + reason + at(offset)), path_(std::move(path)), offset_(offset) {}

uint64_t TraceMeta::dropped_total() const {
  uint64_t total = 0;
  for (uint64_t d : drops) total += d;
  return total;
}

ReadStatus read_trace(const std::string& path, TraceVisitor& visitor) {
  File file(path);
  if (!file.ok()) throw TraceError(path, 0, std::string("cannot open: ") + std::strerror(errno));
  ReadStatus status;
  status.file_bytes = file.size();
  TraceMeta meta;
  meta.path = path;
  meta.header = read_header(file, path);
  visitor.on_begin(meta);

  uint64_t offset = meta.header.header_bytes;
  std::vector<uint8_t> payload;
  std::vector<Event> events;
  ChunkDecoder decoder;
  auto stop = [&](ReadStatus::State state, const std::string& why) {
    status.state = state;
    status.reason = why + at(offset);
  };
  while (offset < status.file_bytes) {
    ChunkHeader h{};
    if (file.read_at(offset, &h, sizeof h) < sizeof h) {
      stop(ReadStatus::State::kTruncated, "file ends inside a chunk header");
      break;
    }
    if (h.magic != format::kChunkMagic || crc32c(&h, offsetof(ChunkHeader, header_crc)) != h.header_crc) {
      stop(ReadStatus::State::kCorrupt, "bad chunk header");
      break;
    }
    if (h.payload_bytes > format::kMaxChunkPayload) {
      stop(ReadStatus::State::kCorrupt, "chunk payload size " + std::to_string(h.payload_bytes) + " too large");
      break;
    }
    payload.resize(h.payload_bytes);
    if (file.read_at(offset + sizeof h, payload.data(), h.payload_bytes) < h.payload_bytes) {
      stop(ReadStatus::State::kTruncated, "file ends inside a chunk");
      break;
    }
    if (crc32c(payload.data(), payload.size()) != h.payload_crc) {
      stop(ReadStatus::State::kCorrupt, "chunk payload checksum mismatch");
      break;
    }
    events.clear();
    // Every record could be an event (at least 2 bytes each): one reservation,
    // no growth while decoding, and a forged count cannot inflate it.
    events.reserve(std::min<size_t>(h.record_count, h.payload_bytes / 2));
    std::string error = decoder.decode(payload.data(), payload.data() + payload.size(), meta, events);
    if (!error.empty()) {
      stop(ReadStatus::State::kCorrupt, "undecodable chunk (" + error + ")");
      break;
    }
    offset += sizeof h + h.payload_bytes;
    status.good_bytes = offset;
    ++status.chunks;
    status.events += events.size();
    if (!events.empty()) visitor.on_events(events.data(), events.size(), meta);
  }
  if (status.chunks == 0) status.good_bytes = std::min<uint64_t>(status.file_bytes, meta.header.header_bytes);
  visitor.on_end(meta, status);
  return status;
}

LoadedTrace load_trace(const std::string& path) {
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
  loaded.status = read_trace(path, collector);
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
  switch (reason) {
    case format::DropReason::kBufferFull: return "buffer_full";
    case format::DropReason::kNoThreadSlot: return "no_thread_slot";
    case format::DropReason::kStringTable: return "string_table_full";
    case format::DropReason::kAddressTable: return "address_table_full";
    case format::DropReason::kRangeDepth: return "range_too_deep";
    case format::DropReason::kForkChild: return "fork_child";
  }
  return "unknown";
}

}  // namespace psc
