#include "analysis/categories.h"

namespace psc {
namespace {

bool is_layer_backward(const RangeName& r) { return r.phase == Phase::kRecompute || r.phase == Phase::kBackward; }

}  // namespace

const char* category_name(Category category) {
  switch (category) {
    case Category::kPersistent: return "persistent";
    case Category::kBoundary: return "boundary";
    case Category::kAdapterGradient: return "adapter_gradient";
    case Category::kWorkspace: return "workspace";
    case Category::kFirstExecution: return "first_execution";
    case Category::kHeadOutside: return "head_outside";
    case Category::kOther: return "other";
  }
  return "other";
}

bool category_is_per_layer(Category category) {
  return category == Category::kBoundary || category == Category::kAdapterGradient || category == Category::kWorkspace;
}

// The input saved for layer i is layer i-1's forward output (the head's, i.e.
// the embedding's, for layer 0); it dies when layer i's recompute-backward is
// done with it. A free recorded in layer i's recompute range counts too: the
// checkpoint may release its saved input before the backward range opens.
bool is_boundary(const AllocationFacts& f, int32_t* layer) {
  if (f.end == EndKind::kStillLive || !is_layer_backward(f.ended_in) || !f.ended_in.has_layer()) return false;
  const int32_t i = f.ended_in.layer;
  const bool made_by_previous_layer = i > 0 && f.made_in.in_layer(Phase::kForward, i - 1);
  const bool made_by_embedding = i == 0 && f.made_in.phase == Phase::kHead;
  if (!made_by_previous_layer && !made_by_embedding) return false;
  *layer = i;
  return true;
}

// Made by layer i's backward and kept until the optimizer consumes it
// (zero_grad(set_to_none=True) frees it), or never freed. A free after its wave
// ended, between waves, is a zero_grad the trainer did not annotate.
bool is_adapter_gradient(const AllocationFacts& f, int32_t* layer) {
  if (f.made_in.phase != Phase::kBackward || !f.made_in.has_layer()) return false;
  const bool freed_after_its_wave = f.made_in_wave >= 0 && f.ended_in_wave < 0;
  const bool kept = f.end == EndKind::kStillLive || f.ended_in.phase == Phase::kOptimizer || freed_after_its_wave;
  if (!kept) return false;
  *layer = f.made_in.layer;
  return true;
}

// Scratch of layer i's recompute or backward that dies inside the same layer.
bool is_workspace(const AllocationFacts& f, int32_t* layer) {
  if (!is_layer_backward(f.made_in) || !f.made_in.has_layer()) return false;
  if (f.end == EndKind::kStillLive || !is_layer_backward(f.ended_in) || f.ended_in.layer != f.made_in.layer)
    return false;
  *layer = f.made_in.layer;
  return true;
}

// Head, loss and embedding allocations, and those made outside any range the
// convention knows (including directly inside a wave range).
bool is_head_or_outside(const AllocationFacts& f) {
  return f.made_in.phase == Phase::kHead || f.made_in.phase == Phase::kOutside || f.made_in.phase == Phase::kWave;
}

Attribution Classifier::classify(const AllocationFacts& f) const {
  int32_t layer = kNoLayer;
  if (f.made_in_cold_wave && is_first_execution(f)) return {Category::kFirstExecution, f.made_in.layer};
  if (f.outlives_next_wave) return {Category::kPersistent, f.made_in.layer};
  if (is_boundary(f, &layer)) return {Category::kBoundary, layer};
  if (is_adapter_gradient(f, &layer)) return {Category::kAdapterGradient, layer};
  if (is_workspace(f, &layer)) return {Category::kWorkspace, layer};
  if (is_head_or_outside(f)) return {Category::kHeadOutside, f.made_in.layer};
  return {Category::kOther, f.made_in.layer};
}

const Classifier& default_classifier() {
  static const Classifier classifier;
  return classifier;
}

}  // namespace psc
