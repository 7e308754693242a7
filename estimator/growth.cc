#include "estimator/growth.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "estimator/squares_floor.h"

namespace psc {
namespace {

// The largest value measured at each distinct size, and every point (the
// total excess counts every point, as the calibration's waves weigh).
struct Data {
  std::vector<GrowthPoint> tops;
  std::vector<GrowthPoint> points;
};

// A size as the fits tell sizes apart: every feature (waves of one sequence
// differ in tokens alone).
using SizeKey = std::tuple<int64_t, double, double, double>;
SizeKey key_of(const WaveSize& s) { return {s.tokens, s.square_tokens, s.longest_square, s.sequences}; }

Data data_of(const std::vector<GrowthPoint>& points) {
  std::map<SizeKey, GrowthPoint> top;
  for (const GrowthPoint& p : points) {
    auto [it, fresh] = top.emplace(key_of(p.size), p);
    if (!fresh) it->second.bytes = std::max(it->second.bytes, p.bytes);
  }
  Data d;
  d.points = points;
  for (const auto& [key, point] : top) d.tops.push_back(point);
  return d;
}

bool covers(const GrowthLine& line, const Data& d) {
  for (const GrowthPoint& p : d.tops) {
    const double y = static_cast<double>(p.bytes);
    if (line.at(p.size) < y - 1e-6 * std::max(1.0, y)) return false;
  }
  return true;
}

double excess(const GrowthLine& line, const Data& d) {
  double sum = 0;
  for (const GrowthPoint& p : d.points) sum += line.at(p.size) - static_cast<double>(p.bytes);
  return sum;
}

// Of the candidates that cover every point, the one with the least excess.
// The flat line at the largest value always covers.
struct Best {
  GrowthLine line;
  double least = 0;
  bool any = false;
  void consider(const GrowthLine& candidate, const Data& d) {
    if (!std::isfinite(candidate.intercept) || !std::isfinite(candidate.per_token) ||
        !std::isfinite(candidate.per_square_token) || !covers(candidate, d))
      return;
    const double e = excess(candidate, d);
    if (!any || e < least) {
      line = candidate;
      least = e;
      any = true;
    }
  }
};

GrowthLine flat(const Data& d) {
  double top = 0;
  for (const GrowthPoint& p : d.tops) top = std::max(top, static_cast<double>(p.bytes));
  return {top, 0, 0};
}

// In one dimension the envelope lies along an edge of the points' upper
// convex hull: trying the line through every pair of distinct token counts
// (and the flat line) finds it. A least-squares line lifted by its largest
// residual would cover the points too, but its slope is pulled by small waves.
GrowthLine linear_envelope(const Data& d) {
  Best best;
  best.consider(flat(d), d);
  for (size_t a = 0; a < d.tops.size(); ++a) {
    for (size_t b = a + 1; b < d.tops.size(); ++b) {
      const GrowthPoint& p = d.tops[a];
      const GrowthPoint& q = d.tops[b];
      if (p.size.tokens == q.size.tokens) continue;
      const double slope = (static_cast<double>(q.bytes) - static_cast<double>(p.bytes)) /
                           static_cast<double>(q.size.tokens - p.size.tokens);
      best.consider({static_cast<double>(p.bytes) - slope * static_cast<double>(p.size.tokens), slope, 0}, d);
    }
  }
  return best.line;
}

// intercept + c × s through two points of different s; c may be negative.
bool square_line(const GrowthPoint& p, const GrowthPoint& q, GrowthLine& out) {
  if (p.size.square_tokens == q.size.square_tokens) return false;
  const double c =
      (static_cast<double>(q.bytes) - static_cast<double>(p.bytes)) / (q.size.square_tokens - p.size.square_tokens);
  out = {static_cast<double>(p.bytes) - c * p.size.square_tokens, 0, c};
  return true;
}

// The plane a + b t + c s through three points (Cramer's rule on features
// scaled to about 1, so the determinant means something).
bool plane(const GrowthPoint& p, const GrowthPoint& q, const GrowthPoint& r, GrowthLine& out) {
  const double ts =
      std::max({1.0, std::abs(static_cast<double>(p.size.tokens)), std::abs(static_cast<double>(q.size.tokens)),
                std::abs(static_cast<double>(r.size.tokens))});
  const double ss = std::max({1.0, p.size.square_tokens, q.size.square_tokens, r.size.square_tokens});
  const double u[3] = {static_cast<double>(p.size.tokens) / ts, static_cast<double>(q.size.tokens) / ts,
                       static_cast<double>(r.size.tokens) / ts};
  const double v[3] = {p.size.square_tokens / ss, q.size.square_tokens / ss, r.size.square_tokens / ss};
  const double y[3] = {static_cast<double>(p.bytes), static_cast<double>(q.bytes), static_cast<double>(r.bytes)};
  auto det = [](const double a[3], const double b[3], const double c[3]) {
    return a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0]) + a[2] * (b[0] * c[1] - b[1] * c[0]);
  };
  // Rows: (1, u_k, v_k); columns as arrays.
  const double one[3] = {1, 1, 1};
  const double d = det(one, u, v);
  if (std::abs(d) < 1e-9) return false;
  const double a = det(y, u, v) / d;
  const double b = det(one, y, v) / d;
  const double c = det(one, u, y) / d;
  out = {a, b / ts, c / ss};
  return true;
}

// The quadratic envelope: growth in s never negative (a term that shrinks
// with longer sequences is not what memory does), linear candidates included.
GrowthLine quadratic_envelope(const Data& d) {
  Best best;
  best.consider(linear_envelope(d), d);
  const size_t n = d.tops.size();
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      GrowthLine line;
      if (square_line(d.tops[a], d.tops[b], line) && line.per_square_token >= 0) best.consider(line, d);
      for (size_t c = b + 1; c < n; ++c) {
        if (plane(d.tops[a], d.tops[b], d.tops[c], line) && line.per_square_token >= 0) best.consider(line, d);
      }
    }
  }
  return best.line;
}

// The largest relative error predicting a calibration size from the others
// (each size left out in turn); -1 when fewer than `needed` sizes remain.
template <typename Fit>
double left_out_error(const Data& d, size_t needed, Fit fit) {
  if (d.tops.size() < needed + 1) return -1;
  double worst = 0;
  for (size_t k = 0; k < d.tops.size(); ++k) {
    Data rest;
    for (size_t j = 0; j < d.tops.size(); ++j)
      if (j != k) rest.tops.push_back(d.tops[j]);
    for (const GrowthPoint& p : d.points)
      if (key_of(p.size) != key_of(d.tops[k].size)) rest.points.push_back(p);
    const double y = static_cast<double>(d.tops[k].bytes);
    const double predicted = fit(rest).at(d.tops[k].size);
    worst = std::max(worst, std::abs(predicted - y) / std::max(y, 1024.0));
  }
  return worst;
}

// Three sizes leave none out for the quadratic: it is chosen when the line
// misses a left-out size by more than this.
constexpr double kLinearTolerance = 0.01;

bool any_packed(const Data& d) {
  return std::any_of(d.points.begin(), d.points.end(), [](const GrowthPoint& p) { return p.size.sequences > 1; });
}

void finish(const Data& d, GrowthTerm& t) {
  t.points = d.points.size();
  t.sizes = d.tops.size();
  if (!d.points.empty()) {
    t.smallest = t.largest = d.points.front().size;
    for (const GrowthPoint& p : d.points) {
      t.smallest.tokens = std::min(t.smallest.tokens, p.size.tokens);
      t.largest.tokens = std::max(t.largest.tokens, p.size.tokens);
      t.smallest.square_tokens = std::min(t.smallest.square_tokens, p.size.square_tokens);
      t.largest.square_tokens = std::max(t.largest.square_tokens, p.size.square_tokens);
      t.smallest.sequences = std::min(t.smallest.sequences, p.size.sequences);
      t.largest.sequences = std::max(t.largest.sequences, p.size.sequences);
      t.largest.longest_square = std::max(t.largest.longest_square, p.size.longest_square);
      if (p.size.square_tokens > 0) {
        t.longest_share = std::max(t.longest_share, p.size.longest_square / p.size.square_tokens);
        t.least_longest_share = std::min(t.least_longest_share, p.size.longest_square / p.size.square_tokens);
      }
    }
  }
  double above = 0;
  for (const GrowthPoint& p : d.points) {
    const double r = static_cast<double>(p.bytes) - t.line(p.size);
    above = std::max(above, r);
    t.max_abs_residual = std::max(t.max_abs_residual, std::abs(r));
  }
  // Only rounding can leave a point above the envelope; cover it.
  t.margin_bytes = static_cast<uint64_t>(std::ceil(above));
  t.knots.clear();
  const bool one_sequence = std::all_of(d.points.begin(), d.points.end(), [](const GrowthPoint& p) {
    return p.size.sequences <= 1 && p.size.square_tokens == static_cast<double>(p.size.tokens) * p.size.tokens;
  });
  if (one_sequence && d.tops.size() >= 2)
    for (const GrowthPoint& p : d.tops) t.knots.push_back({p.size.tokens, static_cast<double>(p.bytes)});
  t.squares_floor.clear();
  if (any_packed(d) && !exact_plane(t.fit(), d.tops)) t.squares_floor = lower_hull(d.tops);
}

void set_fit(GrowthTerm& t, const GrowthLine& line) {
  t.intercept = line.intercept;
  t.per_token = line.per_token;
  t.per_square_token = line.per_square_token;
  t.per_longest_square = line.per_longest_square;
  t.per_sequence = line.per_sequence;
}

// ---- packed calibrations: more features, chosen by the left-out error -------

// Features a packed fit may use beside the intercept, as GrowthLine holds them.
enum Feature : uint8_t { kTokens, kSquares, kLongest, kSequences };

double feature_of(const WaveSize& s, Feature f) {
  switch (f) {
    case kTokens: return static_cast<double>(s.tokens);
    case kSquares: return s.square_tokens;
    case kLongest: return s.longest_square;
    case kSequences: return s.sequences;
  }
  return 0;
}

GrowthLine line_of(const std::vector<Feature>& features, const std::vector<double>& coefficients) {
  GrowthLine l;
  l.intercept = coefficients[0];
  for (size_t k = 0; k < features.size(); ++k) {
    const double c = coefficients[k + 1];
    switch (features[k]) {
      case kTokens: l.per_token = c; break;
      case kSquares: l.per_square_token = c; break;
      case kLongest: l.per_longest_square = c; break;
      case kSequences: l.per_sequence = c; break;
    }
  }
  return l;
}

// The hyperplane intercept + Σ coefficient × feature through |features| + 1
// points (Gaussian elimination on features scaled to about 1, so a pivot's
// size means something); false when they do not determine one.
bool hyperplane(const std::vector<const GrowthPoint*>& through, const std::vector<Feature>& features, GrowthLine& out) {
  const size_t n = features.size() + 1;
  std::vector<double> scale(n, 1.0);
  for (size_t k = 0; k < features.size(); ++k)
    for (const GrowthPoint* p : through)
      scale[k + 1] = std::max(scale[k + 1], std::abs(feature_of(p->size, features[k])));
  std::vector<std::vector<double>> a(n, std::vector<double>(n + 1));
  for (size_t r = 0; r < n; ++r) {
    a[r][0] = 1;
    for (size_t k = 0; k < features.size(); ++k) a[r][k + 1] = feature_of(through[r]->size, features[k]) / scale[k + 1];
    a[r][n] = static_cast<double>(through[r]->bytes);
  }
  for (size_t col = 0; col < n; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < n; ++r)
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    if (std::abs(a[pivot][col]) < 1e-9) return false;
    std::swap(a[col], a[pivot]);
    for (size_t r = 0; r < n; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (size_t c = col; c <= n; ++c) a[r][c] -= f * a[col][c];
    }
  }
  std::vector<double> coefficients(n);
  for (size_t k = 0; k < n; ++k) coefficients[k] = a[k][n] / a[k][k] / scale[k];
  out = line_of(features, coefficients);
  return true;
}

// The envelope over `features`: of the hyperplanes through |features| + 1 of
// the sizes that cover every size, the one with the least excess (the flat
// line always covers).
GrowthLine envelope_over(const std::vector<Feature>& features, const Data& d) {
  Best best;
  best.consider(flat(d), d);
  const size_t need = features.size() + 1;
  const size_t n = d.tops.size();
  if (n < need) return best.line;
  std::vector<size_t> pick(need);
  for (size_t k = 0; k < need; ++k) pick[k] = k;
  std::vector<const GrowthPoint*> through(need);
  while (true) {
    for (size_t k = 0; k < need; ++k) through[k] = &d.tops[pick[k]];
    GrowthLine line;
    if (hyperplane(through, features, line) && plausible(line)) best.consider(line, d);
    size_t k = need;
    while (k > 0 && pick[k - 1] == n - need + k - 1) --k;
    if (k == 0) break;
    ++pick[k - 1];
    for (size_t j = k; j < need; ++j) pick[j] = pick[j - 1] + 1;
  }
  return best.line;
}

// The feature sets a packed fit chooses among, fewest first.
const std::vector<std::vector<Feature>>& packed_feature_sets() {
  static const std::vector<std::vector<Feature>> sets = {{kTokens},
                                                         {kTokens, kSquares},
                                                         {kTokens, kSquares, kLongest},
                                                         {kTokens, kSquares, kSequences},
                                                         {kTokens, kSquares, kLongest, kSequences}};
  return sets;
}

// The largest distance of a calibration size below the line (0: the line
// passes through every size).
double largest_gap(const GrowthLine& line, const Data& d) {
  double gap = 0;
  for (const GrowthPoint& p : d.tops) gap = std::max(gap, line.at(p.size) - static_cast<double>(p.bytes));
  return gap;
}

// A packed calibration: of the feature sets whose left-out error can be
// measured (a size left out, at least one more size than the set needs
// remains), the one with the least; a set needs a clear gain (a tenth of a
// percent) over a smaller one. None measurable: tokens and squares.
//
// A gain that small can still matter beyond the calibrated sizes: a term
// with a few bytes per sequence (a scalar or an index per sequence), fitted
// without that feature, tilts the other coefficients by a few parts in a
// million, and three times beyond the largest size that is tens of bytes
// under. So where the chosen set leaves a size below its envelope and a set
// with more features passes through every size (to a byte), measurable on a
// size left out as well, that set is taken: the sizes lie on it, which is
// what a term made of those features does. Terms that are maxima of several
// events lie on no such plane and keep the chosen set.
GrowthLine packed_fit(const Data& d) {
  const std::vector<std::vector<Feature>>& sets = packed_feature_sets();
  std::vector<double> errors(sets.size());  // each set's left-out error; < 0: not measurable
  std::vector<Feature> chosen = {kTokens, kSquares};
  double chosen_error = -1;
  for (size_t k = 0; k < sets.size(); ++k) {
    const std::vector<Feature>& set = sets[k];
    errors[k] = left_out_error(d, set.size() + 1, [&](const Data& rest) { return envelope_over(set, rest); });
    if (errors[k] < 0) continue;
    if (chosen_error < 0 || errors[k] < chosen_error - 1e-3) {
      chosen = set;
      chosen_error = errors[k];
    }
  }
  const GrowthLine fit = envelope_over(chosen, d);
  constexpr double kOnePlane = 1.0;  // bytes
  if (largest_gap(fit, d) <= kOnePlane) return fit;
  for (size_t k = 0; k < sets.size(); ++k) {
    const std::vector<Feature>& set = sets[k];
    if (errors[k] < 0 || set.size() <= chosen.size() ||
        !std::includes(set.begin(), set.end(), chosen.begin(), chosen.end()))
      continue;
    const GrowthLine exact = envelope_over(set, d);
    if (largest_gap(exact, d) <= kOnePlane) return exact;
  }
  return fit;
}

}  // namespace

const char* growth_name(Growth growth) {
  switch (growth) {
    case Growth::kFlat: return "flat";
    case Growth::kLinear: return "linear";
    case Growth::kQuadratic: return "quadratic";
    case Growth::kNone: break;
  }
  return "none";
}

Growth growth_from_name(const std::string& name) {
  for (Growth g : {Growth::kNone, Growth::kFlat, Growth::kLinear, Growth::kQuadratic})
    if (name == growth_name(g)) return g;
  throw std::invalid_argument("must be one of none, flat, linear, quadratic");
}

bool GrowthTerm::prices_like(const GrowthTerm& o) const {
  auto same_size = [](const WaveSize& a, const WaveSize& b) {
    return a.tokens == b.tokens && a.square_tokens == b.square_tokens && a.longest_square == b.longest_square &&
           a.sequences == b.sequences;
  };
  return fit() == o.fit() && margin_bytes == o.margin_bytes && sizes == o.sizes && has_beyond == o.has_beyond &&
         (!has_beyond || beyond == o.beyond) && same_size(smallest, o.smallest) && same_size(largest, o.largest) &&
         longest_share == o.longest_share && least_longest_share == o.least_longest_share && knots == o.knots &&
         squares_floor == o.squares_floor;
}

uint8_t GrowthTerm::outside_mask(WaveSize size) const {
  if (sizes == 0 || within_knots(size)) return 0;
  const double eps = 1e-9;
  uint8_t out = 0;
  if (size.tokens < smallest.tokens || size.tokens > largest.tokens) out |= kOutsideTokens;
  if (size.square_tokens < smallest.square_tokens * (1 - eps) || size.square_tokens > largest.square_tokens * (1 + eps))
    out |= kOutsideSquares;
  if (size.sequences > largest.sequences) out |= kOutsideSequences;
  if (size.longest_square > largest.longest_square * (1 + eps)) out |= kOutsideLongest;
  if (size.longest_square > longest_share * (1 + eps) * size.square_tokens) out |= kOutsideLongestShare;
  return out;
}

double GrowthTerm::between_knots(const std::vector<Knot>& knots, int64_t tokens) {
  // Knots are few (the calibrated sizes): a scan is cheaper than a search.
  size_t k = 1;
  while (k + 1 < knots.size() && knots[k].tokens < tokens) ++k;
  const Knot& a = knots[k - 1];
  const Knot& b = knots[k];
  const double x = static_cast<double>(tokens - a.tokens) / static_cast<double>(b.tokens - a.tokens);
  return a.value + (b.value - a.value) * x;
}

double GrowthTerm::chord(WaveSize size) const {
  if (knots.size() < 2 || size.sequences > 1 || size.tokens < knots.front().tokens || size.tokens > knots.back().tokens)
    return 0;
  return between_knots(knots, size.tokens);
}

double GrowthTerm::with_long_sequence(WaveSize size) const {
  if (knots.size() < 2 || size.sequences <= 1) return 0;
  const auto longest = static_cast<int64_t>(std::ceil(std::sqrt(size.longest_square) - 1e-9));
  if (longest <= knots.front().tokens || longest > knots.back().tokens) return 0;
  const double excess = between_knots(knots, longest) - line(unpacked(longest));
  if (excess <= 0) return 0;
  size.square_tokens = floored_squares(size);
  return line(size) + excess;
}

std::vector<std::string> GrowthTerm::outside_features(WaveSize size) const { return feature_names(outside_mask(size)); }

std::vector<std::string> GrowthTerm::feature_names(uint8_t mask) {
  static constexpr std::pair<Outside, const char*> kNames[] = {{kOutsideTokens, "tokens"},
                                                               {kOutsideSquares, "squares"},
                                                               {kOutsideSequences, "sequences"},
                                                               {kOutsideLongest, "longest"},
                                                               {kOutsideLongestShare, "longest share"}};
  std::vector<std::string> out;
  for (const auto& [bit, name] : kNames)
    if (mask & bit) out.push_back(name);
  return out;
}

uint64_t GrowthTerm::bytes_at(WaveSize size, bool extrapolated) const {
  const double long_sequence = with_long_sequence(size);
  size = priced_size(size);
  double v = std::ceil(std::max({line(size), chord(size), long_sequence}));
  if (extrapolated) v = std::max(v, std::ceil(beyond.at(size)));
  return (v > 0 ? static_cast<uint64_t>(v) : 0) + margin_bytes;
}

bool plausible(const GrowthLine& l, double rounding) {
  return l.per_token >= -rounding && l.per_square_token >= -rounding && l.per_longest_square >= -rounding &&
         l.per_sequence >= -rounding;
}

double Margin::doublings_beyond(int64_t group_tokens) const {
  if (largest_tokens <= 0 || group_tokens <= largest_tokens) return 0;
  return std::log2(static_cast<double>(group_tokens) / static_cast<double>(largest_tokens));
}

double Margin::factor(int64_t group_tokens) const {
  const double f = 1.0 + inside + per_doubling * doublings_beyond(group_tokens);
  return std::clamp(f, 1.0, 64.0);
}

GrowthTerm fit_linear(const std::vector<int64_t>& tokens, const std::vector<uint64_t>& bytes) {
  std::vector<GrowthPoint> points;
  for (size_t i = 0; i < tokens.size() && i < bytes.size(); ++i) points.push_back({unpacked(tokens[i]), bytes[i]});
  const Data d = data_of(points);
  GrowthTerm t;
  if (d.tops.empty()) return t;
  set_fit(t, linear_envelope(d));
  t.growth = t.per_token == 0 ? Growth::kFlat : Growth::kLinear;
  finish(d, t);
  return t;
}

namespace {

GrowthTerm fit_data(const Data& d) {
  GrowthTerm t;
  const size_t n = d.tops.size();
  if (n == 0) return t;
  if (n == 1) {
    // One size: flat below it; above, as if it grew with s (the fastest
    // growth a term here has), never below the flat value.
    set_fit(t, flat(d));
    t.growth = Growth::kFlat;
    const GrowthPoint& p = d.tops.front();
    if (p.size.square_tokens > 0) {
      t.has_beyond = true;
      t.beyond = {0, 0, static_cast<double>(p.bytes) / p.size.square_tokens};
    }
    finish(d, t);
    return t;
  }
  const GrowthLine linear = linear_envelope(d);
  if (n == 2) {
    set_fit(t, linear);
    t.growth = linear.per_token == 0 ? Growth::kFlat : Growth::kLinear;
    GrowthLine through;
    if (square_line(d.tops[0], d.tops[1], through) && through.per_square_token > 0) {
      t.has_beyond = true;
      t.beyond = through;
    }
    finish(d, t);
    return t;
  }
  const GrowthLine quadratic = quadratic_envelope(d);
  t.left_out_error_linear = left_out_error(d, 2, linear_envelope);
  t.left_out_error_quadratic = left_out_error(d, 3, quadratic_envelope);
  // Packings of four sizes or more can tell more features apart; with three,
  // tokens and squares are chosen as for waves of one sequence.
  if (any_packed(d) && n >= 4) {
    const GrowthLine fit = packed_fit(d);
    set_fit(t, fit);
    t.growth = fit.per_square_token > 0 || fit.per_longest_square > 0 ? Growth::kQuadratic
               : fit.per_token != 0 || fit.per_sequence != 0          ? Growth::kLinear
                                                                      : Growth::kFlat;
    t.has_beyond = true;
    t.beyond = quadratic;
    finish(d, t);
    return t;
  }
  bool choose_quadratic = false;
  if (quadratic.per_square_token > 0) {
    choose_quadratic = t.left_out_error_quadratic >= 0 ? t.left_out_error_quadratic < t.left_out_error_linear
                                                       : t.left_out_error_linear > kLinearTolerance;
  }
  set_fit(t, choose_quadratic ? quadratic : linear);
  t.growth = choose_quadratic ? Growth::kQuadratic : (linear.per_token == 0 ? Growth::kFlat : Growth::kLinear);
  t.has_beyond = true;
  t.beyond = quadratic;
  finish(d, t);
  return t;
}

}  // namespace

GrowthTerm fit_growth(const std::vector<GrowthPoint>& points) {
  const Data all = data_of(points);
  std::vector<GrowthPoint> one;  // a packed calibration's sizes of one sequence (tops are in token order)
  if (any_packed(all))
    for (const GrowthPoint& p : all.tops)
      if (p.size.sequences <= 1) one.push_back(p);
  if (one.size() < 2) return fit_data(all);
  // The plane is fitted on the packings and the shortest of them; the longer
  // ones are knots along the curve of one sequence only (growth.h).
  std::vector<GrowthPoint> plane;
  for (const GrowthPoint& p : points)
    if (p.size.sequences > 1 || p.size.tokens <= one.front().size.tokens) plane.push_back(p);
  GrowthTerm t = fit_data(data_of(plane));
  t.knots.clear();
  for (const GrowthPoint& p : one) t.knots.push_back({p.size.tokens, static_cast<double>(p.bytes)});
  return t;
}

}  // namespace psc
