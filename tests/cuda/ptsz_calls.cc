// Compiled with -DCUDA_API_PER_THREAD_DEFAULT_STREAM, as code built with
// `nvcc --default-stream per-thread` is: the runtime header turns these calls
// into cudaMallocAsync_ptsz and friends.
#include <cuda_runtime_api.h>

#include "tests/cuda/ptsz_calls.h"

#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "build this file with -DCUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif

int ptsz_malloc_async(void** p, size_t bytes) { return cudaMallocAsync(p, bytes, nullptr); }
int ptsz_free_async(void* p) { return cudaFreeAsync(p, nullptr); }
int ptsz_malloc_from_pool(void** p, size_t bytes, cudaMemPool_t pool) {
  return cudaMallocFromPoolAsync(p, bytes, pool, nullptr);
}
int ptsz_get_driver_entry_point(const char* symbol, void** fn) {
  cudaDriverEntryPointQueryResult status;
  return cudaGetDriverEntryPoint(symbol, fn, cudaEnableDefault, &status);
}
