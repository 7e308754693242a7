// CUDA runtime API hooks, exported unversioned: a program's versioned
// reference (cudaMalloc@libcudart.so.12, @libcudart.so.13) binds to an
// unversioned definition that comes first in the search order, so one build
// serves every runtime version with this ABI.
//
// Each hook forwards to the runtime the process actually loaded: the next
// definition after us (RTLD_NEXT), else a libcudart already loaded privately
// (dlopen with RTLD_LOCAL, as Python extensions do), found among the loaded
// objects. Resolution happens on first call, when that runtime is there.
//
// The runtime turns each call into a driver call, which our driver wrappers
// record again with kFlagNested (the guard held here makes it nested), so
// analysis counts every allocation once whichever layer it comes through.
#include <dlfcn.h>
#include <link.h>

#include <cstring>

#include <cuda_runtime_api.h>

#include "interpose/cuda_hooks.h"

namespace psc::interpose::cuda {

std::atomic<void*> g_runtime_real[kRuntimeFnCount];

namespace {

constexpr size_t kPathMax = 4096;

const char* const kRuntimeNames[kRuntimeFnCount] = {
#define PSC_RUNTIME_NAME(id, name, wrapped) name,
    PSC_RUNTIME_FUNCTIONS(PSC_RUNTIME_NAME)
#undef PSC_RUNTIME_NAME
};

// The first loaded libcudart's path. dl_iterate_phdr holds a loader lock
// while it calls us, so this only copies the name; dlopen comes after.
int find_loaded_runtime(dl_phdr_info* info, size_t, void* data) {
  const char* name = info->dlpi_name;
  if (!name || !strstr(name, "libcudart.so")) return 0;
  char* out = static_cast<char*>(data);
  size_t n = 0;
  for (; name[n] && n < kPathMax - 1; ++n) out[n] = name[n];
  out[n] = 0;
  return 1;
}

void* find_in_loaded_runtime(const char* symbol) {
  char path[kPathMax] = {};
  if (!dl_iterate_phdr(find_loaded_runtime, path)) return nullptr;
  void* handle = dlopen(path, RTLD_NOLOAD | RTLD_LAZY);
  if (!handle) {
    dlerror();
    return nullptr;
  }
  return real_dlsym()(handle, symbol);
}

}  // namespace

void* runtime_real_slow(RuntimeFn fn) {
  const int i = static_cast<int>(fn);
  void* p = real_dlsym()(RTLD_NEXT, kRuntimeNames[i]);
  if (!p) p = find_in_loaded_runtime(kRuntimeNames[i]);
  if (!p) return nullptr;
  void* expected = nullptr;
  g_runtime_real[i].compare_exchange_strong(expected, p, std::memory_order_acq_rel);
  return g_runtime_real[i].load(std::memory_order_acquire);
}

}  // namespace psc::interpose::cuda

using namespace psc::interpose::cuda;
using psc::Api;
using psc::MemoryKind;
using Guard = psc::rt::HookGuard;

#define PSC_HIDDEN extern "C" __attribute__((visibility("hidden")))

namespace {

void after_alloc(const Guard& guard, cudaError_t r, Api api, MemoryKind memory, void* address, uint64_t bytes,
                 int16_t device, uint64_t stream) {
  const AllocRecord record{api, memory, reinterpret_cast<uint64_t>(address), bytes, device, stream};
  if (r == cudaSuccess) {
    record_alloc(guard, record);
  } else {
    record_failed_alloc(guard, record);
  }
}

cudaError_t malloc_async(RuntimeFn fn, bool per_thread, void** out, size_t bytes, cudaStream_t stream) {
  using Fn = cudaError_t (*)(void**, size_t, cudaStream_t);
  Fn real = runtime_real<Fn>(fn);
  if (!real) return cudaErrorInitializationError;
  if (!psc::rt::enabled()) return real(out, bytes, stream);
  Guard guard;
  const cudaError_t r = real(out, bytes, stream);
  const int16_t device = runtime_device();
  after_alloc(guard, r, Api::kCudaMallocAsync, MemoryKind::kPool, out ? *out : nullptr, bytes, device,
              recorded_stream(stream, per_thread));
  if (r == cudaSuccess) note_pool_use(device, 0);
  return r;
}

cudaError_t malloc_from_pool(RuntimeFn fn, bool per_thread, void** out, size_t bytes, cudaMemPool_t pool,
                             cudaStream_t stream) {
  using Fn = cudaError_t (*)(void**, size_t, cudaMemPool_t, cudaStream_t);
  Fn real = runtime_real<Fn>(fn);
  if (!real) return cudaErrorInitializationError;
  if (!psc::rt::enabled()) return real(out, bytes, pool, stream);
  Guard guard;
  const cudaError_t r = real(out, bytes, pool, stream);
  const int16_t device = runtime_device();
  after_alloc(guard, r, Api::kCudaMallocFromPoolAsync, MemoryKind::kPool, out ? *out : nullptr, bytes, device,
              recorded_stream(stream, per_thread));
  if (r == cudaSuccess) note_pool_use(device, reinterpret_cast<uint64_t>(pool));
  return r;
}

cudaError_t free_async(RuntimeFn fn, bool per_thread, void* address, cudaStream_t stream) {
  using Fn = cudaError_t (*)(void*, cudaStream_t);
  Fn real = runtime_real<Fn>(fn);
  if (!real) return cudaErrorInitializationError;
  if (!address || !psc::rt::enabled()) return real(address, stream);
  Guard guard;
  record_free(guard, Api::kCudaFreeAsync, MemoryKind::kPool, reinterpret_cast<uint64_t>(address),
              recorded_stream(stream, per_thread), runtime_device);
  return real(address, stream);
}

// A free-style call with no stream: record, then forward.
cudaError_t free_plain(RuntimeFn fn, Api api, MemoryKind fallback, void* address) {
  using Fn = cudaError_t (*)(void*);
  Fn real = runtime_real<Fn>(fn);
  if (!real) return cudaErrorInitializationError;
  if (!address || !psc::rt::enabled()) return real(address);
  Guard guard;
  record_free(guard, api, fallback, reinterpret_cast<uint64_t>(address), 0, runtime_device);
  return real(address);
}

// cudaGetDriverEntryPoint*: the runtime's lookup answers; we swap the pointer.
void wrap_entry(cudaError_t r, const char* symbol, void** fn) {
  if (r == cudaSuccess && fn) *fn = wrap_driver_pointer(symbol, *fn);
}

}  // namespace

// ---- device memory ---------------------------------------------------------------

PSC_HIDDEN cudaError_t psc_cudaMalloc(void** out, size_t bytes) {
  using Fn = cudaError_t (*)(void**, size_t);
  Fn real = runtime_real<Fn>(RuntimeFn::kMalloc);
  if (!real) return cudaErrorInitializationError;
  if (!psc::rt::enabled()) return real(out, bytes);
  Guard guard;
  const cudaError_t r = real(out, bytes);
  if (r != cudaSuccess || (out && *out)) {  // cudaMalloc(0) succeeds with no memory
    after_alloc(guard, r, Api::kCudaMalloc, MemoryKind::kDevice, out ? *out : nullptr, bytes, runtime_device(), 0);
  }
  return r;
}
PSC_HIDDEN cudaError_t psc_cudaFree(void* address) {
  return free_plain(RuntimeFn::kFree, Api::kCudaFree, MemoryKind::kDevice, address);
}
PSC_HIDDEN cudaError_t psc_cudaMallocManaged(void** out, size_t bytes, unsigned int flags) {
  using Fn = cudaError_t (*)(void**, size_t, unsigned int);
  Fn real = runtime_real<Fn>(RuntimeFn::kMallocManaged);
  if (!real) return cudaErrorInitializationError;
  if (!psc::rt::enabled()) return real(out, bytes, flags);
  Guard guard;
  const cudaError_t r = real(out, bytes, flags);
  after_alloc(guard, r, Api::kCudaMallocManaged, MemoryKind::kManaged, out ? *out : nullptr, bytes, runtime_device(),
              0);
  return r;
}

// ---- stream-ordered allocation ---------------------------------------------------

PSC_HIDDEN cudaError_t psc_cudaMallocAsync(void** out, size_t bytes, cudaStream_t stream) {
  return malloc_async(RuntimeFn::kMallocAsync, false, out, bytes, stream);
}
PSC_HIDDEN cudaError_t psc_cudaMallocAsync_ptsz(void** out, size_t bytes, cudaStream_t stream) {
  return malloc_async(RuntimeFn::kMallocAsync_ptsz, true, out, bytes, stream);
}
PSC_HIDDEN cudaError_t psc_cudaMallocFromPoolAsync(void** out, size_t bytes, cudaMemPool_t pool, cudaStream_t stream) {
  return malloc_from_pool(RuntimeFn::kMallocFromPoolAsync, false, out, bytes, pool, stream);
}
PSC_HIDDEN cudaError_t psc_cudaMallocFromPoolAsync_ptsz(void** out, size_t bytes, cudaMemPool_t pool,
                                                        cudaStream_t stream) {
  return malloc_from_pool(RuntimeFn::kMallocFromPoolAsync_ptsz, true, out, bytes, pool, stream);
}
PSC_HIDDEN cudaError_t psc_cudaFreeAsync(void* address, cudaStream_t stream) {
  return free_async(RuntimeFn::kFreeAsync, false, address, stream);
}
PSC_HIDDEN cudaError_t psc_cudaFreeAsync_ptsz(void* address, cudaStream_t stream) {
  return free_async(RuntimeFn::kFreeAsync_ptsz, true, address, stream);
}

// ---- pinned host memory ----------------------------------------------------------

PSC_HIDDEN cudaError_t psc_cudaMallocHost(void** out, size_t bytes) {
  using Fn = cudaError_t (*)(void**, size_t);
  Fn real = runtime_real<Fn>(RuntimeFn::kMallocHost);
  if (!real) return cudaErrorInitializationError;
  if (!psc::rt::enabled()) return real(out, bytes);
  Guard guard;
  const cudaError_t r = real(out, bytes);
  after_alloc(guard, r, Api::kCudaMallocHost, MemoryKind::kPinnedHost, out ? *out : nullptr, bytes, -1, 0);
  return r;
}
PSC_HIDDEN cudaError_t psc_cudaHostAlloc(void** out, size_t bytes, unsigned int flags) {
  using Fn = cudaError_t (*)(void**, size_t, unsigned int);
  Fn real = runtime_real<Fn>(RuntimeFn::kHostAlloc);
  if (!real) return cudaErrorInitializationError;
  if (!psc::rt::enabled()) return real(out, bytes, flags);
  Guard guard;
  const cudaError_t r = real(out, bytes, flags);
  after_alloc(guard, r, Api::kCudaHostAlloc, MemoryKind::kPinnedHost, out ? *out : nullptr, bytes, -1, 0);
  return r;
}
PSC_HIDDEN cudaError_t psc_cudaFreeHost(void* address) {
  return free_plain(RuntimeFn::kFreeHost, Api::kCudaFreeHost, MemoryKind::kPinnedHost, address);
}
PSC_HIDDEN cudaError_t psc_cudaHostRegister(void* address, size_t bytes, unsigned int flags) {
  using Fn = cudaError_t (*)(void*, size_t, unsigned int);
  Fn real = runtime_real<Fn>(RuntimeFn::kHostRegister);
  if (!real) return cudaErrorInitializationError;
  if (!psc::rt::enabled()) return real(address, bytes, flags);
  Guard guard;
  const cudaError_t r = real(address, bytes, flags);
  after_alloc(guard, r, Api::kCudaHostRegister, MemoryKind::kRegisteredHost, address, bytes, -1, 0);
  return r;
}
PSC_HIDDEN cudaError_t psc_cudaHostUnregister(void* address) {
  return free_plain(RuntimeFn::kHostUnregister, Api::kCudaHostUnregister, MemoryKind::kRegisteredHost, address);
}

// ---- driver entry points ---------------------------------------------------------

PSC_HIDDEN cudaError_t psc_cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long flags,
                                                   cudaDriverEntryPointQueryResult* status) {
  using Fn = cudaError_t (*)(const char*, void**, unsigned long long, cudaDriverEntryPointQueryResult*);
  Fn real = runtime_real<Fn>(RuntimeFn::kGetDriverEntryPoint);
  if (!real) return cudaErrorInitializationError;
  Guard guard;
  const cudaError_t r = real(symbol, fn, flags, status);
  wrap_entry(r, symbol, fn);
  return r;
}
PSC_HIDDEN cudaError_t psc_cudaGetDriverEntryPoint_ptsz(const char* symbol, void** fn, unsigned long long flags,
                                                        cudaDriverEntryPointQueryResult* status) {
  using Fn = cudaError_t (*)(const char*, void**, unsigned long long, cudaDriverEntryPointQueryResult*);
  Fn real = runtime_real<Fn>(RuntimeFn::kGetDriverEntryPoint_ptsz);
  if (!real) return cudaErrorInitializationError;
  Guard guard;
  const cudaError_t r = real(symbol, fn, flags, status);
  wrap_entry(r, symbol, fn);
  return r;
}
PSC_HIDDEN cudaError_t psc_cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int version,
                                                            unsigned long long flags,
                                                            cudaDriverEntryPointQueryResult* status) {
  using Fn = cudaError_t (*)(const char*, void**, unsigned int, unsigned long long, cudaDriverEntryPointQueryResult*);
  Fn real = runtime_real<Fn>(RuntimeFn::kGetDriverEntryPointByVersion);
  if (!real) return cudaErrorInitializationError;
  Guard guard;
  const cudaError_t r = real(symbol, fn, version, flags, status);
  wrap_entry(r, symbol, fn);
  return r;
}
PSC_HIDDEN cudaError_t psc_cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** fn, unsigned int version,
                                                                 unsigned long long flags,
                                                                 cudaDriverEntryPointQueryResult* status) {
  using Fn = cudaError_t (*)(const char*, void**, unsigned int, unsigned long long, cudaDriverEntryPointQueryResult*);
  Fn real = runtime_real<Fn>(RuntimeFn::kGetDriverEntryPointByVersion_ptsz);
  if (!real) return cudaErrorInitializationError;
  Guard guard;
  const cudaError_t r = real(symbol, fn, version, flags, status);
  wrap_entry(r, symbol, fn);
  return r;
}

// ---- exports and the table ---------------------------------------------------------

#define PSC_RUNTIME_EXPORT(exported, internal) \
  extern "C" __attribute__((visibility("default"), alias(#internal), nothrow)) decltype(internal) exported;

PSC_RUNTIME_EXPORT(cudaMalloc, psc_cudaMalloc)
PSC_RUNTIME_EXPORT(cudaFree, psc_cudaFree)
PSC_RUNTIME_EXPORT(cudaMallocManaged, psc_cudaMallocManaged)
PSC_RUNTIME_EXPORT(cudaMallocAsync, psc_cudaMallocAsync)
PSC_RUNTIME_EXPORT(cudaMallocAsync_ptsz, psc_cudaMallocAsync_ptsz)
PSC_RUNTIME_EXPORT(cudaMallocFromPoolAsync, psc_cudaMallocFromPoolAsync)
PSC_RUNTIME_EXPORT(cudaMallocFromPoolAsync_ptsz, psc_cudaMallocFromPoolAsync_ptsz)
PSC_RUNTIME_EXPORT(cudaFreeAsync, psc_cudaFreeAsync)
PSC_RUNTIME_EXPORT(cudaFreeAsync_ptsz, psc_cudaFreeAsync_ptsz)
PSC_RUNTIME_EXPORT(cudaMallocHost, psc_cudaMallocHost)
PSC_RUNTIME_EXPORT(cudaHostAlloc, psc_cudaHostAlloc)
PSC_RUNTIME_EXPORT(cudaFreeHost, psc_cudaFreeHost)
PSC_RUNTIME_EXPORT(cudaHostRegister, psc_cudaHostRegister)
PSC_RUNTIME_EXPORT(cudaHostUnregister, psc_cudaHostUnregister)
PSC_RUNTIME_EXPORT(cudaGetDriverEntryPoint, psc_cudaGetDriverEntryPoint)
PSC_RUNTIME_EXPORT(cudaGetDriverEntryPoint_ptsz, psc_cudaGetDriverEntryPoint_ptsz)
PSC_RUNTIME_EXPORT(cudaGetDriverEntryPointByVersion, psc_cudaGetDriverEntryPointByVersion)
PSC_RUNTIME_EXPORT(cudaGetDriverEntryPointByVersion_ptsz, psc_cudaGetDriverEntryPointByVersion_ptsz)

namespace psc::interpose::cuda {
namespace {

#define PSC_HOOK_true(id) reinterpret_cast<void*>(&psc_cuda##id)
#define PSC_HOOK_false(id) nullptr
#define PSC_RUNTIME_HOOK(id, name, wrapped) PSC_HOOK_##wrapped(id),
void* const kRuntimeHooks[kRuntimeFnCount] = {PSC_RUNTIME_FUNCTIONS(PSC_RUNTIME_HOOK)};
#undef PSC_RUNTIME_HOOK
#undef PSC_HOOK_true
#undef PSC_HOOK_false

}  // namespace

void* wrap_runtime_symbol(const char* name, void* p) {
  for (int i = 0; i < kRuntimeFnCount; ++i) {
    if (!kRuntimeHooks[i] || strcmp(kRuntimeNames[i], name) != 0) continue;
    if (p == kRuntimeHooks[i]) return p;  // someone looked us up
    void* expected = nullptr;
    g_runtime_real[i].compare_exchange_strong(expected, p, std::memory_order_acq_rel);
    // A second runtime in the process: we forward to the first, so leave this one alone.
    return g_runtime_real[i].load(std::memory_order_acquire) == p ? kRuntimeHooks[i] : p;
  }
  return p;
}

}  // namespace psc::interpose::cuda
