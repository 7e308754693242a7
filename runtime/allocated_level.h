// Recording at the allocated level whatever PEAKSCOPE_LEVEL says: for tensors
// reported inside segments that the hooks record at the reserved level
// (psc_record_tensor_event, runtime/tensor_events.cc), so the two levels of
// one process never mix. Only that entry point uses it.
#pragma once

#include "runtime/recorder.h"

namespace psc::rt {

void record_allocated_level_memory(const MemoryRecord& record);

}  // namespace psc::rt
