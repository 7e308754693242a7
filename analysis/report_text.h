// The human-readable form of an Analysis: what `peakscope report` prints.
#pragma once

#include <cstdint>
#include <string>

#include "analysis/analysis.h"
#include "common/bytes.h"

namespace psc {

struct TextOptions {
  size_t max_ranges = 20;    // rows of the "by range" table
  bool wave_layers = false;  // the per-layer table at each wave's peak (report --waves)
};

std::string render_analysis_text(const Analysis& analysis, const TextOptions& options = {});

// "1,234,567"
std::string grouped(uint64_t value);

}  // namespace psc
