#include "estimator/first_execution.h"

#include <algorithm>
#include <cstdint>

namespace psc {

size_t shapes_not_run(const WaveLiveness& wave, std::vector<WaveSize>& run) {
  size_t added = 0;
  for (const WaveSize& shape : wave.group_sizes()) {
    if (std::find(run.begin(), run.end(), shape) != run.end()) continue;
    run.push_back(shape);
    ++added;
  }
  return added;
}

// A cold wave beside its warm twin, with `new_shapes` group shapes no earlier
// wave of its trace ran: what first executions add to the peak, what of it
// they keep per new shape, and what they make and free again.
void add_first_execution(const Liveness& t, const WaveLiveness& cold, size_t new_shapes, Calibration* c) {
  const WaveLiveness& warm = t.waves[static_cast<size_t>(cold.warm_twin)];
  ++c->first_execution_pairs;
  // The measured peaks already hold what the hooks and CUPTI saw. What
  // no allocation record accounts for shows only in the device samples:
  // its cold − warm growth belongs to the allowance too.
  uint64_t unexplained = 0;
  for (const ColdWarmDelta& d : t.analysis.device.cold_warm) {
    if (d.cold_wave != cold.index || !d.has_samples) continue;
    ++c->first_execution_device_pairs;
    unexplained = static_cast<uint64_t>(std::max<int64_t>(0, d.unexplained_growth_delta_bytes));
  }
  c->first_execution_unexplained_bytes = std::max(c->first_execution_unexplained_bytes, unexplained);
  const uint64_t peak_delta =
      cold.measured_peak_bytes > warm.measured_peak_bytes ? cold.measured_peak_bytes - warm.measured_peak_bytes : 0;
  // The cold peak is at most the twin's state at that moment plus the
  // first-execution allocations live then: their most live together
  // bounds it at any size where they do not grow.
  const uint64_t added = std::max(peak_delta, cold.first_execution_max_live_bytes);
  // What the device samples saw and no record explains (a module loaded,
  // a workspace made) stays too: charged with what each new shape keeps.
  const uint64_t kept = std::min(added, cold.first_execution_kept_bytes);
  const uint64_t shapes = std::max<uint64_t>(1, new_shapes);
  c->first_execution_per_shape_bytes =
      std::max(c->first_execution_per_shape_bytes, (kept + unexplained + shapes - 1) / shapes);
  c->first_execution_once_bytes = std::max(c->first_execution_once_bytes, added - kept);
  c->first_execution_bytes = std::max({c->first_execution_bytes, added + unexplained,
                                       c->first_execution_once_bytes + c->first_execution_per_shape_bytes});
  c->first_execution_at_peak_bytes = std::max(c->first_execution_at_peak_bytes, cold.first_execution_at_peak_bytes);
}

}  // namespace psc
