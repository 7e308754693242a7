// peakscope report TRACE [--json] [--top N] [--timeline N]
//
// Peak, where it was reached, what is live at it by category, layer and range,
// and each wave's baseline and peak. Exit 0 also for a truncated or corrupt
// trace (what was read is reported, with a warning); 2 for a file that is not a
// trace at all (TraceError names the file and byte offset).
#include <cstdio>
#include <string>

#include <fmt/core.h>

#include "analysis/analysis.h"
#include "analysis/report_json.h"
#include "analysis/report_text.h"
#include "estimator/liveness.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"

namespace psc::cli {
namespace {

constexpr const char* kUsage = "usage: peakscope report TRACE [--json] [--top N] [--timeline N]";

struct ReportOptions {
  std::string trace;
  bool json = false;
  size_t top = 20;
  size_t timeline_points = 100;
};

// False for -h: the usage is printed.
[[nodiscard]] bool parse(int argc, char** argv, ReportOptions& o) {
  ArgParser args(kUsage);
  args.flag({"--json"}, &o.json);
  args.option({"--top"}, [&](const std::string& name, const std::string& value) {
    o.top = static_cast<size_t>(parse_count(name, value));
  });
  args.option({"--timeline"}, [&](const std::string& name, const std::string& value) {
    o.timeline_points = static_cast<size_t>(parse_count(name, value));
  });
  args.positional(&o.trace, "trace");
  if (!args.parse(argc, argv)) return false;
  if (o.trace.empty()) args.fail("no trace given");
  return true;
}

}  // namespace

int cmd_report(int argc, char** argv) {
  ReportOptions o;
  if (!parse(argc, argv, o)) return kExitOk;
  AnalysisOptions analysis_options;
  analysis_options.timeline_points = o.timeline_points;
  // The categories decided from whole waves (first_execution) included.
  const Analysis analysis = analyze_report(o.trace, analysis_options);

  if (o.json) {
    // Range names come from the traced program: replace invalid UTF-8 rather
    // than fail on it.
    const std::string text =
        analysis_to_json(analysis).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  } else {
    TextOptions text_options;
    text_options.max_ranges = o.top;
    const std::string text = render_analysis_text(analysis, text_options);
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  std::fflush(stdout);
  const ReadStatus& status = analysis.trace.status;
  if (status.state == ReadStatus::State::kGap)
    fmt::print(stderr, "peakscope report: warning: {} has a gap ({}); reported the {} events around it\n", o.trace,
               status.reason, status.events);
  else if (!status.complete())
    fmt::print(stderr, "peakscope report: warning: {} is {} ({}); reported the {} events before that{}\n", o.trace,
               read_state_name(status.state), status.reason, status.events,
               status.gaps
                   ? fmt::format(" (and skipped {} damaged bytes earlier: {})", status.gap_bytes, status.gap_reason)
                   : std::string());
  return kExitOk;
}

}  // namespace psc::cli
