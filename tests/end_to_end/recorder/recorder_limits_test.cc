// The recorder at the limits of what a system allows, through its real
// loading path: an output path over PATH_MAX, a file size limit below the
// trace's own header, paths with newlines and bytes that are not UTF-8, more
// exec'd images than a numbering that stopped at 1000, and more short-lived
// threads than slots. None may end in a silently different file name, an
// uncounted loss, a split message or a lost byte. Every test here failed on
// the recorder and CLI before these cases were handled (docs/recorder.md,
// "What is promised, how it is tested"); every process runs under timeout.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "format/printable.h"
#include "tests/support/test_support.h"
#include "traces/reader.h"

namespace psc {
namespace {

namespace fs = std::filesystem;
using test_support::build_dir;
using test_support::cli;
using test_support::preload;
using test_support::run;
using test_support::Scratch;
using test_support::slurp;

std::string program() { return build_dir() + "/programs/host_pattern"; }

// A path as one shell word, whatever bytes it holds.
std::string quoted(const std::string& path) {
  std::string q = "'";
  for (char c : path) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

size_t lines_in(const std::string& text) { return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')); }

// host_pattern ARGS with the recorder preloaded by hand as the primary
// process writing OUTPUT, under `timeout 60`; stderr to ERR.
int preloaded(const Scratch& s, const std::string& output, const std::string& args, const std::string& env = "") {
  return run("timeout 60 sh -c " +
             quoted(env + " PEAKSCOPE_HOST=1 PEAKSCOPE_OUTPUT=" + quoted(output) +
                    " PEAKSCOPE_PRIMARY_PID=$$ LD_PRELOAD=" + preload() + " exec " + program() + " " + args) +
             " 2>" + quoted(s.path("err")));
}

std::string printable(const std::string& path) {
  std::string out;
  format::put_printable(path.data(), path.size(), [&](const char* t, size_t n) { out.append(t, n); });
  return out;
}

// ---- paths in messages -----------------------------------------------------------

TEST(PrintablePath, EscapesControlsAndBytesThatAreNotUtf8AndNothingElse) {
  EXPECT_EQ(printable("/tmp/plain name.pstrace"), "/tmp/plain name.pstrace");
  EXPECT_EQ(printable("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(printable("back\\slash"), "back\\\\slash");
  EXPECT_EQ(printable(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(printable("esc\x1b[31m del\x7f"), "esc\\x1b[31m del\\x7f");
  EXPECT_EQ(printable("donn\xc3\xa9"
                      "es \xe2\x82\xac \xf0\x9f\x98\x80"),
            "donn\xc3\xa9"
            "es \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(printable("latin1 \xe9t\xe9"), "latin1 \\xe9t\\xe9");
  EXPECT_EQ(printable("c1 \xc2\x85 nbsp \xc2\xa0"), "c1 \\xc2\\x85 nbsp \xc2\xa0");
  EXPECT_EQ(printable("overlong \xc0\xaf surrogate \xed\xa0\x80"), "overlong \\xc0\\xaf surrogate \\xed\\xa0\\x80");
  EXPECT_EQ(printable("cut \xe2\x82"), "cut \\xe2\\x82");
  EXPECT_EQ(printable("high \xf4\x90\x80\x80"), "high \\xf4\\x90\\x80\\x80");
  EXPECT_EQ(printable_path("x'y\n"), "x'y\\n");
  EXPECT_EQ(path_bytes_hex("donn\xc3\xa9"
                           "es"),
            "");
  EXPECT_EQ(path_bytes_hex("a\xff\n"), "61ff0a");
}

// A folder whose name holds a newline and a byte that is not UTF-8: every
// message naming a path in it is one line with the path escaped, the
// suggested shell command reads the right file, and `report --json` keeps
// the path's bytes.
TEST(PrintablePath, MessagesStayOneLineAndJsonKeepsTheBytes) {
  Scratch s;
  const std::string dir = s.path("new\nline\xff");
  ASSERT_TRUE(fs::create_directory(dir));
  const std::string shown = printable(dir);
  ASSERT_EQ(shown, s.dir() + "/new\\nline\\xff");

  // record: an output that cannot be created.
  EXPECT_EQ(run("timeout 60 " + cli() + " record --host -o " + quoted(dir + "/missing/t.pstrace") + " -- true 2>" +
                quoted(s.path("err"))),
            2);
  EXPECT_EQ(slurp(s.path("err")), "peakscope record: cannot write the trace to " + shown +
                                      "/missing/t.pstrace: No such file or directory (errno 2)\n");
  // The recorder itself.
  EXPECT_EQ(preloaded(s, dir + "/missing/t.pstrace", "exit 0"), 0);
  EXPECT_EQ(slurp(s.path("err")), "peakscope: cannot create trace file " + shown +
                                      "/missing/t.pstrace: No such file or directory (errno 2); recording stopped\n");
  // A reader's refusal.
  std::ofstream(dir + "/x.pstrace") << "not a trace\n";
  EXPECT_EQ(run(cli() + " report " + quoted(dir + "/x.pstrace") + " 2>" + quoted(s.path("err"))), 2);
  EXPECT_EQ(slurp(s.path("err")),
            "peakscope report: " + shown + "/x.pstrace: not a peakscope trace (bad magic) at byte 0\n");

  // A trace recorded there: record names it on one line, report --json
  // keeps its bytes.
  const std::string trace = dir + "/t.pstrace";
  ASSERT_EQ(run("timeout 60 " + cli() + " record --host -o " + quoted(trace) + " -- " + program() +
                " peak 3 100000 2>" + quoted(s.path("err"))),
            0);
  EXPECT_EQ(slurp(s.path("err")).rfind("peakscope: trace written to " + shown + "/t.pstrace (", 0), 0u)
      << slurp(s.path("err"));
  EXPECT_EQ(lines_in(slurp(s.path("err"))), 1u);
  ASSERT_EQ(run(cli() + " report --json " + quoted(trace) + " >" + quoted(s.path("json"))), 0);
  const nlohmann::json report = nlohmann::json::parse(slurp(s.path("json")));
  const std::string hex = report["trace"].value("path_bytes", std::string());
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  EXPECT_EQ(bytes, trace) << "path_bytes is the path, byte for byte";
  EXPECT_NE(report["trace"]["path"].get<std::string>().find("line\xef\xbf\xbd/t.pstrace"), std::string::npos)
      << "path stays a readable string (U+FFFD for the bad byte)";

  // A file holding two traces: the command the message suggests, run as
  // it is printed, cuts out the first.
  const std::string two = dir + "/two.pstrace";
  std::ofstream(two, std::ios::binary) << slurp(trace) << slurp(trace);
  EXPECT_EQ(run(cli() + " report " + quoted(two) + " 2>" + quoted(s.path("err"))), 2);
  const std::string err = slurp(s.path("err"));
  EXPECT_EQ(lines_in(err), 1u) << err;
  const size_t at = err.find("head -c ");
  ASSERT_NE(at, std::string::npos) << err;
  std::ofstream(s.path("cut.sh")) << "cd " << quoted(s.dir()) << " && " << err.substr(at);
  ASSERT_EQ(run("bash " + s.path("cut.sh")), 0);
  EXPECT_EQ(slurp(s.path("first.pstrace")), slurp(trace));
}

// UTF-8 paths are exact in JSON already: no path_bytes.
TEST(PrintablePath, AUtf8PathHasNoPathBytes) {
  Scratch s;
  const std::string trace = s.path(
      "donn\xc3\xa9"
      "es.pstrace");
  ASSERT_EQ(run("timeout 60 " + cli() + " record --host -o " + quoted(trace) + " -- " + program() +
                " peak 1 100000 2>/dev/null"),
            0);
  ASSERT_EQ(run(cli() + " report --json " + quoted(trace) + " >" + s.path("json")), 0);
  const nlohmann::json report = nlohmann::json::parse(slurp(s.path("json")));
  EXPECT_EQ(report["trace"]["path"].get<std::string>(), trace);
  EXPECT_FALSE(report["trace"].contains("path_bytes"));
}

// ---- an output path over PATH_MAX ------------------------------------------------

// 4104 bytes: cut to 4095, as the recorder's configuration used to cut it,
// the name was .../trunc/abc.ps, which exists as a folder's file name to be:
// the trace went there, silently.
TEST(RecorderLimits, AnOutputPathOverPathMaxIsRefusedNeverCut) {
  Scratch s;
  ASSERT_TRUE(fs::create_directory(s.path("trunc")));
  const std::string tail = "trunc/abc.pstrace";
  const std::string path = s.dir() + std::string(4104 - s.dir().size() - tail.size(), '/') + tail;
  ASSERT_EQ(path.size(), 4104u);
  EXPECT_EQ(preloaded(s, path, "peak 3 100000"), 0);
  EXPECT_EQ(slurp(s.path("err")),
            "peakscope: PEAKSCOPE_OUTPUT is 4104 bytes long, over the 4095 a path may have (PATH_MAX); recording "
            "stopped, no trace written\n");
  EXPECT_TRUE(fs::is_empty(s.path("trunc"))) << "no trace under a cut name";

  EXPECT_EQ(
      run("timeout 60 " + cli() + " record --host -o " + path + " -- touch " + s.path("ran") + " 2>" + s.path("err")),
      2);
  EXPECT_EQ(slurp(s.path("err")), "peakscope record: cannot write the trace to " + path +
                                      ": its path is 4104 bytes long, over the 4095 a path may have (PATH_MAX); "
                                      "choose a shorter -o\n");
  EXPECT_FALSE(fs::exists(s.path("ran"))) << "the command does not run";
  EXPECT_TRUE(fs::is_empty(s.path("trunc")));
}

// ---- a file size limit below the trace's header ----------------------------------

// The program sets RLIMIT_FSIZE to 100 bytes after the recorder wrote its
// 224-byte header: no chunk, not even the closing one with the drop counts,
// can be written, nor the header rewritten by pwrite. It used to leave a
// file that read as 0 events of a killed process, with no flag and no
// count. Now the header says writes failed (rewritten through a mapping),
// the recorder says how many events were lost, and record warns. stderr is a
// pipe here; as a file, the recorder's messages past the limit would raise
// SIGXFSZ, and are left unsaid (next test).
TEST(RecorderLimits, AFileSizeLimitBelowTheHeaderIsFlaggedAndCounted) {
  Scratch s;
  const std::string trace = s.path("t.pstrace");
  ASSERT_EQ(run("(timeout 60 " + cli() + " record --host -o " + trace + " -- " + program() +
                " fsize 100 1000; echo rc=$?)" + " 2>&1 | cat >" + s.path("err")),
            0);
  const std::string err = slurp(s.path("err"));
  EXPECT_NE(err.find("rc=0"), std::string::npos) << err;
  LoadedTrace t = load_trace(trace);
  EXPECT_TRUE(t.meta.header.flags & format::kHeaderWriteFailed) << "the header says writes failed";
  EXPECT_EQ(t.events.size(), 0u);
  EXPECT_NE(err.find("peakscope: cannot close trace file " + trace +
                     ": File too large (errno 27); 2000 events recorded were lost to write errors"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("peakscope: warning: writes to " + trace + " failed and the trace could not be closed"),
            std::string::npos)
      << err;
}

// The same with stderr a regular file: the recorder's messages would end
// past the limit, and writing them would raise SIGXFSZ and end the program
// (it did: exit 153). They are left unsaid; the program ends as it would.
TEST(RecorderLimits, ARecordersMessageNeverRaisesSigxfsz) {
  Scratch s;
  EXPECT_EQ(run("timeout 60 " + cli() + " record --host -o " + s.path("t.pstrace") + " -- " + program() +
                " fsize 100 1000 2>" + s.path("err")),
            0)
      << slurp(s.path("err"));
  EXPECT_TRUE(load_trace(s.path("t.pstrace")).meta.header.flags & format::kHeaderWriteFailed);
}

// A limit record's command would inherit that cannot hold the smallest
// trace: exit 2 before the command runs (it used to run, and end in "File
// exists").
TEST(RecorderLimits, RecordRefusesAnInheritedLimitBelowTheSmallestTrace) {
  Scratch s;
  EXPECT_EQ(run("bash -c " +
                quoted("(ulimit -f 0; exec timeout 60 " + cli() + " record --host -o " + s.path("t.pstrace") +
                       " -- touch " + s.path("ran") + ") 2>&1 | cat >" + s.path("err") + "; exit ${PIPESTATUS[0]}")),
            2);
  EXPECT_EQ(slurp(s.path("err")), "peakscope record: cannot write the trace to " + s.path("t.pstrace") +
                                      ": the file size limit (RLIMIT_FSIZE, ulimit -f) is 0 bytes, below the 480 "
                                      "the smallest trace takes\n");
  EXPECT_FALSE(fs::exists(s.path("ran")));
}

// The command lowers the limit to 0, then execs: the new image's file can
// take no header. The recorder counts its events on stderr; record names
// the empty file (it used to list nothing, or say "File exists").
TEST(RecorderLimits, AnImageThatCanWriteNoHeaderIsNamedAndCounted) {
  Scratch s;
  ASSERT_EQ(run("bash -c " + quoted("timeout 60 " + cli() + " record --host -o " + s.path("t.pstrace") +
                                    " -- sh -c 'ulimit -f 0; exec " + program() + " peak 3 100000' 2>&1 | cat >" +
                                    s.path("err") + "; exit ${PIPESTATUS[0]}")),
            0);
  const std::string err = slurp(s.path("err"));
  EXPECT_EQ(fs::file_size(s.path("t.e1.pstrace")), 0u);
  EXPECT_NE(err.find("peakscope: cannot close trace file " + s.path("t.e1.pstrace") +
                     ": File too large (errno 27); 6 events recorded were lost to write errors"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("peakscope: warning: " + s.path("t.e1.pstrace") + " holds no trace (0 bytes)"), std::string::npos)
      << err;
}

// ---- exec'd images past the thousandth ---------------------------------------------

// t.pstrace and t.e1 .. t.e1000.pstrace are taken (files of the program's,
// or a chain of 1000 execs): the next image writes t.e1001.pstrace. The
// numbering used to stop at 1000, and the image got no trace behind "File
// exists". Names found by doubling and halving: a gap higher up (t.e1500)
// changes nothing.
TEST(RecorderLimits, ExecImagesPastTheThousandthGetTheirOwnFile) {
  Scratch s;
  std::ofstream(s.path("t.pstrace")) << "mine\n";
  for (int n = 1; n <= 1000; ++n) std::ofstream(s.path("t.e" + std::to_string(n) + ".pstrace")) << n << "\n";
  std::ofstream(s.path("t.e1500.pstrace")) << "1500\n";
  EXPECT_EQ(preloaded(s, s.path("t.pstrace"), "peak 3 100000"), 0);
  EXPECT_EQ(slurp(s.path("err")), "");
  LoadedTrace t = load_trace(s.path("t.e1001.pstrace"));
  EXPECT_TRUE(t.meta.clean_end);
  EXPECT_EQ(t.events.size(), 6u);
  EXPECT_EQ(slurp(s.path("t.pstrace")), "mine\n");
  bool untouched = true;
  for (int n = 1; n <= 1000; ++n)
    untouched &= slurp(s.path("t.e" + std::to_string(n) + ".pstrace")) == std::to_string(n) + "\n";
  EXPECT_TRUE(untouched) << "every taken name left as it was";
  EXPECT_EQ(slurp(s.path("t.e1500.pstrace")), "1500\n");
}

// ---- short-lived threads -------------------------------------------------------------

// 1110 threads, 10 pairs each, in waves of 30 (at most 31 threads alive with
// main), all within one 100 ms writer cycle: more threads than slots (1024)
// per cycle, never more than 31 alive. A dead thread's slot used to be freed
// only by the writer's next cycle, and 100 to 1000 events were dropped as
// no_thread_slot; a thread that finds no slot while some slot's thread has
// exited now wakes the writer and waits for that cycle.
TEST(RecorderLimits, ShortLivedThreadsNeedSlotsOnlyWhileTheyLive) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    SCOPED_TRACE(attempt);
    Scratch s;
    ASSERT_EQ(run("PEAKSCOPE_FLUSH_MS=100 timeout 60 " + cli() + " record --host -o " + s.path("t.pstrace") + " -- " +
                  program() + " churn 37 30 10 2>" + s.path("err")),
              0)
        << slurp(s.path("err"));
    LoadedTrace t = load_trace(s.path("t.pstrace"));
    EXPECT_TRUE(t.meta.clean_end);
    EXPECT_EQ(t.meta.dropped_total(), 0u);
    EXPECT_EQ(t.events.size(), 2u * 37 * 30 * 10);
    uint64_t expected = 1;
    bool contiguous = true;
    for (const Event& e : t.events) contiguous &= e.seq == expected++;
    EXPECT_TRUE(contiguous);
  }
}

}  // namespace
}  // namespace psc
