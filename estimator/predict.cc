#include "estimator/predict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace psc {
namespace {

using pricing::Bytes;

Bytes as_bytes(uint64_t v) { return static_cast<Bytes>(std::min<uint64_t>(v, uint64_t{1} << 50)); }

// Reads calibrated terms at one size, noting each extrapolated one.
struct Reader {
  const Calibration& c;
  Extrapolation* extrapolation;
  uint64_t at(const char* name, const GrowthTerm& term, WaveSize size) const {
    const uint8_t outside = term.outside_mask(size);
    if (extrapolation) extrapolation->note(name, term, size, outside);
    return priced(term, size, outside);
  }
  // The term's bytes at `size`, not noted as read (note() it if it decides).
  uint64_t quietly(const GrowthTerm& term, WaveSize size) const { return priced(term, size, term.outside_mask(size)); }
  // With the conservative growth outside (its outside_mask) or from fewer than three sizes.
  static uint64_t priced(const GrowthTerm& term, WaveSize size, uint8_t outside) {
    return term.bytes_at(size, term.has_beyond && (outside != 0 || term.few_sizes()));
  }
  void note(const char* name, const GrowthTerm& term, WaveSize size) const {
    if (extrapolation) extrapolation->note(name, term, size, term.outside_mask(size));
  }
  // With `accumulating`, also the moment of a wave whose layer's gradients
  // all exist (MomentFit::accumulating_bytes_at), -1 where not measured.
  uint64_t at(const char* name, const MomentFit& moment, WaveSize size, int64_t* accumulating = nullptr) const {
    if (accumulating) *accumulating = -1;
    const GrowthTerm* any = moment.any();
    if (!any) return 0;
    const uint8_t outside = any->outside_mask(size);
    if (extrapolation) extrapolation->note(name, *any, size, outside);
    const bool extrapolated = any->has_beyond && (outside != 0 || any->few_sizes());
    if (accumulating && !moment.freed_temporaries.empty())
      *accumulating = static_cast<int64_t>(moment.accumulating_bytes_at(size, extrapolated));
    return moment.bytes_at(size, extrapolated);
  }
};

// Packed in a way no calibration wave was: more sequences, a longest
// sequence longer than any calibrated, or a larger share of the squares in it.
bool unseen_packing(const GrowthTerm& term, WaveSize size) {
  return term.outside_mask(size) &
         (GrowthTerm::kOutsideSequences | GrowthTerm::kOutsideLongest | GrowthTerm::kOutsideLongestShare);
}

// What the calibration says is left of the workspace once a layer's own
// gradients are made, capped at the workspace priced; nullopt without it.
std::optional<Bytes> workspace_after_gradient(const Reader& r, WaveSize size, Bytes workspace) {
  if (!r.c.workspace_after_gradient) return std::nullopt;
  return std::min(workspace, as_bytes(r.at("workspace_after_gradient", *r.c.workspace_after_gradient, size)));
}

// The fitted moments at one size, read once for every group of that size.
struct MomentValues {
  uint64_t head = 0;
  std::optional<uint64_t> forward;  // at most the head's: it holds the forward too
  std::vector<uint64_t> before, after;
  std::vector<uint8_t> after_includes_gradient;
  // Per layer, the after-gradient moment of a wave whose layer's gradients
  // all exist already, its temporaries made and freed as the calibration's
  // accumulating waves measured (counting those still live); -1: not measured.
  std::vector<int64_t> after_accumulating;
};

MomentValues moment_values(const Reader& r, WaveSize size) {
  const MomentFits& m = *r.c.moments;
  MomentValues v;
  v.head = r.at("moments.head", m.head, size);
  if (r.c.forward_moment) v.forward = std::min(v.head, r.quietly(*r.c.forward_moment, size));
  const size_t layers = m.before_gradient.size();
  v.before.reserve(layers);
  v.after.reserve(layers);
  v.after_includes_gradient.reserve(layers);
  const bool indexed = m.before_same_as.size() == layers && m.after_same_as.size() == layers;
  for (size_t i = 0; i < layers; ++i) {
    // A layer whose fit prices like an earlier one's reads that one's value.
    const size_t b = indexed ? m.before_same_as[i] : i;
    const size_t a = indexed ? m.after_same_as[i] : i;
    v.before.push_back(b < i ? v.before[b] : r.at("moments.before_gradient", m.before_gradient[i], size));
    int64_t accumulating = a < i ? v.after_accumulating[a] : -1;
    v.after.push_back(a < i ? v.after[a] : r.at("moments.after_gradient", m.after_gradient[i], size, &accumulating));
    v.after_accumulating.push_back(accumulating);
    v.after_includes_gradient.push_back(m.after_gradient[i].includes_gradient);
  }
  return v;
}

// One group's moments at its size, each raised by `everywhere` (held at
// every moment: head state of groups not run yet) and the layers' by
// `in_layers` (held while a layer works: a later split child's contribution
// to a layer's gradient before autograd adds it to the buffer).
// After-gradient moments are relative to the layer's whole gradient pending
// (pricing.h). Fitted from events (values counting the gradients made so far,
// an accumulating wave's as if its temporaries stayed), the layer's
// calibrated gradient G is taken off them; of it, what is not pending (P < G:
// it exists already) is made as a temporary while the layer works: G - P goes
// back on. Fitted from maxima, the before-gradient fit of an accumulating
// wave's size already holds the whole layer, temporaries included.
pricing::Moments moments_at(const MomentValues& v, uint64_t everywhere, uint64_t in_layers,
                            const std::vector<uint64_t>& gradient, const std::vector<Bytes>& pending) {
  pricing::Moments out;
  out.head_bytes = as_bytes(v.head + everywhere);
  if (v.forward) out.forward_bytes = as_bytes(*v.forward + everywhere);
  out.before_gradient_bytes.reserve(v.before.size());
  out.after_gradient_bytes.reserve(v.before.size());
  for (size_t i = 0; i < v.before.size(); ++i) {
    const uint64_t g = i < gradient.size() ? gradient[i] : 0;
    const uint64_t p = i < pending.size() ? static_cast<uint64_t>(pending[i]) : 0;
    uint64_t after = v.after[i];
    const int64_t accumulating = i < v.after_accumulating.size() ? v.after_accumulating[i] : -1;
    if (v.after_includes_gradient[i] && p == 0 && accumulating >= 0) {
      // Nothing pending: the layer's gradients all exist, and its
      // temporaries are made and freed as the calibration's accumulating
      // waves measured (the value counts those still live).
      after = static_cast<uint64_t>(accumulating);
    } else if (v.after_includes_gradient[i]) {
      after -= std::min(after, g);
      after += g - std::min(g, p);
    }
    out.before_gradient_bytes.push_back(as_bytes(v.before[i] + everywhere + in_layers));
    out.after_gradient_bytes.push_back(as_bytes(after + everywhere + in_layers));
  }
  return out;
}

bool priced_by_moments(const Calibration& c) {
  return c.moments && c.moments->before_gradient.size() == static_cast<size_t>(c.layers);
}

// What a group of `size` holds while another group's backward runs before
// its own: measured on groups that waited, never above what its forward left
// (head_saved: nothing of a group is made while it waits), the bound that
// stands for it where no group waited. The measured term alone can exceed
// that bound only where it takes its conservative growth (beyond the sizes
// that waited, or from fewer than three of them).
// Only the term that decides is noted as read.
uint64_t waiting_at(const Reader& r, WaveSize size) {
  const Calibration& c = r.c;
  const uint64_t bound = r.quietly(c.head_saved, size);
  const uint64_t measured = c.waiting ? r.quietly(*c.waiting, size) : UINT64_MAX;
  const bool bounded = !c.waiting || bound < measured;
  r.note(bounded ? "head_saved" : "waiting", bounded ? c.head_saved : *c.waiting, size);
  return std::min(bound, measured);
}

pricing::Group boundaries_at(const Reader& r, WaveSize size) {
  const size_t layers = static_cast<size_t>(r.c.layers);
  pricing::Group group;
  group.boundary_bytes.resize(layers);
  group.pending_gradient_bytes.assign(layers, 0);
  const bool indexed = r.c.boundary_same_as.size() == layers;
  for (size_t i = 0; i < layers; ++i) {
    const size_t same = indexed ? r.c.boundary_same_as[i] : i;
    group.boundary_bytes[i] = same < i ? group.boundary_bytes[same] : as_bytes(r.at("boundary", r.c.boundary[i], size));
  }
  return group;
}

}  // namespace

size_t group_shapes(const std::vector<WaveSize>& sizes) {
  std::vector<WaveSize> seen;
  for (const WaveSize& s : sizes)
    if (std::find(seen.begin(), seen.end(), s) == seen.end()) seen.push_back(s);
  return seen.size();
}

pricing::Plan calibrated_plan(const Calibration& c, bool cold, int64_t group_tokens, size_t groups, bool first_wave) {
  pricing::Plan plan;
  plan.safety_factor = c.factor(group_tokens);
  plan.transient_bytes = as_bytes(first_execution_allowance(c, groups, first_wave));
  plan.profiled = !cold;
  return plan;
}

pricing::Forward calibrated_forward(const Calibration& c, const std::vector<WaveSize>& sizes,
                                    const std::vector<std::string>& slots, bool floor_only,
                                    std::vector<uint64_t>& live_at_start, Extrapolation* extrapolation) {
  const Reader r{c, extrapolation};
  const size_t layers = static_cast<size_t>(c.layers);
  pricing::Forward forward;
  const bool by_moments = priced_by_moments(c);
  if (!by_moments) {
    // One group's backward runs at a time: its recompute workspace, the
    // gradient flowing between its layers and its output are sized by its
    // own tokens; the largest group's are charged.
    for (const WaveSize& size : sizes) {
      forward.workspace_bytes = std::max(forward.workspace_bytes, as_bytes(r.at("workspace", c.workspace, size)));
      forward.input_gradient_bytes =
          std::max(forward.input_gradient_bytes, as_bytes(r.at("input_gradient", c.input_gradient, size)));
      forward.output_bytes = std::max(forward.output_bytes, as_bytes(r.at("output", c.output, size)));
    }
    const auto largest = std::max_element(sizes.begin(), sizes.end(),
                                          [](const WaveSize& a, const WaveSize& b) { return a.tokens < b.tokens; });
    if (largest != sizes.end())
      forward.workspace_after_gradient_bytes = workspace_after_gradient(r, *largest, forward.workspace_bytes);
  }
  const std::vector<uint64_t> none(layers, 0);
  forward.groups.reserve(sizes.size());
  if (sizes.size() > 1 && !c.waiting && extrapolation) extrapolation->waiting_assumed = true;
  // Groups of one size (the common case: equal parts) read their terms once.
  const WaveSize* read_at = nullptr;
  pricing::Group base;
  MomentValues values;
  uint64_t waiting = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    const WaveSize& size = sizes[g];
    if (!read_at || !(*read_at == size)) {
      base = boundaries_at(r, size);
      if (by_moments) values = moment_values(r, size);
      // Read (and noted as read) only where another group waits.
      if (sizes.size() > 1) waiting = waiting_at(r, size);
      read_at = &size;
    }
    pricing::Group group = base;
    if (g < slots.size()) group.slot = slots[g];
    // What a group holds until its backward begins (waiting_at); the worst
    // order charges it while the others run (pricing.h,
    // Group::waiting_bytes). A wave of one group has no other group to
    // charge it beside.
    if (sizes.size() > 1) group.waiting_bytes = as_bytes(waiting);
    // Floor-only prices ignore gradients, pending or not.
    const std::vector<uint64_t> gradient = group.slot && !floor_only ? c.slot_gradients(*group.slot) : none;
    for (size_t i = 0; i < layers && i < gradient.size(); ++i) {
      const uint64_t already = std::min(gradient[i], live_at_start[i]);
      live_at_start[i] -= already;
      group.pending_gradient_bytes[i] = as_bytes(gradient[i] - already);
    }
    if (by_moments) group.moments = moments_at(values, 0, 0, gradient, group.pending_gradient_bytes);
    // A packed group, or any group of a packed calibration: the fits take
    // per-sequence fixed costs into their other coefficients, exactly only at
    // the calibrated packings; at another (one sequence is a packing of one),
    // even inside the calibrated ranges, they can be off by a few bytes a
    // sequence. Each of the group's sequences is charged its granule
    // (Calibration::sequence_allowance_bytes); an unseen packing is noted.
    if ((size.sequences > 1 || c.workspace.largest.sequences > 1) && c.sequence_allowance_bytes > 0) {
      forward.output_bytes += as_bytes(static_cast<uint64_t>(std::ceil(size.sequences)) * c.sequence_allowance_bytes);
      if (extrapolation && unseen_packing(c.workspace, size))
        extrapolation->note("sequences", c.workspace, size, c.workspace.outside_mask(size));
    }
    forward.groups.push_back(std::move(group));
  }
  // A group that ran keeps its loss and a scalar or two beside its gradients
  // (11 to 12 bytes a wave on the held-out models), in any order: each group
  // but the running one is charged an allocation granule. (Charged only in a
  // known order, a worst-order price that set the known order's cap fell 7
  // bytes under a held-out wave of three groups.)
  if (sizes.size() > 1) forward.output_bytes += as_bytes((sizes.size() - 1) * c.sequence_allowance_bytes);
  return forward;
}

// A split wave whose children each train the same slots in one group: one
// backward of their summed loss runs the children's backwards one after the
// other, the last-forwarded child first (autograd's ready queue prefers the
// most recently created nodes). The first child to run makes the slot's
// gradients and autograd holds them in the parameters' input buffers; the
// children that run later only add to those buffers. So the wave prices as one
// forward whose gradient groups are its children, the whole slot gradient
// pending on the last child (pending even when .grad exists: the buffers are
// new tensors until the last contribution arrives), none on the others:
//  - children not run yet (those forwarded before the running one) hold their
//    boundaries and their head state (head_saved); the running child holds its
//    output and its input gradient;
//  - a child that runs later holds, in the layer it recomputes, its workspace
//    plus its own contribution to that layer's gradient before it is added to
//    the buffer (at most the slot's largest layer gradient);
//  - one child's backward runs at a time: workspace and input gradient are the
//    largest child's, not their sum.
// The design priced splits by summing every child's output and input gradient
// and charging the slot set at its smallest child (the largest excess), which
// over-estimated split waves by 10-12% and missed the head state of children
// not run yet (docs/accuracy.md).
pricing::Forward calibrated_split(const Calibration& c, const std::vector<WaveSize>& children,
                                  const std::vector<std::string>& slots, bool floor_only,
                                  Extrapolation* extrapolation) {
  const Reader r{c, extrapolation};
  const size_t layers = static_cast<size_t>(c.layers);
  std::vector<uint64_t> slot_gradient(layers, 0);
  if (!slots.empty() && !floor_only) {
    const std::vector<uint64_t> seen = c.slot_gradients(slots.front());
    for (size_t i = 0; i < layers && i < seen.size(); ++i) slot_gradient[i] = seen[i];
  }
  const uint64_t largest_layer_gradient =
      slot_gradient.empty() ? 0 : *std::max_element(slot_gradient.begin(), slot_gradient.end());

  const bool by_moments = priced_by_moments(c);
  pricing::Forward forward;
  const size_t last = children.size() - 1;
  uint64_t head_saved_before = 0;  // held by the children forwarded before child k: they run after it
  uint64_t workspace = 0, input_gradient = 0, output = 0;
  for (size_t k = 0; k < children.size(); ++k) {
    const WaveSize size = children[k];
    const uint64_t contribution = k == last ? 0 : largest_layer_gradient;
    pricing::Group group = boundaries_at(r, size);
    if (k == last && !slots.empty()) {
      group.slot = slots.front();
      for (size_t i = 0; i < layers; ++i) group.pending_gradient_bytes[i] = as_bytes(slot_gradient[i]);
    }
    if (by_moments) {
      // Children that run later add to autograd's buffers: their share of a
      // layer's gradient is `contribution`, not a new gradient.
      group.moments =
          moments_at(moment_values(r, size), head_saved_before, contribution,
                     k == last ? slot_gradient : std::vector<uint64_t>(layers, 0), group.pending_gradient_bytes);
    } else {
      workspace = std::max(workspace, r.at("workspace", c.workspace, size) + contribution);
      input_gradient = std::max(input_gradient, r.at("input_gradient", c.input_gradient, size));
      output = std::max(output, r.at("output", c.output, size) + head_saved_before);
    }
    head_saved_before += r.at("head_saved", c.head_saved, size);
    forward.groups.push_back(std::move(group));
  }
  if (by_moments) return forward;
  forward.workspace_bytes = as_bytes(workspace);
  // Only the child that runs first makes new gradients: its overlap credit.
  forward.workspace_after_gradient_bytes = workspace_after_gradient(r, children.back(), forward.workspace_bytes);
  forward.input_gradient_bytes = as_bytes(input_gradient);
  forward.output_bytes = as_bytes(output);
  return forward;
}

void check_packing(int64_t tokens, int64_t max_sequence_length, const char* what) {
  if (max_sequence_length <= 0) return;
  const int64_t sequences = tokens / max_sequence_length + (tokens % max_sequence_length ? 1 : 0);
  if (sequences > static_cast<int64_t>(kMaxSequences))
    throw PredictError("max_sequence_length",
                       fmt::format("{} {} in sequences of at most {} are {} sequences; a wave is priced with at most "
                                   "{}: raise the longest sequence or lower the {}",
                                   tokens, what, max_sequence_length, sequences, kMaxSequences, what));
}

std::vector<int64_t> packed_sequences(int64_t tokens, int64_t max_sequence_length) {
  if (max_sequence_length <= 0 || tokens <= max_sequence_length) return {tokens};
  check_packing(tokens, max_sequence_length, "tokens");
  std::vector<int64_t> out(static_cast<size_t>(tokens / max_sequence_length), max_sequence_length);
  if (tokens % max_sequence_length) out.push_back(tokens % max_sequence_length);
  return out;
}

namespace {

void check_lengths(const std::string& field, const std::vector<int64_t>& lengths, int64_t tokens) {
  if (lengths.empty()) return;
  if (lengths.size() > kMaxSequences)
    throw PredictError(field,
                       fmt::format("{} sequences; a wave is priced with at most {}", lengths.size(), kMaxSequences));
  int64_t sum = 0;
  for (int64_t l : lengths) {
    if (l <= 0) throw PredictError(field, "every sequence length must be a positive number of tokens");
    // Each at most 2^40, so the sum cannot wrap before it is caught.
    if (l > pricing::kMaxAdmissionTokens || sum > pricing::kMaxAdmissionTokens)
      throw PredictError(field, "the lengths add up to more than 2^40 tokens");
    sum += l;
  }
  if (sum != tokens) throw PredictError(field, fmt::format("the lengths add up to {} tokens, not {}", sum, tokens));
}

void check_slots(const Calibration& c, const std::vector<std::string>& slots, const char* field) {
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!c.adapter_gradient_bytes.count(slots[i])) {
      std::string known;
      for (const auto& [name, bytes] : c.adapter_gradient_bytes) known += (known.empty() ? "" : ", ") + name;
      throw PredictError(fmt::format(fmt::runtime(field), i),
                         fmt::format("\"{}\" was never calibrated (calibrated: {})", slots[i], known));
    }
    if (std::find(slots.begin(), slots.begin() + static_cast<std::ptrdiff_t>(i), slots[i]) !=
        slots.begin() + static_cast<std::ptrdiff_t>(i))
      throw PredictError(fmt::format(fmt::runtime(field), i), fmt::format("\"{}\" is given twice", slots[i]));
  }
}

std::string only_slot(const Calibration& c, const char* field) {
  if (c.adapter_gradient_bytes.size() != 1)
    throw PredictError(field, fmt::format("required: the calibration knows {} slots", c.adapter_gradient_bytes.size()));
  return c.adapter_gradient_bytes.begin()->first;
}

// Each group's size and slot, from the request's groups or its equal parts.
std::pair<std::vector<WaveSize>, std::vector<std::string>> groups_of(const Calibration& c, const WaveRequest& r) {
  std::vector<WaveSize> sizes;
  std::vector<std::string> slots;
  if (r.groups.empty()) {
    if (r.tokens <= 0) throw PredictError("tokens", "must be a positive number of tokens");
    if (r.tokens > pricing::kMaxAdmissionTokens) throw PredictError("tokens", "must be at most 2^40");
    check_lengths("sequences", r.sequence_lengths, r.tokens);
    slots = r.slots;
    if (slots.empty()) slots.push_back(only_slot(c, "slots"));
    check_slots(c, slots, "slots[{}]");
    if (r.tokens < static_cast<int64_t>(slots.size()))
      throw PredictError("tokens",
                         fmt::format("{} tokens cannot give each of {} slots a token", r.tokens, slots.size()));
    return {even_groups(packed(r.tokens, r.sequence_lengths), static_cast<int64_t>(slots.size())), slots};
  }
  if (!r.sequence_lengths.empty() || !r.slots.empty())
    throw PredictError("groups", "give each group's sequences and slot in its group, not beside the groups");
  int64_t sum = 0;
  for (size_t g = 0; g < r.groups.size(); ++g) {
    const GroupRequest& group = r.groups[g];
    const std::string field = fmt::format("groups[{}]", g);
    if (group.tokens <= 0) throw PredictError(field + ".tokens", "must be a positive number of tokens");
    if (group.tokens > pricing::kMaxAdmissionTokens) throw PredictError(field + ".tokens", "must be at most 2^40");
    check_lengths(field + ".sequences", group.sequence_lengths, group.tokens);
    sum += group.tokens;
    sizes.push_back(packed(group.tokens, group.sequence_lengths));
    if (!group.slot.empty()) {
      slots.push_back(group.slot);
    } else if (r.groups.size() == 1) {
      slots.push_back(only_slot(c, "groups[0].slot"));
    } else {
      throw PredictError(field + ".slot", "required: every group of several trains a slot of its own");
    }
  }
  if (r.tokens != 0 && r.tokens != sum)
    throw PredictError("tokens", fmt::format("{} tokens, but the groups add up to {}", r.tokens, sum));
  if (sum > pricing::kMaxAdmissionTokens) throw PredictError("tokens", "must be at most 2^40");
  check_slots(c, slots, "groups[{}].slot");
  return {sizes, slots};
}

// The groups' backward order: every group's index once (empty: any order).
std::vector<int32_t> checked_order(const std::vector<int32_t>& order, size_t groups) {
  if (order.empty()) return order;
  if (order.size() != groups)
    throw PredictError("backward_order",
                       fmt::format("has {} entries for {} groups: every group's index once", order.size(), groups));
  std::vector<bool> seen(groups, false);
  for (size_t i = 0; i < order.size(); ++i) {
    const std::string field = fmt::format("backward_order[{}]", i);
    if (order[i] < 0 || static_cast<size_t>(order[i]) >= groups)
      throw PredictError(field, fmt::format("{} is not a group's index (0 to {})", order[i], groups - 1));
    if (seen[static_cast<size_t>(order[i])]) throw PredictError(field, fmt::format("group {} comes twice", order[i]));
    seen[static_cast<size_t>(order[i])] = true;
  }
  return order;
}

}  // namespace

std::optional<pricing::Price> set_backward_order(const Calibration& c, pricing::Plan& plan,
                                                 const std::vector<int32_t>& order) {
  const std::vector<int32_t> checked = checked_order(order, plan.forwards.back().groups.size());
  const size_t groups = checked.size();
  if (groups < 2) return std::nullopt;
  pricing::Plan known = plan;
  pricing::Forward& forward = known.forwards.back();
  forward.backward_order = checked;
  forward.runs_free_boundaries = c.runs_free_boundaries;
  // The worst order, as priced without the order, bounds every order.
  pricing::Price known_price = pricing::price(known);
  pricing::Price worst_price = pricing::price(plan);
  if (known_price.raw_bytes >= worst_price.raw_bytes) return worst_price;
  plan = std::move(known);
  return known_price;
}

Prediction predict(const Calibration& c, const WaveRequest& request) {
  const auto [sizes, slots] = groups_of(c, request);
  Prediction p;
  for (const WaveSize& size : sizes) p.group_tokens = std::max(p.group_tokens, size.tokens);
  p.plan = calibrated_plan(c, request.cold, p.group_tokens, group_shapes(sizes), !request.after_first_wave);
  std::vector<uint64_t> live_at_start(static_cast<size_t>(c.layers), 0);
  if (request.gradients_exist) live_at_start.assign(live_at_start.size(), UINT64_MAX);
  p.plan.forwards.push_back(calibrated_forward(c, sizes, slots, false, live_at_start, &p.extrapolation));
  std::optional<pricing::Price> priced = set_backward_order(c, p.plan, request.backward_order);
  p.price = priced ? std::move(*priced) : pricing::price(p.plan);
  return p;
}

std::vector<int64_t> rank_tokens(int64_t tokens, const std::vector<double>& shares) {
  double most = 0;
  for (double s : shares) {
    if (!(s > 0) || !std::isfinite(s)) throw PredictError("rank shares", "every share must be a positive number");
    most = std::max(most, s);
  }
  // Relative to the largest share, so that large shares cannot add up to
  // infinity.
  double total = 0;
  for (double s : shares) total += s / most;
  std::vector<int64_t> parts;
  int64_t given = 0;
  for (size_t r = 0; r < shares.size(); ++r) {
    const int64_t part = r + 1 == shares.size()
                             ? tokens - given
                             : std::llround(static_cast<double>(tokens) * (shares[r] / most) / total);
    parts.push_back(std::max<int64_t>(part, 0));
    given += parts.back();
  }
  return parts;
}

RunPrediction predict_ranks(const Calibration& c, const WaveRequest& request, const std::vector<double>& shares,
                            int64_t max_sequence_length) {
  RunPrediction run;
  const std::vector<int64_t> parts = rank_tokens(request.tokens, shares);
  for (size_t r = 0; r < parts.size(); ++r) {
    WaveRequest part = request;
    part.tokens = parts[r];
    part.sequence_lengths =
        max_sequence_length > 0 ? packed_sequences(parts[r], max_sequence_length) : std::vector<int64_t>{};
    if (part.tokens <= 0) throw PredictError("rank shares", fmt::format("rank {} gets no token of the wave", r));
    run.ranks.push_back({static_cast<int32_t>(r), part.tokens, predict(c, part)});
    if (run.ranks.back().prediction.price.required_bytes > run.ranks[run.busiest].prediction.price.required_bytes)
      run.busiest = r;
  }
  return run;
}

pricing::Admission admit_run_wave(const Calibration& c, const WaveRequest& shape, const std::vector<double>& shares,
                                  int64_t max_sequence_length, int64_t max_tokens, pricing::Bytes budget_bytes) {
  check_packing(max_tokens, max_sequence_length, "max_tokens");
  WaveRequest request = shape;
  // The price does not shrink as a wave grows, so the busiest rank is the one
  // with the largest part; its part grows with the wave.
  auto plan_at = [&](int64_t tokens) {
    const std::vector<int64_t> parts = rank_tokens(tokens, shares);
    request.tokens = std::max<int64_t>(*std::max_element(parts.begin(), parts.end()), 1);
    request.sequence_lengths =
        max_sequence_length > 0 ? packed_sequences(request.tokens, max_sequence_length) : std::vector<int64_t>{};
    return predict(c, request).plan;
  };
  return pricing::admit_by_search(plan_at, max_tokens, budget_bytes);
}

WaveRequest wave_at(const WaveRequest& shape, int64_t tokens, int64_t max_sequence_length) {
  WaveRequest at = shape;
  if (shape.groups.empty()) {
    // Every slot runs at least one token: narrower waves are priced as that.
    at.tokens = std::max<int64_t>(tokens, std::max<int64_t>(1, static_cast<int64_t>(shape.slots.size())));
    tokens = at.tokens;
    at.sequence_lengths =
        max_sequence_length > 0 ? packed_sequences(tokens, max_sequence_length) : std::vector<int64_t>{};
    return at;
  }
  std::vector<double> shares;
  for (const GroupRequest& g : shape.groups) shares.push_back(static_cast<double>(g.tokens));
  const std::vector<int64_t> parts = rank_tokens(tokens, shares);
  at.tokens = 0;
  for (size_t g = 0; g < parts.size(); ++g) {
    // A group too small to get a token of a narrow wave still runs: one token.
    at.groups[g].tokens = std::max<int64_t>(1, parts[g]);
    at.groups[g].sequence_lengths = max_sequence_length > 0 && at.groups[g].tokens > max_sequence_length
                                        ? packed_sequences(at.groups[g].tokens, max_sequence_length)
                                        : std::vector<int64_t>{};
  }
  return at;
}

pricing::Admission admit_wave(const Calibration& c, const WaveRequest& shape, int64_t max_sequence_length,
                              int64_t max_tokens, pricing::Bytes budget_bytes) {
  for (const GroupRequest& g : shape.groups)
    if (g.tokens <= 0) throw PredictError("groups", "every group's share must be a positive number");
  check_packing(max_tokens, max_sequence_length, "max_tokens");
  auto plan_at = [&](int64_t tokens) { return predict(c, wave_at(shape, tokens, max_sequence_length)).plan; };
  return pricing::admit_by_search(plan_at, max_tokens, budget_bytes);
}

}  // namespace psc
