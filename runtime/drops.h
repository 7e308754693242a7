// Counts of lost events by reason. Relaxed atomics: drops are rare and only
// their totals matter; the writer records the cumulative counts in the trace.
#pragma once

#include <atomic>
#include <cstdint>

#include "format/file_format.h"

namespace psc::rt {

extern std::atomic<uint64_t> g_drops[format::kDropReasonCount];

inline void count_drop(format::DropReason reason, uint64_t n = 1) {
  g_drops[static_cast<int>(reason)].fetch_add(n, std::memory_order_relaxed);
}

}  // namespace psc::rt
