#include "traces/chunk_decoder.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "format/crc32c.h"

#define PSC_READER_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace psc::trace_chunks {

using format::ChunkHeader;
using format::FileHeader;

std::string at(uint64_t offset) { return " at byte " + std::to_string(offset); }

void MetaRecords::apply_to(TraceMeta& meta) {
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

const uint8_t* ChunkDecoder::long_varint(const uint8_t* p, const uint8_t* end, uint64_t* v) {
  return p ? format::get_varint(p, end, v) : nullptr;
}

const uint8_t* ChunkDecoder::fail(std::string reason) {
  error_ = std::move(reason);
  return nullptr;
}

void ChunkDecoder::decode(DecodedChunk& chunk) {
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

std::string ChunkDecoder::decode(const uint8_t* p, const uint8_t* end, DecodedChunk& chunk) {
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

const uint8_t* ChunkDecoder::decode_event(uint8_t tag, const uint8_t* p, const uint8_t* end, Event& e) {
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

const uint8_t* ChunkDecoder::decode_blob(const uint8_t* p, const uint8_t* end, std::string* text) {
  uint64_t length = 0;
  p = varint(p, end, &length);
  if (!p) return nullptr;
  if (length > static_cast<uint64_t>(end - p)) return fail("string runs past the chunk");
  text->assign(reinterpret_cast<const char*>(p), length);
  return p + length;
}

const uint8_t* ChunkDecoder::decode_meta(uint8_t tag, const uint8_t* p, const uint8_t* end, MetaRecords& meta) {
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

Probe ChunkFile::probe(uint64_t offset) {
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

uint64_t ChunkFile::next_chunk(uint64_t from, bool* file_header) {
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
      if (h.payload_bytes > format::kMaxChunkPayload || candidate + sizeof h + h.payload_bytes > file_bytes_) continue;
      if (resync_budget_ < h.payload_bytes) return file_bytes_;
      resync_budget_ -= h.payload_bytes;
      if (probe(candidate).result == Probe::Result::kGood) return candidate;
    }
    // A magic across the block boundary (a chunk's, a file header's) is seen next time.
    base += got - (sizeof format::kMagic - 1);
  }
  return file_bytes_;
}

bool ChunkFile::is_file_header(uint64_t offset, const uint8_t* bytes, size_t n) const {
  if (n < sizeof format::kMagic || std::memcmp(bytes, format::kMagic, sizeof format::kMagic) != 0) return false;
  FileHeader h{};
  return file_.read_at(offset, &h, sizeof h) == sizeof h &&
         crc32c(&h, offsetof(FileHeader, header_crc)) == h.header_crc;
}

}  // namespace psc::trace_chunks
