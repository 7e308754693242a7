// Encoding and decoding of one chunk's records. The encoder runs on the
// recorder's writer thread (heap-free, caller-provided memory); the decoder runs
// in the reader. Both keep the same per-chunk delta state, reset at each chunk.
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/crc32c.h"
#include "format/file_format.h"

namespace psc::format {

// What an event's context record sets: device, stream, memory kind, api, flags.
struct EventContext {
  uint64_t stream = 0;
  int16_t device = -1;
  uint8_t memory = 0;
  uint8_t api = 0;
  uint8_t flags = 0;
  bool seen = false;  // written for this thread (and kind, v4) in this chunk
};

// Per-thread delta state. Fields that rarely change (context, range) are only
// written when they differ from the same thread's previous event. From v4 a
// thread keeps one context per event kind: an allocation and its free differ
// in api (posix_memalign / free, cudaMalloc / cudaFree), and one shared
// context cost five bytes on each of them. v3 files use contexts[0] only.
struct ThreadCodecState {
  uint64_t address = 0;
  uint32_t range = 0;
  bool touched = false;       // has state in this chunk (the reader's reset list)
  EventContext contexts[16];  // indexed by context_slot(): a tag's kind nibble
};

// Which context an event of this kind uses in a file of this version.
constexpr uint8_t context_slot(EventKind kind, bool per_kind) {
  return per_kind ? static_cast<uint8_t>(static_cast<uint8_t>(kind) & 0x0f) : 0;
}

struct ChunkCodecState {
  uint64_t seq = 0;
  uint64_t time_ns = 0;
  uint32_t thread = UINT32_MAX;
};

class ChunkEncoder {
 public:
  constexpr ChunkEncoder(uint8_t* buffer, size_t capacity, ThreadCodecState* threads, uint32_t max_threads)
      : buffer_(buffer), capacity_(capacity), threads_(threads), max_threads_(max_threads) {}

  // The per-thread state moved (a table that grew, its contents kept).
  void rebind_threads(ThreadCodecState* threads, uint32_t max_threads) {
    threads_ = threads;
    max_threads_ = max_threads;
  }
  // false: write v3's one context per thread (tests of older files); the
  // header must then say v3.
  void set_context_per_kind(bool per_kind) { per_kind_ = per_kind; }

  // Starts a chunk: resets the delta state and leaves room for the header.
  void begin() {
    out_ = buffer_ + sizeof(ChunkHeader);
    state_ = ChunkCodecState{};
    for (uint32_t i = 0; i < touched_; ++i) threads_[i] = ThreadCodecState{};
    touched_ = 0;
    records_ = 0;
    first_seq_ = 0;
  }

  size_t payload_bytes() const { return static_cast<size_t>(out_ - buffer_) - sizeof(ChunkHeader); }
  size_t room() const { return capacity_ - static_cast<size_t>(out_ - buffer_); }
  uint32_t record_count() const { return records_; }

  // Returns false (and writes nothing) when the event does not fit or its
  // thread index is beyond the state table.
  bool add_event(const Event& e) {
    if (room() < kMaxEventRecord || e.thread >= max_threads_) return false;
    if (records_ == 0 || first_seq_ == 0) first_seq_ = e.seq;
    if (e.thread >= touched_) touched_ = e.thread + 1;
    ThreadCodecState& t = threads_[e.thread];
    EventContext& c = t.contexts[context_slot(e.kind, per_kind_)];
    uint8_t tag = static_cast<uint8_t>(e.kind);
    const bool seq_jump = e.seq != state_.seq + 1;
    const bool thread_change = e.thread != state_.thread;
    const bool context_change = !c.seen || e.device != c.device || e.stream != c.stream ||
                                static_cast<uint8_t>(e.memory) != c.memory || static_cast<uint8_t>(e.api) != c.api ||
                                e.flags != c.flags;
    const bool range_change = e.range.value != t.range;
    if (seq_jump) tag |= kFieldSeqJump;
    if (thread_change) tag |= kFieldThread;
    if (context_change) tag |= kFieldContext;
    if (range_change) tag |= kFieldRange;
    uint8_t* o = out_;
    *o++ = tag;
    if (seq_jump) o = put_varint(o, zigzag(static_cast<int64_t>(e.seq - state_.seq - 1)));
    o = put_varint(o, zigzag(static_cast<int64_t>(e.time_ns - state_.time_ns)));
    if (thread_change) o = put_varint(o, e.thread);
    if (context_change) {
      o = put_varint(o, zigzag(e.device));
      o = put_varint(o, e.stream);
      *o++ = static_cast<uint8_t>(e.memory);
      *o++ = static_cast<uint8_t>(e.api);
      *o++ = e.flags;
      c.device = e.device;
      c.stream = e.stream;
      c.memory = static_cast<uint8_t>(e.memory);
      c.api = static_cast<uint8_t>(e.api);
      c.flags = e.flags;
      c.seen = true;
    }
    if (range_change) {
      o = put_varint(o, e.range.value);
      t.range = e.range.value;
    }
    const uint8_t fields = fields_of(e.kind, e.api);
    if (fields & kHasAddress) {
      o = put_varint(o, zigzag(static_cast<int64_t>(e.address - t.address)));
      t.address = e.address;
    }
    if (fields & kHasBytes) o = put_varint(o, e.bytes);
    if (fields & kHasName) o = put_varint(o, e.name.value);
    if (fields & kHasPayload) o = put_varint(o, e.payload.value);
    state_.seq = e.seq;
    state_.time_ns = e.time_ns;
    state_.thread = e.thread;
    out_ = o;
    ++records_;
    return true;
  }

  bool add_string(uint32_t id, const char* text, size_t length) {
    return add_blob(kMetaString, id, text, length, /*has_id=*/true);
  }
  bool add_command(const char* text, size_t length) { return add_blob(kMetaCommand, 0, text, length, false); }

  bool add_thread(uint32_t index, uint64_t os_tid, const char* name, size_t length) {
    if (room() < 1 + 3 * kMaxVarint + length) return false;
    uint8_t* o = out_;
    *o++ = kMetaThread;
    o = put_varint(o, index);
    o = put_varint(o, os_tid);
    o = put_varint(o, length);
    std::memcpy(o, name, length);
    out_ = o + length;
    ++records_;
    return true;
  }

  bool add_counts(MetaTag tag, const uint64_t* counts, int n) {
    if (room() < 1 + kMaxVarint * static_cast<size_t>(n)) return false;
    uint8_t* o = out_;
    *o++ = tag;
    for (int i = 0; i < n; ++i) o = put_varint(o, counts[i]);
    out_ = o;
    ++records_;
    return true;
  }

  // Fills in the chunk header; returns the chunk's total size in bytes.
  size_t finish() {
    ChunkHeader h{};
    h.magic = kChunkMagic;
    h.payload_bytes = static_cast<uint32_t>(payload_bytes());
    h.record_count = records_;
    h.payload_crc = crc32c(buffer_ + sizeof(ChunkHeader), h.payload_bytes);
    h.first_seq = first_seq_;
    h.header_crc = crc32c(&h, offsetof(ChunkHeader, header_crc));
    std::memcpy(buffer_, &h, sizeof h);
    return sizeof(ChunkHeader) + h.payload_bytes;
  }

  const uint8_t* data() const { return buffer_; }

 private:
  bool add_blob(MetaTag tag, uint32_t id, const char* text, size_t length, bool has_id) {
    if (room() < 1 + 2 * kMaxVarint + length) return false;
    uint8_t* o = out_;
    *o++ = tag;
    if (has_id) o = put_varint(o, id);
    o = put_varint(o, length);
    std::memcpy(o, text, length);
    out_ = o + length;
    ++records_;
    return true;
  }

  uint8_t* buffer_;
  size_t capacity_;
  ThreadCodecState* threads_;
  uint32_t max_threads_;
  uint8_t* out_ = nullptr;
  ChunkCodecState state_;
  uint32_t touched_ = 0;
  uint32_t records_ = 0;
  bool per_kind_ = true;
  uint64_t first_seq_ = 0;
};

}  // namespace psc::format
