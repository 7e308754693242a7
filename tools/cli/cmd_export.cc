// peakscope export TRACE --format FMT -o OUT [--calibration CAL.json] [--nvtxt-time-base BASE]
//                  [--nvtxt-align REPORT.sqlite] [--from T0] [--to T1] [--wave N] [--summary]
//
// --from/--to (times after the trace's first event: 1.5s, 200ms, 30us, 100ns)
// or --wave N export a window of the trace; --summary leaves allocations out
// and keeps counters of live bytes and ranges (exchange/export_window.h).
// Writes a trace in another tool's format (docs/viewers.md). Exit 0 on
// success; 2 for bad usage, a file that is not a trace, or an output that
// cannot be written (one line naming the file).
#include <sys/stat.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/core.h>

#include "common/progress.h"
#include "exchange/export_window.h"
#include "exchange/exporter.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"

namespace psc::cli {
namespace {

constexpr const char* kUsage =
    "usage: peakscope export TRACE --format FMT -o OUT [--calibration CAL.json] [--nvtxt-time-base BASE]\n"
    "                        [--nvtxt-align REPORT.sqlite] [--from T0] [--to T1] [--wave N] [--summary]";

std::string format_list() {
  std::string s = "formats:";
  for (const Exporter* e : exporters()) s += fmt::format("\n  {:<15} {}", e->name(), e->description());
  return s;
}

// False for -h: the usage and the formats are printed.
uint64_t duration_option(const char* name, const std::string& text) {
  try {
    return parse_duration_ns(text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string(name) + ": " + e.what());
  }
}

[[nodiscard]] bool parse(int argc, char** argv, ExportOptions& o, const Exporter** exporter, ExportWindow* window) {
  std::string format, from, to, wave;
  bool summary = false;
  ArgParser args(kUsage, format_list());
  args.option({"--format", "-f"}, &format);
  args.option({"-o", "--output"}, &o.output);
  args.option({"--calibration"}, &o.calibration);
  args.option({"--nvtxt-time-base"}, &o.nvtxt_time_base);
  args.option({"--nvtxt-align"}, &o.nvtxt_align);
  args.option({"--from"}, &from);
  args.option({"--to"}, &to);
  args.option({"--wave"}, &wave);
  args.flag({"--summary"}, &summary);
  args.positional(&o.trace, "trace");
  if (!args.parse(argc, argv)) return false;
  if (!from.empty()) window->from_ns = duration_option("--from", from);
  if (!to.empty()) window->to_ns = duration_option("--to", to);
  if (!wave.empty()) {
    char* end = nullptr;
    const long n = std::strtol(wave.c_str(), &end, 10);
    if (*end != '\0' || n < 0 || n > INT32_MAX)
      throw UsageError("--wave takes a wave's number (0, 1, ...), not '" + wave + "'");
    window->wave = static_cast<int32_t>(n);
  }
  window->summary = summary;
  if (window->wave && (window->from_ns || window->to_ns))
    throw UsageError("--wave cannot be combined with --from/--to");
  if (window->from_ns && window->to_ns && *window->to_ns < *window->from_ns)
    throw UsageError("--to " + to + " is before --from " + from);
  if (o.trace.empty()) args.fail("no trace given");
  if (format.empty()) throw UsageError(std::string("no --format given\n") + kUsage + "\n" + format_list());
  *exporter = find_exporter(format);
  if (!*exporter) throw UsageError("unknown format '" + format + "'\n" + format_list());
  if (o.output.empty()) args.fail("no output given (-o OUT)");
  if (o.output == o.trace) throw UsageError("the output would overwrite the trace '" + o.trace + "'");
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
  ExportOptions options;
  ExportWindow window;
  if (!parse(argc, argv, options, &exporter, &window)) return kExitOk;
  if (window.active()) {
    // The window is a trace of its own, next to the output, that the exporter
    // reads as it reads any trace; it goes when the export is written.
    ExportOptions windowed = options;
    windowed.trace = options.output + ".window.pstrace";
    struct Remove {
      std::string path;
      ~Remove() { std::remove(path.c_str()); }
    } remove{windowed.trace};
    const WindowResult w = write_window(options.trace, window, windowed.trace);
    exporter->write(windowed);
    progress_done();
    fmt::print(
        "peakscope export: window {} to {} after the trace's first event: {} events, {} carried in from before\n",
        format_seconds(w.begin_ns - w.first_time_ns), format_seconds(w.end_ns - w.first_time_ns), w.output_events,
        w.carried_events);
  } else {
    exporter->write(options);
  }
  progress_done();
  struct stat st {};
  const long long size = ::stat(options.output.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : -1;
  fmt::print("peakscope export: wrote {} ({}, {} bytes)\n", options.output, exporter->name(), size);
  return kExitOk;
}

}  // namespace psc::cli
