// The subcommands' argument parser (cli/args.h): what goes where, the
// error texts the CLI tests hold the commands to, and the shared converters.
#include "cli/args.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/command_table.h"
#include "cli/commands.h"

namespace psc::cli {
namespace {

constexpr const char* kUsage = "usage: peakscope test [--json] [-o OUT] TRACE";

// argv as main receives it: the command's name, then the arguments.
class Argv {
 public:
  explicit Argv(std::vector<std::string> words) : words_(std::move(words)) {
    words_.insert(words_.begin(), "test");
    for (std::string& w : words_) pointers_.push_back(w.data());
    pointers_.push_back(nullptr);
  }
  int argc() const { return static_cast<int>(words_.size()); }
  char** argv() { return pointers_.data(); }

 private:
  std::vector<std::string> words_;
  std::vector<char*> pointers_;
};

struct Parsed {
  bool json = false;
  std::string output;
  std::string trace;
};

// Parses `words` with one flag, one option and one positional; the error's
// text, or "" when it parsed.
std::string parse(std::vector<std::string> words, Parsed& p, bool one_line = false) {
  ArgParser args(kUsage);
  if (one_line) args.one_line_errors();
  args.flag({"--json"}, &p.json);
  args.option({"-o", "--output"}, &p.output);
  args.positional(&p.trace, "trace");
  Argv argv(std::move(words));
  try {
    EXPECT_TRUE(args.parse(argv.argc(), argv.argv()));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ArgParser, FlagsOptionsAndAPositional) {
  Parsed p;
  EXPECT_EQ(parse({"t.pstrace", "--json", "--output", "out.json"}, p), "");
  EXPECT_TRUE(p.json);
  EXPECT_EQ(p.output, "out.json");
  EXPECT_EQ(p.trace, "t.pstrace");
}

TEST(ArgParser, AnOptionTakesTheNextArgumentWhateverItIs) {
  Parsed p;
  EXPECT_EQ(parse({"-o", "--json", "t"}, p), "");
  EXPECT_EQ(p.output, "--json");
  EXPECT_FALSE(p.json);
}

TEST(ArgParser, ErrorsNameTheArgumentThenTheUsage) {
  Parsed p;
  EXPECT_EQ(parse({"t", "--jsn"}, p), std::string("unknown option '--jsn'\n") + kUsage);
  EXPECT_EQ(parse({"t", "-o"}, p), std::string("-o needs a value\n") + kUsage);
  EXPECT_EQ(parse({"a", "b"}, p), std::string("one trace at a time ('a' and 'b')\n") + kUsage);
  EXPECT_EQ(parse({"a", "b"}, p, /*one_line=*/true), "one trace at a time ('a' and 'b')");
}

TEST(ArgParser, DashIsAPositionalAndDoubleDashEndsTheOptions) {
  Parsed p;
  EXPECT_EQ(parse({"-"}, p), "");
  EXPECT_EQ(p.trace, "-");
  Parsed q;
  EXPECT_EQ(parse({"--json", "--", "--output"}, q), "");
  EXPECT_TRUE(q.json);
  EXPECT_EQ(q.trace, "--output");
  EXPECT_EQ(q.output, "");
}

TEST(ArgParser, HelpPrintsTheUsageAndTheExtraOnStdout) {
  bool json = false;
  ArgParser args(kUsage, "formats: a b");
  args.flag({"--json"}, &json);
  Argv argv({"--json", "-h", "--unknown"});
  testing::internal::CaptureStdout();
  const bool parsed = args.parse(argv.argc(), argv.argv());
  EXPECT_EQ(testing::internal::GetCapturedStdout(), std::string(kUsage) + "\nformats: a b\n");
  EXPECT_FALSE(parsed);
}

TEST(ArgParser, ACommandIsEverythingFromItsFirstWord) {
  std::string output;
  std::vector<std::string> command;
  ArgParser args("usage: peakscope record [-o PATH] -- CMD ARGS...");
  args.option({"-o"}, &output);
  args.command(&command);
  Argv argv({"-o", "t.pstrace", "python3", "-h", "--", "x"});
  ASSERT_TRUE(args.parse(argv.argc(), argv.argv()));
  EXPECT_EQ(output, "t.pstrace");
  EXPECT_EQ(command, (std::vector<std::string>{"python3", "-h", "--", "x"}));

  std::vector<std::string> after_dashes;
  ArgParser dashes("usage: record -- CMD");
  dashes.command(&after_dashes);
  Argv dashed({"--", "-o", "x"});
  ASSERT_TRUE(dashes.parse(dashed.argc(), dashed.argv()));
  EXPECT_EQ(after_dashes, (std::vector<std::string>{"-o", "x"}));
}

TEST(ArgParser, PositionalsCollectInOrder) {
  std::vector<std::string> traces;
  ArgParser args("usage: check TRACE...");
  args.positionals(&traces);
  Argv argv({"a", "-", "b"});
  ASSERT_TRUE(args.parse(argv.argc(), argv.argv()));
  EXPECT_EQ(traces, (std::vector<std::string>{"a", "-", "b"}));
}

std::string error_of(void (*convert)()) {
  try {
    convert();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Converters, CountsAreNonNegativeIntegers) {
  EXPECT_EQ(parse_count("--tokens", "0"), 0);
  EXPECT_EQ(parse_count("--tokens", "4096"), 4096);
  EXPECT_EQ(error_of([] { parse_count("--tokens", "x"); }), "--tokens: 'x' must be a non-negative integer");
  EXPECT_EQ(error_of([] { parse_count("--tokens", ""); }), "--tokens: '' must be a non-negative integer");
  EXPECT_EQ(error_of([] { parse_count("--tokens", "-1"); }), "--tokens: '-1' must be a non-negative integer");
  EXPECT_EQ(error_of([] { parse_count("--tokens", "-0"); }), "--tokens: '-0' must be a non-negative integer");
  EXPECT_EQ(error_of([] { parse_count("--tokens", "+1"); }), "--tokens: '+1' must be a non-negative integer");
  EXPECT_EQ(error_of([] { parse_count("--tokens", "99999999999999999999"); }),
            "--tokens: '99999999999999999999' is too large");
  EXPECT_EQ(error_of([] { parse_count("--budget", "12x", "number of bytes"); }),
            "--budget: '12x' must be a non-negative integer number of bytes");
}

TEST(Converters, BytesTakeABinaryUnit) {
  EXPECT_EQ(parse_bytes("--budget", "4096"), 4096);
  EXPECT_EQ(parse_bytes("--budget", "2KiB"), 2048);
  EXPECT_EQ(parse_bytes("--budget", "64MiB"), int64_t{64} << 20);
  EXPECT_EQ(parse_bytes("--budget", "80GiB"), int64_t{80} << 30);
  EXPECT_EQ(parse_bytes("--budget", "4194304TiB"), int64_t{1} << 62);
  EXPECT_EQ(error_of([] { parse_bytes("--budget", "4194305TiB"); }), "--budget: '4194305TiB' is too large");
  EXPECT_EQ(error_of([] { parse_bytes("--budget", "MiB"); }), "--budget: 'MiB' must be a non-negative integer");
  EXPECT_EQ(error_of([] { parse_bytes("--budget", "12XB"); }), "--budget: '12XB' must be a non-negative integer");
}

TEST(Converters, ListsSplitAtEveryComma) {
  EXPECT_EQ(split_list("a"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(split_list("a,b,,c"), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(split_list(""), (std::vector<std::string>{""}));
  EXPECT_EQ(split_list("a,"), (std::vector<std::string>{"a", ""}));
}

}  // namespace
TEST(Converters, NumbersAreFiniteDecimalsInRange) {
  const auto error = [](const char* option, const char* text, double min, double max, const char* what) {
    try {
      parse_number(option, text, min, max, what);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(parse_number("--safety", "1.1", 1, 64, "a factor"), 1.1);
  EXPECT_EQ(parse_number("--safety", "2", 1, 64, "a factor"), 2.0);
  EXPECT_EQ(parse_number("--safety", "1e1", 1, 64, "a factor"), 10.0);
  EXPECT_EQ(parse_number("--safety", "64", 1, 64, "a factor"), 64.0);
  for (const char* bad : {"", "x", "1.5x", " 1", "+2", "0x10", "inf", "nan", "65", "0.5"})
    EXPECT_EQ(error("--safety", bad, 1, 64, "a factor"), std::string("--safety: '") + bad + "' is not a factor") << bad;
  EXPECT_EQ(error("--rank-shares", "0", std::numeric_limits<double>::denorm_min(), 1e300, "a positive number"),
            "--rank-shares: '0' is not a positive number");
}

TEST(CommandTable, TheParserRefusesAnOptionTheTableDoesNotList) {
  ArgParser args(command_spec("report"));
  bool json = false;
  args.flag({"--json"}, &json);
  EXPECT_THROW(args.flag({"--not-in-the-table"}, &json), std::logic_error);
  EXPECT_THROW(command_spec("no-such-command"), std::logic_error);
}

TEST(CommandTable, EveryEntryIsWellFormed) {
  std::vector<std::string> names;
  for (const CommandSpec& c : command_table()) {
    EXPECT_EQ(std::count(names.begin(), names.end(), c.name), 0) << c.name;
    names.push_back(c.name);
    EXPECT_NE(c.run, nullptr) << c.name;
    EXPECT_FALSE(c.forms.empty()) << c.name;
    // A form is the name, then its arguments if it has any (`version` has none).
    for (const std::string& form : c.forms) EXPECT_TRUE(form == c.name || form.rfind(c.name + " ", 0) == 0) << form;
    EXPECT_EQ(c.about.find('\n'), std::string::npos) << c.name;
    for (const OptionSpec& o : c.options) {
      EXPECT_FALSE(o.help.empty() || o.help.find('\n') != std::string::npos) << c.name;
      for (const std::string& n : o.names) EXPECT_EQ(n[0], '-') << c.name;
    }
    std::istringstream lines(usage_text(c));
    for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 100u) << line;
  }
}

}  // namespace psc::cli
