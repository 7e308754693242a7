// A library that uses the CUDA runtime, opened by local_client with
// RTLD_LOCAL, as Python opens libtorch_cuda.so: the runtime it needs is then
// loaded privately, out of the global scope. Its cudaMalloc reference still
// binds to peakscope's export (the global scope comes first), and peakscope
// must find that private runtime to forward to.
#include <cuda_runtime_api.h>

extern "C" __attribute__((visibility("default"))) int local_alloc_free(size_t bytes) {
  void* p = nullptr;
  const cudaError_t r = cudaMalloc(&p, bytes);
  if (r != cudaSuccess) return static_cast<int>(r);
  return static_cast<int>(cudaFree(p));
}
