// A test double of the CUDA driver, built as libcuda.so.1. No GPU: device
// addresses come from a counter, pinned and managed memory from mmap. It
// behaves like the real driver where the recorder depends on it:
//
// - cuGetProcAddress / cuGetProcAddress_v2 return the versioned function for
//   the requested CUDA version and the per-thread-default-stream variant
//   (_ptsz) when asked, with the documented return codes and query status;
// - unknown pointers, unmapped VMM handles and the like are errors, so a hook
//   that forwards the wrong value fails the test;
// - VMM physical memory lives until its handle is released *and* unmapped
//   (NCCL releases right after mapping);
// - memory pools keep a reserved size that grows in 2 MiB chunks and shrinks
//   to the release threshold at synchronisation points.
//
// It counts every call and byte per API (see kCountNames) and writes the counts
// to $FAKE_CUDA_COUNTS at exit; fake_cuda_count() answers in-process.
//
// Test knobs: FAKE_CUDA_DEVICE_BYTES (memory per device, default 80 GiB),
// FAKE_CUDA_HIDDEN_ENTRY=1 (cuGetProcAddress hands out non-exported
// trampolines for cuMemAlloc/cuMemFree, as a driver might),
// FAKE_CUDA_LOG_LOOKUPS=1 (print every lookup on stderr), and
// fake_cuda_set_hidden_bytes() (device memory in use that no allocation
// accounts for, seen only by cuMemGetInfo).
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tests/fakes/fake_counts.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// ---- counters ------------------------------------------------------------------

// clang-format off
#define FAKE_CUDA_COUNTERS(X) \
  X(cuMemAlloc_v2_calls, "cuMemAlloc_v2.calls")                               \
  X(cuMemAlloc_v2_bytes, "cuMemAlloc_v2.bytes")                               \
  X(cuMemAlloc_v1_calls, "cuMemAlloc.calls")                                  \
  X(cuMemAlloc_v1_bytes, "cuMemAlloc.bytes")                                  \
  X(cuMemFree_v2_calls, "cuMemFree_v2.calls")                                 \
  X(cuMemFree_v1_calls, "cuMemFree.calls")                                    \
  X(cuMemAllocAsync_calls, "cuMemAllocAsync.calls")                           \
  X(cuMemAllocAsync_bytes, "cuMemAllocAsync.bytes")                           \
  X(cuMemAllocAsync_ptsz_calls, "cuMemAllocAsync_ptsz.calls")                 \
  X(cuMemAllocAsync_ptsz_bytes, "cuMemAllocAsync_ptsz.bytes")                 \
  X(cuMemFreeAsync_calls, "cuMemFreeAsync.calls")                             \
  X(cuMemFreeAsync_ptsz_calls, "cuMemFreeAsync_ptsz.calls")                   \
  X(cuMemAllocFromPoolAsync_calls, "cuMemAllocFromPoolAsync.calls")           \
  X(cuMemAllocFromPoolAsync_bytes, "cuMemAllocFromPoolAsync.bytes")           \
  X(cuMemAllocFromPoolAsync_ptsz_calls, "cuMemAllocFromPoolAsync_ptsz.calls") \
  X(cuMemAllocFromPoolAsync_ptsz_bytes, "cuMemAllocFromPoolAsync_ptsz.bytes") \
  X(cuMemAllocManaged_calls, "cuMemAllocManaged.calls")                       \
  X(cuMemAllocManaged_bytes, "cuMemAllocManaged.bytes")                       \
  X(cuMemAllocHost_v2_calls, "cuMemAllocHost_v2.calls")                       \
  X(cuMemAllocHost_v2_bytes, "cuMemAllocHost_v2.bytes")                       \
  X(cuMemHostAlloc_calls, "cuMemHostAlloc.calls")                             \
  X(cuMemHostAlloc_bytes, "cuMemHostAlloc.bytes")                             \
  X(cuMemFreeHost_calls, "cuMemFreeHost.calls")                               \
  X(cuMemHostRegister_v2_calls, "cuMemHostRegister_v2.calls")                 \
  X(cuMemHostRegister_v2_bytes, "cuMemHostRegister_v2.bytes")                 \
  X(cuMemHostUnregister_calls, "cuMemHostUnregister.calls")                   \
  X(cuMemCreate_calls, "cuMemCreate.calls")                                   \
  X(cuMemCreate_bytes, "cuMemCreate.bytes")                                   \
  X(cuMemRelease_calls, "cuMemRelease.calls")                                 \
  X(cuMemRetainAllocationHandle_calls, "cuMemRetainAllocationHandle.calls")   \
  X(cuMemMap_calls, "cuMemMap.calls")                                         \
  X(cuMemMap_bytes, "cuMemMap.bytes")                                         \
  X(cuMemUnmap_calls, "cuMemUnmap.calls")                                     \
  X(cuMemUnmap_bytes, "cuMemUnmap.bytes")                                     \
  X(cuMemAddressReserve_calls, "cuMemAddressReserve.calls")                   \
  X(cuMemAddressReserve_bytes, "cuMemAddressReserve.bytes")                   \
  X(cuMemAddressFree_calls, "cuMemAddressFree.calls")                         \
  X(cuGetProcAddress_calls, "cuGetProcAddress.calls")                         \
  X(cuGetProcAddress_v2_calls, "cuGetProcAddress_v2.calls")                   \
  X(cuMemGetInfo_v2_calls, "cuMemGetInfo_v2.calls")                           \
  X(cuInit_calls, "cuInit.calls")                                             \
  X(failed_allocs, "failed_allocs")                                           \
  X(bad_frees, "bad_frees")                                                   \
  X(live_bytes, "live_bytes")                                                 \
  X(peak_bytes, "peak_bytes")                                                 \
  X(allocated_bytes, "allocated_bytes")                                       \
  X(freed_bytes, "freed_bytes")                                               \
  X(vmm_physical_live_bytes, "vmm_physical_live_bytes")                       \
  X(vmm_physical_freed, "vmm_physical_frees")                                 \
  X(pool_reserved_bytes, "pool_reserved_bytes")                               \
  X(pool_reserved_peak, "pool_reserved_peak")
// clang-format on

enum Counter {
#define FAKE_ENUM(id, name) k_##id,
  FAKE_CUDA_COUNTERS(FAKE_ENUM)
#undef FAKE_ENUM
      kCounterCount
};
const char* const kCountNames[kCounterCount] = {
#define FAKE_NAME(id, name) name,
    FAKE_CUDA_COUNTERS(FAKE_NAME)
#undef FAKE_NAME
};
fake::Counts<kCounterCount> g_counts(kCountNames);
pid_t g_first_pid = getpid();

// ---- devices, contexts, streams -----------------------------------------------

constexpr int kDevices = 2;
constexpr uint64_t kChunk = 2ull << 20;  // pool growth and VMM granularity
constexpr int kDriverVersion = 13000;

uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

uint64_t device_capacity() {
  static const uint64_t bytes = [] {
    const char* v = getenv("FAKE_CUDA_DEVICE_BYTES");
    return v && *v ? strtoull(v, nullptr, 10) : (80ull << 30);
  }();
  return bytes;
}

bool g_initialised = false;
thread_local int t_device = -1;  // -1: no current context

CUcontext context_of(int device) { return reinterpret_cast<CUcontext>(uintptr_t{0x1000} + device); }
int device_of(CUcontext ctx) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(ctx);
  return (v >= 0x1000 && v < 0x1000 + kDevices) ? static_cast<int>(v - 0x1000) : -1;
}

enum class BlockKind { kDevice, kManaged, kHost, kPool, kV1 };
struct Block {
  uint64_t bytes;
  BlockKind kind;
  int device;
  CUmemoryPool pool;
};
struct Pool {
  int device;
  uint64_t used = 0, used_high = 0, reserved = 0, reserved_high = 0, threshold = 0;
};
struct Handle {
  uint64_t bytes;
  int device;
  int refs;
  int maps;
};
struct Mapping {
  uint64_t bytes;
  CUmemGenericAllocationHandle handle;
};

// One lock for all of the double's tables: simple beats fast here, and the
// benchmark compares the same double with and without the hooks.
std::mutex g_mutex;
std::unordered_map<uint64_t, Block> g_blocks;
std::unordered_map<uint64_t, int> g_stream_device;
std::map<uintptr_t, Pool> g_pools;  // key: pool handle value
uintptr_t g_current_pool[kDevices];
uintptr_t g_next_pool = 0x6000;
std::unordered_map<uint64_t, Handle> g_handles;
std::map<uint64_t, Mapping> g_mappings;
std::map<uint64_t, uint64_t> g_reservations;
std::unordered_map<uint64_t, uint64_t> g_registered;
uint64_t g_device_physical[kDevices];
uint64_t g_next_address = 0x7f0000000000ull;
uint32_t g_next_v1_address = 0x10000000u;
uint64_t g_next_va = 0x7e0000000000ull;
uint64_t g_next_handle = 0x48000000ull;
uint64_t g_next_stream = 0x5000;

void live_grow(uint64_t bytes) {
  g_counts.grow(k_live_bytes, k_peak_bytes, bytes);
  g_counts.add(k_allocated_bytes, bytes);
}
void live_shrink(uint64_t bytes) {
  g_counts.sub(k_live_bytes, bytes);
  g_counts.add(k_freed_bytes, bytes);
}

void pools_changed_locked() {
  uint64_t total = 0;
  for (auto& [handle, pool] : g_pools) total += pool.reserved;
  g_counts.set(k_pool_reserved_bytes, total);
  g_counts.raise(k_pool_reserved_peak, total);
}

void ensure_default_pools_locked() {
  if (g_current_pool[0]) return;
  for (int d = 0; d < kDevices; ++d) {
    g_current_pool[d] = g_next_pool++;
    g_pools[g_current_pool[d]].device = d;
  }
}

int stream_device_locked(CUstream stream) {
  const uint64_t s = reinterpret_cast<uint64_t>(stream);
  if (s <= 2) return t_device;  // legacy (0, 1) and per-thread (2) default streams
  auto it = g_stream_device.find(s);
  return it == g_stream_device.end() ? -2 : it->second;
}

// Like a real driver, freed device addresses are handed out again (first to
// allocations of the same rounded size), so a program's address set stays small.
std::unordered_map<uint64_t, std::vector<uint64_t>> g_free_addresses;  // rounded size -> addresses

uint64_t new_device_address_locked(uint64_t bytes) {
  const uint64_t rounded = round_up(bytes ? bytes : 1, 512);
  auto it = g_free_addresses.find(rounded);
  if (it != g_free_addresses.end() && !it->second.empty()) {
    const uint64_t a = it->second.back();
    it->second.pop_back();
    return a;
  }
  const uint64_t a = g_next_address;
  g_next_address += rounded;
  return a;
}

CUresult device_alloc(CUdeviceptr* out, size_t bytes, BlockKind kind, int calls_counter, int bytes_counter) {
  g_counts.add(calls_counter);
  g_counts.add(bytes_counter, bytes);
  if (!out || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (t_device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (g_device_physical[t_device] + bytes > device_capacity()) {
    g_counts.add(k_failed_allocs);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  uint64_t a;
  if (kind == BlockKind::kManaged) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    a = reinterpret_cast<uint64_t>(p);
  } else {
    a = new_device_address_locked(bytes);
  }
  g_blocks[a] = Block{bytes, kind, t_device, nullptr};
  g_device_physical[t_device] += bytes;
  live_grow(bytes);
  *out = a;
  return CUDA_SUCCESS;
}

// Removes a block the caller says is of one of `kinds`; false when unknown.
bool take_block_locked(uint64_t address, std::initializer_list<BlockKind> kinds, Block* out) {
  auto it = g_blocks.find(address);
  if (it == g_blocks.end()) return false;
  bool ok = false;
  for (BlockKind k : kinds) ok |= it->second.kind == k;
  if (!ok) return false;
  *out = it->second;
  g_blocks.erase(it);
  return true;
}

void release_block_locked(uint64_t address, const Block& b) {
  if (b.kind == BlockKind::kPool) {
    Pool& pool = g_pools[reinterpret_cast<uintptr_t>(b.pool)];
    pool.used -= b.bytes;
  } else if (b.device >= 0) {
    g_device_physical[b.device] -= b.bytes;
  }
  if (b.kind == BlockKind::kManaged || b.kind == BlockKind::kHost) {
    munmap(reinterpret_cast<void*>(address), b.bytes);
  } else if (b.kind != BlockKind::kV1) {
    g_free_addresses[round_up(b.bytes, 512)].push_back(address);
  }
  live_shrink(b.bytes);
}

CUresult device_free(CUdeviceptr address, int calls_counter) {
  g_counts.add(calls_counter);
  if (address == 0) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(g_mutex);
  Block b;
  if (!take_block_locked(address, {BlockKind::kDevice, BlockKind::kManaged, BlockKind::kPool}, &b)) {
    g_counts.add(k_bad_frees);
    return CUDA_ERROR_INVALID_VALUE;
  }
  release_block_locked(address, b);
  return CUDA_SUCCESS;
}

CUresult pool_alloc(CUdeviceptr* out, size_t bytes, CUmemoryPool pool_handle, CUstream stream, int calls_counter,
                    int bytes_counter) {
  g_counts.add(calls_counter);
  g_counts.add(bytes_counter, bytes);
  if (!out || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mutex);
  ensure_default_pools_locked();
  const int device = stream_device_locked(stream);
  if (device == -1) return CUDA_ERROR_INVALID_CONTEXT;
  if (device == -2) return CUDA_ERROR_INVALID_HANDLE;
  uintptr_t key = pool_handle ? reinterpret_cast<uintptr_t>(pool_handle) : g_current_pool[device];
  auto it = g_pools.find(key);
  if (it == g_pools.end()) return CUDA_ERROR_INVALID_VALUE;
  Pool& pool = it->second;
  const uint64_t reserved = std::max(pool.reserved, round_up(pool.used + bytes, kChunk));
  const uint64_t growth = reserved - pool.reserved;
  if (g_device_physical[pool.device] + growth > device_capacity()) {
    g_counts.add(k_failed_allocs);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  g_device_physical[pool.device] += growth;
  pool.reserved = reserved;
  pool.reserved_high = std::max(pool.reserved_high, reserved);
  pool.used += bytes;
  pool.used_high = std::max(pool.used_high, pool.used);
  pools_changed_locked();
  const uint64_t a = new_device_address_locked(bytes);
  g_blocks[a] = Block{bytes, BlockKind::kPool, pool.device, reinterpret_cast<CUmemoryPool>(key)};
  live_grow(bytes);
  *out = a;
  return CUDA_SUCCESS;
}

CUresult pool_free(CUdeviceptr address, int calls_counter) {
  g_counts.add(calls_counter);
  std::lock_guard<std::mutex> lock(g_mutex);
  Block b;
  if (!take_block_locked(address, {BlockKind::kPool, BlockKind::kDevice}, &b)) {
    g_counts.add(k_bad_frees);
    return CUDA_ERROR_INVALID_VALUE;
  }
  release_block_locked(address, b);
  return CUDA_SUCCESS;
}

// At a synchronisation point a pool gives memory back down to its release threshold.
void trim_pools_locked() {
  for (auto& [key, pool] : g_pools) {
    const uint64_t keep =
        std::max(round_up(pool.used, kChunk), std::min(pool.reserved, round_up(pool.threshold, kChunk)));
    if (keep < pool.reserved) {
      g_device_physical[pool.device] -= pool.reserved - keep;
      pool.reserved = keep;
    }
  }
  pools_changed_locked();
}

CUresult host_alloc(void** out, size_t bytes, int calls_counter, int bytes_counter) {
  g_counts.add(calls_counter);
  g_counts.add(bytes_counter, bytes);
  if (!out || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_blocks[reinterpret_cast<uint64_t>(p)] = Block{bytes, BlockKind::kHost, -1, nullptr};
  live_grow(bytes);
  *out = p;
  return CUDA_SUCCESS;
}

// Physical VMM memory goes when its last handle reference and its last mapping are gone.
void maybe_free_handle_locked(std::unordered_map<uint64_t, Handle>::iterator it) {
  if (it->second.refs > 0 || it->second.maps > 0) return;
  if (it->second.device >= 0) g_device_physical[it->second.device] -= it->second.bytes;
  g_counts.sub(k_vmm_physical_live_bytes, it->second.bytes);
  g_counts.add(k_vmm_physical_freed);
  live_shrink(it->second.bytes);
  g_handles.erase(it);
}

}  // namespace

// ---- initialisation, devices, contexts ------------------------------------------

FAKE_EXPORT CUresult cuInit(unsigned int) {
  g_counts.add(k_cuInit_calls);
  g_initialised = true;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = kDriverVersion;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetCount(int* count) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  *count = kDevices;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= kDevices) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice device) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (device < 0 || device >= kDevices) return CUDA_ERROR_INVALID_DEVICE;
  *ctx = context_of(device);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  return device >= 0 && device < kDevices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (ctx && device_of(ctx) < 0) return CUDA_ERROR_INVALID_CONTEXT;
  t_device = ctx ? device_of(ctx) : -1;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = t_device >= 0 ? context_of(t_device) : nullptr;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxGetDevice(CUdevice* device) {
  if (t_device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  *device = t_device;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxSynchronize() {
  std::lock_guard<std::mutex> lock(g_mutex);
  trim_pools_locked();
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamCreate(CUstream* stream, unsigned int) {
  if (t_device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(g_mutex);
  const uint64_t s = g_next_stream++;
  g_stream_device[s] = t_device;
  *stream = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_stream_device.erase(reinterpret_cast<uint64_t>(stream)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
FAKE_EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (stream_device_locked(stream) == -2) return CUDA_ERROR_INVALID_HANDLE;
  trim_pools_locked();
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream stream) { return cuStreamSynchronize(stream); }
// Bytes a device uses outside any allocation the double counts (the context,
// modules, a library's own workspace): set by a test, seen only here.
uint64_t g_device_hidden[kDevices];

FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  g_counts.add(k_cuMemGetInfo_v2_calls);
  if (t_device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(g_mutex);
  *total_bytes = device_capacity();
  *free_bytes = device_capacity() - g_device_physical[t_device] - g_device_hidden[t_device];
  return CUDA_SUCCESS;
}
// Test knob: device `device` uses `bytes` that no allocation accounts for.
FAKE_EXPORT void fake_cuda_set_hidden_bytes(int device, uint64_t bytes) {
  if (device < 0 || device >= kDevices) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_device_hidden[device] = bytes;
}
FAKE_EXPORT CUresult cuGetErrorString(CUresult error, const char** text) {
  *text = error == CUDA_SUCCESS ? "no error" : "fake driver error";
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuGetErrorName(CUresult error, const char** text) {
  *text = error == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}

// ---- device memory -------------------------------------------------------------

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* out, size_t bytes) {
  return device_alloc(out, bytes, BlockKind::kDevice, k_cuMemAlloc_v2_calls, k_cuMemAlloc_v2_bytes);
}
FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr address) { return device_free(address, k_cuMemFree_v2_calls); }

// The CUDA 2.0 ABI: 32-bit device pointers and sizes. Here so that a lookup
// for an old version returns a function a hook must not mistake for _v2.
FAKE_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1* out, unsigned int bytes) {
  g_counts.add(k_cuMemAlloc_v1_calls);
  g_counts.add(k_cuMemAlloc_v1_bytes, bytes);
  if (!out || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (t_device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  const uint32_t a = g_next_v1_address;
  g_next_v1_address += static_cast<uint32_t>(round_up(bytes, 512));
  g_blocks[a] = Block{bytes, BlockKind::kV1, t_device, nullptr};
  g_device_physical[t_device] += bytes;
  live_grow(bytes);
  *out = a;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemFree(CUdeviceptr_v1 address) {
  g_counts.add(k_cuMemFree_v1_calls);
  std::lock_guard<std::mutex> lock(g_mutex);
  Block b;
  if (!take_block_locked(address, {BlockKind::kV1}, &b)) return CUDA_ERROR_INVALID_VALUE;
  release_block_locked(address, b);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* out, size_t bytes, unsigned int) {
  return device_alloc(out, bytes, BlockKind::kManaged, k_cuMemAllocManaged_calls, k_cuMemAllocManaged_bytes);
}

// ---- stream-ordered allocation and pools ---------------------------------------

FAKE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* out, size_t bytes, CUstream stream) {
  return pool_alloc(out, bytes, nullptr, stream, k_cuMemAllocAsync_calls, k_cuMemAllocAsync_bytes);
}
FAKE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* out, size_t bytes, CUstream stream) {
  return pool_alloc(out, bytes, nullptr, stream, k_cuMemAllocAsync_ptsz_calls, k_cuMemAllocAsync_ptsz_bytes);
}
FAKE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* out, size_t bytes, CUmemoryPool pool, CUstream stream) {
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  return pool_alloc(out, bytes, pool, stream, k_cuMemAllocFromPoolAsync_calls, k_cuMemAllocFromPoolAsync_bytes);
}
FAKE_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* out, size_t bytes, CUmemoryPool pool, CUstream stream) {
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  return pool_alloc(out, bytes, pool, stream, k_cuMemAllocFromPoolAsync_ptsz_calls,
                    k_cuMemAllocFromPoolAsync_ptsz_bytes);
}
FAKE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr address, CUstream) {
  return pool_free(address, k_cuMemFreeAsync_calls);
}
FAKE_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr address, CUstream) {
  return pool_free(address, k_cuMemFreeAsync_ptsz_calls);
}

FAKE_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* out, CUdevice device) {
  if (device < 0 || device >= kDevices) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_mutex);
  ensure_default_pools_locked();
  *out = reinterpret_cast<CUmemoryPool>(uintptr_t{0x6000} + device);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool* out, CUdevice device) {
  if (device < 0 || device >= kDevices) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_mutex);
  ensure_default_pools_locked();
  *out = reinterpret_cast<CUmemoryPool>(g_current_pool[device]);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceSetMemPool(CUdevice device, CUmemoryPool pool) {
  if (device < 0 || device >= kDevices) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_mutex);
  ensure_default_pools_locked();
  auto it = g_pools.find(reinterpret_cast<uintptr_t>(pool));
  if (it == g_pools.end() || it->second.device != device) return CUDA_ERROR_INVALID_VALUE;
  g_current_pool[device] = reinterpret_cast<uintptr_t>(pool);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* out, const CUmemPoolProps* props) {
  if (!out || !props || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->location.id < 0 ||
      props->location.id >= kDevices)
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mutex);
  ensure_default_pools_locked();
  const uintptr_t key = g_next_pool++;
  g_pools[key].device = props->location.id;
  *out = reinterpret_cast<CUmemoryPool>(key);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_pools.find(reinterpret_cast<uintptr_t>(pool));
  if (it == g_pools.end()) return CUDA_ERROR_INVALID_VALUE;
  g_device_physical[it->second.device] -= it->second.reserved;
  g_pools.erase(it);
  pools_changed_locked();
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_pools.find(reinterpret_cast<uintptr_t>(pool));
  if (it == g_pools.end() || !value) return CUDA_ERROR_INVALID_VALUE;
  const Pool& p = it->second;
  cuuint64_t* out = static_cast<cuuint64_t*>(value);
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *out = p.threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *out = p.reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *out = p.reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *out = p.used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *out = p.used_high; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_pools.find(reinterpret_cast<uintptr_t>(pool));
  if (it == g_pools.end() || !value) return CUDA_ERROR_INVALID_VALUE;
  if (attr != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) return CUDA_ERROR_INVALID_VALUE;
  it->second.threshold = *static_cast<cuuint64_t*>(value);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_pools.find(reinterpret_cast<uintptr_t>(pool));
  if (it == g_pools.end()) return CUDA_ERROR_INVALID_VALUE;
  Pool& p = it->second;
  const uint64_t target = std::max(round_up(p.used, kChunk), round_up(keep, kChunk));
  if (target < p.reserved) {
    g_device_physical[p.device] -= p.reserved - target;
    p.reserved = target;
  }
  pools_changed_locked();
  return CUDA_SUCCESS;
}

// ---- pinned host memory ------------------------------------------------------------

FAKE_EXPORT CUresult cuMemAllocHost_v2(void** out, size_t bytes) {
  return host_alloc(out, bytes, k_cuMemAllocHost_v2_calls, k_cuMemAllocHost_v2_bytes);
}
FAKE_EXPORT CUresult cuMemHostAlloc(void** out, size_t bytes, unsigned int) {
  return host_alloc(out, bytes, k_cuMemHostAlloc_calls, k_cuMemHostAlloc_bytes);
}
FAKE_EXPORT CUresult cuMemFreeHost(void* p) {
  g_counts.add(k_cuMemFreeHost_calls);
  std::lock_guard<std::mutex> lock(g_mutex);
  Block b;
  if (!take_block_locked(reinterpret_cast<uint64_t>(p), {BlockKind::kHost}, &b)) {
    g_counts.add(k_bad_frees);
    return CUDA_ERROR_INVALID_VALUE;
  }
  release_block_locked(reinterpret_cast<uint64_t>(p), b);
  return CUDA_SUCCESS;
}
// Registration pins memory the application already owns: no new bytes.
FAKE_EXPORT CUresult cuMemHostRegister_v2(void* p, size_t bytes, unsigned int) {
  g_counts.add(k_cuMemHostRegister_v2_calls);
  g_counts.add(k_cuMemHostRegister_v2_bytes, bytes);
  if (!p || !bytes) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_registered.emplace(reinterpret_cast<uint64_t>(p), bytes).second)
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemHostUnregister(void* p) {
  g_counts.add(k_cuMemHostUnregister_calls);
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_registered.erase(reinterpret_cast<uint64_t>(p)) ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

// ---- virtual memory management -----------------------------------------------------

FAKE_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp*,
                                                   CUmemAllocationGranularity_flags) {
  *granularity = kChunk;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* out, size_t bytes, const CUmemAllocationProp* prop,
                                 unsigned long long) {
  g_counts.add(k_cuMemCreate_calls);
  g_counts.add(k_cuMemCreate_bytes, bytes);
  if (!out || !prop || bytes == 0 || bytes % kChunk != 0) return CUDA_ERROR_INVALID_VALUE;
  const int device = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
  if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && (device < 0 || device >= kDevices))
    return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (device >= 0 && g_device_physical[device] + bytes > device_capacity()) {
    g_counts.add(k_failed_allocs);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const uint64_t h = g_next_handle;
  g_next_handle += 0x10;
  g_handles[h] = Handle{bytes, device, 1, 0};
  if (device >= 0) g_device_physical[device] += bytes;
  g_counts.add(k_vmm_physical_live_bytes, bytes);
  live_grow(bytes);
  *out = h;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  g_counts.add(k_cuMemRelease_calls);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_handles.find(handle);
  if (it == g_handles.end() || it->second.refs == 0) return CUDA_ERROR_INVALID_VALUE;
  --it->second.refs;
  maybe_free_handle_locked(it);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* out, void* address) {
  g_counts.add(k_cuMemRetainAllocationHandle_calls);
  std::lock_guard<std::mutex> lock(g_mutex);
  const uint64_t a = reinterpret_cast<uint64_t>(address);
  auto it = g_mappings.upper_bound(a);
  if (it == g_mappings.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (a >= it->first + it->second.bytes) return CUDA_ERROR_INVALID_VALUE;
  ++g_handles[it->second.handle].refs;
  *out = it->second.handle;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* out, size_t bytes, size_t alignment, CUdeviceptr,
                                         unsigned long long) {
  g_counts.add(k_cuMemAddressReserve_calls);
  g_counts.add(k_cuMemAddressReserve_bytes, bytes);
  if (!out || bytes == 0 || bytes % kChunk != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mutex);
  const uint64_t a = round_up(g_next_va, alignment ? alignment : kChunk);
  g_next_va = a + bytes;
  g_reservations[a] = bytes;
  *out = a;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemAddressFree(CUdeviceptr address, size_t bytes) {
  g_counts.add(k_cuMemAddressFree_calls);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_reservations.find(address);
  if (it == g_reservations.end() || it->second != bytes) return CUDA_ERROR_INVALID_VALUE;
  auto m = g_mappings.lower_bound(address);
  if (m != g_mappings.end() && m->first < address + bytes) return CUDA_ERROR_INVALID_VALUE;  // still mapped
  g_reservations.erase(it);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemMap(CUdeviceptr address, size_t bytes, size_t offset, CUmemGenericAllocationHandle handle,
                              unsigned long long) {
  g_counts.add(k_cuMemMap_calls);
  g_counts.add(k_cuMemMap_bytes, bytes);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto h = g_handles.find(handle);
  if (h == g_handles.end() || offset + bytes > h->second.bytes || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  auto r = g_reservations.upper_bound(address);
  if (r == g_reservations.begin()) return CUDA_ERROR_INVALID_VALUE;
  --r;
  if (address + bytes > r->first + r->second) return CUDA_ERROR_INVALID_VALUE;
  auto next = g_mappings.lower_bound(address);
  if (next != g_mappings.end() && next->first < address + bytes) return CUDA_ERROR_ALREADY_MAPPED;
  g_mappings[address] = Mapping{bytes, handle};
  ++h->second.maps;
  return CUDA_SUCCESS;
}
// Unmaps every mapping in [address, address + bytes); the range must start at one.
FAKE_EXPORT CUresult cuMemUnmap(CUdeviceptr address, size_t bytes) {
  g_counts.add(k_cuMemUnmap_calls);
  g_counts.add(k_cuMemUnmap_bytes, bytes);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto m = g_mappings.find(address);
  if (m == g_mappings.end()) return CUDA_ERROR_INVALID_VALUE;
  while (m != g_mappings.end() && m->first < address + bytes) {
    auto h = g_handles.find(m->second.handle);
    m = g_mappings.erase(m);
    if (h != g_handles.end()) {
      --h->second.maps;
      maybe_free_handle_locked(h);
    }
  }
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemSetAccess(CUdeviceptr address, size_t bytes, const CUmemAccessDesc*, size_t count) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto m = g_mappings.find(address);
  return (m != g_mappings.end() && bytes && count) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- kernels (the fake runtime launches nothing; a driver-level client may) ------

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    CUstream, void**, void**) {
  return CUDA_SUCCESS;
}

// ---- entry points ------------------------------------------------------------------

namespace {

// What a real driver might hand out instead of its exported symbols.
CUresult hidden_mem_alloc(CUdeviceptr* out, size_t bytes) { return cuMemAlloc_v2(out, bytes); }
CUresult hidden_mem_free(CUdeviceptr address) { return cuMemFree_v2(address); }

struct Proc {
  const char* base;
  int version;       // CUDA version that introduced this ABI
  void* legacy;      // default / legacy-stream variant
  void* per_thread;  // _ptsz variant, or nullptr when the function has none
  void* hidden;      // FAKE_CUDA_HIDDEN_ENTRY=1: a non-exported trampoline
};

#define P(fn) reinterpret_cast<void*>(&fn)
// Sorted by base name, then by version: a lookup takes the newest version
// not above the requested one.
const Proc kProcs[] = {
    {"cuCtxGetCurrent", 4000, P(cuCtxGetCurrent), nullptr, nullptr},
    {"cuCtxGetDevice", 2000, P(cuCtxGetDevice), nullptr, nullptr},
    {"cuCtxSetCurrent", 4000, P(cuCtxSetCurrent), nullptr, nullptr},
    {"cuCtxSynchronize", 2000, P(cuCtxSynchronize), nullptr, nullptr},
    {"cuDeviceGet", 2000, P(cuDeviceGet), nullptr, nullptr},
    {"cuDeviceGetCount", 2000, P(cuDeviceGetCount), nullptr, nullptr},
    {"cuDeviceGetDefaultMemPool", 11020, P(cuDeviceGetDefaultMemPool), nullptr, nullptr},
    {"cuDeviceGetMemPool", 11020, P(cuDeviceGetMemPool), nullptr, nullptr},
    {"cuDevicePrimaryCtxRelease", 11000, P(cuDevicePrimaryCtxRelease_v2), nullptr, nullptr},
    {"cuDevicePrimaryCtxRetain", 7000, P(cuDevicePrimaryCtxRetain), nullptr, nullptr},
    {"cuDeviceSetMemPool", 11020, P(cuDeviceSetMemPool), nullptr, nullptr},
    {"cuDriverGetVersion", 2020, P(cuDriverGetVersion), nullptr, nullptr},
    {"cuGetErrorName", 6000, P(cuGetErrorName), nullptr, nullptr},
    {"cuGetErrorString", 6000, P(cuGetErrorString), nullptr, nullptr},
    {"cuGetProcAddress", 11030, P(cuGetProcAddress), nullptr, nullptr},
    {"cuGetProcAddress", 12000, P(cuGetProcAddress_v2), nullptr, nullptr},
    {"cuInit", 2000, P(cuInit), nullptr, nullptr},
    {"cuLaunchKernel", 4000, P(cuLaunchKernel), nullptr, nullptr},
    {"cuMemAddressFree", 10020, P(cuMemAddressFree), nullptr, nullptr},
    {"cuMemAddressReserve", 10020, P(cuMemAddressReserve), nullptr, nullptr},
    {"cuMemAlloc", 2000, P(cuMemAlloc), nullptr, nullptr},
    {"cuMemAlloc", 3020, P(cuMemAlloc_v2), nullptr, P(hidden_mem_alloc)},
    {"cuMemAllocAsync", 11020, P(cuMemAllocAsync), P(cuMemAllocAsync_ptsz), nullptr},
    {"cuMemAllocFromPoolAsync", 11020, P(cuMemAllocFromPoolAsync), P(cuMemAllocFromPoolAsync_ptsz), nullptr},
    {"cuMemAllocHost", 3020, P(cuMemAllocHost_v2), nullptr, nullptr},
    {"cuMemAllocManaged", 6000, P(cuMemAllocManaged), nullptr, nullptr},
    {"cuMemCreate", 10020, P(cuMemCreate), nullptr, nullptr},
    {"cuMemFree", 2000, P(cuMemFree), nullptr, nullptr},
    {"cuMemFree", 3020, P(cuMemFree_v2), nullptr, P(hidden_mem_free)},
    {"cuMemFreeAsync", 11020, P(cuMemFreeAsync), P(cuMemFreeAsync_ptsz), nullptr},
    {"cuMemFreeHost", 2000, P(cuMemFreeHost), nullptr, nullptr},
    {"cuMemGetAllocationGranularity", 10020, P(cuMemGetAllocationGranularity), nullptr, nullptr},
    {"cuMemGetInfo", 3020, P(cuMemGetInfo_v2), nullptr, nullptr},
    {"cuMemHostAlloc", 2020, P(cuMemHostAlloc), nullptr, nullptr},
    {"cuMemHostRegister", 6050, P(cuMemHostRegister_v2), nullptr, nullptr},
    {"cuMemHostUnregister", 4000, P(cuMemHostUnregister), nullptr, nullptr},
    {"cuMemMap", 10020, P(cuMemMap), nullptr, nullptr},
    {"cuMemPoolCreate", 11020, P(cuMemPoolCreate), nullptr, nullptr},
    {"cuMemPoolDestroy", 11020, P(cuMemPoolDestroy), nullptr, nullptr},
    {"cuMemPoolGetAttribute", 11020, P(cuMemPoolGetAttribute), nullptr, nullptr},
    {"cuMemPoolSetAttribute", 11020, P(cuMemPoolSetAttribute), nullptr, nullptr},
    {"cuMemPoolTrimTo", 11020, P(cuMemPoolTrimTo), nullptr, nullptr},
    {"cuMemRelease", 10020, P(cuMemRelease), nullptr, nullptr},
    {"cuMemRetainAllocationHandle", 11000, P(cuMemRetainAllocationHandle), nullptr, nullptr},
    {"cuMemSetAccess", 10020, P(cuMemSetAccess), nullptr, nullptr},
    {"cuMemUnmap", 10020, P(cuMemUnmap), nullptr, nullptr},
    {"cuStreamCreate", 2000, P(cuStreamCreate), nullptr, nullptr},
    {"cuStreamDestroy", 4000, P(cuStreamDestroy_v2), nullptr, nullptr},
    {"cuStreamSynchronize", 2000, P(cuStreamSynchronize), P(cuStreamSynchronize_ptsz), nullptr},
};
#undef P

bool env_flag(const char* name) {
  const char* v = getenv(name);
  return v && *v && strcmp(v, "0") != 0;
}

CUresult lookup(const char* symbol, void** pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  if (env_flag("FAKE_CUDA_LOG_LOOKUPS"))
    fprintf(stderr, "fake libcuda: lookup %s version %d flags %llu\n", symbol ? symbol : "(null)", version,
            static_cast<unsigned long long>(flags));
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  if (version > kDriverVersion) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  const Proc* match = nullptr;
  bool known = false;
  for (const Proc& p : kProcs) {
    if (strcmp(p.base, symbol) != 0) continue;
    known = true;
    if (p.version <= version) match = &p;
  }
  if (status) {
    *status = match ? CU_GET_PROC_ADDRESS_SUCCESS
                    : (known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  }
  if (!match) return CUDA_SUCCESS;  // documented: success with a null pointer and the reason in the status
  if (env_flag("FAKE_CUDA_HIDDEN_ENTRY") && match->hidden) {
    *pfn = match->hidden;
  } else if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && match->per_thread) {
    *pfn = match->per_thread;
  } else {
    *pfn = match->legacy;
  }
  return CUDA_SUCCESS;
}

void reset_in_child() {
  g_first_pid = -1;  // the child's counts go to "<file>.<pid>"
  g_counts.clear();
  std::lock_guard<std::mutex> lock(g_mutex);
  g_blocks.clear();
  g_handles.clear();
  g_mappings.clear();
}

__attribute__((constructor)) void fake_cuda_start() { pthread_atfork(nullptr, nullptr, reset_in_child); }
__attribute__((destructor)) void fake_cuda_stop() { g_counts.dump("FAKE_CUDA_COUNTS", g_first_pid); }

}  // namespace

// The exported lookups are also what the table hands out for "cuGetProcAddress".
FAKE_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  g_counts.add(k_cuGetProcAddress_calls);
  return lookup(symbol, pfn, version, flags, nullptr);
}
FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult* status) {
  g_counts.add(k_cuGetProcAddress_v2_calls);
  return lookup(symbol, pfn, version, flags, status);
}

// The double's own view, for tests: a counter by name (see kCountNames), -1 if unknown.
FAKE_EXPORT long long fake_cuda_count(const char* name) { return g_counts.find(name); }
