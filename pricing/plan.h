// Plans from JSON: the `price` input (docs/pricing.md, "Input: the plan"), validated, and
// the per-token admission plans of docs/pricing.md. Also the derivation of the
// pending-gradient vector from parameter metadata.
//
// Validation is strict: unknown fields, negative or non-integer sizes, arrays
// whose length disagrees with the layer count, two groups of one forward on one
// slot are refused with a PlanError naming the field, e.g.
// "groups[1].boundary_bytes[3]: must be a non-negative integer".
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "pricing/admission.h"
#include "pricing/pricing.h"

namespace psc::pricing {

using Json = nlohmann::ordered_json;

class PlanError : public std::runtime_error {
 public:
  PlanError(std::string field, std::string reason);
  const std::string& field() const { return field_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string field_;
  std::string reason_;
};

// One trainable tensor of a slot, as a framework describes it.
struct Parameter {
  std::string name;
  std::vector<int> layers;  // decoder layers that use it; empty: none
  Bytes local_bytes = 0;    // this rank's shard
  bool trainable = true;
  bool has_gradient = false;     // its gradient is already allocated (in the baseline)
  bool outside_decoder = false;  // embeddings, head, or shared with them
};

// The rules (docs/design.md, "The pricing model"): a parameter that already has a gradient, or is not
// trainable, counts 0; one shared by several layers counts once, at its highest
// layer (the backward reaches it there first); only the local shard counts;
// parameters outside the decoder, including any shared with a layer, and
// trainable parameters of no layer go into the outside bucket p[L].
// Layer indices must be below `layers` (parse_plan checks that).
void derive_pending(const std::vector<Parameter>& parameters, size_t layers, std::vector<Bytes>& pending,
                    Bytes& outside);

// `field_prefix` is put before every field name in errors ("plan." in reports).
Plan parse_plan(const Json& json, const std::string& field_prefix = "");
AdmissionPlan parse_admission_plan(const Json& json, const std::string& field_prefix = "");

}  // namespace psc::pricing
