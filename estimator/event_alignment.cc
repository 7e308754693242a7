#include "estimator/event_alignment.h"

#include <algorithm>
#include <optional>

namespace psc {
namespace {

using Allocations = std::vector<WaveLiveness::EventAllocation>;

// A wave may leave out this many of its events, or one in twenty: an
// allocation made earlier at one size leaves one out in each wave.
constexpr size_t kMostLeftOut = 2;

// Beyond this many cells the longest common subsequence is not searched.
constexpr size_t kMostAlignmentCells = size_t{1} << 23;

// For each of `p`'s events, the index of `q`'s event that is the same
// allocation (-1: none), along a longest common subsequence of the two.
std::vector<int64_t> matched(const EventSeries& p, const EventSeries& q) {
  const Allocations& a = *p.allocations;
  const Allocations& b = *q.allocations;
  std::vector<int64_t> out(a.size(), -1);
  auto same = [&](size_t i, size_t j) { return same_allocation(a[i].bytes, p.size, b[j].bytes, q.size); };
  bool identical = a.size() == b.size();
  for (size_t i = 0; identical && i < a.size(); ++i) identical = same(i, i);
  if (identical) {
    for (size_t i = 0; i < a.size(); ++i) out[i] = static_cast<int64_t>(i);
    return out;
  }
  const size_t n = a.size(), m = b.size();
  if (n == 0 || m == 0 || n * m > kMostAlignmentCells || std::max(n, m) >= UINT16_MAX) return out;
  // longest[i][j]: of a[i..] and b[j..].
  std::vector<uint16_t> longest((n + 1) * (m + 1), 0);
  auto at = [&](size_t i, size_t j) -> uint16_t& { return longest[i * (m + 1) + j]; };
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      at(i, j) = same(i, j) ? static_cast<uint16_t>(at(i + 1, j + 1) + 1) : std::max(at(i + 1, j), at(i, j + 1));
  for (size_t i = 0, j = 0; i < n && j < m;) {
    if (same(i, j) && at(i, j) == at(i + 1, j + 1) + 1) {
      out[i++] = static_cast<int64_t>(j++);
    } else if (at(i + 1, j) >= at(i, j + 1)) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

// Every wave's events, paired by index; empty unless every wave has as many.
std::vector<std::vector<size_t>> by_index(const std::vector<EventSeries>& waves) {
  const size_t n = waves.front().events->size();
  for (const EventSeries& w : waves)
    if (w.events->size() != n) return {};
  std::vector<size_t> all(n);
  for (size_t k = 0; k < n; ++k) all[k] = k;
  return std::vector<std::vector<size_t>>(waves.size(), all);
}

}  // namespace

bool same_allocation(uint64_t x, const WaveSize& a, uint64_t y, const WaveSize& b) {
  if (x == y) return true;
  auto in_proportion = [&](double fa, double fb) {
    return fa > 0 && fb > 0 && static_cast<double>(x) * fb == static_cast<double>(y) * fa;
  };
  return in_proportion(static_cast<double>(a.tokens), static_cast<double>(b.tokens)) ||
         in_proportion(a.square_tokens, b.square_tokens) || in_proportion(a.longest_square, b.longest_square) ||
         in_proportion(static_cast<double>(a.sequences), static_cast<double>(b.sequences));
}

std::vector<std::vector<size_t>> line_up_events(const std::vector<EventSeries>& waves) {
  if (waves.empty()) return {};
  for (const EventSeries& w : waves)
    if (!w.events || w.events->empty()) return {};
  for (const EventSeries& w : waves)
    if (!w.allocations || w.allocations->size() != w.events->size()) return by_index(waves);
  size_t reference = 0;
  for (size_t w = 1; w < waves.size(); ++w)
    if (waves[w].events->size() > waves[reference].events->size()) reference = w;
  const size_t n = waves[reference].events->size();
  std::vector<std::vector<int64_t>> pairs;  // per wave, of each reference event
  std::vector<bool> shared(n, true);
  for (const EventSeries& w : waves) {
    pairs.push_back(matched(waves[reference], w));
    for (size_t i = 0; i < n; ++i) shared[i] = shared[i] && pairs.back()[i] >= 0;
  }
  std::vector<std::vector<size_t>> kept(waves.size());
  for (size_t w = 0; w < waves.size(); ++w) {
    for (size_t i = 0; i < n; ++i)
      if (shared[i]) kept[w].push_back(static_cast<size_t>(pairs[w][i]));
    const size_t left_out = waves[w].events->size() - kept[w].size();
    if (left_out > kMostLeftOut && 20 * left_out > waves[w].events->size()) return by_index(waves);
  }
  return kept;
}

std::vector<int64_t> folded(const std::vector<int64_t>& events, const std::vector<size_t>& kept) {
  std::vector<int64_t> out(kept.size());
  for (size_t k = 0; k < kept.size(); ++k) {
    const size_t from = k == 0 ? 0 : kept[k];
    const size_t to = k + 1 < kept.size() ? kept[k + 1] : events.size();
    out[k] = *std::max_element(events.begin() + static_cast<std::ptrdiff_t>(from),
                               events.begin() + static_cast<std::ptrdiff_t>(to));
  }
  return out;
}

std::vector<size_t> gradient_events(const std::vector<EventSeries>& waves,
                                    const std::vector<std::vector<size_t>>& kept) {
  std::optional<std::vector<size_t>> agreed;
  for (size_t w = 0; w < waves.size() && w < kept.size(); ++w) {
    const EventSeries& p = waves[w];
    if (p.gradient_from < 0 || !p.allocations || p.allocations->size() != p.events->size()) continue;
    std::vector<size_t> at;
    for (size_t k = 0; k < kept[w].size(); ++k)
      if ((*p.allocations)[kept[w][k]].gradient) at.push_back(k);
    const auto made = std::count_if(p.allocations->begin(), p.allocations->end(),
                                    [](const WaveLiveness::EventAllocation& a) { return a.gradient; });
    if (static_cast<size_t>(made) != at.size() || (agreed && *agreed != at)) return {};
    agreed = at;
  }
  return agreed.value_or(std::vector<size_t>{});
}

std::vector<int64_t> as_if_gradients_stayed(const EventSeries& wave, const std::vector<size_t>& kept,
                                            const std::vector<size_t>& gradient_at) {
  std::vector<int64_t> out = *wave.events;
  if (!wave.allocations || wave.allocations->size() != out.size()) return out;
  const auto& alloc = *wave.allocations;
  for (size_t e = 0; e < out.size(); ++e) {
    for (size_t g : gradient_at) {
      const size_t made = kept[g];
      if (made <= e && alloc[made].end_ordinal <= alloc[e].ordinal) out[e] += static_cast<int64_t>(alloc[made].bytes);
    }
  }
  return out;
}

}  // namespace psc
