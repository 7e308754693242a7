// Memory pools: stream-ordered allocations are recorded at the tensor level,
// but a pool holds more than its live allocations (it keeps freed memory up to
// its release threshold). At every range boundary we sample each pool the
// process has allocated from — CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT — and
// record a counter when the value changed since the last sample:
//   "pool_reserved_bytes"          a device's current pool (device field set)
//   "pool_reserved_bytes:0x<pool>" an explicit pool (cudaMallocFromPoolAsync)
//
// The sampler is installed as the recorder's range-boundary hook on the first
// pool allocation, so processes without pools pay nothing. Cost per boundary:
// two driver calls per device used plus one per explicit pool.
#include <pthread.h>

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "interpose/cuda_hooks.h"

namespace psc::interpose::cuda {
namespace {

constexpr int kMaxDevices = 64;
constexpr int kMaxPools = 32;
constexpr uint64_t kNeverSampled = ~0ull;

std::atomic<uint64_t> g_devices_used{0};   // bit d: device d allocated from its current pool
std::atomic<uint64_t> g_pools[kMaxPools];  // explicit pools, claimed by CAS from 0
std::atomic<int16_t> g_pool_devices[kMaxPools];
std::atomic<uint64_t> g_last_device_value[kMaxDevices];
std::atomic<uint64_t> g_last_pool_value[kMaxPools];
std::atomic<bool> g_sampler_installed{false};

using GetPoolFn = CUresult (*)(CUmemoryPool*, CUdevice);
using GetAttributeFn = CUresult (*)(CUmemoryPool, CUmemPool_attribute, void*);

bool reserved_bytes(GetAttributeFn get, uint64_t pool, uint64_t* value) {
  cuuint64_t v = 0;
  if (get(reinterpret_cast<CUmemoryPool>(pool), CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) != CUDA_SUCCESS) return false;
  *value = v;
  return true;
}

void emit_if_changed(std::atomic<uint64_t>& last, const char* name, uint64_t value, int16_t device) {
  if (last.exchange(value, std::memory_order_relaxed) != value) rt::record_counter(name, value, device, Api::kNone);
}

// "pool_reserved_bytes:0x" + 16 hex digits.
void pool_counter_name(char* out, uint64_t pool) {
  const char prefix[] = "pool_reserved_bytes:0x";
  size_t n = 0;
  for (; prefix[n]; ++n) out[n] = prefix[n];
  for (int shift = 60; shift >= 0; shift -= 4) out[n++] = "0123456789abcdef"[(pool >> shift) & 0xf];
  out[n] = 0;
}

bool is_explicit_pool(uint64_t pool) {
  for (int i = 0; i < kMaxPools; ++i) {
    const uint64_t known = g_pools[i].load(std::memory_order_acquire);
    if (known == 0) return false;  // slots fill from the front
    if (known == pool) return true;
  }
  return false;
}

void sample_pools(const rt::RangeBoundary&) {
  if (!rt::enabled()) return;
  GetPoolFn get_pool = reinterpret_cast<GetPoolFn>(
      g_driver_real[static_cast<int>(DriverFn::kDeviceGetMemPool)].load(std::memory_order_acquire));
  GetAttributeFn get_attribute = reinterpret_cast<GetAttributeFn>(
      g_driver_real[static_cast<int>(DriverFn::kMemPoolGetAttribute)].load(std::memory_order_acquire));
  if (!get_pool || !get_attribute) return;
  rt::HookGuard guard;
  uint64_t devices = g_devices_used.load(std::memory_order_relaxed);
  while (devices) {
    const int d = __builtin_ctzll(devices);
    devices &= devices - 1;
    CUmemoryPool pool = nullptr;
    uint64_t value;
    if (get_pool(&pool, d) == CUDA_SUCCESS && reserved_bytes(get_attribute, reinterpret_cast<uint64_t>(pool), &value)) {
      // A current pool that is also an explicit one (cudaDeviceSetMemPool) is
      // sampled under its own name: counted here too, it would count twice.
      if (is_explicit_pool(reinterpret_cast<uint64_t>(pool))) value = 0;
      emit_if_changed(g_last_device_value[d], "pool_reserved_bytes", value, static_cast<int16_t>(d));
    }
  }
  for (int i = 0; i < kMaxPools; ++i) {
    const uint64_t pool = g_pools[i].load(std::memory_order_acquire);
    if (!pool) break;
    uint64_t value = 0;
    // A pool that no longer answers was destroyed: it holds nothing now (the
    // last value would otherwise stand for it to the end of the trace).
    if (!reserved_bytes(get_attribute, pool, &value)) value = 0;
    char name[48];
    pool_counter_name(name, pool);
    emit_if_changed(g_last_pool_value[i], name, value, g_pool_devices[i].load(std::memory_order_relaxed));
  }
}

void forget_pools_in_child() {
  // The child has no use of the parent's CUDA context: sample nothing there
  // until it allocates from a pool itself.
  g_devices_used.store(0, std::memory_order_relaxed);
  for (auto& p : g_pools) p.store(0, std::memory_order_relaxed);
  for (auto& v : g_last_device_value) v.store(kNeverSampled, std::memory_order_relaxed);
  for (auto& v : g_last_pool_value) v.store(kNeverSampled, std::memory_order_relaxed);
}

__attribute__((constructor(103))) void init_pools() {
  for (auto& v : g_last_device_value) v.store(kNeverSampled, std::memory_order_relaxed);
  for (auto& v : g_last_pool_value) v.store(kNeverSampled, std::memory_order_relaxed);
  pthread_atfork(nullptr, nullptr, forget_pools_in_child);
  rt::add_raw_clone_hook(forget_pools_in_child);
}

void remember_explicit_pool(int16_t device, uint64_t pool) {
  for (int i = 0; i < kMaxPools; ++i) {
    uint64_t current = g_pools[i].load(std::memory_order_acquire);
    if (current == pool) return;
    if (current != 0) continue;
    g_pool_devices[i].store(device, std::memory_order_relaxed);
    if (g_pools[i].compare_exchange_strong(current, pool, std::memory_order_acq_rel) || current == pool) return;
  }
  // More explicit pools than we sample: the extra ones go unsampled.
}

}  // namespace

void note_pool_use(int16_t device, uint64_t pool) {
  if (pool) {
    remember_explicit_pool(device, pool);
  } else if (device >= 0 && device < kMaxDevices) {
    const uint64_t bit = 1ull << device;
    if (!(g_devices_used.load(std::memory_order_relaxed) & bit))
      g_devices_used.fetch_or(bit, std::memory_order_relaxed);
  }
  if (PSC_UNLIKELY(!g_sampler_installed.load(std::memory_order_relaxed))) {
    g_sampler_installed.store(true, std::memory_order_relaxed);
    rt::add_range_boundary_hook(sample_pools);
  }
}

}  // namespace psc::interpose::cuda
