// Liveness categories: why an allocation is live, decided from where it was
// made and where it died (DESIGN.md "Attribution", the category table).
//
// This is a first version. Issue 5 refines it (pending gradients read from the
// wave's start, cold-versus-warm pairing for first_execution); the seams for
// that are Classifier's virtual members and the facts struct, which can grow
// without the analysis passes changing.
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
  kFirstExecution,
  kHeadOutside,
  kOther,
};
constexpr int kCategoryCount = 7;
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
  Category category = Category::kOther;
  int32_t layer = kNoLayer;  // the decoder layer the category is charged to

  friend bool operator==(const Attribution&, const Attribution&) = default;
};

// The rules, one predicate each (each returns the layer through *layer).
bool is_boundary(const AllocationFacts& f, int32_t* layer);
bool is_adapter_gradient(const AllocationFacts& f, int32_t* layer);
bool is_workspace(const AllocationFacts& f, int32_t* layer);
bool is_head_or_outside(const AllocationFacts& f);

class Classifier {
 public:
  virtual ~Classifier() = default;
  // First match wins: first_execution, persistent, boundary, adapter_gradient,
  // workspace, head/outside, other.
  virtual Attribution classify(const AllocationFacts& f) const;

 protected:
  // Hook for cold-versus-warm pairing (issue 5): an allocation made in a cold
  // wave with no counterpart in the warm repeats of the same shape. The first
  // version has no pairing, so nothing is first_execution.
  virtual bool is_first_execution(const AllocationFacts& /*f*/) const { return false; }
};

const Classifier& default_classifier();

}  // namespace psc
