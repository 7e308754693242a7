#include "common/parallel.h"

#include <algorithm>
#include <cstdlib>

namespace psc {

unsigned trace_threads(size_t traces) {
  if (traces <= 1) return 1;
  if (const char* text = std::getenv("PEAKSCOPE_TRACE_THREADS"); text && *text) {
    char* end = nullptr;
    const unsigned long n = std::strtoul(text, &end, 10);
    if (*end == '\0' && n >= 1) return static_cast<unsigned>(std::min<unsigned long>({n, traces, 64}));
  }
  const unsigned processors = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::min<size_t>({traces, processors, 4}));
}

}  // namespace psc
