// A wave's size (estimator/growth.h): of one sequence, of a packing, and of
// each of the groups that split it.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "estimator/growth.h"

namespace psc {

WaveSize unpacked(int64_t tokens) {
  const double square = static_cast<double>(tokens) * static_cast<double>(tokens);
  return {tokens, square, square, 1};
}

WaveSize packed(int64_t tokens, const std::vector<int64_t>& lengths) {
  if (lengths.empty()) return unpacked(tokens);
  WaveSize size{tokens, 0, 0, static_cast<double>(lengths.size())};
  for (int64_t l : lengths) {
    const double square = static_cast<double>(l) * static_cast<double>(l);
    size.square_tokens += square;
    size.longest_square = std::max(size.longest_square, square);
  }
  return size;
}

WaveSize group_size(WaveSize whole, int64_t groups) {
  groups = std::max<int64_t>(1, groups);
  // One sequence split between groups: each group is a sequence of its share.
  if (whole.sequences <= 1) return unpacked(whole.tokens / groups);
  // Packed: each group takes its share of the sequences; its longest is at
  // most the wave's, and at most all of its own squares.
  const double g = static_cast<double>(groups);
  WaveSize size = whole;
  size.tokens = whole.tokens / groups;
  size.square_tokens /= g;
  size.sequences = std::max(1.0, whole.sequences / g);
  size.longest_square = std::min(whole.longest_square, size.square_tokens);
  return size;
}

std::vector<WaveSize> even_groups(WaveSize whole, int64_t groups) {
  groups = std::max<int64_t>(1, groups);
  const WaveSize share = group_size(whole, groups);
  std::vector<WaveSize> out(static_cast<size_t>(groups), share);
  const int64_t more = whole.tokens % groups;
  for (int64_t g = 0; g < more; ++g) {
    WaveSize& size = out[static_cast<size_t>(g)];
    if (whole.sequences <= 1) {
      size = unpacked(share.tokens + 1);
    } else {
      ++size.tokens;
    }
  }
  return out;
}

}  // namespace psc
