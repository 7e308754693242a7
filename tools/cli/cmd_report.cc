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

size_t count_value(const std::string& flag, const char* text) {
  const std::string s = text;
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError(flag + " needs a non-negative count, not '" + s + "'\n" + kUsage);
  return std::stoul(s);
}

ReportOptions parse(int argc, char** argv) {
  ReportOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      o.json = true;
    } else if (a == "--top" || a == "--timeline") {
      if (i + 1 >= argc) throw UsageError(a + " needs a value\n" + kUsage);
      (a == "--top" ? o.top : o.timeline_points) = count_value(a, argv[++i]);
    } else if (a == "-h" || a == "--help") {
      throw UsageError(kUsage);
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      throw UsageError("unknown option '" + a + "'\n" + kUsage);
    } else if (o.trace.empty()) {
      o.trace = a;
    } else {
      throw UsageError("one trace at a time ('" + o.trace + "' and '" + a + "')\n" + kUsage);
    }
  }
  if (o.trace.empty()) throw UsageError(std::string("no trace given\n") + kUsage);
  return o;
}

}  // namespace

int cmd_report(int argc, char** argv) {
  const ReportOptions o = parse(argc, argv);
  AnalysisOptions analysis_options;
  analysis_options.timeline_points = o.timeline_points;
  const Analysis analysis = analyze_trace(o.trace, analysis_options);

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
  if (!status.complete())
    fmt::print(stderr, "peakscope report: warning: {} is {} ({}); reported the {} events before that\n", o.trace,
               read_state_name(status.state), status.reason, status.events);
  return kExitOk;
}

}  // namespace psc::cli
