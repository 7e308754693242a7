#include "estimator/liveness.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <tuple>
#include <utility>

#include "analysis/breakdowns.h"
#include "analysis/memory_replay.h"
#include "analysis/scope_tracker.h"
#include "common/json_file.h"
#include "traces/deferred.h"

namespace psc {
namespace {

bool is_layer_backward(const RangeName& r) {
  return (r.phase == Phase::kRecompute || r.phase == Phase::kBackward) && r.has_layer();
}

// One allocation made inside a wave, kept until the end of the pass.
struct Made {
  uint64_t alloc_ordinal;
  uint64_t end_ordinal;  // UINT64_MAX: still live at the end of the trace
  uint64_t alloc_seq;
  uint64_t end_seq;  // UINT64_MAX: still live
  uint64_t bytes;
  uint32_t range;
  int32_t wave;
  int32_t layer;
  Category category;
  Category classified_as;  // what the Classifier said, before the wave-level rules
};

std::vector<WaveLiveness::Child> children_of(const WavePayload& p);

// Liveness' part of the analysis' second read (analysis/lifetime_pass.h).
class LivenessPass : public LifetimeObserver {
 public:
  explicit LivenessPass(bool every_wave) : every_wave_(every_wave) {}

  void on_start(const Analysis& analysis) override {
    backward_start_.assign(analysis.waves.size(), UINT64_MAX);
    for (const WaveReport& w : analysis.waves) waves_.push_back(w.span);
    keep_.assign(analysis.waves.size(), every_wave_);
    if (!every_wave_) keep_only_waves_that_change_categories();
  }

  void on_finish(const TraceMeta& meta) override { strings = meta.strings; }

  void on_memory_event(const MemoryEventView& m) override {
    const size_t wave = static_cast<size_t>(m.site.wave);
    if (m.site.wave >= 0 && wave < backward_start_.size() && backward_start_[wave] == UINT64_MAX &&
        is_layer_backward(m.range))
      backward_start_[wave] = m.site.ordinal;
  }

  std::vector<Made> made;
  std::vector<std::vector<uint64_t>> gradient_live_at_start;  // [wave][layer]
  std::vector<uint64_t> gradient_live_at_start_die;           // [wave]: when the first of them dies
  std::array<uint64_t, kCategoryCount> category_allocations{};
  std::array<uint64_t, kCategoryCount> category_bytes{};
  int32_t max_layer = -1;
  const std::vector<uint64_t>& backward_start() const { return backward_start_; }

 private:
  void note_gradient(const Lifetime& l, int32_t layer) {
    if (layer < 0 || layer > kMaxLayer) return;
    for (const WaveSpan& w : waves_) {
      if (w.begin_ordinal <= l.alloc.ordinal) continue;
      if (l.end.kind != EndKind::kStillLive && l.end.ordinal < w.begin_ordinal) break;
      const size_t wi = static_cast<size_t>(w.index);
      if (gradient_live_at_start.size() <= wi) gradient_live_at_start.resize(wi + 1);
      if (gradient_live_at_start_die.size() <= wi) gradient_live_at_start_die.resize(wi + 1, UINT64_MAX);
      if (l.end.kind != EndKind::kStillLive)
        gradient_live_at_start_die[wi] = std::min(gradient_live_at_start_die[wi], l.end.ordinal);
      auto& row = gradient_live_at_start[wi];
      if (row.size() <= static_cast<size_t>(layer)) row.resize(static_cast<size_t>(layer) + 1, 0);
      row[static_cast<size_t>(layer)] += l.alloc.bytes;
    }
  }

  void on_lifetime(LifetimeView& view) override {
    const Lifetime& l = view.lifetime;
    const bool kept = l.alloc.wave >= 0 && static_cast<size_t>(l.alloc.wave) < keep_.size() &&
                      keep_[static_cast<size_t>(l.alloc.wave)];
    // Categories only: what the report needs is the kept waves' allocations
    // and the gradients live when a cold wave begins; nothing else is
    // classified (the terms, the layer count and the totals go unused).
    if (!every_wave_ && !kept && !spans_a_cold_start(l)) return;
    const Attribution& a = view.attribution();
    ++category_allocations[static_cast<size_t>(a.category)];
    category_bytes[static_cast<size_t>(a.category)] += l.alloc.bytes;
    if (a.category == Category::kAdapterGradient) note_gradient(l, a.layer);
    if (l.alloc.wave < 0) return;
    if (a.layer > max_layer && a.layer <= kMaxLayer) max_layer = a.layer;
    if (!kept) return;
    const bool live = l.end.kind == EndKind::kStillLive;
    made.push_back(Made{l.alloc.ordinal, live ? UINT64_MAX : l.end.ordinal, l.alloc.seq, live ? UINT64_MAX : l.end.seq,
                        l.alloc.bytes, l.alloc.range.value, l.alloc.wave, a.layer, a.category, a.category});
  }

  bool spans_a_cold_start(const Lifetime& l) const {
    auto next = std::upper_bound(cold_starts_.begin(), cold_starts_.end(), l.alloc.ordinal);
    return next != cold_starts_.end() && (l.end.kind == EndKind::kStillLive || l.end.ordinal >= *next);
  }

  // The wave-level rules change categories in cold waves (paired with their
  // warm twins) and split waves only: the allocations of other waves are not
  // needed for them.
  void keep_only_waves_that_change_categories() {
    auto shape = [](const WavePayload& p) { return std::tuple(p.tokens.value_or(0), p.groups.value_or(1), p.slots); };
    for (size_t i = 0; i < waves_.size(); ++i) {
      const WavePayload& p = waves_[i].payload;
      if (!children_of(p).empty()) keep_[i] = true;
      if (!p.cold.value_or(false)) continue;
      keep_[i] = true;
      cold_starts_.push_back(waves_[i].begin_ordinal);
      for (size_t j = 0; j < waves_.size(); ++j) {
        if (j == i || waves_[j].payload.cold.value_or(false) || shape(waves_[j].payload) != shape(p)) continue;
        keep_[j] = true;
        break;
      }
    }
  }

  bool every_wave_;
  std::vector<WaveSpan> waves_;
  std::vector<bool> keep_;             // per wave: keep its allocations
  std::vector<uint64_t> cold_starts_;  // categories only: where cold waves begin, in order
  std::vector<uint64_t> backward_start_;

 public:
  std::vector<std::string> strings;  // the trace's string table, for range names
};

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

// Each layer's boundaries and the adapter gradients made, of `made`.
void add_layer_terms(const std::vector<Made*>& made, size_t layers, WaveLiveness* w) {
  for (const Made* m : made) {
    if (m->layer < 0 || static_cast<size_t>(m->layer) >= layers) continue;
    if (m->category == Category::kBoundary) w->boundary_bytes[static_cast<size_t>(m->layer)] += m->bytes;
    if (m->category == Category::kAdapterGradient) w->pending_gradient_bytes[static_cast<size_t>(m->layer)] += m->bytes;
  }
}

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
    w->moment_event_allocations.assign(layers, {});
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
      if (raises_rest(s)) w_->moment_events[0].push_back(rest);
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
      w_->moment_event_allocations[i].push_back(
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

// Max live bytes of each term over a wave, from its allocations' lifetimes,
// and its moments. `output` counts only from `backward_start` on (the pricing
// model is about the backward; the head's forward temporaries are gone by
// then), except in the head's moment.
void sweep_maxima(const std::vector<Made*>& made, uint64_t backward_start, WaveLiveness* w) {
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
  for (const Step& s : steps) {
    const size_t t = static_cast<size_t>(s.category);
    live[t] += s.delta;
    const int64_t rest =
        at(Category::kWorkspace) + at(Category::kInputGradient) + at(Category::kOutput) + at(Category::kForwardScratch);
    moments.on_step(s, rest, at(Category::kWorkspace));
    if (s.category == Category::kOutput && s.ordinal < backward_start && s.delta > 0)
      w->head_saved_bytes = std::max(w->head_saved_bytes, static_cast<uint64_t>(live[t]));
    if (s.delta < 0) continue;
    if (s.category == Category::kOutput && s.ordinal < backward_start) continue;
    max[t] = std::max(max[t], static_cast<uint64_t>(live[t]));
  }
  moments.finish();
  w->workspace_bytes = max[static_cast<size_t>(Category::kWorkspace)];
  w->input_gradient_bytes = max[static_cast<size_t>(Category::kInputGradient)];
  w->output_bytes = max[static_cast<size_t>(Category::kOutput)];
  w->forward_scratch_bytes = max[static_cast<size_t>(Category::kForwardScratch)];
  w->pending_gradient_max_live_bytes = max[static_cast<size_t>(Category::kAdapterGradient)];
}

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

// WaveLiveness::runs of a wave of several groups.
void split_into_runs(const std::vector<Made*>& made, uint64_t backward_start, size_t layers, WaveLiveness* w) {
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
  for (Made* m : forward_only) {
    size_t k = 0;
    if (!segments.empty()) {
      const size_t f =
          static_cast<size_t>(std::upper_bound(segments.begin(), segments.end(), m->alloc_ordinal) - segments.begin()) -
          1;
      k = run_of_group[f];
    }
    own[k].push_back(m);
  }
  std::vector<WaveLiveness> runs(groups);
  const std::vector<WaveSize> sizes = w->group_sizes();
  for (size_t k = 0; k < groups; ++k) {
    WaveLiveness& r = runs[k];
    r.index = w->index;
    r.cold = w->cold;
    const size_t g = group[k];
    r.group = static_cast<int32_t>(g);
    if (g < w->group_list.size()) {
      r.tokens = w->group_list[g].tokens;
      r.sequence_lengths = w->group_list[g].sequence_lengths;
    } else {
      r.tokens = sizes[g].tokens;  // equal parts of a wave of one sequence
    }
    if (g < w->slots.size()) r.slots = {w->slots[g]};
    r.boundary_bytes.assign(layers, 0);
    r.pending_gradient_bytes.assign(layers, 0);
    r.gradient_live_at_start_bytes.assign(layers, 0);
    add_layer_terms(own[k], layers, &r);
    sweep_maxima(own[k], k == 0 ? backward_start : cuts.first_work[k], &r);
    if (k > 0) r.waiting_bytes = most_rest_live(own[k], cuts.start[0], cuts.start[k]);
  }
  w->runs = std::move(runs);
}

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

// Children of a split wave, from the raw payload (the report's parser keeps
// only the fields every wave has). A child without slots trains the wave's.
std::vector<WaveLiveness::Child> children_of(const WavePayload& p) {
  std::vector<WaveLiveness::Child> out;
  const nlohmann::json j = parse_json_payload(p.raw);
  if (!j.is_object() || !j.contains("children") || !j["children"].is_array()) return out;
  for (const nlohmann::json& c : j["children"]) {
    if (!c.is_object() || !c.contains("tokens") || !c["tokens"].is_number_integer()) return {};
    WaveLiveness::Child child;
    child.tokens = c["tokens"].get<int64_t>();
    if (c.contains("groups") && c["groups"].is_number_integer()) child.groups = c["groups"].get<int64_t>();
    if (c.contains("slots") && c["slots"].is_array()) {
      for (const nlohmann::json& s : c["slots"])
        if (s.is_string()) child.slots.push_back(s.get<std::string>());
    } else {
      child.slots = p.slots;
    }
    if (child.tokens <= 0 || child.groups < 1) return {};
    out.push_back(std::move(child));
  }
  return out;
}

// A packed wave's sequence lengths (payload "sequence_lengths"): kept only
// when every one is a positive integer and they add up to the wave's tokens.
std::vector<int64_t> sequence_lengths_of(const WavePayload& p, int64_t tokens) {
  const nlohmann::json j = parse_json_payload(p.raw);
  if (!j.is_object() || !j.contains("sequence_lengths") || !j["sequence_lengths"].is_array()) return {};
  std::vector<int64_t> out;
  int64_t sum = 0;
  for (const nlohmann::json& v : j["sequence_lengths"]) {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > tokens) return {};
    out.push_back(v.get<int64_t>());
    sum += out.back();
  }
  return sum == tokens ? out : std::vector<int64_t>{};
}

// The payload's list of groups: kept only when every group has positive
// tokens, sequence lengths (if any) that add up to them, and the tokens add up
// to the wave's; `backward_order` only when it orders every group once.
void groups_of(const WavePayload& p, WaveLiveness* w) {
  const nlohmann::json j = parse_json_payload(p.raw);
  if (!j.is_object() || !j.contains("groups") || !j["groups"].is_array()) return;
  std::vector<WaveLiveness::Group> out;
  int64_t sum = 0;
  for (const nlohmann::json& g : j["groups"]) {
    if (!g.is_object() || !g.contains("tokens") || !g["tokens"].is_number_integer()) return;
    WaveLiveness::Group group;
    group.tokens = g["tokens"].get<int64_t>();
    if (group.tokens <= 0) return;
    if (g.contains("slot") && g["slot"].is_string()) group.slot = g["slot"].get<std::string>();
    WavePayload lengths;
    lengths.raw = g.dump();
    group.sequence_lengths = sequence_lengths_of(lengths, group.tokens);
    sum += group.tokens;
    out.push_back(std::move(group));
  }
  if (sum != w->tokens) return;
  w->group_list = std::move(out);
  // A wave of one group in the list form is packed as its group is (the
  // payload may give the packing there only).
  if (w->group_list.size() == 1 && w->sequence_lengths.empty())
    w->sequence_lengths = w->group_list.front().sequence_lengths;
  if (w->slots.empty())
    for (const WaveLiveness::Group& g : w->group_list)
      if (!g.slot.empty()) w->slots.push_back(g.slot);
  if (!j.contains("backward_order") || !j["backward_order"].is_array()) return;
  std::vector<int32_t> order;
  std::vector<bool> seen(w->group_list.size(), false);
  for (const nlohmann::json& v : j["backward_order"]) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<uint64_t>() >= seen.size() || seen[v.get<size_t>()])
      return;
    seen[v.get<size_t>()] = true;
    order.push_back(v.get<int32_t>());
  }
  if (order.size() == seen.size()) w->backward_order = std::move(order);
}

WaveLiveness wave_of(const WaveReport& r, size_t layers) {
  WaveLiveness w;
  w.index = r.span.index;
  const WavePayload& p = r.span.payload;
  w.tokens = p.tokens.value_or(0);
  w.sequence_lengths = sequence_lengths_of(p, w.tokens);
  w.cold = p.cold.value_or(false);
  w.groups = p.groups.value_or(1);
  w.slots = p.slots;
  w.payload_raw = p.raw;
  w.children = children_of(p);
  groups_of(p, &w);
  w.baseline_bytes = r.baseline_bytes;
  w.measured_peak_bytes = r.measured_peak_bytes();
  w.peak_in = r.peak.site.parsed;
  w.peak_range = r.peak.site.range;
  w.peak_seq = r.peak.site.seq;
  w.boundary_bytes.assign(layers, 0);
  w.pending_gradient_bytes.assign(layers, 0);
  w.gradient_live_at_start_bytes.assign(layers, 0);
  return w;
}

}  // namespace

std::vector<WaveSize> WaveLiveness::group_sizes() const {
  if (group_list.empty()) {
    const int64_t n = std::max<int64_t>(1, groups);
    return std::vector<WaveSize>(static_cast<size_t>(n), group_size(size(), n));
  }
  std::vector<WaveSize> out;
  for (const Group& g : group_list) out.push_back(g.size());
  return out;
}

int64_t WaveLiveness::largest_group_tokens() const {
  int64_t most = 0;
  for (const WaveSize& s : group_sizes()) most = std::max(most, s.tokens);
  return most;
}

bool same_shape(const WaveLiveness& a, const WaveLiveness& b) {
  // Packings of the same tokens are other shapes: 32+32 runs other kernels
  // (and makes other tensors) than 16+16+16+16.
  return a.tokens == b.tokens && a.groups == b.groups && a.slots == b.slots &&
         a.size().sequences == b.size().sequences && a.sequence_lengths == b.sequence_lengths &&
         a.group_list == b.group_list;
}

namespace {

std::vector<CategoryChange> changes_of(const std::vector<Made>& made, const std::vector<std::string>& strings) {
  std::vector<CategoryChange> out;
  for (const Made& m : made) {
    if (m.category == m.classified_as) continue;
    out.push_back(CategoryChange{m.alloc_ordinal, m.end_ordinal, m.bytes,
                                 m.range < strings.size() ? strings[m.range] : std::string(), m.layer, m.classified_as,
                                 m.category});
  }
  return out;
}

}  // namespace

std::string host_floor_problem(const Liveness& t) {
  const uint32_t flags = t.analysis.trace.header.flags;
  if (t.waves.empty() || !(flags & format::kHeaderHostMode) || (flags & format::kHeaderHostEveryBlock)) return {};
  return t.path +
         ": host blocks under a size floor were not recorded (record --host-min-bytes, PEAKSCOPE_HOST_MIN_BYTES, "
         "or a recorder from before every block was the default), so its waves may lack blocks that grow with "
         "them and prices from it can fall short; record it again without a floor";
}

Liveness analyze_liveness(const std::string& path, const AnalysisOptions& options, const LivenessOptions& what) {
  Liveness out;
  out.path = path;
  AnalysisOptions analysis_options = options;
  LivenessPass pass(!what.categories_only);
  analysis_options.observers.push_back(&pass);
  out.analysis = analyze_trace(path, analysis_options);
  const Analysis& analysis = out.analysis;
  out.category_allocations = pass.category_allocations;
  out.category_bytes = pass.category_bytes;
  out.layers = pass.max_layer + 1;
  const size_t layers = static_cast<size_t>(out.layers);

  std::vector<std::vector<Made*>> by_wave(analysis.waves.size());
  for (Made& m : pass.made)
    if (static_cast<size_t>(m.wave) < by_wave.size()) by_wave[static_cast<size_t>(m.wave)].push_back(&m);
  for (size_t i = 0; i < analysis.waves.size(); ++i) out.waves.push_back(wave_of(analysis.waves[i], layers));

  // Cold versus warm first: a cold wave's unmatched allocations are
  // first_execution, and must not inflate the terms the warm waves define.
  for (size_t i = 0; i < out.waves.size(); ++i) {
    WaveLiveness& cold = out.waves[i];
    if (!cold.cold) continue;
    const uint64_t live_die =
        i < pass.gradient_live_at_start_die.size() ? pass.gradient_live_at_start_die[i] : UINT64_MAX;
    std::vector<const Made*> not_gradients = leftovers_are_first_execution(by_wave[i], analysis.waves, live_die, &cold);
    for (size_t j = 0; j < out.waves.size(); ++j) {
      if (j == i || out.waves[j].cold || !same_shape(cold, out.waves[j])) continue;
      cold.warm_twin = out.waves[j].index;
      pair_first_execution(by_wave[i], by_wave[j], &cold);
      break;
    }
    cold.first_execution_max_live_bytes = most_live(by_wave[i], Category::kFirstExecution);
    // Later waves found them live as if they were gradients: no longer.
    for (const Made* m : not_gradients) {
      for (size_t j = 0; j < analysis.waves.size() && j < pass.gradient_live_at_start.size(); ++j) {
        std::vector<uint64_t>& row = pass.gradient_live_at_start[j];
        const size_t layer = static_cast<size_t>(m->layer);
        const uint64_t begin = analysis.waves[j].span.begin_ordinal;
        const bool live_at_begin = m->alloc_ordinal < begin && m->end_ordinal > begin;
        if (!live_at_begin || m->layer < 0 || layer >= row.size()) continue;
        row[layer] -= std::min(row[layer], m->bytes);
      }
    }
  }

  for (size_t i = 0; i < out.waves.size(); ++i)
    if (!out.waves[i].children.empty()) reclassify_buffered_gradients(by_wave[i]);
  out.category_changes = changes_of(pass.made, pass.strings);
  if (what.categories_only) return out;

  for (size_t i = 0; i < out.waves.size(); ++i) {
    WaveLiveness& w = out.waves[i];
    for (const Made* m : by_wave[i]) {
      const size_t t = static_cast<size_t>(m->category);
      w.made_bytes[t] += m->bytes;
      ++w.made_allocations[t];
      if (m->alloc_seq <= w.peak_seq && w.peak_seq < m->end_seq) w.at_peak_bytes[t] += m->bytes;
    }
    add_layer_terms(by_wave[i], layers, &w);
    if (i < pass.gradient_live_at_start.size()) {
      const auto& row = pass.gradient_live_at_start[i];
      for (size_t l = 0; l < row.size() && l < layers; ++l) w.gradient_live_at_start_bytes[l] = row[l];
    }
    sweep_maxima(by_wave[i], pass.backward_start()[i], &w);
    split_into_runs(by_wave[i], pass.backward_start()[i], layers, &w);
  }
  return out;
}

namespace {

void apply_change(const CategoryChange& c, LiveBreakdown* live) {
  auto matches = [&](const LiveGroup& g, Category category) {
    return g.range == c.range && g.layer == c.layer && g.category == category;
  };
  auto from = std::find_if(live->groups.begin(), live->groups.end(),
                           [&](const LiveGroup& g) { return matches(g, c.from) && !g.cupti_only; });
  if (from == live->groups.end())
    from =
        std::find_if(live->groups.begin(), live->groups.end(), [&](const LiveGroup& g) { return matches(g, c.from); });
  if (from == live->groups.end() || from->bytes < c.bytes || from->allocations == 0) return;  // never expected
  LiveGroup moved = *from;
  moved.category = c.to;
  moved.bytes = c.bytes;
  moved.allocations = 1;
  from->bytes -= c.bytes;
  --from->allocations;
  if (from->allocations == 0) live->groups.erase(from);
  auto to = std::find_if(live->groups.begin(), live->groups.end(), [&](const LiveGroup& g) {
    return matches(g, c.to) && g.cupti_only == moved.cupti_only && g.source == moved.source;
  });
  if (to == live->groups.end()) {
    live->groups.push_back(std::move(moved));
  } else {
    to->bytes += c.bytes;
    ++to->allocations;
  }
  live->category_bytes[static_cast<size_t>(c.from)] -= c.bytes;
  live->category_bytes[static_cast<size_t>(c.to)] += c.bytes;
}

void apply_at(const std::vector<CategoryChange>& changes, uint64_t ordinal, LiveBreakdown* live) {
  bool changed = false;
  for (const CategoryChange& c : changes) {
    if (c.alloc_ordinal > ordinal || ordinal >= c.end_ordinal) continue;  // not live at the snapshot
    apply_change(c, live);
    changed = true;
  }
  if (changed) finish_breakdown(live);
}

}  // namespace

void apply_category_changes(const std::vector<CategoryChange>& changes, Analysis* analysis) {
  if (changes.empty()) return;
  apply_at(changes, analysis->peak.site.ordinal, &analysis->peak.live);
  for (WaveReport& w : analysis->waves) apply_at(changes, w.peak.site.ordinal, &w.peak.live);
}

size_t drop_unfinished_waves(Liveness* liveness) {
  std::vector<WaveLiveness>& waves = liveness->waves;
  const std::vector<WaveReport>& reports = liveness->analysis.waves;
  size_t kept = waves.size();
  while (kept > 0) {
    const size_t i = kept - 1;
    if (i < reports.size() && reports[i].span.ended) break;
    --kept;
  }
  const size_t dropped = waves.size() - kept;
  waves.resize(kept);
  for (WaveLiveness& w : waves)
    if (w.warm_twin >= static_cast<int32_t>(kept)) w.warm_twin = -1;
  return dropped;
}

Analysis analyze_report(const std::string& path, const AnalysisOptions& options) {
  LivenessOptions what;
  what.categories_only = true;
  Liveness liveness = analyze_liveness(path, options, what);
  apply_category_changes(liveness.category_changes, &liveness.analysis);
  return std::move(liveness.analysis);
}

}  // namespace psc
