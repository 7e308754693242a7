// `peakscope export` and `peakscope import` end to end: the built binary
// (next to this test executable) on the fixture trace and the snapshot
// fixtures; exit 0 for every format, exit 2 with one line naming the file (and
// the byte offset where there is one) for what is not what it claims to be.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "exchange/exporter.h"
#include "tests/support/export_fixture.h"
#include "traces/reader.h"

namespace psc {
namespace {

std::string peakscope_binary() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const std::filesystem::path candidate = self.parent_path() / "peakscope";
  return std::filesystem::exists(candidate) ? candidate.string() : std::string();
}

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

class ViewersCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (peakscope_binary().empty()) GTEST_SKIP() << "peakscope is not built next to the unit tests";
    trace_ = dir_.file("fixture.pstrace");
    test::write_fixture_trace(trace_);
  }
  CliResult run(const std::string& args) {
    const std::string err = dir_.file("stderr");
    CliResult r;
    FILE* pipe = ::popen(("'" + peakscope_binary() + "' " + args + " 2>'" + err + "'").c_str(), "r");
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
    const int status = ::pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = test::read_file(err);
    return r;
  }
  test::TempDir dir_;
  std::string trace_;
};

TEST_F(ViewersCli, EveryFormatExports) {
  for (const Exporter* e : exporters()) {
    const std::string out = dir_.file("out." + std::string(e->name()));
    const CliResult r = run("export " + trace_ + " --format " + std::string(e->name()) + " -o " + out);
    EXPECT_EQ(r.exit_code, 0) << e->name() << ": " << r.err;
    EXPECT_GT(std::filesystem::file_size(out), 0u) << e->name();
    EXPECT_FALSE(std::filesystem::exists(out + ".partial")) << e->name();
  }
}

TEST_F(ViewersCli, BadInputIsExitTwoWithOneLineNamingTheFile) {
  const std::string text = dir_.file("notes.txt");
  test::write_file(text, "not a trace\n");
  CliResult r = run("export " + text + " --format perfetto -o " + dir_.file("x.pftrace"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(text), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("at byte 0"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // one line

  r = run("export " + trace_ + " --format svg -o " + dir_.file("x.svg"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown format 'svg'"), std::string::npos) << r.err;
  r = run("export " + trace_ + " --format nvtxt --nvtxt-time-base Boot -o " + dir_.file("x.nvtxt"));
  EXPECT_EQ(r.exit_code, 2);

  r = run("import " + test::golden_path("torch_snapshot_evil.pickle") + " --from torch-snapshot -o " +
          dir_.file("evil.pstrace"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("torch_snapshot_evil.pickle"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("at byte"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("evil.pstrace")));

  r = run("import " + text + " --from nsys-sqlite -o " + dir_.file("x.pstrace"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(text), std::string::npos) << r.err;
  r = run("import " + text + " --from chrome -o " + dir_.file("x.pstrace"));
  EXPECT_EQ(r.exit_code, 2);
}

TEST_F(ViewersCli, ATruncatedTraceExportsWhatWasReadAndSaysSo) {
  const std::string cut = dir_.file("cut.pstrace");
  const std::string whole = test::read_file(trace_);
  test::write_file(cut, whole.substr(0, whole.size() - 100));
  const CliResult r = run("export " + cut + " --format chrome -o " + dir_.file("cut.json"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
}

TEST_F(ViewersCli, ImportedTracesAreReportable) {
  const std::string trace = dir_.file("snapshot.pstrace");
  CliResult r = run("import " + test::golden_path("torch_snapshot.pickle") + " --from torch-snapshot -o " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("devices: 2"), std::string::npos) << r.out;
  r = run("report " + trace + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string db = dir_.file("fixture.sqlite"), back = dir_.file("back.pstrace");
  ASSERT_EQ(run("export " + trace_ + " --format nsys-sqlite -o " + db).exit_code, 0);
  r = run("import " + db + " --from nsys-sqlite -o " + back);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(run("report " + back + " --json").exit_code, 0);
}

// A file's size is said; a device has none to say (it used to say 0 bytes).
TEST_F(ViewersCli, TheSizeWrittenIsAFilesOnly) {
  CliResult r = run("export " + trace_ + " --format chrome -o " + dir_.file("x.json"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(" (chrome, " + std::to_string(std::filesystem::file_size(dir_.file("x.json"))) + " bytes)"),
            std::string::npos)
      << r.out;
  r = run("export " + trace_ + " --format chrome -o /dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote /dev/null (chrome)\n"), std::string::npos) << r.out;
}

// A trace at -o may be a recording nobody can make again: import replaces it
// only with --force (as record does), and never what is not a file.
TEST_F(ViewersCli, ImportReplacesAnExistingTraceOnlyWithForce) {
  const std::string kept = dir_.file("kept.pstrace");
  std::filesystem::copy_file(trace_, kept);
  const std::string pickle = test::golden_path("torch_snapshot.pickle");
  CliResult r = run("import " + pickle + " --from torch-snapshot -o " + kept);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(kept + " already exists; --force replaces it"), std::string::npos) << r.err;
  EXPECT_EQ(test::read_file(kept), test::read_file(trace_)) << "left as it was";
  r = run("import " + pickle + " --from torch-snapshot -o " + kept + " --force");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(test::read_file(kept), test::read_file(trace_)) << "replaced";
  r = run("import " + pickle + " --from torch-snapshot -o " + dir_.file("") + " --force");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("exists and is not a file"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace psc

namespace psc {
namespace {

// An output that is not a plain file is written in place: renaming a finished
// export over /dev/null or a link would replace the device or the link.
TEST(OutputFiles, ALinkIsWrittenThroughNotReplaced) {
  test::TempDir dir;
  const std::string trace = dir.file("fixture.pstrace"), target = dir.file("target.json"), link = dir.file("link.json");
  test::write_fixture_trace(trace);
  test::write_file(target, "");
  std::filesystem::create_symlink(target, link);
  for (const Exporter* e : exporters()) {
    if (e->name() == "nsys-sqlite") continue;  // refuses anything but a regular file
    ExportOptions o;
    o.trace = trace;
    o.output = link;
    e->write(o);
    EXPECT_TRUE(std::filesystem::is_symlink(link)) << e->name();
    EXPECT_GT(std::filesystem::file_size(target), 0u) << e->name();
  }
  ImportOptions i;
  i.input = test::golden_path("torch_snapshot.pickle");
  i.output = link;
  find_importer("torch-snapshot")->read(i);
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(load_trace(target).status.state, ReadStatus::State::kComplete);
  ExportOptions o;
  o.trace = trace;
  o.output = link;
  EXPECT_THROW(find_exporter("nsys-sqlite")->write(o), std::runtime_error);
  EXPECT_TRUE(std::filesystem::is_symlink(link));
}

}  // namespace
}  // namespace psc
