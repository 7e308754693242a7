// How a calibrated quantity grows with the wave (docs/design.md, "Calibrated
// prices: waves never recorded"; docs/accuracy.md, "What is calibrated, and how").
//
// A wave's size is two features of one gradient group: its tokens t, and the
// sum of its sequences' squared lengths s (t² for one unpacked sequence; what
// eager attention's saved probabilities grow with). A fitted term is
//
//     bytes(t, s) = intercept + per_token × t + per_square_token × s
//
// chosen from the data: linear (per_square_token = 0) or quadratic, by the
// error on a calibration size left out. Every fit is an upper envelope: on or
// above each calibration point, with the least total excess.
//
// Outside the calibrated sizes (and from fewer than three of them, where the
// growth cannot be told) the term takes the conservative growth: the larger of
// the chosen fit and `beyond`, the quadratic envelope (one size: the value
// scaled by s / s0 above it; two sizes: intercept + c × s through both).
// Such prices carry a warning.
//
// Between calibrated sizes a fit can still fall below the truth: a quadratic
// through three points of a convex curve crosses it, and an envelope fitted on
// maxima of different events undershoots between them. Memory at a moment is
// taken to be convex in the wave's tokens (a + b t + c t², c >= 0, and maxima
// of such, are), so the chord between two measured sizes bounds it from above
// between them: inside the calibrated tokens every price is at least the
// chord through the measured values on either side (`knots`, the largest
// value at each size). That holds for waves of one sequence; packed waves
// vary in more than one feature and rely on the fit (docs/pricing.md).
//
// Packed waves have features the fit does not have: per-sequence work that
// runs one sequence at a time (attention's transient scores grow with the
// longest sequence, not the sum of squares) and fixed costs per sequence. A
// wave with more sequences, a longer longest sequence, or a larger share of
// its squares in the longest one than any calibration wave is outside the
// calibrated sizes: it is priced with the conservative growth and warned about
// (docs/accuracy.md measures what that leaves). A longest sequence longer than
// any calibrated one also has its squares priced as l_max² / ρ_min (ρ_min the
// calibration waves' smallest l_max² / Σl²): memory a + b t + c Σl² + d l_max²
// is fitted as c' ≈ c + d ρ, so with c, d ≥ 0 that bounds d l_max² from the
// fit alone. A calibration that holds a wave of one sequence beside its
// packings, at five sizes or more, measures d itself (tells_longest_apart)
// and needs no bound; README's recipe for packed models asks for one. A
// calibration of waves of one sequence only prices a packed wave as one
// sequence of its tokens (priced_size).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace psc {

struct WaveSize {
  int64_t tokens = 0;
  double square_tokens = 0;   // sum of squared sequence lengths
  double longest_square = 0;  // the longest sequence's length, squared
  double sequences = 1;       // how many sequences (a group's share of them)
  bool operator==(const WaveSize&) const = default;
};
// One sequence of `tokens` tokens.
WaveSize unpacked(int64_t tokens);
// A wave packed as `lengths` (empty: one sequence of `tokens`).
WaveSize packed(int64_t tokens, const std::vector<int64_t>& lengths);
// The size of one of `groups` gradient groups of a wave (groups of one
// forward split its tokens, and its sequences when it is packed).
WaveSize group_size(WaveSize whole, int64_t groups);
// The sizes of `groups` groups splitting a wave as evenly as its tokens
// allow: the first tokens % groups groups one token more than the others
// (group_size at their own tokens). Never a share below what a group runs.
std::vector<WaveSize> even_groups(WaveSize whole, int64_t groups);

enum class Growth : uint8_t { kNone, kFlat, kLinear, kQuadratic };
const char* growth_name(Growth growth);
// Throws std::invalid_argument on a name growth_name does not give.
Growth growth_from_name(const std::string& name);

// Packed calibrations (waves of several sequences) may also fit the longest
// sequence's squared length L (per-sequence work's transient: attention
// scores for the sequence being run) and the sequence count n (fixed costs
// per sequence), chosen by the error on a calibration size left out; waves of
// one sequence have L = s and n = 1, and those two stay 0.
struct GrowthLine {
  double intercept = 0;
  double per_token = 0;
  double per_square_token = 0;
  double per_longest_square = 0;
  double per_sequence = 0;
  double at(WaveSize size) const {
    return intercept + per_token * static_cast<double>(size.tokens) + per_square_token * size.square_tokens +
           per_longest_square * size.longest_square + per_sequence * size.sequences;
  }
  bool operator==(const GrowthLine&) const = default;
};

struct GrowthTerm {
  double intercept = 0;  // bytes
  double per_token = 0;  // bytes per token
  uint64_t margin_bytes = 0;
  size_t points = 0;
  double max_abs_residual = 0;    // largest |measured − fit| over the points
  double per_square_token = 0;    // bytes per squared token (quadratic growth)
  double per_longest_square = 0;  // packed calibrations only (GrowthLine)
  double per_sequence = 0;
  Growth growth = Growth::kNone;
  size_t sizes = 0;  // distinct calibration sizes
  // The calibrated range, and the conservative growth beyond it.
  // `longest_share`: the largest l_max² / Σl² of the calibration waves (1:
  // one of them was a single sequence).
  WaveSize smallest, largest;
  double longest_share = 0;
  double least_longest_share = 1;  // the smallest such share
  bool has_beyond = false;
  GrowthLine beyond;
  // Largest relative error on a left-out calibration size; -1: not measurable.
  double left_out_error_linear = -1;
  double left_out_error_quadratic = -1;
  // A value at a token count: bytes measured (knots), or squares
  // (squares_floor), in token order in either list.
  struct Knot {
    int64_t tokens = 0;
    double value = 0;
    bool operator==(const Knot&) const = default;
  };
  // The chord between the knots on either side of `tokens`, inside the
  // knots' tokens (at least two knots).
  static double between_knots(const std::vector<Knot>& knots, int64_t tokens);
  // The largest value measured at each calibrated size, in token order, when
  // every calibration wave was one sequence (empty otherwise): the chords
  // between neighbours bound a convex term from above between them.
  std::vector<Knot> knots;
  // The chord through the knots on either side of a wave of one sequence
  // inside the knots' tokens; 0 elsewhere (no bound from the chords there).
  double chord(WaveSize size) const;
  // The longest sequence measured, squared: the plane's, or a longer one
  // among the knots (a packed calibration's waves of one sequence).
  double longest_measured_square() const {
    const double knot = knots.empty() ? 0 : static_cast<double>(knots.back().tokens) * knots.back().tokens;
    return std::max(largest.longest_square, knot);
  }
  // A wave of one sequence (its squares its tokens', not a packed wave's
  // share) inside the knots' tokens: the chord bounds it, so it is inside the
  // calibrated sizes even where a packed calibration's plane never saw its
  // squares (the plane is fitted on the packings and the shortest sequence
  // alone; the longer ones are knots only).
  bool within_knots(WaveSize size) const {
    return knots.size() >= 2 && one_sequence(size) && size.tokens >= knots.front().tokens &&
           size.tokens <= knots.back().tokens;
  }
  // A packed calibration's wave of one sequence (its squares its tokens', not
  // a group's share of a packed wave) shorter than the shortest of the knots:
  // no chord bounds it, and no calibration wave lies beyond it in every
  // feature (the only waves of one sequence are longer), so the plane through
  // the packings prices it unbounded; held-out models priced such waves up to
  // 0.17% under (docs/accuracy.md). Warned, not priced differently. A
  // calibration of waves of one sequence only fits them all and says so with
  // its range.
  bool below_knots(WaveSize size) const {
    return knots.size() >= 2 && largest.sequences > 1 && one_sequence(size) && size.tokens < knots.front().tokens;
  }
  // A wave of one sequence: its squares its tokens', not a group's share of
  // a packed wave (one sequence by count, with more squares than that).
  static bool one_sequence(WaveSize size) {
    const double whole = static_cast<double>(size.tokens) * static_cast<double>(size.tokens);
    return size.sequences <= 1 && size.square_tokens <= whole * (1 + 1e-9);
  }
  // A packed wave whose longest sequence lies inside the knots' tokens (a
  // packed calibration's waves of one sequence): the plane's price of its
  // packing (squares floored, not charged twice) plus what one sequence of
  // that length measured above the plane (the chord less the plane there).
  // The plane, fitted on packings and the shortest single sequence, holds a
  // long sequence's squares at the packings' rate, which one long sequence
  // among short ones outgrows (docs/pricing.md). An allowance measured on
  // held-out models, not a bound; 0 where it does not apply.
  double with_long_sequence(WaveSize size) const;
  // Packed calibrations: the lower convex hull of the calibration sizes in
  // (tokens, squares), in token order (empty otherwise). A packed wave of
  // shorter sequences than calibrated (fewer squares for its tokens than
  // the hull holds) has its squares priced at the hull (priced_size): the fit
  // is a plane through sizes whose squares grew with their tokens, so part of
  // what grows with tokens went to the squares, and a wave below every
  // calibrated packing would get it back from neither. An allowance measured
  // on held-out models (docs/pricing.md), not a bound. A fit that passes
  // through more sizes than it has coefficients, to a byte, is taken to be
  // made of its features and has no hull.
  std::vector<Knot> squares_floor;
  // The hull's squares at `tokens`: between knots the chord; beyond either
  // end, the end knot's squares scaled with the tokens (a packing of the
  // same mean length); 0 without a hull.
  double squares_floor_at(int64_t tokens) const;
  // A wave's squares as priced against the hull: a packed wave's raised to
  // the hull at its tokens, never above one sequence of all of them (t², the
  // most squares a packing of them has); any other wave's own.
  double floored_squares(WaveSize size) const {
    if (size.sequences <= 1 || squares_floor.empty()) return size.square_tokens;
    const double whole = static_cast<double>(size.tokens) * static_cast<double>(size.tokens);
    return std::max(size.square_tokens, std::min(squares_floor_at(size.tokens), whole));
  }

  GrowthLine fit() const { return {intercept, per_token, per_square_token, per_longest_square, per_sequence}; }
  // Prices the same as `other` at every size (what pricing reads is equal).
  bool prices_like(const GrowthTerm& other) const;
  double line(WaveSize size) const { return fit().at(size); }
  double line(int64_t tokens) const { return line(unpacked(tokens)); }
  // Outside the sizes calibrated (either feature), or calibrated from fewer
  // than three sizes: a price from it is an extrapolation.
  bool outside(WaveSize size) const { return outside_mask(size) != 0; }
  // Which features of `size` lie outside the calibrated ones (Outside bits);
  // 0 inside.
  enum Outside : uint8_t {
    kOutsideTokens = 1,
    kOutsideSquares = 2,
    kOutsideSequences = 4,
    kOutsideLongest = 8,
    kOutsideLongestShare = 16,
  };
  uint8_t outside_mask(WaveSize size) const;
  // The same by name ("tokens", "squares", "sequences", "longest", "longest
  // share"), for a miss to be named; empty inside.
  std::vector<std::string> outside_features(WaveSize size) const;
  // The names of the features in an Outside mask, in the order above.
  static std::vector<std::string> feature_names(uint8_t mask);
  bool few_sizes() const { return sizes < 3; }
  // Calibrated on packed waves whose longest sequence held less than all of
  // their squares: a longer longest sequence has its squares bounded as
  // l_max² / least_longest_share (priced_size), which the warnings name;
  // unless the calibration tells the longest sequence's squares apart.
  bool bounds_longer_sequences() const {
    return sizes > 0 && largest.sequences > 1 && least_longest_share > 0 && least_longest_share < 1 &&
           !tells_longest_apart();
  }
  // Packed waves and a wave of one sequence (whose longest sequence holds all
  // of its squares), at five sizes or more: the fit weighed the longest
  // sequence's squares as a feature of their own on a size left out, from
  // waves where they are all of the squares and waves where they are a part,
  // and took them when they priced better. The bound above would charge a
  // share the fit has already measured (up to 1 / least_longest_share times
  // the squares when a calibration wave packs many short sequences). The
  // fit saw the longest's squares only up to the longest measured, though
  // (the plane's, or a longer knot: longest_measured_square), and a term
  // that is the maximum of several events can change events beyond it: there
  // the squares the longest sequence has beyond the longest measured are
  // charged twice (priced_size; an allowance measured on held-out models,
  // not a bound: docs/pricing.md).
  bool tells_longest_apart() const { return sizes >= 5 && largest.sequences > 1 && calibrated_one_sequence(); }
  // A calibration wave was one sequence (its longest held all its squares).
  bool calibrated_one_sequence() const { return longest_share >= 1 - 1e-9; }
  // ceil(fit) + margin, never negative; outside, at least the beyond line.
  uint64_t bytes_at(WaveSize size) const { return bytes_at(size, extrapolated(size)); }
  // With extrapolated() computed once for terms that share their sizes.
  uint64_t bytes_at(WaveSize size, bool extrapolated) const;
  // The size as priced: a longest sequence beyond the calibrated ones bounds
  // the squares (above).
  WaveSize priced_size(WaveSize size) const {
    // Calibrated on waves of one sequence only, where the squares of the
    // sequences and of the whole wave are one number: whether a quadratic
    // term grows with the one or the other cannot be told (attention over a
    // packed wave may score every pair of its tokens, masked). A packed wave
    // is priced as one sequence of its tokens, which bounds both.
    if (sizes > 0 && largest.sequences <= 1 && size.sequences > 1) {
      const double whole = static_cast<double>(size.tokens) * static_cast<double>(size.tokens);
      size.square_tokens = whole;
      size.longest_square = whole;
      return size;
    }
    size.square_tokens = floored_squares(size);
    if (size.longest_square > longest_measured_square() * (1 + 1e-9)) {
      if (bounds_longer_sequences())
        size.square_tokens = std::max(size.square_tokens, size.longest_square / least_longest_share);
      else if (tells_longest_apart())
        size.square_tokens += size.longest_square - longest_measured_square();
    }
    return size;
  }
  // Priced with the conservative growth at this size.
  bool extrapolated(WaveSize size) const { return has_beyond && (few_sizes() || outside(size)); }
  uint64_t bytes_at(int64_t tokens) const { return bytes_at(unpacked(tokens)); }
};

// Memory never shrinks with more tokens, or longer or more sequences: growth
// in t, s, L and n is never negative, less `rounding` (bytes per unit). A
// plane through maxima of different events can lean on one and take bytes
// off another (growth_test.cc); one event's fit that does says its events
// did not line up (calibration.cc).
bool plausible(const GrowthLine& l, double rounding = 0);

struct GrowthPoint {
  WaveSize size;
  uint64_t bytes = 0;
};

// The margin a price adds over its raw bytes, derived by each calibration from
// its own waves (estimator/margin.h derives it; docs/pricing.md "The derived margin"):
// a fraction inside the calibrated tokens, growing by `per_doubling` for each
// doubling of a group's tokens beyond the largest calibrated. Not derived
// (calibrate --safety, or calibrations written before it): the flat safety
// factor.
struct Margin {
  bool derived = false;
  double inside = 0;        // fraction of raw bytes
  double per_doubling = 0;  // fraction per doubling beyond largest_tokens
  int64_t largest_tokens = 0;
  // How it was derived: one line per size left out, and the jitter of
  // repeated waves; or why it was not.
  std::vector<std::string> evidence;
  // required = floor(raw x factor); never below 1, at most 64 (the plan's limits).
  double factor(int64_t group_tokens) const;
  // Doublings of a group's tokens beyond the largest calibrated (0 inside).
  double doublings_beyond(int64_t group_tokens) const;
};

GrowthTerm fit_growth(const std::vector<GrowthPoint>& points);
// The linear envelope in tokens alone (growth linear or flat): the fit of
// calibrations written before growth was chosen.
GrowthTerm fit_linear(const std::vector<int64_t>& tokens, const std::vector<uint64_t>& bytes);

}  // namespace psc
