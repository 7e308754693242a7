// The machine-readable form of an Analysis: what `peakscope report --json`
// prints. Documented in docs/report.md ("`--json`"); its fields are only ever
// added to (docs/design.md, "Interfaces and their versions").
#pragma once

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"

namespace psc {

nlohmann::ordered_json analysis_to_json(const Analysis& analysis);
nlohmann::ordered_json live_breakdown_to_json(const LiveBreakdown& live);
const char* read_state_name(ReadStatus::State state);

}  // namespace psc
