// `peakscope`: one program, subcommands, each an entry of the command table
// (cli/command_table.h) that also prints `peakscope help`.
#include <cstdio>
#include <cstring>
#include <exception>

#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/version_value.h"
#include "common/progress.h"
#include "traces/reader.h"

namespace {

void usage(FILE* out) { std::fputs(psc::cli::program_help().c_str(), out); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return psc::cli::kExitBadInput;
  }
  // `help --man`: the manual page, from the same table (make install).
  if (!std::strcmp(argv[1], "help") && argc == 3 && !std::strcmp(argv[2], "--man")) {
    std::fputs(psc::cli::man_page(psc::cli::kVersionText).c_str(), stdout);
    return psc::cli::kExitOk;
  }
  if (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
    usage(stdout);
    return psc::cli::kExitOk;
  }
  if (!std::strcmp(argv[1], "--version")) argv[1] = const_cast<char*>("version");
  for (const psc::cli::CommandSpec& c : psc::cli::command_table()) {
    if (c.name != argv[1]) continue;
    try {
      // Progress on stderr only on a terminal (common/progress.h); cleared
      // before an error is printed, as the reporter goes first.
      psc::ProgressReporter progress(psc::ProgressReporter::stderr_is_terminal());
      psc::ProgressScope progress_scope(progress);
      return c.run(argc - 1, argv + 1);
    } catch (const psc::cli::UsageError& e) {
      std::fprintf(stderr, "peakscope %s: %s\n", c.name.c_str(), e.what());
    } catch (const psc::TraceError& e) {
      std::fprintf(stderr, "peakscope %s: %s\n", c.name.c_str(), e.what());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "peakscope %s: %s\n", c.name.c_str(), e.what());
    }
    return psc::cli::kExitBadInput;
  }
  std::fprintf(stderr, "peakscope: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return psc::cli::kExitBadInput;
}
