#include "runtime/clock.h"

#include <fcntl.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace psc::rt {

bool g_clock_tsc = false;

namespace {

// A (ticks, ns) reading and the slope of the segment it starts: ns per tick
// with 32 fraction bits, set when the next pair arrives (the newest pair
// carries the previous slope, for extrapolation).
struct Pair {
  uint64_t ticks;
  uint64_t ns;
  uint64_t slope;
};

// ~3 s of history at the writer's 50 ms cadence: a stamp older than the
// oldest pair (a ring not drained for that long) extrapolates from it.
constexpr uint32_t kPairs = 64;
constexpr uint64_t kMinPairSpacingNs = 1000000;
Pair g_pairs[kPairs];
uint32_t g_pair_count = 0;  // pairs taken; the newest is g_pairs[(count - 1) % kPairs]

#if defined(__x86_64__)
// CPUID 0x80000007, EDX bit 8: the TSC runs at a constant rate in every
// P-, C- and T-state (Intel and AMD alike).
bool invariant_tsc() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0x80000000, &eax, &ebx, &ecx, &edx) || eax < 0x80000007) return false;
  if (!__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx)) return false;
  return (edx & (1u << 8)) != 0;
}

// The kernel keeps CLOCK_MONOTONIC on the TSC only when it found the TSC
// synchronised across CPUs and stable; otherwise (another source, or a file
// we cannot read) the TSC is not trusted either.
bool kernel_uses_tsc() {
  const int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[32] = {};
  const ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  return n >= 3 && strncmp(text, "tsc", 3) == 0 && (n == 3 || text[3] == '\n');
}

// A pair read as ticks, ns, ticks; the tightest of a few tries, its ticks the
// midpoint, so that a preemption between the reads does not skew the mapping.
Pair read_pair() {
  Pair best{};
  uint64_t best_window = UINT64_MAX;
  for (int i = 0; i < 4; ++i) {
    const uint64_t before = __rdtsc();
    const uint64_t ns = sys::monotonic_ns();
    const uint64_t after = __rdtsc();
    if (after - before < best_window) {
      best_window = after - before;
      best = Pair{before + (after - before) / 2, ns};
    }
  }
  return best;
}
#endif

Pair& pair_at(uint32_t i) { return g_pairs[i % kPairs]; }

uint64_t slope_between(const Pair& a, const Pair& b) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(b.ns - a.ns) << 32) / (b.ticks - a.ticks));
}

// The stamp on the segment that starts at a (before a: extended backwards).
uint64_t along(const Pair& a, uint64_t stamp) {
  if (stamp >= a.ticks)
    return a.ns + static_cast<uint64_t>((static_cast<unsigned __int128>(stamp - a.ticks) * a.slope) >> 32);
  const auto back = static_cast<uint64_t>((static_cast<unsigned __int128>(a.ticks - stamp) * a.slope) >> 32);
  return back < a.ns ? a.ns - back : 0;
}

}  // namespace

void clock_init(bool allow_tsc) {
  g_clock_tsc = false;
  g_pair_count = 0;
#if defined(__x86_64__)
  if (allow_tsc && invariant_tsc() && kernel_uses_tsc()) {
    g_pairs[0] = read_pair();
    g_pair_count = 1;
    g_clock_tsc = true;
  }
#else
  (void)allow_tsc;
#endif
}

void clock_update() {
#if defined(__x86_64__)
  if (!g_clock_tsc) return;
  Pair& newest = pair_at(g_pair_count - 1);
  Pair next = read_pair();
  // Too close to the last pair, the slope would carry the reads' jitter; a
  // second pair is taken at once, though, so that there is a slope at all.
  if (next.ticks <= newest.ticks || next.ns <= newest.ns) return;
  if (g_pair_count >= 2 && next.ns - newest.ns < kMinPairSpacingNs) return;
  newest.slope = slope_between(newest, next);
  next.slope = newest.slope;
  g_pairs[g_pair_count % kPairs] = next;
  ++g_pair_count;
#endif
}

uint64_t clock_to_ns(uint64_t stamp) {
  if (!g_clock_tsc) return stamp;
  const uint32_t count = g_pair_count;
  if (count < 2) {
    // No slope yet (no writer cycle since start-up): nominal 1 ns per tick
    // around the first pair would be wrong by the TSC's rate, so take one now.
    clock_update();
    if (g_pair_count < 2) return pair_at(0).ns;
    return clock_to_ns(stamp);
  }
  const uint32_t oldest = count > kPairs ? count - kPairs : 0;
  // Newest first: nearly every stamp falls after the newest or the one before.
  uint32_t i = count - 1;
  while (i > oldest && stamp < pair_at(i).ticks) --i;
  return along(pair_at(i), stamp);
}

}  // namespace psc::rt
