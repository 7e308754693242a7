// The recording hot path. Per event: one TLS read, one clock read (rdtsc where
// the TSC is invariant, see clock.h), one seq_cst store (busy), one atomic
// increment (sequence), a 64-byte fill, two release stores. Everything else is
// out of line.
#include "runtime/recorder.h"

#include "runtime/allocated_level.h"
#include "runtime/clock.h"
#include "runtime/config.h"
#include "runtime/drops.h"
#include "runtime/state.h"
#include "runtime/strings.h"
#include "runtime/sys.h"
#include "runtime/trace_sink.h"

namespace psc::rt {

std::atomic<uint32_t> g_phase{0};
__thread ThreadState t_state;
std::atomic<uint64_t> g_drops[format::kDropReasonCount];

namespace {

std::atomic<RangeBoundaryHook> g_range_boundary_hooks[kMaxRangeBoundaryHooks];
std::atomic<FlushHook> g_flush_hook{nullptr};
std::atomic<RawCloneHook> g_raw_clone_hooks[kMaxRawCloneHooks];

inline void after_range_boundary(EventKind kind, uint64_t id, uint32_t name) {
  const RangeBoundary boundary{kind, id, name};
  for (auto& slot : g_range_boundary_hooks) {
    RangeBoundaryHook hook = slot.load(std::memory_order_acquire);
    if (!hook) break;  // slots fill from the front
    hook(boundary);
  }
}

struct Fields {
  EventKind kind;
  uint64_t time_ns = 0;  // 0: now (a constant for every caller but record_deferred)
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t stream = 0;
  uint32_t name = 0;
  uint32_t payload = 0;
  int16_t device = -1;
  MemoryKind memory = MemoryKind::kNone;
  Api api = Api::kNone;
  uint8_t flags = 0;
  bool no_range = false;  // deferred events: the range open now is not theirs
};

bool recording() { return g_phase.load(std::memory_order_relaxed) == static_cast<uint32_t>(Phase::kRecording); }

// Every slot is taken. The writer frees the buffer of a thread that has
// exited only in its next cycle (up to flush_ms away), so a program that
// starts and ends threads faster than that, never with many alive at once
// (a pool that makes a thread per task), would run out of slots and lose
// events. When some slot's thread has exited, this one wakes the writer
// and waits for that cycle (bounded by max_wait_ms, as a full ring is):
// the limit is then threads alive at once, not threads per cycle. A table
// full of live threads frees nothing: no wait, the event is dropped.
PSC_NOINLINE ThreadBuffer* wait_for_slot(int32_t os_tid) {
  if (!writer_running() || on_writer_thread()) return nullptr;
  const uint64_t deadline = sys::monotonic_ns() + uint64_t{g_config.max_wait_ms} * 1000000ull;
  uint64_t pause_ns = 10000;
  while (recording() && a_buffer_awaits_freeing()) {
    writer_nudge();
    sys::sleep_ns(pause_ns);
    if (ThreadBuffer* b = attach_buffer(os_tid)) return b;
    if (sys::monotonic_ns() > deadline) break;
    if (pause_ns < 1000000) pause_ns *= 2;
  }
  return nullptr;
}

PSC_NOINLINE ThreadBuffer* attach_slow(ThreadState& t) {
  // A thread's first event: in a raw clone child this may be the first thing
  // it records, and the buffers are the parent's until it takes them over.
  if (!own_recorder(/*start_writer=*/true)) return nullptr;
  if (!recording()) return nullptr;
  t.internal = true;  // nothing we call here may record
  if (!t.os_tid) t.os_tid = sys::gettid();
  ThreadBuffer* b = attach_buffer(t.os_tid);
  if (!b) b = wait_for_slot(t.os_tid);
  if (!b) count_drop(format::DropReason::kNoThreadSlot);
  t.buffer = b;
  t.internal = false;
  return b;
}

// The buffer is full: wake the writer and wait for room, at most max_wait_ms.
// The back-off grows to 1 ms so that many waiting threads leave the writer
// the processor it needs to drain them.
PSC_NOINLINE bool wait_for_room(ThreadBuffer* b, uint64_t head) {
  // Not in a child that does not own the recorder (a vfork child; a raw clone
  // child where the kernel cannot wipe, see buffers.h): no writer may ever
  // drain this buffer for it, and every event would wait out the limit.
  if (!own_recorder(/*start_writer=*/true)) {
    count_drop(format::DropReason::kBufferFull);
    return false;
  }
  const uint64_t deadline = sys::monotonic_ns() + uint64_t{g_config.max_wait_ms} * 1000000ull;
  uint64_t pause_ns = 10000;
  for (;;) {
    b->cached_tail = b->tail.load(std::memory_order_acquire);
    if (head - b->cached_tail < b->capacity) return true;
    if (on_writer_thread() || g_phase.load(std::memory_order_relaxed) != static_cast<uint32_t>(Phase::kRecording))
      break;
    writer_nudge();
    if (sys::monotonic_ns() > deadline) break;
    sys::sleep_ns(pause_ns);
    if (pause_ns < 1000000) pause_ns *= 2;
  }
  count_drop(format::DropReason::kBufferFull);
  return false;
}

// The room check failed. Either the buffer is full (wait_for_room), or it
// has no capacity at all (buffers.h): wiped, in a child that no fork handler
// told (raw clone), at its first event, which takes the recorder over here
// and so gets this buffer back empty; or retired by such a take-over on
// another thread of the child, when this thread attaches afresh. Returns the
// buffer to record into, nullptr to drop the event.
PSC_NOINLINE ThreadBuffer* make_room(ThreadState& t, ThreadBuffer* b, uint64_t head) {
  if (PSC_LIKELY(b->capacity != 0)) return wait_for_room(b, head) ? b : nullptr;
  if (!own_recorder(/*start_writer=*/true) ||
      g_phase.load(std::memory_order_relaxed) != static_cast<uint32_t>(Phase::kRecording))
    return nullptr;
  if (b->capacity != 0) return b;
  t.buffer = nullptr;
  return attach_slow(t);
}

// The writer must never see busy == 0 while this thread holds a sequence
// number it has not published (buffers.h). That needs the store of busy to be
// ordered before the sequence increment. On x86 the increment is a locked
// instruction, which drains the store buffer first, so a plain store behind a
// compiler fence is enough and saves an xchg per event; elsewhere the store is
// seq_cst.
__attribute__((always_inline)) inline void mark_busy(ThreadBuffer* b) {
#if defined(__x86_64__)
  b->busy.store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
#else
  b->busy.store(1, std::memory_order_seq_cst);
#endif
}

__attribute__((always_inline)) inline void emit(const Fields& f) {
  ThreadState& t = t_state;
  if (PSC_UNLIKELY(g_phase.load(std::memory_order_relaxed) != static_cast<uint32_t>(Phase::kRecording) || t.internal))
    return;
  ThreadBuffer* b = t.buffer;
  if (PSC_UNLIKELY(!b)) {
    b = attach_slow(t);
    if (!b) return;
  }
  uint64_t head = b->head.load(std::memory_order_relaxed);
  if (PSC_UNLIKELY(head - b->cached_tail >= b->capacity)) {
    b = make_room(t, b, head);
    if (!b) return;
    head = b->head.load(std::memory_order_relaxed);
  }
  mark_busy(b);
  Event& e = b->slots[head & b->mask];
  e.seq = g_seq.fetch_add(1, std::memory_order_seq_cst) + 1;
  e.time_ns = f.time_ns ? f.time_ns : event_clock();  // the writer makes ticks ns
  e.address = f.address;
  e.bytes = f.bytes;
  e.stream = f.stream;
  e.thread = b->index;
  e.range = StringId{f.no_range ? 0 : innermost_range(t)};
  e.name = StringId{f.name};
  e.payload = StringId{f.payload};
  e.device = f.device;
  e.kind = f.kind;
  e.memory = f.memory;
  e.api = f.api;
  e.flags = f.flags;
  b->head.store(head + 1, std::memory_order_release);
  b->busy.store(0, std::memory_order_release);
  // Every quarter buffer, make sure the writer is awake.
  if (PSC_UNLIKELY(((head + 1) & (b->mask >> 2)) == 0)) writer_nudge();
}

}  // namespace

HookGuard::HookGuard() : depth_(++t_state.guard_depth) {}
HookGuard::~HookGuard() { --t_state.guard_depth; }

bool enabled() {
  return g_phase.load(std::memory_order_relaxed) == static_cast<uint32_t>(Phase::kRecording) && !t_state.internal;
}

namespace {

// A memory event with `flags` as its flags.
inline void emit_memory(const MemoryRecord& r, uint8_t flags) {
  Fields f{r.kind};
  f.address = r.address;
  f.bytes = r.bytes;
  f.stream = r.stream;
  f.device = r.device;
  f.memory = r.memory;
  f.api = r.api;
  f.flags = flags;
  emit(f);
}

}  // namespace

void record_memory(const MemoryRecord& r) {
  emit_memory(r, g_config.reserved_level ? static_cast<uint8_t>(r.flags | kFlagReserved) : r.flags);
}

void record_range_push(const char* name, Api api) {
  if (!enabled()) return;
  ThreadState& t = t_state;
  const uint32_t id = intern(name);
  if (t.range_depth < kMaxRangeDepth) {
    t.ranges[t.range_depth] = id;
  } else {
    count_drop(format::DropReason::kRangeDepth);
  }
  ++t.range_depth;
  Fields f{EventKind::kRangePush};
  f.name = id;
  f.api = api;
  emit(f);
  after_range_boundary(EventKind::kRangePush, 0, id);
}

void record_range_pop(Api api) {
  if (!enabled()) return;
  ThreadState& t = t_state;
  Fields f{EventKind::kRangePop};
  f.name = innermost_range(t);
  f.api = api;
  emit(f);  // recorded while the range is still innermost
  if (t.range_depth > 0) --t.range_depth;
  after_range_boundary(EventKind::kRangePop, 0, f.name);
}

void record_mark(const char* name, const char* json_payload, Api api) {
  if (!enabled()) return;
  Fields f{EventKind::kMark};
  f.name = intern(name);
  f.payload = json_payload ? intern(json_payload) : 0;
  f.api = api;
  emit(f);
}

void record_range_start(uint64_t id, const char* name, Api api) {
  if (!enabled()) return;
  Fields f{EventKind::kRangeStart};
  f.address = id;
  f.name = intern(name);
  f.api = api;
  emit(f);
  after_range_boundary(EventKind::kRangeStart, id, f.name);
}

void record_range_end(uint64_t id, Api api) {
  Fields f{EventKind::kRangeEnd};
  f.address = id;
  f.api = api;
  emit(f);
  after_range_boundary(EventKind::kRangeEnd, id, 0);
}

bool add_range_boundary_hook(RangeBoundaryHook hook) {
  for (auto& slot : g_range_boundary_hooks) {
    RangeBoundaryHook expected = nullptr;
    if (slot.compare_exchange_strong(expected, hook, std::memory_order_acq_rel) || expected == hook) return true;
  }
  return false;
}

bool add_raw_clone_hook(RawCloneHook hook) {
  for (auto& slot : g_raw_clone_hooks) {
    RawCloneHook expected = nullptr;
    if (slot.compare_exchange_strong(expected, hook, std::memory_order_acq_rel) || expected == hook) return true;
  }
  return false;
}

void run_raw_clone_hooks() {
  for (auto& slot : g_raw_clone_hooks)
    if (RawCloneHook hook = slot.load(std::memory_order_acquire)) hook();
}

void set_flush_hook(FlushHook hook) { g_flush_hook.store(hook, std::memory_order_release); }

void run_flush_hook() {
  if (FlushHook hook = g_flush_hook.load(std::memory_order_acquire)) hook();
}

void record_deferred(const DeferredRecord& r) {
  if (!enabled()) return;
  Fields f{r.kind};
  f.time_ns = r.time_ns ? r.time_ns : 1;  // 0 would mean "now"
  f.address = r.address;
  f.bytes = r.bytes;
  f.stream = r.stream;
  f.name = r.name && *r.name ? intern(r.name) : 0;
  f.payload = r.payload ? intern(r.payload) : 0;
  f.device = r.device;
  f.memory = r.memory;
  f.api = r.api;
  f.flags = kFlagDeferred;
  f.no_range = true;
  emit(f);
}

void record_counter(const char* name, uint64_t value, int16_t device, Api api) {
  if (!enabled()) return;
  Fields f{EventKind::kCounter};
  f.name = intern(name);
  f.bytes = value;
  f.device = device;
  f.api = api;
  emit(f);
}

void flush() {
  // In a child of a raw clone the writer thread is the parent's: waiting for
  // it would wait out the timeout.
  if (!own_recorder(/*start_writer=*/true)) return;
  if (g_phase.load(std::memory_order_acquire) != static_cast<uint32_t>(Phase::kRecording)) return;
  run_flush_hook();
  writer_flush(5000000000ull);
}

void reset_buffers_after_fork(bool retire_others) {
  // Every buffer's unwritten events belong to the parent (which writes them);
  // the child starts empty. The buffers may be wiped already (buffers.h):
  // they are rebuilt either way.
  t_state.os_tid = sys::gettid();
  reinit_buffers_in_child(t_state.buffer, t_state.os_tid, retire_others);
  g_seq.store(0, std::memory_order_relaxed);
  for (auto& d : g_drops) d.store(0, std::memory_order_relaxed);
}

// Kept apart from record_memory so that its reserved-level default stays one
// test; the tensor-event source is rare next to the hooks.
void record_allocated_level_memory(const MemoryRecord& r) {
  emit_memory(r, static_cast<uint8_t>(r.flags & ~kFlagReserved));
}

}  // namespace psc::rt
