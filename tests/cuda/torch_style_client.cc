// What PyTorch does, without PyTorch:
//
//   expandable   the expandable-segments path of the caching allocator: driver
//                VMM functions from cudaGetDriverEntryPointByVersion (c10's
//                DriverAPI), a reserved range grown by mapping 2 MiB handles,
//                shrunk by unmapping and releasing them.
//   pluggable L  torch.cuda.memory.CUDAPluggableAllocator: dlopen the library L
//                (as ctypes.CDLL does), look up psc_torch_malloc / psc_torch_free
//                and call them with PyTorch's signatures: tensors on a stream.
//   lookups      cudaGetDriverEntryPoint* answers: statuses, versions, _ptsz.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/types.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/cuda/client.h"
#include "tests/cuda/ptsz_calls.h"

namespace {

template <typename Fn>
Fn entry(const char* symbol, unsigned int version = 12000) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status;
  CLIENT_CHECK(cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &status));
  CLIENT_EXPECT(status == cudaDriverEntryPointSuccess && fn);
  return reinterpret_cast<Fn>(fn);
}

int expandable() {
  CLIENT_CHECK(cudaSetDevice(0));
  CLIENT_CHECK(cudaFree(nullptr));  // context, as PyTorch's lazy init does
  auto reserve =
      entry<CUresult (*)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long)>("cuMemAddressReserve");
  auto address_free = entry<CUresult (*)(CUdeviceptr, size_t)>("cuMemAddressFree");
  auto create =
      entry<CUresult (*)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long)>(
          "cuMemCreate");
  auto release = entry<CUresult (*)(CUmemGenericAllocationHandle)>("cuMemRelease");
  auto map =
      entry<CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long)>("cuMemMap");
  auto unmap = entry<CUresult (*)(CUdeviceptr, size_t)>("cuMemUnmap");
  auto set_access = entry<CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t)>("cuMemSetAccess");

  constexpr size_t kPage = 2u << 20;
  constexpr size_t kPages = 8;
  CUdeviceptr base;
  CLIENT_CHECK(reserve(&base, kPage * kPages * 4, 0, 0, 0));  // reserved address space: not memory
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  std::vector<CUmemGenericAllocationHandle> handles(kPages);
  for (size_t i = 0; i < kPages; ++i) {  // grow the segment page by page
    CLIENT_CHECK(create(&handles[i], kPage, &prop, 0));
    CLIENT_CHECK(map(base + i * kPage, kPage, 0, handles[i], 0));
    CLIENT_CHECK(set_access(base + i * kPage, kPage, &access, 1));
  }
  client::print("peak_mapped", kPage * kPages);
  for (size_t i = kPages / 2; i < kPages; ++i) {  // shrink: unmap, then release
    CLIENT_CHECK(unmap(base + i * kPage, kPage));
    CLIENT_CHECK(release(handles[i]));
  }
  CLIENT_CHECK(unmap(base, kPage * (kPages / 2)));  // one unmap over four mappings
  for (size_t i = 0; i < kPages / 2; ++i) CLIENT_CHECK(release(handles[i]));
  CLIENT_CHECK(address_free(base, kPage * kPages * 4));
  return 0;
}

int pluggable(const char* library) {
  void* handle = dlopen(library, RTLD_NOW);
  CLIENT_EXPECT(handle != nullptr);
  using Malloc = void* (*)(ssize_t, int, cudaStream_t);
  using Free = void (*)(void*, ssize_t, int, cudaStream_t);
  auto alloc = reinterpret_cast<Malloc>(dlsym(handle, "psc_torch_malloc"));
  auto release = reinterpret_cast<Free>(dlsym(handle, "psc_torch_free"));
  CLIENT_EXPECT(alloc && release);
  CLIENT_CHECK(cudaSetDevice(0));
  cudaStream_t stream;
  CLIENT_CHECK(cudaStreamCreate(&stream));
  client::print("stream", reinterpret_cast<uintptr_t>(stream));
  // A forward-like pattern: activations kept, workspaces freed, on a side stream and the default one.
  const ssize_t sizes[] = {1 << 20, 3 << 20, 512 << 10, 2 << 20, 7 << 20};
  std::vector<void*> kept;
  for (ssize_t s : sizes) {
    void* act = alloc(s, 0, stream);
    void* workspace = alloc(s / 2, 0, nullptr);
    CLIENT_EXPECT(act && workspace);
    release(workspace, s / 2, 0, nullptr);
    kept.push_back(act);
  }
  void* other = alloc(1 << 20, 1, stream);  // PyTorch names the device; device 0 is current
  CLIENT_EXPECT(other);
  int current = -1;
  CLIENT_CHECK(cudaGetDevice(&current));
  CLIENT_EXPECT(current == 0);
  release(other, 1 << 20, 1, stream);
  for (size_t i = 0; i < kept.size(); ++i) release(kept[i], sizes[i], 0, stream);
  CLIENT_EXPECT(alloc(0, 0, stream) == nullptr);
  CLIENT_CHECK(cudaStreamSynchronize(stream));
  cudaMemPool_t pool;
  CLIENT_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  uint64_t threshold = 0;
  CLIENT_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  client::print("release_threshold", threshold);
  return 0;
}

void print_lookup(const char* key, cudaError_t r, void* fn, cudaDriverEntryPointQueryResult status) {
  std::printf("%s %d %d %s\n", key, static_cast<int>(r), static_cast<int>(status), client::describe(fn).c_str());
}

// Each answer is printed as "key rc status object symbol".
int lookups() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status;
  cudaError_t r = cudaGetDriverEntryPoint("cuMemAlloc", &fn, cudaEnableDefault, &status);
  print_lookup("alloc_default", r, fn, status);
  r = cudaGetDriverEntryPointByVersion("cuMemAllocAsync", &fn, 12000, cudaEnablePerThreadDefaultStream, &status);
  print_lookup("alloc_async_per_thread", r, fn, status);
  r = cudaGetDriverEntryPointByVersion("cuMemAllocAsync", &fn, 12000, cudaEnableLegacyStream, &status);
  print_lookup("alloc_async_legacy", r, fn, status);
  r = ptsz_get_driver_entry_point("cuMemFreeAsync", &fn) == 0 ? cudaSuccess : cudaErrorUnknown;
  print_lookup("free_async_ptsz_default", r, fn, cudaDriverEntryPointSuccess);
  r = cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 3000, cudaEnableDefault, &status);
  print_lookup("alloc_v1", r, fn, status);
  fn = &fn;
  r = cudaGetDriverEntryPointByVersion("cuMemCreate", &fn, 10000, cudaEnableDefault, &status);
  print_lookup("create_too_old", r, fn, status);
  fn = &fn;
  r = cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &fn, 12000, cudaEnableDefault, &status);
  print_lookup("unknown", r, fn, status);
  r = cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 99000, cudaEnableDefault, &status);
  print_lookup("too_new", r, fn, status);
  cudaGetLastError();
  r = cudaGetDriverEntryPointByVersion("cuGetProcAddress", &fn, 12000, cudaEnableDefault, &status);
  print_lookup("get_proc_address", r, fn, status);
  // The looked-up lookup works and wraps what it finds.
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  void* free_fn = nullptr;
  CUdriverProcAddressQueryResult driver_status;
  const CUresult dr = reinterpret_cast<GetProc>(fn)("cuMemFree", &free_fn, 13000, 0, &driver_status);
  std::printf("free_via_lookup %d %d %s\n", static_cast<int>(dr), static_cast<int>(driver_status),
              client::describe(free_fn).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "expandable") return expandable();
  if (scenario == "pluggable" && argc == 3) return pluggable(argv[2]);
  if (scenario == "lookups") return lookups();
  std::fprintf(stderr, "usage: torch_style_client expandable|pluggable LIBRARY|lookups\n");
  return 2;
}
