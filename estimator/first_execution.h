// The first-execution allowance, calibrated from each cold wave beside its
// warm twin (docs/pricing.md, "Several gradient groups"; the price of a cold
// wave of several group shapes is predict.h's first_execution_allowance).
#pragma once

#include <cstddef>
#include <vector>

#include "estimator/calibration.h"
#include "estimator/growth.h"
#include "estimator/liveness.h"

namespace psc {

// How many of `wave`'s group shapes are not in `run` (the shapes earlier
// waves of its trace ran); adds them to it.
size_t shapes_not_run(const WaveLiveness& wave, std::vector<WaveSize>& run);

// Adds what the cold wave `cold` of `trace`, with `new_shapes` group shapes
// no earlier wave ran, says of first executions to `c`: the most it added
// over its warm twin's peak (first_execution_bytes), what it kept past its
// end per new shape (first_execution_per_shape_bytes) and what it made and
// freed again (first_execution_once_bytes).
void add_first_execution(const Liveness& trace, const WaveLiveness& cold, size_t new_shapes, Calibration* c);

}  // namespace psc
