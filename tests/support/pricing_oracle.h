// Brute-force oracle for the pricing model: simulates the backward layer by layer,
// tensor by tensor, in every order, and reports the worst live bytes over the floor.
// It shares no code with pricing/pricing.cc; it follows the stated semantics
// (docs/design.md, "The pricing model", what is live when), not the closed form:
//
//  - the floor holds every boundary of every group of every child;
//  - a group's backward first allocates the gradients of its slot's parameters
//    that live outside the decoder (or belong to no layer), then walks layers
//    L-1..0: at layer i it allocates the gradient of every parameter it touches
//    there for the first time, the state is observed, and boundary i is freed;
//  - with workspace_after (what is left of a forward's workspace once a
//    layer's own gradients are made; the workspace itself is charged at its
//    full size), the state at layer i is the worse of two moments: before
//    the layer's gradients are allocated (full workspace) and after them (the
//    workspace shrunk by workspace - workspace_after), each seen relative to
//    the full workspace; after a group's backward (every gradient, no
//    boundary) no workspace is held in a wave of one forward (relative: minus
//    the workspace), while in a split another child may begin its backward
//    then, so the state counts with a full workspace; layer 0's state covers
//    that moment too;
//  - a group with moments (what else is live at each moment of its backward)
//    is observed at the head's backward (after its outside gradients are
//    allocated) with the head's bytes, and at layer i before the layer's
//    gradients are allocated with before[i] and after them with after[i];
//    the forward's workspace_after does not apply to it, and after its
//    backward it holds only its gradients;
//  - a parameter that already has a gradient, or is not trainable, allocates
//    nothing; a group whose slot is null trains nothing;
//  - a group's waiting bytes are held from the start until its backward
//    begins, and released then, before its first observation;
//  - in a wave of one forward, every group's forward runs before any
//    backward, in the groups' order: while g's forward runs, the groups before
//    it hold their waiting bytes and those after it none of their boundaries
//    yet; g itself is observed once with all its boundaries and its forward's
//    bytes (moments: forward, else head), or nothing else (no moments: the
//    forward's own terms charge the rest);
//  - groups of one forward run one after another in any order;
//  - split children whose trained slot sets are equal share their gradient
//    tensors (keyed by slot and parameter) and run one after another in any
//    order; children with different slot sets are independent and may
//    interleave arbitrarily, so their worst states add up. (Where two different
//    sets overlap in a slot the real tensors are shared and the real peak can
//    only be lower; the model charges the sum, on purpose.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace psc::pricing::oracle {

struct Tensor {
  std::string name;
  std::vector<int> layers;  // empty: belongs to no layer
  std::int64_t local_bytes = 0;
  bool trainable = true;
  bool has_gradient = false;
  bool outside_decoder = false;
};

struct Moments {
  std::int64_t head = 0;
  std::optional<std::int64_t> forward;  // <= head; absent: head
  std::vector<std::int64_t> before;     // per layer
  std::vector<std::int64_t> after;
};

struct Group {
  std::optional<std::string> slot;
  std::vector<std::int64_t> boundary;
  std::vector<Tensor> tensors;  // the slot's parameters
  std::optional<Moments> moments;
  std::int64_t waiting = 0;  // held until this group's backward begins
};

struct Forward {
  std::int64_t output = 0;
  std::int64_t workspace = 0;
  std::int64_t input_gradient = 0;
  std::optional<std::int64_t> workspace_after;
  std::vector<Group> groups;
  std::vector<int> backward_order;  // the groups' order when the trainer fixes it; empty: every order
};

struct Wave {
  std::int64_t safety_numerator = 1024;  // safety factor = numerator / 1024, exact in binary
  std::int64_t transient = 0;
  bool profiled = false;
  std::vector<Forward> forwards;
};

struct Result {
  std::int64_t adapter = 0;  // worst excess over the floor
  std::int64_t retained = 0;
  std::int64_t raw = 0;
  std::int64_t required = 0;
  std::set<std::string> slots;          // slots that allocated any gradient
  std::vector<std::int64_t> set_worst;  // worst excess of each slot set of children
  // Worst excess observed while (forward, group) was at `layer` (-1: before its
  // first layer), over every order: a reported peak location must reach `adapter`.
  std::map<std::tuple<int, int, int>, std::int64_t> excess_at;
};

inline bool trains(const Group& group, const Tensor& tensor) {
  return group.slot && tensor.trainable && !tensor.has_gradient;
}

inline std::set<std::string> trained_slots(const Forward& forward) {
  std::set<std::string> slots;
  for (const Group& group : forward.groups) {
    for (const Tensor& t : group.tensors) {
      if (trains(group, t) && t.local_bytes > 0) slots.insert(*group.slot);
    }
  }
  return slots;
}

class Simulation {
 public:
  Simulation(const Wave& wave, std::vector<int> forwards) : wave_(wave), forwards_(std::move(forwards)) {}

  // Worst excess over every order of the children and of each child's groups.
  std::int64_t run(std::map<std::tuple<int, int, int>, std::int64_t>& excess_at) {
    excess_at_ = &excess_at;
    std::vector<int> child_order = forwards_;
    std::sort(child_order.begin(), child_order.end());
    if (wave_.forwards.size() == 1) simulate_forwards(wave_.forwards[0]);
    do {
      group_orders_.assign(child_order.size(), {});
      enumerate_group_orders(child_order, 0);
    } while (std::next_permutation(child_order.begin(), child_order.end()));
    return worst_;
  }

 private:
  void enumerate_group_orders(const std::vector<int>& child_order, size_t c) {
    if (c == child_order.size()) {
      simulate(child_order);
      return;
    }
    const Forward& forward = wave_.forwards[child_order[c]];
    if (!forward.backward_order.empty()) {  // the one order the trainer runs
      group_orders_[c] = forward.backward_order;
      enumerate_group_orders(child_order, c + 1);
      return;
    }
    std::vector<int> order(forward.groups.size());
    std::iota(order.begin(), order.end(), 0);
    do {
      group_orders_[c] = order;
      enumerate_group_orders(child_order, c + 1);
    } while (std::next_permutation(order.begin(), order.end()));
  }

  void simulate(const std::vector<int>& child_order) {
    std::int64_t live = 0;
    for (int f : child_order)
      for (const Group& group : wave_.forwards[f].groups) live += group.waiting;
    std::set<std::string> allocated;
    auto allocate = [&](const std::string& slot, const Tensor& t) {
      if (allocated.insert(slot + "\n" + t.name).second) live += t.local_bytes;
    };
    for (size_t c = 0; c < child_order.size(); ++c) {
      const int f = child_order[c];
      for (int g : group_orders_[c]) {
        const Group& group = wave_.forwards[f].groups[g];
        live -= group.waiting;
        for (const Tensor& t : group.tensors) {
          if (trains(group, t) && (t.outside_decoder || t.layers.empty())) allocate(*group.slot, t);
        }
        const Forward& forward = wave_.forwards[f];
        if (group.moments) {
          simulate_moments(f, g, group, live, allocate);
          continue;
        }
        observe(f, g, -1, live);
        const std::int64_t shrink =
            forward.workspace_after ? std::max<std::int64_t>(0, forward.workspace - *forward.workspace_after) : 0;
        for (int layer = static_cast<int>(group.boundary.size()) - 1; layer >= 0; --layer) {
          const std::int64_t before = live;
          for (const Tensor& t : group.tensors) {
            const bool touched = std::find(t.layers.begin(), t.layers.end(), layer) != t.layers.end();
            if (trains(group, t) && !t.outside_decoder && touched) allocate(*group.slot, t);
          }
          const bool split = wave_.forwards.size() > 1;
          const std::int64_t last = layer == 0 && split ? live - group.boundary[0] : before;
          observe(f, g, layer, std::max({before, live - shrink, last}));
          live -= group.boundary[layer];
        }
        // After the group: not a location a price names.
        observe(f, g, -2, wave_.forwards.size() > 1 ? live : live - forward.workspace);
      }
    }
  }

  // The groups' forwards, before any backward. Observed at (0, g, -3): not a
  // location a price names.
  void simulate_forwards(const Forward& forward) {
    std::int64_t live = 0;
    for (const Group& group : forward.groups)
      for (std::int64_t b : group.boundary) live -= b;
    for (size_t g = 0; g < forward.groups.size(); ++g) {
      const Group& group = forward.groups[g];
      for (std::int64_t b : group.boundary) live += b;
      const std::int64_t own = group.moments ? group.moments->forward.value_or(group.moments->head) : 0;
      observe(0, static_cast<int>(g), -3, live + own);
      live += group.waiting;
    }
  }

  template <typename Allocate>
  void simulate_moments(int f, int g, const Group& group, std::int64_t& live, Allocate& allocate) {
    observe(f, g, -1, live + group.moments->head);
    for (int layer = static_cast<int>(group.boundary.size()) - 1; layer >= 0; --layer) {
      observe(f, g, layer, live + group.moments->before[layer]);
      for (const Tensor& t : group.tensors) {
        const bool touched = std::find(t.layers.begin(), t.layers.end(), layer) != t.layers.end();
        if (trains(group, t) && !t.outside_decoder && touched) allocate(*group.slot, t);
      }
      observe(f, g, layer, live + group.moments->after[layer]);
      live -= group.boundary[layer];
    }
    observe(f, g, -2, live);
  }

  void observe(int f, int g, int layer, std::int64_t live) {
    worst_ = std::max(worst_, live);
    auto key = std::make_tuple(f, g, layer);
    auto it = excess_at_->find(key);
    if (it == excess_at_->end()) {
      excess_at_->emplace(key, live);
    } else {
      it->second = std::max(it->second, live);
    }
  }

  const Wave& wave_;
  std::vector<int> forwards_;
  std::vector<std::vector<int>> group_orders_;
  std::map<std::tuple<int, int, int>, std::int64_t>* excess_at_ = nullptr;
  std::int64_t worst_ = 0;  // the state before any backward: excess 0
};

inline Result price(const Wave& wave) {
  Result result;
  std::map<std::set<std::string>, std::vector<int>> by_slot_set;
  bool any_group = false;
  std::int64_t output = 0, workspace = 0, input_gradient = 0;
  for (size_t f = 0; f < wave.forwards.size(); ++f) {
    const Forward& forward = wave.forwards[f];
    output += forward.output;
    workspace = std::max(workspace, forward.workspace);
    input_gradient += forward.input_gradient;
    any_group = any_group || !forward.groups.empty();
    for (const Group& group : forward.groups) {
      for (std::int64_t b : group.boundary) result.retained += b;
    }
    std::set<std::string> slots = trained_slots(forward);
    result.slots.insert(slots.begin(), slots.end());
    by_slot_set[slots].push_back(static_cast<int>(f));
  }
  // Different slot sets interleave freely and share nothing: every combination of
  // their states occurs, so the worst joint state is the sum of their worsts.
  for (const auto& [slots, forwards] : by_slot_set) {
    result.set_worst.push_back(Simulation(wave, forwards).run(result.excess_at));
    result.adapter += result.set_worst.back();
  }
  const std::int64_t transient = any_group && !wave.profiled ? wave.transient : 0;
  result.raw = output + result.retained + workspace + input_gradient + result.adapter + transient;
  result.required = static_cast<std::int64_t>(static_cast<__int128>(result.raw) * wave.safety_numerator / 1024);
  return result;
}

}  // namespace psc::pricing::oracle
