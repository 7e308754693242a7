// `peakscope`: one program, subcommands. See README.md "Command line".
#include <cstdio>
#include <cstring>
#include <exception>

#include "common/progress.h"
#include "tools/cli/commands.h"
#include "traces/reader.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* synopsis;  // one line per form of the command
};

constexpr Command kCommands[] = {
    {"record", psc::cli::cmd_record,
     "record [-o PATH] [--level allocated|reserved] [--host] [--host-min-bytes N] [--fork follow|stop] -- CMD "
     "ARGS..."},
    {"report", psc::cli::cmd_report, "report TRACE [--json] [--top N] [--timeline N]"},
    {"export", psc::cli::cmd_export,
     "export TRACE --format FMT -o OUT [--calibration CAL.json] [--nvtxt-time-base BASE] [--from T0] [--to T1] "
     "[--wave N] [--summary]"},
    {"import", psc::cli::cmd_import, "import FILE --from FMT -o TRACE [--pid PID]"},
    {"price", psc::cli::cmd_price,
     "price PLAN.json [--json] [--budget BYTES] [--report FILE]\n"
     "price --calibration CAL.json --tokens N|--budget BYTES [OPTIONS] (its -h lists them)"},
    {"calibrate", psc::cli::cmd_calibrate, "calibrate TRACE... -o CAL.json [--safety FACTOR]"},
    {"check", psc::cli::cmd_check, "check --calibration CAL.json TRACE... [--json] [--floor-only]"},
    {"replay", psc::cli::cmd_replay, "replay REPORT.json... [--allow-source-drift] [--json]"},
};

void usage(FILE* out) {
  std::fprintf(out, "usage: peakscope <command> [args]\n\ncommands:\n");
  for (const Command& c : kCommands) {
    for (const char* line = c.synopsis; *line;) {
      const size_t length = std::strcspn(line, "\n");
      std::fprintf(out, "  peakscope %.*s\n", static_cast<int>(length), line);
      line += length + (line[length] ? 1 : 0);
    }
  }
  std::fprintf(out, "\n'peakscope <command> -h' shows a command's options\n");
  std::fprintf(out, "exit codes: 0 success, 1 a check failed, 2 bad usage or bad input\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return psc::cli::kExitBadInput;
  }
  if (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
    usage(stdout);
    return psc::cli::kExitOk;
  }
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    try {
      // Progress on stderr only on a terminal (common/progress.h); cleared
      // before an error is printed, as the reporter goes first.
      psc::ProgressReporter progress(psc::ProgressReporter::stderr_is_terminal());
      psc::ProgressScope progress_scope(progress);
      return c.run(argc - 1, argv + 1);
    } catch (const psc::cli::UsageError& e) {
      std::fprintf(stderr, "peakscope %s: %s\n", c.name, e.what());
    } catch (const psc::TraceError& e) {
      std::fprintf(stderr, "peakscope %s: %s\n", c.name, e.what());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "peakscope %s: %s\n", c.name, e.what());
    }
    return psc::cli::kExitBadInput;
  }
  std::fprintf(stderr, "peakscope: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return psc::cli::kExitBadInput;
}
