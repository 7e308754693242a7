// Range names: what an NVTX / psc range name says about where memory was made.
//
// The convention (docs/design.md, "Attribution"): "<phase>/layer.<i>" with phase one
// of forward, recompute, backward, head, optimizer; "head/<name>" and
// "optimizer/<name>" for the parts outside the decoder; "wave" for a
// micro-batch. Anything else is "outside". Other trainers (Megatron, ...) name
// their ranges differently: RangeParser is the seam where an override pattern
// plugs in (for a trainer with its own names, e.g. Megatron's) without the
// analysis knowing.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "format/event.h"
#include "traces/reader.h"

namespace psc {

enum class Phase : uint8_t {
  kOutside = 0,  // no range, or a name the convention does not know
  kForward,
  kRecompute,
  kBackward,
  kHead,
  kOptimizer,
  kWave,
};
constexpr int kPhaseCount = 7;
const char* phase_name(Phase phase);

constexpr int32_t kNoLayer = -1;

// The mark a head module's backward leaves as it begins (the Python helper
// names a head's range "head/<name>" in its forward and its backward alike):
// where what a group's forward left stops growing and its backward starts,
// which the liveness reads what a group holds while it waits by.
inline constexpr std::string_view kHeadBackwardMark = "backward/head";

struct RangeName {
  Phase phase = Phase::kOutside;
  int32_t layer = kNoLayer;  // decoder layer for "<phase>/layer.<i>", else kNoLayer

  bool has_layer() const { return layer != kNoLayer; }
  bool in_layer(Phase p, int32_t l) const { return phase == p && layer == l; }
  friend bool operator==(const RangeName&, const RangeName&) = default;
};

// Turns a range name into a phase and layer. Stateless and cheap enough to run
// once per distinct name; RangeTable caches the answer per string id.
class RangeParser {
 public:
  virtual ~RangeParser() = default;
  virtual RangeName parse(std::string_view name) const;
  // Whether the end of this range ends an optimizer step (the step boundaries
  // of analysis/step_growth.h): an optimizer-phase range whose name after the
  // phase is "step" ("optimizer/step").
  virtual bool ends_step(std::string_view name) const;
};

// The parser the analysis uses when it is given none.
const RangeParser& default_range_parser();

// Largest layer index the default parser accepts; bigger numbers are treated as
// not being a layer (a hostile or mistaken name must not size any table).
constexpr int32_t kMaxLayer = 1 << 20;

// Parse results per StringId of one trace. Strings arrive with the chunks that
// first name them, so the table fills lazily as events ask for ids.
class RangeTable {
 public:
  explicit RangeTable(const RangeParser& parser) : parser_(&parser) {}

  RangeName lookup(StringId id, const TraceMeta& meta) {
    if (id.value < parsed_.size() && parsed_[id.value]) return names_[id.value];
    return lookup_slow(id, meta);
  }

 private:
  RangeName lookup_slow(StringId id, const TraceMeta& meta);

  const RangeParser* parser_;
  std::vector<RangeName> names_;
  std::vector<bool> parsed_;
};

}  // namespace psc
