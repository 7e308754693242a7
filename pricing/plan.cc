#include "pricing/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace psc::pricing {

PlanError::PlanError(std::string field, std::string reason)
    : std::runtime_error(field + ": " + reason), field_(std::move(field)), reason_(std::move(reason)) {}

void derive_pending(const std::vector<Parameter>& parameters, size_t layers, std::vector<Bytes>& pending,
                    Bytes& outside) {
  pending.assign(layers, 0);
  outside = 0;
  for (const Parameter& parameter : parameters) {
    if (!parameter.trainable || parameter.has_gradient) continue;
    if (parameter.outside_decoder || parameter.layers.empty()) {
      outside += parameter.local_bytes;
      continue;
    }
    const int highest = *std::max_element(parameter.layers.begin(), parameter.layers.end());
    pending[highest] += parameter.local_bytes;
  }
}

namespace {

using Fields = std::initializer_list<std::string_view>;

std::string member(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}
std::string item(const std::string& path, size_t index) { return fmt::format("{}[{}]", path, index); }

// Parsed text gives non-negative integers the unsigned type; JSON built in C++
// from signed integers keeps the signed type. Both are fine when >= 0.
bool is_non_negative_integer(const Json& value) {
  return value.is_number_unsigned() || (value.is_number_integer() && value.get<std::int64_t>() >= 0);
}

struct ParsedGroup {
  std::optional<std::string> slot;
  std::vector<Bytes> boundary;  // absolute, or per token in admission plans
  std::vector<Bytes> pending;
  Bytes outside = 0;
  std::optional<Moments> moments;
  Bytes waiting = 0;
};

// Walks one plan document. Carries what validation needs across fields: the
// layer count (set by the first boundary array met) and the running total of
// sizes (kept below kMaxTotalBytes so pricing cannot overflow).
class PlanReader {
 public:
  explicit PlanReader(std::string prefix) : prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& reason) const {
    if (field.empty()) {
      throw PlanError(prefix_.empty() ? "(top level)" : prefix_.substr(0, prefix_.size() - 1), reason);
    }
    throw PlanError(prefix_ + field, reason);
  }

  void expect_object(const Json& value, const std::string& path) const {
    if (!value.is_object()) fail(path, "must be a JSON object");
  }

  void only_fields(const Json& object, const std::string& path, Fields allowed) const {
    for (const auto& entry : object.items()) {
      if (std::find(allowed.begin(), allowed.end(), entry.key()) == allowed.end()) {
        fail(member(path, entry.key()), "unknown field");
      }
    }
  }

  const Json& required(const Json& object, const std::string& path, std::string_view key) const {
    auto it = object.find(key);
    if (it == object.end()) fail(member(path, key), "required field missing");
    return *it;
  }

  Bytes bytes(const Json& value, const std::string& field, std::int64_t scale = 1) {
    if (!is_non_negative_integer(value)) fail(field, "must be a non-negative integer");
    const std::uint64_t raw = value.get<std::uint64_t>();
    if (raw > static_cast<std::uint64_t>(kMaxTotalBytes)) fail(field, "must be at most 2^56 bytes");
    count(static_cast<__int128>(raw) * scale, field);
    return static_cast<Bytes>(raw);
  }

  Bytes optional_bytes(const Json& object, const std::string& path, std::string_view key, std::int64_t scale = 1) {
    auto it = object.find(key);
    return it == object.end() ? 0 : bytes(*it, member(path, key), scale);
  }

  std::vector<Bytes> byte_array(const Json& value, const std::string& field, std::int64_t scale = 1) {
    if (!value.is_array()) fail(field, "must be an array of non-negative integers");
    check_layer_count(value.size(), field);
    std::vector<Bytes> out;
    out.reserve(value.size());
    for (size_t i = 0; i < value.size(); ++i) out.push_back(bytes(value[i], item(field, i), scale));
    return out;
  }

  bool boolean(const Json& value, const std::string& field) const {
    if (!value.is_boolean()) fail(field, "must be true or false");
    return value.get<bool>();
  }

  bool optional_boolean(const Json& object, const std::string& path, std::string_view key, bool fallback) const {
    auto it = object.find(key);
    return it == object.end() ? fallback : boolean(*it, member(path, key));
  }

  void wave_settings(const Json& root, double& safety_factor, Bytes& transient_bytes, bool& profiled) {
    const Json& factor = required(root, "", "safety_factor");
    if (!factor.is_number() || !std::isfinite(factor.get<double>()) || factor.get<double>() < 1.0 ||
        factor.get<double>() > kMaxSafetyFactor) {
      fail("safety_factor", "must be a number from 1 to 64");
    }
    safety_factor = factor.get<double>();
    transient_bytes = bytes(required(root, "", "transient_bytes"), "transient_bytes");
    profiled = boolean(required(root, "", "profiled"), "profiled");
  }

  // One group; `scale` is max_tokens for per-token boundaries, else 1.
  ParsedGroup group(const Json& value, const std::string& path, bool per_token, std::int64_t scale) {
    expect_object(value, path);
    const std::string_view boundary_key = per_token ? "boundary_bytes_per_token" : "boundary_bytes";
    const std::string_view wrong_key = per_token ? "boundary_bytes" : "boundary_bytes_per_token";
    if (value.contains(wrong_key)) {
      fail(member(path, wrong_key), per_token ? "an admission plan gives boundary_bytes_per_token"
                                              : "per-token sizes belong to admission plans (price --budget)");
    }
    only_fields(value, path,
                {"slot", boundary_key, "pending_gradient_bytes", "outside_gradient_bytes", "parameters", "moments",
                 "waiting_bytes"});

    ParsedGroup group;
    const Json& slot = required(value, path, "slot");
    if (slot.is_string() && !slot.get<std::string>().empty()) {
      group.slot = slot.get<std::string>();
    } else if (!slot.is_null()) {
      fail(member(path, "slot"), "must be a non-empty string or null");
    }
    group.boundary = byte_array(required(value, path, boundary_key), member(path, boundary_key), scale);
    pending_gradients(value, path, group);
    if (value.contains("moments")) {
      if (per_token) fail(member(path, "moments"), "admission plans have no moments (price --calibration prices them)");
      group.moments = moments(value["moments"], member(path, "moments"));
    }
    if (value.contains("waiting_bytes")) {
      if (per_token) fail(member(path, "waiting_bytes"), "admission plans have no waiting bytes");
      group.waiting = bytes(value["waiting_bytes"], member(path, "waiting_bytes"));
    }
    if (!group.slot) {
      const bool trains =
          group.outside > 0 || std::any_of(group.pending.begin(), group.pending.end(), [](Bytes b) { return b > 0; });
      if (trains) fail(member(path, "slot"), "is null (the group trains nothing) but the group has pending gradients");
    }
    return group;
  }

  std::vector<ParsedGroup> groups(const Json& forward, const std::string& path, bool per_token, std::int64_t scale) {
    std::vector<ParsedGroup> out;
    auto it = forward.find("groups");
    if (it == forward.end()) return out;
    const std::string field = member(path, "groups");
    if (!it->is_array()) fail(field, "must be an array of groups");
    std::map<std::string, size_t> trained_by;
    for (size_t g = 0; g < it->size(); ++g) {
      out.push_back(group((*it)[g], item(field, g), per_token, scale));
      if (!out.back().slot) continue;
      auto [seen, fresh] = trained_by.emplace(*out.back().slot, g);
      if (!fresh) {
        fail(member(item(field, g), "slot"),
             fmt::format("\"{}\" is already trained by {} of this forward; two groups of one forward never "
                         "train the same slot",
                         *out.back().slot, item(field, seen->second)));
      }
    }
    return out;
  }

  Forward forward(const Json& value, const std::string& path) {
    Forward forward;
    forward.output_bytes = optional_bytes(value, path, "output_bytes");
    forward.workspace_bytes = optional_bytes(value, path, "workspace_bytes");
    forward.input_gradient_bytes = optional_bytes(value, path, "input_gradient_bytes");
    if (value.contains("workspace_after_gradient_bytes")) {
      forward.workspace_after_gradient_bytes = optional_bytes(value, path, "workspace_after_gradient_bytes");
      if (*forward.workspace_after_gradient_bytes > forward.workspace_bytes) {
        fail(member(path, "workspace_after_gradient_bytes"),
             fmt::format("{} is more than workspace_bytes ({}): what is left of the workspace cannot exceed it",
                         *forward.workspace_after_gradient_bytes, forward.workspace_bytes));
      }
    }
    for (ParsedGroup& parsed : groups(value, path, false, 1)) {
      Group& group = forward.groups.emplace_back();
      group.slot = std::move(parsed.slot);
      group.boundary_bytes = std::move(parsed.boundary);
      group.pending_gradient_bytes = std::move(parsed.pending);
      group.outside_gradient_bytes = parsed.outside;
      group.moments = std::move(parsed.moments);
      group.waiting_bytes = parsed.waiting;
    }
    if (auto order = value.find("backward_order"); order != value.end())
      forward.backward_order = backward_order(*order, member(path, "backward_order"), forward.groups.size());
    forward.runs_free_boundaries = optional_boolean(value, path, "runs_free_boundaries", false);
    if (forward.runs_free_boundaries && forward.backward_order.empty())
      fail(member(path, "runs_free_boundaries"), "says what a known backward order frees: give backward_order with it");
    return forward;
  }

  // The order the groups' backwards run: every group's index once.
  std::vector<int32_t> backward_order(const Json& value, const std::string& field, size_t groups) {
    if (!value.is_array()) fail(field, "must be an array of the groups' indices, in the order their backwards run");
    if (value.size() != groups)
      fail(field, fmt::format("has {} entries for {} groups: every group's index once", value.size(), groups));
    std::vector<int32_t> order;
    std::vector<bool> seen(groups, false);
    for (size_t i = 0; i < value.size(); ++i) {
      const Json& v = value[i];
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0 ||
          v.get<std::int64_t>() >= static_cast<std::int64_t>(groups))
        fail(item(field, i), fmt::format("must be a group's index, 0 to {}", groups - 1));
      const auto g = static_cast<size_t>(v.get<std::int64_t>());
      if (seen[g]) fail(item(field, i), fmt::format("group {} comes twice", g));
      seen[g] = true;
      order.push_back(static_cast<int32_t>(g));
    }
    return order;
  }

  std::vector<Forward> children(const Json& root) {
    const Json& list = root["children"];
    if (!list.is_array()) fail("children", "must be an array of plans");
    for (std::string_view key :
         {"output_bytes", "workspace_bytes", "workspace_after_gradient_bytes", "input_gradient_bytes"}) {
      auto it = root.find(key);
      if (it != root.end() && !(is_non_negative_integer(*it) && it->get<std::uint64_t>() == 0)) {
        fail(std::string(key), "a split wave takes this from its children; give it there");
      }
    }
    auto groups_it = root.find("groups");
    if (groups_it != root.end() && !(groups_it->is_array() && groups_it->empty())) {
      fail("groups", "a split wave carries its groups in its children");
    }
    // Each child orders its own groups; at the top they would be ignored.
    for (std::string_view key : {"backward_order", "runs_free_boundaries"})
      if (root.contains(key)) fail(std::string(key), "a split wave's children order their own groups: give it there");
    std::vector<Forward> out;
    for (size_t c = 0; c < list.size(); ++c) {
      const std::string path = item("children", c);
      const Json& child = list[c];
      expect_object(child, path);
      for (std::string_view key : {"safety_factor", "transient_bytes", "profiled"}) {
        if (child.contains(key)) fail(member(path, key), "belongs to the whole wave: give it at the top level only");
      }
      if (child.contains("children")) fail(member(path, "children"), "a child cannot itself be split");
      only_fields(child, path,
                  {"output_bytes", "workspace_bytes", "workspace_after_gradient_bytes", "input_gradient_bytes",
                   "groups", "backward_order", "runs_free_boundaries"});
      out.push_back(forward(child, path));
      for (size_t g = 0; g < out.back().groups.size(); ++g) {
        // Children of one slot set share their gradient tensors: a later
        // child's moments sit on an earlier child's gradients, which the
        // per-child charge cannot see. A split with moments is priced as one
        // forward whose groups are its children.
        if (out.back().groups[g].moments)
          fail(member(item(member(path, "groups"), g), "moments"),
               "a split wave's children take no moments: give one forward whose groups are the children");
        // Likewise a child's waiting bytes are held while other children run.
        if (out.back().groups[g].waiting_bytes > 0)
          fail(member(item(member(path, "groups"), g), "waiting_bytes"),
               "a split wave's children hold no waiting bytes: give one forward whose groups are the children");
      }
    }
    return out;
  }

 private:
  void count(__int128 amount, const std::string& field) {
    total_ += amount;
    if (total_ > kMaxTotalBytes)
      fail(field, "the sizes in this plan add up to more than 2^56 bytes by here (their total, not this field alone)");
  }

  void check_layer_count(size_t size, const std::string& field) {
    if (!layers_) {
      layers_ = size;
      layers_from_ = field;
    } else if (size != *layers_) {
      fail(field, fmt::format("has {} entries but the plan has {} layers (from {})", size, *layers_, layers_from_));
    }
  }

  void pending_gradients(const Json& value, const std::string& path, ParsedGroup& group) {
    const bool has_parameters = value.contains("parameters");
    const bool has_pending = value.contains("pending_gradient_bytes");
    const bool has_outside = value.contains("outside_gradient_bytes");
    if (has_parameters && (has_pending || has_outside)) {
      fail(member(path, "parameters"),
           "give either parameters or pending_gradient_bytes with outside_gradient_bytes, not both");
    }
    if (has_parameters) {
      derive_pending(parameters(value["parameters"], member(path, "parameters")), group.boundary.size(), group.pending,
                     group.outside);
    } else if (has_pending || has_outside) {
      group.pending =
          byte_array(required(value, path, "pending_gradient_bytes"), member(path, "pending_gradient_bytes"));
      group.outside = bytes(required(value, path, "outside_gradient_bytes"), member(path, "outside_gradient_bytes"));
    } else if (group.slot) {
      fail(member(path, "pending_gradient_bytes"), "required field missing (or give parameters)");
    } else {
      group.pending.assign(group.boundary.size(), 0);  // slot null: trains nothing
    }
  }

  Moments moments(const Json& value, const std::string& path) {
    expect_object(value, path);
    only_fields(value, path, {"head_bytes", "forward_bytes", "before_gradient_bytes", "after_gradient_bytes"});
    Moments out;
    out.head_bytes = bytes(required(value, path, "head_bytes"), member(path, "head_bytes"));
    if (value.contains("forward_bytes")) {
      out.forward_bytes = bytes(value["forward_bytes"], member(path, "forward_bytes"));
      if (*out.forward_bytes > out.head_bytes)
        fail(member(path, "forward_bytes"), "must be at most head_bytes: the head's moment holds the forward too");
    }
    out.before_gradient_bytes =
        byte_array(required(value, path, "before_gradient_bytes"), member(path, "before_gradient_bytes"));
    out.after_gradient_bytes =
        byte_array(required(value, path, "after_gradient_bytes"), member(path, "after_gradient_bytes"));
    return out;
  }

  std::vector<Parameter> parameters(const Json& list, const std::string& path) {
    if (!list.is_array()) fail(path, "must be an array of parameters");
    std::vector<Parameter> out;
    std::map<std::string, size_t> seen;
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string here = item(path, k);
      const Json& value = list[k];
      expect_object(value, here);
      only_fields(value, here, {"name", "layers", "local_bytes", "trainable", "has_gradient", "outside_decoder"});
      Parameter& parameter = out.emplace_back();
      const Json& name = required(value, here, "name");
      if (!name.is_string() || name.get<std::string>().empty())
        fail(member(here, "name"), "must be a non-empty string");
      parameter.name = name.get<std::string>();
      auto [first, fresh] = seen.emplace(parameter.name, k);
      if (!fresh) {
        fail(member(here, "name"),
             fmt::format("\"{}\" is listed twice (also {})", parameter.name, item(path, first->second)));
      }
      parameter.layers = layer_indices(required(value, here, "layers"), member(here, "layers"));
      parameter.local_bytes = bytes(required(value, here, "local_bytes"), member(here, "local_bytes"));
      parameter.trainable = optional_boolean(value, here, "trainable", true);
      parameter.has_gradient = optional_boolean(value, here, "has_gradient", false);
      parameter.outside_decoder = optional_boolean(value, here, "outside_decoder", false);
    }
    return out;
  }

  std::vector<int> layer_indices(const Json& list, const std::string& path) const {
    if (!list.is_array()) fail(path, "must be an array of layer indices");
    std::vector<int> out;
    for (size_t i = 0; i < list.size(); ++i) {
      const Json& v = list[i];
      const size_t layers = layers_.value_or(0);
      if (!is_non_negative_integer(v) || v.get<std::uint64_t>() >= layers) {
        fail(item(path, i), layers == 0 ? std::string("the plan has no decoder layers")
                                        : fmt::format("must be a layer index from 0 to {}", layers - 1));
      }
      out.push_back(static_cast<int>(v.get<std::uint64_t>()));
    }
    return out;
  }

  std::string prefix_;
  std::optional<size_t> layers_;
  std::string layers_from_;
  __int128 total_ = 0;
};

}  // namespace

Plan parse_plan(const Json& json, const std::string& field_prefix) {
  PlanReader reader(field_prefix);
  reader.expect_object(json, "");
  if (json.contains("max_tokens")) reader.fail("max_tokens", "belongs to per-token admission plans (price --budget)");
  reader.only_fields(json, "",
                     {"safety_factor", "transient_bytes", "profiled", "output_bytes", "workspace_bytes",
                      "workspace_after_gradient_bytes", "input_gradient_bytes", "groups", "backward_order",
                      "runs_free_boundaries", "children"});
  Plan plan;
  reader.wave_settings(json, plan.safety_factor, plan.transient_bytes, plan.profiled);
  auto children = json.find("children");
  if (children != json.end() && !(children->is_array() && children->empty())) {
    plan.forwards = reader.children(json);
  } else {
    plan.forwards.push_back(reader.forward(json, ""));
  }
  return plan;
}

AdmissionPlan parse_admission_plan(const Json& json, const std::string& field_prefix) {
  PlanReader reader(field_prefix);
  reader.expect_object(json, "");
  reader.only_fields(json, "",
                     {"safety_factor", "transient_bytes", "profiled", "max_tokens", "output_bytes",
                      "output_bytes_per_token", "workspace_bytes", "workspace_bytes_per_token", "input_gradient_bytes",
                      "input_gradient_bytes_per_token", "groups", "children"});
  AdmissionPlan plan;
  reader.wave_settings(json, plan.safety_factor, plan.transient_bytes, plan.profiled);
  auto max_tokens = json.find("max_tokens");
  if (max_tokens == json.end()) {
    reader.fail("max_tokens", "required field missing: --budget prices a per-token admission plan (docs/pricing.md)");
  }
  if (!is_non_negative_integer(*max_tokens) || max_tokens->get<std::uint64_t>() < 1 ||
      max_tokens->get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxAdmissionTokens)) {
    reader.fail("max_tokens", "must be an integer from 1 to 2^40");
  }
  plan.max_tokens = static_cast<std::int64_t>(max_tokens->get<std::uint64_t>());
  auto children = json.find("children");
  if (children != json.end() && !(children->is_array() && children->empty())) {
    reader.fail("children", "an admission plan cannot be split");
  }
  const std::int64_t scale = plan.max_tokens;
  plan.output = {reader.optional_bytes(json, "", "output_bytes"),
                 reader.optional_bytes(json, "", "output_bytes_per_token", scale)};
  plan.workspace = {reader.optional_bytes(json, "", "workspace_bytes"),
                    reader.optional_bytes(json, "", "workspace_bytes_per_token", scale)};
  plan.input_gradient = {reader.optional_bytes(json, "", "input_gradient_bytes"),
                         reader.optional_bytes(json, "", "input_gradient_bytes_per_token", scale)};
  for (ParsedGroup& parsed : reader.groups(json, "", true, scale)) {
    AdmissionGroup& group = plan.groups.emplace_back();
    group.slot = std::move(parsed.slot);
    group.boundary_bytes_per_token = std::move(parsed.boundary);
    group.pending_gradient_bytes = std::move(parsed.pending);
    group.outside_gradient_bytes = parsed.outside;
  }
  return plan;
}

}  // namespace psc::pricing
