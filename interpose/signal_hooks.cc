// sigaction() and signal(): the application's dispositions of terminating
// signals pass through runtime/signals.cc, so that one it sets to SIG_DFL
// (now or later) still flushes the trace before the process ends, one it
// sets to a handler or SIG_IGN is installed as it asked, and it reads back
// what it set, never the recorder's handler.
#include <signal.h>

#include "runtime/signals.h"
#include "runtime/sys.h"

PSC_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  return psc::rt::signals_sigaction(sig, act, old);
}

PSC_EXPORT sighandler_t signal(int sig, sighandler_t handler) noexcept { return psc::rt::signals_signal(sig, handler); }
