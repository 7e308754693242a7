// peakscope export TRACE --format FMT -o OUT [--calibration CAL.json] [--nvtxt-time-base BASE]
//
// Writes a trace in another tool's format (docs/viewers.md). Exit 0 on
// success; 2 for bad usage, a file that is not a trace, or an output that
// cannot be written (one line naming the file).
#include <sys/stat.h>

#include <cstdio>
#include <string>

#include <fmt/core.h>

#include "exchange/exporter.h"
#include "tools/cli/commands.h"

namespace psc::cli {
namespace {

constexpr const char* kUsage =
    "usage: peakscope export TRACE --format FMT -o OUT [--calibration CAL.json] [--nvtxt-time-base BASE]";

std::string format_list() {
  std::string s = "formats:";
  for (const Exporter* e : exporters()) s += fmt::format("\n  {:<15} {}", e->name(), e->description());
  return s;
}

ExportOptions parse(int argc, char** argv, const Exporter** exporter) {
  ExportOptions o;
  std::string format;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " needs a value\n" + kUsage);
      return argv[++i];
    };
    if (a == "--format" || a == "-f") {
      format = value();
    } else if (a == "-o" || a == "--output") {
      o.output = value();
    } else if (a == "--calibration") {
      o.calibration = value();
    } else if (a == "--nvtxt-time-base") {
      o.nvtxt_time_base = value();
    } else if (a == "-h" || a == "--help") {
      throw UsageError(std::string(kUsage) + "\n" + format_list());
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError("unknown option '" + a + "'\n" + kUsage);
    } else if (o.trace.empty()) {
      o.trace = a;
    } else {
      throw UsageError("one trace at a time ('" + o.trace + "' and '" + a + "')\n" + kUsage);
    }
  }
  if (o.trace.empty()) throw UsageError(std::string("no trace given\n") + kUsage);
  if (format.empty()) throw UsageError(std::string("no --format given\n") + kUsage + "\n" + format_list());
  *exporter = find_exporter(format);
  if (!*exporter) throw UsageError("unknown format '" + format + "'\n" + format_list());
  if (o.output.empty()) throw UsageError(std::string("no output given (-o OUT)\n") + kUsage);
  if (o.output == o.trace) throw UsageError("the output would overwrite the trace '" + o.trace + "'");
  if (!o.calibration.empty() && format != "html")
    throw UsageError("--calibration applies to --format html only, not '" + format + "'");
  if (!o.nvtxt_time_base.empty() && format != "nvtxt")
    throw UsageError("--nvtxt-time-base applies to --format nvtxt only, not '" + format + "'");
  if (!o.nvtxt_time_base.empty() && o.nvtxt_time_base != "ClockMonotonicRaw" && o.nvtxt_time_base != "Manual")
    throw UsageError("--nvtxt-time-base is ClockMonotonicRaw or Manual, not '" + o.nvtxt_time_base + "'");
  return o;
}

}  // namespace

int cmd_export(int argc, char** argv) {
  const Exporter* exporter = nullptr;
  const ExportOptions options = parse(argc, argv, &exporter);
  exporter->write(options);
  struct stat st {};
  const long long size = ::stat(options.output.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : -1;
  fmt::print("peakscope export: wrote {} ({}, {} bytes)\n", options.output, exporter->name(), size);
  return kExitOk;
}

}  // namespace psc::cli
