// `peakscope record` (its command line: cli/command_table.cc).
//
// Runs CMD with the recorder preloaded, passes its exit status through, and
// says where the trace(s) went: every regular file this run's recorders
// created (forked children, ranks, images after exec), with a warning for a
// file whose writes failed. Exit 2, without running CMD, when the trace
// cannot be created at all.
//
// record never destroys what it did not write: an earlier run's traces at
// PATH and beside it (its children's and exec images' names) are replaced
// only with --force; anything else at PATH (a file that is not a trace, a
// directory, a FIFO, a device, a symlink) is refused, --force or not, and
// left as it was (clear_earlier_traces).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/recorder_library.h"
#include "format/crc32c.h"
#include "format/file_format.h"
#include "traces/reader.h"

namespace psc::cli {
namespace {

// Paths in messages: one line whatever bytes they hold (traces/reader.h).
std::string shown(const std::string& path) { return printable_path(path); }

// The longest path a file can be opened by (PATH_MAX less its NUL). The
// recorder refuses a longer PEAKSCOPE_OUTPUT rather than cut it (a cut name
// is another file); record says so before the command runs.
constexpr size_t kLongestPath = PATH_MAX - 1;
// The fewest bytes a trace takes: its headers, and the room the recorder
// keeps below a file size limit for the closing chunk (runtime/sink_file.cc).
constexpr uint64_t kSmallestTrace = sizeof(format::FileHeader) + sizeof(format::RunHeader) + 256;

struct RecordOptions {
  std::string output = "peakscope.pstrace";
  std::string level = "allocated";
  bool host = false;
  bool force = false;  // replace an earlier run's traces
  std::string host_min_bytes;
  std::string fork_policy;
  std::vector<std::string> command;
};

// False for -h: the usage is printed.
[[nodiscard]] bool parse(int argc, char** argv, RecordOptions& o) {
  ArgParser args(command_spec("record"));
  args.option({"-o", "--output"}, &o.output);
  args.flag({"--force"}, &o.force);
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
  if (o.output.empty()) throw UsageError("-o: an empty path; give the trace's file name");
  return true;
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
    fmt::print(stderr, "peakscope: NVTX_INJECTION64_PATH was {}; peakscope records NVTX and chains to it\n",
               shown(other));
    setenv("PEAKSCOPE_NVTX_CHAIN", other, 1);
  }
  setenv("NVTX_INJECTION64_PATH", library.c_str(), 1);
}

// `failed`: a close-on-exec pipe's write end; a failed exec writes its errno
// there, so the parent tells a command that never ran from one that ran
// without the recorder. Exits as a shell does: 127 not found, 126 not runnable.
[[noreturn]] void exec_child(const RecordOptions& o, const std::string& library, const std::string& output,
                             int failed) {
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
  const int err = errno;
  fmt::print(stderr, "peakscope record: cannot run '{}': {}\n", shown(o.command[0]), std::strerror(err));
  if (write(failed, &err, sizeof err) < 0) {
    // The parent then reads no errno and says what it can.
  }
  _exit(err == ENOENT ? 127 : 126);
}

// Whether the child's exec failed (its errno came down the pipe); closes the
// read end. The pipe reads end of file once the exec succeeds.
bool exec_failed(int pipe_read) {
  int err = 0;
  ssize_t n;
  while ((n = read(pipe_read, &err, sizeof err)) < 0 && errno == EINTR) {
  }
  close(pipe_read);
  return n == static_cast<ssize_t>(sizeof err);
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

// An empty regular file of ours, changed since the run started, at a name
// this run's recorders write: a recorder created it and could write not even
// its header (a file size limit the program set before an exec, a full
// disk). The recorder writes a header whole or not at all, and cuts a failed
// write back. An earlier run's empty files at these names were refused or
// removed before the run (clear_earlier_traces).
bool is_headerless_file(const std::string& path, time_t since) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_size == 0 &&
         st.st_mtime + 1 >= since;
}

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

// The folder of the output and the stem its other traces are named after
// (the name without ".pstrace", as the recorder cuts it: runtime/trace_file_name.cc).
void split_output(const std::string& output, std::string* dir, std::string* stem) {
  *dir = ".";
  *stem = output;
  if (auto slash = output.find_last_of('/'); slash != std::string::npos) {
    *dir = slash == 0 ? "/" : output.substr(0, slash);
    *stem = output.substr(slash + 1);
  }
  if (stem->size() >= 8 && stem->compare(stem->size() - 8, 8, ".pstrace") == 0) stem->resize(stem->size() - 8);
}

// Traces beside the main one: forked children and ranks (<stem>.[r<R>.]<host>.p<PID>.pstrace)
// and images after exec (<stem>....e<N>.pstrace).
bool is_companion_name(const std::string& name, const std::string& stem, uint64_t* pid);

// headerless: the files at this run's companion names that hold no header
// (is_headerless_file).
std::vector<WrittenTrace> sibling_traces(const std::string& output, time_t since,
                                         std::vector<std::string>* headerless) {
  std::string dir, stem;
  split_output(output, &dir, &stem);
  std::vector<WrittenTrace> found;
  DIR* d = opendir(dir.c_str());
  if (!d) return found;
  while (dirent* entry = readdir(d)) {
    std::string name = entry->d_name;
    if (name.rfind(stem + ".", 0) != 0 || name.size() < 8 || name.compare(name.size() - 8, 8, ".pstrace") != 0)
      continue;
    if (name == stem + ".pstrace") continue;
    WrittenTrace trace;
    uint64_t pid = 0;
    if (read_written_trace(dir + "/" + name, since, &trace)) {
      found.push_back(trace);
    } else if (is_companion_name(name, stem, &pid) && is_headerless_file(dir + "/" + name, since)) {
      headerless->push_back(dir + "/" + name);
    }
  }
  closedir(d);
  std::sort(found.begin(), found.end(), [](const WrittenTrace& a, const WrittenTrace& b) { return a.path < b.path; });
  std::sort(headerless->begin(), headerless->end());
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

// ---- what an earlier run left ---------------------------------------------------

// What lies at a name record would write: nothing, an earlier trace (the
// magic; or an empty file, which a recorder killed before its first chunk
// leaves, and which holds nothing to lose), or something else, never replaced.
struct Existing {
  enum class Kind { kNothing, kTrace, kOther };
  Kind kind = Kind::kNothing;
  std::string what;  // kOther: what it is ("a FIFO", "a file that is not a peakscope trace")
  dev_t dev = 0;
  ino_t ino = 0;
  bool has_header = false;      // a whole FileHeader whose checksum holds ...
  format::FileHeader header{};  // ... this one
};

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// Never opens anything but a regular file (a FIFO would block, a device
// could act), and never follows a symlink.
Existing examine(const std::string& path) {
  Existing e;
  struct stat st {};
  // Any other failure (a folder that is missing or closed to us) is the
  // probe's to report, with its errno.
  if (lstat(path.c_str(), &st) != 0) return e;
  e.dev = st.st_dev;
  e.ino = st.st_ino;
  e.kind = Existing::Kind::kOther;
  if (!S_ISREG(st.st_mode)) {
    e.what = file_kind(st.st_mode);
    return e;
  }
  e.what = "a file that is not a peakscope trace";
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    e.what = std::string("a file record cannot read (") + std::strerror(errno) + ")";
    return e;
  }
  struct stat opened {};
  format::FileHeader& h = e.header;
  const bool same =
      fstat(fd, &opened) == 0 && S_ISREG(opened.st_mode) && opened.st_dev == st.st_dev && opened.st_ino == st.st_ino;
  const ssize_t got = same ? read(fd, &h, sizeof h) : -1;
  close(fd);
  const bool magic =
      got >= static_cast<ssize_t>(sizeof h.magic) && std::memcmp(h.magic, format::kMagic, sizeof h.magic) == 0;
  if (same && (opened.st_size == 0 || magic)) e.kind = Existing::Kind::kTrace;
  e.has_header = magic && got == static_cast<ssize_t>(sizeof h) &&
                 crc32c(&h, offsetof(format::FileHeader, header_crc)) == h.header_crc;
  return e;
}

// Names the recorder gives a run's other traces beside <stem>.pstrace
// (runtime/trace_file_name.cc, trace_path and create_trace_file): the primary's images
// after exec <stem>.e<N>.pstrace; children and ranks
// <stem>[.r<RANK>].<host>.p<PID>[.e<N>].pstrace. *pid: the PID in the name
// (0 for the primary's images).
bool is_companion_name(const std::string& name, const std::string& stem, uint64_t* pid) {
  static const std::regex kCompanion(R"(\.e[0-9]+|(?:\.r[0-9]+)?\.[A-Za-z0-9_-]{1,32}\.p([0-9]{1,10})(?:\.e[0-9]+)?)");
  if (name.size() <= stem.size() + 8 || name.compare(0, stem.size(), stem) != 0 ||
      name.compare(name.size() - 8, 8, ".pstrace") != 0)
    return false;
  std::smatch match;
  const std::string middle = name.substr(stem.size(), name.size() - 8 - stem.size());
  if (!std::regex_match(middle, match, kCompanion)) return false;
  *pid = match[1].matched ? std::stoull(match[1].str()) : 0;
  return true;
}

struct EarlierTrace {
  std::string path;
  Existing found;
};

// An earlier run's traces beside the output, by the names this run's
// children and exec images would take. Files of those names that are not
// traces (and symlinks, FIFOs, ...) are not ours and stay: the recorder
// never writes over them (O_EXCL), it moves on to the next .e<N>.
std::vector<EarlierTrace> earlier_companions(const std::string& output) {
  std::string dir, stem;
  split_output(output, &dir, &stem);
  std::vector<EarlierTrace> found;
  DIR* d = opendir(dir.c_str());
  if (!d) return found;
  while (dirent* entry = readdir(d)) {
    const std::string name = entry->d_name;
    uint64_t pid = 0;
    if (!is_companion_name(name, stem, &pid)) continue;
    const std::string path = (dir == "/" ? "" : dir) + "/" + name;
    Existing e = examine(path);
    // A trace named for a process it was not written by (a copy renamed) is
    // not a leftover of a run.
    if (e.kind != Existing::Kind::kTrace || (pid != 0 && e.has_header && e.header.pid != pid)) continue;
    found.push_back(EarlierTrace{path, e});
  }
  closedir(d);
  std::sort(found.begin(), found.end(), [](const EarlierTrace& a, const EarlierTrace& b) { return a.path < b.path; });
  return found;
}

// Removes what examine() found, if the name still holds that file.
int remove_earlier(const EarlierTrace& t) {
  struct stat st {};
  if (lstat(t.path.c_str(), &st) != 0) return errno == ENOENT ? 0 : errno;
  if (!S_ISREG(st.st_mode) || st.st_dev != t.found.dev || st.st_ino != t.found.ino) return EEXIST;
  return unlink(t.path.c_str()) == 0 || errno == ENOENT ? 0 : errno;
}

std::string list_names(const std::vector<EarlierTrace>& traces) {
  std::string names;
  const size_t listed = std::min<size_t>(traces.size(), 6);
  for (size_t i = 0; i < listed; ++i) {
    const std::string& p = traces[i].path;
    names += (i ? ", " : "") + shown(p.substr(p.find_last_of('/') + 1));
  }
  if (traces.size() > listed) names += fmt::format(", and {} more", traces.size() - listed);
  return names;
}

// Before the run: what is at the output, and the traces an earlier run left
// beside it under the names this run's processes would take. 0 to go on
// (with --force, the earlier traces removed), else exit 2 with one line
// saying what is there and how to proceed; nothing is removed then.
int clear_earlier_traces(const RecordOptions& o, const std::string& output) {
  const Existing at_output = examine(output);
  if (at_output.kind == Existing::Kind::kOther) {
    fmt::print(stderr,
               "peakscope record: {} exists and is {}; record replaces only an earlier peakscope trace and "
               "leaves this as it is, --force or not: choose another -o, or move it away yourself\n",
               shown(o.output), at_output.what);
    return kExitBadInput;
  }
  std::vector<EarlierTrace> earlier;
  if (at_output.kind == Existing::Kind::kTrace) earlier.push_back(EarlierTrace{output, at_output});
  const std::vector<EarlierTrace> companions = earlier_companions(output);
  earlier.insert(earlier.end(), companions.begin(), companions.end());
  if (earlier.empty()) return 0;
  if (!o.force) {
    if (companions.empty())
      fmt::print(stderr,
                 "peakscope record: {} already holds a peakscope trace (an earlier run's); --force replaces it, "
                 "or choose another -o\n",
                 shown(o.output));
    else if (at_output.kind == Existing::Kind::kTrace)
      fmt::print(stderr,
                 "peakscope record: {} already holds a peakscope trace (an earlier run's), and {} more of that run "
                 "lie beside it under this run's names ({}); --force replaces them all, or choose another -o\n",
                 shown(o.output), companions.size(), list_names(companions));
    else
      fmt::print(stderr,
                 "peakscope record: {} earlier peakscope trace{} beside {} hold this run's names ({}); --force "
                 "removes them, or choose another -o\n",
                 companions.size(), companions.size() == 1 ? "" : "s", shown(o.output), list_names(companions));
    return kExitBadInput;
  }
  for (const EarlierTrace& t : earlier) {
    if (const int err = remove_earlier(t); err != 0) {
      fmt::print(stderr, "peakscope record: cannot remove the earlier trace {}: {}\n", shown(t.path),
                 err == EEXIST ? "it changed while record looked at it" : std::strerror(err));
      return kExitBadInput;
    }
  }
  fmt::print(stderr, "peakscope record: --force: removed {} earlier trace{}: {}\n", earlier.size(),
             earlier.size() == 1 ? "" : "s", list_names(earlier));
  return 0;
}

int cannot_write(const std::string& given, int err) {
  fmt::print(stderr, "peakscope record: cannot write the trace to {}: {} (errno {})\n", shown(given),
             std::strerror(err), err);
  return kExitBadInput;
}

// A path longer than a path may be is refused before anything is looked at:
// the recorder would refuse it too (it never cuts a name), and record
// itself makes it absolute, which lengthens a relative one.
int path_too_long(const std::string& given, const std::string& output) {
  fmt::print(stderr,
             "peakscope record: cannot write the trace to {}: its path is {} bytes long{}, over the {} a path may "
             "have (PATH_MAX); choose a shorter -o\n",
             shown(given), output.size(), output.size() != given.size() ? " made absolute" : "", kLongestPath);
  return kExitBadInput;
}

// A file size limit (RLIMIT_FSIZE, `ulimit -f`) the command inherits that
// cannot hold even an empty trace: every event would be lost. 0, or exit 2.
int file_size_limit_too_small(const std::string& given) {
  rlimit limit{};
  if (getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= kSmallestTrace)
    return 0;
  fmt::print(stderr,
             "peakscope record: cannot write the trace to {}: the file size limit (RLIMIT_FSIZE, ulimit -f) is {} "
             "bytes, below the {} the smallest trace takes\n",
             shown(given), static_cast<uint64_t>(limit.rlim_cur), kSmallestTrace);
  return kExitBadInput;
}

std::string describe(const WrittenTrace& t) {
  std::string text = fmt::format("{} ({} bytes, pid {}", shown(t.path), t.bytes, t.header.pid);
  if (t.header.flags & format::kHeaderEndedByExec) text += ", ended by exec";
  return text + ")";
}

// A file whose writes failed holds fewer events than were recorded; its drop
// counts (when the closing chunk reached the disk) say how many.
void warn_if_writes_failed(const WrittenTrace& t) {
  if (!(t.header.flags & format::kHeaderWriteFailed)) return;
  uint64_t lost = 0;
  bool closed = false;
  try {
    struct Ignore : TraceVisitor {
      void on_events(const Event*, size_t, const TraceMeta&) override {}
      void on_end(const TraceMeta& meta, const ReadStatus&) override {
        write_failed = meta.drops[static_cast<size_t>(format::DropReason::kWriteFailed)];
        clean_end = meta.clean_end;
      }
      uint64_t write_failed = 0;
      bool clean_end = false;
    } visitor;
    read_trace(t.path, visitor);
    lost = visitor.write_failed;
    closed = visitor.clean_end;
  } catch (const TraceError&) {
  }
  if (lost)
    fmt::print(stderr, "peakscope: warning: {} events could not be written to {} (write errors: disk full?)\n", lost,
               shown(t.path));
  else if (!closed)
    // Not even the closing chunk, which carries the drop counts, was
    // written: a file size limit below the trace's headers, set by the
    // program, or a full disk. Only the recorder's message has the count.
    fmt::print(stderr,
               "peakscope: warning: writes to {} failed and the trace could not be closed (a file size limit, "
               "RLIMIT_FSIZE, below {} bytes, or a full disk?): the events it lacks are not counted in it; the "
               "recorder's message above says how many\n",
               shown(t.path), kSmallestTrace);
  else
    fmt::print(stderr, "peakscope: warning: writes to {} failed (disk full?); the trace is incomplete\n",
               shown(t.path));
}

// A file a recorder created and could write nothing into
// (is_headerless_file). Said, with the likely cause; the exit status is the
// command's, as for other write errors.
void warn_headerless(const std::string& given) {
  rlimit limit{};
  const bool limited = getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
  fmt::print(stderr,
             "peakscope: warning: {} holds no trace (0 bytes): the recorder could not write even its header ({}); "
             "every event recorded was lost, and the recorder's message above says how many\n",
             shown(given),
             limited ? fmt::format("the file size limit, RLIMIT_FSIZE, was {} bytes here; the command may have "
                                   "lowered it",
                                   static_cast<uint64_t>(limit.rlim_cur))
                     : std::string("a full disk, or a file size limit the command set?"));
}

}  // namespace

int cmd_record(int argc, char** argv) {
  RecordOptions o;
  if (!parse(argc, argv, o)) return kExitOk;
  const PreloadSearch search = find_preload_library();
  if (search.path.empty()) throw UsageError(preload_not_found(search));
  const std::string library = search.path;
  const std::string output = absolute(o.output);
  if (output.size() > kLongestPath) return path_too_long(o.output, output);
  if (const int code = file_size_limit_too_small(o.output)) return code;
  const time_t started = time(nullptr);
  // A stale trace must not pass for this run's: it is gone (--force), or the run does not start.
  if (const int code = clear_earlier_traces(o, output)) return code;
  if (const int err = probe_output(output)) return cannot_write(o.output, err);

  int exec_report[2];
  if (pipe2(exec_report, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
  pid_t child = fork();
  if (child < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (child == 0) {
    close(exec_report[0]);
    exec_child(o, library, output, exec_report[1]);
  }
  close(exec_report[1]);
  const bool never_ran = exec_failed(exec_report[0]);
  g_child = child;
  signal(SIGINT, forward_signal);
  signal(SIGTERM, forward_signal);

  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  // The command never ran: the child said why; there is no trace to look for.
  if (never_ran) return code;

  WrittenTrace primary;
  const bool have_primary = read_written_trace(output, started, &primary);
  std::vector<std::string> headerless_others;
  const std::vector<WrittenTrace> others = sibling_traces(output, started, &headerless_others);
  // Nothing was at the output before the run (probe_output): an empty file
  // there now is this run's.
  const bool headerless = !have_primary && is_headerless_file(output, started);
  if (have_primary) {
    fmt::print(stderr, "peakscope: trace written to {} ({} bytes{})\n", shown(o.output), primary.bytes,
               primary.header.flags & format::kHeaderEndedByExec ? ", ended by exec" : "");
  } else if (headerless) {
    warn_headerless(o.output);
  } else if (const int err = probe_output(output); err != 0 && others.empty()) {
    return cannot_write(o.output, err);
  } else if (others.empty()) {
    fmt::print(stderr,
               "peakscope: no trace at {}: the command did not start the recorder "
               "(is it a static binary, or did it clear LD_PRELOAD?)\n",
               shown(o.output));
  } else {
    fmt::print(stderr, "peakscope: no trace at {}\n", shown(o.output));
  }
  for (const WrittenTrace& other : others) fmt::print(stderr, "peakscope: trace also written: {}\n", describe(other));
  if (have_primary) warn_if_writes_failed(primary);
  for (const WrittenTrace& other : others) warn_if_writes_failed(other);
  for (const std::string& path : headerless_others) warn_headerless(path);
  if (WIFSIGNALED(status))
    fmt::print(stderr, "peakscope: '{}' was killed by signal {} ({})\n", shown(o.command[0]), WTERMSIG(status),
               strsignal(WTERMSIG(status)));
  return code;
}

}  // namespace psc::cli
