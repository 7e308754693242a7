// The machine-readable form of an Analysis: what `peakscope report --json`
// prints (a superset of DESIGN.md's "report --json" fields). Documented in
// docs/report.md.
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"

namespace psc {

nlohmann::ordered_json analysis_to_json(const Analysis& analysis);
nlohmann::ordered_json live_breakdown_to_json(const LiveBreakdown& live);
const char* read_state_name(ReadStatus::State state);

}  // namespace psc
