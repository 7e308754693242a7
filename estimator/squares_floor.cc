// The squares floor of packed calibrations (estimator/squares_floor.h).
#include "estimator/squares_floor.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace psc {

// The fit passes through every size to a byte, and through more sizes than
// it has coefficients: the term is made of the fit's features (a plane
// through as many sizes as coefficients passes through them whatever the
// term is made of).
bool exact_plane(const GrowthLine& line, const std::vector<GrowthPoint>& sizes) {
  const size_t coefficients = 1 + (line.per_token != 0) + (line.per_square_token != 0) +
                              (line.per_longest_square != 0) + (line.per_sequence != 0);
  if (sizes.size() <= coefficients) return false;
  return std::all_of(sizes.begin(), sizes.end(), [&](const GrowthPoint& p) {
    return std::abs(line.at(p.size) - static_cast<double>(p.bytes)) <= 1.0;
  });
}

// The lower convex hull of the sizes in (tokens, squares), in token order
// (Andrew's monotone chain, lower half): at each token count the fewest
// squares, then only the knots the hull bends at.
std::vector<GrowthTerm::Knot> lower_hull(const std::vector<GrowthPoint>& sizes) {
  std::map<int64_t, double> fewest;
  for (const GrowthPoint& p : sizes) {
    auto [it, fresh] = fewest.emplace(p.size.tokens, p.size.square_tokens);
    if (!fresh) it->second = std::min(it->second, p.size.square_tokens);
  }
  std::vector<GrowthTerm::Knot> hull;
  for (const auto& [tokens, squares] : fewest) {
    const GrowthTerm::Knot k{tokens, squares};
    while (hull.size() >= 2) {
      const GrowthTerm::Knot& a = hull[hull.size() - 2];
      const GrowthTerm::Knot& b = hull.back();
      // b lies on or above the chord from a to k: not a bend of the hull.
      const double cross = static_cast<double>(b.tokens - a.tokens) * (k.value - a.value) -
                           (b.value - a.value) * static_cast<double>(k.tokens - a.tokens);
      if (cross > 0) break;
      hull.pop_back();
    }
    hull.push_back(k);
  }
  return hull;
}

double GrowthTerm::squares_floor_at(int64_t tokens) const {
  if (squares_floor.empty() || tokens <= 0) return 0;
  const Knot& first = squares_floor.front();
  const Knot& last = squares_floor.back();
  const double t = static_cast<double>(tokens);
  if (tokens <= first.tokens) return first.value * t / static_cast<double>(first.tokens);
  if (tokens >= last.tokens) return last.value * t / static_cast<double>(last.tokens);
  return between_knots(squares_floor, tokens);
}

}  // namespace psc
