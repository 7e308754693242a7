#include "analysis/categories.h"

namespace psc {
namespace {

bool is_layer_backward(const RangeName& r) { return r.phase == Phase::kRecompute || r.phase == Phase::kBackward; }
bool ended(const AllocationFacts& f) { return f.end != EndKind::kStillLive; }

}  // namespace

const char* category_name(Category category) {
  switch (category) {
    case Category::kPersistent: return "persistent";
    case Category::kBoundary: return "boundary";
    case Category::kAdapterGradient: return "adapter_gradient";
    case Category::kWorkspace: return "workspace";
    case Category::kInputGradient: return "input_gradient";
    case Category::kOutput: return "output";
    case Category::kForwardScratch: return "forward_scratch";
    case Category::kFirstExecution: return "first_execution";
  }
  return "output";
}

bool category_is_per_layer(Category category) {
  return category == Category::kBoundary || category == Category::kAdapterGradient ||
         category == Category::kWorkspace || category == Category::kInputGradient ||
         category == Category::kForwardScratch;
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

// State a checkpoint saves for layer i outside any layer's range (the RNG
// state torch.utils.checkpoint stashes before calling the layer) and that
// layer i's recompute releases, in the same wave: it is held exactly like layer
// i's saved input, so it is part of boundary(i).
bool is_saved_between_layers(const AllocationFacts& f, int32_t* layer) {
  const bool made_between_layers = f.made_in.phase == Phase::kWave || f.made_in.phase == Phase::kOutside;
  if (!made_between_layers || !ended(f) || !is_layer_backward(f.ended_in) || !f.ended_in.has_layer()) return false;
  if (f.made_in_wave < 0 || f.ended_in_wave != f.made_in_wave) return false;
  *layer = f.ended_in.layer;
  return true;
}

// The gradient of a layer's input: made by its recompute/backward, consumed by
// the layer below (or by the embedding's backward, outside the decoder); or
// the one the head's backward hands the top layer, one link earlier.
bool is_input_gradient(const AllocationFacts& f, int32_t* layer) {
  if (!ended(f)) return false;
  if (is_layer_backward(f.made_in) && f.made_in.has_layer()) {
    const bool to_lower_layer =
        is_layer_backward(f.ended_in) && f.ended_in.has_layer() && f.ended_in.layer < f.made_in.layer;
    if (!to_lower_layer && f.ended_in.has_layer()) return false;
    *layer = f.made_in.layer;
    return true;
  }
  if (f.made_in.phase != Phase::kHead || !is_layer_backward(f.ended_in) || !f.ended_in.has_layer()) return false;
  *layer = f.ended_in.layer;
  return true;
}

bool is_forward_scratch(const AllocationFacts& f, int32_t* layer) {
  if (f.made_in.phase != Phase::kForward || !f.made_in.has_layer() || !ended(f)) return false;
  if (!f.ended_in.in_layer(Phase::kForward, f.made_in.layer)) return false;
  *layer = f.made_in.layer;
  return true;
}

Attribution Classifier::classify(const AllocationFacts& f) const {
  int32_t layer = kNoLayer;
  if (f.outlives_next_wave) return {Category::kPersistent, f.made_in.layer};
  if (is_boundary(f, &layer)) return {Category::kBoundary, layer};
  if (is_adapter_gradient(f, &layer)) return {Category::kAdapterGradient, layer};
  if (is_workspace(f, &layer)) return {Category::kWorkspace, layer};
  if (is_saved_between_layers(f, &layer)) return {Category::kBoundary, layer};
  if (is_input_gradient(f, &layer)) return {Category::kInputGradient, layer};
  if (is_forward_scratch(f, &layer)) return {Category::kForwardScratch, layer};
  return {Category::kOutput, f.made_in.layer};
}

const Classifier& default_classifier() {
  static const Classifier classifier;
  return classifier;
}

}  // namespace psc
