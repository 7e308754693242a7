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

#include <array>
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
using test_support::cli;
using test_support::preload;
using test_support::run;
using test_support::Scratch;
using test_support::slurp;

std::string program() { return build_dir() + "/programs/host_pattern"; }

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

// The signals a test raises start at their defaults, whatever ran the tests:
// a shell without job control starts background jobs with SIGINT and SIGQUIT
// ignored, nohup ignores SIGHUP, children inherit that, and the recorder
// rightly keeps an ignored signal ignored (AnIgnoredSignalStaysIgnored).
// Restored at the end.
class DefaultDispositions {
 public:
  DefaultDispositions() {
    for (size_t k = 0; k < kSignals.size(); ++k) old_[k] = signal(kSignals[k], SIG_DFL);
  }
  ~DefaultDispositions() {
    for (size_t k = 0; k < kSignals.size(); ++k) signal(kSignals[k], old_[k]);
  }
  DefaultDispositions(const DefaultDispositions&) = delete;
  DefaultDispositions& operator=(const DefaultDispositions&) = delete;

 private:
  static constexpr std::array<int, 9> kSignals = {SIGINT,  SIGHUP,  SIGQUIT, SIGPIPE, SIGUSR1,
                                                  SIGUSR2, SIGALRM, SIGXCPU, SIGTERM};
  std::array<sighandler_t, 9> old_{};
};

// Signals raised right after allocating, well inside one 50 ms flush period.
TEST(RecorderSignals, EveryTerminatingSignalFlushes) {
  const DefaultDispositions defaults;
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
  const DefaultDispositions defaults;
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

// ---- the program's own descriptors and children ----------------------------------
//
// The recorder must never damage the program it records: its trace's
// descriptor is out of the program's way and checked before every write, and
// children of every kind (fork, raw clone, vfork) neither hang nor write into
// their parent's file. Each test fails on a recorder whose trace sat on the
// lowest free descriptor (3) and was written blindly, or that knew no child
// but fork's: there the program's log took trace chunks, a close loop lost the
// rest of the run without a count, a clone child hung in exit(), and a vfork
// child's exit() closed its parent's trace.

std::string fd_program() { return build_dir() + "/programs/fd_child_pattern"; }

// `peakscope record --host -o TRACE -- fd_child_pattern ARGS` under `timeout
// 20` (124: it hung), the writer writing every millisecond so that many chunks
// land while the program works; stderr kept in ERR.
int record_program(const Scratch& s, const std::string& args, const std::string& shell = "") {
  return run(shell + " PEAKSCOPE_FLUSH_MS=1 timeout 20 " + cli() + " record --host -o " + s.path("t.pstrace") + " -- " +
             fd_program() + " " + args + " 2>" + s.path("err"));
}

std::string numbered_lines(int n) {
  std::string text;
  for (int i = 1; i <= n; ++i) text += "line " + std::to_string(i) + "\n";
  return text;
}

// Every event there, the file closed by the recorder, nothing dropped.
void expect_whole(const std::string& path, uint64_t events) {
  SCOPED_TRACE(path);
  LoadedTrace t = load_trace(path);
  EXPECT_TRUE(t.status.complete()) << t.status.reason;
  EXPECT_TRUE(t.meta.clean_end);
  EXPECT_EQ(t.events.size(), events);
  EXPECT_EQ(t.meta.dropped_total(), 0u);
}

// The program writes 100 lines into a file of its own on the number the
// trace used to have, 20 pairs (40 events) and a millisecond apart: by
// closing fds 3..63 and opening (own-log), as a shell's `exec 3>log`
// (exec3), by putting its log on the trace's descriptor with dup2 (dup2),
// and as a daemon that closes every descriptor, then opens its log (daemon).
TEST(RecorderOwnFiles, TheProgramsOwnFileIsNeverWrittenInto) {
  for (const char* mode : {"own-log", "exec3", "dup2", "daemon"}) {
    SCOPED_TRACE(mode);
    Scratch s;
    ASSERT_EQ(record_program(s, std::string(mode) + " " + s.path("log") + " 100"), 0) << slurp(s.path("err"));
    const std::string log = slurp(s.path("log")), expected = numbered_lines(100);
    size_t same = 0;
    while (same < log.size() && same < expected.size() && log[same] == expected[same]) ++same;
    EXPECT_TRUE(log == expected) << "the program's log (" << log.size() << " bytes, " << expected.size()
                                 << " expected) differs from byte " << same;
    expect_whole(s.path("t.pstrace"), 4000);
    EXPECT_EQ(traces_in(s), (std::vector<std::string>{"t.pstrace"}));
  }
}

TEST(RecorderOwnFiles, DevNullPutOnTheTracesDescriptorLosesNothing) {
  Scratch s;
  ASSERT_EQ(record_program(s, "dup2 /dev/null 100"), 0) << slurp(s.path("err"));
  expect_whole(s.path("t.pstrace"), 4000);
}

// 200 pairs, every descriptor closed, 200 more: every event is in the file.
// The close loop runs over 3..1023 under `ulimit -n 1024`, where the trace's
// descriptor is 960 (64 below the limit).
TEST(RecorderOwnFiles, ClosingEveryDescriptorLosesNothing) {
  for (const char* mode : {"close-range", "close-loop"}) {
    SCOPED_TRACE(mode);
    Scratch s;
    ASSERT_EQ(record_program(s, std::string(mode) + " 200", "ulimit -n 1024;"), 0) << slurp(s.path("err"));
    expect_whole(s.path("t.pstrace"), 800);
    EXPECT_EQ(slurp(s.path("err")).find("cannot write"), std::string::npos) << slurp(s.path("err"));
  }
}

TEST(RecorderOwnFiles, TheTracesDescriptorIsHighAndCloseOnExec) {
  Scratch s;
  ASSERT_EQ(run("ulimit -n 1024; PEAKSCOPE_HOST=1 PEAKSCOPE_OUTPUT=" + s.path("t.pstrace") +
                " LD_PRELOAD=" + preload() + " " + fd_program() + " trace-fd >" + s.path("out")),
            0);
  int fd = -1, cloexec = -1;
  ASSERT_EQ(std::sscanf(slurp(s.path("out")).c_str(), "%d %d", &fd, &cloexec), 2) << slurp(s.path("out"));
  EXPECT_GE(fd, 960) << "64 below the limit, or the next free above";
  EXPECT_LT(fd, 1024);
  EXPECT_EQ(cloexec, 1);
}

// The program removes the trace and puts a file of its own at its name, then
// closes every descriptor: its file is left alone, recording goes on in
// t.e1.pstrace, and the events written before, now in no file anyone can
// open, are counted there as write_failed drops and said on stderr.
TEST(RecorderOwnFiles, ATraceReplacedByTheProgramGoesOnInAFreshFile) {
  Scratch s;
  ASSERT_EQ(run("PEAKSCOPE_FLUSH_MS=1 PEAKSCOPE_HOST=1 PEAKSCOPE_OUTPUT=" + s.path("t.pstrace") +
                " PEAKSCOPE_PRIMARY_PID=$$ LD_PRELOAD=" + preload() + " exec " + fd_program() + " replace 1000 2>" +
                s.path("err")),
            0);
  EXPECT_EQ(slurp(s.path("t.pstrace")), "mine\n");
  LoadedTrace t = load_trace(s.path("t.e1.pstrace"));
  EXPECT_TRUE(t.status.complete()) << t.status.reason;
  EXPECT_TRUE(t.meta.clean_end);
  EXPECT_TRUE(t.meta.header.flags & format::kHeaderWriteFailed);
  const uint64_t lost = t.meta.drops[static_cast<size_t>(format::DropReason::kWriteFailed)];
  EXPECT_GT(lost, 0u) << "the first 2000 events were written to the removed file";
  EXPECT_EQ(t.events.size() + lost, 4000u) << "every event is in the file or counted";
  EXPECT_EQ(t.meta.dropped_total(), lost);
  EXPECT_NE(t.meta.command.find("replace 1000"), std::string::npos);
  EXPECT_NE(slurp(s.path("err"))
                .find("trace file " + s.path("t.pstrace") +
                      " was closed or replaced by the program and cannot be opened again by its "
                      "name; recording goes on in " +
                      s.path("t.e1.pstrace") + " (the " + std::to_string(lost) + " events"),
            std::string::npos)
      << slurp(s.path("err"));
}

// A child from clone(SIGCHLD), which runs no fork handler: 1000 pairs in the
// parent, 1000 in the child, 1000 more in the parent. The child leaves through
// exit() (it used to wait for ever for its parent's writer thread), _exit()
// (its events used to vanish) or, made by glibc's clone() on a stack of its
// own, by returning (which ends its thread alone); or a thread it starts
// records 1000 pairs before the child itself does (and so takes the recorder
// over while the child's first thread still holds its parent's buffer).
// Neither hangs; the child writes its own file, with every event.
TEST(RecorderChildren, ARawCloneChildNeitherHangsNorLosesItsEvents) {
  for (const char* how : {"exit", "_exit", "return", "thread"}) {
    SCOPED_TRACE(how);
    Scratch s;
    ASSERT_EQ(record_program(s, std::string("clone ") + how + " 1000"), 0) << slurp(s.path("err"));
    expect_whole(s.path("t.pstrace"), 4000);
    const std::vector<std::string> names = traces_in(s);
    ASSERT_EQ(names.size(), 2u) << slurp(s.path("err"));
    const std::string child = s.path(names[0] == "t.pstrace" ? names[1] : names[0]);
    expect_whole(child, std::string(how) == "thread" ? 4000 : 2000);
    EXPECT_EQ(load_trace(child).meta.header.parent_pid, load_trace(s.path("t.pstrace")).meta.header.pid);
  }
}

// 5 pairs, vfork, the child's exec fails and it calls exit() (which runs its
// parent's atexit handlers and destructors, in its parent's memory), then 15
// pairs: the parent's trace holds all 40 events and is closed when the parent
// leaves, by returning from main or by exit(). It used to be closed by the
// child, with 10.
TEST(RecorderChildren, AVforkChildsExitLeavesItsParentsTraceWhole) {
  for (const char* how : {"return", "exit"}) {
    SCOPED_TRACE(how);
    Scratch s;
    ASSERT_EQ(record_program(s, std::string("vfork 5 ") + how), 0) << slurp(s.path("err"));
    expect_whole(s.path("t.pstrace"), 40);
    EXPECT_EQ(traces_in(s), (std::vector<std::string>{"t.pstrace"}));
  }
}

// main leaves through pthread_exit; a thread makes 500 pairs and returns. glibc
// ends the process with exit(0) from its last thread, which used to count the
// writer thread among the living: the process never ended, and ignored
// SIGTERM (the writer blocks every signal). SIGKILL after 20 s, to the
// program itself.
TEST(RecorderChildren, AProgramWhoseMainThreadLeavesFirstStillEnds) {
  Scratch s;
  ASSERT_EQ(run("timeout -s KILL 20 sh -c 'PEAKSCOPE_FLUSH_MS=1 PEAKSCOPE_HOST=1 PEAKSCOPE_OUTPUT=" +
                s.path("t.pstrace") + " PEAKSCOPE_PRIMARY_PID=$$ LD_PRELOAD=" + preload() + " exec " + fd_program() +
                " main-exits 500' >" + s.path("out") + " 2>" + s.path("err")),
            0)
      << slurp(s.path("err"));
  EXPECT_EQ(slurp(s.path("out")), "done\n") << "exit(0) flushed stdout";
  expect_whole(s.path("t.pstrace"), 1000);
}

}  // namespace
}  // namespace psc
