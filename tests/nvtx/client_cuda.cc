// NVTX instance "cuda": the CUDA driver and runtime resource-naming calls
// (nvToolsExtCuda.h, nvToolsExtCudaRt.h; see nvtx_clients.h). Handles are
// opaque to NVTX: the tests pass made-up values, no CUDA is needed.
#include <nvtx3/nvToolsExtCuda.h>
#include <nvtx3/nvToolsExtCudaRt.h>

#include "tests/nvtx/nvtx_clients.h"

namespace {

template <typename Handle>
Handle handle(uint64_t value) {
  return reinterpret_cast<Handle>(static_cast<uintptr_t>(value));
}

}  // namespace

extern "C" {

void cuda_name_cu_device(int device, const char* name) { nvtxNameCuDeviceA(device, name); }
void cuda_name_cu_context(uint64_t context, const char* name) { nvtxNameCuContextA(handle<CUcontext>(context), name); }
void cuda_name_cu_context_wide(uint64_t context, const wchar_t* name) {
  nvtxNameCuContextW(handle<CUcontext>(context), name);
}
void cuda_name_cu_stream(uint64_t stream, const char* name) { nvtxNameCuStreamA(handle<CUstream>(stream), name); }
void cuda_name_cu_event_wide(uint64_t event, const wchar_t* name) { nvtxNameCuEventW(handle<CUevent>(event), name); }
void cuda_name_device(int device, const char* name) { nvtxNameCudaDeviceA(device, name); }
void cuda_name_stream(uint64_t stream, const char* name) { nvtxNameCudaStreamA(handle<cudaStream_t>(stream), name); }
void cuda_name_stream_wide(uint64_t stream, const wchar_t* name) {
  nvtxNameCudaStreamW(handle<cudaStream_t>(stream), name);
}
void cuda_name_event(uint64_t event, const char* name) { nvtxNameCudaEventA(handle<cudaEvent_t>(event), name); }
}
