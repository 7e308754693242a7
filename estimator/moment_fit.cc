// MomentFit: what a price reads of a calibrated moment (calibration.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "estimator/calibration.h"

namespace psc {

bool MomentFit::prices_like(const MomentFit& o) const {
  if (events.size() != o.events.size() || includes_gradient != o.includes_gradient ||
      freed_temporaries != o.freed_temporaries)
    return false;
  for (size_t k = 0; k < events.size(); ++k)
    if (!events[k].prices_like(o.events[k])) return false;
  return true;
}

double MomentFit::line(WaveSize size) const {
  double top = 0;
  for (const GrowthTerm& t : events) top = std::max(top, t.line(size));
  return top;
}

namespace {

// The most of the events at `size`, each less credit[k] (none when empty).
// The events share their calibration sizes: one extrapolation test and one
// priced size for all. ceil(max(v, 0)) + margin of each, taken as one ceil
// of the largest max(v, 0) + margin (margins are whole bytes).
uint64_t most_of_events(const std::vector<GrowthTerm>& events, const std::vector<uint64_t>& credit, WaveSize size,
                        bool extrapolated) {
  if (events.empty()) return 0;
  const WaveSize asked = size;
  size = events.front().priced_size(size);
  double top = 0;
  for (size_t k = 0; k < events.size(); ++k) {
    const GrowthTerm& t = events[k];
    double v = std::max({t.line(size), t.chord(size), t.with_long_sequence(asked)});
    if (extrapolated) v = std::max(v, t.beyond.at(size));
    if (k < credit.size()) v -= static_cast<double>(credit[k]);
    top = std::max(top, std::max(v, 0.0) + static_cast<double>(t.margin_bytes));
  }
  return static_cast<uint64_t>(std::ceil(top));
}

}  // namespace

uint64_t MomentFit::bytes_at(WaveSize size, bool extrapolated) const {
  return most_of_events(events, {}, size, extrapolated);
}

uint64_t MomentFit::accumulating_bytes_at(WaveSize size, bool extrapolated) const {
  return most_of_events(events, freed_temporaries, size, extrapolated);
}

}  // namespace psc
