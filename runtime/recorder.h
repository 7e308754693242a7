// The recorder's internal API: what hooks in interpose/ call. Nothing here is
// exported from the preloaded library; the public C API is peakscope.h.
//
// Cost: each record_* call is one clock read, one atomic increment for the
// global sequence number and one store into the calling thread's buffer. No
// lock, no heap, no formatting, no syscall on that path. First use on a thread
// and a full buffer take an out-of-line slow path.
#pragma once

#include <cstdint>

#include "format/event.h"

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

// An event learnt after the fact (CUPTI activity records, delivered in
// batches on CUPTI's thread): recorded now, so `seq` says when the recorder
// learnt it, with `time_ns` set to when it happened. It carries
// kFlagDeferred and range 0: consumers place it by time, not by sequence.
struct DeferredRecord {
  EventKind kind;    // kAlloc, kFree, kMark, kCounter
  uint64_t time_ns;  // CLOCK_MONOTONIC, the trace's clock
  uint64_t address = 0;
  uint64_t bytes = 0;  // size, or the counter's value
  uint64_t stream = 0;
  const char* name = nullptr;  // mark / counter name, or an allocation's source library
  const char* payload = nullptr;
  int16_t device = -1;
  MemoryKind memory = MemoryKind::kNone;
  Api api = Api::kNone;
};
void record_deferred(const DeferredRecord& record);

// What a range-boundary hook is told: the event just recorded, the range id
// (start/end) and the interned name of the range opened or closed (0 for an
// end, whose name the recorder does not know).
struct RangeBoundary {
  EventKind kind;  // kRangePush, kRangePop, kRangeStart, kRangeEnd
  uint64_t id;
  uint32_t name;
};

// Called on the annotating thread right after each range boundary (push, pop,
// start, end) is recorded. interpose/ installs them: pool sampling once a
// process has used a pool, device-level samples at wave and layer boundaries.
// Costs a load and a branch per slot when none is set. False when all
// kMaxRangeBoundaryHooks slots are taken.
constexpr int kMaxRangeBoundaryHooks = 4;
using RangeBoundaryHook = void (*)(const RangeBoundary& boundary);
bool add_range_boundary_hook(RangeBoundaryHook hook);

// Called by flush() before it waits for the writer, and on the way out through
// _exit, so that a source holding events outside the recorder (CUPTI's
// activity buffers) can hand them over first. At most one.
using FlushHook = void (*)();
void set_flush_hook(FlushHook hook);
void run_flush_hook();

// Blocks until everything recorded so far is in the file (bounded wait).
void flush();

// What a hook's pthread_atfork child handler does, for a child that no fork
// handler told (a raw clone without CLONE_VM): called when such a child takes
// the recorder over (runtime/state.h, own_recorder), before it records. False
// when all kMaxRawCloneHooks slots are taken.
constexpr int kMaxRawCloneHooks = 4;
using RawCloneHook = void (*)();
bool add_raw_clone_hook(RawCloneHook hook);

// The pid of the process that owns the recorder's state (runtime/state.h,
// own_recorder): a hook's exit-time work runs only where getpid() is it, never
// in a vfork child running its parent's atexit handlers.
int32_t recorder_owner();

// Around an exec (interpose/exec_hooks.cc). prepare_exec() writes everything
// recorded so far and closes the trace, marked as ended by exec; the new image
// writes a file of its own. True when it did; then, if exec returns (it
// failed), exec_failed() reopens the trace where it was.
bool prepare_exec();
void exec_failed();

}  // namespace psc::rt
