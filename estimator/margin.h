// The derived margin (docs/pricing.md "The derived margin"): how much a
// calibration's prices should add over their raw bytes, read off its own
// waves instead of a flat factor.
//
// Each calibrated size is left out in turn: the model is calibrated again
// from the other sizes' waves and prices the waves of the size left out, as
// it would price a wave nobody recorded (with the conservative growth and
// the chords a calibration of those sizes has: the margin measures the
// prices, not a fit taken alone, which from two sizes of a curved term
// misses by tens of percent where the prices do not). A size left out inside (or below)
// the others measures how far prices fall short between calibrated sizes; the
// largest size left out measures how fast they fall short beyond them, per
// doubling of tokens. Waves of one shape recorded more than once measure the
// run-to-run jitter of the peak itself. The margin is
//
//     factor(t) = 1 + inside + per_doubling × log2(t / largest calibrated), t beyond it
//     inside    = max(the worst shortfall of a size left out inside or below, jitter)
//
// so it grows with the distance beyond the calibrated sizes, and is zero only
// where no size left out fell short and repeated waves measured the same.
// A calibration of fewer than three sizes cannot leave one out and keep a
// growth: it keeps the flat factor and says why.
#pragma once

#include <vector>

#include "estimator/calibration.h"
#include "estimator/liveness.h"

namespace psc {

// `full` is the calibration of every wave of `traces`; its safety factor is
// what the left-out calibrations carry (it does not change their raw prices).
Margin derive_margin(const std::vector<Liveness>& traces, const Calibration& full);

}  // namespace psc
