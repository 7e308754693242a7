#include "estimator/check.h"

#include <algorithm>

namespace psc {
namespace {

using pricing::Bytes;

Bytes as_bytes(uint64_t v) { return static_cast<Bytes>(std::min<uint64_t>(v, uint64_t{1} << 50)); }

double error_of(Bytes priced, uint64_t measured) {
  if (measured == 0) return 0;
  return static_cast<double>(priced) / static_cast<double>(measured) - 1.0;
}

}  // namespace

namespace {

// What the calibration says is left of the workspace once a layer's own
// gradients are made, capped at the workspace priced; nullopt without it.
std::optional<Bytes> workspace_after_gradient(const Calibration& c, int64_t tokens, Bytes workspace) {
  if (!c.workspace_after_gradient) return std::nullopt;
  return std::min(workspace, as_bytes(c.workspace_after_gradient->bytes_at(tokens)));
}

// One forward of `tokens` tokens in `groups` groups training `slots` in order.
// `live_at_start` (per layer) is what the trace shows of adapter gradients
// live when the wave began; groups consume it in forward order.
pricing::Forward forward_for(const Calibration& c, int64_t tokens, int64_t groups,
                             const std::vector<std::string>& slots, bool floor_only,
                             std::vector<uint64_t>& live_at_start) {
  const size_t layers = static_cast<size_t>(c.layers);
  groups = std::max<int64_t>(1, groups);
  const int64_t per_group = tokens / groups;
  pricing::Forward forward;
  // One group's backward runs at a time: its recompute workspace and the
  // gradient flowing between its layers are sized by its own tokens. The
  // running group's output, and the head state every group whose backward
  // has not run yet still holds (all but one, in the worst order).
  forward.workspace_bytes = as_bytes(c.workspace.bytes_at(per_group));
  forward.workspace_after_gradient_bytes = workspace_after_gradient(c, per_group, forward.workspace_bytes);
  forward.input_gradient_bytes = as_bytes(c.input_gradient.bytes_at(per_group));
  forward.output_bytes =
      as_bytes(c.output.bytes_at(per_group) + static_cast<uint64_t>(groups - 1) * c.head_saved.bytes_at(per_group));
  for (int64_t g = 0; g < groups; ++g) {
    pricing::Group group;
    if (static_cast<size_t>(g) < slots.size()) group.slot = slots[static_cast<size_t>(g)];
    group.boundary_bytes.resize(layers);
    group.pending_gradient_bytes.assign(layers, 0);
    for (size_t i = 0; i < layers; ++i) group.boundary_bytes[i] = as_bytes(c.boundary[i].bytes_at(per_group));
    if (group.slot && !floor_only) {
      const std::vector<uint64_t> slot = c.slot_gradients(*group.slot);
      for (size_t i = 0; i < layers && i < slot.size(); ++i) {
        const uint64_t already = std::min(slot[i], live_at_start[i]);
        live_at_start[i] -= already;
        group.pending_gradient_bytes[i] = as_bytes(slot[i] - already);
      }
    }
    forward.groups.push_back(std::move(group));
  }
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
bool one_backward_of_one_slot_set(const WaveLiveness& w) {
  if (w.children.size() < 2) return false;
  for (const WaveLiveness::Child& child : w.children) {
    if (child.groups != 1 || child.slots.size() > 1 || child.slots != w.children.front().slots) return false;
  }
  return true;
}

pricing::Forward split_as_groups(const Calibration& c, const WaveLiveness& w, bool floor_only) {
  const size_t layers = static_cast<size_t>(c.layers);
  const std::vector<std::string>& slots = w.children.front().slots;
  std::vector<uint64_t> slot_gradient(layers, 0);
  if (!slots.empty() && !floor_only) {
    const std::vector<uint64_t> seen = c.slot_gradients(slots.front());
    for (size_t i = 0; i < layers && i < seen.size(); ++i) slot_gradient[i] = seen[i];
  }
  const uint64_t largest_layer_gradient =
      slot_gradient.empty() ? 0 : *std::max_element(slot_gradient.begin(), slot_gradient.end());

  pricing::Forward forward;
  const size_t last = w.children.size() - 1;
  uint64_t head_saved_before = 0;  // held by the children forwarded before child k: they run after it
  uint64_t workspace = 0, input_gradient = 0, output = 0;
  for (size_t k = 0; k < w.children.size(); ++k) {
    const int64_t tokens = w.children[k].tokens;
    workspace = std::max(workspace, c.workspace.bytes_at(tokens) + (k == last ? 0 : largest_layer_gradient));
    input_gradient = std::max(input_gradient, c.input_gradient.bytes_at(tokens));
    output = std::max(output, c.output.bytes_at(tokens) + head_saved_before);
    head_saved_before += c.head_saved.bytes_at(tokens);

    pricing::Group group;
    group.boundary_bytes.resize(layers);
    group.pending_gradient_bytes.assign(layers, 0);
    for (size_t i = 0; i < layers; ++i) group.boundary_bytes[i] = as_bytes(c.boundary[i].bytes_at(tokens));
    if (k == last && !slots.empty()) {
      group.slot = slots.front();
      for (size_t i = 0; i < layers; ++i) group.pending_gradient_bytes[i] = as_bytes(slot_gradient[i]);
    }
    forward.groups.push_back(std::move(group));
  }
  forward.workspace_bytes = as_bytes(workspace);
  // Only the child that runs first makes new gradients: its overlap credit.
  forward.workspace_after_gradient_bytes =
      workspace_after_gradient(c, w.children.back().tokens, forward.workspace_bytes);
  forward.input_gradient_bytes = as_bytes(input_gradient);
  forward.output_bytes = as_bytes(output);
  return forward;
}

}  // namespace

pricing::Plan plan_for_wave(const Calibration& c, const WaveLiveness& w, bool floor_only) {
  pricing::Plan plan;
  plan.safety_factor = c.safety_factor;
  plan.transient_bytes = as_bytes(c.first_execution_bytes);
  plan.profiled = !w.cold;
  std::vector<uint64_t> live_at_start = w.gradient_live_at_start_bytes;
  live_at_start.resize(static_cast<size_t>(c.layers), 0);
  if (w.children.empty()) {
    plan.forwards.push_back(forward_for(c, w.tokens, w.groups, w.slots, floor_only, live_at_start));
    return plan;
  }
  if (one_backward_of_one_slot_set(w)) {
    plan.forwards.push_back(split_as_groups(c, w, floor_only));
    return plan;
  }
  // Children training different slot sets (or several groups each): the
  // design's rule, one forward per child (every term summed except the
  // workspace, the adapter term charged once per slot set). Each child's
  // gradients are pending whether or not .grad exists: autograd buffers them
  // until the last child's contribution arrives.
  for (const WaveLiveness::Child& child : w.children) {
    std::vector<uint64_t> live(static_cast<size_t>(c.layers), 0);
    plan.forwards.push_back(forward_for(c, child.tokens, child.groups, child.slots, floor_only, live));
  }
  return plan;
}

std::vector<CheckRow> check_trace(const Calibration& c, const Liveness& trace) {
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
    row.price = pricing::price(plan);
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
        {"workspace", w.workspace_bytes, static_cast<double>(k.workspace)},
        {"input_gradient", w.input_gradient_bytes, static_cast<double>(k.input_gradient)},
        {"output", w.output_bytes, static_cast<double>(k.output)},
        {"pending_gradient", pending, static_cast<double>(pending_priced)},
    };
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace psc
