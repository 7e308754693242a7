// The command line of every `peakscope` subcommand: each declares its flags,
// options and positionals on an ArgParser and parses once, so unknown options,
// missing values, extra positionals and -h/--help read the same everywhere.
//
//   ArgParser args(kUsage);
//   args.flag({"--json"}, &o.json);
//   args.option({"-o", "--output"}, &o.output);
//   args.positional(&o.trace, "trace");
//   if (!args.parse(argc, argv)) return kExitOk;  // -h: usage on stdout
//   if (o.trace.empty()) args.fail("no trace given");
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "traces/run.h"

namespace psc::cli {

struct CommandSpec;

class ArgParser {
 public:
  // Called with the option as typed (one of its names) and its value.
  using OptionHandler = std::function<void(const std::string& name, const std::string& value)>;

  // `usage` ends every error (unless one_line_errors) and heads -h; `help_extra`
  // follows it on -h only (the export formats, price's other mode).
  explicit ArgParser(std::string usage, std::string help_extra = "");
  // The usage and the -h text from the command's entry in the command table
  // (cli/command_table.h); `help_extra` follows it on -h. Declaring an
  // option the entry does not list throws std::logic_error: the table is the
  // one place options are written down.
  explicit ArgParser(const CommandSpec& command, std::string help_extra = "");

  // A flag sets *set to true; an option takes the next argument, whatever it
  // starts with, as its value.
  void flag(std::vector<std::string> names, bool* set);
  void option(std::vector<std::string> names, std::string* value);
  void option(std::vector<std::string> names, OptionHandler handler);

  // What the arguments that are not options go to; declare one of the three.
  // positional: at most one ("one <noun> at a time ('a' and 'b')").
  void positional(std::string* value, const char* noun);
  void positionals(std::vector<std::string>* values);
  // The first argument that is not an option, or the one after "--", and
  // everything after it, options included: the command `record` runs.
  void command(std::vector<std::string>* words);

  // Errors say their reason only, without the usage: price and replay keep bad
  // input to one line naming the file or the option.
  void one_line_errors() { one_line_errors_ = true; }

  // False for -h/--help: the usage is printed on stdout and the caller exits 0.
  // Throws UsageError for an unknown option, an option without its value, or a
  // second positional. "-" alone is a positional; "--" ends the options.
  [[nodiscard]] bool parse(int argc, char** argv);

  // Throws UsageError(why + "\n" + usage).
  [[noreturn]] void fail(const std::string& why) const;

  const std::string& usage() const { return usage_; }

 private:
  struct Option {
    std::vector<std::string> names;
    bool* flag = nullptr;  // set for a flag, else handler
    OptionHandler handler;
  };
  const Option* find(const std::string& name) const;
  void check_listed(const std::vector<std::string>& names) const;
  void take_positional(const std::string& word);

  std::string usage_;
  std::string help_extra_;
  const CommandSpec* command_spec_ = nullptr;
  bool one_line_errors_ = false;
  std::vector<Option> options_;
  std::string* positional_ = nullptr;
  const char* positional_noun_ = "";
  bool positional_seen_ = false;
  std::vector<std::string>* positionals_ = nullptr;
  std::vector<std::string>* command_ = nullptr;
};

// Value converters several commands share. Each throws UsageError naming the
// option and the text, on one line.

// A non-negative integer: "OPTION: 'TEXT' must be a non-negative integer",
// with " <what>" after it when given ("number of bytes").
int64_t parse_count(const std::string& option, const std::string& text, const char* what = nullptr);

// Bytes, optionally with a binary unit: 80GiB, 64MiB, 4096.
int64_t parse_bytes(const std::string& option, const std::string& text);

// A finite decimal number ("1.1", "2", "1e-3"; no sign other than a leading
// '-', no spaces, no hex, no inf or nan) within [min, max]:
// "OPTION: 'TEXT' is not WHAT" otherwise ("a positive number", ...).
double parse_number(const std::string& option, const std::string& text, double min, double max, const char* what);

// "a,b,,c" -> {"a", "b", "", "c"}; "" -> {""}.
std::vector<std::string> split_list(const std::string& text);

// Trace arguments with each folder replaced by its .pstrace files, sorted
// (the files `record` wrote for a run: one per rank). *had_folder tells
// whether there was one. UsageError for a folder without traces.
std::vector<std::string> expand_trace_folders(const std::vector<std::string>& inputs, bool* had_folder = nullptr);

// The one run the traces form (traces/run.h), or with `wanted` the run of that
// id. UsageError when they form several and none is wanted, listing each run
// with its traces, or when none has the id wanted.
Run choose_run(const std::vector<std::string>& traces, const std::string& wanted);

}  // namespace psc::cli
