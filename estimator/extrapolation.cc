// What a calibrated price read beyond what its calibration measured, and the
// warnings that say so (estimator/predict.h, Extrapolation).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "estimator/predict.h"

namespace psc {
namespace {

void add_sorted(std::vector<std::string>& into, const char* name) {
  auto it = std::lower_bound(into.begin(), into.end(), name);
  if (it == into.end() || *it != name) into.insert(it, name);
}

}  // namespace

void Extrapolation::note(const char* term, const GrowthTerm& fit, WaveSize size, uint8_t mask) {
  if (fit.sizes == 0) return;  // no points (a zero term), or a calibration that kept no sizes
  const bool is_outside = mask != 0;
  // A wave of one sequence against waves of one sequence: its squares and
  // longest sequence follow from its tokens, and only those are named.
  features |= fit.largest.sequences <= 1 && size.sequences <= 1 ? (mask & GrowthTerm::kOutsideTokens) : mask;
  if (mask & GrowthTerm::kOutsideLongest) longest_square_beyond = std::max(longest_square_beyond, size.longest_square);
  if (size.sequences <= 1 && fit.smallest.sequences > 1) one_sequence_unseen = true;
  if (fit.below_knots(size) && size.tokens > shorter_one_sequence)
    std::tie(shorter_one_sequence, shortest_one_sequence) = std::tuple(size.tokens, fit.knots.front().tokens);
  if (const double floor = fit.floored_squares(size); floor > size.square_tokens && size.tokens > shorter_tokens)
    std::tie(shorter_tokens, shorter_squares, shorter_floor) = std::tuple(size.tokens, size.square_tokens, floor);
  // Most reads repeat a term already noted (one per layer): compare by pointer first.
  auto seen = [&](std::vector<const char*>& names) {
    if (std::find(names.begin(), names.end(), term) != names.end()) return true;
    names.push_back(term);
    return false;
  };
  if (fit.few_sizes() && !seen(noted_few_)) add_sorted(few_sizes, term);
  if (is_outside && !seen(noted_outside_)) add_sorted(outside, term);
}

std::vector<std::string> Extrapolation::warnings(const Calibration& c) const {
  auto list = [](const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  std::vector<std::string> out;
  for (const std::string& w : c.warnings) out.push_back("calibration: " + w);
  const GrowthTerm& w = c.workspace;
  if (!outside.empty())
    out.push_back(fmt::format(
        "outside the calibrated sizes (tokens per group {}..{}; outside in {}): {} priced with the conservative growth",
        w.smallest.tokens, w.largest.tokens, list(GrowthTerm::feature_names(features)), list(outside)));
  if (longest_square_beyond > w.longest_measured_square() * (1 + 1e-9) && w.bounds_longer_sequences())
    out.push_back(
        fmt::format("a longest sequence of {} tokens, beyond the longest calibrated ({}): its squares are priced as "
                    "l_max^2 / {:.3g}, the smallest share of a calibration wave's squares in its longest sequence "
                    "(a bound: docs/pricing.md)",
                    std::lround(std::sqrt(longest_square_beyond)), std::lround(std::sqrt(w.longest_measured_square())),
                    w.least_longest_share));
  if (longest_square_beyond > w.longest_measured_square() * (1 + 1e-9) && w.tells_longest_apart())
    out.push_back(fmt::format(
        "a longest sequence of {} tokens, beyond the longest calibrated ({}): the squares beyond {}^2 are charged "
        "twice (an allowance, not a bound: docs/pricing.md); calibrate with a sequence as long",
        std::lround(std::sqrt(longest_square_beyond)), std::lround(std::sqrt(w.longest_measured_square())),
        std::lround(std::sqrt(w.longest_measured_square()))));
  if (one_sequence_unseen)
    out.push_back(
        "a wave of one sequence, against a calibration of packed waves only: its squares are a larger share of its "
        "tokens squared than any calibration wave's, a direction the fit never saw; held-out models needed up to "
        "17% more than such a price (docs/accuracy.md): calibrate with waves of one sequence too");
  if (shorter_one_sequence > 0)
    out.push_back(fmt::format(
        "a wave of one sequence of {} tokens, shorter than the shortest calibrated ({}): no chord bounds it and it is "
        "priced from the packings' plane (held-out models needed up to 0.17% more: docs/accuracy.md); calibrate "
        "with one sequence as short",
        shorter_one_sequence, shortest_one_sequence));
  if (shorter_tokens > 0)
    out.push_back(fmt::format(
        "a group of {} tokens packs shorter sequences than any calibration wave ({:.0f} squares; the calibrated "
        "packings hold at least {:.0f} at these tokens): its squares are priced as those (an allowance, not a bound: "
        "docs/pricing.md); calibrate with packings of sequences as short",
        shorter_tokens, shorter_squares, shorter_floor));
  if (waiting_assumed)
    out.push_back(
        "groups: the calibration saw no group wait for another's backward; each waiting group is charged what its "
        "forward left (head_saved: the most its head held before the backward, or what was live where the head's "
        "backward began, where the trace marks it), a bound: calibrate with waves of several groups to measure it");
  if (!few_sizes.empty())
    out.push_back(
        fmt::format("calibrated from fewer than 3 sizes, growth not told apart: {} priced with the "
                    "conservative growth",
                    list(few_sizes)));
  return out;
}

}  // namespace psc
