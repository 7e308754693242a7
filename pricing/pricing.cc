// The pricing model: one pass per group, closed form across groups, split
// children combined per slot set. Cost: O(total layers x groups), no allocation
// besides the slot lists that the result carries.
#include "pricing/pricing.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace psc::pricing {

const char* moment_name(Moment moment) {
  switch (moment) {
    case Moment::kHead: return "head";
    case Moment::kBeforeGradient: return "before_gradient";
    case Moment::kAfterGradient: return "after_gradient";
    case Moment::kForward: return "forward";
    case Moment::kNone: break;
  }
  return "none";
}

namespace {

// The design's excess of one group, with the forward's overlap credit.
GroupExcess design_excess(const Group& group, Bytes overlap, bool floor_at_net) {
  const Bytes* boundary = group.boundary_bytes.data();
  const Bytes* pending = group.pending_gradient_bytes.data();
  const Bytes outside = group.outside_gradient_bytes;

  // While layer i recomputes, the group holds p[L] + sum_{j>=i} p[j] and has
  // already freed sum_{j>i} b[j]. Walking down from the top, one running excess
  // carries both: excess(i) = excess(i+1) + p[i] - b[i+1], a single add on the
  // loop-carried chain. Before the first layer only p[L] is held; with L >= 1
  // the top layer's term is never smaller, so the peak is a real layer then.
  const size_t layers = group.boundary_bytes.size();
  GroupExcess result;
  result.extra = outside;
  if (layers == 0) {
    result.net = outside;
    result.pending_total = outside;
    return result;
  }
  // The overlap credit of layer i: the part of its own gradient that is made
  // only after its workspace has shrunk by `overlap`.
  const bool credit = overlap > 0;
  auto credit_at = [&](size_t layer) { return credit ? std::min(pending[layer], overlap) : Bytes{0}; };
  Bytes excess = outside + pending[layers - 1];
  Bytes pending_total = excess;
  result.extra = excess - credit_at(layers - 1);  // >= p[L]: the credit is at most p[L-1]
  result.peak_layer = static_cast<int>(layers - 1);
  for (size_t layer = layers - 1; layer-- > 0;) {
    excess += pending[layer] - boundary[layer + 1];
    pending_total += pending[layer];
    const Bytes term = excess - credit_at(layer);
    if (term > result.extra) {
      result.extra = term;
      result.peak_layer = static_cast<int>(layer);
    }
  }
  excess -= boundary[0];
  result.net = excess;
  // Layer 0 ends with every gradient made and boundary 0 freed: the group's
  // last state. Without a credit the layer-0 term is never below it. With one
  // it may be; that state holds no workspace of this group, but in a split
  // another child may start its backward (with its workspace) right then.
  if (floor_at_net && excess > result.extra) {
    result.extra = excess;
    result.peak_layer = 0;
  }
  result.pending_total = pending_total;
  return result;
}

// The worst moment of one group's backward: the head's backward (only p[L]
// made), then per layer from the top the moment before its own gradients
// (state(i) = p[L] + sum_{j>i} p[j] - sum_{j>i} b[j]) and the moment after
// them (state(i) + p[i]), each with what that moment holds beside boundaries
// and gradients. After layer 0 the group holds state(0) + p[0] - b[0] and
// nothing else, below layer 0's after-gradient moment: no floor is needed.
void worst_moment(const Group& group, GroupExcess& result) {
  const Moments& moments = *group.moments;
  const Bytes* boundary = group.boundary_bytes.data();
  const Bytes* pending = group.pending_gradient_bytes.data();
  Bytes state = group.outside_gradient_bytes;
  result.extra = state + moments.head_bytes;
  result.moment = Moment::kHead;
  result.moment_bytes = moments.head_bytes;
  result.peak_layer = -1;
  auto consider = [&](Bytes excess, Moment moment, Bytes bytes, size_t layer) {
    if (excess <= result.extra) return;
    result.extra = excess;
    result.moment = moment;
    result.moment_bytes = bytes;
    result.peak_layer = static_cast<int>(layer);
  };
  result.forward_extra = moments.forward_bytes.value_or(moments.head_bytes);
  for (size_t layer = group.boundary_bytes.size(); layer-- > 0;) {
    const Bytes before = moments.before_gradient_bytes[layer];
    const Bytes after = moments.after_gradient_bytes[layer];
    consider(state + before, Moment::kBeforeGradient, before, layer);
    consider(state + pending[layer] + after, Moment::kAfterGradient, after, layer);
    state += pending[layer] - boundary[layer];
  }
}

}  // namespace

GroupExcess group_excess(const Group& group, Bytes overlap, bool floor_at_net) {
  if (!group.moments) {
    GroupExcess result = design_excess(group, overlap, floor_at_net);
    result.design_extra = result.extra;
    return result;
  }
  // The moments carry what the overlap credit approximated, and every moment
  // of the group is priced, its last state included: neither applies here.
  GroupExcess result = design_excess(group, 0, false);
  result.design_extra = result.extra;
  worst_moment(group, result);
  return result;
}

namespace {

struct ForwardTerms {
  AdapterTerm adapter;
  Bytes retained = 0;
  std::vector<std::string> slots;  // adapter_gradient_slots, sorted, unique
};

// adapter = max_g [extra_g + sum_{h != g} m_h]
//         = sum_h m_h + max_g [extra_g - m_g]
// so one pass suffices (pricing.h, AdapterTerm). Every candidate is
// non-negative: extra_g >= 0 and every m_h >= 0. The same closed form gives
// the design's term (no moments, no waiting) and the term without waiting.
ForwardTerms forward_terms(const std::vector<Group>& groups, Bytes overlap, bool floor_at_net,
                           const std::vector<int32_t>& order, bool runs_free_boundaries) {
  ForwardTerms terms;
  terms.slots.reserve(groups.size());
  std::vector<GroupExcess> excess;
  excess.reserve(groups.size());
  for (const Group& group : groups) excess.push_back(group_excess(group, overlap, floor_at_net));
  // position[g]: when g's backward runs; empty: any order (the worst).
  std::vector<size_t> position;
  if (order.size() == groups.size() && !groups.empty()) {
    position.assign(groups.size(), 0);
    for (size_t i = 0; i < order.size(); ++i) position[static_cast<size_t>(order[i])] = i;
  }
  Bytes positive_nets = 0, design_best = 0, plain_best = 0, sum = 0, best = 0;
  // A known order: what the others hold while g runs, with and without their
  // waiting bytes.
  auto held_by_others = [&](size_t g, bool waiting) {
    Bytes held = 0;
    for (size_t h = 0; h < groups.size(); ++h) {
      if (h == g) continue;
      if (position[h] < position[g])
        held += runs_free_boundaries ? excess[h].net : std::max<Bytes>(0, excess[h].net);  // pricing.h
      else if (waiting)
        held += groups[h].waiting_bytes;
    }
    return held;
  };
  // ... or, if more, while g's forward ran: the groups forwarded before it
  // wait, none has run, and those forwarded after it have made none of the
  // boundaries the floor charges them (pricing.h).
  // Both sums run with the loop below: terms.retained holds the boundaries
  // of groups up to g, forwarded_waiting the waiting bytes of those before g.
  Bytes forwarded_waiting = 0, all_boundaries = 0;
  for (const GroupExcess& e : excess) all_boundaries += e.pending_total - e.net;
  // The larger, and whether it is the forward's.
  auto known_order = [&](size_t g, bool waiting) {
    const GroupExcess& e = excess[g];
    const Bytes backward = e.extra + held_by_others(g, waiting);
    const Bytes not_forwarded = all_boundaries - terms.retained;
    const Bytes forward = e.forward_extra + (waiting ? forwarded_waiting : 0) - not_forwarded;
    return std::pair{std::max(backward, forward), forward > backward};
  };
  for (size_t g = 0; g < groups.size(); ++g) {
    const GroupExcess& e = excess[g];
    if (groups[g].slot && e.pending_total > 0) terms.slots.push_back(*groups[g].slot);
    terms.retained += e.pending_total - e.net;  // = sum of its boundaries
    const Bytes positive_net = std::max<Bytes>(0, e.net);
    const Bytes m = std::max(positive_net, groups[g].waiting_bytes);
    // Worst order: the others' sum is added once below, so each g's own part
    // is its extra less what it would hold itself. Known order: the whole.
    const auto [own, in_forward] = position.empty() ? std::pair{e.extra - m, false} : known_order(g, true);
    if (terms.adapter.peak_group < 0 || own > best) {
      best = own;
      terms.adapter.peak_group = static_cast<int>(g);
      // A forward's peak is named by the group alone: its layer is not measured.
      terms.adapter.peak_layer = in_forward ? -1 : e.peak_layer;
      terms.adapter.moment = in_forward ? Moment::kForward : e.moment;
      terms.adapter.moment_bytes = in_forward ? e.forward_extra : e.moment_bytes;
    }
    sum += m;
    const Bytes design_own =
        position.empty() ? e.design_extra - positive_net : e.design_extra + held_by_others(g, false);
    const Bytes plain_own = position.empty() ? e.extra - positive_net : known_order(g, false).first;
    design_best = g == 0 ? design_own : std::max(design_best, design_own);
    plain_best = g == 0 ? plain_own : std::max(plain_best, plain_own);
    positive_nets += positive_net;
    forwarded_waiting += groups[g].waiting_bytes;
  }
  const bool any = terms.adapter.peak_group >= 0;
  const Bytes others = position.empty() ? sum : 0;
  const Bytes others_net = position.empty() ? positive_nets : 0;
  terms.adapter.bytes = any ? best + others : 0;
  terms.adapter.design_bytes = any ? design_best + others_net : 0;
  terms.adapter.no_waiting_bytes = any ? plain_best + others_net : 0;
  // Slots are unique within a validated forward; sort for set comparison.
  std::sort(terms.slots.begin(), terms.slots.end());
  terms.slots.erase(std::unique(terms.slots.begin(), terms.slots.end()), terms.slots.end());
  return terms;
}

// Children whose adapter_gradient_slots are the same set share their gradient
// tensors: the set is charged once, at its largest child.
struct SlotSetCharge {
  std::vector<std::string> slots;
  Bytes charge = 0;
  Bytes design_charge = 0;      // the same child's adapter term without moments or waiting bytes
  Bytes no_waiting_charge = 0;  // ... with moments, without waiting bytes
  int forward = -1;             // the child that sets the charge
};

void add_sorted_unique(std::vector<std::string>& into, const std::vector<std::string>& more) {
  if (into.empty()) {
    into = more;
    return;
  }
  std::vector<std::string> merged;
  merged.reserve(into.size() + more.size());
  std::set_union(into.begin(), into.end(), more.begin(), more.end(), std::back_inserter(merged));
  into.swap(merged);
}

}  // namespace

AdapterTerm adapter_term(const std::vector<Group>& groups, Bytes overlap, const std::vector<int32_t>& backward_order,
                         bool runs_free_boundaries) {
  return forward_terms(groups, overlap, false, backward_order, runs_free_boundaries).adapter;
}

std::vector<std::string> adapter_gradient_slots(const Forward& forward) {
  return forward_terms(forward.groups, 0, false, forward.backward_order, forward.runs_free_boundaries).slots;
}

static Bytes overlap_of(const Forward& forward) {
  if (!forward.workspace_after_gradient_bytes) return 0;
  return std::max<Bytes>(0, forward.workspace_bytes - *forward.workspace_after_gradient_bytes);
}

Price price(const Plan& plan) {
  Price result;
  Components& c = result.components;
  bool has_gradient_group = false;
  std::vector<AdapterTerm> adapters;
  adapters.reserve(plan.forwards.size());
  std::vector<SlotSetCharge> sets;

  for (size_t f = 0; f < plan.forwards.size(); ++f) {
    const Forward& forward = plan.forwards[f];
    c.output += forward.output_bytes;
    c.input_gradient += forward.input_gradient_bytes;
    c.workspace = std::max(c.workspace, forward.workspace_bytes);
    has_gradient_group = has_gradient_group || !forward.groups.empty();

    // One forward: a group's last state (all its gradients, no boundary, no
    // workspace) is below the price, which charges the workspace in full
    // beside the adapter term. In a split, the next child's backward may begin
    // in that state with its own workspace: the state is a floor there.
    ForwardTerms terms = forward_terms(forward.groups, overlap_of(forward), plan.forwards.size() > 1,
                                       forward.backward_order, forward.runs_free_boundaries);
    c.retained += terms.retained;
    adapters.push_back(terms.adapter);
    if (forward.groups.empty()) continue;  // no backward: no adapter term, no peak

    auto same = std::find_if(sets.begin(), sets.end(), [&](const SlotSetCharge& s) { return s.slots == terms.slots; });
    if (same == sets.end()) {
      add_sorted_unique(c.adapter_gradient_slots, terms.slots);
      sets.push_back({std::move(terms.slots), terms.adapter.bytes, terms.adapter.design_bytes,
                      terms.adapter.no_waiting_bytes, static_cast<int>(f)});
    } else if (terms.adapter.bytes > same->charge) {
      same->charge = terms.adapter.bytes;
      same->design_charge = terms.adapter.design_bytes;
      same->no_waiting_charge = terms.adapter.no_waiting_bytes;
      same->forward = static_cast<int>(f);
    }
  }

  const SlotSetCharge* largest = nullptr;
  for (const SlotSetCharge& set : sets) {
    c.adapter_gradient += set.design_charge;
    c.moment += set.no_waiting_charge - set.design_charge;
    c.waiting += set.charge - set.no_waiting_charge;
    if (!largest || set.charge > largest->charge) largest = &set;
  }
  if (largest) {
    const AdapterTerm& at = adapters[largest->forward];
    result.peak = {largest->forward, at.peak_group, at.peak_layer, at.moment, at.moment_bytes};
    if (at.peak_group >= 0) result.peak_group = plan.forwards[largest->forward].groups[at.peak_group].slot;
  }

  // "Every group in a plan is one [gradient group]: it runs a backward."
  c.transient = has_gradient_group && !plan.profiled ? plan.transient_bytes : 0;
  result.raw_bytes =
      c.output + c.retained + c.workspace + c.input_gradient + c.adapter_gradient + c.moment + c.waiting + c.transient;
  result.required_bytes = apply_safety(result.raw_bytes, plan.safety_factor);
  return result;
}

Bytes apply_safety(Bytes raw, double safety_factor) {
  // safety_factor = mantissa x 2^(exponent - 53) with an integer 53-bit mantissa.
  // raw < 2^57 and mantissa < 2^53, so the product fits in 128 bits.
  int exponent = 0;
  const double fraction = std::frexp(safety_factor, &exponent);
  const auto mantissa = static_cast<std::int64_t>(std::ldexp(fraction, 53));
  const __int128 product = static_cast<__int128>(raw) * mantissa;
  const int shift = 53 - exponent;
  const __int128 scaled = shift >= 0 ? product >> shift : product << -shift;
  return static_cast<Bytes>(scaled);
}

}  // namespace psc::pricing
