// psc_record_tensor_event (peakscope.h): tensor lifetimes from a caching
// allocator's own report, for PyTorch's native allocator whose tensors never
// reach a hook. The events go in at the allocated level (api psc, the public
// C API, which makes no other memory events; memory kind device) and the segments the cudaMalloc /
// VMM hooks see stay at the reserved level: the analysis replays each level on
// its own and reads the allocated one when it has any, so a tensor is counted
// inside its segment, never on top of it.
//
// Cost: one recorded event, like a hook. Called with PyTorch's allocator lock
// held: nothing here takes a lock or calls back into CUDA.
#include "peakscope/peakscope.h"
#include "runtime/allocated_level.h"
#include "runtime/recorder.h"
#include "runtime/sys.h"

PSC_EXPORT void psc_record_tensor_event(int action, unsigned long long address, unsigned long long bytes, int device,
                                        unsigned long long stream) {
  if (action != PSC_TENSOR_ALLOC && action != PSC_TENSOR_FREE) return;
  if (!psc::rt::enabled() || address == 0) return;
  psc::rt::HookGuard guard;  // an allocation made by a hook below us is that hook's, not ours
  psc::rt::MemoryRecord record{};
  record.kind = action == PSC_TENSOR_ALLOC ? psc::EventKind::kAlloc : psc::EventKind::kFree;
  record.address = address;
  record.bytes = bytes;
  record.memory = psc::MemoryKind::kDevice;
  record.api = psc::Api::kPscApi;
  record.device = static_cast<int16_t>(device);
  record.stream = stream;
  record_allocated_level_memory(record);
}
