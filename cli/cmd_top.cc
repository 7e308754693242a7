// `peakscope top` (its command line: cli/command_table.cc; what it shows:
// cli/top_render.h).
//
// A live view of a trace that is still being written, like htop for memory
// attribution: live bytes now and the peak so far, where the live bytes were
// made (by phase and by layer, identical layers folded), the range open on
// each thread, the last waves with their measured peaks and, with a
// calibration, each wave's price beside its peak (flagged when a peak passes
// it) and the largest wave that fits a budget. `top TRACE` follows a trace a
// recorder is writing; `top -- CMD ARGS...` records CMD itself (`record`,
// its output in PATH.log) and follows that. The screen is redrawn a few times
// a second on a terminal and stops on q or Ctrl-C; on a dumb terminal, or
// not on one, or with --lines, it prints a line per change instead (a line
// per wave that ends, a status line per refresh when memory moved). When the
// trace ends, the last figures are the report's (analysis/live_view.h).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/live_view.h"
#include "analysis/report_text.h"
#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/recorder_library.h"
#include "cli/top_render.h"
#include "estimator/calibration.h"

namespace psc::cli {
namespace {

// False for -h: the usage is printed.
[[nodiscard]] bool parse(int argc, char** argv, TopOptions& o) {
  ArgParser args(command_spec("top"));
  args.option({"-o", "--output"}, &o.output);
  args.flag({"--force"}, &o.force);
  args.flag({"--host"}, &o.host);
  args.option({"--calibration"}, &o.calibration);
  args.option({"--budget"},
              [&](const std::string& name, const std::string& value) { o.budget = parse_bytes(name, value); });
  args.option({"--interval"}, [&](const std::string& name, const std::string& value) {
    char* end = nullptr;
    const double s = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(s >= 0.05 && s <= 60))
      throw UsageError(fmt::format("{}: '{}' must be a number of seconds from 0.05 to 60", name, value));
    o.interval_s = s;
  });
  args.flag({"--lines"}, &o.lines);
  args.option({"--waves"}, [&](const std::string& name, const std::string& value) {
    o.wave_rows = static_cast<size_t>(parse_count(name, value));
  });
  // A command follows "--"; without one, the one argument is a trace.
  bool dashes = false;
  for (int i = 1; i < argc && !dashes; ++i) dashes = std::strcmp(argv[i], "--") == 0;
  if (dashes)
    args.command(&o.command);
  else
    args.positional(&o.trace, "trace");
  if (!args.parse(argc, argv)) return false;
  if (o.trace.empty() && o.command.empty())
    args.fail("no trace to follow and no command to record (top TRACE, or top -- CMD ARGS...)");
  if (o.budget && o.calibration.empty()) args.fail("--budget needs --calibration CAL.json");
  if (!o.trace.empty() && (o.host || o.force))
    args.fail("--host and --force are for a command top records (top -- CMD), not for a trace");
  return true;
}

// ---- the command top records --------------------------------------------------

std::string self_path() {
  const std::string path = executable_path();
  if (path.empty()) throw UsageError("cannot find the peakscope executable (/proc/self/exe)");
  return path;
}

// `peakscope record -o OUTPUT ... -- CMD`, its output in `log`, in its own
// process group: the Ctrl-C that stops the view does not reach the program.
pid_t start_recording(const TopOptions& o, const std::string& log) {
  std::vector<std::string> words = {self_path(), "record", "-o", o.output};
  if (o.force) words.push_back("--force");
  if (o.host) words.push_back("--host");
  words.push_back("--");
  words.insert(words.end(), o.command.begin(), o.command.end());
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw UsageError(fmt::format("cannot write {}: {}", log, std::strerror(errno)));
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (child == 0) {
    setpgid(0, 0);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fd);
  return child;
}

// ---- the terminal ----------------------------------------------------------------

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// Raw keys (no echo, no line buffering) while the screen is drawn; restored
// on every way out.
class Terminal {
 public:
  explicit Terminal(bool screen) : screen_(screen) {
    if (!screen_) return;
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      raw_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    std::fputs("\x1b[?1049h\x1b[?25l", stdout);  // the alternate screen, no cursor
  }
  ~Terminal() {
    if (!screen_) return;
    std::fputs("\x1b[?25h\x1b[?1049l", stdout);
    std::fflush(stdout);
    if (raw_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  void draw(const std::vector<std::string>& lines) const {
    winsize size{};
    const size_t rows = ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_row ? size.ws_row : 40;
    const size_t cols = size.ws_col ? size.ws_col : 120;
    std::string frame = "\x1b[H";
    for (size_t i = 0; i + 1 < rows && i < lines.size(); ++i) {
      frame += lines[i].substr(0, cols);
      frame += "\x1b[K\n";
    }
    frame += "\x1b[Jq or Ctrl-C quits";
    std::fwrite(frame.data(), 1, frame.size(), stdout);
    std::fflush(stdout);
  }

  // Waits up to `seconds` for a key; true when it was q.
  bool wait_for_quit(double seconds) const {
    pollfd fd{STDIN_FILENO, POLLIN, 0};
    const int ms = static_cast<int>(seconds * 1000);
    if (!raw_) {
      usleep(static_cast<useconds_t>(ms) * 1000);
      return false;
    }
    if (poll(&fd, 1, ms) <= 0) return false;
    char key = 0;
    return read(STDIN_FILENO, &key, 1) == 1 && (key == 'q' || key == 'Q');
  }

 private:
  bool screen_;
  bool raw_ = false;
  termios saved_{};
};

bool want_screen(const TopOptions& o) {
  if (o.lines || !isatty(STDOUT_FILENO)) return false;
  const char* term = getenv("TERM");
  return term && *term && std::strcmp(term, "dumb") != 0;
}

// The traces to follow now: the one named; a folder's .pstrace files; for a
// command top records, its trace and those `record` writes beside it for
// its children and ranks (<stem>.*.pstrace), as they appear.
std::vector<std::string> discover(const std::string& path, bool folder, bool siblings) {
  namespace fs = std::filesystem;
  std::vector<std::string> found;
  std::error_code ec;
  if (folder) {
    for (const fs::directory_entry& e : fs::directory_iterator(path, ec))
      if (e.path().extension() == ".pstrace" && e.is_regular_file(ec)) found.push_back(e.path().string());
  } else {
    found.push_back(path);
    if (siblings) {
      const fs::path main(path);
      const std::string stem = main.stem().string() + ".";
      const fs::path dir = main.has_parent_path() ? main.parent_path() : fs::path(".");
      for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (e.path().extension() == ".pstrace" && name.rfind(stem, 0) == 0 && e.is_regular_file(ec))
          found.push_back(main.has_parent_path() ? e.path().string() : name);
      }
    }
  }
  std::sort(found.begin() + (folder ? 0 : 1), found.end());
  return found;
}

// Everything top follows: the command it records, if any, and the traces
// found so far (one, a folder's, or the command's and its children's).
struct Session {
  const TopOptions& o;
  const Pricer& pricer;
  std::string path;
  bool folder = false;
  pid_t child = 0;
  int child_status = -1;
  std::vector<std::unique_ptr<Member>> members;
  std::set<std::string> known;

  std::vector<Member*> all_members() const {
    std::vector<Member*> all;
    for (const auto& m : members) all.push_back(m.get());
    return all;
  }
  bool all_over() const {
    bool over = !members.empty();
    for (const auto& m : members) over = over && m->status.over();
    return over;
  }
};

Pricer load_pricer(const TopOptions& o) {
  Pricer pricer;
  if (!o.calibration.empty()) {
    try {
      pricer.calibration = read_calibration(o.calibration);
    } catch (const std::exception& e) {
      throw UsageError(e.what());
    }
    if (o.budget) pricer.admitted = admitted_line(*pricer.calibration, *o.budget);
  }
  return pricer;
}

// What to follow: the trace or folder named, or the trace of the command,
// which starts recording now.
void start(Session& s) {
  const TopOptions& o = s.o;
  s.path = o.trace;
  std::error_code ec;
  s.folder = !o.trace.empty() && std::filesystem::is_directory(o.trace, ec);
  if (o.command.empty()) return;
  s.path = o.output;
  const std::string log = o.output + ".log";
  if (!o.force && access(s.path.c_str(), F_OK) == 0)
    throw UsageError(fmt::format("{} exists: another run's trace (--force replaces it, -o names another)", s.path));
  s.child = start_recording(o, log);
  fmt::print(stderr, "peakscope top: recording into {} (the command's output: {})\n", s.path, log);
}

// Whether the command top records has ended (reaped here, once).
bool command_ended(Session& s) {
  if (s.child > 0 && s.child_status < 0) {
    int status = 0;
    if (waitpid(s.child, &status, WNOHANG) == s.child) s.child_status = status;
  }
  return s.child > 0 && s.child_status >= 0;
}

// Traces that appeared since the last look, and what every trace added.
// Returns the events read so far, all traces together.
uint64_t poll_traces(Session& s, bool writers_done) {
  for (const std::string& p : discover(s.path, s.folder, s.child > 0))
    if (s.known.insert(p).second) {
      s.members.push_back(std::make_unique<Member>(p));
      s.members.back()->lines = std::make_unique<LinePrinter>(s.pricer);
    }
  uint64_t events = 0;
  for (auto& m : s.members) {
    if (writers_done) m->follower.writer_ended();
    m->status = m->follower.poll(m->view);
    m->snapshot = m->view.snapshot();
    events += m->status.events;
  }
  return events;
}

// Events read per second, over at least 0.2 s.
struct EventRate {
  uint64_t last_events = 0;
  std::chrono::steady_clock::time_point last_tick = std::chrono::steady_clock::now();
  double per_s = 0;

  void update(uint64_t events) {
    const auto now = std::chrono::steady_clock::now();
    const double dt = std::chrono::duration<double>(now - last_tick).count();
    if (dt > 0.2) {
      per_s = static_cast<double>(events - last_events) / dt;
      last_events = events;
      last_tick = now;
    }
  }
};

// Follows until every trace has ended (and the command too), q, or a
// signal; redraws the screen, or prints lines, after every look. Returns
// the last screen drawn.
std::vector<std::string> follow(Session& s, bool screen) {
  const TopOptions& o = s.o;
  std::vector<std::string> last_screen;
  // One line of the run's members in line mode: each one's lines carry its trace.
  const bool several_possible = s.folder || s.child > 0;
  Terminal terminal(screen);
  EventRate rate;
  for (;;) {
    const bool writers_done = command_ended(s);
    rate.update(poll_traces(s, writers_done));
    const bool all_over = s.all_over();
    if (screen && !s.members.empty()) {
      const Member& m = *s.members.front();
      last_screen = s.members.size() > 1
                        ? run_lines(s.path, s.all_members(), o, s.pricer, all_over)
                        : screen_lines(s.path, m.status, m.view, m.snapshot, o, s.pricer, rate.per_s, all_over);
      terminal.draw(last_screen);
    } else if (!screen) {
      for (auto& m : s.members)
        if (m->status.state != FollowStatus::State::kWaiting)
          m->lines->update(m->snapshot, m->status, several_possible ? m->path : std::string());
    }
    // A folder is followed until every trace in it has ended; a command,
    // until it has ended too (its ranks may start late).
    if ((all_over && (s.child == 0 || writers_done)) || g_stop) break;
    if (screen ? terminal.wait_for_quit(o.interval_s) : (usleep(static_cast<useconds_t>(o.interval_s * 1e6)), false))
      break;
  }
  return last_screen;
}

// The last figures, in full (on the normal screen again, or after the
// lines), and how each follow ended.
void print_end(const Session& s, bool screen, std::vector<std::string> last_screen) {
  const bool all_over = s.all_over();
  if (!screen) {
    std::printf("\n");
    if (s.members.size() > 1) {
      last_screen = run_lines(s.path, s.all_members(), s.o, s.pricer, all_over);
    } else if (!s.members.empty()) {
      const Member& m = *s.members.front();
      last_screen = screen_lines(s.path, m.status, m.view, m.view.snapshot(), s.o, s.pricer, 0, all_over);
    }
  }
  for (const std::string& l : last_screen) std::printf("%s\n", l.c_str());
  for (const auto& m : s.members) {
    const FollowStatus& follow = m->status;
    if (follow.over())
      std::printf("%s\n", fmt::format("trace {}: {}{}", m->path, follow_state_name(follow.state),
                                      follow.reason.empty() ? "" : " (" + follow.reason + ")")
                              .c_str());
    else
      std::printf("%s\n", fmt::format("stopped following {} at {} events", m->path, grouped(follow.events)).c_str());
  }
  if (s.members.empty()) std::printf("%s\n", fmt::format("no trace appeared at {}", s.path).c_str());
  if (s.child > 0 && s.child_status < 0)
    std::printf("%s\n", fmt::format("the command goes on (peakscope record, pid {})", s.child).c_str());
  std::fflush(stdout);
  // A command that never ran (record exits 126 or 127 then): why, from the log.
  if (s.child > 0 && s.child_status >= 0 && WIFEXITED(s.child_status) &&
      (WEXITSTATUS(s.child_status) == 126 || WEXITSTATUS(s.child_status) == 127)) {
    std::ifstream log(s.o.output + ".log");
    for (std::string line; std::getline(log, line);)
      if (line.rfind("peakscope record: cannot run", 0) == 0)
        std::fprintf(stderr, "peakscope top: %s\n", line.substr(std::strlen("peakscope record: ")).c_str());
  }
}

}  // namespace

int cmd_top(int argc, char** argv) {
  TopOptions o;
  if (!parse(argc, argv, o)) return kExitOk;
  const Pricer pricer = load_pricer(o);
  Session s{o, pricer};
  start(s);
  const bool screen = want_screen(o);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  std::vector<std::string> last_screen = follow(s, screen);
  print_end(s, screen, std::move(last_screen));
  if (s.child > 0 && s.child_status >= 0)
    return WIFEXITED(s.child_status) ? WEXITSTATUS(s.child_status) : 128 + WTERMSIG(s.child_status);
  return kExitOk;
}

}  // namespace psc::cli
