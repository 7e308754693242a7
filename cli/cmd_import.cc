// `peakscope import` (its command line: cli/command_table.cc).
//
// Converts another tool's file into a .pstrace that report, calibrate and
// check read (docs/viewers.md). Progress on stderr as every command's
// (common/progress.h): only on a terminal, after a second. Exit 0 on success; 2 for bad usage or input
// that is not what the format says (one line naming the file and, where it
// applies, the byte offset). An existing TRACE (a recording, maybe) is
// replaced only with --force, as record's is, and only when it is a file.
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>

#include <fmt/core.h>

#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "common/progress.h"
#include "exchange/exporter.h"
#include "traces/reader.h"

namespace psc::cli {
namespace {

std::string format_list() {
  std::string s = "formats:";
  for (const Importer* i : importers()) s += fmt::format("\n  {:<15} {}", i->name(), i->description());
  return s;
}

// False for -h: the usage and the formats are printed.
[[nodiscard]] bool parse(int argc, char** argv, ImportOptions& o, const Importer** importer) {
  std::string format;
  bool force = false;
  ArgParser args(command_spec("import"), format_list());
  args.option({"--from", "-f"}, &format);
  args.option({"-o", "--output"}, &o.output);
  args.option({"--pid"}, [&](const std::string& name, const std::string& value) {
    const int64_t pid = parse_count(name, value);
    if (pid > std::numeric_limits<uint32_t>::max())
      throw UsageError(fmt::format("{}: {} is not a process id", name, pid));
    o.pid = static_cast<uint32_t>(pid);
  });
  args.flag({"--force"}, &force);
  args.positional(&o.input, "file");
  if (!args.parse(argc, argv)) return false;
  if (o.input.empty()) args.fail("no input file given");
  if (format.empty()) throw UsageError("no --from given\n" + args.usage() + "\n" + format_list());
  *importer = find_importer(format);
  if (!*importer) throw UsageError("unknown format '" + format + "'\n" + format_list());
  if (o.output.empty()) args.fail("no output given (-o TRACE)");
  if (o.output == o.input) throw UsageError("the output would overwrite the input '" + o.input + "'");
  std::error_code error;
  const auto status = std::filesystem::symlink_status(o.output, error);
  if (std::filesystem::exists(status)) {
    if (!std::filesystem::is_regular_file(status))
      throw UsageError(printable_path(o.output) + " exists and is not a file; choose another -o");
    if (!force)
      throw UsageError(printable_path(o.output) + " already exists; --force replaces it, or choose another -o");
  }
  return true;
}

}  // namespace

int cmd_import(int argc, char** argv) {
  const Importer* importer = nullptr;
  ImportOptions options;
  if (!parse(argc, argv, options, &importer)) return kExitOk;
  const ImportSummary summary = importer->read(options);
  progress_done();
  fmt::print("peakscope import: wrote {} ({} events from {})\n", printable_path(options.output), summary.events,
             importer->name());
  for (const std::string& line : summary.lines) fmt::print("  {}\n", line);
  return kExitOk;
}

}  // namespace psc::cli
