// The device section of `peakscope report` (text and --json), shown only when
// the trace has device samples, CUPTI events or a CUPTI notice. Field names
// are documented in docs/report.md ("Device section").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"

namespace psc {

nlohmann::ordered_json device_usage_to_json(const Analysis& analysis);
// Appends the section to `out`; nothing when analysis.device.present is false.
void render_device_usage_text(const Analysis& analysis, std::string& out);

}  // namespace psc
