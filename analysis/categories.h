// Liveness categories: why an allocation is live, decided from where it was
// made and where it died (docs/design.md, "Attribution"; the table is in
// docs/report.md, "How categories are decided"). One
// classification for everything downstream: the report's breakdowns, the
// liveness terms calibration fits and check compares (each category but
// persistent and forward_scratch is a term of the pricing model), and the
// exporters' colours.
//
//   persistent        made outside every wave and outliving the next one;
//   boundary(i)       the input saved for layer i (layer i-1's output, the
//                     embedding's for layer 0), and state saved for it between
//                     layers (checkpoint RNG), freed by layer i's backward;
//   adapter_gradient(i)  made by layer i's backward and kept until the
//                     optimizer (or never freed);
//   workspace(i)      scratch of layer i's recompute/backward dying in it;
//   input_gradient(i) the gradient that flows from layer to layer: made in a
//                     layer's recompute/backward and dying in a lower layer's
//                     or outside the decoder, or made by the head and dying in
//                     a layer's;
//   output            everything else the head, the loss and the layers leave
//                     (the head's saved state, the loss, what no rule names);
//   forward_scratch(i) made and freed inside layer i's forward: live only while
//                     the boundaries are being made, never at a backward peak;
//   first_execution   in a cold wave, with no counterpart in a warm wave of the
//                     same shape: decided by pairing the waves' allocations
//                     (estimator/liveness.h), never by one allocation's facts.
#pragma once

#include <cstdint>

#include "analysis/memory_replay.h"
#include "analysis/range_names.h"

namespace psc {

enum class Category : uint8_t {
  kPersistent = 0,
  kBoundary,
  kAdapterGradient,
  kWorkspace,
  kInputGradient,
  kOutput,
  kForwardScratch,
  kFirstExecution,
};
constexpr int kCategoryCount = 8;
const char* category_name(Category category);
// boundary, adapter_gradient and workspace are per decoder layer.
bool category_is_per_layer(Category category);

// Everything the rules look at, computed by the analysis from one lifetime.
struct AllocationFacts {
  RangeName made_in;   // range open on the allocating thread (see ScopeTracker)
  RangeName ended_in;  // range open where it was freed; outside when still live
  EndKind end = EndKind::kStillLive;
  int32_t made_in_wave = -1;   // wave open at allocation, -1 for none
  int32_t ended_in_wave = -1;  // wave open at the free, -1 for none or still live
  // Allocated outside every wave and still live after the end of the next wave
  // to begin (or at the end of the trace when no wave follows).
  bool outlives_next_wave = false;
  bool made_in_cold_wave = false;  // the allocating wave's payload says "cold"
  uint64_t bytes = 0;
  uint64_t alloc_seq = 0;
  uint32_t thread = 0;
  MemoryKind memory = MemoryKind::kNone;
};

struct Attribution {
  Category category = Category::kOutput;
  int32_t layer = kNoLayer;  // the decoder layer the category is charged to

  friend bool operator==(const Attribution&, const Attribution&) = default;
};

// The rules, one predicate each (each returns the layer through *layer).
bool is_boundary(const AllocationFacts& f, int32_t* layer);
bool is_adapter_gradient(const AllocationFacts& f, int32_t* layer);
bool is_workspace(const AllocationFacts& f, int32_t* layer);
bool is_saved_between_layers(const AllocationFacts& f, int32_t* layer);
bool is_input_gradient(const AllocationFacts& f, int32_t* layer);
bool is_forward_scratch(const AllocationFacts& f, int32_t* layer);

class Classifier {
 public:
  virtual ~Classifier() = default;
  // First match wins: persistent, boundary, adapter_gradient, workspace,
  // boundary (saved between layers), input_gradient, forward_scratch, output.
  // Never first_execution: that takes two waves (see above).
  virtual Attribution classify(const AllocationFacts& f) const;
};

const Classifier& default_classifier();

}  // namespace psc
