// One wave's allocations as liveness keeps them (Made), and what is made of
// them, private to estimator/liveness.cc: the wave-level rules that change
// an allocation's category (estimator/wave_rules.cc) and the terms and
// moments of the wave and of each group's run (estimator/wave_terms.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/categories.h"
#include "estimator/liveness.h"

namespace psc::liveness_internal {

// One allocation made inside a wave, kept until the end of the pass.
struct Made {
  uint64_t alloc_ordinal;
  uint64_t end_ordinal;  // UINT64_MAX: still live at the end of the trace
  uint64_t alloc_seq;
  uint64_t end_seq;  // UINT64_MAX: still live
  uint64_t bytes;
  uint32_t range;
  int32_t wave;
  int32_t layer;
  Category category;
  Category classified_as;           // what the Classifier said, before the wave-level rules
  uint32_t end_range = UINT32_MAX;  // the range it was freed in; UINT32_MAX: still live
};

// ---- estimator/wave_rules.cc: the rules that change categories ----
// A cold wave's allocations with no counterpart in its warm twin become
// first execution.
void pair_first_execution(const std::vector<Made*>& cold, const std::vector<Made*>& warm, WaveLiveness* w);
// The most bytes of `category` live together among `made` (by sequence).
uint64_t most_live(const std::vector<Made*>& made, Category category);
// A cold wave's "gradients" that outlive the others by a whole wave become
// first execution; returns them.
std::vector<const Made*> leftovers_are_first_execution(const std::vector<Made*>& made,
                                                       const std::vector<WaveReport>& waves,
                                                       uint64_t live_gradients_die, WaveLiveness* w);
// A split wave's workspace held across other layers' work becomes its
// pending adapter gradients.
void reclassify_buffered_gradients(const std::vector<Made*>& made);

// ---- estimator/wave_terms.cc: a wave's terms and moments ----
// Each layer's boundaries and the adapter gradients made, of `made`.
void add_layer_terms(const std::vector<Made*>& made, size_t layers, WaveLiveness* w);
// Max live bytes of each term over a wave, and its moments.
void sweep_maxima(const std::vector<Made*>& made, uint64_t backward_start, WaveLiveness* w);
// The ranges a wave opened that tell its last forward's head from its first
// backward's: where its last forward layer opened, and each head range
// opened (where, and its name's string id), in order.
struct HeadRanges {
  bool forward_layer_seen = false;
  uint64_t last_forward_layer = 0;
  struct Opened {
    uint64_t ordinal = 0;
    uint32_t name = 0;
  };
  std::vector<Opened> opened;
};
// WaveLiveness::runs of a wave of several groups.
void split_into_runs(const std::vector<Made*>& made, uint64_t backward_start, const HeadRanges& head, size_t layers,
                     WaveLiveness* w);

}  // namespace psc::liveness_internal
