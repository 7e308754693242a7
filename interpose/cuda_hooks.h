// What the CUDA hooks share: the tables of driver and runtime functions we
// forward to, the dlsym we bypass, and the recording helpers. Internal to the
// preloaded library; nothing here is exported.
//
// How the pieces meet (docs/cuda.md has the long form):
// - cuda_dlsym.cc exports dlsym. Lookups on a real handle of a name we hook
//   ("cuGetProcAddress_v2", "cuMemCreate", "cudaMalloc") come back wrapped.
// - cuda_entry_points.cc binds the driver (the object whose lookup function we
//   saw), identifies every pointer a driver lookup returns by comparing it with
//   that driver's own symbols, and wraps cuGetProcAddress / _v2.
// - cuda_driver_hooks.cc, cuda_runtime_hooks.cc: the wrappers themselves, also
//   exported under their own names for programs that link the libraries.
// - cuda_blocks.cc: which addresses are live (size, device, kind for frees).
// - cuda_vmm.cc: VMM handles and mappings; cuda_pools.cc: pool sampling.
#pragma once

#include <atomic>
#include <cstdint>

#include "format/event.h"
#include "runtime/recorder.h"
#include "runtime/sys.h"

namespace psc::interpose::cuda {

using DlsymFn = void* (*)(void*, const char*);
// glibc's dlsym (found with dlvsym), never ours. Calls made through it from
// this library resolve RTLD_NEXT relative to this library.
DlsymFn real_dlsym();

// ---- driver ------------------------------------------------------------------
// X(id, exported name, base name a lookup asks for, wrapped?)
#define PSC_DRIVER_FUNCTIONS(X)                                                                    \
  X(GetProcAddress, "cuGetProcAddress", "cuGetProcAddress", true)                                  \
  X(GetProcAddress_v2, "cuGetProcAddress_v2", "cuGetProcAddress", true)                            \
  X(Init, "cuInit", "cuInit", true)                                                                \
  X(MemAlloc_v2, "cuMemAlloc_v2", "cuMemAlloc", true)                                              \
  X(MemFree_v2, "cuMemFree_v2", "cuMemFree", true)                                                 \
  X(MemAllocAsync, "cuMemAllocAsync", "cuMemAllocAsync", true)                                     \
  X(MemAllocAsync_ptsz, "cuMemAllocAsync_ptsz", "cuMemAllocAsync", true)                           \
  X(MemFreeAsync, "cuMemFreeAsync", "cuMemFreeAsync", true)                                        \
  X(MemFreeAsync_ptsz, "cuMemFreeAsync_ptsz", "cuMemFreeAsync", true)                              \
  X(MemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", true)             \
  X(MemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync_ptsz", "cuMemAllocFromPoolAsync", true)   \
  X(MemAllocManaged, "cuMemAllocManaged", "cuMemAllocManaged", true)                               \
  X(MemAllocHost_v2, "cuMemAllocHost_v2", "cuMemAllocHost", true)                                  \
  X(MemHostAlloc, "cuMemHostAlloc", "cuMemHostAlloc", true)                                        \
  X(MemFreeHost, "cuMemFreeHost", "cuMemFreeHost", true)                                           \
  X(MemHostRegister_v2, "cuMemHostRegister_v2", "cuMemHostRegister", true)                         \
  X(MemHostUnregister, "cuMemHostUnregister", "cuMemHostUnregister", true)                         \
  X(MemCreate, "cuMemCreate", "cuMemCreate", true)                                                 \
  X(MemRelease, "cuMemRelease", "cuMemRelease", true)                                              \
  X(MemRetainAllocationHandle, "cuMemRetainAllocationHandle", "cuMemRetainAllocationHandle", true) \
  X(MemMap, "cuMemMap", "cuMemMap", true)                                                          \
  X(MemUnmap, "cuMemUnmap", "cuMemUnmap", true)                                                    \
  X(CtxGetDevice, "cuCtxGetDevice", "cuCtxGetDevice", false)                                       \
  X(CtxGetCurrent, "cuCtxGetCurrent", "cuCtxGetCurrent", false)                                    \
  X(MemGetInfo_v2, "cuMemGetInfo_v2", "cuMemGetInfo", false)                                       \
  X(DeviceGetMemPool, "cuDeviceGetMemPool", "cuDeviceGetMemPool", false)                           \
  X(MemPoolGetAttribute, "cuMemPoolGetAttribute", "cuMemPoolGetAttribute", false)

enum class DriverFn : uint8_t {
#define PSC_DRIVER_ENUM(id, name, base, wrapped) k##id,
  PSC_DRIVER_FUNCTIONS(PSC_DRIVER_ENUM)
#undef PSC_DRIVER_ENUM
      kCount
};
constexpr int kDriverFnCount = static_cast<int>(DriverFn::kCount);

struct DriverEntry {
  const char* name;  // the driver's exported symbol
  const char* base;  // what cuGetProcAddress is asked for
  void* wrapper;     // ours, or nullptr for functions we only call
};
extern const DriverEntry kDriverEntries[kDriverFnCount];  // cuda_driver_hooks.cc
// The bound driver's functions, filled once by bind_driver_*.
extern std::atomic<void*> g_driver_real[kDriverFnCount];

void* driver_real_slow(DriverFn fn);
template <typename Fn>
inline Fn driver_real(DriverFn fn) {
  void* p = g_driver_real[static_cast<int>(fn)].load(std::memory_order_acquire);
  if (PSC_UNLIKELY(!p)) p = driver_real_slow(fn);
  return reinterpret_cast<Fn>(p);
}

// What to hand out for a driver function pointer `p` that a lookup of
// `requested` returned: our wrapper when p is one of the bound driver's
// functions we hook, p itself otherwise (and a mark in the trace when
// `requested` names a function we meant to hook: its calls go unseen).
void* wrap_driver_pointer(const char* requested, void* p);
// dlsym(handle, name) of a driver symbol returned p: binds the driver on the
// first such lookup, then answers like wrap_driver_pointer.
void* wrap_driver_symbol(const char* name, void* p);
bool is_our_driver_wrapper(const void* p);

// ---- runtime -----------------------------------------------------------------
// X(id, name, wrapped?)
#define PSC_RUNTIME_FUNCTIONS(X)                                                      \
  X(Malloc, "cudaMalloc", true)                                                       \
  X(Free, "cudaFree", true)                                                           \
  X(MallocAsync, "cudaMallocAsync", true)                                             \
  X(MallocAsync_ptsz, "cudaMallocAsync_ptsz", true)                                   \
  X(FreeAsync, "cudaFreeAsync", true)                                                 \
  X(FreeAsync_ptsz, "cudaFreeAsync_ptsz", true)                                       \
  X(MallocFromPoolAsync, "cudaMallocFromPoolAsync", true)                             \
  X(MallocFromPoolAsync_ptsz, "cudaMallocFromPoolAsync_ptsz", true)                   \
  X(MallocManaged, "cudaMallocManaged", true)                                         \
  X(MallocHost, "cudaMallocHost", true)                                               \
  X(HostAlloc, "cudaHostAlloc", true)                                                 \
  X(FreeHost, "cudaFreeHost", true)                                                   \
  X(HostRegister, "cudaHostRegister", true)                                           \
  X(HostUnregister, "cudaHostUnregister", true)                                       \
  X(GetDriverEntryPoint, "cudaGetDriverEntryPoint", true)                             \
  X(GetDriverEntryPoint_ptsz, "cudaGetDriverEntryPoint_ptsz", true)                   \
  X(GetDriverEntryPointByVersion, "cudaGetDriverEntryPointByVersion", true)           \
  X(GetDriverEntryPointByVersion_ptsz, "cudaGetDriverEntryPointByVersion_ptsz", true) \
  X(GetDevice, "cudaGetDevice", false)                                                \
  X(SetDevice, "cudaSetDevice", false)                                                \
  X(DeviceGetDefaultMemPool, "cudaDeviceGetDefaultMemPool", false)                    \
  X(MemPoolSetAttribute, "cudaMemPoolSetAttribute", false)

enum class RuntimeFn : uint8_t {
#define PSC_RUNTIME_ENUM(id, name, wrapped) k##id,
  PSC_RUNTIME_FUNCTIONS(PSC_RUNTIME_ENUM)
#undef PSC_RUNTIME_ENUM
      kCount
};
constexpr int kRuntimeFnCount = static_cast<int>(RuntimeFn::kCount);

extern std::atomic<void*> g_runtime_real[kRuntimeFnCount];
void* runtime_real_slow(RuntimeFn fn);
template <typename Fn>
inline Fn runtime_real(RuntimeFn fn) {
  void* p = g_runtime_real[static_cast<int>(fn)].load(std::memory_order_acquire);
  if (PSC_UNLIKELY(!p)) p = runtime_real_slow(fn);
  return reinterpret_cast<Fn>(p);
}
// dlsym(handle, name) of a runtime symbol returned p: our hook when p is the
// runtime we forward to (or we had none yet), p otherwise.
void* wrap_runtime_symbol(const char* name, void* p);

// ---- recording ---------------------------------------------------------------

// The calling thread's current device, asked of the runtime or of the driver
// (-1 when it cannot say). Used when a free's block was never seen.
using DeviceQuery = int16_t (*)();
int16_t runtime_device();
int16_t driver_device();

// The per-thread default stream (cudaStreamPerThread, CU_STREAM_PER_THREAD),
// recorded for _ptsz calls on stream 0: the stream the call actually used.
constexpr uint64_t kPerThreadStream = 2;
inline uint64_t recorded_stream(const void* stream, bool per_thread) {
  const uint64_t s = reinterpret_cast<uint64_t>(stream);
  return (per_thread && s == 0) ? kPerThreadStream : s;
}

struct AllocRecord {
  Api api;
  MemoryKind memory;
  uint64_t address;
  uint64_t bytes;
  int16_t device;
  uint64_t stream;
};
// After the real allocation returned: the outermost hook remembers the block
// (size, device, kind) for its free; every level records, nested ones flagged.
void record_alloc(const rt::HookGuard& guard, const AllocRecord& r);
// The real allocation failed: recorded with kFlagFailed, address 0.
void record_failed_alloc(const rt::HookGuard& guard, const AllocRecord& r);
// Before the real free: size, device and kind from the remembered block.
void record_free(const rt::HookGuard& guard, Api api, MemoryKind fallback, uint64_t address, uint64_t stream,
                 DeviceQuery device);

// ---- pools and VMM -------------------------------------------------------------

// A stream-ordered allocation used `pool` (0: the device's current pool).
void note_pool_use(int16_t device, uint64_t pool);

void vmm_created(const rt::HookGuard& guard, uint64_t handle, uint64_t bytes, int16_t device);
void vmm_retained(uint64_t handle);
void vmm_before_release(const rt::HookGuard& guard, uint64_t handle);
void vmm_mapped(const rt::HookGuard& guard, uint64_t address, uint64_t bytes, uint64_t handle);
void vmm_before_unmap(const rt::HookGuard& guard, uint64_t address, uint64_t bytes);

// ---- device level (device_samples.cc) and CUPTI (cupti_backend.cc) ---------------

// cuInit succeeded: the process uses CUDA. Starts the CUPTI backend (once,
// per PEAKSCOPE_CUPTI) and the device-level samples.
void after_cu_init();

}  // namespace psc::interpose::cuda
