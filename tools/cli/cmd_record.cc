// peakscope record [-o PATH] [--level allocated|reserved] [--host] -- CMD ARGS...
//
// Runs CMD with the recorder preloaded, passes its exit status through, and
// says where the trace(s) went: every regular file this run's recorders
// created (forked children, ranks, images after exec), with a warning for a
// file whose writes failed. Exit 2, without running CMD, when the trace
// cannot be created at all.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "format/crc32c.h"
#include "format/file_format.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"
#include "traces/reader.h"

namespace psc::cli {
namespace {

struct RecordOptions {
  std::string output = "peakscope.pstrace";
  std::string level = "allocated";
  bool host = false;
  std::string host_min_bytes;
  std::string fork_policy;
  std::vector<std::string> command;
};

constexpr const char* kUsage =
    "usage: peakscope record [-o PATH] [--level allocated|reserved] [--host] "
    "[--host-min-bytes N] [--fork follow|stop] -- CMD ARGS...";

// False for -h: the usage is printed.
[[nodiscard]] bool parse(int argc, char** argv, RecordOptions& o) {
  ArgParser args(kUsage);
  args.option({"-o", "--output"}, &o.output);
  args.option({"--level"}, [&](const std::string&, const std::string& value) {
    if (value != "allocated" && value != "reserved")
      throw UsageError("--level must be 'allocated' or 'reserved', not '" + value + "'");
    o.level = value;
  });
  args.flag({"--host"}, &o.host);
  args.option({"--host-min-bytes"}, [&](const std::string& name, const std::string& value) {
    parse_count(name, value);  // the recorder reads the text itself
    o.host_min_bytes = value;
  });
  args.option({"--fork"}, [&](const std::string&, const std::string& value) {
    if (value != "follow" && value != "stop") throw UsageError("--fork must be 'follow' or 'stop'");
    o.fork_policy = value;
  });
  args.command(&o.command);  // the "--" is optional
  if (!args.parse(argc, argv)) return false;
  if (o.command.empty()) args.fail("no command to record");
  return true;
}

std::string self_directory() {
  char buffer[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return ".";
  buffer[n] = 0;
  std::string path(buffer);
  return path.substr(0, path.find_last_of('/'));
}

// The library sits next to the executable (build/) or in ../lib (installed);
// PEAKSCOPE_PRELOAD overrides.
std::string find_preload_library() {
  if (const char* explicit_path = getenv("PEAKSCOPE_PRELOAD")) return explicit_path;
  const std::string dir = self_directory();
  for (const std::string& candidate : {dir + "/libpeakscope_preload.so", dir + "/../lib/libpeakscope_preload.so"}) {
    char resolved[PATH_MAX];
    if (access(candidate.c_str(), R_OK) == 0 && realpath(candidate.c_str(), resolved)) return resolved;
  }
  throw UsageError("cannot find libpeakscope_preload.so next to " + dir + " (set PEAKSCOPE_PRELOAD)");
}

std::string absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return path;
  return std::string(cwd) + "/" + path;
}

bool same_file(const char* a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return stat(a, &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// NVTX loads the injection named by NVTX_INJECTION64_PATH: the preload library.
// A tool that already holds the variable (Nsight Systems) is chained: the
// library loads it and passes every NVTX call on (docs/nvtx.md).
void take_nvtx_injection(const std::string& library) {
  const char* other = getenv("NVTX_INJECTION64_PATH");
  if (other && *other && !same_file(other, library)) {
    fmt::print(stderr, "peakscope: NVTX_INJECTION64_PATH was {}; peakscope records NVTX and chains to it\n", other);
    setenv("PEAKSCOPE_NVTX_CHAIN", other, 1);
  }
  setenv("NVTX_INJECTION64_PATH", library.c_str(), 1);
}

[[noreturn]] void exec_child(const RecordOptions& o, const std::string& library, const std::string& output) {
  std::string preload = library;
  if (const char* existing = getenv("LD_PRELOAD"); existing && *existing) preload += std::string(":") + existing;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  take_nvtx_injection(library);
  setenv("PEAKSCOPE_OUTPUT", output.c_str(), 1);
  setenv("PEAKSCOPE_PRIMARY_PID", std::to_string(getpid()).c_str(), 1);
  setenv("PEAKSCOPE_LEVEL", o.level.c_str(), 1);
  if (o.host) setenv("PEAKSCOPE_HOST", "1", 1);
  if (!o.host_min_bytes.empty()) setenv("PEAKSCOPE_HOST_MIN_BYTES", o.host_min_bytes.c_str(), 1);
  if (!o.fork_policy.empty()) setenv("PEAKSCOPE_FORK", o.fork_policy.c_str(), 1);
  std::vector<char*> command_argv;
  for (const std::string& word : o.command) command_argv.push_back(const_cast<char*>(word.c_str()));
  command_argv.push_back(nullptr);
  execvp(command_argv[0], command_argv.data());
  fmt::print(stderr, "peakscope record: cannot run '{}': {}\n", o.command[0], std::strerror(errno));
  _exit(127);
}

pid_t g_child = 0;
void forward_signal(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

// A trace this run wrote: a regular file (a symlink planted at a trace's name
// is never followed by the recorder, nor listed here), ours, with a valid
// header stamped after the run started.
struct WrittenTrace {
  std::string path;
  format::FileHeader header{};
  off_t bytes = 0;
};

bool read_written_trace(const std::string& path, time_t since, WrittenTrace* out) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) return false;
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  format::FileHeader h{};
  const bool whole = read(fd, &h, sizeof h) == static_cast<ssize_t>(sizeof h);
  close(fd);
  if (!whole || std::memcmp(h.magic, format::kMagic, sizeof h.magic) != 0 ||
      crc32c(&h, offsetof(format::FileHeader, header_crc)) != h.header_crc ||
      h.realtime_ns / 1000000000ull + 1 < static_cast<uint64_t>(since))
    return false;
  *out = WrittenTrace{path, h, st.st_size};
  return true;
}

// Traces beside the main one: forked children and ranks (<stem>.[r<R>.]<host>.p<PID>.pstrace)
// and images after exec (<stem>....e<N>.pstrace).
std::vector<WrittenTrace> sibling_traces(const std::string& output, time_t since) {
  std::string dir = ".", stem = output;
  if (auto slash = output.find_last_of('/'); slash != std::string::npos) {
    dir = output.substr(0, slash);
    stem = output.substr(slash + 1);
  }
  if (stem.size() > 8 && stem.compare(stem.size() - 8, 8, ".pstrace") == 0) stem.resize(stem.size() - 8);
  std::vector<WrittenTrace> found;
  DIR* d = opendir(dir.c_str());
  if (!d) return found;
  while (dirent* entry = readdir(d)) {
    std::string name = entry->d_name;
    if (name.rfind(stem + ".", 0) != 0 || name.size() < 8 || name.compare(name.size() - 8, 8, ".pstrace") != 0)
      continue;
    if (name == stem + ".pstrace") continue;
    WrittenTrace trace;
    if (read_written_trace(dir + "/" + name, since, &trace)) found.push_back(trace);
  }
  closedir(d);
  std::sort(found.begin(), found.end(), [](const WrittenTrace& a, const WrittenTrace& b) { return a.path < b.path; });
  return found;
}

// Whether a trace can be created at `path`: 0, or the errno. Creates and
// removes a file the way the recorder does (O_EXCL, no symlink followed).
int probe_output(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  close(fd);
  unlink(path.c_str());
  return 0;
}

int cannot_write(const std::string& shown, int err) {
  fmt::print(stderr, "peakscope record: cannot write the trace to {}: {} (errno {})\n", shown, std::strerror(err), err);
  return kExitBadInput;
}

std::string describe(const WrittenTrace& t) {
  std::string text = fmt::format("{} ({} bytes, pid {}", t.path, t.bytes, t.header.pid);
  if (t.header.flags & format::kHeaderEndedByExec) text += ", ended by exec";
  return text + ")";
}

// A file whose writes failed holds fewer events than were recorded; its drop
// counts (when the closing chunk reached the disk) say how many.
void warn_if_writes_failed(const WrittenTrace& t) {
  if (!(t.header.flags & format::kHeaderWriteFailed)) return;
  uint64_t lost = 0;
  try {
    struct Ignore : TraceVisitor {
      void on_events(const Event*, size_t, const TraceMeta&) override {}
      void on_end(const TraceMeta& meta, const ReadStatus&) override {
        write_failed = meta.drops[static_cast<size_t>(format::DropReason::kWriteFailed)];
      }
      uint64_t write_failed = 0;
    } visitor;
    read_trace(t.path, visitor);
    lost = visitor.write_failed;
  } catch (const TraceError&) {
  }
  if (lost)
    fmt::print(stderr, "peakscope: warning: {} events could not be written to {} (write errors: disk full?)\n", lost,
               t.path);
  else
    fmt::print(stderr, "peakscope: warning: writes to {} failed (disk full?); the trace is incomplete\n", t.path);
}

}  // namespace

int cmd_record(int argc, char** argv) {
  RecordOptions o;
  if (!parse(argc, argv, o)) return kExitOk;
  const std::string library = find_preload_library();
  const std::string output = absolute(o.output);
  const time_t started = time(nullptr);
  unlink(output.c_str());  // a stale trace must not pass for this run's
  if (const int err = probe_output(output)) return cannot_write(o.output, err);

  pid_t child = fork();
  if (child < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (child == 0) exec_child(o, library, output);
  g_child = child;
  signal(SIGINT, forward_signal);
  signal(SIGTERM, forward_signal);

  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

  WrittenTrace primary;
  const bool have_primary = read_written_trace(output, started, &primary);
  const std::vector<WrittenTrace> others = sibling_traces(output, started);
  if (have_primary) {
    fmt::print(stderr, "peakscope: trace written to {} ({} bytes{})\n", o.output, primary.bytes,
               primary.header.flags & format::kHeaderEndedByExec ? ", ended by exec" : "");
  } else if (const int err = probe_output(output); err != 0 && others.empty()) {
    return cannot_write(o.output, err);
  } else if (others.empty()) {
    fmt::print(stderr,
               "peakscope: no trace at {}: the command did not start the recorder "
               "(is it a static binary, or did it clear LD_PRELOAD?)\n",
               o.output);
  } else {
    fmt::print(stderr, "peakscope: no trace at {}\n", o.output);
  }
  for (const WrittenTrace& other : others) fmt::print(stderr, "peakscope: trace also written: {}\n", describe(other));
  if (have_primary) warn_if_writes_failed(primary);
  for (const WrittenTrace& other : others) warn_if_writes_failed(other);
  if (WIFSIGNALED(status))
    fmt::print(stderr, "peakscope: '{}' was killed by signal {} ({})\n", o.command[0], WTERMSIG(status),
               strsignal(WTERMSIG(status)));
  return code;
}

}  // namespace psc::cli
