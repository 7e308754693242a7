// The test-only control API of the CUPTI double (tests/fakes/fake_cupti.cc,
// built as $(BUILD)/fakes/cupti/libcupti.so.13). A client scripts what a real
// CUPTI would report — activity records, resource callbacks, buffer
// deliveries — and the backend in the recorder reads it through the ordinary
// CUPTI API. Clients find these with dlsym, so they also run where the double
// is absent (then the functions are not there).
//
// Set before the process starts (environment):
//   FAKE_CUPTI_SUBSCRIBER_TAKEN=<tool>  cuptiSubscribe* fail with
//                                       CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
//                                       and, for _v2, name <tool> as the holder
//   FAKE_CUPTI_VERSION=<n>              what cuptiGetVersion reports
// Built with -DFAKE_CUPTI_OLD ($(BUILD)/fakes/cupti_old/): no cuptiSubscribe_v2,
// cuptiActivityEnableAllocationSource or cuptiActivityRegisterTimestampCallback,
// as in an older CUPTI; timestamps then come from CLOCK_REALTIME, as CUPTI's do.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct FakeCuptiMemory {
  int release;      // 0: CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 1: _RELEASE
  int memory_kind;  // CUpti_ActivityMemoryKind
  uint64_t address;
  uint64_t bytes;
  uint64_t timestamp;  // 0: now, from the registered timestamp callback (else CUPTI's own clock)
  uint32_t device;
  uint32_t context_id;
  uint32_t stream_id;  // CUPTI_INVALID_STREAM_ID (0xffffffff) when not stream-ordered
  int pool_type;       // CUpti_ActivityMemoryPoolType, 0 for none
  uint64_t pool_address;
  const char* source;  // the allocating library; dropped unless allocation sources were enabled
};

struct FakeCuptiPool {
  int operation;  // CUpti_ActivityMemoryPoolOperationType
  uint64_t address;
  uint32_t device;
  uint64_t size;
  uint64_t utilized;
  uint64_t timestamp;
};

struct FakeCuptiKernel {
  const char* name;
  uint64_t start, end;  // 0: now
  uint32_t device;
  uint32_t context_id;
  uint32_t stream_id;
  uint64_t local_memory_bytes;
};

// Records wait in the double until a flush (the recorder's, or
// fake_cupti_deliver). Only kinds the subscriber enabled are kept, as CUPTI would.
void fake_cupti_memory(const struct FakeCuptiMemory* record);
void fake_cupti_pool(const struct FakeCuptiPool* record);
void fake_cupti_kernel(const struct FakeCuptiKernel* record);

// Resource callbacks, fired now on the calling thread (as CUPTI fires them
// inside the driver call that made the resource).
void fake_cupti_context(int created, void* context, uint32_t device);
void fake_cupti_stream(int created, void* context, void* stream);
void fake_cupti_module(int loaded, void* context, uint32_t module_id, size_t cubin_bytes);

// Hands every waiting record over through the buffer callbacks: on a thread
// of the double's own (joined before returning), as CUPTI's worker does, or
// on the calling thread.
void fake_cupti_deliver(int on_own_thread);

// CUPTI's ids, as cuptiGetContextId / cuptiGetStreamIdEx answer them.
uint32_t fake_cupti_context_id(void* context);
uint32_t fake_cupti_stream_id(void* context, void* stream);

// The double's counts: "subscribe", "subscribe_v2", "enable.<kind>",
// "allocation_source", "timestamp_callback", "flush_all", "flush_forced",
// "flush_period_ms", "records_queued", "records_delivered", "buffers",
// "pending". -1 for an unknown name.
long long fake_cupti_count(const char* name);

#ifdef __cplusplus
}
#endif
