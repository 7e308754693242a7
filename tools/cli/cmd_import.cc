// peakscope import FILE --from FMT -o TRACE [--pid PID]
//
// Converts another tool's file into a .pstrace that report, calibrate and
// check read (docs/viewers.md). Exit 0 on success; 2 for bad usage or input
// that is not what the format says (one line naming the file and, where it
// applies, the byte offset).
#include <string>

#include <fmt/core.h>

#include "exchange/exporter.h"
#include "tools/cli/commands.h"

namespace psc::cli {
namespace {

constexpr const char* kUsage = "usage: peakscope import FILE --from FMT -o TRACE [--pid PID]";

std::string format_list() {
  std::string s = "formats:";
  for (const Importer* i : importers()) s += fmt::format("\n  {:<15} {}", i->name(), i->description());
  return s;
}

ImportOptions parse(int argc, char** argv, const Importer** importer) {
  ImportOptions o;
  std::string format;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " needs a value\n" + kUsage);
      return argv[++i];
    };
    if (a == "--from" || a == "-f") {
      format = value();
    } else if (a == "-o" || a == "--output") {
      o.output = value();
    } else if (a == "--pid") {
      const std::string v = value();
      if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos)
        throw UsageError("--pid needs a process id, not '" + v + "'");
      o.pid = static_cast<uint32_t>(std::stoul(v));
    } else if (a == "-h" || a == "--help") {
      throw UsageError(std::string(kUsage) + "\n" + format_list());
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError("unknown option '" + a + "'\n" + kUsage);
    } else if (o.input.empty()) {
      o.input = a;
    } else {
      throw UsageError("one file at a time ('" + o.input + "' and '" + a + "')\n" + kUsage);
    }
  }
  if (o.input.empty()) throw UsageError(std::string("no input file given\n") + kUsage);
  if (format.empty()) throw UsageError(std::string("no --from given\n") + kUsage + "\n" + format_list());
  *importer = find_importer(format);
  if (!*importer) throw UsageError("unknown format '" + format + "'\n" + format_list());
  if (o.output.empty()) throw UsageError(std::string("no output given (-o TRACE)\n") + kUsage);
  if (o.output == o.input) throw UsageError("the output would overwrite the input '" + o.input + "'");
  return o;
}

}  // namespace

int cmd_import(int argc, char** argv) {
  const Importer* importer = nullptr;
  const ImportOptions options = parse(argc, argv, &importer);
  const ImportSummary summary = importer->read(options);
  fmt::print("peakscope import: wrote {} ({} events from {})\n", options.output, summary.events, importer->name());
  for (const std::string& line : summary.lines) fmt::print("  {}\n", line);
  return kExitOk;
}

}  // namespace psc::cli
