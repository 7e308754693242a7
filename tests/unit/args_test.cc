// The subcommands' argument parser (tools/cli/args.h): what goes where, the
// error texts the CLI tests hold the commands to, and the shared converters.
#include "tools/cli/args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/cli/commands.h"

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
            "--tokens: '99999999999999999999' must be a non-negative integer");
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
}  // namespace psc::cli
