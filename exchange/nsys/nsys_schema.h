// What peakscope knows of the schema of `nsys export --type sqlite`, shared by
// the exporter (export_nsys_sqlite.cc) and the importer (import_nsys_sqlite.cc).
//
// Sources (docs/viewers.md lists them): the tables as Nsight Systems 2024.6.2
// writes them (META_DATA_EXPORT: EXPORT_SCHEMA_VERSION 3.16.1); the enum values
// from NVIDIA's "SQLite Schema Event Values" (Nsight Systems Analysis Guide)
// and the exporter docs' ENUM tables. These are Nsight's values, not CUPTI's:
// ENUM_CUDA_MEM_KIND here has PAGEABLE = 0 and DEVICE = 2, where CUPTI's
// CUpti_ActivityMemoryKind has UNKNOWN = 0 and DEVICE = 3.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "format/event.h"

namespace psc::nsys {

// ENUM_NSYS_EVENT_TYPE (NVTX rows of NVTX_EVENTS).
constexpr int kNvtxCategory = 33;
constexpr int kNvtxMark = 34;
constexpr int kNvtxThread = 39;
constexpr int kNvtxPushPopRange = 59;
constexpr int kNvtxStartEndRange = 60;
constexpr int kNvtxDomainCreate = 75;
constexpr int kNvtxDomainDestroy = 76;
// Ranges imported from NVTXT files into a report: the same meaning.
constexpr int kNvtxtPushPopRange = 70;
constexpr int kNvtxtStartEndRange = 71;

// ENUM_CUDA_MEM_KIND (CUDA_GPU_MEMORY_USAGE_EVENTS.memKind).
constexpr int kMemPageable = 0;
constexpr int kMemPinned = 1;
constexpr int kMemDevice = 2;
constexpr int kMemArray = 3;
constexpr int kMemManaged = 4;
constexpr int kMemDeviceStatic = 5;
constexpr int kMemManagedStatic = 6;
constexpr int kMemUnknown = 7;

// ENUM_CUDA_DEV_MEM_EVENT_OPER (memoryOperationType).
constexpr int kOperAllocation = 0;
constexpr int kOperDeallocation = 1;

// ENUM_NSYS_EVENT_CLASS (CUPTI_ACTIVITY_KIND_RUNTIME.eventClass).
constexpr int kClassCudaRuntime = 0;
constexpr int kClassCudaDriver = 1;

// Serialized GlobalId: hardware and VM ids above bit 48, the process id in
// bits 24..47, the thread id in bits 0..23 (Nsight's "Serialized process and
// thread identifiers"; globalPid is the globalTid of thread 0).
constexpr int64_t global_tid(uint32_t pid, uint32_t tid) {
  return (static_cast<int64_t>(pid & 0xFFFFFF) << 24) | static_cast<int64_t>(tid & 0xFFFFFF);
}
constexpr int64_t global_pid(uint32_t pid) { return global_tid(pid, 0); }
// The VM's id (ANALYSIS_DETAILS.globalVid): our ids carry hardware and VM 0.
constexpr int64_t global_vid() { return 0; }
constexpr uint32_t pid_of(int64_t global) { return static_cast<uint32_t>((global >> 24) & 0xFFFFFF); }
constexpr uint32_t tid_of(int64_t global) { return static_cast<uint32_t>(global & 0xFFFFFF); }

inline int mem_kind_of(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHost: return kMemPageable;
    case MemoryKind::kPinnedHost:
    case MemoryKind::kRegisteredHost: return kMemPinned;
    case MemoryKind::kDevice:
    case MemoryKind::kPool:
    case MemoryKind::kVmmPhysical: return kMemDevice;
    case MemoryKind::kManaged: return kMemManaged;
    case MemoryKind::kNone: return kMemUnknown;
  }
  return kMemUnknown;
}

inline MemoryKind memory_kind_of(int mem_kind, bool from_pool) {
  switch (mem_kind) {
    case kMemPageable: return MemoryKind::kHost;
    case kMemPinned: return MemoryKind::kPinnedHost;
    case kMemDevice: return from_pool ? MemoryKind::kPool : MemoryKind::kDevice;
    case kMemArray:
    case kMemDeviceStatic: return MemoryKind::kDevice;
    case kMemManaged:
    case kMemManagedStatic: return MemoryKind::kManaged;
  }
  return MemoryKind::kNone;
}

// The CUDA API a runtime row names ("cudaMalloc_v3020" -> kCudaMalloc);
// kImported when it is not one peakscope hooks.
Api api_of(std::string_view function);
bool is_driver_api(Api api);

// CREATE TABLE statements for the tables the exporter writes, with Nsight's
// columns in Nsight's order (plus peakscope's own two tables, named
// PEAKSCOPE_*, which Nsight scripts never look at).
const std::string& schema();

}  // namespace psc::nsys
