// A run is a set of traces: one per rank of a distributed job (and the
// launcher's, and forked children's). Given each trace's analysis, the run's
// table: a row per trace ordered by rank, where each peaked, every wave's
// measured peak by rank and its spread, and the busiest rank: the one that
// runs out of memory first (README "Distributed runs").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/analysis.h"
#include "analysis/report_text.h"
#include "traces/run.h"

namespace psc {

struct RunReport {
  std::string id;                        // the run's id (traces/run.h), "" when nothing names it
  std::string id_source;                 // where the id came from
  std::vector<const Analysis*> members;  // ordered: by rank (unranked last), then pid
  int busiest = -1;                      // index into members of the highest peak; -1 when nothing peaked
  std::vector<std::string> notes;        // what a reader should know (several hosts, a rank missing, ...)
};

// Orders the analyses and finds the busiest; they must outlive the result.
// `run` (what traces/run.h grouped them into) gives the run's id.
RunReport make_run_report(const std::vector<Analysis>& analyses, const Run* run = nullptr);

// The table, then the busiest rank's report rendered with `options`.
std::string render_run_text(const RunReport& run, const TextOptions& options = {});
// {"run": {...the table...}, "reports": [analysis_to_json of each member]}.
nlohmann::ordered_json run_to_json(const RunReport& run);

}  // namespace psc
