#include "runtime/buffers.h"

#include <pthread.h>

#include <new>

#include "runtime/config.h"
#include "runtime/sys.h"

namespace psc::rt {

ThreadBuffer* g_buffers[kMaxThreads];
std::atomic<uint32_t> g_buffer_count{0};
std::atomic<uint64_t> g_seq{0};

namespace {

void take(ThreadBuffer* b, int32_t os_tid) {
  b->os_tid.store(os_tid, std::memory_order_relaxed);
  b->name[0] = 0;
  pthread_getname_np(pthread_self(), b->name, sizeof b->name);
  b->cached_tail = b->tail.load(std::memory_order_acquire);
}

size_t buffer_bytes() { return sizeof(ThreadBuffer) + size_t{g_config.buffer_events} * sizeof(Event); }

// A buffer's fixed fields, at `memory`, everything else empty. All buffers
// have the same capacity, so a wiped one is rebuilt from its place alone.
ThreadBuffer* construct(void* memory, uint32_t index) {
  auto* b = new (memory) ThreadBuffer();
  b->slots = reinterpret_cast<Event*>(static_cast<char*>(memory) + sizeof(ThreadBuffer));
  b->capacity = g_config.buffer_events;
  b->mask = b->capacity - 1;
  b->index = index;
  return b;
}

ThreadBuffer* create(uint32_t index, int32_t os_tid) {
  void* memory = sys::map_pages(buffer_bytes());
  if (!memory) return nullptr;
  // Without it (kernels before 4.14) a raw clone child cannot be told from a
  // vfork child: it never takes the recorder over, and nothing it records is
  // written (lifecycle.cc, own_recorder); it never waits for a writer either.
  madvise(memory, buffer_bytes(), MADV_WIPEONFORK);
  ThreadBuffer* b = construct(memory, index);
  b->floor_seq = g_seq.load(std::memory_order_seq_cst);
  take(b, os_tid);
  b->state.store(static_cast<uint32_t>(BufferState::kActive), std::memory_order_release);
  return b;
}

}  // namespace

bool thread_exited(int32_t os_tid) {
  return os_tid > 0 && syscall(SYS_tgkill, getpid(), os_tid, 0) != 0 && errno == ESRCH;
}

bool a_buffer_awaits_freeing() {
  const uint32_t count = g_buffer_count.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < count; ++i) {
    ThreadBuffer* b = __atomic_load_n(&g_buffers[i], __ATOMIC_ACQUIRE);
    if (b && b->state.load(std::memory_order_acquire) == static_cast<uint32_t>(BufferState::kActive) &&
        thread_exited(b->os_tid.load(std::memory_order_relaxed)))
      return true;
  }
  return false;
}

ThreadBuffer* attach_buffer(int32_t os_tid) {
  // Reuse a buffer whose thread has exited and whose events are all written.
  const uint32_t count = g_buffer_count.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < count; ++i) {
    ThreadBuffer* b = __atomic_load_n(&g_buffers[i], __ATOMIC_ACQUIRE);
    if (!b) continue;
    uint32_t expected = static_cast<uint32_t>(BufferState::kFree);
    if (b->state.compare_exchange_strong(expected, static_cast<uint32_t>(BufferState::kClaimed),
                                         std::memory_order_acq_rel)) {
      take(b, os_tid);
      b->state.store(static_cast<uint32_t>(BufferState::kActive), std::memory_order_release);
      return b;
    }
  }
  // Or create a new one at the next index.
  uint32_t index = g_buffer_count.load(std::memory_order_acquire);
  while (index < kMaxThreads) {
    if (g_buffer_count.compare_exchange_weak(index, index + 1, std::memory_order_acq_rel)) {
      ThreadBuffer* b = create(index, os_tid);
      // Publishing a null slot is fine: the writer skips it.
      __atomic_store_n(&g_buffers[index], b, __ATOMIC_RELEASE);
      return b;
    }
  }
  return nullptr;
}

void reinit_buffers_in_child(ThreadBuffer* mine, int32_t os_tid, bool retire_others) {
  const uint32_t count = g_buffer_count.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < count; ++i) {
    ThreadBuffer* b = g_buffers[i];
    if (!b) continue;
    construct(b, i);
    if (b == mine) {
      take(b, os_tid);
      b->state.store(static_cast<uint32_t>(BufferState::kActive), std::memory_order_relaxed);
    } else if (retire_others) {
      b->capacity = 0;
      b->state.store(static_cast<uint32_t>(BufferState::kClaimed), std::memory_order_relaxed);
    }
  }
}

}  // namespace psc::rt
