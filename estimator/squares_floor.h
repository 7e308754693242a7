// The squares floor of packed calibrations (GrowthTerm::squares_floor;
// docs/pricing.md, "Shorter sequences than any calibrated packing"): the
// lower convex hull of the calibration sizes in (tokens, squares), kept only
// where the fit is not an exact plane.
#pragma once

#include <vector>

#include "estimator/growth.h"

namespace psc {

// The fit passes through every size to a byte, and through more sizes than
// it has coefficients: the term is made of the fit's features.
bool exact_plane(const GrowthLine& line, const std::vector<GrowthPoint>& sizes);

// The lower convex hull of `sizes` in (tokens, squares), in token order: at
// each token count the fewest squares, then only the knots the hull bends at.
std::vector<GrowthTerm::Knot> lower_hull(const std::vector<GrowthPoint>& sizes);

}  // namespace psc
