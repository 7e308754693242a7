// Liveness terms of every wave: each allocation made inside a wave, by its
// category (analysis/categories.h: the one classification; each category
// but persistent and forward_scratch is a term of the pricing model,
// docs/design.md "The pricing model"), and the bytes of each term the wave needed. What
// calibration fits and check compares.
//
// Built on the report's analysis (baselines, peaks) and collected in the same
// read of the trace as its breakdowns (an observer of analysis/lifetime_pass.h
// that keeps every allocation made inside a wave, not only those live at a
// snapshot). Memory: O(allocations made inside waves), kept as 56-byte records
// until the end of the read.
//
// What liveness adds to one allocation's category, from the wave as a whole:
//   - gradients already live when a wave begins are its baseline, not its
//     pending adapter_gradient (read from the trace);
//   - workspace, input_gradient and output are priced by their max live over
//     the wave (output from the first layer recompute/backward to its end);
//   - first_execution: in a cold wave, with no counterpart (same range and
//     size, in order) in a warm wave of the same shape;
//   - a split wave's buffered per-child gradients are adapter gradients.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/analysis.h"
#include "estimator/growth.h"

namespace psc {

struct WaveLiveness {
  int32_t index = 0;
  // The trace's first wave with a token count (a process's first training
  // wave): its first executions are the process's too.
  bool first_in_trace = false;
  int64_t tokens = 0;  // from the payload; 0 when it has none
  // The payload's sequence_lengths when they add up to tokens (a packed
  // wave); empty otherwise (one sequence).
  std::vector<int64_t> sequence_lengths;
  WaveSize size() const { return packed(tokens, sequence_lengths); }
  bool cold = false;
  int64_t groups = 1;
  std::vector<std::string> slots;
  // The payload's list of groups (each its own tokens, packing and slot, in
  // forward order); empty when it gave a count of equal parts.
  struct Group {
    int64_t tokens = 0;
    std::vector<int64_t> sequence_lengths;  // empty: one sequence
    std::string slot;
    WaveSize size() const { return packed(tokens, sequence_lengths); }
    bool operator==(const Group&) const = default;
  };
  std::vector<Group> group_list;
  // The order the groups' backwards ran (indices into the groups), when the
  // payload says (`backward_order`); empty otherwise.
  std::vector<int32_t> backward_order;
  // Each group's size in forward order: the list's, or equal parts.
  std::vector<WaveSize> group_sizes() const;
  // The largest group's tokens.
  int64_t largest_group_tokens() const;
  std::string payload_raw;
  // A split wave's children (payload "children": [{"tokens", "groups",
  // "slots"}, ...]); empty for an ordinary wave.
  struct Child {
    int64_t tokens = 0;
    int64_t groups = 1;
    std::vector<std::string> slots;
  };
  std::vector<Child> children;

  uint64_t baseline_bytes = 0;
  uint64_t measured_peak_bytes = 0;
  RangeName peak_in;       // the range where the wave's peak was reached
  std::string peak_range;  // its name
  uint64_t peak_seq = 0;

  // Per decoder layer 0..layers-1 (the trace's largest layer + 1).
  std::vector<uint64_t> boundary_bytes;
  std::vector<uint64_t> pending_gradient_bytes;        // made in this wave
  std::vector<uint64_t> gradient_live_at_start_bytes;  // adapter gradients live when it began
  uint64_t workspace_bytes = 0;                        // max live
  uint64_t input_gradient_bytes = 0;                   // max live
  uint64_t output_bytes = 0;                           // max live during the backward
  // What the head holds after its forward, a bound: the most output-term
  // bytes live before the backward begins (the first layer's backward, or a
  // later run's start) and, where the trace marks where the head's backward
  // began (kHeadBackwardMark, which the Python helper leaves), no more than
  // those live there plus those freed since the forward's last event (an
  // unannotated loss's backward may run first). A group whose backward has
  // not run yet holds what its forward left.
  uint64_t head_saved_bytes = 0;
  uint64_t forward_scratch_bytes = 0;  // max live (not priced)
  // Max live adapter-gradient bytes made in the wave. The sum of
  // pending_gradient_bytes in a wave of one forward; less in a split, whose
  // buffered per-child gradients are freed when the last child's arrive.
  uint64_t pending_gradient_max_live_bytes = 0;
  // What is left of a recomputed layer's workspace once that layer's own
  // adapter gradients are made: the largest (workspace live + the layer's
  // gradients made so far) while the layer runs, less the layer's gradients,
  // over the layers that made gradients in this wave. -1: none did.
  int64_t workspace_after_gradient_bytes = -1;
  // What is live together at each moment of the backward beside boundaries,
  // adapter gradients and first-execution allocations (workspace, input
  // gradient, output, forward scratch): the pricing's moments
  // (docs/pricing.md). `moment_head_bytes` is the most before the first
  // layer's recompute (the head's forward and backward, all boundaries live);
  // per layer, the most while it recomputes and runs its backward before its
  // own gradients are made, and the most of (that + its gradients made so
  // far) once they are, less its gradients. -1: the moment was not seen.
  int64_t moment_head_bytes = -1;
  // Of a run, the most of the same terms its group's forward held (part of
  // its head's moment, which also holds the head's backward). -1: not seen
  // (a wave of one group, the group forwarded last, forwards that do not
  // cut into groups: the first run's head backward, before the first
  // layer's, cannot be told from the last forward).
  int64_t moment_forward_bytes = -1;
  std::vector<int64_t> moment_before_gradient_bytes;
  std::vector<int64_t> moment_after_gradient_bytes;
  // The value of each moment after every allocation that raised it, in
  // order: [0] the head, [1 + i] layer i's recompute and backward, counting
  // the layer's own gradients made so far (an accumulating wave's temporary
  // gradients are workspace: the two line up). The same program at another
  // size makes the same allocations, so calibration can follow each event's
  // growth rather than the maximum's, whose event changes with size; it
  // lines the sizes' events up by their allocations (calibration.cc), since
  // a program may make one of them earlier at one size than at another.
  // moment_gradient_from[i]: the first of layer i's events with its own
  // gradients made (-1: the wave made none there).
  std::vector<std::vector<int64_t>> moment_events;
  std::vector<int64_t> moment_gradient_from;
  // Indexed as moment_events, the allocation behind each event. Where the
  // wave made a layer's own gradient, an accumulating wave of another size
  // makes a temporary of the same size at the same event, freed soon after.
  struct EventAllocation {
    uint64_t ordinal = 0;
    uint64_t end_ordinal = UINT64_MAX;
    uint64_t bytes = 0;
    bool gradient = false;
  };
  std::vector<std::vector<EventAllocation>> moment_event_allocations;

  // A wave of several groups, its backward cut into one run per group (in
  // the order they ran): each run a wave of one group at that group's size,
  // holding only what is the group's own — the allocations made while it ran,
  // and those made before the backward that it freed (its boundaries, its
  // head state); the other groups' waiting state is not in its moments. What
  // calibration fits per-group terms from. Empty when the wave has one group,
  // is split, or its backward did not cut into as many runs as it has groups
  // (liveness.cc, split_into_runs).
  std::vector<WaveLiveness> runs;
  // Of a run after the first: the most it held beside its boundaries (its
  // head state, what its forward left) while the runs before it ran — what
  // a group holds while it waits. -1: not measured (a wave of one group, the
  // first run).
  int64_t waiting_bytes = -1;
  // Of a wave cut into runs: 1 when every boundary each run freed was made by
  // its own group's forward (a group's boundaries are gone once its run
  // ends), 0 when a run freed another group's (or the forwards did not cut
  // into groups); -1: not measured (no runs).
  int8_t runs_free_boundaries = -1;
  // Of a run: which group it is (an index into the wave's groups, in
  // forward order); -1 otherwise.
  int32_t group = -1;

  // Every allocation made in the wave, by term: total bytes and count.
  std::array<uint64_t, kCategoryCount> made_bytes{};
  std::array<uint64_t, kCategoryCount> made_allocations{};
  // Bytes of each term live at the wave's peak (made in the wave).
  std::array<uint64_t, kCategoryCount> at_peak_bytes{};

  // Cold-versus-warm pairing; -1 when the wave is warm or has no warm twin.
  int32_t warm_twin = -1;
  uint64_t first_execution_bytes = 0;          // unmatched allocations, in all
  uint64_t first_execution_at_peak_bytes = 0;  // of those, live at the peak
  // Of those, the most live together at any moment of the wave: the warm
  // twin's state at that moment plus this bounds the cold wave's peak
  // wherever it falls (the peak delta alone does not: a cold wave's peak can
  // sit at another moment than its twin's, and the gap between the two
  // moments changes with size).
  uint64_t first_execution_max_live_bytes = 0;
  // Of those, the bytes not made and freed in one range of the wave: what
  // its new shapes left behind (a kernel library's plans and caches, kept
  // per shape), or held from one range to another (a group's forward to its
  // backward, while other groups run), which a wave of several new shapes
  // holds once per shape; what first executions make and free in one range
  // (scratch) is held by one shape at a time.
  uint64_t first_execution_kept_bytes = 0;
};

// An allocation whose category the wave-level rules changed (first_execution,
// a split's buffered gradient): the report applies these to its breakdowns.
struct CategoryChange {
  uint64_t alloc_ordinal = 0;
  uint64_t end_ordinal = UINT64_MAX;  // UINT64_MAX: still live at the end
  uint64_t bytes = 0;
  std::string range;  // where it was made
  int32_t layer = kNoLayer;
  Category from = Category::kOutput;  // the Classifier's category
  Category to = Category::kOutput;
};

struct Liveness {
  std::string path;
  int32_t layers = 0;
  Analysis analysis;  // the report's analysis the terms build on
  std::vector<WaveLiveness> waves;
  // Every allocation of the analysed level, by the Classifier's category.
  std::array<uint64_t, kCategoryCount> category_allocations{};
  std::array<uint64_t, kCategoryCount> category_bytes{};
  std::vector<CategoryChange> category_changes;  // in birth order
};

struct LivenessOptions {
  // Only what changes categories (CategoryChange), not the terms: keeps the
  // allocations of cold waves, their warm twins and split waves only.
  bool categories_only = false;
};

// Throws TraceError when the file is not a readable trace.
// `options.observers` read the same trace in the same read.
Liveness analyze_liveness(const std::string& path, const AnalysisOptions& options = {},
                          const LivenessOptions& what = {});

// Removes the waves the trace stops inside (a process killed mid-wave, a
// trace still being written): their figures are partial, a calibration must
// not learn from them. Only those at the end go (waves are numbered by
// position, and a cold wave's warm twin by its number); returns how many.
size_t drop_unfinished_waves(Liveness* liveness);

// The breakdowns of `analysis` (the peak's, each wave's) with the changes
// applied: what `peakscope report` prints, in the categories liveness uses.
void apply_category_changes(const std::vector<CategoryChange>& changes, Analysis* analysis);

// What `peakscope report` prints: the trace's analysis with those changes
// applied, from the same two reads (keeping the allocations of cold, twin and
// split waves only). Throws TraceError when the file is not a readable trace.
Analysis analyze_report(const std::string& path, const AnalysisOptions& options = {});

// Why the waves of `t` cannot be trusted to show everything they allocate;
// empty when they can. A host trace recorded with a size floor (an explicit
// PEAKSCOPE_HOST_MIN_BYTES above 1, or a file from before every block was
// the default) lacks the blocks under it, and a block that grows with the
// wave crosses the floor at some sizes and not at others: the fits see
// different events at different sizes and price below the truth between
// them (docs/accuracy.md). `calibrate` and `check` refuse such a trace
// unless told to accept it (--allow-host-floor), and then say so.
std::string host_floor_problem(const Liveness& t);

// Why the waves of `t` that have no usable token count are left out of a
// calibration and a check: one line each (a payload problem, a wave that
// overlapped another, no payload mark), at most `most` and then a count.
std::vector<std::string> waves_left_out(const Liveness& t, size_t most = 5);

// What calibrate and check tell of a trace before they read its waves, and
// what they leave out: the trace not read whole (incomplete_read_note, with
// `verb`: "calibrated from", "checked"), waves without a usable token count
// (waves_left_out), and the waves it stops inside, which this drops
// (drop_unfinished_waves). One line each; none for a trace read whole whose
// every wave counts.
std::vector<std::string> set_aside_partial_waves(Liveness* t, const char* verb);

// Shape of a wave for cold/warm pairing: tokens, packing, groups and slots.
bool same_shape(const WaveLiveness& a, const WaveLiveness& b);

}  // namespace psc
