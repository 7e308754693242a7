// Flush at every signal whose default action ends the process, without
// changing what the application sees or gets: sigaction() and signal() are
// interposed (interpose/signal_hooks.cc) and answered from the application's
// own view of each disposition.
#pragma once

#include <signal.h>
#include <sys/types.h>

namespace psc::rt {

// Installs the flushing handler on every terminating signal still at SIG_DFL
// (SIG_IGN, inherited across exec, and handlers set before us are left as
// they are). owner: the process that records; a vfork child sharing our
// memory is not it.
void signals_install(pid_t owner);
// A fork child records (or not) as its own process.
void signals_set_owner(pid_t owner);

// sigaction() as the application sees it. For a terminating signal the
// disposition it asks for is installed as it is, except SIG_DFL, which
// becomes "flush, then the default action"; `old` reports what it last set.
int signals_sigaction(int sig, const struct sigaction* act, struct sigaction* old);
// signal(): BSD semantics, as glibc's (SA_RESTART, the signal blocked in its handler).
sighandler_t signals_signal(int sig, sighandler_t handler);

}  // namespace psc::rt
