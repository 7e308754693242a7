// `peakscope`: one program, subcommands. See README.md "Command line".
#include <cstdio>
#include <cstring>
#include <exception>

#include "tools/cli/commands.h"
#include "traces/reader.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* synopsis;
};

constexpr Command kCommands[] = {
    {"record", psc::cli::cmd_record, "record [-o PATH] [--level allocated|reserved] [--host] -- CMD ARGS..."},
    {"report", psc::cli::cmd_report, "report TRACE [--json]"},
    {"export", psc::cli::cmd_export, "export TRACE --format FMT -o OUT"},
    {"import", psc::cli::cmd_import, "import FILE --from FMT -o TRACE"},
    {"price", psc::cli::cmd_price, "price PLAN.json [--json] [--budget BYTES] [--report FILE]"},
    {"calibrate", psc::cli::cmd_calibrate, "calibrate TRACE... -o CAL.json"},
    {"check", psc::cli::cmd_check, "check --calibration CAL.json TRACE..."},
    {"replay", psc::cli::cmd_replay, "replay REPORT.json... [--allow-source-drift]"},
};

void usage(FILE* out) {
  std::fprintf(out, "usage: peakscope <command> [args]\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  peakscope %s\n", c.synopsis);
  std::fprintf(out, "\nexit codes: 0 success, 1 a check failed, 2 bad usage or bad input\n");
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
