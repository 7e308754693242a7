// The pricing model (docs/design.md, "The pricing model"): what one wave (micro-batch)
// needs on top of the baseline, split into liveness terms.
//
// Everything here works on validated plans (pricing/plan.h builds them from JSON
// and refuses what would overflow): sizes are non-negative and their total stays
// below kMaxTotalBytes, so every sum and difference below fits in an int64.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace psc::pricing {

using Bytes = std::int64_t;

// Upper bound on the sum of every size in one plan (64 PiB). With the safety factor
// capped at kMaxSafetyFactor, required_bytes stays below 2^62.
constexpr Bytes kMaxTotalBytes = Bytes{1} << 56;
constexpr double kMaxSafetyFactor = 64.0;

// What else is live, beside boundaries and adapter gradients, at each moment of
// one group's backward (the worst-moment extension, docs/pricing.md): the
// head's backward, and each layer's recompute and backward before and after
// that layer's own gradients exist (workspace, the gradient flowing between
// layers, what the head and loss still hold). The design's sum of maxima is
// the special case where every entry is output + workspace + input_gradient.
struct Moments {
  Bytes head_bytes = 0;                      // while the head's forward or backward runs
  std::vector<Bytes> before_gradient_bytes;  // [0..L-1]: layer i, before its gradients are made
  std::vector<Bytes> after_gradient_bytes;   // [0..L-1]: layer i, once they are
  // While the group's forward runs (<= head_bytes); absent: head_bytes.
  std::optional<Bytes> forward_bytes;
};

// One gradient group: the part of a forward that trains one slot (adapter).
// Arrays are indexed by decoder layer; all groups of a plan have the same length L.
struct Group {
  std::optional<std::string> slot;            // nullopt: the group trains nothing
  std::vector<Bytes> boundary_bytes;          // b[0..L-1]: input saved for layer i
  std::vector<Bytes> pending_gradient_bytes;  // p[0..L-1]: gradients allocated by backward of layer i
  Bytes outside_gradient_bytes = 0;           // p[L]: outside the decoder, live through the backward
  // With moments the group's excess is priced at its worst moment, and the
  // forward's overlap credit does not apply to it (the moments carry it).
  // Only in a plan of one forward (plan.h refuses them in split children).
  std::optional<Moments> moments;
  // Held by the group, beside its boundaries, until its backward begins (what
  // its head keeps for the backward: logits, the loss's saved tensors), and
  // released then. While another group runs, this group holds either this
  // (not run yet) or its gradients without its boundaries (run already): the
  // price takes the worse of the two for every other group (worst order). Its
  // own moments (or the forward's output term) carry its head state while it
  // runs, so a group is never charged its own waiting bytes.
  Bytes waiting_bytes = 0;
};

// One forward pass: a whole wave, or one child of a split wave.
struct Forward {
  Bytes output_bytes = 0;
  Bytes workspace_bytes = 0;
  Bytes input_gradient_bytes = 0;
  // What is left of the recomputed layer's workspace once that layer's own
  // adapter gradients are made (<= workspace_bytes). The workspace peaks before
  // the layer's gradients exist, so a layer's pending gradient overlaps the
  // full workspace only in part. nullopt: the same as workspace_bytes (no overlap
  // credit, the design's model as written).
  std::optional<Bytes> workspace_after_gradient_bytes;
  std::vector<Group> groups;  // in forward order
  // The order the groups' backwards run, as indices into `groups`, when the
  // trainer fixes it (a permutation of them); empty: any order, and the price
  // is the worst one's. A known order never prices above the worst.
  std::vector<int32_t> backward_order;
  // With a backward order: a group whose backward has run holds none of its
  // boundaries (the oracle's semantics). Without it a run that left less than
  // its boundaries is not counted on to have freed them (a trainer may keep a
  // boundary alive past its group's backward); a calibration sets it where
  // every run of its waves of several groups freed only its own group's.
  bool runs_free_boundaries = false;
};

struct Plan {
  double safety_factor = 1.0;
  Bytes transient_bytes = 0;  // first-execution allowance
  bool profiled = false;      // the wave's shape has been profiled: no transient
  // One entry for an ordinary wave; a split wave has one per child. An ordinary
  // wave prices exactly as a split with one child.
  std::vector<Forward> forwards;
};

// Which moment of a group's backward holds its worst excess; kForward: the
// group's forward, in a known order (adapter_term).
enum class Moment : std::uint8_t { kNone, kHead, kBeforeGradient, kAfterGradient, kForward };
const char* moment_name(Moment moment);

// One group's excess over the floor (the floor holds every boundary of every group).
struct GroupExcess {
  Bytes extra = 0;          // worst excess while this group runs its backward (>= 0)
  Bytes net = 0;            // excess it leaves behind: all gradients, none of its boundaries
  Bytes pending_total = 0;  // sum of p[0..L]; non-zero means the group's slot trains
  int peak_layer = -1;      // layer whose recompute holds `extra`; -1 when L == 0 or at the head
  // With moments: `extra` includes the moment's bytes; `design_extra` is the
  // design's excess of the same group without them (what adapter_gradient
  // reports; the difference is the moment component). Without: equal.
  Bytes design_extra = 0;
  Moment moment = Moment::kNone;
  Bytes moment_bytes = 0;  // the moment's own bytes at the peak
  // Excess while this group's forward ran, before any backward: with moments,
  // its forward's bytes beside all its boundaries and no gradient (<= extra);
  // without, 0 (the forward's own terms charge its forward).
  Bytes forward_extra = 0;
};

// One pass over the layers, from the top (backward order). On ties the peak layer
// is the first reached, i.e. the highest.
//
// `overlap` = workspace_bytes - workspace_after_gradient_bytes of the group's
// forward (0 without the field). While layer i recomputes, the group holds
// either its gradients above i with the full workspace, or its gradients from
// i up with what is left of the workspace; relative to the full workspace (the
// workspace term charges it in full) the layer's term is
// excess(i) - min(p[i], overlap). Without a credit extra >= net always; with
// one, `floor_at_net` keeps the group's last state (every gradient, no
// boundary) as a floor of extra (splits: another child may begin its backward
// in that state). Without it extra may fall below net: that state holds no
// workspace, and a price charges the workspace in full beside the adapter term.
GroupExcess group_excess(const Group& group, Bytes overlap = 0, bool floor_at_net = false);

// The adapter term of one forward: worst backward order of its groups, closed form.
//
//   adapter = max_g [extra_g + sum_{h != g} m_h],  m_h = max(0, net_h, waiting_h)
//
// While g runs, every other group h has run (it holds net_h over the floor)
// or not (it holds waiting_h), and any set of them can have run before g: the
// worst order picks the larger for each h independently (docs/pricing.md,
// "Several gradient groups").
struct AdapterTerm {
  Bytes bytes = 0;         // with the groups' moments and waiting bytes
  Bytes design_bytes = 0;  // the design's adapter term (no moments, no waiting); bytes - design_bytes >= 0
  // With moments, without waiting bytes: the moment component is this less
  // design_bytes, the waiting component bytes less this.
  Bytes no_waiting_bytes = 0;
  int peak_group = -1;  // index into the forward's groups; -1 when there are none
  int peak_layer = -1;
  Moment moment = Moment::kNone;
  Bytes moment_bytes = 0;
};
//
// With a known backward order, h holds net_h when it ran before g, waiting_h
// when it runs after: adapter = max_g [extra_g + sum_{h before g} max(0, net_h)
// + sum_{h after g} waiting_h], never above the worst order's. A run that left
// less than its boundaries (net_h < 0) is not counted on to have freed them:
// a trainer's group may keep a boundary alive past its backward; with
// `runs_free_boundaries` (Forward::runs_free_boundaries) it is, net_h as it is.
// Every group's forward runs before any backward, in the groups' order: while
// g's forward runs, the groups before it wait, none has run, and those after
// it hold none of their boundaries yet, so each g is also charged
// forward_extra_g + sum_{h < g} waiting_h - sum_{h > g} b_h (GroupExcess). A known
// order that runs some of g's forwarded predecessors before g can fall below
// it; the worst order never does (forward_extra_g <= extra_g).
AdapterTerm adapter_term(const std::vector<Group>& groups, Bytes overlap = 0,
                         const std::vector<int32_t>& backward_order = {}, bool runs_free_boundaries = false);

struct Components {
  Bytes output = 0;
  Bytes retained = 0;
  Bytes workspace = 0;
  Bytes input_gradient = 0;
  Bytes adapter_gradient = 0;
  std::vector<std::string> adapter_gradient_slots;  // sorted, unique
  // What the worst moment adds over the design's adapter term: groups with
  // moments only (0 otherwise).
  Bytes moment = 0;
  // What the other groups' waiting bytes add to the worst order (0 without
  // waiting bytes).
  Bytes waiting = 0;
  Bytes transient = 0;
};

// Where the adapter term peaks. For a split: the child holding the largest
// single charge (see price()).
struct PeakLocation {
  int forward = -1;
  int group = -1;
  int layer = -1;
  Moment moment = Moment::kNone;  // kNone: the peak group has no moments
  Bytes moment_bytes = 0;         // the bytes that moment holds beside boundaries and gradients
};

struct Price {
  Bytes raw_bytes = 0;       // the unscaled sum: compare this with a measured peak
  Bytes required_bytes = 0;  // floor(raw_bytes x safety_factor)
  Components components;
  PeakLocation peak;
  // The peak group's slot; nullopt when there is no group or its slot is null.
  std::optional<std::string> peak_group;
};

Price price(const Plan& plan);

// floor(raw x factor), exact: the factor is taken as the binary double it is, so
// 10 x 1.1 gives 11 and no rounding of the product can push a value up by one.
// Needs raw >= 0 and 1 <= factor <= kMaxSafetyFactor.
Bytes apply_safety(Bytes raw, double safety_factor);

// Sorted slots whose pending gradients are non-zero, in one forward.
std::vector<std::string> adapter_gradient_slots(const Forward& forward);

}  // namespace psc::pricing
