// Per-thread event buffers: single-producer (the thread) single-consumer (the
// writer) rings in mmap'd memory, and the registry the writer walks.
//
// Ordering contract with the writer (see trace_sink.cc, "watermark"): a producer
// sets `busy` (seq_cst) before taking its sequence number and clears it after
// publishing. A writer that reads the global counter G and then sees busy == 0
// knows every event of that thread with seq < G is already published.
//
// Children: a buffer's memory is MADV_WIPEONFORK, so a child made by fork or
// clone without CLONE_VM sees every buffer zeroed: capacity 0, which the
// producer's room check takes for "full" and so reaches the slow path, where a
// child that no fork handler told (raw clone) takes the recorder over at its
// first event (lifecycle.cc): the hot path pays nothing for it. The unwritten
// events were the parent's, which writes them; a vfork child shares the
// memory and sees nothing wiped.
#pragma once

#include <atomic>
#include <cstdint>

#include "format/event.h"

namespace psc::rt {

constexpr uint32_t kMaxThreads = 1024;

// kClaimed: a thread is taking the buffer over; the writer ignores it until
// the new owner's tid is stored, so it cannot mistake the old owner's death
// for the new one's.
enum class BufferState : uint32_t { kFree = 0, kActive = 1, kClaimed = 2 };

struct alignas(64) ThreadBuffer {
  // Producer-owned line.
  std::atomic<uint64_t> head{0};  // events published (monotonic count)
  uint64_t cached_tail = 0;       // producer's last view of tail
  std::atomic<uint32_t> busy{0};
  uint32_t index = 0;  // thread index in the trace
  Event* slots = nullptr;
  uint32_t mask = 0;      // capacity - 1
  uint32_t capacity = 0;  // 0: wiped in a child (see above): the room check fails

  // Writer-owned line.
  alignas(64) std::atomic<uint64_t> tail{0};  // events consumed
  uint64_t floor_seq = 0;                     // no future event of this thread has seq <= floor_seq
  bool announced = false;                     // THREAD record written for the current owner

  // Ownership, shared.
  alignas(64) std::atomic<uint32_t> state{0};  // BufferState
  std::atomic<int32_t> os_tid{0};
  char name[16] = {};
};

// Registry: buffers are created on demand and reused after their thread exits.
extern ThreadBuffer* g_buffers[kMaxThreads];
extern std::atomic<uint32_t> g_buffer_count;
// Global sequence counter: the last seq handed out.
extern std::atomic<uint64_t> g_seq;

// Finds or creates a buffer for the calling thread (slow path). nullptr when
// every slot is taken: by live threads, or by threads that have exited since
// the writer's last cycle, which frees their buffers once everything they
// recorded is drained (trace_sink.cc, drain). Only the writer frees a buffer.
ThreadBuffer* attach_buffer(int32_t os_tid);

// Whether the thread with this id (of this process) has exited. One system
// call (tgkill with signal 0).
bool thread_exited(int32_t os_tid);

// Whether some buffer in use belongs to a thread that has exited: the
// writer's next cycle frees it, so a thread that found no slot may wait for
// that instead of losing its events (recorder.cc, wait_for_slot).
bool a_buffer_awaits_freeing();

// In a child: every buffer empty again (wiped or not) and free, except
// `mine`, which the calling thread keeps; with retire_others, the others are
// never handed out again and keep capacity 0, so that a thread still holding
// one (it was the child's first, and another took the recorder over) takes
// the slow path and attaches afresh.
void reinit_buffers_in_child(ThreadBuffer* mine, int32_t os_tid, bool retire_others);

}  // namespace psc::rt
