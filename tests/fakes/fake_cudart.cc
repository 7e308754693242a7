// A test double of the CUDA runtime, built as libcudart.so.13 with the real
// library's symbol version (tests/fakes/libcudart.map), so programs linked
// against it reference `cudaMalloc@libcudart.so.13` exactly as they would the
// real one. Like the real runtime it loads the driver lazily with dlopen,
// looks up cuGetProcAddress_v2 with dlsym and reaches every other driver
// function through it; each runtime allocation becomes one driver call.
//
// It also carries what nvcc-generated host code needs (fat binary and kernel
// registration, launch configuration, __cudaLaunchKernel), so kernels built
// with nvcc "launch": nothing runs, the launch is validated and counted.
//
// Counts go to $FAKE_CUDART_COUNTS at exit (and kernel launches per kernel
// name); fake_cudart_count() answers in-process.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/fakes/fake_counts.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// clang-format off
#define FAKE_CUDART_COUNTERS(X) \
  X(cudaMalloc_calls, "cudaMalloc.calls")                                                       \
  X(cudaMalloc_bytes, "cudaMalloc.bytes")                                                       \
  X(cudaFree_calls, "cudaFree.calls")                                                           \
  X(cudaMallocAsync_calls, "cudaMallocAsync.calls")                                             \
  X(cudaMallocAsync_bytes, "cudaMallocAsync.bytes")                                             \
  X(cudaMallocAsync_ptsz_calls, "cudaMallocAsync_ptsz.calls")                                   \
  X(cudaMallocAsync_ptsz_bytes, "cudaMallocAsync_ptsz.bytes")                                   \
  X(cudaFreeAsync_calls, "cudaFreeAsync.calls")                                                 \
  X(cudaFreeAsync_ptsz_calls, "cudaFreeAsync_ptsz.calls")                                       \
  X(cudaMallocFromPoolAsync_calls, "cudaMallocFromPoolAsync.calls")                             \
  X(cudaMallocFromPoolAsync_bytes, "cudaMallocFromPoolAsync.bytes")                             \
  X(cudaMallocFromPoolAsync_ptsz_calls, "cudaMallocFromPoolAsync_ptsz.calls")                   \
  X(cudaMallocFromPoolAsync_ptsz_bytes, "cudaMallocFromPoolAsync_ptsz.bytes")                   \
  X(cudaMallocManaged_calls, "cudaMallocManaged.calls")                                         \
  X(cudaMallocManaged_bytes, "cudaMallocManaged.bytes")                                         \
  X(cudaMallocHost_calls, "cudaMallocHost.calls")                                               \
  X(cudaMallocHost_bytes, "cudaMallocHost.bytes")                                               \
  X(cudaHostAlloc_calls, "cudaHostAlloc.calls")                                                 \
  X(cudaHostAlloc_bytes, "cudaHostAlloc.bytes")                                                 \
  X(cudaFreeHost_calls, "cudaFreeHost.calls")                                                   \
  X(cudaHostRegister_calls, "cudaHostRegister.calls")                                           \
  X(cudaHostRegister_bytes, "cudaHostRegister.bytes")                                           \
  X(cudaHostUnregister_calls, "cudaHostUnregister.calls")                                       \
  X(cudaGetDriverEntryPoint_calls, "cudaGetDriverEntryPoint.calls")                             \
  X(cudaGetDriverEntryPoint_ptsz_calls, "cudaGetDriverEntryPoint_ptsz.calls")                   \
  X(cudaGetDriverEntryPointByVersion_calls, "cudaGetDriverEntryPointByVersion.calls")           \
  X(cudaGetDriverEntryPointByVersion_ptsz_calls, "cudaGetDriverEntryPointByVersion_ptsz.calls") \
  X(driver_loads, "driver_loads")                                                               \
  X(fatbins, "fatbins")                                                                         \
  X(bad_fatbins, "bad_fatbins")                                                                 \
  X(functions, "functions")                                                                     \
  X(launches, "launches")                                                                       \
  X(bad_launches, "bad_launches")
// clang-format on

enum Counter {
#define FAKE_ENUM(id, name) k_##id,
  FAKE_CUDART_COUNTERS(FAKE_ENUM)
#undef FAKE_ENUM
      kCounterCount
};
const char* const kCountNames[kCounterCount] = {
#define FAKE_NAME(id, name) name,
    FAKE_CUDART_COUNTERS(FAKE_NAME)
#undef FAKE_NAME
};
fake::Counts<kCounterCount> g_counts(kCountNames);
pid_t g_first_pid = getpid();

// ---- the driver, reached the way the real runtime reaches it ----------------------

using GetProcFn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

struct Driver {
  GetProcFn get_proc;
  CUresult (*init)(unsigned int);
  CUresult (*device_get_count)(int*);
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice);
  CUresult (*ctx_set_current)(CUcontext);
  CUresult (*ctx_synchronize)();
  CUresult (*stream_create)(CUstream*, unsigned int);
  CUresult (*stream_destroy)(CUstream);
  CUresult (*stream_synchronize)(CUstream);
  CUresult (*mem_get_info)(size_t*, size_t*);
  CUresult (*mem_alloc)(CUdeviceptr*, size_t);
  CUresult (*mem_free)(CUdeviceptr);
  CUresult (*mem_alloc_async)(CUdeviceptr*, size_t, CUstream);
  CUresult (*mem_alloc_async_ptsz)(CUdeviceptr*, size_t, CUstream);
  CUresult (*mem_free_async)(CUdeviceptr, CUstream);
  CUresult (*mem_free_async_ptsz)(CUdeviceptr, CUstream);
  CUresult (*mem_alloc_from_pool_async)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
  CUresult (*mem_alloc_from_pool_async_ptsz)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
  CUresult (*mem_alloc_managed)(CUdeviceptr*, size_t, unsigned int);
  CUresult (*mem_alloc_host)(void**, size_t);
  CUresult (*mem_host_alloc)(void**, size_t, unsigned int);
  CUresult (*mem_free_host)(void*);
  CUresult (*mem_host_register)(void*, size_t, unsigned int);
  CUresult (*mem_host_unregister)(void*);
  CUresult (*device_get_default_mem_pool)(CUmemoryPool*, CUdevice);
  CUresult (*device_get_mem_pool)(CUmemoryPool*, CUdevice);
  CUresult (*device_set_mem_pool)(CUdevice, CUmemoryPool);
  CUresult (*mem_pool_create)(CUmemoryPool*, const CUmemPoolProps*);
  CUresult (*mem_pool_destroy)(CUmemoryPool);
  CUresult (*mem_pool_get_attribute)(CUmemoryPool, CUmemPool_attribute, void*);
  CUresult (*mem_pool_set_attribute)(CUmemoryPool, CUmemPool_attribute, void*);
  CUresult (*mem_pool_trim_to)(CUmemoryPool, size_t);
};

Driver g_driver;
cudaError_t g_init_error = cudaSuccess;
std::once_flag g_init_once;
int g_device_count = 0;

thread_local int t_device = 0;
thread_local bool t_context_set = false;
thread_local cudaError_t t_last_error = cudaSuccess;

template <typename Fn>
bool resolve(Fn* out, const char* symbol, cuuint64_t flags = CU_GET_PROC_ADDRESS_DEFAULT) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult status;
  if (g_driver.get_proc(symbol, &p, CUDART_VERSION, flags, &status) != CUDA_SUCCESS || !p) {
    fprintf(stderr, "fake libcudart: driver lookup of %s failed (status %d)\n", symbol, static_cast<int>(status));
    return false;
  }
  *out = reinterpret_cast<Fn>(p);
  return true;
}

void load_driver() {
  g_counts.add(k_driver_loads);
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    g_init_error = cudaErrorInsufficientDriver;
    return;
  }
  g_driver.get_proc = reinterpret_cast<GetProcFn>(dlsym(handle, "cuGetProcAddress_v2"));
  if (!g_driver.get_proc) {
    g_init_error = cudaErrorInsufficientDriver;
    return;
  }
  Driver& d = g_driver;
  const cuuint64_t ptds = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  bool ok =
      resolve(&d.init, "cuInit") && resolve(&d.device_get_count, "cuDeviceGetCount") &&
      resolve(&d.primary_ctx_retain, "cuDevicePrimaryCtxRetain") && resolve(&d.ctx_set_current, "cuCtxSetCurrent") &&
      resolve(&d.ctx_synchronize, "cuCtxSynchronize") && resolve(&d.stream_create, "cuStreamCreate") &&
      resolve(&d.stream_destroy, "cuStreamDestroy") && resolve(&d.stream_synchronize, "cuStreamSynchronize") &&
      resolve(&d.mem_get_info, "cuMemGetInfo") && resolve(&d.mem_alloc, "cuMemAlloc") &&
      resolve(&d.mem_free, "cuMemFree") && resolve(&d.mem_alloc_async, "cuMemAllocAsync") &&
      resolve(&d.mem_alloc_async_ptsz, "cuMemAllocAsync", ptds) && resolve(&d.mem_free_async, "cuMemFreeAsync") &&
      resolve(&d.mem_free_async_ptsz, "cuMemFreeAsync", ptds) &&
      resolve(&d.mem_alloc_from_pool_async, "cuMemAllocFromPoolAsync") &&
      resolve(&d.mem_alloc_from_pool_async_ptsz, "cuMemAllocFromPoolAsync", ptds) &&
      resolve(&d.mem_alloc_managed, "cuMemAllocManaged") && resolve(&d.mem_alloc_host, "cuMemAllocHost") &&
      resolve(&d.mem_host_alloc, "cuMemHostAlloc") && resolve(&d.mem_free_host, "cuMemFreeHost") &&
      resolve(&d.mem_host_register, "cuMemHostRegister") && resolve(&d.mem_host_unregister, "cuMemHostUnregister") &&
      resolve(&d.device_get_default_mem_pool, "cuDeviceGetDefaultMemPool") &&
      resolve(&d.device_get_mem_pool, "cuDeviceGetMemPool") && resolve(&d.device_set_mem_pool, "cuDeviceSetMemPool") &&
      resolve(&d.mem_pool_create, "cuMemPoolCreate") && resolve(&d.mem_pool_destroy, "cuMemPoolDestroy") &&
      resolve(&d.mem_pool_get_attribute, "cuMemPoolGetAttribute") &&
      resolve(&d.mem_pool_set_attribute, "cuMemPoolSetAttribute") && resolve(&d.mem_pool_trim_to, "cuMemPoolTrimTo");
  if (!ok || d.init(0) != CUDA_SUCCESS || d.device_get_count(&g_device_count) != CUDA_SUCCESS) {
    g_init_error = cudaErrorInitializationError;
  }
}

// The driver's codes and the runtime's agree for everything this double returns.
cudaError_t to_runtime(CUresult r) { return static_cast<cudaError_t>(r); }

cudaError_t fail(cudaError_t e) {
  if (e != cudaSuccess) t_last_error = e;
  return e;
}

// Loads the driver once and makes the thread's device current, as the runtime does lazily.
cudaError_t ready() {
  std::call_once(g_init_once, load_driver);
  if (g_init_error != cudaSuccess) return fail(g_init_error);
  if (!t_context_set) {
    CUcontext ctx;
    CUresult r = g_driver.primary_ctx_retain(&ctx, t_device);
    if (r == CUDA_SUCCESS) r = g_driver.ctx_set_current(ctx);
    if (r != CUDA_SUCCESS) return fail(to_runtime(r));
    t_context_set = true;
  }
  return cudaSuccess;
}

#define READY()                                                 \
  do {                                                          \
    if (cudaError_t e_ = ready(); e_ != cudaSuccess) return e_; \
  } while (0)

cudaError_t check(CUresult r) { return fail(to_runtime(r)); }

// ---- kernels -------------------------------------------------------------------

constexpr int kFatbinMagic = 0x466243b1;  // __fatBinC_Wrapper_t::magic
struct FatbinWrapper {
  int magic;
  int version;
  const unsigned long long* data;
  void* filename_or_fatbins;
};
struct LaunchConfig {
  dim3 grid, block;
  size_t shared;
  void* stream;
};

std::mutex g_kernel_mutex;
std::map<const void*, std::string> g_kernels;  // host stub -> device function name
std::map<std::string, uint64_t> g_launches;    // kernel name -> launches
thread_local std::vector<LaunchConfig> t_configs;

cudaError_t launch(const void* host_stub, dim3 grid, dim3 block) {
  std::lock_guard<std::mutex> lock(g_kernel_mutex);
  auto it = g_kernels.find(host_stub);
  if (it == g_kernels.end() || grid.x == 0 || block.x == 0 || block.x * block.y * block.z > 1024) {
    g_counts.add(k_bad_launches);
    return fail(it == g_kernels.end() ? cudaErrorInvalidDeviceFunction : cudaErrorInvalidConfiguration);
  }
  g_counts.add(k_launches);
  ++g_launches[it->second];
  return cudaSuccess;
}

void dump_launches() {
  const char* path = getenv("FAKE_CUDART_COUNTS");
  if (!path || !*path) return;
  std::string file = path;
  const char* primary = getenv("FAKE_PRIMARY_PID");
  const pid_t first = primary && *primary ? static_cast<pid_t>(atol(primary)) : g_first_pid;
  if (getpid() != first) file += "." + std::to_string(getpid());
  FILE* f = fopen(file.c_str(), "a");
  if (!f) return;
  std::lock_guard<std::mutex> lock(g_kernel_mutex);
  for (auto& [name, n] : g_launches) fprintf(f, "launch.%s %llu\n", name.c_str(), static_cast<unsigned long long>(n));
  fclose(f);
}

void reset_in_child() {
  g_first_pid = -1;
  g_counts.clear();
}

__attribute__((constructor)) void fake_cudart_start() { pthread_atfork(nullptr, nullptr, reset_in_child); }
__attribute__((destructor)) void fake_cudart_stop() {
  g_counts.dump("FAKE_CUDART_COUNTS", g_first_pid);
  dump_launches();
}

// cudaGetDriverEntryPoint* all become one driver lookup at a CUDA version.
cudaError_t entry_point(const char* symbol, void** fn, unsigned int version, unsigned long long flags,
                        cudaDriverEntryPointQueryResult* status) {
  READY();
  CUdriverProcAddressQueryResult driver_status = CU_GET_PROC_ADDRESS_SUCCESS;
  const CUresult r = g_driver.get_proc(symbol, fn, static_cast<int>(version), flags, &driver_status);
  if (status) *status = static_cast<cudaDriverEntryPointQueryResult>(driver_status);
  return check(r);
}

}  // namespace

// ---- devices, streams, errors ----------------------------------------------------

FAKE_EXPORT cudaError_t cudaGetDeviceCount(int* count) {
  std::call_once(g_init_once, load_driver);
  if (g_init_error != cudaSuccess) return fail(g_init_error);
  *count = g_device_count;
  return cudaSuccess;
}
FAKE_EXPORT cudaError_t cudaSetDevice(int device) {
  std::call_once(g_init_once, load_driver);
  if (g_init_error != cudaSuccess) return fail(g_init_error);
  if (device < 0 || device >= g_device_count) return fail(cudaErrorInvalidDevice);
  t_device = device;
  t_context_set = false;
  return ready();
}
FAKE_EXPORT cudaError_t cudaGetDevice(int* device) {
  *device = t_device;
  return cudaSuccess;
}
FAKE_EXPORT cudaError_t cudaDeviceSynchronize() {
  READY();
  return check(g_driver.ctx_synchronize());
}
FAKE_EXPORT cudaError_t cudaDeviceReset() { return cudaSuccess; }
FAKE_EXPORT cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  READY();
  return check(g_driver.stream_create(stream, 0));
}
FAKE_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  READY();
  return check(g_driver.stream_create(stream, flags));
}
FAKE_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  READY();
  return check(g_driver.stream_destroy(stream));
}
FAKE_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  READY();
  return check(g_driver.stream_synchronize(stream));
}
FAKE_EXPORT cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  READY();
  return check(g_driver.mem_get_info(free_bytes, total_bytes));
}
FAKE_EXPORT cudaError_t cudaGetLastError() {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}
FAKE_EXPORT cudaError_t cudaPeekAtLastError() { return t_last_error; }
FAKE_EXPORT const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "fake runtime error";
}
FAKE_EXPORT const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorFake"; }
FAKE_EXPORT cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}
FAKE_EXPORT cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

// ---- memory ------------------------------------------------------------------------

FAKE_EXPORT cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  g_counts.add(k_cudaMalloc_calls);
  g_counts.add(k_cudaMalloc_bytes, bytes);
  READY();
  if (!ptr) return fail(cudaErrorInvalidValue);
  if (bytes == 0) {
    *ptr = nullptr;
    return cudaSuccess;
  }
  return check(g_driver.mem_alloc(reinterpret_cast<CUdeviceptr*>(ptr), bytes));
}
FAKE_EXPORT cudaError_t cudaFree(void* ptr) {
  g_counts.add(k_cudaFree_calls);
  READY();
  return ptr ? check(g_driver.mem_free(reinterpret_cast<CUdeviceptr>(ptr))) : cudaSuccess;
}
FAKE_EXPORT cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream) {
  g_counts.add(k_cudaMallocAsync_calls);
  g_counts.add(k_cudaMallocAsync_bytes, bytes);
  READY();
  return check(g_driver.mem_alloc_async(reinterpret_cast<CUdeviceptr*>(ptr), bytes, stream));
}
FAKE_EXPORT cudaError_t cudaMallocAsync_ptsz(void** ptr, size_t bytes, cudaStream_t stream) {
  g_counts.add(k_cudaMallocAsync_ptsz_calls);
  g_counts.add(k_cudaMallocAsync_ptsz_bytes, bytes);
  READY();
  return check(g_driver.mem_alloc_async_ptsz(reinterpret_cast<CUdeviceptr*>(ptr), bytes, stream));
}
FAKE_EXPORT cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  g_counts.add(k_cudaFreeAsync_calls);
  READY();
  return check(g_driver.mem_free_async(reinterpret_cast<CUdeviceptr>(ptr), stream));
}
FAKE_EXPORT cudaError_t cudaFreeAsync_ptsz(void* ptr, cudaStream_t stream) {
  g_counts.add(k_cudaFreeAsync_ptsz_calls);
  READY();
  return check(g_driver.mem_free_async_ptsz(reinterpret_cast<CUdeviceptr>(ptr), stream));
}
FAKE_EXPORT cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t bytes, cudaMemPool_t pool, cudaStream_t stream) {
  g_counts.add(k_cudaMallocFromPoolAsync_calls);
  g_counts.add(k_cudaMallocFromPoolAsync_bytes, bytes);
  READY();
  return check(g_driver.mem_alloc_from_pool_async(reinterpret_cast<CUdeviceptr*>(ptr), bytes, pool, stream));
}
FAKE_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t bytes, cudaMemPool_t pool,
                                                     cudaStream_t stream) {
  g_counts.add(k_cudaMallocFromPoolAsync_ptsz_calls);
  g_counts.add(k_cudaMallocFromPoolAsync_ptsz_bytes, bytes);
  READY();
  return check(g_driver.mem_alloc_from_pool_async_ptsz(reinterpret_cast<CUdeviceptr*>(ptr), bytes, pool, stream));
}
FAKE_EXPORT cudaError_t cudaMallocManaged(void** ptr, size_t bytes, unsigned int flags) {
  g_counts.add(k_cudaMallocManaged_calls);
  g_counts.add(k_cudaMallocManaged_bytes, bytes);
  READY();
  return check(g_driver.mem_alloc_managed(reinterpret_cast<CUdeviceptr*>(ptr), bytes, flags));
}
FAKE_EXPORT cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  g_counts.add(k_cudaMallocHost_calls);
  g_counts.add(k_cudaMallocHost_bytes, bytes);
  READY();
  return check(g_driver.mem_alloc_host(ptr, bytes));
}
FAKE_EXPORT cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int flags) {
  g_counts.add(k_cudaHostAlloc_calls);
  g_counts.add(k_cudaHostAlloc_bytes, bytes);
  READY();
  return check(g_driver.mem_host_alloc(ptr, bytes, flags));
}
FAKE_EXPORT cudaError_t cudaFreeHost(void* ptr) {
  g_counts.add(k_cudaFreeHost_calls);
  READY();
  return check(g_driver.mem_free_host(ptr));
}
FAKE_EXPORT cudaError_t cudaHostRegister(void* ptr, size_t bytes, unsigned int flags) {
  g_counts.add(k_cudaHostRegister_calls);
  g_counts.add(k_cudaHostRegister_bytes, bytes);
  READY();
  return check(g_driver.mem_host_register(ptr, bytes, flags));
}
FAKE_EXPORT cudaError_t cudaHostUnregister(void* ptr) {
  g_counts.add(k_cudaHostUnregister_calls);
  READY();
  return check(g_driver.mem_host_unregister(ptr));
}
// Device memory is a number here: copies that touch it move nothing.
FAKE_EXPORT cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  READY();
  if (kind == cudaMemcpyHostToHost) memcpy(dst, src, bytes);
  return cudaSuccess;
}
FAKE_EXPORT cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, kind);
}
FAKE_EXPORT cudaError_t cudaMemset(void*, int, size_t) {
  READY();
  return cudaSuccess;
}
FAKE_EXPORT cudaError_t cudaMemsetAsync(void*, int, size_t, cudaStream_t) {
  READY();
  return cudaSuccess;
}

// ---- pools -----------------------------------------------------------------------

FAKE_EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  READY();
  return check(g_driver.device_get_default_mem_pool(pool, device));
}
FAKE_EXPORT cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* pool, int device) {
  READY();
  return check(g_driver.device_get_mem_pool(pool, device));
}
FAKE_EXPORT cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool) {
  READY();
  return check(g_driver.device_set_mem_pool(device, pool));
}
FAKE_EXPORT cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
  READY();
  CUmemPoolProps p{};
  p.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type =
      props->location.type == cudaMemLocationTypeDevice ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_INVALID;
  p.location.id = props->location.id;
  return check(g_driver.mem_pool_create(pool, &p));
}
FAKE_EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  READY();
  return check(g_driver.mem_pool_destroy(pool));
}
// cudaMemPoolAttr and CUmemPool_attribute number their members alike.
FAKE_EXPORT cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  READY();
  return check(g_driver.mem_pool_get_attribute(pool, static_cast<CUmemPool_attribute>(attr), value));
}
FAKE_EXPORT cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  READY();
  return check(g_driver.mem_pool_set_attribute(pool, static_cast<CUmemPool_attribute>(attr), value));
}
FAKE_EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep) {
  READY();
  return check(g_driver.mem_pool_trim_to(pool, keep));
}

// ---- driver entry points -----------------------------------------------------------

FAKE_EXPORT cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long flags,
                                                cudaDriverEntryPointQueryResult* status) {
  g_counts.add(k_cudaGetDriverEntryPoint_calls);
  return entry_point(symbol, fn, CUDART_VERSION, flags, status);
}
FAKE_EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** fn, unsigned long long flags,
                                                     cudaDriverEntryPointQueryResult* status) {
  g_counts.add(k_cudaGetDriverEntryPoint_ptsz_calls);
  if (flags == cudaEnableDefault) flags = cudaEnablePerThreadDefaultStream;
  return entry_point(symbol, fn, CUDART_VERSION, flags, status);
}
FAKE_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int version,
                                                         unsigned long long flags,
                                                         cudaDriverEntryPointQueryResult* status) {
  g_counts.add(k_cudaGetDriverEntryPointByVersion_calls);
  return entry_point(symbol, fn, version, flags, status);
}
FAKE_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** fn, unsigned int version,
                                                              unsigned long long flags,
                                                              cudaDriverEntryPointQueryResult* status) {
  g_counts.add(k_cudaGetDriverEntryPointByVersion_ptsz_calls);
  if (flags == cudaEnableDefault) flags = cudaEnablePerThreadDefaultStream;
  return entry_point(symbol, fn, version, flags, status);
}

// ---- what nvcc-generated host code calls -----------------------------------------

FAKE_EXPORT void** __cudaRegisterFatBinary(void* fat_cubin) {
  const FatbinWrapper* w = static_cast<const FatbinWrapper*>(fat_cubin);
  g_counts.add(w && w->magic == kFatbinMagic && w->data ? k_fatbins : k_bad_fatbins);
  void** handle = static_cast<void**>(calloc(1, sizeof(void*)));
  *handle = fat_cubin;
  return handle;
}
FAKE_EXPORT void __cudaRegisterFatBinaryEnd(void**) {}
FAKE_EXPORT void __cudaUnregisterFatBinary(void** handle) { free(handle); }
FAKE_EXPORT void __cudaRegisterFunction(void**, const char* host_stub, char*, const char* device_name, int, uint3*,
                                        uint3*, dim3*, dim3*, int*) {
  std::lock_guard<std::mutex> lock(g_kernel_mutex);
  g_kernels[host_stub] = device_name;
  g_counts.add(k_functions);
}
FAKE_EXPORT void __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int) {}
FAKE_EXPORT void __cudaRegisterManagedVar(void**, void**, char*, const char*, int, size_t, int, int) {}
FAKE_EXPORT char __cudaInitModule(void**) { return 1; }
FAKE_EXPORT unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared, void* stream) {
  t_configs.push_back(LaunchConfig{grid, block, shared, stream});
  return 0;
}
FAKE_EXPORT cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared, void* stream) {
  if (t_configs.empty()) return cudaErrorMissingConfiguration;
  const LaunchConfig c = t_configs.back();
  t_configs.pop_back();
  *grid = c.grid;
  *block = c.block;
  *shared = c.shared;
  *static_cast<void**>(stream) = c.stream;
  return cudaSuccess;
}
// A kernel handle is the host stub's address: launches look the stub up again.
FAKE_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* host_stub) {
  std::lock_guard<std::mutex> lock(g_kernel_mutex);
  if (!g_kernels.count(host_stub)) return cudaErrorInvalidDeviceFunction;
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(host_stub));
  return cudaSuccess;
}
FAKE_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void**, size_t, cudaStream_t) {
  READY();
  return launch(kernel, grid, block);
}
FAKE_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void**, size_t,
                                                cudaStream_t) {
  READY();
  return launch(kernel, grid, block);
}
FAKE_EXPORT cudaError_t cudaLaunchKernel(const void* host_stub, dim3 grid, dim3 block, void**, size_t, cudaStream_t) {
  READY();
  return launch(host_stub, grid, block);
}

FAKE_EXPORT long long fake_cudart_count(const char* name) { return g_counts.find(name); }
