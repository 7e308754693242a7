// Per-thread-default-stream spellings (see ptsz_calls.cc).
#pragma once

#include <cuda_runtime_api.h>

int ptsz_malloc_async(void** p, size_t bytes);
int ptsz_free_async(void* p);
int ptsz_malloc_from_pool(void** p, size_t bytes, cudaMemPool_t pool);
int ptsz_get_driver_entry_point(const char* symbol, void** fn);
