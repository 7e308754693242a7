// One lifecycle: initialise once (library constructor), follow forks, flush at
// terminating signals (runtime/signals.cc), close at exit (library destructor,
// after atexit handlers), at _exit, and before exec.
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "runtime/clock.h"
#include "runtime/config.h"
#include "runtime/recorder.h"
#include "runtime/signals.h"
#include "runtime/state.h"
#include "runtime/strings.h"
#include "runtime/sys.h"
#include "runtime/writer.h"

namespace psc::rt {

extern uint64_t g_start_realtime_ns;
extern uint64_t g_start_monotonic_ns;
extern uint64_t g_start_monotonic_raw_ns;
extern uint32_t g_parent_pid;

namespace {

// The process we initialised (or were forked into). A vfork child shares our
// memory but not our pid, and must not touch the recorder.
pid_t g_pid = 0;

void set_phase(Phase p) { g_phase.store(static_cast<uint32_t>(p), std::memory_order_release); }

void stamp_clocks() {
  g_start_realtime_ns = sys::realtime_ns();
  g_start_monotonic_ns = sys::monotonic_ns();
  g_start_monotonic_raw_ns = sys::monotonic_raw_ns();
}

void before_fork() { writer_before_fork(); }
void after_fork_parent() { writer_after_fork_parent(); }

void after_fork_child() {
  g_pid = getpid();
  g_parent_pid = static_cast<uint32_t>(getppid());
  signals_set_owner(g_pid);
  writer_after_fork_child();
  reset_buffers_after_fork();
  if (g_config.fork_policy == ForkPolicy::kStop) {
    set_phase(Phase::kStopped);
    return;
  }
  stamp_clocks();
  if (!writer_restart_in_child()) set_phase(Phase::kStopped);
}

}  // namespace

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
  g_pid = getpid();
  signals_install(g_pid);
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  set_phase(Phase::kRecording);
  if (!writer_start()) set_phase(Phase::kStopped);
  t_state.internal = false;
}

__attribute__((destructor(101))) void psc_finalise() {
  // Nothing to close when recording never ran here or is already closed.
  if (g_phase.load(std::memory_order_acquire) != static_cast<uint32_t>(Phase::kRecording)) return;
  t_state.internal = true;
  writer_stop();
  set_phase(Phase::kStopped);
}

void finalise_before_exit() {
  if (getpid() != g_pid) return;
  // Nothing has been torn down on this path (no atexit handler, no destructor
  // ran), so a source holding events elsewhere (CUPTI) can still hand them over.
  if (g_phase.load(std::memory_order_acquire) == static_cast<uint32_t>(Phase::kRecording)) run_flush_hook();
  psc_finalise();
}

bool prepare_exec() {
  if (getpid() != g_pid || g_phase.load(std::memory_order_acquire) != static_cast<uint32_t>(Phase::kRecording))
    return false;
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
