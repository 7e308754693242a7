#include "estimator/first_execution.h"

#include <algorithm>
#include <cstdint>

namespace psc {

// A cold wave beside its warm twin: what first executions add to the peak,
// what of it each new shape keeps, and what they make and free again.
void add_first_execution(const Liveness& t, const WaveLiveness& cold, FirstExecutionFit* fit, Calibration* c) {
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
  // A step's first wave makes its adapter gradients and a later one
  // (accumulating) adds to them: a cold wave that began a step beside a
  // warm twin that did not has its peak raised by gradients that prices
  // charge on their own. Those made in the cold wave beyond the twin's, live
  // at its peak, are not a first execution's. (The other way round, the
  // twin's peak is left as it is: its gradients may have moved its peak to
  // another moment, and what they add there is not known.)
  const auto gradients_at_peak = [](const WaveLiveness& w) {
    return w.at_peak_bytes[static_cast<size_t>(Category::kAdapterGradient)];
  };
  const uint64_t extra_gradients =
      gradients_at_peak(cold) > gradients_at_peak(warm) ? gradients_at_peak(cold) - gradients_at_peak(warm) : 0;
  const uint64_t cold_peak =
      cold.measured_peak_bytes > extra_gradients ? cold.measured_peak_bytes - extra_gradients : 0;
  const uint64_t peak_delta = cold_peak > warm.measured_peak_bytes ? cold_peak - warm.measured_peak_bytes : 0;
  // The cold peak is at most the twin's state at that moment plus the
  // first-execution allocations live then: their most live together
  // bounds it at any size where they do not grow. Of those, scratch (made
  // and freed in one range) is held by one new shape at a time; the rest,
  // what the peak rose by beyond them, and what the device samples saw and
  // no record explains (a module loaded, a workspace made) may be held once
  // per new shape. The wave may have had several new shapes: what they kept
  // is charged whole per shape, not shared out between them (shapes keep
  // different amounts, and a new packing need not run new kernels).
  const uint64_t kept = std::min(cold.first_execution_max_live_bytes, cold.first_execution_kept_bytes);
  const uint64_t beyond =
      peak_delta > cold.first_execution_max_live_bytes ? peak_delta - cold.first_execution_max_live_bytes : 0;
  // The trace's first wave also pays for what the process keeps from its
  // first executions on (a GPU run kept 96 MiB of cuBLAS workspaces from
  // its first wave; its later cold waves kept 4.7 KB).
  FirstExecutionFit::Part& part = cold.first_in_trace ? fit->first_wave : fit->later_waves;
  part.once = std::max(part.once, cold.first_execution_max_live_bytes - kept);
  part.per_shape = std::max(part.per_shape, kept + beyond + unexplained);
  ++part.pairs;
  c->first_execution_at_peak_bytes = std::max(c->first_execution_at_peak_bytes, cold.first_execution_at_peak_bytes);
}

void finish_first_execution(const FirstExecutionFit& fit, Calibration* c) {
  const FirstExecutionFit::Part& shape = fit.later_waves.pairs > 0 ? fit.later_waves : fit.first_wave;
  c->first_execution_once_bytes = shape.once;
  c->first_execution_per_shape_bytes = shape.per_shape;
  // Each wave added once + per-shape of its own (its most live, what the
  // peak rose by beyond it, the unexplained growth); the sum of the largest
  // of each covers every wave's.
  c->first_execution_bytes = shape.once + shape.per_shape;
  // A process's first wave at a shape the first waves did not have: what the
  // process keeps, no less than the first waves kept, beside that shape's
  // own scratch and cache, no less than the later waves had. Their kept
  // bytes cannot be told apart from the first shape's, so both are charged
  // (over by at most the later waves' per-shape bytes: 2 MiB on the GPU).
  // With no first-wave pair, or no later one, the first wave's parts or the
  // later ones' are zero and this is first_execution_bytes.
  c->first_execution_first_wave_bytes =
      std::max(fit.first_wave.once, shape.once) + fit.first_wave.per_shape + fit.later_waves.per_shape;
  c->first_execution_first_wave_pairs = fit.first_wave.pairs;
}

}  // namespace psc
