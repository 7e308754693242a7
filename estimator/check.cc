#include "estimator/check.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "estimator/predict.h"

namespace psc {
namespace {

using pricing::Bytes;

double error_of(Bytes priced, uint64_t measured) {
  if (measured == 0) return 0;
  return static_cast<double>(priced) / static_cast<double>(measured) - 1.0;
}

// A split wave whose children each train the same slots in one group: one
// backward of their summed loss (estimator/predict.h calibrated_split).
bool one_backward_of_one_slot_set(const WaveLiveness& w) {
  if (w.children.size() < 2) return false;
  for (const WaveLiveness::Child& child : w.children) {
    if (child.groups != 1 || child.slots.size() > 1 || child.slots != w.children.front().slots) return false;
  }
  return true;
}

// The moment the price names, as the wave measured it; -1 when it did not.
int64_t measured_moment(const WaveLiveness& w, const pricing::PeakLocation& peak) {
  const size_t layer = static_cast<size_t>(std::max(0, peak.layer));
  switch (peak.moment) {
    case pricing::Moment::kHead: return w.moment_head_bytes;
    // Not measured of the group forwarded last: its head's moment holds it.
    case pricing::Moment::kForward: return w.moment_forward_bytes >= 0 ? w.moment_forward_bytes : w.moment_head_bytes;
    case pricing::Moment::kBeforeGradient:
      return layer < w.moment_before_gradient_bytes.size() ? w.moment_before_gradient_bytes[layer] : -1;
    case pricing::Moment::kAfterGradient:
      // A wave that made no gradient in the layer (it accumulates) holds the
      // whole layer, its gradients' temporaries included, in one moment.
      if (layer < w.moment_after_gradient_bytes.size() && w.moment_after_gradient_bytes[layer] >= 0)
        return w.moment_after_gradient_bytes[layer];
      return layer < w.moment_before_gradient_bytes.size() ? w.moment_before_gradient_bytes[layer] : -1;
    case pricing::Moment::kNone: break;
  }
  return -1;
}

// The run of the group the price names, when the wave was cut into runs:
// its own moments, not the wave's (which hold the other groups' state too).
const WaveLiveness& moments_of(const WaveLiveness& w, const pricing::PeakLocation& peak) {
  for (const WaveLiveness& run : w.runs)
    if (run.group == peak.group) return run;
  return w;
}

// A payload that gave a count of groups is priced as equal parts; when the
// runs' boundaries say the groups differ, it says so.
std::vector<std::string> group_warnings(const WaveLiveness& w) {
  if (!w.group_list.empty() || w.runs.size() < 2) return {};
  uint64_t least = UINT64_MAX, most = 0;
  for (const WaveLiveness& run : w.runs) {
    uint64_t retained = 0;
    for (uint64_t b : run.boundary_bytes) retained += b;
    least = std::min(least, retained);
    most = std::max(most, retained);
  }
  if (least == 0 || static_cast<double>(most) <= 1.25 * static_cast<double>(least)) return {};
  return {
      fmt::format("the payload gives {} groups (equal parts), but their boundaries differ {:.1f}-fold: "
                  "give each group's size (peakscope.group)",
                  w.groups, static_cast<double>(most) / static_cast<double>(least))};
}

}  // namespace

pricing::Plan plan_for_wave(const Calibration& c, const WaveLiveness& w, bool floor_only) {
  // The margin's distance beyond the calibrated sizes: the largest group's.
  int64_t group_tokens = w.largest_group_tokens();
  for (const WaveLiveness::Child& child : w.children)
    group_tokens = std::max(group_tokens, child.tokens / std::max<int64_t>(1, child.groups));
  // Split children are one gradient group's pieces, or groups of forwards
  // priced apart (below): the allowance once, as their waves measured it.
  pricing::Plan plan = calibrated_plan(c, w.cold, group_tokens, w.children.empty() ? group_shapes(w.group_sizes()) : 1,
                                       w.first_in_trace);
  std::vector<uint64_t> live_at_start = w.gradient_live_at_start_bytes;
  live_at_start.resize(static_cast<size_t>(c.layers), 0);
  if (w.children.empty()) {
    plan.forwards.push_back(calibrated_forward(c, w.group_sizes(), w.slots, floor_only, live_at_start));
    // The order the trainer ran the groups' backwards in, when its payload says.
    if (w.backward_order.size() == plan.forwards.back().groups.size()) set_backward_order(c, plan, w.backward_order);
    return plan;
  }
  if (one_backward_of_one_slot_set(w)) {
    std::vector<WaveSize> children;
    for (const WaveLiveness::Child& child : w.children) children.push_back(unpacked(child.tokens));
    plan.forwards.push_back(calibrated_split(c, children, w.children.front().slots, floor_only));
    return plan;
  }
  // Children training different slot sets (or several groups each): the
  // design's rule, one forward per child (every term summed except the
  // workspace, the adapter term charged once per slot set). Each child's
  // gradients are pending whether or not .grad exists: autograd buffers them
  // until the last child's contribution arrives.
  // Moments are priced in one forward only (pricing.h): these children
  // charge the terms' maxima.
  Calibration summed = c;
  summed.moments.reset();
  for (const WaveLiveness::Child& child : w.children) {
    std::vector<uint64_t> live(static_cast<size_t>(c.layers), 0);
    plan.forwards.push_back(
        calibrated_forward(summed, even_groups(unpacked(child.tokens), child.groups), child.slots, floor_only, live));
  }
  return plan;
}

double CheckRow::admitted_error_of(bool floor_only) const {
  return error_of(priced(floor_only).required_bytes, measured_peak_bytes);
}

std::vector<CheckRow> check_trace(const Calibration& c, const Liveness& trace) {
  if (trace.layers != c.layers)
    throw CalibrationError(
        fmt::format("{}: {} decoder layers, but the calibration has {}", trace.path, trace.layers, c.layers));
  std::vector<CheckRow> rows;
  for (const WaveLiveness& w : trace.waves) {
    if (w.tokens <= 0) continue;
    CheckRow row;
    row.trace = trace.path;
    row.wave = w.index;
    row.tokens = w.tokens;
    row.cold = w.cold;
    row.groups = w.groups;
    row.measured_peak_bytes = w.measured_peak_bytes;
    row.peak_range = w.peak_range;
    const pricing::Plan plan = plan_for_wave(c, w, false);
    row.square_tokens = 0;
    for (const WaveSize& size : w.group_sizes()) row.square_tokens += size.square_tokens;
    row.warnings = group_warnings(w);
    row.price = pricing::price(plan);
    row.margin = plan.safety_factor - 1.0;
    for (const WaveSize& size : w.group_sizes()) {
      std::vector<std::string> features = c.workspace.outside_features(size);
      if (c.workspace.below_knots(size)) features.push_back("one shorter sequence");
      for (std::string& feature : features)
        if (std::find(row.outside.begin(), row.outside.end(), feature) == row.outside.end())
          row.outside.push_back(std::move(feature));
    }
    row.floor_price = pricing::price(plan_for_wave(c, w, true));
    row.raw_error = error_of(row.price.raw_bytes, w.measured_peak_bytes);
    row.admitted_error = error_of(row.price.required_bytes, w.measured_peak_bytes);
    row.floor_raw_error = error_of(row.floor_price.raw_bytes, w.measured_peak_bytes);

    const pricing::Components& k = row.price.components;
    uint64_t retained = 0;
    for (uint64_t b : w.boundary_bytes) retained += b;
    const uint64_t pending = w.pending_gradient_max_live_bytes;
    uint64_t pending_priced = 0;
    for (const pricing::Forward& f : plan.forwards)
      for (const pricing::Group& g : f.groups)
        for (Bytes p : g.pending_gradient_bytes) pending_priced += static_cast<uint64_t>(p);
    row.terms = {
        {"retained", retained, static_cast<double>(k.retained)},
        {"pending_gradient", pending, static_cast<double>(pending_priced)},
    };
    const int64_t moment = measured_moment(moments_of(w, row.price.peak), row.price.peak);
    if (row.price.peak.moment != pricing::Moment::kNone && moment >= 0) {
      // What the wave held at the moment the price names, against what the
      // price charged there.
      row.terms.push_back({"moment", static_cast<uint64_t>(moment), static_cast<double>(row.price.peak.moment_bytes)});
    } else {
      row.terms.push_back({"workspace", w.workspace_bytes, static_cast<double>(k.workspace)});
      row.terms.push_back({"input_gradient", w.input_gradient_bytes, static_cast<double>(k.input_gradient)});
      row.terms.push_back({"output", w.output_bytes, static_cast<double>(k.output)});
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

namespace {

ErrorSummary summarize_errors(std::vector<double> errors, size_t under) {
  ErrorSummary s;
  s.waves = errors.size();
  s.under = under;
  if (errors.empty()) return s;
  std::sort(errors.begin(), errors.end());
  const size_t n = errors.size();
  s.median = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
  s.min = errors.front();
  s.max = errors.back();
  return s;
}

}  // namespace

std::vector<RunCheck> check_runs(const std::vector<Run>& runs, const std::vector<CheckRow>& rows, bool floor_only) {
  std::vector<RunCheck> out;
  for (const Run& run : runs) {
    RunCheck c;
    c.id = run.id;
    for (const RunMember& m : run.members) {
      if (!is_rank_trace(m.header)) continue;
      RankCheck r;
      r.member = m;
      for (const CheckRow& row : rows) {
        if (row.trace != m.path) continue;
        const double e = row.raw_error_of(floor_only);
        r.max_raw_error = r.waves ? std::max(r.max_raw_error, e) : e;
        r.min_raw_error = r.waves ? std::min(r.min_raw_error, e) : e;
        ++r.waves;
        r.under += row.under_estimate(floor_only);
        r.largest_measured = std::max(r.largest_measured, row.measured_peak_bytes);
      }
      if (r.waves == 0) continue;
      if (c.busiest < 0 || r.largest_measured > c.ranks[static_cast<size_t>(c.busiest)].largest_measured)
        c.busiest = static_cast<int>(c.ranks.size());
      c.ranks.push_back(std::move(r));
    }
    if (!c.ranks.empty()) out.push_back(std::move(c));
  }
  return out;
}

CheckSummary summarize_check(const std::vector<CheckRow>& rows, bool floor_only) {
  std::vector<double> cold_errors, warm_errors;
  size_t cold_under = 0, warm_under = 0;
  for (const CheckRow& r : rows) {
    (r.cold ? cold_errors : warm_errors).push_back(r.raw_error_of(floor_only));
    if (r.under_estimate(floor_only)) ++(r.cold ? cold_under : warm_under);
  }
  return {summarize_errors(std::move(cold_errors), cold_under), summarize_errors(std::move(warm_errors), warm_under)};
}

}  // namespace psc
