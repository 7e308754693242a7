// A driver-API program linked against libcuda.so.1 (its calls bind to the
// preloaded library's exports of the same names):
//
//   nccl     physical memory whose handle is released while still mapped (NCCL
//            does this), then the NCCL free path: retain, release, unmap, release
//   direct   cuMemAlloc_v2 / cuMemAllocManaged / cuMemHostAlloc ... called directly
//   lookup   cuGetProcAddress_v2 for old and new ABIs, per-thread variants, and
//            errors; calls what it gets
#include <cuda.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "tests/cuda/client.h"

namespace {

constexpr size_t kPage = 2u << 20;

void make_context(int device) {
  CLIENT_CHECK(cuInit(0));
  CUcontext ctx;
  CLIENT_CHECK(cuDevicePrimaryCtxRetain(&ctx, device));
  CLIENT_CHECK(cuCtxSetCurrent(ctx));
}

CUmemAllocationProp device_prop(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

int nccl() {
  make_context(1);
  const CUmemAllocationProp prop = device_prop(1);
  CUdeviceptr va;
  CLIENT_CHECK(cuMemAddressReserve(&va, 8 * kPage, 0, 0, 0));  // twice what gets mapped
  CUmemGenericAllocationHandle a, b;
  CLIENT_CHECK(cuMemCreate(&a, 2 * kPage, &prop, 0));
  CLIENT_CHECK(cuMemCreate(&b, 2 * kPage, &prop, 0));
  CLIENT_CHECK(cuMemMap(va, 2 * kPage, 0, a, 0));
  CLIENT_CHECK(cuMemMap(va + 2 * kPage, 2 * kPage, 0, b, 0));
  client::range_push("mapped");
  CLIENT_CHECK(cuMemRelease(a));  // still mapped: the memory stays
  client::range_pop();
  client::range_push("retained");
  CUmemGenericAllocationHandle again;
  CLIENT_CHECK(cuMemRetainAllocationHandle(&again, reinterpret_cast<void*>(va + 2 * kPage)));
  CLIENT_EXPECT(again == b);
  CLIENT_CHECK(cuMemRelease(again));
  CLIENT_CHECK(cuMemUnmap(va + 2 * kPage, 2 * kPage));
  client::range_pop();
  client::range_push("released");
  CLIENT_CHECK(cuMemRelease(b));  // last reference of b: freed here
  client::range_pop();
  client::range_push("unmapped");
  CLIENT_CHECK(cuMemUnmap(va, 2 * kPage));  // last use of a: freed here
  client::range_pop();
  CLIENT_CHECK(cuMemAddressFree(va, 8 * kPage));
  client::print("handle_a", a);
  client::print("handle_b", b);
  return 0;
}

int direct() {
  make_context(0);
  CUdeviceptr d, m;
  void *h, *hh;
  static char registered[1 << 16];
  CLIENT_CHECK(cuMemAlloc(&d, 777777));  // cuda.h maps these names to _v2
  CLIENT_CHECK(cuMemAllocManaged(&m, 888888, CU_MEM_ATTACH_GLOBAL));
  CLIENT_CHECK(cuMemAllocHost(&h, 99999));
  CLIENT_CHECK(cuMemHostAlloc(&hh, 111111, 0));
  CLIENT_CHECK(cuMemHostRegister(registered, sizeof registered, 0));
  CUstream stream;
  CLIENT_CHECK(cuStreamCreate(&stream, 0));
  CUdeviceptr a;
  CLIENT_CHECK(cuMemAllocAsync(&a, 123456, stream));
  CLIENT_CHECK(cuMemFreeAsync(a, stream));
  CLIENT_CHECK(cuMemHostUnregister(registered));
  CLIENT_CHECK(cuMemFreeHost(hh));
  CLIENT_CHECK(cuMemFreeHost(h));
  CLIENT_CHECK(cuMemFree(m));
  CLIENT_CHECK(cuMemFree(d));
  client::print("stream", reinterpret_cast<uintptr_t>(stream));
  return 0;
}

// Prints "key rc status object symbol" for a lookup of `symbol`.
void* lookup(const char* key, const char* symbol, int version, cuuint64_t flags) {
  void* fn = &fn;
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  const CUresult r = cuGetProcAddress(symbol, &fn, version, flags, &status);  // cuGetProcAddress_v2
  std::printf("%s %d %d %s\n", key, static_cast<int>(r), static_cast<int>(status),
              r == CUDA_SUCCESS ? client::describe(fn).c_str() : "untouched -");
  return r == CUDA_SUCCESS ? fn : nullptr;
}

int lookups() {
  make_context(0);
  auto alloc_v2 = reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(lookup("alloc", "cuMemAlloc", 13000, 0));
  auto free_v2 = reinterpret_cast<CUresult (*)(CUdeviceptr)>(lookup("free", "cuMemFree", 13000, 0));
  auto alloc_v1 =
      reinterpret_cast<CUresult (*)(unsigned int*, unsigned int)>(lookup("alloc_v1", "cuMemAlloc", 3000, 0));
  auto free_v1 = reinterpret_cast<CUresult (*)(unsigned int)>(lookup("free_v1", "cuMemFree", 3000, 0));
  auto async_ptsz = reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t, CUstream)>(
      lookup("async_ptsz", "cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
  auto free_async_ptsz = reinterpret_cast<CUresult (*)(CUdeviceptr, CUstream)>(
      lookup("free_async_ptsz", "cuMemFreeAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
  lookup("create_too_old", "cuMemCreate", 10000, 0);
  lookup("unknown", "cuNoSuchFunction", 12000, 0);
  lookup("too_new", "cuMemAlloc", 99000, 0);
  auto get_proc_v1 = reinterpret_cast<CUresult (*)(const char*, void**, int, cuuint64_t)>(
      lookup("get_proc_v1", "cuGetProcAddress", 11030, 0));
  void* via_v1 = nullptr;
  CLIENT_CHECK(get_proc_v1("cuMemAllocManaged", &via_v1, 13000, 0));
  std::printf("managed_via_v1 0 0 %s\n", client::describe(via_v1).c_str());
  CLIENT_EXPECT(alloc_v2 && free_v2 && alloc_v1 && free_v1 && async_ptsz && free_async_ptsz);

  CUdeviceptr p;
  CLIENT_CHECK(alloc_v2(&p, 424242));
  CLIENT_CHECK(free_v2(p));
  unsigned int small;
  CLIENT_CHECK(alloc_v1(&small, 4096));  // the 32-bit ABI works, through the driver's own function
  CLIENT_CHECK(free_v1(small));
  CLIENT_CHECK(async_ptsz(&p, 313131, nullptr));
  CLIENT_CHECK(free_async_ptsz(p, nullptr));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "nccl") return nccl();
  if (scenario == "direct") return direct();
  if (scenario == "lookup") return lookups();
  std::fprintf(stderr, "usage: vmm_client nccl|direct|lookup\n");
  return 2;
}
