// Memory that stays live across optimizer steps and grows: the slow leak that
// ends in an out-of-memory error hours into a run.
//
// A step boundary is the end of a range the range parser says ends a step
// (RangeParser::ends_step: "optimizer/step"); a step range inside another one
// is not a boundary of its own. At each boundary the observer takes the live
// bytes of the analysed level by attributed range (the range each allocation
// was made in, as the report groups it).
//
// The rule: a range is growing when its live bytes at the step ends rose at
// each of the last K of them, K = min(steps - 1, 3): two step ends suffice
// (one block leaked per step is found when the second step ends), three
// rises in a row are needed once there are four or more. Memory made by the
// end of the first step and kept (weights, optimizer state) never rises; memory
// made once later (a lazily built cache) rises at one step end only, so it is
// flagged only when made in the second of exactly two steps; memory made and
// freed within each step (activations, gradients freed by
// zero_grad(set_to_none=True)) never rises from one step end to the next. A
// step ends at its range's end, before a zero_grad that follows it: gradients
// still live then count, the same at every step. Bytes per step are the rise over
// the whole run of rises that ends at the last step end, divided by its
// length. A leak that skips a step (one block every other step) has no
// such run and is not flagged.
//
// Memory: one small record per range that ever held live memory and the kept
// step ends; each memory event adds to or takes from its range's live bytes,
// each boundary is one pass over the ranges. Never O(events).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/lifetime_pass.h"
#include "analysis/range_names.h"

namespace psc {

// Step ends kept for the report: the first and the last half of these.
constexpr size_t kKeptStepEnds = 1024;
// The most rises in a row the rule asks for.
constexpr uint64_t kGrowthWindow = 3;

class StepGrowthObserver : public LifetimeObserver {
 public:
  explicit StepGrowthObserver(const RangeParser& parser) : parser_(&parser), table_(parser) {}

  void on_event(const Event& e, uint64_t ordinal, const ScopeTracker& scope, const TraceMeta& meta) override;
  void on_memory_event(const MemoryEventView& memory) override;
  void on_lifetime(LifetimeView& lifetime) override;
  void on_finish(const TraceMeta& meta) override;

  // Valid after the read.
  const StepGrowth& result() const { return result_; }

 private:
  struct RangeState {
    uint64_t live_bytes = 0;  // now
    uint64_t live_allocations = 0;
    uint64_t step_bytes = 0;  // at the last step end
    uint64_t step_allocations = 0;
    uint64_t rise_from = 0;  // live bytes at the step end where the current rise began
    uint64_t rises = 0;      // step ends in a row at which live bytes rose
  };

  bool ends_step(StringId name, const TraceMeta& meta);
  void step_end(const Event& e);

  const RangeParser* parser_;
  RangeTable table_;
  std::unordered_map<uint32_t, bool> step_names_;  // by string id, once its text is known
  std::unordered_map<uint32_t, RangeState> ranges_;
  uint64_t open_steps_ = 0;
  StepGrowth result_;
  std::vector<StepEnd> last_;  // the latest kKeptStepEnds / 2, oldest first, once the first half is full
  size_t last_next_ = 0;       // where the next one goes in last_
};

}  // namespace psc
