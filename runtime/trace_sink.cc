// The recorder's trace sink (runtime/trace_sink.h): its writer thread, the
// merge of every thread's events, the chunks; runtime/sink_file.h writes them.
//
// Watermark: events reach the file in global sequence order. Each cycle reads
// the sequence counter G, then, per buffer, `busy` and `head` (see buffers.h).
// A buffer whose producer is idle can hold no unpublished event below G+1; a
// busy one none below its last drained seq + 1. The minimum of those bounds, W,
// is the watermark: merged events below W are written, the rest are held back
// (sorted) for the next cycle. Held-back events are bounded; if they would
// overflow, or on a forced flush, everything is written and any event that
// then lands after a later seq is counted as "late" in the trace.
#include "runtime/trace_sink.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include <algorithm>

#include "format/chunk_codec.h"
#include "runtime/clock.h"
#include "runtime/config.h"
#include "runtime/drops.h"
#include "runtime/sink_file.h"
#include "runtime/state.h"
#include "runtime/strings.h"
#include "runtime/sys.h"

namespace psc::rt {
namespace sink {

uint8_t* g_chunk = nullptr;
constinit format::ThreadCodecState g_codec_threads[kMaxThreads];
constinit WriterEncoder g_encoder(nullptr, 0, g_codec_threads, kMaxThreads);
uint64_t g_chunk_events = 0;
uint64_t g_events_written = 0;

}  // namespace sink

using namespace sink;

namespace {

constexpr size_t kChunkBytes = 1u << 20;
constexpr uint32_t kStagingEvents = 1u << 20;  // per staging area (drained, held)
constexpr uint32_t kMaxStringIds = 1u << 15;
// How often an idle writer looks whether it is the process's last thread.
constexpr uint64_t kAloneCheckNs = 200000000ull;

struct Run {
  const Event* next;
  const Event* end;
};

bool g_after_raw_clone = false;     // this process took the recorder over after a raw clone
uint64_t g_next_alone_check = 0;    // writer thread: see leave_with_the_program
uint64_t g_bytes_before_seal = 0;   // the file before the closing chunk written for an exec
uint32_t g_generation_at_seal = 0;  // ... and which file that was (start_fresh_file)
pthread_t g_thread;
std::atomic<bool> g_running{false};
std::atomic<bool> g_stop{false};
std::atomic<uint32_t> g_wake{0};  // futex: 1 = work requested
std::atomic<uint32_t> g_flush_requested{0};
std::atomic<uint32_t> g_flush_done{0};                // futex
pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;  // held for a whole cycle; fork takes it
constexpr pthread_mutex_t kFreshMutex = PTHREAD_MUTEX_INITIALIZER;

Event* g_drained = nullptr;  // this cycle's events, one sorted run per buffer
Event* g_held = nullptr;     // held back from the last cycle, sorted
Event* g_spare = nullptr;    // becomes g_held after the merge
uint32_t g_held_count = 0;
uint8_t* g_string_emitted = nullptr;
uint32_t g_strings_low = 0;  // ids 1..low are all written
uint64_t g_last_seq = 0;
uint64_t g_late = 0;
uint64_t g_drops_written[format::kDropReasonCount];
Run g_runs[kMaxThreads + 1];

// ---- the chunk ---------------------------------------------------------------

// Each add_* retries once in a fresh chunk; a record that cannot fit in an
// empty chunk is impossible by construction (strings are capped at 64 KiB).
template <typename Add>
void add_record(Add add) {
  if (!add()) {
    write_chunk();
    add();
  }
}

// ---- metadata ----------------------------------------------------------------

void emit_strings() {
  const uint32_t allocated = strings_allocated();
  bool contiguous = true;
  for (uint32_t id = g_strings_low + 1; id <= allocated && id <= kMaxStringIds; ++id) {
    if (g_string_emitted[id]) {
      if (contiguous) g_strings_low = id;
      continue;
    }
    size_t length = 0;
    const char* text = string_text(id, &length);
    if (!text) {
      contiguous = false;  // another thread is still publishing it
      continue;
    }
    add_record([&] { return g_encoder.add_string(id, text, length); });
    g_string_emitted[id] = 1;
    if (contiguous) g_strings_low = id;
  }
}

void emit_thread(ThreadBuffer* b) {
  if (b->announced) return;
  const size_t length = strnlen(b->name, sizeof b->name);
  const auto tid = static_cast<uint64_t>(b->os_tid.load(std::memory_order_relaxed));
  add_record([&] { return g_encoder.add_thread(b->index, tid, b->name, length); });
  b->announced = true;
}

void emit_counts(bool force) {
  uint64_t drops[format::kDropReasonCount];
  bool changed = force;
  for (int i = 0; i < format::kDropReasonCount; ++i) {
    drops[i] = g_drops[i].load(std::memory_order_relaxed);
    changed |= drops[i] != g_drops_written[i];
  }
  if (changed) {
    add_record([&] { return g_encoder.add_counts(format::kMetaDrops, drops, format::kDropReasonCount); });
    memcpy(g_drops_written, drops, sizeof drops);
  }
  if (g_late) add_record([&] { return g_encoder.add_counts(format::kMetaLate, &g_late, 1); });
}

// After a lost chunk: strings, thread names, the command line and the drop
// counts it carried are written again (the reader keeps the last of each).
void resend_lost_metadata() {
  if (!g_metadata_lost) return;
  g_metadata_lost = false;
  memset(g_string_emitted, 0, kMaxStringIds + 2);
  g_strings_low = 0;
  const uint32_t count = g_buffer_count.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < count; ++i)
    if (ThreadBuffer* b = __atomic_load_n(&g_buffers[i], __ATOMIC_ACQUIRE)) b->announced = false;
  if (g_command_length) add_record([&] { return g_encoder.add_command(g_command, g_command_length); });
  memset(g_drops_written, 0, sizeof g_drops_written);
}

// ---- one cycle -----------------------------------------------------------------

// Copies a buffer's published events into the drained area; returns the
// watermark bound this buffer allows.
uint64_t drain(ThreadBuffer* b, uint64_t global_seq, uint32_t* drained, uint32_t* runs) {
  // Whether the thread has exited must be known before head is read: a thread
  // alive at the read could publish more events and exit before a later check,
  // and freeing its buffer then would lose them. A dead thread publishes nothing.
  const bool exited = thread_exited(b->os_tid.load(std::memory_order_relaxed));
  // A thread that died inside a record will never publish it: not busy.
  const bool busy = b->busy.load(std::memory_order_seq_cst) != 0 && !exited;
  const uint64_t head = b->head.load(std::memory_order_acquire);
  const uint64_t tail = b->tail.load(std::memory_order_relaxed);
  const uint64_t n = std::min<uint64_t>(head - tail, kStagingEvents - *drained);
  if (n) {
    Event* out = g_drained + *drained;
    for (uint64_t i = 0; i < n; ++i) {
      out[i] = b->slots[(tail + i) & b->mask];
      // Deferred events carry CLOCK_MONOTONIC ns already (recorder.h).
      if (!(out[i].flags & kFlagDeferred)) out[i].time_ns = clock_to_ns(out[i].time_ns);
    }
    b->tail.store(tail + n, std::memory_order_release);
    b->floor_seq = std::max(b->floor_seq, out[n - 1].seq);
    g_runs[(*runs)++] = Run{out, out + n};
    *drained += static_cast<uint32_t>(n);
  }
  const bool complete = tail + n == head;
  if (!complete || busy) return b->floor_seq + 1;
  if (exited) {
    // Its thread exited and everything it recorded is out: the buffer can be reused.
    b->announced = false;
    b->floor_seq = global_seq;
    b->state.store(static_cast<uint32_t>(BufferState::kFree), std::memory_order_release);
  }
  return global_seq + 1;
}

// Heap order for the merge: the run whose next event has the lowest seq on top.
struct LaterRun {
  bool operator()(const Run& a, const Run& b) const { return a.next->seq > b.next->seq; }
};

// Returns the watermark used: every event below it is now in the file.
uint64_t cycle(bool force) {
  if (!g_chunk) return 0;
  clock_update();  // before the drain: the events drained were stamped before it
  const uint64_t global_seq = g_seq.load(std::memory_order_seq_cst);
  uint64_t watermark = UINT64_MAX;
  uint32_t drained = 0, runs = 0;
  // A file lost since the last cycle is found again, or a fresh one started,
  // before this cycle's chunk is built: it then carries what the file needs.
  if (g_file_created) ensure_own_fd();
  resend_lost_metadata();
  const uint32_t count = g_buffer_count.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < count; ++i) {
    ThreadBuffer* b = __atomic_load_n(&g_buffers[i], __ATOMIC_ACQUIRE);
    if (!b || b->state.load(std::memory_order_acquire) != static_cast<uint32_t>(BufferState::kActive)) continue;
    emit_thread(b);  // before drain(), which may hand the buffer to a new thread
    watermark = std::min(watermark, drain(b, global_seq, &drained, &runs));
  }
  // A process that has recorded nothing gets no file (children that only
  // exec, fork-stopped children); metadata waits in the chunk until events come.
  if (!g_file_created && drained == 0 && g_held_count == 0) return watermark;
  if (g_held_count) g_runs[runs++] = Run{g_held, g_held + g_held_count};
  if (force || drained + g_held_count >= kStagingEvents) watermark = UINT64_MAX;

  emit_strings();
  std::make_heap(g_runs, g_runs + runs, LaterRun{});
  uint32_t kept = 0;
  while (runs) {
    std::pop_heap(g_runs, g_runs + runs, LaterRun{});
    Run& r = g_runs[runs - 1];
    // Threads' runs interleave in long stretches (a thread holds a core for
    // its time slice): every event of this run below the next run's head goes
    // out before the heap is touched again, not one pop and push per event.
    const uint64_t limit = runs > 1 ? g_runs[0].next->seq : UINT64_MAX;
    do {
      const Event& e = *r.next++;
      if (e.seq < watermark) {
        if (e.seq < g_last_seq) ++g_late;
        g_last_seq = std::max(g_last_seq, e.seq);
        add_record([&] { return g_encoder.add_event(e); });
        ++g_events_written;
        ++g_chunk_events;
      } else {
        g_spare[kept++] = e;
      }
    } while (r.next != r.end && r.next->seq < limit);
    if (r.next == r.end) {
      --runs;
    } else {
      std::push_heap(g_runs, g_runs + runs, LaterRun{});
    }
  }
  std::swap(g_held, g_spare);
  g_held_count = kept;
  emit_counts(false);
  write_chunk();
  return watermark;
}

// Forced cycles first give busy producers a moment to finish their record, so
// a flush rarely has to write out of order.
void forced_cycle() {
  for (int tries = 0; tries < 20; ++tries) {
    bool any_busy = false;
    const uint32_t count = g_buffer_count.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < count && !any_busy; ++i) {
      ThreadBuffer* b = __atomic_load_n(&g_buffers[i], __ATOMIC_ACQUIRE);
      any_busy = b && b->busy.load(std::memory_order_seq_cst) != 0;
    }
    if (!any_busy) break;
    sys::sleep_ns(50000);
  }
  cycle(true);
}

// A flush must put every event recorded before it was asked for in the file.
// Normal cycles do that once the watermark passes the sequence number read
// now, without writing anything out of order; only a producer stuck in the
// middle of a record for 100 ms makes it force the rest out.
void flush_cycle() {
  const uint64_t target = g_seq.load(std::memory_order_seq_cst);
  const uint64_t deadline = sys::monotonic_ns() + 100000000ull;
  while (cycle(false) <= target) {
    if (sys::monotonic_ns() > deadline) {
      forced_cycle();
      return;
    }
    sys::sleep_ns(50000);
  }
}

// Whether this thread is all that is left of the process (/proc/self/stat:
// the main thread's state, field 3, and the number of threads, field 20). A
// main thread that has ended while others live is a zombie until they all
// have, and still counted.
bool only_thread_left() {
  char text[1024];
  const int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return false;
  text[n] = 0;
  const char* p = strrchr(text, ')');  // the command name before it may hold anything
  if (!p || p[1] != ' ') return false;
  const bool main_ended = p[2] == 'Z';
  // Field 2 ends at ')'; each space after it starts the next field.
  for (int field = 2; *p && field < 20; ++p)
    if (*p == ' ') ++field;
  uint32_t threads = 0;
  while (*p >= '0' && *p <= '9') threads = threads * 10 + static_cast<uint32_t>(*p++ - '0');
  return threads == 1 || (threads == 2 && main_ended);
}

// Nothing but this thread is left: the program's last thread ended without
// ending the process. glibc's last thread calls exit(0), but counts this one
// among the living (main left through pthread_exit, the others returned); a
// raw clone child's function returns into the end of its thread alone. Left
// so, this thread would keep the process alive for ever, deaf to the signals
// it blocks. It does what the last thread would have done: exit(0), which
// runs the program's atexit handlers and destructors, the recorder's last;
// after a raw clone (whose handlers are the parent's copies, never run by
// such a child) it closes the trace and ends on its own, and the process
// with the status its main thread left.
void write_closing_chunk();

void leave_with_the_program() {
  if (!g_after_raw_clone) exit(0);
  pthread_mutex_lock(&g_mutex);
  forced_cycle();
  if (g_file_created) write_closing_chunk();
  close_own_fd();
  g_file_created = false;
  g_phase.store(static_cast<uint32_t>(Phase::kStopped), std::memory_order_release);
  syscall(SYS_exit, 0);
}

void* writer_main(void*) {
  t_state.internal = true;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);  // signals go to the application's threads
  pthread_setname_np(pthread_self(), "peakscope-wr");
  const uint64_t interval = uint64_t{g_config.flush_ms} * 1000000ull;
  while (!g_stop.load(std::memory_order_acquire)) {
    if (g_wake.exchange(0, std::memory_order_acq_rel) == 0) sys::futex_wait(&g_wake, 0, interval);
    g_wake.store(0, std::memory_order_relaxed);
    const uint32_t requested = g_flush_requested.load(std::memory_order_acquire);
    pthread_mutex_lock(&g_mutex);
    const uint64_t written = g_events_written;
    if (requested != g_flush_done.load(std::memory_order_relaxed)) {
      flush_cycle();
    } else {
      cycle(false);
    }
    const bool idle = g_events_written == written;
    pthread_mutex_unlock(&g_mutex);
    // A process whose threads are gone records nothing: looked at when idle.
    if (idle && !g_stop.load(std::memory_order_acquire)) {
      const uint64_t now = sys::monotonic_ns();
      if (now >= g_next_alone_check) {
        g_next_alone_check = now + kAloneCheckNs;
        if (only_thread_left()) leave_with_the_program();
      }
    }
    if (requested != g_flush_done.load(std::memory_order_relaxed)) {
      g_flush_done.store(requested, std::memory_order_release);
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_flush_done), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr,
              0);
    }
  }
  return nullptr;
}

bool allocate_areas() {
  if (g_chunk) return true;
  g_chunk = static_cast<uint8_t*>(sys::map_pages(kChunkBytes + sizeof(format::ChunkHeader)));
  g_drained = static_cast<Event*>(sys::map_pages(sizeof(Event) * kStagingEvents));
  g_held = static_cast<Event*>(sys::map_pages(sizeof(Event) * kStagingEvents));
  g_spare = static_cast<Event*>(sys::map_pages(sizeof(Event) * kStagingEvents));
  g_string_emitted = static_cast<uint8_t*>(sys::map_pages(kMaxStringIds + 2));
  if (!g_chunk || !g_drained || !g_held || !g_spare || !g_string_emitted) {
    g_chunk = nullptr;
    return false;
  }
  g_encoder = WriterEncoder(g_chunk, kChunkBytes + sizeof(format::ChunkHeader), g_codec_threads, kMaxThreads);
  g_encoder.begin();
  return true;
}

bool spawn_thread() {
  g_stop.store(false, std::memory_order_relaxed);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  const bool ok = pthread_create(&g_thread, &attr, writer_main, nullptr) == 0;
  pthread_attr_destroy(&attr);
  g_running.store(ok, std::memory_order_release);
  return ok;
}

bool is_primary() { return g_config.output[0] && static_cast<uint32_t>(getpid()) == g_config.primary_pid; }

// The drop counts and the END record, in a chunk of their own.
// A fresh file started during its write (start_fresh_file) gets its own.
void write_closing_chunk() {
  int err = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const uint32_t generation = g_file_generation;
    resend_lost_metadata();
    emit_counts(true);
    add_record([&] { return g_encoder.add_counts(format::kMetaEnd, &g_events_written, 1); });
    err = write_chunk(/*last=*/true);
    if (generation == g_file_generation) break;
  }
  say_close_failed(err);
}

}  // namespace

bool writer_running() { return g_running.load(std::memory_order_acquire); }

bool on_writer_thread() { return g_running.load(std::memory_order_relaxed) && pthread_equal(pthread_self(), g_thread); }

bool writer_start() {
  if (g_running.load(std::memory_order_acquire)) return true;
  if (g_config.output_length >= sizeof g_config.output) {
    // Cut to fit, it would name another file (trunc/abc.ps for trunc/abc.pstrace).
    if (!g_config.quiet) {
      char length[24];
      sys::format_uint(length, g_config.output_length);
      sys::say("PEAKSCOPE_OUTPUT is ", length,
               " bytes long, over the 4095 a path may have (PATH_MAX); recording stopped, no trace written");
    }
    return false;
  }
  if (!allocate_areas()) {
    if (!g_config.quiet) sys::say("cannot map writer memory; recording stopped");
    return false;
  }
  // The primary process always leaves a trace, even an empty one.
  if (is_primary() && !open_file()) return false;
  return spawn_thread();
}

void writer_nudge() {
  if (g_wake.load(std::memory_order_relaxed) == 0 && g_wake.exchange(1, std::memory_order_acq_rel) == 0)
    sys::futex_wake(&g_wake);
}

bool writer_flush(uint64_t timeout_ns) {
  if (!g_running.load(std::memory_order_acquire) || on_writer_thread()) return false;
  const uint32_t ticket = g_flush_requested.fetch_add(1, std::memory_order_acq_rel) + 1;
  g_wake.store(1, std::memory_order_release);
  sys::futex_wake(&g_wake);
  const uint64_t deadline = sys::monotonic_ns() + timeout_ns;
  for (;;) {
    const uint32_t done = g_flush_done.load(std::memory_order_acquire);
    if (static_cast<int32_t>(done - ticket) >= 0) return true;
    const uint64_t now = sys::monotonic_ns();
    if (now >= deadline) return false;
    sys::futex_wait(&g_flush_done, done, std::min<uint64_t>(deadline - now, 10000000ull));
  }
}

void writer_stop() {
  if (g_running.exchange(false, std::memory_order_acq_rel)) {
    g_stop.store(true, std::memory_order_release);
    g_wake.store(1, std::memory_order_release);
    sys::futex_wake(&g_wake);
    pthread_join(g_thread, nullptr);
  }
  if (!g_chunk) return;
  pthread_mutex_lock(&g_mutex);
  forced_cycle();
  if (g_file_created || is_primary()) write_closing_chunk();
  close_own_fd();
  g_file_created = false;
  pthread_mutex_unlock(&g_mutex);
}

bool writer_seal_for_exec() {
  if (!g_running.load(std::memory_order_acquire) || on_writer_thread()) return false;
  pthread_mutex_lock(&g_mutex);
  flush_cycle();
  if (g_file_created) {
    g_bytes_before_seal = g_file_bytes;
    g_generation_at_seal = g_file_generation;
    write_closing_chunk();
    set_header_flag(format::kHeaderEndedByExec, true);
  }
  return true;  // g_mutex stays held: nothing more goes into this file
}

void writer_unseal_after_failed_exec() {
  if (g_file_created && (g_header.flags & format::kHeaderEndedByExec)) {
    // The process goes on: take the closing chunk back and keep appending
    // (unless the file was lost meanwhile: a fresh one has no such chunk).
    if (ensure_own_fd() == 0 && g_file_generation == g_generation_at_seal &&
        ftruncate(g_fd, static_cast<off_t>(g_bytes_before_seal)) == 0)
      g_file_bytes = g_bytes_before_seal;
    set_header_flag(format::kHeaderEndedByExec, false);
    memset(g_drops_written, 0, sizeof g_drops_written);  // the counts went with that chunk
  }
  pthread_mutex_unlock(&g_mutex);
}

void writer_before_fork() { pthread_mutex_lock(&g_mutex); }
void writer_after_fork_parent() { pthread_mutex_unlock(&g_mutex); }

void writer_after_fork_child(bool raw_clone) {
  // The parent's writer thread does not exist here and its file is not ours.
  // The lock is fresh: after a raw clone no fork handler took it, and the
  // parent's writer may have held it at that moment.
  g_mutex = kFreshMutex;
  close_own_fd();
  g_file_created = false;
  g_file_generation = 0;
  g_after_raw_clone = raw_clone;
  g_next_alone_check = 0;
  g_open_failed = false;
  g_file_bytes = 0;
  g_header_pending = false;
  g_write_failing = false;
  g_metadata_lost = false;
  g_chunk_events = 0;
  g_command_length = 0;
  g_running.store(false, std::memory_order_relaxed);
  g_held_count = 0;
  g_strings_low = 0;
  g_last_seq = 0;
  g_late = 0;
  g_events_written = 0;
  memset(g_drops_written, 0, sizeof g_drops_written);
  if (g_string_emitted) memset(g_string_emitted, 0, kMaxStringIds + 2);
  g_flush_requested.store(0, std::memory_order_relaxed);
  g_flush_done.store(0, std::memory_order_relaxed);
  g_wake.store(0, std::memory_order_relaxed);
  if (g_chunk) g_encoder.begin();
}

bool writer_restart_in_child() { return spawn_thread(); }

}  // namespace psc::rt
