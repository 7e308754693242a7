// The first-execution allowance, calibrated from each cold wave beside its
// warm twin (docs/pricing.md, "Several gradient groups" and "A process's
// first wave"; the price of a cold wave of several group shapes is
// predict.h's first_execution_allowance).
#pragma once

#include <cstddef>
#include <cstdint>

#include "estimator/calibration.h"
#include "estimator/liveness.h"

namespace psc {

// What the cold waves of the traces said, kept apart until every trace is read:
// a process's first wave pays once what the process keeps to its end
// (library workspaces, lazily loaded modules) on top of what a new shape
// adds; the cold waves after it pay only the latter.
struct FirstExecutionFit {
  struct Part {
    uint64_t once = 0;       // made and freed in one range (scratch), held by one shape at a time
    uint64_t per_shape = 0;  // kept, the peak's rise beyond, the unexplained device growth
    size_t pairs = 0;
  };
  Part first_wave;   // cold waves that were their trace's first
  Part later_waves;  // cold waves after it
};

// Adds what the cold wave `cold` of `trace` says of first executions to
// `fit` (and the pair's counters to `c`).
void add_first_execution(const Liveness& trace, const WaveLiveness& cold, FirstExecutionFit* fit, Calibration* c);
// Sets the allowance of `c` from the waves added: once and per-shape from
// the cold waves after a first wave (the first waves' where there were none),
// and first_execution_first_wave_bytes from the first waves.
void finish_first_execution(const FirstExecutionFit& fit, Calibration* c);

}  // namespace psc
