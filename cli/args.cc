#include "cli/args.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "cli/command_table.h"
#include "cli/commands.h"

namespace psc::cli {

ArgParser::ArgParser(std::string usage, std::string help_extra)
    : usage_(std::move(usage)), help_extra_(std::move(help_extra)) {}

ArgParser::ArgParser(const CommandSpec& command, std::string help_extra)
    : usage_(usage_text(command)), help_extra_(std::move(help_extra)), command_spec_(&command) {}

void ArgParser::check_listed(const std::vector<std::string>& names) const {
  if (!command_spec_) return;
  for (const std::string& name : names) {
    bool listed = false;
    for (const OptionSpec& o : command_spec_->options)
      listed = listed || std::find(o.names.begin(), o.names.end(), name) != o.names.end();
    if (!listed)
      throw std::logic_error(fmt::format("option '{}' is missing from the entry of '{}' in cli/command_table.cc", name,
                                         command_spec_->name));
  }
}

void ArgParser::flag(std::vector<std::string> names, bool* set) {
  check_listed(names);
  options_.push_back({std::move(names), set, {}});
}

void ArgParser::option(std::vector<std::string> names, std::string* value) {
  option(std::move(names), [value](const std::string&, const std::string& text) { *value = text; });
}

void ArgParser::option(std::vector<std::string> names, OptionHandler handler) {
  check_listed(names);
  options_.push_back({std::move(names), nullptr, std::move(handler)});
}

void ArgParser::positional(std::string* value, const char* noun) {
  positional_ = value;
  positional_noun_ = noun;
}

void ArgParser::positionals(std::vector<std::string>* values) { positionals_ = values; }

void ArgParser::command(std::vector<std::string>* words) { command_ = words; }

const ArgParser::Option* ArgParser::find(const std::string& name) const {
  for (const Option& o : options_)
    for (const std::string& n : o.names)
      if (n == name) return &o;
  return nullptr;
}

void ArgParser::take_positional(const std::string& word) {
  if (positionals_) {
    positionals_->push_back(word);
  } else if (positional_ && !positional_seen_) {
    *positional_ = word;
    positional_seen_ = true;
  } else if (positional_) {
    fail(fmt::format("one {} at a time ('{}' and '{}')", positional_noun_, *positional_, word));
  } else {
    fail(fmt::format("unexpected argument '{}'", word));
  }
}

bool ArgParser::parse(int argc, char** argv) {
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-h" || a == "--help") {
      if (command_spec_) {
        fmt::print("{}", help_text(*command_spec_));
        if (!help_extra_.empty()) fmt::print("\n{}\n", help_extra_);
      } else {
        fmt::print("{}\n", usage_);
        if (!help_extra_.empty()) fmt::print("{}\n", help_extra_);
      }
      return false;
    }
    if (a.size() < 2 || a[0] != '-') {
      if (command_) break;
      take_positional(a);
      continue;
    }
    const Option* o = find(a);
    if (!o) fail(fmt::format("unknown option '{}'", a));
    if (o->flag) {
      *o->flag = true;
      continue;
    }
    if (i + 1 >= argc) fail(a + " needs a value");
    o->handler(a, argv[++i]);
  }
  for (; i < argc; ++i) {
    if (command_) {
      command_->push_back(argv[i]);
    } else {
      take_positional(argv[i]);
    }
  }
  return true;
}

void ArgParser::fail(const std::string& why) const { throw UsageError(one_line_errors_ ? why : why + "\n" + usage_); }

int64_t parse_count(const std::string& option, const std::string& text, const char* what) {
  int64_t value = -1;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range && ptr == end && !text.empty() && text[0] != '-')
    throw UsageError(fmt::format("{}: '{}' is too large", option, text));
  // from_chars takes "-0"; a count has no sign at all.
  if (text.empty() || text[0] == '-' || ec != std::errc() || ptr != end || value < 0)
    throw UsageError(
        fmt::format("{}: '{}' must be a non-negative integer{}{}", option, text, what ? " " : "", what ? what : ""));
  return value;
}

int64_t parse_bytes(const std::string& option, const std::string& text) {
  static const std::pair<const char*, int> kUnits[] = {{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};
  for (const auto& [unit, shift] : kUnits) {
    const size_t n = std::strlen(unit);
    if (text.size() > n && text.compare(text.size() - n, n, unit) == 0) {
      const int64_t value = parse_count(option, text.substr(0, text.size() - n));
      if (value > (int64_t{1} << (62 - shift))) throw UsageError(fmt::format("{}: '{}' is too large", option, text));
      return value << shift;
    }
  }
  return parse_count(option, text);
}

double parse_number(const std::string& option, const std::string& text, double min, double max, const char* what) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value, std::chars_format::general);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value) || !(value >= min && value <= max))
    throw UsageError(fmt::format("{}: '{}' is not {}", option, text, what));
  return value;
}

std::vector<std::string> expand_trace_folders(const std::vector<std::string>& inputs, bool* had_folder) {
  namespace fs = std::filesystem;
  std::vector<std::string> traces;
  if (had_folder) *had_folder = false;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (!fs::is_directory(input, ec)) {
      traces.push_back(input);
      continue;
    }
    if (had_folder) *had_folder = true;
    std::vector<std::string> found;
    // What a .pstrace name that is not a regular file is, for the line that
    // says it was left out (a FIFO would block the read, a device never end).
    const auto kind = [](fs::file_type type) -> std::string {
      switch (type) {
        case fs::file_type::directory: return "a directory";
        case fs::file_type::fifo: return "a FIFO";
        case fs::file_type::character: return "a character device";
        case fs::file_type::block: return "a block device";
        case fs::file_type::socket: return "a socket";
        case fs::file_type::not_found: return "missing";
        default: return "something other than a file";
      }
    };
    for (const fs::directory_entry& e : fs::directory_iterator(input, ec)) {
      if (e.path().extension() != ".pstrace") continue;
      std::error_code type_ec;
      if (e.is_regular_file(type_ec)) {
        found.push_back(e.path().string());
        continue;
      }
      std::string what = kind(e.status(type_ec).type());
      if (e.is_symlink(type_ec)) what = what == "missing" ? "a broken symbolic link" : "a symbolic link to " + what;
      fmt::print(stderr, "peakscope: warning: {} is {}, not a trace file: left out\n", e.path().string(), what);
    }
    if (found.empty()) throw UsageError("no .pstrace file in the folder '" + input + "'");
    std::sort(found.begin(), found.end());
    traces.insert(traces.end(), found.begin(), found.end());
  }
  return traces;
}

Run choose_run(const std::vector<std::string>& traces, const std::string& wanted) {
  std::vector<Run> runs = group_runs(traces);
  const auto label = [](const Run& r) {
    std::string names;
    for (size_t i = 0; i < r.members.size() && i < 4; ++i)
      names += (i ? ", " : "") + std::filesystem::path(r.members[i].path).filename().string();
    if (r.members.size() > 4) names += fmt::format(", ... ({} more)", r.members.size() - 4);
    return fmt::format("  {} ({}): {} trace{}: {}", r.id.empty() ? "(no run id)" : "'" + r.id + "'",
                       r.id_source.empty() ? "unnamed" : r.id_source, r.members.size(),
                       r.members.size() == 1 ? "" : "s", names);
  };
  std::string listing;
  for (const Run& r : runs) listing += "\n" + label(r);
  if (!wanted.empty()) {
    for (Run& r : runs)
      if (r.id == wanted) return std::move(r);
    throw UsageError("no run '" + wanted + "' among the traces; they are of:" + listing);
  }
  if (runs.size() > 1)
    throw UsageError(fmt::format("the traces are of {} runs; choose one with --run ID or pass one run's traces:{}",
                                 runs.size(), listing));
  return std::move(runs.front());
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace psc::cli
