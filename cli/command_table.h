// The one table of `peakscope`'s subcommands: each command's name, the forms of
// its command line, what it does, its options with one line of help each, and
// the function that runs it. `peakscope help`, `peakscope CMD -h` and the
// README's "Command line" section (written by `make docs`, checked by `make
// lint`) are all printed from it, and ArgParser refuses to declare an option
// the table does not list, so the help cannot drift from the parser
// (docs/design.md, "Interfaces and their versions").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace psc::cli {

struct OptionSpec {
  std::vector<std::string> names;  // "-o", "--output": every spelling the parser accepts
  std::string value;               // what follows it ("PATH"); empty for a flag
  std::string help;                // one line
};

struct CommandSpec {
  std::string name;
  // The forms of the command line, each what follows "peakscope " on one
  // (unwrapped) line; the printers wrap them.
  std::vector<std::string> forms;
  std::string about;  // one line: what the command does
  std::vector<OptionSpec> options;
  std::string notes;  // printed after the options by -h; may be empty
  int (*run)(int argc, char** argv);
};

// Every command, in the order `peakscope help` lists them.
const std::vector<CommandSpec>& command_table();

// The entry of `name`; std::logic_error when there is none (a programming error).
const CommandSpec& command_spec(std::string_view name);

// "usage: peakscope FORM" for the first form, "       peakscope FORM" for the
// others, each wrapped at 100 columns under its first argument; no final newline.
std::string usage_text(const CommandSpec& command);

// What `peakscope CMD -h` prints before a command's own extra lines: the usage,
// the about line and the options. Ends with a newline.
std::string help_text(const CommandSpec& command);

// What `peakscope help` prints: every command's forms and about line, the
// exit codes. Ends with a newline.
std::string program_help();

// The manual page peakscope(1) in roff (man(7)), of version `version`: every
// command's forms, description, options and notes. `make install` writes it
// with `peakscope help --man`.
std::string man_page(const std::string& version);

}  // namespace psc::cli
