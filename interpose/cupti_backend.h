// The CUPTI backend's internals, shared by cupti_backend.cc (loading,
// subscription, resource callbacks, flushing) and cupti_records.cc (activity
// buffers and the events made from their records). docs/cuda.md, "CUPTI",
// has the long form; nothing here is exported.
//
// libcupti is opened at run time (dlopen + dlsym), never linked: the library
// works the same where CUPTI is absent, and every function below may be
// missing from an older CUPTI (each use checks).
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>

namespace psc::interpose::cupti {

struct Functions {
  decltype(&cuptiGetVersion) get_version;
  decltype(&cuptiGetResultString) result_string;
  decltype(&cuptiSubscribe) subscribe;
  decltype(&cuptiSubscribe_v2) subscribe_v2;  // CUDA 13: names us and the slot's holder
  decltype(&cuptiEnableDomain) enable_domain;
  decltype(&cuptiGetContextId) context_id;
  decltype(&cuptiGetDeviceId) device_id;
  decltype(&cuptiGetStreamIdEx) stream_id_ex;
  decltype(&cuptiGetStreamId) stream_id;
  decltype(&cuptiGetTimestamp) timestamp;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks;
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp;
  decltype(&cuptiActivityEnableAllocationSource) enable_allocation_source;
  decltype(&cuptiActivityEnable) enable;
  decltype(&cuptiActivityFlushAll) flush_all;
  decltype(&cuptiActivityFlushPeriod) flush_period;
  decltype(&cuptiActivityGetNextRecord) next_record;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records;
};
// Filled once by the starting thread before any callback is registered.
extern Functions g_fn;

// Added to CUPTI timestamps to put them on the trace's clock: 0 when CUPTI
// takes its timestamps from our callback (CLOCK_MONOTONIC), else the offset
// measured at start between our clock and cuptiGetTimestamp().
extern int64_t g_clock_offset_ns;
inline uint64_t trace_time(uint64_t cupti_ns) {
  return cupti_ns ? static_cast<uint64_t>(static_cast<int64_t>(cupti_ns) + g_clock_offset_ns) : 0;
}

// ---- cupti_backend.cc ------------------------------------------------------------

// Starts the backend once per process (after cuInit; again from the device
// sampler if cuInit went unseen). Cheap when already tried.
void start_once();

// ---- cupti_records.cc ------------------------------------------------------------

// Activity buffers: mmap'd (the process's heap may be hooked), recycled.
void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size, size_t valid);

// CUPTI's (context id, stream id) -> the stream's handle, from the resource
// callbacks, so records carry the handle the hooks record. 0 when unknown.
void remember_stream(uint32_t context_id, uint32_t stream_id, uint64_t handle);
uint64_t stream_handle(uint32_t context_id, uint32_t stream_id);

// A fork child has no CUPTI session: its tables start empty.
void forget_records_in_child();

}  // namespace psc::interpose::cupti
