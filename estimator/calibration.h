// Calibration: the pricing model's terms fitted per model from traced waves
// (docs/design.md, "Calibrated prices: waves never recorded"). What `peakscope calibrate` writes
// and `peakscope check` prices with.
//
// Size-dependent terms (each layer's boundary, the workspace of the
// recomputed layer, the input gradient, the head/output term, the head state
// of a group not yet run, and what is live together at each moment of the
// backward) are fitted by estimator/growth.h: linear or quadratic in the
// group's tokens and squared sequence lengths, chosen from the data, the
// upper envelope of the waves given, so the calibrated term never falls below
// a wave it has seen.
// Residuals (measured − line) are kept per wave and term, so a miss on a
// held-out wave can be traced to the term that caused it.
//
// Exact terms: adapter-gradient bytes per slot and layer (the largest a wave of
// that slot made), and the first-execution allowance (the largest cold − warm
// difference of measured peaks over pairs of the same shape).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "estimator/growth.h"
#include "estimator/liveness.h"

namespace psc {

using CalibrationJson = nlohmann::ordered_json;

// The calibration file's version: what calibrate writes, and the oldest one
// calibration_from_json reads (every version between the two is read).
constexpr int kCalibrationVersion = 2;
constexpr int kOldestCalibrationVersion = 1;

class CalibrationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One wave's term, as measured and as the fitted line (before the margin) says.
struct TermResidual {
  std::string term;
  uint64_t measured = 0;
  double fitted = 0;
  double residual() const { return static_cast<double>(measured) - fitted; }
};
struct WaveResiduals {
  std::string trace;
  int32_t wave = 0;
  int64_t tokens = 0;
  double square_tokens = 0;
  bool cold = false;
  std::vector<TermResidual> terms;
};

// What is live together at one moment of one group's backward beside its
// boundaries and gradients (WaveLiveness::moment_*), fitted from waves of one
// group. The moment's value is the largest of its events' (each allocation
// that raised it), and which event is largest changes with size (a layer's
// linear activations at short waves, its attention probabilities at long
// ones): where the calibration waves made the same sequence of events, each
// event's growth is fitted on its own and the moment is their maximum
// ("events"; events another one bounds at every size are dropped); where the
// sequences differ, the maximum is fitted ("maximum").
struct MomentFit {
  std::vector<GrowthTerm> events;
  std::string method;
  // The values count the layer's own gradients made so far (after-gradient
  // moments fitted from events): pricing takes the layer's calibrated
  // gradient off them. Otherwise after-gradient values are already net of it.
  bool includes_gradient = false;
  // Of such a fit, per event (empty: not measured): the layer's gradient
  // temporaries the calibration's accumulating waves had already added and
  // freed by then, the least any of them had. Their values are counted as if
  // the temporaries stayed (what a wave that makes the gradients holds); a
  // wave whose gradients all exist already holds each event less these.
  std::vector<uint64_t> freed_temporaries;
  double line(WaveSize size) const;
  uint64_t bytes_at(WaveSize size) const {
    return events.empty() ? 0 : bytes_at(size, events.front().extrapolated(size));
  }
  // With the events' (shared) extrapolated() computed once.
  uint64_t bytes_at(WaveSize size, bool extrapolated) const;
  // The same for a wave whose layer's gradients all exist already: each
  // event less its freed temporaries (bytes_at without them).
  uint64_t accumulating_bytes_at(WaveSize size, bool extrapolated) const;
  // For extrapolation warnings: the events share their sizes.
  const GrowthTerm* any() const { return events.empty() ? nullptr : &events.front(); }
  bool prices_like(const MomentFit& other) const;
};

// MomentFit::method of an after-gradient moment read off the before-gradient fit.
inline constexpr const char kScaledBefore[] = "scaled before";

// The after-gradient moments come from waves that made gradients: fitted like
// the others from three sizes or more; from one or two, the larger of the
// before-gradient fit scaled by the largest measured ratio and less the
// smallest measured credit ("scaled before": two sizes would take the
// conservative growth through two points, which packed waves send far above
// a long single sequence); from none, equal to the before-gradient fit (no
// credit, "same as before").
struct MomentFits {
  MomentFit head;
  std::vector<MomentFit> before_gradient;  // per layer
  std::vector<MomentFit> after_gradient;
  // Per layer, the first layer whose fit prices exactly like this one's
  // (itself when none before it does): the layers of one model repeat, and
  // a price reads each distinct fit once. Set by index_repeats().
  std::vector<uint32_t> before_same_as, after_same_as;
};

struct Calibration {
  int32_t layers = 0;
  double safety_factor = 1.1;  // the flat factor, when the margin is not derived
  Margin margin;
  // The factor a wave's required bytes take over its raw bytes.
  double factor(int64_t group_tokens) const { return margin.derived ? margin.factor(group_tokens) : safety_factor; }
  std::vector<GrowthTerm> boundary;        // per decoder layer, per group's tokens
  std::vector<uint32_t> boundary_same_as;  // as MomentFits::before_same_as
  GrowthTerm workspace;
  // What is left of the workspace once the recomputed layer's own gradients are
  // made (the pricing's workspace_after_gradient_bytes), from waves that made
  // adapter gradients. Fitted like the others when those waves have two token
  // counts or more; from one token count, the workspace line scaled by the
  // largest measured ratio. Absent: no such wave, no overlap credit.
  std::optional<GrowthTerm> workspace_after_gradient;
  std::string workspace_after_gradient_method;  // "envelope" or "scaled workspace"
  GrowthTerm input_gradient;
  GrowthTerm output;      // per group, from waves of one group
  GrowthTerm head_saved;  // per group: held by each group whose backward has not run
  // What a group holds beside its boundaries while another group's backward
  // runs, measured on the runs of waves of several groups that waited
  // (WaveLiveness::waiting_bytes). Absent without such runs: head_saved
  // stands for it (what the forward left, a bound: WaveLiveness::head_saved_bytes).
  std::optional<GrowthTerm> waiting;
  // Per group: the most its forward held beside its boundaries
  // (WaveLiveness::moment_forward_bytes), where a wave measured it. What a
  // known backward order charges a group's forward with (predict.cc,
  // forward_at); absent: the head's moment, which holds the forward too.
  std::optional<GrowthTerm> forward_moment;
  // In every one of the calibration's waves of several groups (and there was
  // one), each run freed only boundaries its own group's forward made
  // (WaveLiveness::runs_free_boundaries): a known backward order then credits
  // a group that ran with them (pricing::Forward::runs_free_boundaries).
  bool runs_free_boundaries = false;
  // Absent in calibrations without waves of one group (or written before
  // moments were measured): prices then charge the sum of the terms' maxima.
  std::optional<MomentFits> moments;
  std::map<std::string, std::vector<uint64_t>> adapter_gradient_bytes;  // slot → per layer
  // Fixed costs per sequence (index and length tensors) are not in a packed
  // calibration's fits, which took them into their other coefficients at the
  // calibrated packings; at any other (more sequences, a longer or larger
  // share of longest sequence, one sequence) they can be off by them. Each
  // sequence of a packed group, or of any group priced from a packed
  // calibration, is charged this much: one allocation granule, 64 bytes on the host
  // (PyTorch's CPU alignment), 512 on a device (the caching allocator's
  // smallest block). Measured misses they cover on the held-out models: 2 to
  // 50 bytes a wave (docs/accuracy.md).
  uint64_t sequence_allowance_bytes = 0;
  // The first-execution allowance of a cold wave with one new group shape:
  // once + per_shape, which covers what any calibration cold wave added to
  // its warm twin's peak, or held of first-execution allocations at once,
  // whichever is more, plus the device samples' unexplained growth.
  uint64_t first_execution_bytes = 0;
  // What each further new shape adds (first_execution_allowance): the most a
  // cold wave's first executions kept (all but what one range made and
  // freed: WaveLiveness::first_execution_kept_bytes), plus what its peak
  // rose by beyond them and the device samples' unexplained growth.
  // Calibrations written before it charged first_execution_bytes per shape;
  // read so (= bytes).
  uint64_t first_execution_per_shape_bytes = 0;
  // The most a cold wave's first executions made and freed in one range
  // (scratch), held by one shape at a time.
  uint64_t first_execution_once_bytes = 0;
  // The allowance of a process's first wave (never below
  // first_execution_bytes): its first executions also keep what the process
  // holds from then on (library workspaces, modules). Written to the JSON
  // as first_execution.bytes, the one allowance an older reader charges
  // every cold wave; first_execution_bytes goes as after_first_wave_bytes.
  uint64_t first_execution_first_wave_bytes = 0;
  size_t first_execution_first_wave_pairs = 0;  // traces' first waves with a warm twin
  size_t first_execution_pairs = 0;
  uint64_t first_execution_at_peak_bytes = 0;  // largest of unmatched allocations live at a cold peak
  // Device memory no allocator and no CUPTI record accounts for that a cold
  // wave's samples grew by more than its warm twin's (context, lazily loaded
  // modules, static runtimes' workspaces): the largest over pairs with device
  // samples, added to the pair's peak difference in first_execution_bytes.
  uint64_t first_execution_unexplained_bytes = 0;
  size_t first_execution_device_pairs = 0;  // pairs whose waves have device samples
  std::vector<std::string> traces;
  // What the calibration was told to accept and every price from it repeats
  // (a trace recorded with a host floor, calibrate --allow-host-floor).
  std::vector<std::string> warnings;
  size_t waves = 0;
  std::vector<WaveResiduals> residuals;

  // Adapter-gradient bytes of a slot per layer; a slot never seen gets the
  // largest seen per layer (adapters of one model share their shapes).
  std::vector<uint64_t> slot_gradients(const std::string& slot) const;
};

// Fills the *_same_as indices (calibrate and calibration_from_json call it;
// a calibration built by hand without it prices every layer on its own).
void index_repeats(Calibration& calibration);

// Needs at least one wave with a token count. Throws CalibrationError.
// `use` (when given) picks the waves to fit from: the derived margin fits
// the calibration again with each size left out.
Calibration calibrate(const std::vector<Liveness>& traces, double safety_factor = 1.1,
                      const std::function<bool(const WaveLiveness&)>& use = {});

CalibrationJson calibration_to_json(const Calibration& calibration);
// Throws CalibrationError naming the field that is missing or wrong.
Calibration calibration_from_json(const CalibrationJson& json);
// A cal.json file; throws CalibrationError naming the file (unreadable, not
// JSON) and the field.
Calibration read_calibration(const std::string& path);

}  // namespace psc
