#include "analysis/range_names.h"

namespace psc {
namespace {

constexpr std::string_view kLayerPrefix = "layer.";

struct PhaseWord {
  std::string_view word;
  Phase phase;
};
constexpr PhaseWord kPhaseWords[] = {
    {"forward", Phase::kForward}, {"recompute", Phase::kRecompute}, {"backward", Phase::kBackward},
    {"head", Phase::kHead},       {"optimizer", Phase::kOptimizer},
};

// "layer.<digits>" possibly followed by "/<anything>" (a finer range inside the
// layer). Returns kNoLayer for anything else.
int32_t parse_layer(std::string_view rest) {
  if (rest.substr(0, kLayerPrefix.size()) != kLayerPrefix) return kNoLayer;
  rest.remove_prefix(kLayerPrefix.size());
  int64_t value = 0;
  size_t digits = 0;
  for (; digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9'; ++digits) {
    value = value * 10 + (rest[digits] - '0');
    if (value > kMaxLayer) return kNoLayer;
  }
  if (digits == 0) return kNoLayer;
  if (digits < rest.size() && rest[digits] != '/') return kNoLayer;
  return static_cast<int32_t>(value);
}

}  // namespace

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kOutside: return "outside";
    case Phase::kForward: return "forward";
    case Phase::kRecompute: return "recompute";
    case Phase::kBackward: return "backward";
    case Phase::kHead: return "head";
    case Phase::kOptimizer: return "optimizer";
    case Phase::kWave: return "wave";
  }
  return "outside";
}

RangeName RangeParser::parse(std::string_view name) const {
  if (name == "wave") return {Phase::kWave, kNoLayer};
  const size_t slash = name.find('/');
  if (slash == std::string_view::npos) return {};
  const std::string_view word = name.substr(0, slash);
  const std::string_view rest = name.substr(slash + 1);
  for (const PhaseWord& p : kPhaseWords) {
    if (p.word != word) continue;
    // "<phase>/<something else>" keeps its phase (useful for saying where a
    // peak fell) but has no layer, so no layered category can claim it.
    if (rest.empty()) return {};
    return {p.phase, parse_layer(rest)};
  }
  return {};
}

bool RangeParser::ends_step(std::string_view name) const {
  const size_t slash = name.find('/');
  return slash != std::string_view::npos && name.substr(slash + 1) == "step" && parse(name).phase == Phase::kOptimizer;
}

const RangeParser& default_range_parser() {
  static const RangeParser parser;
  return parser;
}

RangeName RangeTable::lookup_slow(StringId id, const TraceMeta& meta) {
  // An id whose string has not arrived (the recorder's string table was full)
  // is "outside" and is not cached: its text may still come.
  if (id.empty() || id.value >= meta.strings.size()) return {};
  if (id.value >= names_.size()) {
    names_.resize(meta.strings.size());
    parsed_.resize(meta.strings.size());
  }
  names_[id.value] = parser_->parse(meta.string(id));
  parsed_[id.value] = true;
  return names_[id.value];
}

}  // namespace psc
