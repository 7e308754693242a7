// `peakscope report` end to end: the built binary (found next to this test
// executable) run on a golden trace; its JSON parsed and checked against the
// answer known by construction; exit codes for truncated traces and non-traces.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/synthetic_trace.h"

namespace psc {
namespace {

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& tag) {
    static int counter = 0;
    path = (std::filesystem::temp_directory_path() /
            ("psc_cli_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".pstrace"))
               .string();
  }
  ~TempFile() { std::remove(path.c_str()); }
};

std::string peakscope_binary() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const std::filesystem::path candidate = self.parent_path() / "peakscope";
  return std::filesystem::exists(candidate) ? candidate.string() : std::string();
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CliRun run(const std::string& args) {
  TempFile err_file("stderr");
  CliRun r;
  const std::string command = shell_quote(peakscope_binary()) + " " + args + " 2>" + shell_quote(err_file.path);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return r;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_file.path);
  r.err.assign(std::istreambuf_iterator<char>(in), {});
  return r;
}

// weights 500 before the step; one cold wave of one layer pair:
//   forward/layer.0 makes the boundary of layer 1 (300); backward/layer.1 makes
//   a gradient (40) and recompute/layer.1 a workspace (1000): peak 1840.
void write_golden(const std::string& path, bool close = true) {
  SyntheticTrace t(path);
  t.alloc(0, 0x100, 500);
  t.wave_begin(0, R"({"tokens":2047,"slots":["a"],"groups":1,"cold":true})");
  t.push(0, "forward/layer.0");
  t.alloc(0, 0x200, 300);
  t.pop(0);
  t.push(0, "recompute/layer.1");
  t.alloc(0, 0x300, 1000);
  t.pop(0);
  t.push(0, "backward/layer.1");
  t.alloc(0, 0x400, 40);
  t.free(0, 0x300);
  t.free(0, 0x200);
  t.pop(0);
  t.wave_end(0);
  t.push(0, "optimizer/step");
  t.free(0, 0x400);
  t.pop(0);
  if (close) t.close();
}

class ReportCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (peakscope_binary().empty()) GTEST_SKIP() << "build/peakscope is not built next to the unit tests";
  }
};

TEST_F(ReportCli, JsonOfAGoldenTrace) {
  TempFile trace("golden");
  write_golden(trace.path);
  const CliRun r = run("report " + shell_quote(trace.path) + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["events"], 18);
  EXPECT_EQ(j["dropped"], 0);
  EXPECT_EQ(j["level"], "allocated");
  EXPECT_EQ(j["peak_bytes"], 1840);
  EXPECT_EQ(j["peak_time_ns"], SyntheticTrace::kStartTimeNs + 11 * SyntheticTrace::kTimeStepNs);
  EXPECT_EQ(j["peak_site"]["range"], "backward/layer.1");
  EXPECT_EQ(j["peak_site"]["layer"], 1);
  EXPECT_EQ(j["trace"]["status"], "complete");

  std::map<std::string, uint64_t> by_category;
  uint64_t total = 0;
  for (const auto& g : j["live_at_peak"]) {
    by_category[g["category"].get<std::string>()] += g["bytes"].get<uint64_t>();
    total += g["bytes"].get<uint64_t>();
    if (g["category"] == "adapter_gradient") {
      EXPECT_EQ(g["range"], "backward/layer.1");
      EXPECT_EQ(g["layer"], 1);
    }
    if (g["category"] == "boundary") {
      EXPECT_EQ(g["layer"], 1);
    }
  }
  EXPECT_EQ(total, 1840u);
  EXPECT_EQ(by_category["persistent"], 500u);
  EXPECT_EQ(by_category["boundary"], 300u);
  EXPECT_EQ(by_category["workspace"], 1000u);
  EXPECT_EQ(by_category["adapter_gradient"], 40u);

  ASSERT_EQ(j["waves"].size(), 1u);
  const auto& w = j["waves"][0];
  EXPECT_EQ(w["index"], 0);
  EXPECT_EQ(w["tokens"], 2047);
  EXPECT_EQ(w["cold"], true);
  EXPECT_EQ(w["baseline_bytes"], 500);
  EXPECT_EQ(w["peak_bytes"], 1840);
  EXPECT_EQ(w["measured_peak_bytes"], 1340);
  ASSERT_EQ(w["layers_at_peak"].size(), 2u);
  EXPECT_EQ(w["layers_at_peak"][1]["boundary_bytes"], 300);
  EXPECT_EQ(w["layers_at_peak"][1]["workspace_bytes"], 1000);
  EXPECT_EQ(w["layers_at_peak"][1]["adapter_gradient_bytes"], 40);
}

TEST_F(ReportCli, TextNamesThePeakAndTheWave) {
  TempFile trace("text");
  write_golden(trace.path);
  const CliRun r = run("report " + shell_quote(trace.path));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1840 bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("backward/layer.1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2047"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("WARNING"), std::string::npos) << r.out;
}

// A newline in a path is shown escaped, as record shows it: one line each.
TEST_F(ReportCli, APathWithANewlineIsOneLine) {
  TempFile base("newline");
  const std::string path = base.path + "\nsecond.pstrace";
  write_golden(path);
  const CliRun r = run("report " + shell_quote(path));
  std::remove(path.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("trace      " + base.path + "\\nsecond.pstrace\n"), std::string::npos) << r.out;
}

TEST_F(ReportCli, TruncatedTraceExitsZeroWithAWarning) {
  TempFile trace("cut");
  write_golden(trace.path);
  const uintmax_t size = std::filesystem::file_size(trace.path);
  std::filesystem::resize_file(trace.path, size - 5);
  const CliRun r = run("report " + shell_quote(trace.path));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("truncated"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  const CliRun j = run("report " + shell_quote(trace.path) + " --json");
  EXPECT_EQ(j.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(j.out)["trace"]["status"], "truncated");
}

TEST_F(ReportCli, NotATraceExitsTwoNamingFileAndOffset) {
  TempFile junk("junk");
  {
    std::ofstream out(junk.path);
    out << "{\"not\": \"a trace\"}\n";
  }
  const CliRun r = run("report " + shell_quote(junk.path));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(junk.path), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("at byte 0"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
}

TEST_F(ReportCli, BadUsageExitsTwo) {
  EXPECT_EQ(run("report").exit_code, 2);
  EXPECT_EQ(run("report a b").exit_code, 2);
  EXPECT_EQ(run("report x --frobnicate").exit_code, 2);
  EXPECT_EQ(run("report x --top").exit_code, 2);
}

}  // namespace
}  // namespace psc
