// Prices from a calibration alone (docs/design.md, "Calibrated prices: waves
// never recorded"): the plan of a wave nobody recorded, built from the calibrated
// terms at the wave's size, priced by pricing/pricing.h at its worst moment;
// and the largest wave that fits a budget. `peakscope check` prices recorded
// waves through the same plans, so its accuracy table measures these prices.
//
// A plan of several gradient groups (one per slot, in forward order) gives
// each group its own size (WaveRequest::groups), or splits the wave's tokens
// and sequences evenly. With moments in the calibration every group carries
// its moments at its size (docs/pricing.md); without, the terms' maxima are
// summed, as the design wrote them. Either way each group holds its head
// state until its backward begins, and the worst order of the groups is
// priced (pricing.h, AdapterTerm).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "estimator/calibration.h"
#include "pricing/admission.h"
#include "pricing/pricing.h"

namespace psc {

// A request the calibration cannot answer; `field()` names the part of it.
class PredictError : public std::runtime_error {
 public:
  PredictError(std::string field, const std::string& reason)
      : std::runtime_error(field + ": " + reason), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// One gradient group of a wave: its own tokens and packing, and its slot.
struct GroupRequest {
  int64_t tokens = 0;
  std::vector<int64_t> sequence_lengths;  // empty: one sequence
  std::string slot;                       // empty: the calibration's only slot (a wave of one group)
};

struct WaveRequest {
  int64_t tokens = 0;
  std::vector<int64_t> sequence_lengths;  // a packed wave; empty: one sequence
  std::vector<std::string> slots;         // one gradient group each; empty: the calibration's only slot
  bool cold = false;                      // a shape not run before: the first-execution allowance
  // With cold: the process has run a wave before, so the wave pays what a
  // new shape adds, not what a process's first wave adds (workspaces and
  // modules kept from then on). Default: it may be the first.
  bool after_first_wave = false;
  // A later wave of gradient accumulation: the slots' gradients already
  // exist, nothing is pending. Default: the step's first wave, all pending.
  bool gradients_exist = false;
  // Each group's own size, in forward order; when given, `tokens` is their
  // sum (0: filled in), `sequence_lengths` and `slots` stay empty. Empty:
  // `tokens` split evenly between the slots.
  std::vector<GroupRequest> groups;
  // The order the groups' backwards run, as indices into the groups (or the
  // slots), when the trainer fixes it; empty: any order, priced at the worst.
  std::vector<int32_t> backward_order;
};

// The terms a price was extrapolated from: sizes outside what they were
// calibrated on, or fitted from fewer than three sizes. Either way the term
// took its conservative growth (estimator/growth.h).
struct Extrapolation {
  std::vector<std::string> outside;    // term names, sorted, unique
  std::vector<std::string> few_sizes;  // likewise
  // Groups priced waiting with what their forward left (head_saved; the
  // calibration measured no group waiting for another): a bound, said so.
  bool waiting_assumed = false;
  // Which features of the sizes read lie outside the calibrated ones
  // (GrowthTerm::Outside bits), and the longest sequence's square read
  // beyond the calibrated longest (0: none).
  uint8_t features = 0;
  double longest_square_beyond = 0;
  // A wave of one sequence read from terms calibrated on packed waves only:
  // its Σl² / t² (1) beyond every calibration wave's, which the fit in (t,
  // Σl²) never varied apart from the tokens.
  bool one_sequence_unseen = false;
  // A wave of one sequence shorter than any calibrated one (GrowthTerm::
  // below_knots): the longest such, and the shortest calibrated.
  int64_t shorter_one_sequence = 0, shortest_one_sequence = 0;
  // A packed group of shorter sequences than any calibrated packing (fewer
  // squares than the calibration's hull at its tokens: GrowthTerm::
  // squares_floor), the largest such: its tokens, squares and the hull's.
  int64_t shorter_tokens = 0;
  double shorter_squares = 0, shorter_floor = 0;
  // A group no calibration wave bounds though each of its features lies
  // inside the calibrated ones (the three kinds above).
  bool unbounded() const { return one_sequence_unseen || shorter_one_sequence > 0 || shorter_tokens > 0; }
  // `term` read at `size`, where `fit.outside_mask(size)` is `mask` (the
  // reader has it already). `term` is a name with static storage: each is
  // kept once, by pointer, without building a string per term read (a price
  // reads hundreds).
  void note(const char* term, const GrowthTerm& fit, WaveSize size, uint8_t mask);
  // One line per kind, empty when nothing was extrapolated.
  std::vector<std::string> warnings(const Calibration& calibration) const;

 private:
  std::vector<const char*> noted_outside_, noted_few_;
};

// A plan of no forward yet: the calibration's margin for a wave whose
// largest group has `group_tokens` tokens (Calibration::factor), and its
// first-execution allowance charged when the wave is cold
// (first_execution_allowance).
pricing::Plan calibrated_plan(const Calibration& calibration, bool cold, int64_t group_tokens, size_t groups = 1,
                              bool first_wave = true);
// The first-execution allowance of a cold wave of `groups` group shapes
// (group_shapes): a wave says it is cold, not which of its groups are new,
// so every shape is taken to be new. Each new shape keeps what its first
// executions leave behind (per_shape), and the first executions' own
// scratch is made and freed by one shape at a time (charged once):
// first_execution_bytes + first_execution_per_shape_bytes × (groups − 1).
// Charged once a wave in all, cold waves of two new group sizes priced
// 2.3 KB under (docs/accuracy.md). A process's first wave (`first_wave`)
// starts from first_execution_first_wave_bytes instead.
inline uint64_t first_execution_allowance(const Calibration& calibration, size_t groups, bool first_wave = true) {
  uint64_t further = 0, all = 0;  // saturating: a calibration's counts are read from a file
  const uint64_t first = first_wave
                             ? std::max(calibration.first_execution_first_wave_bytes, calibration.first_execution_bytes)
                             : calibration.first_execution_bytes;
  if (__builtin_mul_overflow(calibration.first_execution_per_shape_bytes,
                             static_cast<uint64_t>(std::max<size_t>(1, groups) - 1), &further) ||
      __builtin_add_overflow(first, further, &all))
    return UINT64_MAX;
  return all;
}
// How many shapes (tokens and packing) the groups of `sizes` have: equal
// WaveSizes are one shape.
size_t group_shapes(const std::vector<WaveSize>& sizes);

// Prices the plan's forward in the backward order the trainer runs (indices
// into its groups; empty: any order, the worst). A group that ran keeps a few
// bytes beside its gradients that waves of other orders took into the
// moments' intercepts (its loss, a scalar or two): each group but the running
// one is charged one allocation granule (Calibration::sequence_allowance_bytes)
// for them; measured misses this covers on the held-out models: 11 to 12
// bytes a wave (docs/accuracy.md). A cold wave's allowance is the plan's, once
// per group shape in either order (calibrated_plan). Where the order's price comes
// to no less than the worst order's, the plan stays in the worst order. Returns the
// price of the plan it leaves, when it priced one (an order of two groups or
// more), so that a caller need not price it again. Throws PredictError for an
// order that is not every group's index once.
std::optional<pricing::Price> set_backward_order(const Calibration& calibration, pricing::Plan& plan,
                                                 const std::vector<int32_t>& order);

// One forward of groups of `sizes` (in forward order) training `slots` in
// order. `live_at_start` (per layer) is what is known to be live of the
// slots' adapter gradients when the wave begins; groups consume it in forward
// order. Unknown slots get the largest gradients calibrated per layer.
pricing::Forward calibrated_forward(const Calibration& calibration, const std::vector<WaveSize>& sizes,
                                    const std::vector<std::string>& slots, bool floor_only,
                                    std::vector<uint64_t>& live_at_start, Extrapolation* extrapolation = nullptr);

// A wave split into children of one slot set (at most one slot) whose
// backwards run as one: one forward whose groups are the children, the
// last-forwarded child carrying the slot's gradients (docs/accuracy.md).
pricing::Forward calibrated_split(const Calibration& calibration, const std::vector<WaveSize>& children,
                                  const std::vector<std::string>& slots, bool floor_only,
                                  Extrapolation* extrapolation = nullptr);

struct Prediction {
  int64_t group_tokens = 0;  // the largest group's: what the margin's distance is read at
  pricing::Plan plan;
  pricing::Price price;
  Extrapolation extrapolation;
};

// Throws PredictError naming the field: no tokens, sequence lengths that do
// not add up, a slot the calibration never saw, groups without slots.
Prediction predict(const Calibration& calibration, const WaveRequest& request);

// The wave of `tokens` shaped like `shape`: packed into sequences of at most
// `max_sequence_length` tokens (0: one sequence); with groups, their tokens
// are relative shares of the wave (as rank_tokens splits it; every group at
// least one token), each group packed on its own.
WaveRequest wave_at(const WaveRequest& shape, int64_t tokens, int64_t max_sequence_length);

// The largest wave (in tokens, up to max_tokens) whose required bytes fit
// `budget_bytes`, for waves shaped like `shape` (wave_at; its tokens and
// sequences ignored). Binary search over the exact price: the calibrated terms
// do not shrink as a wave grows.
pricing::Admission admit_wave(const Calibration& calibration, const WaveRequest& shape, int64_t max_sequence_length,
                              int64_t max_tokens, pricing::Bytes budget_bytes);

// A wave split between the ranks of a data-parallel run by relative shares
// (`shares[r]` of rank r: 1,1.5 gives rank 1 one and a half times rank 0's
// tokens). Each rank's part is round(tokens x share / sum of shares), the
// last rank taking what rounding leaves, so the parts add up to the wave.
// The rank that needs the most is the wave's price: its memory runs out
// first (README "Distributed runs"). Throws PredictError for a share that is
// not positive.
std::vector<int64_t> rank_tokens(int64_t tokens, const std::vector<double>& shares);

struct RankPrediction {
  int32_t rank = 0;
  int64_t tokens = 0;
  Prediction prediction;
};
struct RunPrediction {
  std::vector<RankPrediction> ranks;
  size_t busiest = 0;  // the rank of the largest required bytes
  const Prediction& price() const { return ranks[busiest].prediction; }
};
// Each rank's part of `request` priced as a wave of its own (its sequences
// packed at most `max_sequence_length` long, 0: one sequence).
RunPrediction predict_ranks(const Calibration& calibration, const WaveRequest& request,
                            const std::vector<double>& shares, int64_t max_sequence_length);

// The largest wave (all ranks' tokens together) whose busiest rank's part
// fits `budget_bytes`; the Admission's price is that rank's.
pricing::Admission admit_run_wave(const Calibration& calibration, const WaveRequest& shape,
                                  const std::vector<double>& shares, int64_t max_sequence_length, int64_t max_tokens,
                                  pricing::Bytes budget_bytes);

// The most sequences a priced wave may have (its lengths are listed).
constexpr size_t kMaxSequences = size_t{1} << 20;

// The sequences of a wave of `tokens` packed at most `max_sequence_length`
// long (0: one sequence). Throws PredictError past kMaxSequences.
std::vector<int64_t> packed_sequences(int64_t tokens, int64_t max_sequence_length);
// Throws PredictError naming max_sequence_length when `tokens` (`what`:
// the field they come from) packed at most `max_sequence_length` long are
// more than kMaxSequences sequences.
void check_packing(int64_t tokens, int64_t max_sequence_length, const char* what);

}  // namespace psc
