// The recorder through its real loading path, at the edges of a process's
// life: exec, signals, a full disk, hostile and unwritable output paths.
// Nothing recorded may be lost without being counted, and no file may be
// overwritten. Each test fails on a recorder that flushed nothing before
// exec, ignored write errors, flushed only at a few signals, or opened its
// files with O_TRUNC.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/test_support.h"
#include "traces/reader.h"

namespace psc {
namespace {

namespace fs = std::filesystem;
using test_support::build_dir;
using test_support::Scratch;

std::string cli() { return build_dir() + "/peakscope"; }
std::string program() { return build_dir() + "/programs/host_pattern"; }
std::string preload() { return build_dir() + "/libpeakscope_preload.so"; }

int run(const std::string& command) { return test_support::run_shell(command); }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `peakscope record --host -o TRACE -- host_pattern ARGS`, stderr kept in ERR.
int record(const Scratch& s, const std::string& args, const std::string& env = "") {
  return run(env + " " + cli() + " record --host -o " + s.path("t.pstrace") + " -- " + program() + " " + args + " 2>" +
             s.path("err"));
}

uint64_t count_kind(const LoadedTrace& t, EventKind kind) {
  uint64_t n = 0;
  for (const Event& e : t.events) n += e.kind == kind;
  return n;
}

std::vector<std::string> traces_in(const Scratch& s) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(s.dir()))
    if (entry.path().extension() == ".pstrace") names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool ended_by_exec(const LoadedTrace& t) { return t.meta.header.flags & format::kHeaderEndedByExec; }

// ---- exec ----------------------------------------------------------------------

// 200,000 events, then exec: the first image's file keeps every one of them,
// says it was closed (by exec), and the new image writes its own file.
TEST(RecorderExec, EveryVariantKeepsTheFirstImageAndGivesTheNextItsOwnFile) {
  for (const char* variant : {"execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp", "fexecve"}) {
    SCOPED_TRACE(variant);
    Scratch s;
    ASSERT_EQ(record(s, std::string("exec ") + variant + " 100000"), 0) << slurp(s.path("err"));
    EXPECT_EQ(traces_in(s), (std::vector<std::string>{"t.e1.pstrace", "t.pstrace"}));
    LoadedTrace first = load_trace(s.path("t.pstrace"));
    EXPECT_TRUE(first.status.complete());
    EXPECT_TRUE(first.meta.clean_end);
    EXPECT_TRUE(ended_by_exec(first));
    EXPECT_EQ(first.events.size(), 200000u);
    EXPECT_EQ(first.meta.dropped_total(), 0u);
    LoadedTrace second = load_trace(s.path("t.e1.pstrace"));
    EXPECT_TRUE(second.meta.clean_end);
    EXPECT_FALSE(ended_by_exec(second));
    EXPECT_EQ(second.events.size(), 6u);
    EXPECT_EQ(second.meta.header.pid, first.meta.header.pid);
    EXPECT_NE(second.meta.command.find("peak 3 100000"), std::string::npos);
    const std::string err = slurp(s.path("err"));
    EXPECT_NE(err.find("trace written to " + s.path("t.pstrace")), std::string::npos) << err;
    EXPECT_NE(err.find("trace also written: " + s.path("t.e1.pstrace")), std::string::npos) << err;
  }
}

TEST(RecorderExec, AFailedExecKeepsRecordingInTheSameFile) {
  Scratch s;
  ASSERT_EQ(record(s, "exec-fails 5000"), 0);
  EXPECT_EQ(traces_in(s), (std::vector<std::string>{"t.pstrace"}));
  LoadedTrace t = load_trace(s.path("t.pstrace"));
  EXPECT_TRUE(t.status.complete()) << t.status.reason;
  EXPECT_TRUE(t.meta.clean_end);
  EXPECT_FALSE(ended_by_exec(t));
  EXPECT_EQ(t.events.size(), 20000u);
  uint64_t expected = 1;
  bool contiguous = true;
  for (const Event& e : t.events) contiguous &= e.seq == expected++;
  EXPECT_TRUE(contiguous);
}

// A forked child that allocates and execs /bin/true used to leave nothing.
TEST(RecorderExec, AForkedChildThatExecsLeavesItsTrace) {
  Scratch s;
  ASSERT_EQ(record(s, "fork-exec 12 100000"), 0);
  const std::vector<std::string> names = traces_in(s);
  ASSERT_EQ(names.size(), 2u) << slurp(s.path("err"));
  LoadedTrace child = load_trace(s.path(names[0] == "t.pstrace" ? names[1] : names[0]));
  EXPECT_TRUE(child.meta.clean_end);
  EXPECT_TRUE(ended_by_exec(child));
  EXPECT_EQ(count_kind(child, EventKind::kAlloc), 12u);
  EXPECT_NE(slurp(s.path("err")).find("ended by exec"), std::string::npos);
}

// ---- signals -------------------------------------------------------------------

// Signals raised right after allocating, well inside one 50 ms flush period.
TEST(RecorderSignals, EveryTerminatingSignalFlushes) {
  for (int sig : {SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2, SIGALRM, SIGXCPU, SIGTERM, SIGSEGV}) {
    SCOPED_TRACE(strsignal(sig));
    Scratch s;
    EXPECT_EQ(record(s, "raise " + std::to_string(sig) + " 25 100000", "ulimit -c 0;"), 128 + sig);
    LoadedTrace t = load_trace(s.path("t.pstrace"));
    EXPECT_EQ(count_kind(t, EventKind::kAlloc), 25u);
    EXPECT_FALSE(t.meta.clean_end);
  }
}

TEST(RecorderSignals, AnIgnoredSignalStaysIgnored) {
  Scratch s;
  // SIG_IGN is inherited across exec (nohup, `trap '' INT`): the recorder keeps it.
  EXPECT_EQ(run("trap '' INT; " + cli() + " record --host -o " + s.path("t.pstrace") + " -- " + program() + " raise " +
                std::to_string(SIGINT) + " 3 100000 >" + s.path("out") + " 2>/dev/null"),
            0);
  EXPECT_EQ(slurp(s.path("out")), "survived\n");
  EXPECT_EQ(count_kind(load_trace(s.path("t.pstrace")), EventKind::kAlloc), 3u);
}

// Handlers the application installs after the recorder run instead of it and
// read back as set; SIG_DFL restored later flushes again.
TEST(RecorderSignals, HandlersSetLaterAreChainedNotReplaced) {
  Scratch s;
  EXPECT_EQ(record(s, "handlers"), 128 + SIGUSR1) << "20..26 name the check that failed in host_pattern";
  LoadedTrace t = load_trace(s.path("t.pstrace"));
  EXPECT_EQ(count_kind(t, EventKind::kAlloc), 7u);
}

// ---- a full disk ---------------------------------------------------------------

// RLIMIT_FSIZE as the disk limit. The recorder never writes past it (the
// kernel's SIGXFSZ would end the application), counts every event it could
// not write, says so once, and `record` warns with the count.
TEST(RecorderDiskFull, WriteErrorsAreCountedAndReported) {
  Scratch s;
  EXPECT_EQ(record(s, "fsize 65536 100000"), 0) << "the exit status passes through";
  LoadedTrace t = load_trace(s.path("t.pstrace"));
  EXPECT_LE(fs::file_size(s.path("t.pstrace")), 65536u);
  EXPECT_TRUE(t.status.complete()) << t.status.reason;
  EXPECT_TRUE(t.meta.header.flags & format::kHeaderWriteFailed);
  const uint64_t lost = t.meta.drops[static_cast<size_t>(format::DropReason::kWriteFailed)];
  EXPECT_GT(lost, 0u);
  EXPECT_EQ(t.events.size() + lost, 200000u) << "every event is in the file or counted";
  const std::string err = slurp(s.path("err"));
  EXPECT_NE(err.find("cannot write trace file " + s.path("t.pstrace") + ": File too large (errno 27)"),
            std::string::npos)
      << err;
  size_t lines = 0;
  for (size_t at = err.find("cannot write trace file"); at != std::string::npos;
       at = err.find("cannot write trace file", at + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << "one line per episode";
  EXPECT_NE(err.find("warning: " + std::to_string(lost) + " events could not be written"), std::string::npos) << err;
}

// ---- hostile and unwritable paths ------------------------------------------------

struct Child {
  pid_t pid = -1;
  int go = -1;  // write a byte to let it exec
};

// Forks a child that waits, then execs host_pattern ARGS under the preload
// with PEAKSCOPE_OUTPUT=output: the test learns the pid (and so the child's
// trace name) before the recorder starts.
Child start_waiting(const std::string& output, const char* args[], bool primary) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[1]);
    char byte;
    if (read(pipe_fds[0], &byte, 1) != 1) _exit(120);
    setenv("PEAKSCOPE_HOST", "1", 1);
    setenv("PEAKSCOPE_OUTPUT", output.c_str(), 1);
    if (primary) setenv("PEAKSCOPE_PRIMARY_PID", std::to_string(getpid()).c_str(), 1);
    setenv("LD_PRELOAD", preload().c_str(), 1);
    std::vector<char*> argv{const_cast<char*>(program().c_str())};
    for (const char** a = args; *a; ++a) argv.push_back(const_cast<char*>(*a));
    argv.push_back(nullptr);
    const std::string exe = program();
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  close(pipe_fds[0]);
  return {pid, pipe_fds[1]};
}

int finish(const Child& c) {
  if (write(c.go, "x", 1) != 1) return -1;
  close(c.go);
  int status = 0;
  waitpid(c.pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The host part of a child's trace name: the host name up to its first dot,
// other characters than letters, digits, '-' and '_' as '_'.
std::string host_part() {
  char host[65] = {};
  gethostname(host, sizeof host - 1);
  std::string part;
  for (const char* h = host; *h && *h != '.' && part.size() < 32; ++h)
    part += (std::isalnum(static_cast<unsigned char>(*h)) || *h == '-' || *h == '_') ? *h : '_';
  return part.empty() ? "host" : part;
}

TEST(RecorderPaths, APlantedSymlinkIsNeitherFollowedNorTruncated) {
  for (bool primary : {false, true}) {
    SCOPED_TRACE(primary ? "at PEAKSCOPE_OUTPUT" : "at the child's <stem>.<host>.p<PID>.pstrace");
    Scratch s;
    const std::string victim = s.path("victim");
    std::ofstream(victim) << "precious";
    const char* args[] = {"peak", "4", "100000", nullptr};
    Child c = start_waiting(s.path("t.pstrace"), args, primary);
    ASSERT_GT(c.pid, 0);
    const std::string child = "t." + host_part() + ".p" + std::to_string(c.pid);
    const std::string planted = primary ? s.path("t.pstrace") : s.path(child + ".pstrace");
    ASSERT_EQ(symlink(victim.c_str(), planted.c_str()), 0);
    ASSERT_EQ(finish(c), 0);
    EXPECT_EQ(slurp(victim), "precious");
    EXPECT_TRUE(fs::is_symlink(planted));
    const std::string written = primary ? s.path("t.e1.pstrace") : s.path(child + ".e1.pstrace");
    LoadedTrace t = load_trace(written);
    EXPECT_EQ(t.events.size(), 8u);
    struct stat st {};
    ASSERT_EQ(lstat(written.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
}

TEST(RecorderPaths, RecordListsOnlyRegularFilesThisRunWrote) {
  Scratch s;
  const std::string victim = s.path("victim");
  std::ofstream(victim) << "precious";
  ASSERT_EQ(symlink(victim.c_str(), s.path("t.p999999999.pstrace").c_str()), 0);
  std::ofstream(s.path("t.p999999998.pstrace")) << "stale, not a trace";
  ASSERT_EQ(record(s, "fork 2 100000"), 0);
  const std::string err = slurp(s.path("err"));
  EXPECT_EQ(err.find("999999999"), std::string::npos) << err;
  EXPECT_EQ(err.find("999999998"), std::string::npos) << err;
  size_t listed = 0;
  for (size_t at = err.find("trace also written"); at != std::string::npos; at = err.find("trace also written", at + 1))
    ++listed;
  EXPECT_EQ(listed, 4u) << err;  // the four forked children
  struct stat st {};
  ASSERT_EQ(stat(s.path("t.pstrace").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(RecorderPaths, AnUnwritableOutputIsExitTwoWithTheReason) {
  Scratch s;
  const std::string output = s.path("missing/t.pstrace");
  EXPECT_EQ(run(cli() + " record --host -o " + output + " -- " + program() + " exit 0 2>" + s.path("err")), 2);
  const std::string err = slurp(s.path("err"));
  EXPECT_EQ(err, "peakscope record: cannot write the trace to " + output + ": No such file or directory (errno 2)\n");
  // The recorder itself, preloaded by hand: one line with the errno.
  EXPECT_EQ(run("PEAKSCOPE_OUTPUT=" + output + " PEAKSCOPE_PRIMARY_PID=$$ LD_PRELOAD=" + preload() + " exec " +
                program() + " exit 0 2>" + s.path("err2")),
            0);
  EXPECT_EQ(slurp(s.path("err2")), "peakscope: cannot create trace file " + output +
                                       ": No such file or directory (errno 2); recording stopped\n");
}

}  // namespace
}  // namespace psc
