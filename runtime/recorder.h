// The recorder's internal API: what hooks in interpose/ call. Nothing here is
// exported from the preloaded library; the public C API is peakscope.h.
//
// Cost: each record_* call is one clock read, one atomic increment for the
// global sequence number and one store into the calling thread's buffer. No
// lock, no heap, no formatting, no syscall on that path. First use on a thread
// and a full buffer take an out-of-line slow path.
#pragma once

#include <cstdint>

#include "runtime/event.h"

namespace psc::rt {

// Thread-local re-entry guard. Every hook holds one for its whole body: a hooked
// call made while another is running on this thread (cudaMalloc -> cuMemAlloc)
// sees depth() > 1 and records with kFlagNested, so analysis counts it once.
// The recorder itself never records while depth() is already > 0 inside its own
// slow paths.
class HookGuard {
 public:
  HookGuard();
  ~HookGuard();
  HookGuard(const HookGuard&) = delete;
  HookGuard& operator=(const HookGuard&) = delete;
  int depth() const { return depth_; }
  bool nested() const { return depth_ > 1; }
  uint8_t nested_flag() const { return nested() ? kFlagNested : 0; }

 private:
  int depth_;
};

// True once the recorder is initialised and recording in this process (false
// in a fork child told to stop, or while recording is disabled).
bool enabled();

struct MemoryRecord {
  EventKind kind;  // kAlloc, kFree, kMap, kUnmap
  uint64_t address;
  uint64_t bytes;  // 0 on a free when the hook cannot know the size
  MemoryKind memory;
  Api api;
  int16_t device = -1;
  uint64_t stream = 0;
  uint8_t flags = 0;  // EventFlag
};

// An allocation is recorded after the real call returns; a free before the
// real free runs (so the address cannot be reused in between).
void record_memory(const MemoryRecord& record);

void record_range_push(const char* name, Api api);
void record_range_pop(Api api);
void record_mark(const char* name, const char* json_payload, Api api);
// Process-wide ranges that may end on another thread (NVTX start/end).
void record_range_start(uint64_t id, const char* name, Api api);
void record_range_end(uint64_t id, Api api);
// A sampled value, e.g. a memory pool's reserved bytes at a range boundary.
void record_counter(const char* name, uint64_t value, int16_t device, Api api);

// Called on the annotating thread right after each range boundary (push, pop,
// start, end) is recorded. At most one; interpose/ installs it to sample memory
// pools once a process has used one. Costs one load and a branch when unset.
using RangeBoundaryHook = void (*)();
void set_range_boundary_hook(RangeBoundaryHook hook);

// Blocks until everything recorded so far is in the file (bounded wait).
void flush();

}  // namespace psc::rt
