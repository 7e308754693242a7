// Driver API wrappers: the functions cuGetProcAddress hands out in place of
// the driver's, also exported under the driver's names (for programs linked
// against libcuda.so.1). Each forwards to exactly the driver function it
// stands for (kDriverEntries: the _ptsz variants have their own wrappers).
//
// Recording follows the design: an allocation after the real call returns, a
// free before the real free. Called inside a hooked runtime call (cudaMalloc
// -> cuMemAlloc_v2) the event carries kFlagNested and analysis counts the
// outer one. cuMemAddressReserve is address space, not memory: not hooked.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "interpose/cuda_hooks.h"

namespace psc::interpose::cuda {
namespace {

using Guard = rt::HookGuard;

int16_t device_of_location(const CUmemLocation& location) {
  return location.type == CU_MEM_LOCATION_TYPE_DEVICE ? static_cast<int16_t>(location.id) : int16_t{-1};
}

void after_alloc(const Guard& guard, CUresult r, Api api, MemoryKind memory, uint64_t address, uint64_t bytes,
                 int16_t device, uint64_t stream) {
  const AllocRecord record{api, memory, address, bytes, device, stream};
  if (r == CUDA_SUCCESS) {
    record_alloc(guard, record);
  } else {
    record_failed_alloc(guard, record);
  }
}

// cuMemAllocAsync and cuMemAllocAsync_ptsz differ only in the function they forward to.
CUresult alloc_async(DriverFn fn, bool per_thread, CUdeviceptr* out, size_t bytes, CUstream stream) {
  using Fn = CUresult (*)(CUdeviceptr*, size_t, CUstream);
  Fn real = driver_real<Fn>(fn);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!rt::enabled()) return real(out, bytes, stream);
  Guard guard;
  const CUresult r = real(out, bytes, stream);
  const int16_t device = driver_device();
  after_alloc(guard, r, Api::kCuMemAllocAsync, MemoryKind::kPool, out ? *out : 0, bytes, device,
              recorded_stream(stream, per_thread));
  if (r == CUDA_SUCCESS) note_pool_use(device, 0);
  return r;
}

CUresult alloc_from_pool(DriverFn fn, bool per_thread, CUdeviceptr* out, size_t bytes, CUmemoryPool pool,
                         CUstream stream) {
  using Fn = CUresult (*)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
  Fn real = driver_real<Fn>(fn);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!rt::enabled()) return real(out, bytes, pool, stream);
  Guard guard;
  const CUresult r = real(out, bytes, pool, stream);
  const int16_t device = driver_device();
  after_alloc(guard, r, Api::kCuMemAllocFromPoolAsync, MemoryKind::kPool, out ? *out : 0, bytes, device,
              recorded_stream(stream, per_thread));
  if (r == CUDA_SUCCESS) note_pool_use(device, reinterpret_cast<uint64_t>(pool));
  return r;
}

CUresult free_async(DriverFn fn, bool per_thread, CUdeviceptr address, CUstream stream) {
  using Fn = CUresult (*)(CUdeviceptr, CUstream);
  Fn real = driver_real<Fn>(fn);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!address || !rt::enabled()) return real(address, stream);
  Guard guard;
  record_free(guard, Api::kCuMemFreeAsync, MemoryKind::kPool, address, recorded_stream(stream, per_thread),
              driver_device);
  return real(address, stream);
}

}  // namespace
}  // namespace psc::interpose::cuda

using namespace psc::interpose::cuda;
using psc::Api;
using psc::MemoryKind;

#define PSC_HIDDEN extern "C" __attribute__((visibility("hidden")))

// ---- initialisation ----------------------------------------------------------------

// The first point where a process is known to use CUDA, before any context
// exists: the CUPTI backend starts here (as an injection library would), so
// it sees the primary context's creation and every module load.
PSC_HIDDEN CUresult psc_cuInit(unsigned int flags) {
  using Fn = CUresult (*)(unsigned int);
  Fn real = driver_real<Fn>(DriverFn::kInit);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult r = real(flags);
  if (r == CUDA_SUCCESS && psc::rt::enabled()) after_cu_init();
  return r;
}

// ---- device memory ---------------------------------------------------------------

PSC_HIDDEN CUresult psc_cuMemAlloc_v2(CUdeviceptr* out, size_t bytes) {
  using Fn = CUresult (*)(CUdeviceptr*, size_t);
  Fn real = driver_real<Fn>(DriverFn::kMemAlloc_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!psc::rt::enabled()) return real(out, bytes);
  psc::rt::HookGuard guard;
  const CUresult r = real(out, bytes);
  after_alloc(guard, r, Api::kCuMemAlloc, MemoryKind::kDevice, out ? *out : 0, bytes, driver_device(), 0);
  return r;
}

PSC_HIDDEN CUresult psc_cuMemFree_v2(CUdeviceptr address) {
  using Fn = CUresult (*)(CUdeviceptr);
  Fn real = driver_real<Fn>(DriverFn::kMemFree_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!address || !psc::rt::enabled()) return real(address);
  psc::rt::HookGuard guard;
  record_free(guard, Api::kCuMemFree, MemoryKind::kDevice, address, 0, driver_device);
  return real(address);
}

PSC_HIDDEN CUresult psc_cuMemAllocManaged(CUdeviceptr* out, size_t bytes, unsigned int flags) {
  using Fn = CUresult (*)(CUdeviceptr*, size_t, unsigned int);
  Fn real = driver_real<Fn>(DriverFn::kMemAllocManaged);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!psc::rt::enabled()) return real(out, bytes, flags);
  psc::rt::HookGuard guard;
  const CUresult r = real(out, bytes, flags);
  after_alloc(guard, r, Api::kCuMemAllocManaged, MemoryKind::kManaged, out ? *out : 0, bytes, driver_device(), 0);
  return r;
}

// ---- stream-ordered allocation ---------------------------------------------------

PSC_HIDDEN CUresult psc_cuMemAllocAsync(CUdeviceptr* out, size_t bytes, CUstream stream) {
  return alloc_async(DriverFn::kMemAllocAsync, false, out, bytes, stream);
}
PSC_HIDDEN CUresult psc_cuMemAllocAsync_ptsz(CUdeviceptr* out, size_t bytes, CUstream stream) {
  return alloc_async(DriverFn::kMemAllocAsync_ptsz, true, out, bytes, stream);
}
PSC_HIDDEN CUresult psc_cuMemAllocFromPoolAsync(CUdeviceptr* out, size_t bytes, CUmemoryPool pool, CUstream stream) {
  return alloc_from_pool(DriverFn::kMemAllocFromPoolAsync, false, out, bytes, pool, stream);
}
PSC_HIDDEN CUresult psc_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* out, size_t bytes, CUmemoryPool pool,
                                                     CUstream stream) {
  return alloc_from_pool(DriverFn::kMemAllocFromPoolAsync_ptsz, true, out, bytes, pool, stream);
}
PSC_HIDDEN CUresult psc_cuMemFreeAsync(CUdeviceptr address, CUstream stream) {
  return free_async(DriverFn::kMemFreeAsync, false, address, stream);
}
PSC_HIDDEN CUresult psc_cuMemFreeAsync_ptsz(CUdeviceptr address, CUstream stream) {
  return free_async(DriverFn::kMemFreeAsync_ptsz, true, address, stream);
}

// ---- pinned host memory ----------------------------------------------------------

PSC_HIDDEN CUresult psc_cuMemAllocHost_v2(void** out, size_t bytes) {
  using Fn = CUresult (*)(void**, size_t);
  Fn real = driver_real<Fn>(DriverFn::kMemAllocHost_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!psc::rt::enabled()) return real(out, bytes);
  psc::rt::HookGuard guard;
  const CUresult r = real(out, bytes);
  after_alloc(guard, r, Api::kCuMemAllocHost, MemoryKind::kPinnedHost, out ? reinterpret_cast<uint64_t>(*out) : 0,
              bytes, -1, 0);
  return r;
}
PSC_HIDDEN CUresult psc_cuMemHostAlloc(void** out, size_t bytes, unsigned int flags) {
  using Fn = CUresult (*)(void**, size_t, unsigned int);
  Fn real = driver_real<Fn>(DriverFn::kMemHostAlloc);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!psc::rt::enabled()) return real(out, bytes, flags);
  psc::rt::HookGuard guard;
  const CUresult r = real(out, bytes, flags);
  after_alloc(guard, r, Api::kCuMemHostAlloc, MemoryKind::kPinnedHost, out ? reinterpret_cast<uint64_t>(*out) : 0,
              bytes, -1, 0);
  return r;
}
PSC_HIDDEN CUresult psc_cuMemFreeHost(void* p) {
  using Fn = CUresult (*)(void*);
  Fn real = driver_real<Fn>(DriverFn::kMemFreeHost);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!p || !psc::rt::enabled()) return real(p);
  psc::rt::HookGuard guard;
  record_free(guard, Api::kCuMemFreeHost, MemoryKind::kPinnedHost, reinterpret_cast<uint64_t>(p), 0, driver_device);
  return real(p);
}
// Registration pins memory the application already has (MemoryKind::kRegisteredHost).
PSC_HIDDEN CUresult psc_cuMemHostRegister_v2(void* p, size_t bytes, unsigned int flags) {
  using Fn = CUresult (*)(void*, size_t, unsigned int);
  Fn real = driver_real<Fn>(DriverFn::kMemHostRegister_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!psc::rt::enabled()) return real(p, bytes, flags);
  psc::rt::HookGuard guard;
  const CUresult r = real(p, bytes, flags);
  after_alloc(guard, r, Api::kCuMemHostRegister, MemoryKind::kRegisteredHost, reinterpret_cast<uint64_t>(p), bytes, -1,
              0);
  return r;
}
PSC_HIDDEN CUresult psc_cuMemHostUnregister(void* p) {
  using Fn = CUresult (*)(void*);
  Fn real = driver_real<Fn>(DriverFn::kMemHostUnregister);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!p || !psc::rt::enabled()) return real(p);
  psc::rt::HookGuard guard;
  record_free(guard, Api::kCuMemHostUnregister, MemoryKind::kRegisteredHost, reinterpret_cast<uint64_t>(p), 0,
              driver_device);
  return real(p);
}

// ---- virtual memory management ------------------------------------------------------

PSC_HIDDEN CUresult psc_cuMemCreate(CUmemGenericAllocationHandle* handle, size_t bytes, const CUmemAllocationProp* prop,
                                    unsigned long long flags) {
  using Fn = CUresult (*)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long);
  Fn real = driver_real<Fn>(DriverFn::kMemCreate);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!psc::rt::enabled()) return real(handle, bytes, prop, flags);
  psc::rt::HookGuard guard;
  const CUresult r = real(handle, bytes, prop, flags);
  const int16_t device = prop ? device_of_location(prop->location) : driver_device();
  if (r == CUDA_SUCCESS) {
    vmm_created(guard, *handle, bytes, device);
  } else {
    record_failed_alloc(guard, AllocRecord{Api::kCuMemCreate, MemoryKind::kVmmPhysical, 0, bytes, device, 0});
  }
  return r;
}
PSC_HIDDEN CUresult psc_cuMemRelease(CUmemGenericAllocationHandle handle) {
  using Fn = CUresult (*)(CUmemGenericAllocationHandle);
  Fn real = driver_real<Fn>(DriverFn::kMemRelease);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!psc::rt::enabled()) return real(handle);
  psc::rt::HookGuard guard;
  vmm_before_release(guard, handle);
  return real(handle);
}
PSC_HIDDEN CUresult psc_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* address) {
  using Fn = CUresult (*)(CUmemGenericAllocationHandle*, void*);
  Fn real = driver_real<Fn>(DriverFn::kMemRetainAllocationHandle);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult r = real(handle, address);
  if (r == CUDA_SUCCESS && psc::rt::enabled()) vmm_retained(*handle);
  return r;
}
PSC_HIDDEN CUresult psc_cuMemMap(CUdeviceptr address, size_t bytes, size_t offset, CUmemGenericAllocationHandle handle,
                                 unsigned long long flags) {
  using Fn = CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  Fn real = driver_real<Fn>(DriverFn::kMemMap);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!psc::rt::enabled()) return real(address, bytes, offset, handle, flags);
  psc::rt::HookGuard guard;
  const CUresult r = real(address, bytes, offset, handle, flags);
  if (r == CUDA_SUCCESS) vmm_mapped(guard, address, bytes, handle);
  return r;
}
PSC_HIDDEN CUresult psc_cuMemUnmap(CUdeviceptr address, size_t bytes) {
  using Fn = CUresult (*)(CUdeviceptr, size_t);
  Fn real = driver_real<Fn>(DriverFn::kMemUnmap);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!psc::rt::enabled()) return real(address, bytes);
  psc::rt::HookGuard guard;
  vmm_before_unmap(guard, address, bytes);
  return real(address, bytes);
}

// ---- exports and the table -----------------------------------------------------------
// The exported names are aliases of the hidden wrappers: the table's addresses
// and the exported symbols are the same functions, and nothing another
// library defines can interpose on the table.

#define PSC_DRIVER_EXPORT(exported, internal) \
  extern "C" __attribute__((visibility("default"), alias(#internal), nothrow)) decltype(internal) exported;

PSC_DRIVER_EXPORT(cuInit, psc_cuInit)
PSC_DRIVER_EXPORT(cuMemAlloc_v2, psc_cuMemAlloc_v2)
PSC_DRIVER_EXPORT(cuMemFree_v2, psc_cuMemFree_v2)
PSC_DRIVER_EXPORT(cuMemAllocManaged, psc_cuMemAllocManaged)
PSC_DRIVER_EXPORT(cuMemAllocAsync, psc_cuMemAllocAsync)
PSC_DRIVER_EXPORT(cuMemAllocAsync_ptsz, psc_cuMemAllocAsync_ptsz)
PSC_DRIVER_EXPORT(cuMemAllocFromPoolAsync, psc_cuMemAllocFromPoolAsync)
PSC_DRIVER_EXPORT(cuMemAllocFromPoolAsync_ptsz, psc_cuMemAllocFromPoolAsync_ptsz)
PSC_DRIVER_EXPORT(cuMemFreeAsync, psc_cuMemFreeAsync)
PSC_DRIVER_EXPORT(cuMemFreeAsync_ptsz, psc_cuMemFreeAsync_ptsz)
PSC_DRIVER_EXPORT(cuMemAllocHost_v2, psc_cuMemAllocHost_v2)
PSC_DRIVER_EXPORT(cuMemHostAlloc, psc_cuMemHostAlloc)
PSC_DRIVER_EXPORT(cuMemFreeHost, psc_cuMemFreeHost)
PSC_DRIVER_EXPORT(cuMemHostRegister_v2, psc_cuMemHostRegister_v2)
PSC_DRIVER_EXPORT(cuMemHostUnregister, psc_cuMemHostUnregister)
PSC_DRIVER_EXPORT(cuMemCreate, psc_cuMemCreate)
PSC_DRIVER_EXPORT(cuMemRelease, psc_cuMemRelease)
PSC_DRIVER_EXPORT(cuMemRetainAllocationHandle, psc_cuMemRetainAllocationHandle)
PSC_DRIVER_EXPORT(cuMemMap, psc_cuMemMap)
PSC_DRIVER_EXPORT(cuMemUnmap, psc_cuMemUnmap)

extern "C" CUresult psc_cuGetProcAddress(const char*, void**, int, cuuint64_t);
extern "C" CUresult psc_cuGetProcAddress_v2(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

namespace psc::interpose::cuda {

#define PSC_WRAPPER_true(id) reinterpret_cast<void*>(&psc_cu##id)
#define PSC_WRAPPER_false(id) nullptr
#define PSC_DRIVER_ENTRY(id, name, base, wrapped) {name, base, PSC_WRAPPER_##wrapped(id)},
const DriverEntry kDriverEntries[kDriverFnCount] = {PSC_DRIVER_FUNCTIONS(PSC_DRIVER_ENTRY)};
#undef PSC_DRIVER_ENTRY
#undef PSC_WRAPPER_true
#undef PSC_WRAPPER_false

}  // namespace psc::interpose::cuda
