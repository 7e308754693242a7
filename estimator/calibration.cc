#include "estimator/calibration.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>

#include "estimator/event_alignment.h"
#include "estimator/first_execution.h"

namespace psc {
namespace {

using Samples = std::vector<GrowthPoint>;

// The size one group of the wave carries: the pricing model prices boundaries
// per group, and groups of one forward split its tokens (and sequences).
WaveSize group_size(const WaveLiveness& w) { return psc::group_size(w.size(), w.groups); }

}  // namespace

std::vector<uint64_t> Calibration::slot_gradients(const std::string& slot) const {
  auto it = adapter_gradient_bytes.find(slot);
  if (it != adapter_gradient_bytes.end()) return it->second;
  std::vector<uint64_t> largest(static_cast<size_t>(layers), 0);
  for (const auto& [name, bytes] : adapter_gradient_bytes)
    for (size_t i = 0; i < bytes.size() && i < largest.size(); ++i) largest[i] = std::max(largest[i], bytes[i]);
  return largest;
}

namespace {

size_t distinct_sizes(const Samples& samples) {
  std::vector<std::pair<int64_t, double>> sizes;
  for (const GrowthPoint& p : samples) sizes.emplace_back(p.size.tokens, p.size.square_tokens);
  std::sort(sizes.begin(), sizes.end());
  return static_cast<size_t>(std::unique(sizes.begin(), sizes.end()) - sizes.begin());
}

// From points of one size, what is left of a quantity once a layer's
// gradients exist is read off the whole's fit: the largest measured ratio of
// part to whole (at most 1), and the smallest measured credit (whole - part).
template <typename Whole>
std::pair<double, double> ratio_and_credit(const Whole& whole, const Samples& part) {
  double ratio = 0, credit = -1;
  for (const GrowthPoint& p : part) {
    const double line = whole.line(p.size);
    ratio = std::max(ratio, line > 0 ? static_cast<double>(p.bytes) / line : 1.0);
    const double c = std::max(0.0, line - static_cast<double>(p.bytes));
    credit = credit < 0 ? c : std::min(credit, c);
  }
  return {std::min(ratio, 1.0), std::max(0.0, credit)};
}

// `term` x scale - shift, its fit and its growth beyond alike; no margin.
GrowthTerm scaled_and_shifted(GrowthTerm term, double scale, double shift) {
  auto apply = [&](GrowthLine l) {
    return GrowthLine{l.intercept * scale - shift, l.per_token * scale, l.per_square_token * scale,
                      l.per_longest_square * scale, l.per_sequence * scale};
  };
  const GrowthLine fit = apply(term.fit());
  term.intercept = fit.intercept;
  term.per_token = fit.per_token;
  term.per_square_token = fit.per_square_token;
  term.per_longest_square = fit.per_longest_square;
  term.per_sequence = fit.per_sequence;
  term.beyond = apply(term.beyond);
  term.margin_bytes = 0;
  return term;
}

// The most `fit` falls below a point.
template <typename Fit>
double shortfall(const Fit& fit, const Samples& part) {
  double most = 0;
  for (const GrowthPoint& p : part) most = std::max(most, static_cast<double>(p.bytes) - fit.line(p.size));
  return most;
}

// The envelope needs two sizes to find a growth, and a flat line would fall
// below larger waves (what is left grows like the whole does), so from one
// size the whole's fit is scaled by the largest measured ratio instead, then
// raised by its largest shortfall so it covers every point.
GrowthTerm scaled_fit(const GrowthTerm& whole, const Samples& part) {
  GrowthTerm scaled = scaled_and_shifted(whole, ratio_and_credit(whole, part).first, 0);
  scaled.points = part.size();
  const double raise = shortfall(scaled, part);
  scaled.intercept += raise;
  scaled.beyond.intercept += raise;
  scaled.max_abs_residual = 0;
  for (const GrowthPoint& p : part)
    scaled.max_abs_residual =
        std::max(scaled.max_abs_residual, std::abs(static_cast<double>(p.bytes) - scaled.line(p.size)));
  return scaled;
}

// A part of `whole` measured in some waves: fitted on its own from two sizes
// or more ("envelope"), else scaled from the whole ("scaled ...").
GrowthTerm part_fit(const GrowthTerm& whole, const Samples& part, const char* scaled_name, std::string* method) {
  if (distinct_sizes(part) >= 2) {
    *method = "envelope";
    return fit_growth(part);
  }
  *method = scaled_name;
  return scaled_fit(whole, part);
}

void fit_workspace_after_gradient(const Samples& after, Calibration* c) {
  if (after.empty()) return;
  c->workspace_after_gradient = part_fit(c->workspace, after, "scaled workspace", &c->workspace_after_gradient_method);
}

// One moment's points: per wave its size, its maximum and its events (for a
// layer, with the index of its first event with its own gradients).
struct MomentPoint {
  WaveSize size;
  uint64_t maximum = 0;
  const std::vector<int64_t>* events = nullptr;
  int64_t gradient_from = -1;
  const std::vector<WaveLiveness::EventAllocation>* allocations = nullptr;
};
using MomentPoints = std::vector<MomentPoint>;

struct MomentSamples {
  MomentPoints head;
  std::vector<MomentPoints> before, after;  // maxima, for the fit of the maximum
  std::vector<MomentPoints> layer;          // events
  explicit MomentSamples(size_t layers) : before(layers), after(layers), layer(layers) {}
  void add(const WaveLiveness& w, WaveSize size) {
    auto events = [&](size_t k) { return k < w.moment_events.size() ? &w.moment_events[k] : nullptr; };
    auto allocations = [&](size_t k) {
      return k < w.moment_event_allocations.size() ? &w.moment_event_allocations[k] : nullptr;
    };
    if (w.moment_head_bytes >= 0)
      head.push_back({size, static_cast<uint64_t>(w.moment_head_bytes), events(0), -1, allocations(0)});
    for (size_t i = 0; i < before.size(); ++i) {
      const int64_t b = i < w.moment_before_gradient_bytes.size() ? w.moment_before_gradient_bytes[i] : -1;
      const int64_t a = i < w.moment_after_gradient_bytes.size() ? w.moment_after_gradient_bytes[i] : -1;
      if (b >= 0) before[i].push_back({size, static_cast<uint64_t>(b)});
      if (a >= 0) after[i].push_back({size, static_cast<uint64_t>(a)});
      if (b >= 0 || a >= 0) {
        const int64_t from = i < w.moment_gradient_from.size() ? w.moment_gradient_from[i] : -1;
        layer[i].push_back({size, static_cast<uint64_t>(std::max(a, b)), events(1 + i), from, allocations(1 + i)});
      }
    }
  }
};

Samples maxima(const MomentPoints& points) {
  Samples out;
  for (const MomentPoint& p : points) out.push_back({p.size, p.maximum});
  return out;
}

// True when `a` is at most `b` at every size (t, s >= 0): coefficient by
// coefficient, for the fit and for the growth beyond the calibrated sizes.
bool bounded_by(const GrowthTerm& a, const GrowthTerm& b) {
  auto below = [](const GrowthLine& x, const GrowthLine& y) {
    return x.intercept <= y.intercept && x.per_token <= y.per_token && x.per_square_token <= y.per_square_token &&
           x.per_longest_square <= y.per_longest_square && x.per_sequence <= y.per_sequence;
  };
  if (a.margin_bytes > b.margin_bytes || !below(a.fit(), b.fit())) return false;
  if (!a.has_beyond) return true;
  return b.has_beyond && below(a.beyond, b.beyond);
}

// The waves' events lined up (event_alignment.h): per wave, the index among
// its own events of each event every wave shares.
struct LinedUp {
  MomentPoints points;
  std::vector<EventSeries> series;
  std::vector<std::vector<size_t>> kept;
  size_t count() const { return kept.empty() ? 0 : kept.front().size(); }
};

LinedUp line_up(const MomentPoints& points) {
  LinedUp out{points, {}, {}};
  for (const MomentPoint& p : points) out.series.push_back({p.size, p.events, p.allocations, p.gradient_from});
  out.kept = line_up_events(out.series);
  if (out.kept.empty()) out.points.clear();
  return out;
}

MomentFit maximum_fit(const MomentPoints& points) {
  MomentFit fit;
  fit.method = "maximum";
  fit.events.push_back(fit_growth(maxima(points)));
  return fit;
}

// Events [from, to) of waves whose sequences line up, each fitted on its own;
// none when an event's fit takes bytes off as the wave grows: one event's
// bytes are allocations, each growing with tokens, squares or sequences, so
// such a fit says the events did not line up after all.
// `freed` (empty, or one per shared event): the freed temporaries of each
// event (MomentFit::freed_temporaries), kept beside the events fitted. An
// event is left out where another bounds it and takes no more off it.
std::optional<MomentFit> events_fit(const MomentPoints& lined_up, size_t from, size_t to,
                                    const std::vector<uint64_t>& freed = {}) {
  MomentFit fit;
  fit.method = "events";
  if (from >= to) {  // no event: nothing held beside boundaries and gradients
    fit.events.push_back(fit_growth({}));
    return fit;
  }
  std::vector<uint64_t> credit;  // beside fit.events (0 where none was freed)
  for (size_t e = from; e < to; ++e) {
    Samples samples;
    for (const MomentPoint& p : lined_up)
      samples.push_back({p.size, static_cast<uint64_t>(std::max<int64_t>(0, (*p.events)[e]))});
    GrowthTerm term = fit_growth(samples);
    constexpr double kRounding = 1e-6;  // bytes per feature unit: a zero through a plane's solve
    if (!plausible(term.fit(), kRounding)) return std::nullopt;
    // One event of sequences that line up: the same allocations at every
    // size, each growing as a + b t + c s, so the fit is exact and needs no
    // chord. Maxima of different events (maximum_fit) keep theirs.
    term.knots.clear();
    const uint64_t own = freed.empty() ? 0 : freed[e];
    bool bounded = false;
    for (size_t k = 0; k < fit.events.size() && !bounded; ++k)
      bounded = bounded_by(term, fit.events[k]) && own >= credit[k];
    if (bounded) continue;
    size_t kept = 0;
    for (size_t k = 0; k < fit.events.size(); ++k) {
      if (bounded_by(fit.events[k], term) && credit[k] >= own) continue;
      fit.events[kept] = std::move(fit.events[k]);
      credit[kept++] = credit[k];
    }
    fit.events.resize(kept);
    credit.resize(kept);
    fit.events.push_back(std::move(term));
    credit.push_back(own);
  }
  if (std::any_of(credit.begin(), credit.end(), [](uint64_t c) { return c > 0; }))
    fit.freed_temporaries = std::move(credit);
  return fit;
}

bool lines_up(const LinedUp& l) {
  return l.points.size() >= 2 && l.count() > 0 && distinct_sizes(maxima(l.points)) >= 2;
}

// The lined-up waves' points, each with its events' values (`values`, one
// per wave, folded onto the shared events) in place of its own.
MomentPoints with_values(const LinedUp& l, const std::vector<std::vector<int64_t>>& values) {
  MomentPoints out = l.points;
  for (size_t w = 0; w < out.size(); ++w) out[w].events = &values[w];
  return out;
}

MomentFit fit_moment(const MomentPoints& points) {
  const LinedUp l = line_up(points);
  if (!lines_up(l)) return maximum_fit(points);
  std::vector<std::vector<int64_t>> values;
  for (size_t w = 0; w < l.points.size(); ++w) values.push_back(folded(*l.points[w].events, l.kept[w]));
  return events_fit(with_values(l, values), 0, l.count()).value_or(maximum_fit(points));
}

// From waves of one or two sizes: what part of `whole` is left once the gradients
// exist cannot be told to grow in proportion to the whole, or to stay a fixed
// amount below it. Either may be right (a layer's freed scratch grows with
// tokens; what it keeps need not), so the moment is the larger of both: the
// whole scaled by the largest measured ratio, and the whole less the smallest
// measured credit; each raised by its shortfall so it covers every point.
MomentFit scaled_moment(const MomentFit& whole, const MomentPoints& points) {
  const Samples part = maxima(points);
  const auto [ratio, credit] = ratio_and_credit(whole, part);
  auto transformed = [&](double scale, double shift) {
    MomentFit out = whole;
    for (GrowthTerm& t : out.events) t = scaled_and_shifted(t, scale, shift);
    const double raise = shortfall(out, part);
    for (GrowthTerm& t : out.events) {
      t.intercept += raise;
      t.beyond.intercept += raise;
    }
    return out;
  };
  MomentFit scaled = transformed(ratio, 0);
  const MomentFit shifted = transformed(1, credit);
  scaled.events.insert(scaled.events.end(), shifted.events.begin(), shifted.events.end());
  scaled.method = kScaledBefore;
  return scaled;
}

// A layer's before- and after-gradient moments. Where the waves' events line
// up (gradient waves' own gradients start at the same shared event), the
// events before it make the before-gradient moment and those from it on the
// after-gradient one, its values counting the gradients made so far; where
// they do not, the maxima are fitted, the after-gradient one from three sizes
// or more, scaled from the before-gradient fit from one or two (calibration.h),
// equal to it from none.
std::pair<MomentFit, MomentFit> fit_layer(const MomentPoints& layer, const MomentPoints& before,
                                          const MomentPoints& after) {
  const LinedUp l = line_up(layer);
  std::set<int64_t> starts;
  bool starts_shared = true;
  for (size_t w = 0; w < l.points.size(); ++w) {
    const int64_t from = l.points[w].gradient_from;
    if (from < 0) continue;
    const auto it = std::find(l.kept[w].begin(), l.kept[w].end(), static_cast<size_t>(from));
    if (it == l.kept[w].end()) {
      starts_shared = false;
      break;
    }
    starts.insert(it - l.kept[w].begin());
  }
  const std::vector<size_t> gradient_at = gradient_events(l.series, l.kept);
  if (lines_up(l) && starts_shared && starts.size() <= 1 && (starts.empty() || !gradient_at.empty())) {
    std::vector<std::vector<int64_t>> values;
    // Per shared event, the least an accumulating wave's value as if its
    // temporaries stayed exceeds its value as it was: what it had freed.
    std::vector<uint64_t> freed;
    for (size_t w = 0; w < l.points.size(); ++w) {
      const MomentPoint& p = l.points[w];
      const bool adjust = !gradient_at.empty() && p.gradient_from < 0;
      values.push_back(
          folded(adjust ? as_if_gradients_stayed(l.series[w], l.kept[w], gradient_at) : *p.events, l.kept[w]));
      if (!adjust) continue;
      const std::vector<int64_t> was = folded(*p.events, l.kept[w]);
      if (freed.empty()) freed.assign(was.size(), UINT64_MAX);  // one per shared event, as every wave's
      for (size_t k = 0; k < was.size(); ++k)
        freed[k] = std::min(freed[k], static_cast<uint64_t>(std::max<int64_t>(0, values.back()[k] - was[k])));
    }
    const MomentPoints lined_up = with_values(l, values);
    const size_t count = l.count();
    const size_t from = starts.empty() ? count : static_cast<size_t>(*starts.begin());
    std::optional<MomentFit> whole = events_fit(lined_up, 0, from);
    std::optional<MomentFit> with_gradient = starts.empty() ? whole : events_fit(lined_up, from, count, freed);
    if (whole && with_gradient) {
      if (starts.empty()) {
        with_gradient->method = "same as before";
      } else {
        with_gradient->includes_gradient = true;
      }
      return {*whole, *with_gradient};
    }
  }
  MomentFit b = before.empty() ? maximum_fit(layer) : maximum_fit(before);
  if (after.empty()) {
    MomentFit same = b;
    same.method = "same as before";
    return {b, same};
  }
  if (distinct_sizes(maxima(after)) >= 3) return {b, maximum_fit(after)};
  return {b, scaled_moment(b, after)};
}

std::optional<MomentFits> fit_moments(const MomentSamples& m) {
  if (m.head.empty()) return std::nullopt;
  MomentFits fits;
  fits.head = fit_moment(m.head);
  for (size_t i = 0; i < m.layer.size(); ++i) {
    auto [before, after] = fit_layer(m.layer[i], m.before[i], m.after[i]);
    fits.before_gradient.push_back(std::move(before));
    fits.after_gradient.push_back(std::move(after));
  }
  return fits;
}

}  // namespace

namespace {

// The head moment's residual, and of each kind of layer moment the layer
// whose fit is furthest from what the wave measured.
void add_moment_residuals(const MomentFits& m, const WaveLiveness& w, WaveSize size,
                          const std::vector<uint64_t>& gradient, WaveResiduals& r) {
  if (w.moment_head_bytes >= 0)
    r.terms.push_back({"moment.head", static_cast<uint64_t>(w.moment_head_bytes), m.head.line(size)});
  auto worst = [&](const char* name, const std::vector<int64_t>& measured, const std::vector<MomentFit>& fits) {
    std::optional<TermResidual> pick;
    for (size_t i = 0; i < measured.size() && i < fits.size(); ++i) {
      if (measured[i] < 0) continue;
      // Measured after-gradient values are net of the layer's gradient.
      const double own = fits[i].includes_gradient && i < gradient.size() ? static_cast<double>(gradient[i]) : 0;
      TermResidual t{std::string(name) + "[layer." + std::to_string(i) + "]", static_cast<uint64_t>(measured[i]),
                     std::max(0.0, fits[i].line(size) - own)};
      if (!pick || std::abs(t.residual()) > std::abs(pick->residual())) pick = t;
    }
    if (pick) r.terms.push_back(*pick);
  };
  worst("moment.before_gradient", w.moment_before_gradient_bytes, m.before_gradient);
  worst("moment.after_gradient", w.moment_after_gradient_bytes, m.after_gradient);
}

template <typename Fit>
std::vector<uint32_t> repeats(const std::vector<Fit>& fits) {
  std::vector<uint32_t> same(fits.size());
  for (size_t i = 0; i < fits.size(); ++i) {
    same[i] = static_cast<uint32_t>(i);
    for (size_t j = 0; j < i; ++j) {
      if (same[j] == j && fits[j].prices_like(fits[i])) {
        same[i] = static_cast<uint32_t>(j);
        break;
      }
    }
  }
  return same;
}

}  // namespace

void index_repeats(Calibration& c) {
  c.boundary_same_as = repeats(c.boundary);
  if (!c.moments) return;
  c.moments->before_same_as = repeats(c.moments->before_gradient);
  c.moments->after_same_as = repeats(c.moments->after_gradient);
}

namespace {

// What a wave shows of one group at a time: itself when it has one group;
// its runs when it has several and its backward cut into them; nothing
// otherwise (its terms mix its groups').
std::vector<const WaveLiveness*> one_group_parts(const WaveLiveness& w) {
  std::vector<const WaveLiveness*> out;
  if (w.groups <= 1) {
    out.push_back(&w);
  } else {
    for (const WaveLiveness& run : w.runs) out.push_back(&run);
  }
  return out;
}

// A wave of equal groups whose backward did not cut into runs: each group
// holds its share of the boundaries and of the head state; the recomputed
// layer's workspace and the gradient flowing between layers are one group's
// (one backward runs at a time). Its output and moments show the other
// groups' head state: they are left out.
void add_equal_parts(const WaveLiveness& w, size_t layers, std::vector<Samples>& boundary, Samples& workspace,
                     Samples& input_gradient, Samples& head_saved) {
  const WaveSize per_group = group_size(w);
  const uint64_t groups = static_cast<uint64_t>(std::max<int64_t>(1, w.groups));
  for (size_t i = 0; i < layers; ++i)
    boundary[i].push_back({per_group, i < w.boundary_bytes.size() ? w.boundary_bytes[i] / groups : 0});
  workspace.push_back({per_group, w.workspace_bytes});
  input_gradient.push_back({per_group, w.input_gradient_bytes});
  head_saved.push_back({per_group, w.head_saved_bytes / groups});
}

WaveResiduals residuals_of(const Calibration& c, const std::string& path, const WaveLiveness& w) {
  const WaveSize size = w.size();
  WaveResiduals r{path, w.index, w.tokens, size.square_tokens, w.cold, {}};
  uint64_t retained = 0;
  double retained_fit = 0;
  for (size_t i = 0; i < c.boundary.size() && i < w.boundary_bytes.size(); ++i) {
    retained += w.boundary_bytes[i];
    retained_fit += c.boundary[i].line(size);
  }
  r.terms.push_back({"retained", retained, retained_fit});
  r.terms.push_back({"workspace", w.workspace_bytes, c.workspace.line(size)});
  if (c.workspace_after_gradient && w.workspace_after_gradient_bytes >= 0)
    r.terms.push_back({"workspace_after_gradient", static_cast<uint64_t>(w.workspace_after_gradient_bytes),
                       c.workspace_after_gradient->line(size)});
  r.terms.push_back({"input_gradient", w.input_gradient_bytes, c.input_gradient.line(size)});
  r.terms.push_back({"output", w.output_bytes, c.output.line(size)});
  if (c.moments)
    add_moment_residuals(*c.moments, w, size,
                         w.slots.size() == 1 ? c.slot_gradients(w.slots[0]) : std::vector<uint64_t>{}, r);
  return r;
}

// What every term of the model is fitted to: one sample per wave of one
// group, or per group of a wave (one_group_parts, add_equal_parts).
struct TermSamples {
  explicit TermSamples(size_t layers) : boundary(layers), moments(layers) {}
  std::vector<Samples> boundary;
  Samples workspace, workspace_after, input_gradient, output, head_saved, waiting, forward_moment;
  MomentSamples moments;
  int waves_cut_into_runs = 0, waves_whose_runs_kept_boundaries = 0;
  FirstExecutionFit first_execution;
};

// Whether a wave's terms calibrate: it has a token count, `use` takes it,
// and it is not split (split waves mix their children's terms).
bool calibrates(const WaveLiveness& w, const std::function<bool(const WaveLiveness&)>& use) {
  if (w.tokens <= 0 || !w.children.empty()) return false;
  return !use || use(w);
}

// One group's terms as samples, and its slot's adapter gradients.
void add_part(const WaveLiveness& part, size_t layers, TermSamples& s, Calibration* c) {
  const WaveSize size = part.size();
  for (size_t i = 0; i < layers; ++i)
    s.boundary[i].push_back({size, i < part.boundary_bytes.size() ? part.boundary_bytes[i] : 0});
  s.workspace.push_back({size, part.workspace_bytes});
  if (part.workspace_after_gradient_bytes >= 0)
    s.workspace_after.push_back({size, static_cast<uint64_t>(part.workspace_after_gradient_bytes)});
  s.input_gradient.push_back({size, part.input_gradient_bytes});
  s.output.push_back({size, part.output_bytes});
  s.moments.add(part, size);
  s.head_saved.push_back({size, part.head_saved_bytes});
  if (part.waiting_bytes >= 0) s.waiting.push_back({size, static_cast<uint64_t>(part.waiting_bytes)});
  if (part.moment_forward_bytes >= 0)
    s.forward_moment.push_back({size, static_cast<uint64_t>(part.moment_forward_bytes)});
  // Exact: what this slot's backward made, per layer.
  if (part.slots.size() == 1) {
    std::vector<uint64_t>& slot = c->adapter_gradient_bytes[part.slots[0]];
    slot.resize(layers, 0);
    for (size_t i = 0; i < layers && i < part.pending_gradient_bytes.size(); ++i)
      slot[i] = std::max(slot[i], part.pending_gradient_bytes[i]);
  }
}

// One trace's calibrating waves: their samples, counts and first executions.
void add_trace(const Liveness& t, size_t layers, const std::function<bool(const WaveLiveness&)>& use, TermSamples& s,
               Calibration* c) {
  c->traces.push_back(t.path);
  c->sequence_allowance_bytes = std::max<uint64_t>(
      c->sequence_allowance_bytes, (t.analysis.trace.header.flags & format::kHeaderHostMode) ? 64 : 512);
  for (const WaveLiveness& w : t.waves) {
    if (!calibrates(w, use)) continue;
    ++c->waves;
    for (const WaveLiveness* part : one_group_parts(w)) add_part(*part, layers, s, c);
    if (w.groups > 1 && w.runs.empty() && w.group_list.empty())
      add_equal_parts(w, layers, s.boundary, s.workspace, s.input_gradient, s.head_saved);
    if (w.cold && w.warm_twin >= 0) add_first_execution(t, w, &s.first_execution, c);
    if (w.runs_free_boundaries >= 0) {
      ++s.waves_cut_into_runs;
      s.waves_whose_runs_kept_boundaries += w.runs_free_boundaries == 0;
    }
  }
}

// Each calibrating wave's measured terms against the fits.
void add_residuals(const std::vector<Liveness>& traces, const std::function<bool(const WaveLiveness&)>& use,
                   Calibration* c) {
  for (const Liveness& t : traces) {
    for (const WaveLiveness& w : t.waves) {
      if (!calibrates(w, use)) continue;
      for (const WaveLiveness* part : one_group_parts(w)) c->residuals.push_back(residuals_of(*c, t.path, *part));
    }
  }
}

// Each term's fit to its samples.
void fit_terms(const TermSamples& s, Calibration* c) {
  for (const Samples& boundary : s.boundary) c->boundary.push_back(fit_growth(boundary));
  c->workspace = fit_growth(s.workspace);
  fit_workspace_after_gradient(s.workspace_after, c);
  c->input_gradient = fit_growth(s.input_gradient);
  c->output = fit_growth(s.output);
  c->head_saved = fit_growth(s.head_saved);
  if (!s.waiting.empty()) c->waiting = fit_growth(s.waiting);
  if (!s.forward_moment.empty()) c->forward_moment = fit_growth(s.forward_moment);
  c->runs_free_boundaries = s.waves_cut_into_runs > 0 && s.waves_whose_runs_kept_boundaries == 0;
  c->moments = fit_moments(s.moments);
}

}  // namespace

Calibration calibrate(const std::vector<Liveness>& traces, double safety_factor,
                      const std::function<bool(const WaveLiveness&)>& use) {
  Calibration c;
  c.safety_factor = safety_factor;
  for (const Liveness& t : traces) c.layers = std::max(c.layers, t.layers);
  const size_t layers = static_cast<size_t>(c.layers);

  TermSamples samples(layers);
  for (const Liveness& t : traces) add_trace(t, layers, use, samples, &c);
  if (c.waves == 0) throw CalibrationError("no wave with a token count in the traces given");
  fit_terms(samples, &c);
  finish_first_execution(samples.first_execution, &c);
  add_residuals(traces, use, &c);
  index_repeats(c);
  return c;
}

}  // namespace psc
