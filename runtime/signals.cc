#include "runtime/signals.h"

#include <errno.h>

#include "runtime/sys.h"
#include "runtime/trace_sink.h"

// glibc's sigaction under its other name: never our interposed one, which a
// call to `sigaction` from this library would reach.
extern "C" int __sigaction(int sig, const struct sigaction* act, struct sigaction* old);

namespace psc::rt {
namespace {

constexpr int kMaxSignal = 65;
// Every signal whose default action is to terminate (with or without a core),
// besides SIGKILL, and the real-time signals (SIGRTMIN..SIGRTMAX) below.
constexpr int kTerminatingSignals[] = {SIGHUP,  SIGINT,    SIGQUIT, SIGILL,  SIGTRAP, SIGABRT, SIGBUS,    SIGFPE,
                                       SIGUSR1, SIGSEGV,   SIGUSR2, SIGPIPE, SIGALRM, SIGTERM, SIGSTKFLT, SIGXCPU,
                                       SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO,   SIGPWR,  SIGSYS};
constexpr uint64_t kSignalFlushNs = 1000000000ull;

bool g_managed[kMaxSignal];
// What the application set for each managed signal (or what we found): what
// it reads back. Written by the hooks; races between application threads
// setting the same signal are the application's, as without us.
struct sigaction g_application[kMaxSignal];
pid_t g_owner = 0;

// Installed only while the application's disposition is SIG_DFL: flush
// (bounded), then the default action.
void on_terminating_signal(int sig, siginfo_t*, void*) {
  const int saved_errno = errno;
  if (getpid() == g_owner) writer_flush(kSignalFlushNs);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  __sigaction(sig, &dfl, nullptr);
  errno = saved_errno;
  raise(sig);  // delivered with the default action on return; a synchronous fault re-faults
}

struct sigaction flushing_action() {
  struct sigaction action {};
  action.sa_sigaction = on_terminating_signal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&action.sa_mask);
  return action;
}

void manage(int sig) {
  struct sigaction current {};
  if (__sigaction(sig, nullptr, &current) != 0) return;
  if (current.sa_handler == SIG_DFL) {
    const struct sigaction ours = flushing_action();
    if (__sigaction(sig, &ours, nullptr) != 0) return;
  }
  g_application[sig] = current;
  g_managed[sig] = true;
}

}  // namespace

void signals_install(pid_t owner) {
  g_owner = owner;
  for (int sig : kTerminatingSignals) manage(sig);
  for (int sig = SIGRTMIN; sig <= SIGRTMAX && sig < kMaxSignal; ++sig) manage(sig);
}

void signals_set_owner(pid_t owner) { g_owner = owner; }

int signals_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  // A vfork child shares our memory: its changes must not become our view.
  if (sig <= 0 || sig >= kMaxSignal || !g_managed[sig] || getpid() != g_owner) return __sigaction(sig, act, old);
  const struct sigaction previous = g_application[sig];
  if (act) {
    const struct sigaction real = act->sa_handler == SIG_DFL ? flushing_action() : *act;
    if (__sigaction(sig, &real, nullptr) != 0) return -1;
    g_application[sig] = *act;
  }
  if (old) *old = previous;
  return 0;
}

sighandler_t signals_signal(int sig, sighandler_t handler) {
  if (handler == SIG_ERR || sig <= 0 || sig >= kMaxSignal) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction action {
  }, old{};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, sig);
  action.sa_flags = SA_RESTART;
  if (signals_sigaction(sig, &action, &old) < 0) return SIG_ERR;
  return old.sa_handler;
}

}  // namespace psc::rt
