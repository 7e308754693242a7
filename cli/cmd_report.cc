// `peakscope report` (its command line: cli/command_table.cc).
//
// Peak, where it was reached, what is live at it by category, layer and range,
// and each wave's baseline and peak. Several traces, or a folder of them (the
// files `record` lists for a distributed run: one per rank), are a run: a
// table of every trace by rank, each wave's peak by rank, the busiest rank and
// its full report (analysis/run_report.h). Exit 0 also for a truncated or corrupt
// trace (what was read is reported, with a warning); 2 for a file that is not a
// trace at all (TraceError names the file and byte offset).
#include <unistd.h>
#include <algorithm>

#include <cstdio>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "analysis/analysis.h"
#include "analysis/report_json.h"
#include "analysis/report_text.h"
#include "analysis/run_report.h"
#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "common/parallel.h"
#include "common/progress.h"
#include "estimator/liveness.h"

namespace psc::cli {
namespace {

struct ReportOptions {
  std::vector<std::string> inputs;
  std::vector<std::string> traces;  // the inputs, folders expanded to their .pstrace files
  bool run = false;                 // several traces, or a folder: a run
  std::string run_id;               // --run: which run, when the traces are of several
  bool json = false;
  bool waves = false;  // --waves: each wave's per-layer table too
  size_t top = 20;
  size_t timeline_points = 100;
};

// False for -h: the usage is printed.
[[nodiscard]] bool parse(int argc, char** argv, ReportOptions& o) {
  ArgParser args(command_spec("report"));
  args.flag({"--json"}, &o.json);
  args.flag({"--waves"}, &o.waves);
  args.option({"--run"}, &o.run_id);
  args.option({"--top"}, [&](const std::string& name, const std::string& value) {
    o.top = static_cast<size_t>(parse_count(name, value));
  });
  args.option({"--timeline"}, [&](const std::string& name, const std::string& value) {
    // Each point is a bucket held in memory while the trace is read.
    constexpr std::int64_t kMostPoints = 1'000'000;
    const std::int64_t points = parse_count(name, value);
    if (points > kMostPoints) throw UsageError(fmt::format("{}: '{}' points; at most {}", name, value, kMostPoints));
    o.timeline_points = static_cast<size_t>(points);
  });
  args.positionals(&o.inputs);
  if (!args.parse(argc, argv)) return false;
  if (o.inputs.empty()) args.fail("no trace given");
  o.traces = expand_trace_folders(o.inputs, &o.run);
  o.run = o.run || o.traces.size() > 1;
  return true;
}

void warn_if_incomplete(const Analysis& analysis) {
  const ReadStatus& status = analysis.trace.status;
  const std::string& trace = analysis.trace.path;
  if (status.state == ReadStatus::State::kGap)
    fmt::print(stderr, "peakscope report: warning: {} has a gap ({}); reported the {} events around it\n", trace,
               status.reason, status.events);
  else if (!status.complete())
    fmt::print(stderr, "peakscope report: warning: {} is {} ({}); reported the {} events before that{}\n", trace,
               read_state_name(status.state), status.reason, status.events,
               status.gaps
                   ? fmt::format(" (and skipped {} damaged bytes earlier: {})", status.gap_bytes, status.gap_reason)
                   : std::string());
}

void write_out(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// Range names come from the traced program: replace invalid UTF-8 rather
// than fail on it.
std::string json_text(const nlohmann::ordered_json& j) {
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace

int cmd_report(int argc, char** argv) {
  ReportOptions o;
  if (!parse(argc, argv, o)) return kExitOk;
  AnalysisOptions analysis_options;
  analysis_options.timeline_points = o.timeline_points;
  // The categories decided from whole waves (first_execution) included.
  Run grouped;
  if (o.run || !o.run_id.empty()) {
    grouped = choose_run(o.traces, o.run_id);
    o.traces.clear();
    for (const RunMember& m : grouped.members) o.traces.push_back(m.path);
    o.run = true;
  }
  // The traces of a run side by side (common/parallel.h), reported in order.
  const unsigned threads = trace_threads(o.traces.size());
  if (threads > 1) progress_stage(fmt::format("reading {} traces, {} at a time", o.traces.size(), threads), 0);
  std::vector<Analysis> analyses = parallel_map<Analysis>(
      o.traces.size(), threads,
      [&](size_t i) {
        if (o.run && threads <= 1 && isatty(STDERR_FILENO))
          fmt::print(stderr, "peakscope report: reading {} of {}: {}\n", i + 1, o.traces.size(), o.traces[i]);
        return analyze_report(o.traces[i], analysis_options);
      },
      [&](size_t) { progress_advance(1); });
  progress_done();
  TextOptions text_options;
  text_options.max_ranges = o.top;
  text_options.wave_layers = o.waves;
  if (!o.run) {
    const Analysis& analysis = analyses.front();
    write_out(o.json ? json_text(analysis_to_json(analysis)) : render_analysis_text(analysis, text_options));
  } else {
    // Each member as the run sees it: a launcher srun or mpirun started has no rank there (settle_task_ranks).
    for (size_t i = 0; i < analyses.size() && i < grouped.members.size(); ++i)
      if (analyses[i].trace.path == grouped.members[i].path) analyses[i].trace.header = grouped.members[i].header;
    const RunReport run = make_run_report(analyses, &grouped);
    write_out(o.json ? json_text(run_to_json(run)) : render_run_text(run, text_options));
  }
  for (const Analysis& a : analyses) warn_if_incomplete(a);
  return kExitOk;
}

}  // namespace psc::cli
