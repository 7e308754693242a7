// Random waves for the property tests, and their `price` input JSON. A slot's
// parameters are drawn once per wave, so children that train the same slot
// train the same tensors; each slot is written either as parameter metadata
// (so the estimator derives the pending vector) or as explicit pending vectors.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "pricing/plan.h"
#include "tests/support/pricing_oracle.h"

namespace psc::pricing::testing {

struct Shape {
  int max_layers = 6;
  int max_groups = 6;    // in the whole wave, all children together
  int max_children = 1;  // 1: never split
  int slot_pool = 6;     // slots are drawn from the first slot_pool of a..f
  int null_slot_percent = 10;
  int moments_percent = 30;  // groups that carry moments
  int waiting_percent = 40;  // groups that hold waiting bytes (waves of one forward)
};

struct Case {
  oracle::Wave wave;
  std::map<std::string, bool> as_parameters;  // per slot: metadata (true) or pending vectors
};

inline std::int64_t random_bytes(std::mt19937_64& rng) {
  const int kind = std::uniform_int_distribution<int>(0, 99)(rng);
  if (kind < 25) return 0;
  if (kind < 55) return std::uniform_int_distribution<std::int64_t>(1, 64)(rng);
  if (kind < 90) return std::uniform_int_distribution<std::int64_t>(1, 1 << 20)(rng);
  return std::uniform_int_distribution<std::int64_t>(1, std::int64_t{1} << 34)(rng);
}

inline bool chance(std::mt19937_64& rng, int percent) {
  return std::uniform_int_distribution<int>(0, 99)(rng) < percent;
}

// Metadata: shared parameters (several layers), outside-decoder ones (some also
// used by a layer, like a tied head), slot-wide ones (no layer), frozen ones and
// ones whose gradient already exists.
inline std::vector<oracle::Tensor> random_parameters(std::mt19937_64& rng, int layers) {
  std::vector<oracle::Tensor> tensors;
  const int count = std::uniform_int_distribution<int>(0, 5)(rng);
  for (int k = 0; k < count; ++k) {
    oracle::Tensor& t = tensors.emplace_back();
    t.name = "w" + std::to_string(k);
    const int uses = layers == 0 ? 0 : std::uniform_int_distribution<int>(0, std::min(3, layers))(rng);
    for (int u = 0; u < uses; ++u) {
      const int layer = std::uniform_int_distribution<int>(0, layers - 1)(rng);
      if (std::find(t.layers.begin(), t.layers.end(), layer) == t.layers.end()) t.layers.push_back(layer);
    }
    t.local_bytes = random_bytes(rng);
    t.trainable = chance(rng, 85);
    t.has_gradient = chance(rng, 15);
    t.outside_decoder = chance(rng, 15);
  }
  return tensors;
}

// Explicit vectors: one tensor per layer plus the outside bucket.
inline std::vector<oracle::Tensor> random_pending(std::mt19937_64& rng, int layers) {
  std::vector<oracle::Tensor> tensors;
  for (int i = 0; i < layers; ++i) {
    tensors.push_back({"layer." + std::to_string(i), {i}, random_bytes(rng), true, false, false});
  }
  tensors.push_back({"outside", {}, random_bytes(rng), true, false, true});
  return tensors;
}

inline Case random_case(std::mt19937_64& rng, const Shape& shape) {
  Case c;
  const int layers = std::uniform_int_distribution<int>(chance(rng, 5) ? 0 : 1, shape.max_layers)(rng);
  std::map<std::string, std::vector<oracle::Tensor>> slot_tensors;
  for (int s = 0; s < shape.slot_pool; ++s) {
    const std::string slot(1, static_cast<char>('a' + s));
    c.as_parameters[slot] = chance(rng, 50);
    slot_tensors[slot] = c.as_parameters[slot] ? random_parameters(rng, layers) : random_pending(rng, layers);
  }

  c.wave.safety_numerator = std::uniform_int_distribution<std::int64_t>(1024, 2048)(rng);
  c.wave.transient = random_bytes(rng);
  c.wave.profiled = chance(rng, 30);
  const int children = std::uniform_int_distribution<int>(1, shape.max_children)(rng);
  int groups_left = shape.max_groups;
  for (int f = 0; f < children && groups_left > 0; ++f) {
    oracle::Forward& forward = c.wave.forwards.emplace_back();
    forward.output = random_bytes(rng);
    forward.workspace = random_bytes(rng);
    if (chance(rng, 40)) {
      forward.workspace_after = std::uniform_int_distribution<std::int64_t>(0, forward.workspace)(rng);
    }
    forward.input_gradient = random_bytes(rng);
    const int most = f + 1 == children ? groups_left : std::max(1, groups_left - (children - f - 1));
    const int count = std::uniform_int_distribution<int>(chance(rng, 5) ? 0 : 1, most)(rng);
    groups_left -= count;
    std::vector<std::string> pool;
    for (int s = 0; s < shape.slot_pool; ++s) pool.emplace_back(1, static_cast<char>('a' + s));
    std::shuffle(pool.begin(), pool.end(), rng);
    for (int g = 0; g < count; ++g) {
      oracle::Group& group = forward.groups.emplace_back();
      if (!pool.empty() && !chance(rng, shape.null_slot_percent)) {
        group.slot = pool.back();
        pool.pop_back();
        group.tensors = slot_tensors[*group.slot];
      }
      for (int i = 0; i < layers; ++i) group.boundary.push_back(random_bytes(rng));
      if (children == 1 && chance(rng, shape.moments_percent)) {
        oracle::Moments& m = group.moments.emplace();
        m.head = random_bytes(rng);
        for (int i = 0; i < layers; ++i) {
          m.before.push_back(random_bytes(rng));
          m.after.push_back(random_bytes(rng));
        }
        if (chance(rng, 50)) m.forward = std::uniform_int_distribution<std::int64_t>(0, m.head)(rng);
      }
      if (children == 1 && chance(rng, shape.waiting_percent)) group.waiting = random_bytes(rng) * layers;
    }
  }
  return c;
}

inline Json group_json(const oracle::Group& group, bool as_parameters) {
  Json out = Json::object();
  out["slot"] = group.slot ? Json(*group.slot) : Json(nullptr);
  out["boundary_bytes"] = group.boundary;
  if (group.waiting > 0) out["waiting_bytes"] = group.waiting;
  if (group.moments) {
    out["moments"] = {{"head_bytes", group.moments->head},
                      {"before_gradient_bytes", group.moments->before},
                      {"after_gradient_bytes", group.moments->after}};
    if (group.moments->forward) out["moments"]["forward_bytes"] = *group.moments->forward;
  }
  if (!group.slot) return out;  // trains nothing: no gradient fields needed
  if (as_parameters) {
    Json parameters = Json::array();
    for (const oracle::Tensor& t : group.tensors) {
      parameters.push_back({{"name", t.name},
                            {"layers", t.layers},
                            {"local_bytes", t.local_bytes},
                            {"trainable", t.trainable},
                            {"has_gradient", t.has_gradient},
                            {"outside_decoder", t.outside_decoder}});
    }
    out["parameters"] = parameters;
  } else {
    std::vector<std::int64_t> pending(group.boundary.size(), 0);
    std::int64_t outside = 0;
    for (const oracle::Tensor& t : group.tensors) {
      if (t.outside_decoder) {
        outside += t.local_bytes;
      } else {
        pending[t.layers.at(0)] += t.local_bytes;
      }
    }
    out["pending_gradient_bytes"] = pending;
    out["outside_gradient_bytes"] = outside;
  }
  return out;
}

inline Json forward_json(const oracle::Forward& forward, const Case& c) {
  Json out = Json::object();
  out["output_bytes"] = forward.output;
  out["workspace_bytes"] = forward.workspace;
  if (forward.workspace_after) out["workspace_after_gradient_bytes"] = *forward.workspace_after;
  out["input_gradient_bytes"] = forward.input_gradient;
  Json groups = Json::array();
  for (const oracle::Group& g : forward.groups) groups.push_back(group_json(g, g.slot && c.as_parameters.at(*g.slot)));
  out["groups"] = groups;
  if (!forward.backward_order.empty()) out["backward_order"] = forward.backward_order;
  return out;
}

inline Json plan_json(const Case& c) {
  Json out = Json::object();
  out["safety_factor"] = static_cast<double>(c.wave.safety_numerator) / 1024.0;
  out["transient_bytes"] = c.wave.transient;
  out["profiled"] = c.wave.profiled;
  if (c.wave.forwards.size() == 1) {
    const Json forward = forward_json(c.wave.forwards[0], c);
    for (const auto& entry : forward.items()) out[entry.key()] = entry.value();
    out["children"] = Json::array();
  } else {
    Json children = Json::array();
    for (const oracle::Forward& f : c.wave.forwards) children.push_back(forward_json(f, c));
    out["children"] = children;
  }
  return out;
}

}  // namespace psc::pricing::testing
