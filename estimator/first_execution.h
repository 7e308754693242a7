// The first-execution allowance, calibrated from each cold wave beside its
// warm twin (docs/pricing.md, "Several gradient groups"; the price of a cold
// wave of several group shapes is predict.h's first_execution_allowance).
#pragma once

#include "estimator/calibration.h"
#include "estimator/liveness.h"

namespace psc {

// Adds what the cold wave `cold` of `trace` says of first executions to `c`:
// the most it added over its warm twin's peak (first_execution_bytes), what
// of it each new shape may keep (first_execution_per_shape_bytes) and what
// it made and freed in one range (first_execution_once_bytes).
void add_first_execution(const Liveness& trace, const WaveLiveness& cold, Calibration* c);

}  // namespace psc
