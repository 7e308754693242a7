// Process-wide and per-thread recorder state shared by recorder.cc (hot path),
// the trace sink (trace_sink.cc, sink_file.cc) and lifecycle.cc.
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
// retire_others: another thread of this child may still hold one of them
// (a raw clone child taken over by a thread other than its first): they are
// never handed out again, and their old holder attaches afresh (buffers.h).
void reset_buffers_after_fork(bool retire_others);

// Runs the hooks add_raw_clone_hook() took (recorder.cc), in a raw clone child.
void run_raw_clone_hooks();

// True in the process that owns the recorder's state (lifecycle.cc): the one
// that initialised it, or a fork child. A child that no fork handler told (a
// raw clone without CLONE_VM) takes the state over here, once, on the first
// slow path it reaches: a writer thread of its own when start_writer (else
// none: it is on its way out) and, at its first event, a file of its own.
// False in a vfork child, which shares this memory and must not touch it,
// and, on kernels without MADV_WIPEONFORK, in any child, which cannot be told
// from one. One getpid() when owned: slow paths only.
bool own_recorder(bool start_writer);

}  // namespace psc::rt
