// peakscope export TRACE... | DIR --format FMT -o OUT [--run ID] [--calibration CAL.json]
//                  [--nvtxt-time-base BASE] [--nvtxt-align REPORT.sqlite]
//
// Writes a trace in another tool's format (docs/viewers.md). Several traces,
// or a folder, are a run (traces/run.h): perfetto, chrome and nsys-sqlite
// write them as one file with a process per rank on one clock. Exit 0 on
// success; 2 for bad usage, a file that is not a trace, or an output that
// cannot be written (one line naming the file).
#include <sys/stat.h>

#include <cstdio>
#include <string>

#include <fmt/core.h>

#include "exchange/exporter.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"

namespace psc::cli {
namespace {

constexpr const char* kUsage =
    "usage: peakscope export TRACE... | DIR --format FMT -o OUT [--run ID] [--calibration CAL.json]\n"
    "                        [--nvtxt-time-base BASE] [--nvtxt-align REPORT.sqlite]";

struct ExportArgs {
  ExportOptions options;
  std::vector<std::string> traces;  // folders expanded
  bool run = false;                 // several traces, or a folder
  std::string run_id;               // --run
};

std::string format_list() {
  std::string s = "formats:";
  for (const Exporter* e : exporters()) s += fmt::format("\n  {:<15} {}", e->name(), e->description());
  return s;
}

// False for -h: the usage and the formats are printed.
[[nodiscard]] bool parse(int argc, char** argv, ExportArgs& a, const Exporter** exporter) {
  ExportOptions& o = a.options;
  std::vector<std::string> inputs;
  std::string format;
  ArgParser args(kUsage, format_list());
  args.option({"--format", "-f"}, &format);
  args.option({"-o", "--output"}, &o.output);
  args.option({"--calibration"}, &o.calibration);
  args.option({"--nvtxt-time-base"}, &o.nvtxt_time_base);
  args.option({"--nvtxt-align"}, &o.nvtxt_align);
  args.option({"--run"}, &a.run_id);
  args.positionals(&inputs);
  if (!args.parse(argc, argv)) return false;
  if (inputs.empty()) args.fail("no trace given");
  a.traces = expand_trace_folders(inputs, &a.run);
  a.run = a.run || a.traces.size() > 1 || !a.run_id.empty();
  o.trace = a.traces.front();
  if (format.empty()) throw UsageError(std::string("no --format given\n") + kUsage + "\n" + format_list());
  *exporter = find_exporter(format);
  if (!*exporter) throw UsageError("unknown format '" + format + "'\n" + format_list());
  if (o.output.empty()) args.fail("no output given (-o OUT)");
  for (const std::string& trace : a.traces)
    if (o.output == trace) throw UsageError("the output would overwrite the trace '" + trace + "'");
  if (a.run && !(*exporter)->writes_runs())
    throw UsageError(
        fmt::format("--format {} holds one trace, not a run of {}; export one trace, or use --format "
                    "perfetto, chrome or nsys-sqlite for the whole run",
                    format, a.traces.size()));
  if (!o.calibration.empty() && format != "html")
    throw UsageError("--calibration applies to --format html only, not '" + format + "'");
  if (!o.nvtxt_time_base.empty() && format != "nvtxt")
    throw UsageError("--nvtxt-time-base applies to --format nvtxt only, not '" + format + "'");
  if (!o.nvtxt_time_base.empty() && o.nvtxt_time_base != "ClockMonotonicRaw" && o.nvtxt_time_base != "Manual")
    throw UsageError("--nvtxt-time-base is ClockMonotonicRaw or Manual, not '" + o.nvtxt_time_base + "'");
  if (!o.nvtxt_align.empty() && format != "nvtxt")
    throw UsageError("--nvtxt-align applies to --format nvtxt only, not '" + format + "'");
  if (!o.nvtxt_align.empty() && !o.nvtxt_time_base.empty() && o.nvtxt_time_base != "Manual")
    throw UsageError("--nvtxt-align writes TimeBase = Manual; it cannot be combined with --nvtxt-time-base " +
                     o.nvtxt_time_base);
  return true;
}

}  // namespace

int cmd_export(int argc, char** argv) {
  const Exporter* exporter = nullptr;
  ExportArgs a;
  if (!parse(argc, argv, a, &exporter)) return kExitOk;
  const ExportOptions& options = a.options;
  if (a.run) {
    const Run run = choose_run(a.traces, a.run_id);
    exporter->write_run(run, options);
    fmt::print("peakscope export: {} traces of run {} as one process each:\n", run.members.size(),
               run.id.empty() ? "(no run id)" : "'" + run.id + "'");
    for (const RunMember& m : run.members) fmt::print("  {}  {}\n", member_label(m), m.path);
  } else {
    exporter->write(options);
  }
  struct stat st {};
  const long long size = ::stat(options.output.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : -1;
  fmt::print("peakscope export: wrote {} ({}, {} bytes)\n", options.output, exporter->name(), size);
  return kExitOk;
}

}  // namespace psc::cli
