// Process-wide and per-thread recorder state shared by recorder.cc (hot path),
// writer.cc and lifecycle.cc.
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime/buffers.h"

namespace psc::rt {

constexpr int kMaxRangeDepth = 64;

enum class Phase : uint32_t {
  kUninitialised = 0,
  kRecording = 1,
  kStopped = 2,  // after the final flush, or disabled (config, fork policy)
};
extern std::atomic<uint32_t> g_phase;

// Starts at all-zero (static TLS, initial-exec model): first use never allocates.
struct ThreadState {
  ThreadBuffer* buffer;
  int32_t guard_depth;  // HookGuard nesting
  int32_t range_depth;  // may exceed kMaxRangeDepth; deeper names are not kept
  uint32_t ranges[kMaxRangeDepth];
  int32_t os_tid;
  bool internal;  // the writer thread, or the recorder's own slow paths: never record
};
extern __thread ThreadState t_state;

inline uint32_t innermost_range(const ThreadState& t) {
  if (t.range_depth <= 0) return 0;
  return t.range_depth <= kMaxRangeDepth ? t.ranges[t.range_depth - 1] : t.ranges[kMaxRangeDepth - 1];
}

// Forgets every thread's buffer except the calling thread's (fork child).
void reset_buffers_after_fork();

}  // namespace psc::rt
