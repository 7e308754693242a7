// The one event record shared by the recorder (runtime/, interpose/) and every
// consumer (traces/, estimator/, tools/). Fixed size, plain data: the hot path
// fills one in place and publishes it with a release store; the writer thread
// encodes it (deltas, varints) into the trace file. Nothing here allocates.
#pragma once

#include <cstdint>

namespace psc {

// What happened. Values are part of the file format: append only.
enum class EventKind : uint8_t {
  kAlloc = 1,       // address, bytes: memory became live
  kFree = 2,        // address, bytes (0 when the hook cannot know): recorded before the real free
  kRangePush = 3,   // name: a range opened on this thread
  kRangePop = 4,    // name of the range closed (0 when unknown)
  kMark = 5,        // name, payload: an instant with optional JSON payload
  kRangeStart = 6,  // address = range id, name: a process-wide range (NVTX start/end)
  kRangeEnd = 7,    // address = range id
  kCounter = 8,     // name, bytes = sampled value (pool reserved bytes, device used bytes)
  kMap = 9,         // address, bytes: VMM mapping of physical memory to an address
  kUnmap = 10,      // address, bytes
};
constexpr uint8_t kMaxEventKind = 10;

// Where the memory lives. Part of the file format: append only.
enum class MemoryKind : uint8_t {
  kNone = 0,
  kHost = 1,            // ordinary host memory (host mode, CPU frameworks)
  kDevice = 2,          // cudaMalloc / cuMemAlloc
  kManaged = 3,         // unified memory
  kPinnedHost = 4,      // cudaMallocHost / cuMemHostAlloc
  kPool = 5,            // stream-ordered allocation from a memory pool
  kVmmPhysical = 6,     // cuMemCreate physical handle
  kRegisteredHost = 7,  // cudaHostRegister: pinned, not new memory
};

// The API that produced an event. Part of the file format: append only.
enum class Api : uint8_t {
  kNone = 0,
  kPscApi = 1,  // psc_range_push / psc_mark ...
  kNvtx = 2,
  kPosixMemalign = 3,
  kAlignedAlloc = 4,
  kMemalign = 5,
  kValloc = 6,
  kPvalloc = 7,
  kRealloc = 8,
  kLibcFree = 9,
  kCudaMalloc = 16,
  kCudaFree = 17,
  kCudaMallocAsync = 18,
  kCudaFreeAsync = 19,
  kCudaMallocFromPoolAsync = 20,
  kCudaMallocManaged = 21,
  kCudaMallocHost = 22,
  kCudaHostAlloc = 23,
  kCudaFreeHost = 24,
  kCudaHostRegister = 25,
  kCudaHostUnregister = 26,
  kCuMemAlloc = 32,
  kCuMemFree = 33,
  kCuMemAllocAsync = 34,
  kCuMemFreeAsync = 35,
  kCuMemAllocFromPoolAsync = 36,
  kCuMemAllocManaged = 37,
  kCuMemHostAlloc = 38,
  kCuMemFreeHost = 39,
  kCuMemCreate = 40,
  kCuMemRelease = 41,
  kCuMemMap = 42,
  kCuMemUnmap = 43,
  kCuMemAllocHost = 44,
  kCuMemHostRegister = 45,
  kCuMemHostUnregister = 46,
  kTorchPluggable = 48,
  kImported = 64,  // converted from another tool's trace
  kCupti = 72,     // an allocation or free reported by a CUPTI MEMORY2 activity record
};

// Bits of Event::flags. Part of the file format.
enum EventFlag : uint8_t {
  kFlagNested = 1u << 0,    // made inside another hooked call: count the outer one only
  kFlagReserved = 1u << 1,  // reserved level (segments) rather than allocated (tensors)
  kFlagFailed = 1u << 2,    // the real call failed; no memory changed hands
  // Recorded after the fact (CUPTI activity): time_ns is when it happened, seq is
  // when the recorder learnt it (later); range is 0. Consumers place it by time_ns.
  kFlagDeferred = 1u << 3,
};

// Strong type for interned string ids: 0 means "none".
struct StringId {
  uint32_t value = 0;
  constexpr bool empty() const { return value == 0; }
  friend constexpr bool operator==(StringId a, StringId b) { return a.value == b.value; }
};

// One recorded event. 64 bytes, one cache line.
struct Event {
  uint64_t seq;      // global order across threads, from one atomic counter
  uint64_t time_ns;  // CLOCK_MONOTONIC
  uint64_t address;  // memory address, or range id for start/end
  uint64_t bytes;    // size, or the counter's value
  uint64_t stream;   // CUDA stream handle, 0 for none
  uint32_t thread;   // recorder's small thread index (see the THREAD record)
  StringId range;    // innermost range open on this thread when the event was made
  StringId name;     // range / mark / counter name
  StringId payload;  // mark payload (JSON), 0 for none
  int16_t device;    // CUDA device ordinal, -1 for host
  EventKind kind;
  MemoryKind memory;
  Api api;
  uint8_t flags;  // EventFlag bits
  uint8_t reserved[2];
};
static_assert(sizeof(Event) == 64, "Event is one cache line; the file format encodes its fields");

constexpr bool is_memory_event(EventKind k) { return k == EventKind::kAlloc || k == EventKind::kFree; }

}  // namespace psc
