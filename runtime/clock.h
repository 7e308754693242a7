// The recorder's event clock.
//
// Where the processor has an invariant TSC and the kernel keeps
// CLOCK_MONOTONIC on it, an event stamps raw TSC ticks: one rdtsc instead of
// a vDSO clock_gettime (which reads the TSC too, then scales it; measured
// here at about 2.5x the cost of a bare rdtsc). The writer maps ticks to
// CLOCK_MONOTONIC nanoseconds before it encodes them, so the file holds
// nanoseconds either way and no reader knows the difference. Elsewhere (no
// invariant TSC, another clock source, PEAKSCOPE_CLOCK=monotonic) events read
// CLOCK_MONOTONIC directly and the mapping is the identity.
#pragma once

#include <cstdint>

#include "runtime/sys.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace psc::rt {

// Set once by clock_init() before recording starts; never changes after.
extern bool g_clock_tsc;

// The hot path's clock read: TSC ticks or CLOCK_MONOTONIC ns (see above).
__attribute__((always_inline)) inline uint64_t event_clock() {
#if defined(__x86_64__)
  if (PSC_LIKELY(g_clock_tsc)) return __rdtsc();
#endif
  return sys::monotonic_ns();
}

// Chooses the clock (allow_tsc: the configuration permits the TSC) and takes
// the first (ticks, CLOCK_MONOTONIC) pair. Start-up only.
void clock_init(bool allow_tsc);

// Writer thread only. Takes a fresh (ticks, ns) pair when the last is older
// than a millisecond: call before draining, so that every event drained
// after it was stamped before the pair, or very little after.
void clock_update();

// Writer thread only: a stamp of event_clock() in CLOCK_MONOTONIC ns.
// Between two pairs the mapping interpolates linearly, so it is exact at
// every pair (CLOCK_MONOTONIC's own slewing included), continuous and
// increasing; past the newest pair it extrapolates with the newest slope.
uint64_t clock_to_ns(uint64_t stamp);

}  // namespace psc::rt
