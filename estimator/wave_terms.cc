// The terms of one wave from its allocations (estimator/wave_allocations.h):
// each term's most live bytes, the moments of its backward and, for a wave of
// several groups, each group's run.
#include <algorithm>
#include <array>
#include <numeric>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "estimator/wave_allocations.h"

namespace psc::liveness_internal {
namespace {

// One allocation or free of a wave, in order.
struct Step {
  uint64_t ordinal;
  int64_t delta;
  Category category;
  int32_t layer;
  uint64_t end_ordinal = UINT64_MAX;  // of the allocation an allocating step makes
};

// The terms a moment holds beside boundaries, adapter gradients and
// first-execution allocations.
bool is_rest(Category c) {
  return c == Category::kWorkspace || c == Category::kInputGradient || c == Category::kOutput ||
         c == Category::kForwardScratch;
}

bool raises_rest(const Step& s) { return s.delta > 0 && is_rest(s.category); }

}  // namespace

// Each layer's boundaries and the adapter gradients made, of `made`.
void add_layer_terms(const std::vector<Made*>& made, size_t layers, WaveLiveness* w) {
  for (const Made* m : made) {
    if (m->layer < 0 || static_cast<size_t>(m->layer) >= layers) continue;
    if (m->category == Category::kBoundary) w->boundary_bytes[static_cast<size_t>(m->layer)] += m->bytes;
    if (m->category == Category::kAdapterGradient) w->pending_gradient_bytes[static_cast<size_t>(m->layer)] += m->bytes;
  }
}

namespace {

// Follows the moments of one wave's backward through its steps
// (WaveLiveness::moment_*, workspace_after_gradient_bytes). The layer being
// recomputed is the one whose workspace or gradient was allocated last;
// before the first, the head's moment (the forward included: every boundary
// is live by its end).
class MomentTracker {
 public:
  MomentTracker(uint64_t backward_start, WaveLiveness* w) : backward_start_(backward_start), w_(w) {
    const size_t layers = w->boundary_bytes.size();
    w->moment_before_gradient_bytes.assign(layers, -1);
    w->moment_after_gradient_bytes.assign(layers, -1);
    w->moment_events.assign(1 + layers, {});
    w->moment_gradient_from.assign(layers, -1);
    w->moment_event_allocations.assign(1 + layers, {});
  }

  // After the step is applied: `rest` is what the moment holds beside
  // boundaries, adapter gradients and first-execution allocations, and
  // `workspace` the workspace live.
  void on_step(const Step& s, int64_t rest, int64_t workspace) {
    const bool layer_work = s.category == Category::kWorkspace || s.category == Category::kAdapterGradient;
    if (layer_work && s.delta > 0 && s.layer >= 0 && s.layer != layer_ && s.ordinal >= backward_start_)
      switch_to(s.layer);
    const bool own_gradient = s.category == Category::kAdapterGradient && s.layer == layer_ && s.delta > 0;
    if (own_gradient) made_here_ += s.delta;
    with_gradient_ = std::max(with_gradient_, workspace + made_here_);
    if (s.ordinal < backward_start_ || layer_ < 0) {
      w_->moment_head_bytes = std::max(w_->moment_head_bytes, rest);
      if (raises_rest(s)) {
        w_->moment_events[0].push_back(rest);
        w_->moment_event_allocations[0].push_back({s.ordinal, s.end_ordinal, static_cast<uint64_t>(s.delta), false});
      }
      return;
    }
    const size_t i = static_cast<size_t>(layer_);
    if (i >= w_->moment_before_gradient_bytes.size()) return;
    std::vector<int64_t>& events = w_->moment_events[1 + i];
    if (made_here_ == 0) {
      w_->moment_before_gradient_bytes[i] = std::max(w_->moment_before_gradient_bytes[i], rest);
    } else {
      after_ = std::max(after_, rest + made_here_);
      if (own_gradient && w_->moment_gradient_from[i] < 0)
        w_->moment_gradient_from[i] = static_cast<int64_t>(events.size());
    }
    if (raises_rest(s) || own_gradient) {
      events.push_back(rest + made_here_);
      w_->moment_event_allocations[1 + i].push_back(
          {s.ordinal, s.end_ordinal, static_cast<uint64_t>(s.delta), own_gradient});
    }
  }

  void finish() { close_layer(); }

 private:
  void switch_to(int32_t layer) {
    close_layer();
    layer_ = layer;
    made_here_ = with_gradient_ = 0;
    after_ = -1;
  }

  // `made_here_` counts the layer's adapter gradients made so far; what is
  // left of its workspace, and of its moment, once they exist is the most
  // of (that + them), less them.
  void close_layer() {
    if (layer_ >= 0 && made_here_ > 0)
      w_->workspace_after_gradient_bytes =
          std::max(w_->workspace_after_gradient_bytes, std::max<int64_t>(0, with_gradient_ - made_here_));
    if (layer_ >= 0 && static_cast<size_t>(layer_) < w_->moment_after_gradient_bytes.size() && after_ >= 0) {
      int64_t& after = w_->moment_after_gradient_bytes[static_cast<size_t>(layer_)];
      after = std::max(after, std::max<int64_t>(0, after_ - made_here_));
    }
  }

  uint64_t backward_start_;
  WaveLiveness* w_;
  int32_t layer_ = -1;
  int64_t made_here_ = 0, with_gradient_ = 0;
  int64_t after_ = -1;  // the most of (rest + made_here_) since the layer's first gradient
};

}  // namespace

// Max live bytes of each term over a wave, from its allocations' lifetimes,
// and its moments. `output` counts only from `backward_start` on (the pricing
// model is about the backward; the head's forward temporaries are gone by
// then), except in the head's moment.
void sweep_maxima(const std::vector<Made*>& made, uint64_t backward_start, uint64_t head_until,
                  const std::optional<HeadRanges::Mark>& mark, WaveLiveness* w) {
  std::vector<Step> steps;
  steps.reserve(made.size() * 2);
  for (const Made* m : made) {
    steps.push_back({m->alloc_ordinal, static_cast<int64_t>(m->bytes), m->category, m->layer, m->end_ordinal});
    if (m->end_ordinal != UINT64_MAX)
      steps.push_back({m->end_ordinal, -static_cast<int64_t>(m->bytes), m->category, m->layer});
  }
  // What the forward left live counts as soon as the backward begins.
  if (backward_start != UINT64_MAX) steps.push_back({backward_start, 0, Category::kOutput, -1});
  // Frees before allocations at one ordinal cannot happen (one event each),
  // but the zero step must come after the allocation it coincides with.
  std::stable_sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) {
    if (a.ordinal != b.ordinal) return a.ordinal < b.ordinal;
    return a.delta > b.delta;
  });
  std::array<int64_t, kCategoryCount> live{};
  std::array<uint64_t, kCategoryCount> max{};
  auto at = [&](Category t) { return live[static_cast<size_t>(t)]; };
  MomentTracker moments(backward_start, w);
  // Output bytes live at the mark, and those freed between the forward's
  // last ranged event and the mark: every output allocation live at any
  // moment from the forward's end to the backward's start is one or the
  // other. Those freed count though the group's own backward did not need
  // them: a loss outside every range runs its backward first and frees its
  // saved tensors, and a caller that drops a group's logits just before
  // that group's backward holds them while other groups' backwards run
  // first, which a wave of one group cannot show.
  int64_t left_at_mark = 0, left_at_mark_freed = 0;
  for (const Step& s : steps) {
    const size_t t = static_cast<size_t>(s.category);
    live[t] += s.delta;
    const int64_t rest =
        at(Category::kWorkspace) + at(Category::kInputGradient) + at(Category::kOutput) + at(Category::kForwardScratch);
    moments.on_step(s, rest, at(Category::kWorkspace));
    if (s.category == Category::kOutput && s.ordinal < std::min(head_until, backward_start) && s.delta > 0)
      w->head_saved_bytes = std::max(w->head_saved_bytes, static_cast<uint64_t>(live[t]));
    if (mark && s.category == Category::kOutput && s.ordinal < mark->ordinal) {
      left_at_mark = live[t];
      if (s.delta < 0 && s.ordinal > mark->forward_end) left_at_mark_freed -= s.delta;
    }
    if (s.delta < 0) continue;
    if (s.category == Category::kOutput && s.ordinal < backward_start) continue;
    max[t] = std::max(max[t], static_cast<uint64_t>(live[t]));
  }
  moments.finish();
  if (mark)
    w->head_saved_bytes =
        std::min(w->head_saved_bytes, static_cast<uint64_t>(std::max<int64_t>(0, left_at_mark + left_at_mark_freed)));
  w->workspace_bytes = max[static_cast<size_t>(Category::kWorkspace)];
  w->input_gradient_bytes = max[static_cast<size_t>(Category::kInputGradient)];
  w->output_bytes = max[static_cast<size_t>(Category::kOutput)];
  w->forward_scratch_bytes = max[static_cast<size_t>(Category::kForwardScratch)];
  w->pending_gradient_max_live_bytes = max[static_cast<size_t>(Category::kAdapterGradient)];
}

namespace {

// Where each group's run of the backward begins: the backward walks a
// group's layers from the top down, so layer work (a workspace or gradient
// allocation of a layer) at a higher layer than the one before begins the
// next group; that group's head backward (its first output-term allocation
// since the previous run's last layer work) begins it earlier when there is
// one. `first_work[k]` is run k's first layer work. Returns the run starts
// (run 0 at `backward_start`); fewer or more runs than `groups` give none.
struct RunCuts {
  std::vector<uint64_t> start, first_work;
};
// `order`: the wave's allocations in allocation order.
RunCuts cut_runs(const std::vector<const Made*>& order, uint64_t backward_start, size_t groups) {
  RunCuts cuts;
  int32_t layer = -1;
  uint64_t last_work = 0;
  uint64_t head_begins = UINT64_MAX;  // the first output-term allocation since the last layer work
  for (const Made* m : order) {
    if (m->alloc_ordinal < backward_start) continue;
    const bool work =
        (m->category == Category::kWorkspace || m->category == Category::kAdapterGradient) && m->layer >= 0;
    if (!work) {
      if (m->category == Category::kOutput && !cuts.start.empty() && head_begins == UINT64_MAX &&
          m->alloc_ordinal > last_work)
        head_begins = m->alloc_ordinal;
      continue;
    }
    if (cuts.start.empty() || m->layer > layer) {
      cuts.start.push_back(cuts.start.empty() ? backward_start : std::min(head_begins, m->alloc_ordinal));
      cuts.first_work.push_back(m->alloc_ordinal);
    }
    layer = m->layer;
    last_work = m->alloc_ordinal;
    head_begins = UINT64_MAX;
  }
  if (cuts.start.size() != groups) return {};
  return cuts;
}

// The run an allocation belongs to by when the backward used it: one made
// during the backward, the run it was made in; one made before it, the run
// that freed it (its boundaries, its head state). -1: made before the
// backward and never freed by it (a forward temporary, or what outlives the
// wave): the forward that made it says whose it is (forward_segments).
int run_by_backward(const Made& m, const RunCuts& cuts) {
  auto in = [&](uint64_t ordinal) {
    return static_cast<int>(std::upper_bound(cuts.start.begin(), cuts.start.end(), ordinal) - cuts.start.begin()) - 1;
  };
  if (m.alloc_ordinal >= cuts.start.front()) return in(m.alloc_ordinal);
  return m.end_ordinal == UINT64_MAX || m.end_ordinal < cuts.start.front() ? -1 : in(m.end_ordinal);
}

// Where each group's forward begins, in forward order: the forward walks a
// group's layers from the bottom up, so an allocation of a lower layer than
// the one before (the next group's embedding output, its first layer's
// boundary) begins the next group. Fewer or more forwards than `groups` give
// none.
std::vector<uint64_t> forward_segments(const std::vector<const Made*>& order, uint64_t backward_start, size_t groups) {
  std::vector<uint64_t> starts;
  int32_t layer = -1;
  for (const Made* m : order) {
    if (m->alloc_ordinal >= backward_start) break;
    if (m->layer < 0) continue;
    if (starts.empty() || m->layer < layer) starts.push_back(starts.empty() ? 0 : m->alloc_ordinal);
    layer = m->layer;
  }
  if (starts.size() != groups) return {};
  return starts;
}

// Which group ran as run k: the payload's backward_order; else, for groups
// of different sizes, the run holding the k-th largest boundaries is the
// group with the k-th most tokens (squares breaking ties): boundaries grow
// with a group's tokens.
std::vector<size_t> groups_of_runs(const WaveLiveness& w, const std::vector<uint64_t>& retained) {
  std::vector<size_t> out(retained.size());
  if (w.backward_order.size() == retained.size()) {
    for (size_t k = 0; k < retained.size(); ++k) out[k] = static_cast<size_t>(w.backward_order[k]);
    return out;
  }
  const std::vector<WaveSize> sizes = w.group_sizes();
  std::vector<size_t> by_size(sizes.size()), by_boundary(retained.size());
  std::iota(by_size.begin(), by_size.end(), size_t{0});
  std::iota(by_boundary.begin(), by_boundary.end(), size_t{0});
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t b) {
    return std::tie(sizes[a].tokens, sizes[a].square_tokens) < std::tie(sizes[b].tokens, sizes[b].square_tokens);
  });
  std::stable_sort(by_boundary.begin(), by_boundary.end(),
                   [&](size_t a, size_t b) { return retained[a] < retained[b]; });
  for (size_t i = 0; i < retained.size(); ++i) out[by_boundary[i]] = by_size[i];
  return out;
}

// The most bytes of the moment terms (workspace, input gradient, output,
// forward scratch) live together among `made` at any ordinal in [from, to).
int64_t most_rest_live(const std::vector<Made*>& made, uint64_t from, uint64_t to) {
  std::vector<std::pair<uint64_t, int64_t>> changes;
  for (const Made* m : made) {
    if (!is_rest(m->category) || m->alloc_ordinal >= to || m->end_ordinal < from) continue;
    changes.emplace_back(m->alloc_ordinal, static_cast<int64_t>(m->bytes));
    if (m->end_ordinal != UINT64_MAX) changes.emplace_back(m->end_ordinal, -static_cast<int64_t>(m->bytes));
  }
  std::sort(changes.begin(), changes.end());
  int64_t live = 0;
  size_t i = 0;
  for (; i < changes.size() && changes[i].first < from; ++i) live += changes[i].second;
  int64_t most = live;  // what was live when the window opened
  for (; i < changes.size() && changes[i].first < to; ++i) {
    live += changes[i].second;
    most = std::max(most, live);
  }
  return most;
}

// Whether every boundary a run freed was made by its own group's forward: a
// run owns what it frees, so a group whose boundaries outlived its backward
// shows as a later run freeing them (or forwards that do not cut into the
// groups, which cannot tell).
bool each_run_frees_its_own_boundaries(const std::vector<std::vector<Made*>>& own,
                                       const std::vector<uint64_t>& segments, uint64_t backward_start,
                                       const std::vector<size_t>& run_of_group) {
  if (segments.empty()) return false;
  for (size_t k = 0; k < own.size(); ++k)
    for (const Made* m : own[k]) {
      if (m->category != Category::kBoundary || m->alloc_ordinal >= backward_start) continue;
      const auto f = static_cast<size_t>(std::upper_bound(segments.begin(), segments.end(), m->alloc_ordinal) -
                                         segments.begin() - 1);
      if (run_of_group[f] != k) return false;
    }
  return true;
}

// Where the first backward's head begins: the first head range opened a
// second time after the wave's last forward layer opened (the head's modules
// run once forward, then again backward), inside the last forward's segment
// (from `last_forward`) and before the first layer's backward. UINT64_MAX:
// none opens again, or no forward layer opened a range.
uint64_t head_backward_start(const HeadRanges& head, uint64_t last_forward, uint64_t backward_start) {
  if (!head.forward_layer_seen) return UINT64_MAX;
  std::set<uint32_t> opened;
  for (const HeadRanges::Opened& o : head.opened) {
    if (o.ordinal <= head.last_forward_layer || o.ordinal <= last_forward || o.ordinal >= backward_start) continue;
    if (!opened.insert(o.name).second) return o.ordinal;
  }
  return UINT64_MAX;
}

// Run of group `g` of wave `w`, before its terms: the wave's index, the
// group's tokens, sequences and slot.
WaveLiveness run_of(const WaveLiveness& w, size_t g, WaveSize size, size_t layers) {
  WaveLiveness r;
  r.index = w.index;
  r.cold = w.cold;
  r.group = static_cast<int32_t>(g);
  if (g < w.group_list.size()) {
    r.tokens = w.group_list[g].tokens;
    r.sequence_lengths = w.group_list[g].sequence_lengths;
  } else {
    r.tokens = size.tokens;  // equal parts of a wave of one sequence
  }
  if (g < w.slots.size()) r.slots = {w.slots[g]};
  r.boundary_bytes.assign(layers, 0);
  r.pending_gradient_bytes.assign(layers, 0);
  r.gradient_live_at_start_bytes.assign(layers, 0);
  return r;
}

}  // namespace

std::optional<HeadRanges::Mark> head_backward_mark(const HeadRanges& head, uint64_t after, uint64_t backward_start) {
  if (!head.forward_layer_seen) return std::nullopt;
  for (const HeadRanges::Mark& m : head.backward_marks)
    if (m.ordinal > head.last_forward_layer && m.ordinal > after && m.ordinal < backward_start) return m;
  return std::nullopt;
}

// WaveLiveness::runs of a wave of several groups.
void split_into_runs(const std::vector<Made*>& made, uint64_t backward_start, const HeadRanges& head, size_t layers,
                     WaveLiveness* w) {
  const size_t groups = static_cast<size_t>(std::max<int64_t>(1, w->groups));
  if (groups < 2 || !w->children.empty() || backward_start == UINT64_MAX) return;
  // Equal parts of a packed wave: which sequences each group had is not
  // known, so neither is a run's size.
  if (w->group_list.empty() && !w->sequence_lengths.empty()) return;
  std::vector<const Made*> order(made.begin(), made.end());
  std::sort(order.begin(), order.end(),
            [](const Made* a, const Made* b) { return a->alloc_ordinal < b->alloc_ordinal; });
  const RunCuts cuts = cut_runs(order, backward_start, groups);
  if (cuts.start.empty()) return;
  // What the backward says of each allocation, and which group each run is.
  std::vector<std::vector<Made*>> own(groups);
  std::vector<Made*> forward_only;
  std::vector<uint64_t> retained(groups, 0);
  for (Made* m : made) {
    const int k = run_by_backward(*m, cuts);
    if (k < 0) {
      forward_only.push_back(m);
      continue;
    }
    own[static_cast<size_t>(k)].push_back(m);
    if (m->category == Category::kBoundary) retained[static_cast<size_t>(k)] += m->bytes;
  }
  const std::vector<size_t> group = groups_of_runs(*w, retained);
  // The forward's temporaries belong to the group whose forward made them;
  // when the forwards do not cut into the groups, to the first run (a price
  // then holds them with it: never less).
  std::vector<size_t> run_of_group(groups, 0);
  for (size_t k = 0; k < groups; ++k) run_of_group[group[k]] = k;
  const std::vector<uint64_t> segments = forward_segments(order, backward_start, groups);
  // The first run's head backward, before its first layer's, follows the
  // last group's forward: it is the first run's, from where a head range
  // opens a second time after that forward's last layer.
  const uint64_t first_head_backward =
      segments.empty() ? UINT64_MAX : head_backward_start(head, segments.back(), backward_start);
  for (Made* m : forward_only) {
    size_t k = 0;
    if (!segments.empty() && m->alloc_ordinal < first_head_backward) {
      const size_t f =
          static_cast<size_t>(std::upper_bound(segments.begin(), segments.end(), m->alloc_ordinal) - segments.begin()) -
          1;
      k = run_of_group[f];
    }
    own[k].push_back(m);
  }
  std::vector<WaveLiveness> runs(groups);
  const std::vector<WaveSize> sizes = w->group_sizes();
  // What each run's head held until its backward began (head_saved_bytes):
  // the first run's, until the mark its head's backward left after the last
  // forward; a later one's, until its run's start (its head's backward,
  // where the cut found one).
  const auto marked = head_backward_mark(head, segments.empty() ? 0 : segments.back(), backward_start);
  const uint64_t first_head_until = marked ? marked->ordinal : backward_start;
  for (size_t k = 0; k < groups; ++k) {
    const size_t g = group[k];
    WaveLiveness& r = runs[k] = run_of(*w, g, sizes[g], layers);
    add_layer_terms(own[k], layers, &r);
    sweep_maxima(own[k], k == 0 ? backward_start : cuts.first_work[k], k == 0 ? first_head_until : cuts.start[k],
                 std::nullopt, &r);
    if (k > 0) r.waiting_bytes = most_rest_live(own[k], cuts.start[0], cuts.start[k]);
    // Its own forward: what its allocations held until the next group's
    // forward began, or for the group forwarded last, the first backward's
    // head (not measured where that was not seen).
    if (!segments.empty() && g + 1 < groups) r.moment_forward_bytes = most_rest_live(own[k], 0, segments[g + 1]);
    if (!segments.empty() && g + 1 == groups && first_head_backward != UINT64_MAX)
      r.moment_forward_bytes = most_rest_live(own[k], 0, first_head_backward);
  }
  w->runs_free_boundaries = each_run_frees_its_own_boundaries(own, segments, backward_start, run_of_group) ? 1 : 0;
  w->runs = std::move(runs);
}

}  // namespace psc::liveness_internal
