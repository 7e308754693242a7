// The `peakscope` subcommands. Each lives in its own tools/cmd_*.cc and returns
// the process exit code: 0 success, 1 a check failed, 2 bad usage or bad input.
#pragma once

#include <stdexcept>
#include <string>

namespace psc::cli {

constexpr int kExitOk = 0;
constexpr int kExitCheckFailed = 1;
constexpr int kExitBadInput = 2;

// Bad usage or bad input: main prints "peakscope <cmd>: <what>" and exits 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

int cmd_record(int argc, char** argv);
int cmd_report(int argc, char** argv);
int cmd_export(int argc, char** argv);
int cmd_import(int argc, char** argv);
int cmd_price(int argc, char** argv);
int cmd_calibrate(int argc, char** argv);
int cmd_check(int argc, char** argv);
int cmd_replay(int argc, char** argv);
int cmd_top(int argc, char** argv);
int cmd_version(int argc, char** argv);

}  // namespace psc::cli
