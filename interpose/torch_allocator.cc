// PyTorch pluggable-allocator entry points, exported by the preloaded library:
//
//   torch.cuda.memory.change_current_allocator(
//       torch.cuda.memory.CUDAPluggableAllocator(<this .so>, "psc_torch_malloc", "psc_torch_free"))
//
// (peakscope.use_pluggable_allocator() in the Python helper does this.) The
// signatures are the ones torch/csrc/cuda/CUDAPluggableAllocator.h calls:
//   void* alloc(size_t size, int device, cudaStream_t stream)
//   void  free(void* ptr, size_t size, int device, cudaStream_t stream)
// (its documentation spells the size ssize_t; the ABI is the same).
//
// Every tensor becomes one stream-ordered cudaMallocAsync / cudaFreeAsync on
// the stream PyTorch names, so each tensor's lifetime is recorded (api
// torch_pluggable, memory kind pool) instead of being hidden in a caching
// allocator's segments. Like PyTorch's own cudaMallocAsync backend we set the
// device's default pool to keep freed memory (release threshold = max), so
// the pool, not the OS, serves reuse; its reserved bytes are sampled at range
// boundaries (cuda_pools.cc).
#include <sys/types.h>

#include <cuda_runtime_api.h>

#include "interpose/cuda_hooks.h"

namespace psc::interpose::cuda {
namespace {

constexpr int kMaxDevices = 64;
std::atomic<uint64_t> g_pool_configured{0};  // bit d: device d's default pool keeps freed memory

using SetDeviceFn = cudaError_t (*)(int);

void keep_freed_memory(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  const uint64_t bit = 1ull << device;
  if (g_pool_configured.load(std::memory_order_relaxed) & bit) return;  // every call but the first: a read
  if (g_pool_configured.fetch_or(bit, std::memory_order_relaxed) & bit) return;
  using GetPoolFn = cudaError_t (*)(cudaMemPool_t*, int);
  using SetAttributeFn = cudaError_t (*)(cudaMemPool_t, cudaMemPoolAttr, void*);
  GetPoolFn get_pool = runtime_real<GetPoolFn>(RuntimeFn::kDeviceGetDefaultMemPool);
  SetAttributeFn set_attribute = runtime_real<SetAttributeFn>(RuntimeFn::kMemPoolSetAttribute);
  cudaMemPool_t pool = nullptr;
  if (!get_pool || !set_attribute || get_pool(&pool, device) != cudaSuccess) return;
  uint64_t threshold = ~0ull;
  set_attribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
}

// Makes `device` current for the scope (PyTorch passes its current device; a
// different one would otherwise allocate on the wrong device).
class DeviceScope {
 public:
  explicit DeviceScope(int device) : device_(device) {
    previous_ = runtime_device();
    if (previous_ != device_ && device_ >= 0) {
      if (SetDeviceFn set = runtime_real<SetDeviceFn>(RuntimeFn::kSetDevice)) switched_ = set(device_) == cudaSuccess;
    }
  }
  ~DeviceScope() {
    if (switched_ && previous_ >= 0) runtime_real<SetDeviceFn>(RuntimeFn::kSetDevice)(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int device_;
  int previous_;
  bool switched_ = false;
};

}  // namespace
}  // namespace psc::interpose::cuda

using namespace psc::interpose::cuda;

PSC_EXPORT void* psc_torch_malloc(ssize_t size, int device, cudaStream_t stream) {
  using Fn = cudaError_t (*)(void**, size_t, cudaStream_t);
  Fn real = runtime_real<Fn>(RuntimeFn::kMallocAsync);
  if (!real || size <= 0) return nullptr;
  psc::rt::HookGuard guard;
  DeviceScope scope(device);
  keep_freed_memory(device);
  void* p = nullptr;
  const cudaError_t r = real(&p, static_cast<size_t>(size), stream);
  if (psc::rt::enabled()) {
    const AllocRecord record{psc::Api::kTorchPluggable,     psc::MemoryKind::kPool,
                             reinterpret_cast<uint64_t>(p), static_cast<uint64_t>(size),
                             static_cast<int16_t>(device),  reinterpret_cast<uint64_t>(stream)};
    if (r == cudaSuccess) {
      record_alloc(guard, record);
      note_pool_use(static_cast<int16_t>(device), 0);
    } else {
      record_failed_alloc(guard, record);
    }
  }
  return r == cudaSuccess ? p : nullptr;
}

PSC_EXPORT void psc_torch_free(void* ptr, ssize_t size, int device, cudaStream_t stream) {
  using Fn = cudaError_t (*)(void*, cudaStream_t);
  Fn real = runtime_real<Fn>(RuntimeFn::kFreeAsync);
  if (!real || !ptr) return;
  (void)size;  // the block table knows the size; PyTorch's agrees with it
  psc::rt::HookGuard guard;
  if (psc::rt::enabled()) {
    record_free(guard, psc::Api::kTorchPluggable, psc::MemoryKind::kPool, reinterpret_cast<uint64_t>(ptr),
                reinterpret_cast<uint64_t>(stream), runtime_device);
  }
  (void)device;  // a stream-ordered free needs no current device
  real(ptr, stream);
}
