// One wave's allocations as liveness keeps them (Made), and what is made of
// them, private to estimator/liveness.cc: the wave-level rules that change
// an allocation's category (estimator/wave_rules.cc) and the terms and
// moments of the wave and of each group's run (estimator/wave_terms.cc).
#pragma once

#include <cstdint>
#include <optional>
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
// The ranges a wave opened that tell its last forward's head from its first
// backward's: where its last forward layer opened, each head range opened
// (where, and its name's string id), in order, and where a head's backward
// left its mark (kHeadBackwardMark).
struct HeadRanges {
  bool forward_layer_seen = false;
  uint64_t last_forward_layer = 0;
  struct Opened {
    uint64_t ordinal = 0;
    uint32_t name = 0;
  };
  std::vector<Opened> opened;
  // Each mark, and the last memory event of a head or forward range before
  // it: the forward had ended by the mark, and not before that event.
  struct Mark {
    uint64_t ordinal = 0;
    uint64_t forward_end = 0;
  };
  std::vector<Mark> backward_marks;
  uint64_t forward_end = 0;  // while reading: the last such event so far
};
// Where the head's backward begins after `after`: the first mark a head's
// backward left after the wave's last forward layer opened and `after`, and
// before `backward_start`; none without one (a trace annotated without the
// mark, or a head that runs no backward of its own).
std::optional<HeadRanges::Mark> head_backward_mark(const HeadRanges& head, uint64_t after, uint64_t backward_start);
// Max live bytes of each term over a wave, and its moments. head_saved_bytes
// is the most the head held before `head_until` (at most `backward_start`:
// where the head's backward begins, as far as it is known) and, where a
// mark says where the head's backward began (`mark`), no more than what the
// forward left: what was live at the mark and what was freed between the
// forward's last event and the mark.
void sweep_maxima(const std::vector<Made*>& made, uint64_t backward_start, uint64_t head_until,
                  const std::optional<HeadRanges::Mark>& mark, WaveLiveness* w);
// WaveLiveness::runs of a wave of several groups.
void split_into_runs(const std::vector<Made*>& made, uint64_t backward_start, const HeadRanges& head, size_t layers,
                     WaveLiveness* w);

}  // namespace psc::liveness_internal
