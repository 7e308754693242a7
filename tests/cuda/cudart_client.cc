// A CUDA runtime program, linked against libcudart.so.13 the ordinary way
// (its references are versioned: cudaMalloc@libcudart.so.13). Each scenario
// makes a known set of allocations and prints what the tests need to check
// the trace against ("key value" lines).
//
//   cudart_client mix            every runtime allocation API once, distinct sizes
//   cudart_client oom            an allocation the device cannot hold, then a good one
//   cudart_client ranges         allocations inside psc ranges; a free on another device
//   cudart_client pool           pool reserved bytes around range boundaries
//   cudart_client bench KIND N   N alloc/free pairs (KIND: runtime, async, driver); prints ns per pair
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <time.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "tests/cuda/client.h"
#include "tests/cuda/ptsz_calls.h"

namespace {

constexpr size_t kMalloc = 1048577;
constexpr size_t kManaged = 3u << 20;
constexpr size_t kHost = 65536;
constexpr size_t kHostAlloc = 131072;
constexpr size_t kRegister = 262144;
constexpr size_t kAsync = 5u << 20;
constexpr size_t kAsyncPtsz = 6u << 20;
constexpr size_t kPool = 7u << 20;
constexpr size_t kPoolPtsz = 8u << 20;

cudaMemPool_t make_pool(int device, uint64_t release_threshold) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool;
  CLIENT_CHECK(cudaMemPoolCreate(&pool, &props));
  CLIENT_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &release_threshold));
  return pool;
}

uint64_t reserved(cudaMemPool_t pool) {
  uint64_t v = 0;
  CLIENT_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v));
  return v;
}

int mix() {
  CLIENT_CHECK(cudaSetDevice(0));
  cudaStream_t stream;
  CLIENT_CHECK(cudaStreamCreate(&stream));
  cudaMemPool_t pool = make_pool(0, 0);
  static char registered[kRegister];

  void *device, *managed, *host, *host_alloc, *async, *async_ptsz, *pooled, *pooled_ptsz, *empty = &empty;
  CLIENT_CHECK(cudaMalloc(&device, kMalloc));
  CLIENT_CHECK(cudaMallocManaged(&managed, kManaged, cudaMemAttachGlobal));
  CLIENT_CHECK(cudaMallocHost(&host, kHost));
  CLIENT_CHECK(cudaHostAlloc(&host_alloc, kHostAlloc, cudaHostAllocDefault));
  CLIENT_CHECK(cudaHostRegister(registered, kRegister, cudaHostRegisterDefault));
  CLIENT_CHECK(cudaMallocAsync(&async, kAsync, stream));
  CLIENT_CHECK(ptsz_malloc_async(&async_ptsz, kAsyncPtsz));
  CLIENT_CHECK(cudaMallocFromPoolAsync(&pooled, kPool, pool, stream));
  CLIENT_CHECK(ptsz_malloc_from_pool(&pooled_ptsz, kPoolPtsz, pool));
  CLIENT_CHECK(cudaMalloc(&empty, 0));
  CLIENT_EXPECT(empty == nullptr);
  static_cast<char*>(host)[kHost - 1] = 1;  // pinned memory is real host memory
  static_cast<char*>(managed)[0] = 1;

  client::print("stream", reinterpret_cast<uintptr_t>(stream));
  client::print("pool", reinterpret_cast<uintptr_t>(pool));
  client::print_pointer("device", device);
  client::print_pointer("managed", managed);
  client::print_pointer("host", host);
  client::print_pointer("host_alloc", host_alloc);
  client::print_pointer("registered", registered);
  client::print_pointer("async", async);
  client::print_pointer("async_ptsz", async_ptsz);
  client::print_pointer("pooled", pooled);
  client::print_pointer("pooled_ptsz", pooled_ptsz);

  CLIENT_CHECK(cudaFreeAsync(pooled, stream));
  CLIENT_CHECK(ptsz_free_async(pooled_ptsz));
  CLIENT_CHECK(ptsz_free_async(async_ptsz));
  CLIENT_CHECK(cudaFreeAsync(async, stream));
  CLIENT_CHECK(cudaHostUnregister(registered));
  CLIENT_CHECK(cudaFreeHost(host_alloc));
  CLIENT_CHECK(cudaFreeHost(host));
  CLIENT_CHECK(cudaFree(managed));
  CLIENT_CHECK(cudaFree(device));
  CLIENT_CHECK(cudaFree(nullptr));
  CLIENT_CHECK(cudaStreamSynchronize(stream));
  CLIENT_CHECK(cudaMemPoolDestroy(pool));
  CLIENT_CHECK(cudaStreamDestroy(stream));
  return 0;
}

int oom() {
  void* p = nullptr;
  const cudaError_t r = cudaMalloc(&p, size_t{1} << 40);  // run with FAKE_CUDA_DEVICE_BYTES below this
  client::print("oom_error", static_cast<unsigned long long>(r));
  CLIENT_EXPECT(r == cudaErrorMemoryAllocation);
  cudaGetLastError();
  CLIENT_CHECK(cudaMalloc(&p, 4096));
  CLIENT_CHECK(cudaFree(p));
  return 0;
}

int ranges() {
  void *a, *b, *c;
  client::range_push("forward/layer.0");
  CLIENT_CHECK(cudaMalloc(&a, 100000));
  client::range_push("backward/layer.0");
  CLIENT_CHECK(cudaMalloc(&b, 200000));
  client::range_pop();
  CLIENT_CHECK(cudaFree(a));
  client::range_pop();
  CLIENT_CHECK(cudaSetDevice(1));
  CLIENT_CHECK(cudaMalloc(&c, 300000));
  CLIENT_CHECK(cudaSetDevice(0));
  CLIENT_CHECK(cudaFree(c));  // freed while device 0 is current: the free is still device 1's
  CLIENT_CHECK(cudaFree(b));
  return 0;
}

// Reserved bytes as the client sees them right after each boundary; the
// recorder samples at the same boundaries.
int pool() {
  CLIENT_CHECK(cudaSetDevice(0));
  cudaStream_t stream;
  CLIENT_CHECK(cudaStreamCreate(&stream));
  cudaMemPool_t device_pool;
  CLIENT_CHECK(cudaDeviceGetMemPool(&device_pool, 0));
  void *x, *y, *z;
  client::range_push("phase.a");
  CLIENT_CHECK(cudaMallocAsync(&x, 3u << 20, stream));
  client::range_push("phase.b");
  client::print("reserved_after_push_b", reserved(device_pool));
  CLIENT_CHECK(cudaMallocAsync(&y, 5u << 20, stream));
  client::range_pop();
  client::print("reserved_after_pop_b", reserved(device_pool));
  CLIENT_CHECK(cudaFreeAsync(x, stream));
  CLIENT_CHECK(cudaFreeAsync(y, stream));
  CLIENT_CHECK(cudaStreamSynchronize(stream));  // threshold 0: the pool gives everything back
  client::range_pop();
  client::print("reserved_after_pop_a", reserved(device_pool));
  cudaMemPool_t own = make_pool(0, ~0ull);
  CLIENT_CHECK(cudaMallocFromPoolAsync(&z, 1u << 20, own, stream));
  client::range_push("phase.c");
  client::print("own_pool", reinterpret_cast<uintptr_t>(own));
  client::print("own_reserved_after_push_c", reserved(own));
  CLIENT_CHECK(cudaFreeAsync(z, stream));
  client::range_pop();
  CLIENT_CHECK(cudaStreamSynchronize(stream));
  CLIENT_CHECK(cudaMemPoolDestroy(own));  // then a boundary: the destroyed pool holds nothing
  client::range_push("phase.d");
  client::range_pop();
  // An explicit pool made the device's current one: sampled once, under its own name.
  cudaMemPool_t current = make_pool(0, ~0ull);
  void *u, *v;
  CLIENT_CHECK(cudaMallocFromPoolAsync(&u, 1u << 20, current, stream));
  CLIENT_CHECK(cudaDeviceSetMemPool(0, current));
  CLIENT_CHECK(cudaMallocAsync(&v, 1u << 20, stream));
  client::range_push("phase.e");
  client::print("current_pool", reinterpret_cast<uintptr_t>(current));
  client::print("current_reserved_after_push_e", reserved(current));
  CLIENT_CHECK(cudaFreeAsync(u, stream));
  CLIENT_CHECK(cudaFreeAsync(v, stream));
  client::range_pop();
  CLIENT_CHECK(cudaStreamSynchronize(stream));
  CLIENT_CHECK(cudaDeviceSetMemPool(0, device_pool));
  return 0;
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int bench(const std::string& kind, long pairs) {
  CLIENT_CHECK(cudaSetDevice(0));
  cudaStream_t stream;
  CLIENT_CHECK(cudaStreamCreate(&stream));
  using DriverAlloc = CUresult (*)(CUdeviceptr*, size_t);
  using DriverFree = CUresult (*)(CUdeviceptr);
  DriverAlloc driver_alloc = nullptr;
  DriverFree driver_free = nullptr;
  cudaDriverEntryPointQueryResult status;
  CLIENT_CHECK(
      cudaGetDriverEntryPoint("cuMemAlloc", reinterpret_cast<void**>(&driver_alloc), cudaEnableDefault, &status));
  CLIENT_CHECK(
      cudaGetDriverEntryPoint("cuMemFree", reinterpret_cast<void**>(&driver_free), cudaEnableDefault, &status));
  auto one = [&](size_t bytes) {
    if (kind == "runtime") {
      void* p;
      CLIENT_CHECK(cudaMalloc(&p, bytes));
      CLIENT_CHECK(cudaFree(p));
    } else if (kind == "async") {
      void* p;
      CLIENT_CHECK(cudaMallocAsync(&p, bytes, stream));
      CLIENT_CHECK(cudaFreeAsync(p, stream));
    } else {
      CUdeviceptr p;
      CLIENT_CHECK(driver_alloc(&p, bytes));
      CLIENT_CHECK(driver_free(p));
    }
  };
  for (long i = 0; i < pairs / 10 + 1; ++i) one(4096);  // warm up: first-use paths, table pages
  const uint64_t start = now_ns();
  for (long i = 0; i < pairs; ++i) one(4096 + static_cast<size_t>(i & 63) * 512);
  const uint64_t elapsed = now_ns() - start;
  std::printf("ns_per_pair %.1f\n", static_cast<double>(elapsed) / static_cast<double>(pairs));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "mix") return mix();
  if (scenario == "oom") return oom();
  if (scenario == "ranges") return ranges();
  if (scenario == "pool") return pool();
  if (scenario == "bench" && argc == 4) return bench(argv[2], std::atol(argv[3]));
  std::fprintf(stderr, "usage: cudart_client mix|oom|ranges|pool|bench KIND N\n");
  return 2;
}
