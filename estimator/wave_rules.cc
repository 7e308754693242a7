// The wave-level rules that change an allocation's category
// (estimator/wave_allocations.h): first execution in cold waves, paired with
// their warm twins, and the pending gradients of split waves.
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "estimator/wave_allocations.h"

namespace psc::liveness_internal {

// Allocations of `cold` with no counterpart in `warm`, in two rounds:
//  1. by (range, size) in allocation order: the k-th allocation of a given
//     range and size in the cold wave pairs with the k-th one in the warm wave
//     (a first-launch workspace inserted among equal tensors shifts nothing);
//  2. what is left, by range alone in allocation order, sizes compared rather
//     than equal: data-dependent shapes (routed experts) make a warm wave's
//     tensors differ in size from the cold wave's without being first-launch
//     artefacts. A cold allocation paired this way keeps its term.
// Only allocations with no counterpart in either round are first execution.
void pair_first_execution(const std::vector<Made*>& cold, const std::vector<Made*>& warm, WaveLiveness* w) {
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> warm_count;
  for (const Made* m : warm) ++warm_count[{m->range, m->bytes}];
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> seen;
  std::vector<Made*> unmatched;
  for (Made* m : cold) {
    const auto key = std::make_pair(m->range, m->bytes);
    if (++seen[key] > warm_count[key]) unmatched.push_back(m);
  }
  // The warm wave's allocations left over by round 1, per range.
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> cold_count;
  for (const Made* m : cold) ++cold_count[{m->range, m->bytes}];
  std::map<uint32_t, uint64_t> warm_left;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> warm_seen;
  for (const Made* m : warm) {
    const auto key = std::make_pair(m->range, m->bytes);
    if (++warm_seen[key] > cold_count[key]) ++warm_left[m->range];
  }
  for (Made* m : unmatched) {
    uint64_t& left = warm_left[m->range];
    if (left > 0) {  // round 2: a differently sized counterpart in the same range
      --left;
      continue;
    }
    // A saved input or a gradient is the step's structure, never a
    // first-launch artefact: it keeps its term even without a counterpart.
    if (m->category == Category::kBoundary || m->category == Category::kAdapterGradient) continue;
    m->category = Category::kFirstExecution;
    w->first_execution_bytes += m->bytes;
    if (m->alloc_seq <= w->peak_seq && w->peak_seq < m->end_seq) w->first_execution_at_peak_bytes += m->bytes;
  }
}

// The most bytes of `category` live together among `made` (by sequence).
uint64_t most_live(const std::vector<Made*>& made, Category category) {
  std::vector<std::pair<uint64_t, int64_t>> changes;  // seq, +bytes at alloc / -bytes at its end
  for (const Made* m : made) {
    if (m->category != category) continue;
    changes.emplace_back(m->alloc_seq, static_cast<int64_t>(m->bytes));
    if (m->end_seq != UINT64_MAX) changes.emplace_back(m->end_seq, -static_cast<int64_t>(m->bytes));
  }
  std::sort(changes.begin(), changes.end());  // a free before an alloc of the same seq never happens
  int64_t live = 0, most = 0;
  for (const auto& [seq, delta] : changes) {
    live += delta;
    most = std::max(most, live);
  }
  return static_cast<uint64_t>(most);
}

// A cold wave's allocation made in a layer's backward that outlives the
// wave's other adapter gradients by a whole wave (they die at zero_grad with
// set_to_none, or in the optimizer; it lives through the next wave that
// begins after that, or to the end) is no gradient: it is state a new
// shape's first backward leaves behind (seen on the CPU: a few KiB per new
// shape in the top layer's backward, freed at exit). By range and lifetime it
// looks like a gradient, and pricing it as one would take the real gradients'
// place when it is found live at a later wave's start.
std::vector<const Made*> leftovers_are_first_execution(const std::vector<Made*>& made,
                                                       const std::vector<WaveReport>& waves,
                                                       uint64_t live_gradients_die, WaveLiveness* w) {
  std::vector<const Made*> out;
  if (!w->cold) return out;
  // A wave that accumulates finds the step's gradients live: they die at the
  // same zero_grad as the ones a wave makes.
  uint64_t gradients_die = live_gradients_die;
  for (const Made* m : made)
    if (m->category == Category::kAdapterGradient) gradients_die = std::min(gradients_die, m->end_ordinal);
  if (gradients_die == UINT64_MAX) return out;
  uint64_t next_wave_ends = UINT64_MAX;  // the end of the first wave that begins after they die
  for (const WaveReport& r : waves) {
    if (r.span.begin_ordinal > gradients_die) {
      next_wave_ends = r.span.ended ? r.span.end_ordinal : UINT64_MAX;
      break;
    }
  }
  for (Made* m : made) {
    if (m->category != Category::kAdapterGradient) continue;
    const bool outlives =
        m->end_ordinal == UINT64_MAX || (next_wave_ends != UINT64_MAX && m->end_ordinal > next_wave_ends);
    if (!outlives) continue;
    m->category = Category::kFirstExecution;
    w->first_execution_bytes += m->bytes;
    if (m->alloc_seq <= w->peak_seq && w->peak_seq < m->end_seq) w->first_execution_at_peak_bytes += m->bytes;
    out.push_back(m);
  }
  return out;
}

// In a split wave, autograd holds each parameter's gradient from the child
// whose backward runs first until the last child's contribution arrives: an
// allocation made in backward/layer.i by one child and freed in
// backward/layer.i by another. By range it looks like layer i's workspace;
// what gives it away is that other layers' work happens while it is live
// (the rest of the first child's backward, the next child's upper layers).
// Such allocations are the split's pending adapter gradients.
void reclassify_buffered_gradients(const std::vector<Made*>& made) {
  struct Work {
    uint64_t ordinal;
    int32_t layer;
  };
  std::vector<Work> work;  // allocations of layers' recompute/backward, in order
  for (const Made* m : made) {
    const bool layer_work = m->category == Category::kWorkspace || m->category == Category::kAdapterGradient ||
                            m->category == Category::kInputGradient || m->category == Category::kBoundary;
    if (layer_work && m->layer >= 0) work.push_back({m->alloc_ordinal, m->layer});
  }
  std::sort(work.begin(), work.end(), [](const Work& a, const Work& b) { return a.ordinal < b.ordinal; });
  // other_layer_after[k]: the first ordinal after work[k] made by another layer.
  std::vector<uint64_t> other_layer_after(work.size(), UINT64_MAX);
  for (size_t k = work.size(); k-- > 0;) {
    if (k + 1 < work.size())
      other_layer_after[k] = work[k + 1].layer != work[k].layer ? work[k + 1].ordinal : other_layer_after[k + 1];
  }
  for (Made* m : made) {
    if (m->category != Category::kWorkspace || m->layer < 0 || m->end_ordinal == UINT64_MAX) continue;
    auto it = std::lower_bound(work.begin(), work.end(), m->alloc_ordinal,
                               [](const Work& w, uint64_t ordinal) { return w.ordinal < ordinal; });
    if (it == work.end() || it->ordinal != m->alloc_ordinal) continue;
    if (other_layer_after[static_cast<size_t>(it - work.begin())] < m->end_ordinal)
      m->category = Category::kAdapterGradient;
  }
}

}  // namespace psc::liveness_internal
