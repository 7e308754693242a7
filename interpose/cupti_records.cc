// CUPTI activity buffers, and the trace events made from their records.
// Buffers complete on CUPTI's worker thread, or on whichever thread calls
// cuptiActivityFlushAll; two may complete at once. Everything here is a
// fixed-size lock-free table or the recorder's own per-thread buffer, so
// neither case needs a lock. Events are recorded with kFlagDeferred: their
// time is CUPTI's (on our clock), their sequence number when we learnt them.
//
//   MEMORY2 record      alloc / free, api cupti, name = the allocation's
//                       source library (empty when CUPTI gives none)
//   MEMORY_POOL record  counters cupti.pool_used_bytes:0x<pool> (utilised)
//                       and cupti.pool_size_bytes:0x<pool> (0 once destroyed)
//   kernel record       mark cupti.first_kernel, once per kernel name
#include <cstring>

#include "interpose/cupti_backend.h"
#include "interpose/payload.h"
#include "runtime/recorder.h"
#include "runtime/sys.h"

namespace psc::interpose::cupti {
namespace {

// ---- buffers ---------------------------------------------------------------------------

constexpr size_t kBufferBytes = 1u << 20;  // CUPTI suggests 1-10 MB; we flush every 100 ms
constexpr int kRecycled = 8;
std::atomic<void*> g_recycled[kRecycled];

uint8_t* take_buffer() {
  for (auto& slot : g_recycled) {
    if (void* p = slot.exchange(nullptr, std::memory_order_acq_rel)) return static_cast<uint8_t*>(p);
  }
  return static_cast<uint8_t*>(sys::map_pages(kBufferBytes));
}

void give_back(uint8_t* buffer) {
  for (auto& slot : g_recycled) {
    void* expected = nullptr;
    if (slot.compare_exchange_strong(expected, buffer, std::memory_order_acq_rel)) return;
  }
  munmap(buffer, kBufferBytes);
}

// ---- streams -----------------------------------------------------------------------------

constexpr uint32_t kStreamSlots = 1u << 12;
constexpr uint32_t kProbe = 64;
struct StreamSlot {
  std::atomic<uint64_t> key;  // (context id << 32 | stream id) + 1; 0 empty
  std::atomic<uint64_t> handle;
};
StreamSlot g_streams[kStreamSlots];

uint64_t mix(uint64_t v) {
  v ^= v >> 33;
  v *= 0xff51afd7ed558ccdull;
  v ^= v >> 33;
  return v;
}

// ---- first kernel executions --------------------------------------------------------------

constexpr uint32_t kKernelSlots = 1u << 14;
std::atomic<uint64_t> g_kernels_seen[kKernelSlots];  // hashes of kernel names; 0 empty
std::atomic<bool> g_kernel_table_full{false};

uint64_t hash_name(const char* s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s) h = (h ^ static_cast<uint8_t>(*s)) * 1099511628211ull;
  return h | 1;
}

// True the first time `name` is seen. A full table reports nothing more (and
// says so once): better no mark than a second "first" one.
bool first_execution(const char* name) {
  const uint64_t h = hash_name(name);
  const uint32_t start = static_cast<uint32_t>(mix(h));
  for (uint32_t i = 0; i < kProbe; ++i) {
    std::atomic<uint64_t>& slot = g_kernels_seen[(start + i) & (kKernelSlots - 1)];
    uint64_t current = slot.load(std::memory_order_acquire);
    if (current == h) return false;
    if (current == 0) {
      if (slot.compare_exchange_strong(current, h, std::memory_order_acq_rel)) return true;
      if (current == h) return false;
    }
  }
  if (!g_kernel_table_full.exchange(true, std::memory_order_relaxed))
    rt::record_mark("cupti.kernel_table_full", nullptr, Api::kNone);
  return false;
}

// ---- records -> events ----------------------------------------------------------------------

int16_t device_field(uint32_t device) { return device > 0x7fff ? int16_t{-1} : static_cast<int16_t>(device); }

MemoryKind memory_kind(const CUpti_ActivityMemory4& m) {
  if (m.memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID) return MemoryKind::kPool;
  switch (m.memoryKind) {
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return MemoryKind::kDevice;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return MemoryKind::kPinnedHost;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return MemoryKind::kManaged;
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return MemoryKind::kHost;
    default: return MemoryKind::kNone;
  }
}

void on_memory(const CUpti_ActivityMemory4& m) {
  EventKind kind;
  if (m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) {
    kind = EventKind::kAlloc;
  } else if (m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
    kind = EventKind::kFree;
  } else {
    return;
  }
  rt::DeferredRecord d{kind, trace_time(m.timestamp)};
  d.address = m.address;
  d.bytes = m.bytes;
  d.stream = stream_handle(m.contextId, m.streamId);
  d.name = m.source;
  d.device = device_field(m.deviceId);
  d.memory = memory_kind(m);
  d.api = Api::kCupti;
  rt::record_deferred(d);
}

// "cupti.pool_used_bytes:0x" + 16 hex digits (and the like).
void pool_counter_name(char* out, const char* prefix, uint64_t pool) {
  size_t n = 0;
  for (; prefix[n]; ++n) out[n] = prefix[n];
  for (int shift = 60; shift >= 0; shift -= 4) out[n++] = "0123456789abcdef"[(pool >> shift) & 0xf];
  out[n] = 0;
}

void on_pool(const CUpti_ActivityMemoryPool3& p) {
  const bool destroyed = p.memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED;
  char name[64];
  rt::DeferredRecord d{EventKind::kCounter, trace_time(p.timestamp)};
  d.device = device_field(p.deviceId);
  d.name = name;
  pool_counter_name(name, "cupti.pool_used_bytes:0x", p.address);
  d.bytes = destroyed ? 0 : p.utilizedSize;
  rt::record_deferred(d);
  pool_counter_name(name, "cupti.pool_size_bytes:0x", p.address);
  d.bytes = destroyed ? 0 : p.size;
  rt::record_deferred(d);
}

void on_kernel(const CUpti_ActivityKernel10& k) {
  if (!k.name || !first_execution(k.name)) return;
  const uint64_t stream = stream_handle(k.contextId, k.streamId);
  // The name goes last: a very long one is cut, the numbers never are.
  JsonPayload<2048> payload;
  payload.number("start_ns", trace_time(k.start))
      .number("end_ns", trace_time(k.end))
      .number("device", k.deviceId)
      .number("stream", stream)
      .number("stream_id", k.streamId)
      .number("context_id", k.contextId)
      .number("local_memory_bytes", k.localMemoryTotal_v2)
      .text("kernel", k.name);
  rt::DeferredRecord d{EventKind::kMark, trace_time(k.start)};
  d.name = "cupti.first_kernel";
  d.payload = payload.str();
  d.device = device_field(k.deviceId);
  d.stream = stream;
  rt::record_deferred(d);
}

void on_record(const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_MEMORY2: on_memory(*reinterpret_cast<const CUpti_ActivityMemory4*>(record)); break;
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL: on_pool(*reinterpret_cast<const CUpti_ActivityMemoryPool3*>(record)); break;
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      on_kernel(*reinterpret_cast<const CUpti_ActivityKernel10*>(record));
      break;
    default: break;
  }
}

std::atomic<uint64_t> g_dropped_total{0};

void count_dropped(CUcontext context, uint32_t stream_id) {
  size_t dropped = 0;
  if (!g_fn.dropped_records || g_fn.dropped_records(context, stream_id, &dropped) != CUPTI_SUCCESS || !dropped) return;
  const uint64_t total = g_dropped_total.fetch_add(dropped, std::memory_order_relaxed) + dropped;
  rt::record_counter("cupti.dropped_records", total, -1, Api::kNone);
}

}  // namespace

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  uint8_t* b = take_buffer();
  *buffer = b;
  *size = b ? kBufferBytes : 0;  // none: CUPTI drops records and counts them
  *max_records = 0;              // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t, size_t valid) {
  if (!buffer) return;
  if (valid > 0 && rt::enabled() && g_fn.next_record) {
    CUpti_Activity* record = nullptr;
    while (g_fn.next_record(buffer, valid, &record) == CUPTI_SUCCESS && record) on_record(record);
    count_dropped(context, stream_id);
  }
  give_back(buffer);
}

void remember_stream(uint32_t context_id, uint32_t stream_id, uint64_t handle) {
  const uint64_t key = ((uint64_t{context_id} << 32) | stream_id) + 1;
  const uint32_t start = static_cast<uint32_t>(mix(key));
  for (uint32_t i = 0; i < kProbe; ++i) {
    StreamSlot& slot = g_streams[(start + i) & (kStreamSlots - 1)];
    uint64_t current = slot.key.load(std::memory_order_acquire);
    if (current == 0 && slot.key.compare_exchange_strong(current, key, std::memory_order_acq_rel)) current = key;
    if (current == key) {
      slot.handle.store(handle, std::memory_order_release);
      return;
    }
  }
  // Table full: this stream's records carry stream 0.
}

uint64_t stream_handle(uint32_t context_id, uint32_t stream_id) {
  if (stream_id == CUPTI_INVALID_STREAM_ID) return 0;
  const uint64_t key = ((uint64_t{context_id} << 32) | stream_id) + 1;
  const uint32_t start = static_cast<uint32_t>(mix(key));
  for (uint32_t i = 0; i < kProbe; ++i) {
    const StreamSlot& slot = g_streams[(start + i) & (kStreamSlots - 1)];
    const uint64_t current = slot.key.load(std::memory_order_acquire);
    if (current == key) return slot.handle.load(std::memory_order_acquire);
    if (current == 0) return 0;
  }
  return 0;
}

void forget_records_in_child() {
  for (auto& s : g_streams) {
    s.key.store(0, std::memory_order_relaxed);
    s.handle.store(0, std::memory_order_relaxed);
  }
  for (auto& k : g_kernels_seen) k.store(0, std::memory_order_relaxed);
  g_kernel_table_full.store(false, std::memory_order_relaxed);
  g_dropped_total.store(0, std::memory_order_relaxed);
}

}  // namespace psc::interpose::cupti
