#include "estimator/liveness.h"

#include <fmt/format.h>

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
#include "estimator/wave_allocations.h"
#include "traces/deferred.h"

namespace psc {
namespace {

using liveness_internal::add_layer_terms;
using liveness_internal::HeadRanges;
using liveness_internal::leftovers_are_first_execution;
using liveness_internal::Made;
using liveness_internal::most_live;
using liveness_internal::pair_first_execution;
using liveness_internal::reclassify_buffered_gradients;
using liveness_internal::split_into_runs;
using liveness_internal::sweep_maxima;

bool is_layer_backward(const RangeName& r) {
  return (r.phase == Phase::kRecompute || r.phase == Phase::kBackward) && r.has_layer();
}

std::vector<WaveLiveness::Child> children_of(const WavePayload& p);

// Liveness' part of the analysis' second read (analysis/lifetime_pass.h).
class LivenessPass : public LifetimeObserver {
 public:
  LivenessPass(bool every_wave, const RangeParser& parser) : every_wave_(every_wave), names_(parser) {}

  void on_start(const Analysis& analysis) override {
    backward_start_.assign(analysis.waves.size(), UINT64_MAX);
    head_ranges.assign(analysis.waves.size(), {});
    for (const WaveReport& w : analysis.waves) waves_.push_back(w.span);
    keep_.assign(analysis.waves.size(), every_wave_);
    if (!every_wave_) keep_only_waves_that_change_categories();
  }

  void on_finish(const TraceMeta& meta) override { strings = meta.strings; }

  void on_memory_event(const MemoryEventView& m) override {
    const size_t wave = static_cast<size_t>(m.site.wave);
    if (m.site.wave < 0 || wave >= backward_start_.size()) return;
    if (backward_start_[wave] == UINT64_MAX && is_layer_backward(m.range)) backward_start_[wave] = m.site.ordinal;
    // The last event of the forward's head or layers so far: at a head's
    // backward mark, the forward's last (HeadRanges::Mark::forward_end).
    if (m.range.phase == Phase::kHead || m.range.phase == Phase::kForward)
      head_ranges[wave].forward_end = m.site.ordinal;
  }

  // The ranges that tell a wave's last forward's head from its first
  // backward's (head_ranges), for a wave of several groups.
  void on_event(const Event& e, uint64_t ordinal, const ScopeTracker& scope, const TraceMeta& meta) override {
    if ((e.kind != EventKind::kRangePush && e.kind != EventKind::kMark) || scope.current_wave() < 0) return;
    const size_t wave = static_cast<size_t>(scope.current_wave());
    if (wave >= head_ranges.size()) return;
    HeadRanges& h = head_ranges[wave];
    if (e.kind == EventKind::kMark) {
      if (meta.string(e.name) == kHeadBackwardMark) h.backward_marks.push_back({ordinal, h.forward_end});
      return;
    }
    const RangeName name = names_.lookup(e.name, meta);
    if (name.phase == Phase::kHead) h.opened.push_back({ordinal, e.name.value});
    if (name.phase == Phase::kForward && name.has_layer()) {
      h.forward_layer_seen = true;
      h.last_forward_layer = ordinal;
    }
  }

  std::vector<Made> made;
  std::vector<HeadRanges> head_ranges;                        // [wave]
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
                        l.alloc.bytes, l.alloc.range.value, l.alloc.wave, a.layer, a.category, a.category,
                        live ? UINT32_MAX : l.end.range.value});
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
  RangeTable names_;  // range names, parsed once per string id
  std::vector<WaveSpan> waves_;
  std::vector<bool> keep_;             // per wave: keep its allocations
  std::vector<uint64_t> cold_starts_;  // categories only: where cold waves begin, in order
  std::vector<uint64_t> backward_start_;

 public:
  std::vector<std::string> strings;  // the trace's string table, for range names
};

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
  // A wave whose shape is not known, or whose figures mix with another
  // wave's, has no token count to calibrate or check (waves_left_out says why).
  w.tokens = p.bad_lengths || r.span.overlapped >= 0 ? 0 : std::max<int64_t>(0, p.tokens.value_or(0));
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
    return even_groups(size(), groups);
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

// Every allocation made in the wave by term, and those live at its peak.
void add_made(const std::vector<Made*>& made, WaveLiveness* w) {
  for (const Made* m : made) {
    const size_t t = static_cast<size_t>(m->category);
    w->made_bytes[t] += m->bytes;
    ++w->made_allocations[t];
    if (m->alloc_seq <= w->peak_seq && w->peak_seq < m->end_seq) w->at_peak_bytes[t] += m->bytes;
  }
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
  LivenessPass pass(!what.categories_only, options.ranges ? *options.ranges : default_range_parser());
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
  const auto first =
      std::find_if(out.waves.begin(), out.waves.end(), [](const WaveLiveness& w) { return w.tokens > 0; });
  if (first != out.waves.end()) first->first_in_trace = true;

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
    for (const Made* m : by_wave[i]) {
      // Scratch is made and freed in one range of the wave; anything else
      // may be live while another group runs (a group's forward and its
      // backward are apart when several groups run), and is kept.
      const bool scratch = m->end_ordinal <= analysis.waves[i].span.end_ordinal && m->end_range == m->range;
      if (m->category == Category::kFirstExecution && !scratch) cold.first_execution_kept_bytes += m->bytes;
    }
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
    add_made(by_wave[i], &w);
    add_layer_terms(by_wave[i], layers, &w);
    if (i < pass.gradient_live_at_start.size()) {
      const auto& row = pass.gradient_live_at_start[i];
      for (size_t l = 0; l < row.size() && l < layers; ++l) w.gradient_live_at_start_bytes[l] = row[l];
    }
    const uint64_t backward_start = pass.backward_start()[i];
    sweep_maxima(by_wave[i], backward_start, backward_start, head_backward_mark(pass.head_ranges[i], 0, backward_start),
                 &w);
    split_into_runs(by_wave[i], backward_start, pass.head_ranges[i], layers, &w);
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

std::vector<std::string> waves_left_out(const Liveness& t, size_t most) {
  std::vector<std::string> out;
  size_t more = 0;
  for (const WaveLiveness& w : t.waves) {
    if (w.tokens > 0 || w.index < 0 || static_cast<size_t>(w.index) >= t.analysis.waves.size()) continue;
    const WaveSpan& span = t.analysis.waves[static_cast<size_t>(w.index)].span;
    std::string why;
    if (span.overlapped >= 0)
      why = fmt::format("it and wave {} were open at the same time (their figures mix: one wave at a time)",
                        span.overlapped);
    else if (!span.payload.error.empty())
      why = "its payload: " + span.payload.error;
    else if (!span.payload.present)
      why = "it has no payload mark (peakscope.wave writes one)";
    else
      why = "its payload gives no token count";
    if (out.size() < most)
      out.push_back(fmt::format("{}: left out wave {}: {}", t.path, w.index, why));
    else
      ++more;
  }
  if (more)
    out.push_back(
        fmt::format("{}: left out {} more wave{} without a usable token count", t.path, more, more == 1 ? "" : "s"));
  return out;
}

std::vector<std::string> set_aside_partial_waves(Liveness* t, const char* verb) {
  std::vector<std::string> notes;
  if (std::string note = incomplete_read_note(t->path, t->analysis.trace.status, verb); !note.empty())
    notes.push_back(std::move(note));
  for (std::string& note : waves_left_out(*t)) notes.push_back(std::move(note));
  if (const size_t n = drop_unfinished_waves(t); n > 0)
    notes.push_back(fmt::format("{}: left out {} wave{} the trace stops inside (its figures are partial)", t->path, n,
                                n == 1 ? "" : "s"));
  return notes;
}

Analysis analyze_report(const std::string& path, const AnalysisOptions& options) {
  LivenessOptions what;
  what.categories_only = true;
  Liveness liveness = analyze_liveness(path, options, what);
  apply_category_changes(liveness.category_changes, &liveness.analysis);
  return std::move(liveness.analysis);
}

}  // namespace psc
