// The names of an event's enumerations (traces/reader.h), as the report,
// the exporters and messages print them.
#include "traces/reader.h"

namespace psc {

const char* event_kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::kAlloc: return "alloc";
    case EventKind::kFree: return "free";
    case EventKind::kRangePush: return "range_push";
    case EventKind::kRangePop: return "range_pop";
    case EventKind::kMark: return "mark";
    case EventKind::kRangeStart: return "range_start";
    case EventKind::kRangeEnd: return "range_end";
    case EventKind::kCounter: return "counter";
    case EventKind::kMap: return "map";
    case EventKind::kUnmap: return "unmap";
  }
  return "unknown";
}

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kNone: return "none";
    case MemoryKind::kHost: return "host";
    case MemoryKind::kDevice: return "device";
    case MemoryKind::kManaged: return "managed";
    case MemoryKind::kPinnedHost: return "pinned_host";
    case MemoryKind::kPool: return "pool";
    case MemoryKind::kVmmPhysical: return "vmm_physical";
    case MemoryKind::kRegisteredHost: return "registered_host";
  }
  return "unknown";
}

const char* api_name(Api api) {
  switch (api) {
    case Api::kNone: return "none";
    case Api::kPscApi: return "psc";
    case Api::kNvtx: return "nvtx";
    case Api::kPosixMemalign: return "posix_memalign";
    case Api::kAlignedAlloc: return "aligned_alloc";
    case Api::kMemalign: return "memalign";
    case Api::kValloc: return "valloc";
    case Api::kPvalloc: return "pvalloc";
    case Api::kRealloc: return "realloc";
    case Api::kLibcFree: return "free";
    case Api::kCudaMalloc: return "cudaMalloc";
    case Api::kCudaFree: return "cudaFree";
    case Api::kCudaMallocAsync: return "cudaMallocAsync";
    case Api::kCudaFreeAsync: return "cudaFreeAsync";
    case Api::kCudaMallocFromPoolAsync: return "cudaMallocFromPoolAsync";
    case Api::kCudaMallocManaged: return "cudaMallocManaged";
    case Api::kCudaMallocHost: return "cudaMallocHost";
    case Api::kCudaHostAlloc: return "cudaHostAlloc";
    case Api::kCudaFreeHost: return "cudaFreeHost";
    case Api::kCudaHostRegister: return "cudaHostRegister";
    case Api::kCudaHostUnregister: return "cudaHostUnregister";
    case Api::kCuMemAlloc: return "cuMemAlloc";
    case Api::kCuMemFree: return "cuMemFree";
    case Api::kCuMemAllocAsync: return "cuMemAllocAsync";
    case Api::kCuMemFreeAsync: return "cuMemFreeAsync";
    case Api::kCuMemAllocFromPoolAsync: return "cuMemAllocFromPoolAsync";
    case Api::kCuMemAllocManaged: return "cuMemAllocManaged";
    case Api::kCuMemHostAlloc: return "cuMemHostAlloc";
    case Api::kCuMemFreeHost: return "cuMemFreeHost";
    case Api::kCuMemCreate: return "cuMemCreate";
    case Api::kCuMemRelease: return "cuMemRelease";
    case Api::kCuMemMap: return "cuMemMap";
    case Api::kCuMemUnmap: return "cuMemUnmap";
    case Api::kCuMemAllocHost: return "cuMemAllocHost";
    case Api::kCuMemHostRegister: return "cuMemHostRegister";
    case Api::kCuMemHostUnregister: return "cuMemHostUnregister";
    case Api::kTorchPluggable: return "torch_pluggable";
    case Api::kImported: return "imported";
    case Api::kCupti: return "cupti";
  }
  return "unknown";
}

const char* drop_reason_name(format::DropReason reason) {
  const auto index = static_cast<size_t>(reason);
  return index < std::size(format::kDropReasonNames) ? format::kDropReasonNames[index] : "unknown";
}

}  // namespace psc
