// The .pstrace file format, version 4 (v2 added the name of a CUPTI allocation
// or free, see fields_of(kind, api); v3 added the drop reason kWriteFailed, so
// its drops record holds one more count, see drop_reason_count(version); v4
// keeps an event's context per thread and kind, see ThreadCodecState. Older
// readers refuse newer files by their header instead of misreading them).
//
//   file   := FileHeader chunk*
//   chunk  := ChunkHeader payload[payload_bytes]
//   payload:= record*          (decodable on its own: delta state resets per chunk)
//
// A chunk is self-checking (CRC-32C over its header and payload), so a file cut
// short by SIGKILL reads up to its last complete chunk, and a damaged chunk is
// found by offset. Encoding (deltas, varints) is done by the writer thread, never
// on the recording hot path. Everything here is header-only and heap-free so the
// preloaded recorder can share it with the reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "format/event.h"

namespace psc::format {

constexpr char kMagic[8] = {'P', 'S', 'T', 'R', 'A', 'C', 'E', '\n'};
constexpr uint16_t kVersion = 4;
constexpr uint16_t kMinReaderVersion = 4;  // oldest reader that can read what we write
// The oldest version this build's reader reads: every later change is read by
// its version (context_per_kind, drop_reason_count, CUPTI names).
constexpr uint16_t kOldestReadVersion = 1;
// v4 and later: an event's context (kFieldContext) is kept per thread and kind.
constexpr bool context_per_kind(uint16_t version) { return version >= 4; }
constexpr uint32_t kChunkMagic = 0x4b435350;  // "PSCK" little-endian
constexpr uint32_t kMaxChunkPayload = 64u << 20;

// Bits of FileHeader::flags.
enum HeaderFlag : uint32_t {
  kHeaderHostMode = 1u << 0,
  kHeaderReservedLevel = 1u << 1,  // default level of memory events is "reserved"
  // Set by rewriting the header in place (it is already on disk, so this
  // needs no new space): the image that wrote the file replaced itself with
  // exec after closing it; the new image writes its own file.
  kHeaderEndedByExec = 1u << 2,
  // A write to this file failed (disk full, I/O error, file size limit);
  // the events lost are counted as DropReason::kWriteFailed.
  kHeaderWriteFailed = 1u << 3,
  // Informational: the recorder stamped events with the invariant TSC and
  // mapped the ticks to CLOCK_MONOTONIC ns before writing them (times mean
  // the same either way).
  kHeaderClockTsc = 1u << 4,
  // Host mode with no size floor: every aligned block was recorded. A host
  // trace without it (an explicit PEAKSCOPE_HOST_MIN_BYTES above 1, or a
  // file written before the floor's default became 1) may lack the small
  // blocks a wave allocates, which calibration must see
  // (estimator/liveness.h, host_floor_problem).
  kHeaderHostEveryBlock = 1u << 5,
  // The rank, local rank and world size are a task's of srun or mpirun
  // (SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK: runtime/config.cc), not
  // RANK's. In a run whose ranks have RANK such a member is the launcher that
  // srun or mpirun started (torchrun's agent, one per node), not a rank
  // (traces/run.h, settle_task_ranks).
  kHeaderTaskRank = 1u << 6,
};

struct FileHeader {
  char magic[8];
  uint16_t version;
  uint16_t min_reader_version;
  uint32_t header_bytes;  // sizeof(FileHeader); lets the header grow
  uint32_t pid;
  int32_t rank;           // RANK, -1 when unset
  int32_t local_rank;     // LOCAL_RANK, -1 when unset
  uint32_t flags;         // HeaderFlag
  uint64_t realtime_ns;   // CLOCK_REALTIME at start ...
  uint64_t monotonic_ns;  // ... and CLOCK_MONOTONIC read right after: clock alignment
  uint32_t parent_pid;    // the process this one was forked from, 0 if none
  // WORLD_SIZE, 0 when unset (files written before it was added carry zeros
  // here, as in the other fields carved out of reserved bytes).
  int32_t world_size;
  char hostname[64];
  // CLOCK_MONOTONIC_RAW read right after monotonic_ns, 0 where unknown (files
  // written before it was added carry zeros here): what Nsight Systems' clock
  // is, for placing the trace on its timeline (exchange/export_nvtxt.cc).
  uint64_t monotonic_raw_ns;
  // The pid of the `peakscope record` whose run this process belongs to
  // (PEAKSCOPE_PRIMARY_PID), 0 when recorded without it: with the host name,
  // what groups the traces of one run (every rank of a job launched under one
  // record).
  uint32_t record_pid;
  uint32_t header_crc;  // CRC-32C of every byte before this field
};
static_assert(sizeof(FileHeader) == 136, "FileHeader layout is part of format v1");

// What the traces of one distributed job share, written right after FileHeader
// (header_bytes counts it). A file written before it was added has
// header_bytes == sizeof(FileHeader) and no run identity; a reader that
// predates it steps over it, as header_bytes lets it.
enum class RunIdSource : uint32_t {
  kNone = 0,          // nothing named the run
  kPeakscope = 1,     // PEAKSCOPE_RUN_ID, set by whoever launches the ranks
  kTorchElastic = 2,  // TORCHELASTIC_RUN_ID (torchrun's --rdzv-id)
  kSlurm = 3,         // SLURM_JOB_ID[.SLURM_STEP_ID]
  kMaster = 4,        // MASTER_ADDR:MASTER_PORT of a ranked process
};
struct RunHeader {
  char run_id[80];  // NUL-terminated; "" when source is kNone
  uint32_t source;  // RunIdSource
  uint32_t crc;     // CRC-32C of every byte before this field
};
static_assert(sizeof(RunHeader) == 88, "RunHeader layout is part of the format");
constexpr const char* run_id_source_name(uint32_t source) {
  switch (static_cast<RunIdSource>(source)) {
    case RunIdSource::kNone: return "none";
    case RunIdSource::kPeakscope: return "PEAKSCOPE_RUN_ID";
    case RunIdSource::kTorchElastic: return "TORCHELASTIC_RUN_ID";
    case RunIdSource::kSlurm: return "SLURM_JOB_ID";
    case RunIdSource::kMaster: return "MASTER_ADDR:MASTER_PORT";
  }
  return "unknown";
}

struct ChunkHeader {
  uint32_t magic;  // kChunkMagic
  uint32_t payload_bytes;
  uint32_t record_count;
  uint32_t payload_crc;  // CRC-32C of the payload
  uint64_t first_seq;    // seq of the chunk's first event (0 if none): lets tools seek
  uint32_t reserved;
  uint32_t header_crc;  // CRC-32C of the 28 bytes before this field
};
static_assert(sizeof(ChunkHeader) == 32, "ChunkHeader layout is part of format v1");

// Record tags. An event record's tag is (kind | field bits << 4) with kind in
// 1..15; a tag whose low nibble is 0 is a metadata record named by its high nibble.
enum FieldBit : uint8_t {
  kFieldSeqJump = 1u << 4,  // seq != previous seq + 1: a zigzag delta follows
  kFieldThread = 1u << 5,   // thread index changes: varint follows
  kFieldContext = 1u << 6,  // this thread's (v4: and kind's) device/stream/memory/api/flags change
  kFieldRange = 1u << 7,    // this thread's innermost range changes
};

enum MetaTag : uint8_t {
  kMetaString = 0x10,   // varint id, varint length, bytes
  kMetaThread = 0x20,   // varint index, varint os tid, varint length, name bytes
  kMetaDrops = 0x30,    // varint count per DropReason, kDropReasonCount of them (cumulative)
  kMetaEnd = 0x40,      // varint events written: the process closed the trace cleanly
  kMetaCommand = 0x50,  // varint length, bytes: the traced command line
  kMetaLate = 0x60,     // varint count: events written after a later seq (cumulative)
};

// Why events were lost. Part of the format: append only.
enum class DropReason : uint8_t {
  kBufferFull = 0,    // a thread's buffer stayed full past the wait limit
  kNoThreadSlot = 1,  // more live threads than the recorder has buffers for
  kStringTable = 2,   // the string arena or table was full; names recorded as 0
  kAddressTable = 3,  // host mode: the table of tracked blocks was full
  kRangeDepth = 4,    // range stack deeper than the recorder keeps
  kForkChild = 5,     // events in a forked child whose recording is stopped
  kWriteFailed = 6,   // v3: the chunk holding them could not be written (ENOSPC, EIO, EFBIG)
};
constexpr int kDropReasonCount = 7;
// How many counts a drops record holds in a file of this version: a reader
// must read that many (a v2 file has no kWriteFailed count).
constexpr int drop_reason_count(uint16_t version) { return version >= 3 ? 7 : 6; }
// The names reports print, indexed by DropReason.
constexpr const char* kDropReasonNames[kDropReasonCount] = {
    "buffer_full",    "no_thread_slot", "string_table_full", "address_table_full",
    "range_too_deep", "fork_child",     "write_failed",
};

// Which of address/bytes/name/payload a kind carries on disk.
enum KindField : uint8_t { kHasAddress = 1, kHasBytes = 2, kHasName = 4, kHasPayload = 8 };
constexpr uint8_t fields_of(EventKind kind) {
  switch (kind) {
    case EventKind::kAlloc:
    case EventKind::kFree:
    case EventKind::kMap:
    case EventKind::kUnmap: return kHasAddress | kHasBytes;
    case EventKind::kRangePush:
    case EventKind::kRangePop: return kHasName;
    case EventKind::kMark: return kHasName | kHasPayload;
    case EventKind::kRangeStart: return kHasAddress | kHasName | kHasPayload;
    case EventKind::kRangeEnd: return kHasAddress;
    case EventKind::kCounter: return kHasName | kHasBytes;
  }
  return 0;
}
// An allocation or free that CUPTI reported (Api::kCupti) also carries its
// name: the source library CUPTI named. The decoder knows the api (from the
// thread's context) before the fields, and files written before Api::kCupti
// existed never have it, so they read as before.
constexpr uint8_t fields_of(EventKind kind, Api api) {
  const uint8_t fields = fields_of(kind);
  return (api == Api::kCupti && (kind == EventKind::kAlloc || kind == EventKind::kFree)) ? (fields | kHasName) : fields;
}

// ---- varints -----------------------------------------------------------------

constexpr uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
constexpr int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

inline uint8_t* put_varint(uint8_t* out, uint64_t v) {
  while (v >= 0x80) {
    *out++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *out++ = static_cast<uint8_t>(v);
  return out;
}

// Returns nullptr on a truncated or over-long varint.
inline const uint8_t* get_varint(const uint8_t* in, const uint8_t* end, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64 && in < end; shift += 7) {
    uint8_t byte = *in++;
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) {
      *v = result;
      return in;
    }
  }
  return nullptr;
}

constexpr size_t kMaxVarint = 10;
// Largest encoding of one event record.
constexpr size_t kMaxEventRecord = 1 + 7 * kMaxVarint + 3 * kMaxVarint + 3;

}  // namespace psc::format
