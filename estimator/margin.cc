#include "estimator/margin.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "estimator/check.h"

namespace psc {
namespace {

bool calibrated(const WaveLiveness& w) { return w.tokens > 0 && w.children.empty(); }

// A calibrated size, as the margin leaves sizes out: a group's tokens.
int64_t group_tokens(const WaveLiveness& w) { return w.largest_group_tokens(); }

// The largest relative spread of measured peaks among waves recorded more
// than once in the same state: same shape (tokens, packing, each group's
// tokens, packing and slot, the order their backwards ran), cold or warm
// alike, the same gradients live when they began. Not a fit's error: the
// peak's own. Waves of the same tokens split otherwise between groups are
// other waves, not repeats.
double jitter(const std::vector<Liveness>& traces, std::string* where) {
  using GroupKey = std::tuple<int64_t, std::vector<int64_t>, std::string>;
  using Key = std::tuple<int64_t, std::vector<int64_t>, bool, int64_t, std::vector<std::string>, uint64_t,
                         std::vector<GroupKey>, std::vector<int32_t>>;
  std::map<Key, std::pair<uint64_t, uint64_t>> range;  // least, largest peak
  for (const Liveness& t : traces) {
    for (const WaveLiveness& w : t.waves) {
      if (!calibrated(w)) continue;
      const uint64_t live =
          std::accumulate(w.gradient_live_at_start_bytes.begin(), w.gradient_live_at_start_bytes.end(), uint64_t{0});
      std::vector<GroupKey> groups;
      for (const WaveLiveness::Group& g : w.group_list) groups.emplace_back(g.tokens, g.sequence_lengths, g.slot);
      const Key key{w.tokens, w.sequence_lengths, w.cold, w.groups, w.slots, live, groups, w.backward_order};
      auto [it, fresh] = range.emplace(key, std::make_pair(w.measured_peak_bytes, w.measured_peak_bytes));
      if (!fresh) {
        it->second.first = std::min(it->second.first, w.measured_peak_bytes);
        it->second.second = std::max(it->second.second, w.measured_peak_bytes);
      }
    }
  }
  double worst = 0;
  for (const auto& [key, peaks] : range) {
    if (peaks.second == 0) continue;
    const double spread = static_cast<double>(peaks.second - peaks.first) / static_cast<double>(peaks.second);
    if (spread > worst) {
      worst = spread;
      *where = fmt::format("{} tokens {}", std::get<0>(key), std::get<2>(key) ? "cold" : "warm");
    }
  }
  return worst;
}

// Terms measured exactly, not fitted, come from every wave: a step whose
// only gradient wave is the size left out would otherwise price it with no
// gradients at all, a kind of wave the rest never saw, which says nothing
// about how the fits err.
void keep_measured_terms(const Calibration& full, Calibration* rest) {
  rest->adapter_gradient_bytes = full.adapter_gradient_bytes;
  rest->first_execution_bytes = full.first_execution_bytes;
  rest->first_execution_per_shape_bytes = full.first_execution_per_shape_bytes;
  rest->first_execution_once_bytes = full.first_execution_once_bytes;
  rest->first_execution_first_wave_bytes = full.first_execution_first_wave_bytes;
  rest->sequence_allowance_bytes = full.sequence_allowance_bytes;
}

}  // namespace

Margin derive_margin(const std::vector<Liveness>& traces, const Calibration& full) {
  Margin m;
  std::set<int64_t> tokens;
  // A packed calibration's waves whose largest group is one sequence at a
  // size no packing has are knots of the one-sequence chord (growth.cc), not
  // fitted: left out, the others would price them as an extrapolation the
  // calibration does not make.
  std::map<int64_t, bool> one_sequence_only;  // largest group's tokens -> every such group one sequence
  bool packed_waves = false;
  for (const Liveness& t : traces)
    for (const WaveLiveness& w : t.waves) {
      if (!calibrated(w)) continue;
      const std::vector<WaveSize> sizes = w.group_sizes();
      const auto largest = std::max_element(sizes.begin(), sizes.end(),
                                            [](const WaveSize& a, const WaveSize& b) { return a.tokens < b.tokens; });
      if (largest == sizes.end()) continue;
      for (const WaveSize& s : sizes) packed_waves |= s.sequences > 1;
      auto [it, fresh] = one_sequence_only.emplace(largest->tokens, true);
      it->second = it->second && largest->sequences <= 1;
    }
  for (const auto& [size, one_only] : one_sequence_only)
    if (!(packed_waves && one_only)) tokens.insert(size);
  if (tokens.size() < 3) {
    m.evidence.push_back(fmt::format(
        "not derived: {} calibrated size{} (tokens per group); leaving one out needs three or more, so prices "
        "take the flat safety factor x{}",
        tokens.size(), tokens.size() == 1 ? "" : "s", full.safety_factor));
    return m;
  }
  m.derived = true;
  m.largest_tokens = *tokens.rbegin();
  for (const int64_t left_out : tokens) {
    const auto use = [&](const WaveLiveness& w) { return group_tokens(w) != left_out; };
    Calibration rest = calibrate(traces, full.safety_factor, use);
    keep_measured_terms(full, &rest);
    double worst = INFINITY;
    size_t priced = 0;
    for (const Liveness& t : traces) {
      std::set<int32_t> waves;
      for (const WaveLiveness& w : t.waves)
        if (calibrated(w) && !use(w)) waves.insert(w.index);
      if (waves.empty()) continue;
      for (const CheckRow& r : check_trace(rest, t)) {
        if (!waves.count(r.wave)) continue;
        ++priced;
        worst = std::min(worst, r.raw_error);
      }
    }
    if (priced == 0) continue;
    const double under = std::max(0.0, -worst);
    int64_t others_largest = 0;
    for (int64_t k : tokens)
      if (k != left_out) others_largest = std::max(others_largest, k);
    if (left_out > others_largest) {
      const double doublings = std::log2(static_cast<double>(left_out) / static_cast<double>(others_largest));
      m.per_doubling = std::max(m.per_doubling, under / doublings);
      m.evidence.push_back(
          fmt::format("{} tokens left out, priced from the others ({:.2f} doublings beyond them): worst raw error "
                      "{:+.2f}% over {} waves",
                      left_out, doublings, worst * 100, priced));
    } else {
      m.inside = std::max(m.inside, under);
      m.evidence.push_back(
          fmt::format("{} tokens left out, priced from the others ({}): worst raw error {:+.2f}% over {} waves",
                      left_out, left_out == *tokens.begin() ? "below them" : "between them", worst * 100, priced));
    }
  }
  std::string where;
  const double spread = jitter(traces, &where);
  if (spread > 0) m.evidence.push_back(fmt::format("repeated waves differ by up to {:.3f}% ({})", spread * 100, where));
  m.inside = std::max(m.inside, spread);
  return m;
}

}  // namespace psc
