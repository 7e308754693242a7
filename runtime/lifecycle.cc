// One lifecycle: initialise once (library constructor), follow forks and raw
// clones, flush at terminating signals (runtime/signals.cc), close at exit
// (library destructor, after atexit handlers), at _exit, and before exec.
// Every exit path acts only in the process that owns the recorder.
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime/clock.h"
#include "runtime/config.h"
#include "runtime/recorder.h"
#include "runtime/signals.h"
#include "runtime/state.h"
#include "runtime/strings.h"
#include "runtime/sys.h"
#include "runtime/trace_sink.h"

namespace psc::rt {

extern uint64_t g_start_realtime_ns;
extern uint64_t g_start_monotonic_ns;
extern uint64_t g_start_monotonic_raw_ns;
extern uint32_t g_parent_pid;

void psc_finalise();

namespace {

// The process that owns the recorder's state: the one that initialised it,
// then each fork child (pthread_atfork) or raw clone child (own_recorder) for
// itself. A vfork child shares our memory but not our pid: it is not it.
std::atomic<pid_t> g_pid{0};
// g_pid again, in a page of MADV_WIPEONFORK memory: zero in a child that has
// a copy of our memory (fork, clone without CLONE_VM), the owner's pid still
// in one that shares it (vfork). nullptr where the kernel cannot wipe (before
// 4.14): children are then not told apart, and none takes the state over.
std::atomic<pid_t>* g_owner_mark = nullptr;
// The writer's lock was taken for this fork (we own the recorder).
bool g_fork_locked = false;
// Set by a vfork child on its way out through exit(): see before_exit_call().
std::atomic<bool> g_exit_handlers_spent{false};

void set_phase(Phase p) { g_phase.store(static_cast<uint32_t>(p), std::memory_order_release); }
bool recording() { return g_phase.load(std::memory_order_acquire) == static_cast<uint32_t>(Phase::kRecording); }

void stamp_clocks() {
  g_start_realtime_ns = sys::realtime_ns();
  g_start_monotonic_ns = sys::monotonic_ns();
  g_start_monotonic_raw_ns = sys::monotonic_raw_ns();
}

void map_owner_mark(pid_t pid) {
  auto* page = static_cast<std::atomic<pid_t>*>(sys::map_pages(4096));
  if (page && madvise(page, 4096, MADV_WIPEONFORK) == 0) {
    page->store(pid, std::memory_order_relaxed);
    g_owner_mark = page;
  }
}

// The child side of a fork, or of a clone no fork handler saw: the parent's
// writer thread, lock, file and unwritten events are not ours. g_pid is
// stored last: another thread of a raw clone child waits for it.
void take_over(pid_t pid, bool raw_clone, bool start_writer) {
  g_parent_pid = static_cast<uint32_t>(getppid());
  signals_set_owner(pid);
  writer_after_fork_child(raw_clone);
  // The child's first thread has the pid's number; any other may take the
  // recorder over before it, while it still holds its buffer.
  reset_buffers_after_fork(/*retire_others=*/sys::gettid() != pid);
  if (raw_clone) run_raw_clone_hooks();  // interpose/'s own fork handlers (CUDA pools, CUPTI)
  if (g_owner_mark) g_owner_mark->store(pid, std::memory_order_release);
  if (g_config.fork_policy == ForkPolicy::kStop) {
    set_phase(Phase::kStopped);
  } else if (recording()) {
    stamp_clocks();
    if (start_writer && !writer_restart_in_child()) set_phase(Phase::kStopped);
  }
  g_pid.store(pid, std::memory_order_release);
}

void before_fork() {
  g_fork_locked = own_recorder(/*start_writer=*/true);
  if (g_fork_locked) writer_before_fork();
}

void after_fork_parent() {
  if (g_fork_locked) writer_after_fork_parent();
}

void after_fork_child() {
  const bool internal = t_state.internal;
  t_state.internal = true;
  take_over(getpid(), /*raw_clone=*/false, /*start_writer=*/true);
  t_state.internal = internal;
}

// Closes the trace from an exit path that is not the destructor.
void finalise_now() {
  // Nothing has been torn down on these paths (no atexit handler, no
  // destructor ran), so a source holding events elsewhere (CUPTI) can still
  // hand them over.
  if (recording()) run_flush_hook();
  psc_finalise();
}

}  // namespace

bool own_recorder(bool start_writer) {
  const pid_t pid = getpid();
  if (pid == g_pid.load(std::memory_order_acquire)) return true;
  if (!g_owner_mark) return false;
  pid_t mark = 0;
  if (g_owner_mark->compare_exchange_strong(mark, pid, std::memory_order_acq_rel)) {
    // The mark was wiped: a copy of the owner's memory, made by a clone that
    // ran no fork handler. Taken over here, as after a fork.
    const bool internal = t_state.internal;
    t_state.internal = true;
    take_over(pid, /*raw_clone=*/true, start_writer);
    t_state.internal = internal;
    return true;
  }
  if (mark != pid) return false;  // the owner's mark: a vfork child, in the owner's memory
  // Another thread of this child is taking over: wait for it (bounded).
  for (int i = 0; i < 100000 && g_pid.load(std::memory_order_acquire) != pid; ++i) sys::sleep_ns(10000);
  return g_pid.load(std::memory_order_acquire) == pid;
}

int32_t recorder_owner() { return g_pid.load(std::memory_order_acquire); }

__attribute__((constructor(101))) void psc_initialise() {
  if (g_phase.load(std::memory_order_acquire) != static_cast<uint32_t>(Phase::kUninitialised)) return;
  t_state.internal = true;
  load_config();
  if (g_config.disabled || !strings_init()) {
    set_phase(Phase::kStopped);
    t_state.internal = false;
    return;
  }
  clock_init(g_config.allow_tsc);
  stamp_clocks();
  g_pid.store(getpid(), std::memory_order_release);
  map_owner_mark(g_pid.load(std::memory_order_relaxed));
  signals_install(g_pid.load(std::memory_order_relaxed));
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  set_phase(Phase::kRecording);
  if (!writer_start()) set_phase(Phase::kStopped);
  t_state.internal = false;
}

__attribute__((destructor(101))) void psc_finalise() {
  // A vfork child gets here through exit() (after a failed exec, say): it
  // runs in its parent's memory and must touch nothing of the recorder.
  if (!own_recorder(/*start_writer=*/false)) {
    g_exit_handlers_spent.store(true, std::memory_order_relaxed);
    return;
  }
  // Nothing to close when recording never ran here or is already closed.
  if (!recording()) return;
  t_state.internal = true;
  writer_stop();
  set_phase(Phase::kStopped);
}

void finalise_before_exit() {
  if (!own_recorder(/*start_writer=*/false)) return;
  finalise_now();
}

// exit() runs the process's atexit handlers and destructors, this library's
// psc_finalise last, and marks them done. In a vfork child (exit() after a
// failed exec is common, though only _exit is allowed there) they are its
// parent's, run in the parent's memory and marked done there too: the
// parent's own exit, later, runs none of them, and its trace would never be
// closed. So a vfork child's exit() leaves a mark, and the two ways out that
// still reach this library in the parent, exit() and a return from main
// (both interposed below), close the trace first when they find it: no
// handler is left to record anything after that. Otherwise they change
// nothing, and the destructor closes the trace after the handlers ran.
void before_exit_call() {
  if (!own_recorder(/*start_writer=*/false)) {
    g_exit_handlers_spent.store(true, std::memory_order_relaxed);
    return;
  }
  if (g_exit_handlers_spent.load(std::memory_order_relaxed)) finalise_now();
}

bool prepare_exec() {
  // A child that has not taken the recorder over has recorded nothing here.
  if (getpid() != g_pid.load(std::memory_order_acquire) || !recording()) return false;
  run_flush_hook();  // as on the way out through _exit: CUPTI hands over what it holds
  // Nothing this thread does until exec returns may record: the writer's
  // lock is held, and a full buffer would wait for it in vain.
  t_state.internal = true;
  if (writer_seal_for_exec()) return true;
  t_state.internal = false;
  return false;
}

void exec_failed() {
  writer_unseal_after_failed_exec();
  t_state.internal = false;
}

}  // namespace psc::rt

// _exit() skips atexit handlers and destructors; multiprocessing workers and
// forked children leave this way. Close the trace first.
PSC_EXPORT void _exit(int status) {
  psc::rt::finalise_before_exit();
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

PSC_EXPORT void _Exit(int status) { _exit(status); }

namespace {

using ExitFn = void (*)(int);
using MainFn = int (*)(int, char**, char**);
// Every argument after argv as the caller passed it: their types changed
// across glibc versions (init is main's type from 2.34), never their kind.
using StartMainFn = int (*)(MainFn, int, char**, void*, void*, void*, void*);

ExitFn g_real_exit = nullptr;
MainFn g_main = nullptr;

__attribute__((constructor(102))) void resolve_exit() {
  g_real_exit = reinterpret_cast<ExitFn>(dlsym(RTLD_NEXT, "exit"));
}

int main_then_check(int argc, char** argv, char** envp) {
  const int status = g_main(argc, argv, envp);
  psc::rt::before_exit_call();
  return status;  // glibc's exit(status) follows
}

}  // namespace

// See before_exit_call().
PSC_EXPORT void exit(int status) noexcept {
  psc::rt::before_exit_call();
  ExitFn real = g_real_exit ? g_real_exit : reinterpret_cast<ExitFn>(dlsym(RTLD_NEXT, "exit"));
  if (real) real(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

// The program's main runs under main_then_check: a return from main reaches
// glibc's exit() inside glibc, where no interposed exit() sees it.
PSC_EXPORT int __libc_start_main(MainFn main, int argc, char** argv, void* init, void* fini, void* rtld_fini,
                                 void* stack_end) {
  auto real = reinterpret_cast<StartMainFn>(dlsym(RTLD_NEXT, "__libc_start_main"));
  if (!real) {
    psc::sys::say("cannot find __libc_start_main");
    syscall(SYS_exit_group, 127);
  }
  g_main = main;
  return real(main_then_check, argc, argv, init, fini, rtld_fini, stack_end);
}
