// `peakscope top` (its command line: cli/command_table.cc).
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
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/layer_fold.h"
#include "analysis/live_view.h"
#include "analysis/report_text.h"
#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/recorder_library.h"
#include "common/bytes.h"
#include "estimator/calibration.h"
#include "estimator/predict.h"

namespace psc::cli {
namespace {

struct TopOptions {
  std::string trace;                 // top TRACE
  std::vector<std::string> command;  // top -- CMD ARGS...
  std::string output = "peakscope.pstrace";
  bool force = false;
  bool host = false;
  std::string calibration;
  std::optional<int64_t> budget;
  double interval_s = 0.5;
  bool lines = false;
  size_t wave_rows = 8;
};

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

// ---- pricing the waves as they end --------------------------------------------

struct Pricer {
  std::optional<Calibration> calibration;
  std::string admitted;  // "largest wave that fits ...", or why not

  // The raw price of a wave as its payload describes it: its tokens in one
  // sequence (never below a packed wave's price), its groups as equal
  // parts, its gradients pending unless a wave ran before it in its step.
  // `check` prices it exactly afterwards.
  std::optional<int64_t> price(const LiveWave& w, std::string* why) const {
    if (!calibration || !w.payload.tokens || *w.payload.tokens <= 0) return std::nullopt;
    WaveRequest request;
    request.tokens = *w.payload.tokens;
    request.cold = w.payload.cold.value_or(false);
    request.gradients_exist = w.after_a_wave_of_its_step;
    const int64_t groups = w.payload.groups.value_or(1);
    if (groups > 1) {
      // Slots the calibration does not know are charged its largest gradients.
      request.slots = static_cast<int64_t>(w.payload.slots.size()) == groups
                          ? w.payload.slots
                          : std::vector<std::string>(static_cast<size_t>(groups), "(unnamed)");
    }
    try {
      return predict(*calibration, request).price.raw_bytes;
    } catch (const std::exception& e) {
      *why = e.what();
      return std::nullopt;
    }
  }
};

// ---- rendering -----------------------------------------------------------------

std::string mib(uint64_t bytes) { return format_bytes(bytes); }

std::string seconds(uint64_t t, uint64_t first) {
  return t >= first ? fmt::format("+{:.1f} s", static_cast<double>(t - first) / 1e9) : "-";
}

// "0-30 100.94 KiB each" rows: consecutive layers holding the same bytes
// folded (analysis/layer_fold.h); layers holding none left out.
std::vector<std::string> layer_lines(const std::vector<uint64_t>& layers) {
  std::vector<std::string> out;
  const auto joins = [&](size_t first, size_t next) { return layers[next] == layers[first]; };
  fold_layer_rows(layers.size(), joins, [&](size_t first, size_t last) {
    if (layers[first] == 0) return;
    out.push_back(fmt::format("{:>9} {:>12}{}", layer_span(static_cast<int64_t>(first), static_cast<int64_t>(last)),
                              mib(layers[first]), last > first ? " each" : ""));
  });
  return out;
}

struct WaveText {
  std::string line;
  bool over_price = false;
};

std::string wave_header(const Pricer& pricer) {
  return fmt::format("{:>5} {:>7} {:>4} {:>12} {:>12} {:>12} {:>14}{}  peak in", "wave", "tokens", "cold", "baseline",
                     "peak", "measured", "measured bytes",
                     pricer.calibration ? fmt::format(" {:>12} {:>9}", "price", "error") : "");
}

WaveText wave_text(const LiveWave& w, const Pricer& pricer) {
  const std::string tokens = w.payload.tokens ? std::to_string(*w.payload.tokens) : "-";
  const std::string cold = w.payload.cold ? (*w.payload.cold ? "yes" : "no") : "-";
  WaveText t;
  t.line = fmt::format("{:>5} {:>7} {:>4} {:>12} {:>12} {:>12} {:>14}", w.index, tokens, cold, mib(w.baseline_bytes),
                       mib(w.peak_bytes), mib(w.measured_bytes()), w.measured_bytes());
  std::string why;
  if (!w.ended) {
    t.line += "  (running)";
  } else if (const std::optional<int64_t> price = pricer.price(w, &why)) {
    const double error =
        w.measured_bytes() ? static_cast<double>(*price) / static_cast<double>(w.measured_bytes()) - 1 : 0.0;
    t.over_price = static_cast<uint64_t>(*price) < w.measured_bytes();
    t.line += fmt::format(" {:>12} {:>+8.2f}%{}", mib(static_cast<uint64_t>(*price)), error * 100,
                          t.over_price ? "  PEAK OVER ITS PRICE" : "");
  } else if (!why.empty()) {
    t.line += "  not priced: " + why;
  }
  if (!w.peak_range.empty()) t.line += "  " + w.peak_range;
  return t;
}

// Growth across optimizer steps so far (analysis/live_view.h): the ranges
// whose live bytes rose step after step, or why nothing is said yet.
std::vector<std::string> growth_lines(const LiveSnapshot& s) {
  std::vector<std::string> out;
  if (s.steps_compared < 2) return out;
  if (s.growing.empty()) {
    out.push_back(fmt::format("growth across optimizer steps: nothing grows over {} steps", s.steps_compared));
    return out;
  }
  out.push_back(fmt::format("growth across optimizer steps ({} compared): GROWING", s.steps_compared));
  for (const LiveSnapshot::Growing& g : s.growing)
    out.push_back(fmt::format("  {:>12}/step  {:>12} live  {}", mib(g.bytes_per_step), mib(g.live_bytes),
                              g.range.empty() ? "(no range)" : g.range));
  return out;
}

std::vector<std::string> screen_lines(const std::string& path, const FollowStatus& follow, const LiveView& view,
                                      const LiveSnapshot& s, const TopOptions& o, const Pricer& pricer,
                                      double events_per_s, bool final) {
  std::vector<std::string> out;
  const TraceMeta& meta = view.meta();
  const size_t host_length = strnlen(meta.header.hostname, sizeof meta.header.hostname);
  out.push_back(fmt::format(
      "peakscope top  {}  pid {} on {}  {}{}", path, meta.header.pid, std::string(meta.header.hostname, host_length),
      follow_state_name(follow.state),
      follow.state == FollowStatus::State::kWaiting && !follow.reason.empty() ? " (" + follow.reason + ")" : ""));
  out.push_back(fmt::format(
      "events {} ({:.0f}/s), {} of the file read, {} level{}", grouped(s.events), events_per_s, mib(follow.bytes),
      memory_level_name(s.level),
      s.deferred_left_out ? fmt::format("; {} CUPTI-only events left to `report`", grouped(s.deferred_left_out)) : ""));
  out.push_back(fmt::format("live now   {} in {} allocations", mib(s.live_bytes), grouped(s.live_allocations)));
  out.push_back(fmt::format("peak       {} ({} bytes) at {}{}", mib(s.peak_bytes), s.peak_bytes,
                            seconds(s.peak_time_ns, s.first_time_ns),
                            s.peak_range.empty() ? "" : " in " + s.peak_range));
  out.push_back("");
  out.push_back("live now by where it was made");
  for (int p = 0; p < kPhaseCount; ++p) {
    const uint64_t bytes = s.phase_bytes[static_cast<size_t>(p)];
    if (bytes) out.push_back(fmt::format("  {:<10} {:>12}", phase_name(static_cast<Phase>(p)), mib(bytes)));
  }
  const std::vector<std::string> layers = layer_lines(s.layer_bytes);
  if (!layers.empty()) {
    out.push_back("  by layer");
    for (const std::string& l : layers) out.push_back(l);
  }
  out.push_back("");
  if (s.open_ranges.empty()) {
    out.push_back(final ? "open ranges: none" : "open ranges: none now");
  } else {
    for (const LiveSnapshot::OpenRange& r : s.open_ranges)
      out.push_back(
          fmt::format("thread {}{}: {}", r.thread, r.thread_name.empty() ? "" : " (" + r.thread_name + ")", r.range));
  }
  out.push_back("");
  out.push_back(fmt::format("waves ({} so far; peak is absolute, measured = peak - baseline{})", s.waves.size(),
                            pricer.calibration ? "; price: raw, as the payload says" : ""));
  out.push_back(wave_header(pricer));
  const size_t first = s.waves.size() > o.wave_rows ? s.waves.size() - o.wave_rows : 0;
  for (size_t i = first; i < s.waves.size(); ++i) out.push_back(wave_text(s.waves[i], pricer).line);
  if (!pricer.admitted.empty()) out.push_back(pricer.admitted);
  for (const std::string& l : growth_lines(s)) out.push_back(l);
  return out;
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

// Line mode: a line per wave that ended, a status line when memory moved.
class LinePrinter {
 public:
  explicit LinePrinter(const Pricer& pricer) : pricer_(pricer) {}

  // `label`: the trace's path, when several are followed (prefixes each line).
  void update(const LiveSnapshot& s, const FollowStatus& follow, const std::string& label = {}) {
    const std::string prefix = label.empty() ? std::string() : "[" + label + "] ";
    if (!header_) {
      std::printf("%s%s\n", prefix.c_str(), wave_header(pricer_).c_str());
      header_ = true;
    }
    for (; printed_waves_ < s.waves.size() && s.waves[printed_waves_].ended; ++printed_waves_) {
      const WaveText t = wave_text(s.waves[printed_waves_], pricer_);
      std::printf("%s%s\n", prefix.c_str(), t.line.c_str());
    }
    std::string growing;
    for (const LiveSnapshot::Growing& g : s.growing) growing += g.range + ";";
    if (growing != last_growing_) {
      for (const std::string& l : growth_lines(s)) std::printf("%s%s\n", prefix.c_str(), l.c_str());
      last_growing_ = growing;
    }
    if (s.live_bytes != last_live_ || s.peak_bytes != last_peak_) {
      std::printf("%s%s\n", prefix.c_str(),
                  fmt::format("[{}] live {} in {} allocations, peak {}{}; {} events, {}",
                              seconds(s.last_time_ns, s.first_time_ns), mib(s.live_bytes), grouped(s.live_allocations),
                              mib(s.peak_bytes), s.peak_range.empty() ? "" : " in " + s.peak_range, grouped(s.events),
                              follow_state_name(follow.state))
                      .c_str());
      last_live_ = s.live_bytes;
      last_peak_ = s.peak_bytes;
    }
    std::fflush(stdout);
  }

 private:
  const Pricer& pricer_;
  bool header_ = false;
  size_t printed_waves_ = 0;
  uint64_t last_live_ = UINT64_MAX;
  uint64_t last_peak_ = UINT64_MAX;
  std::string last_growing_;  // the growing ranges last printed
};

std::string admitted_line(const Calibration& calibration, int64_t budget) {
  try {
    WaveRequest shape;
    const pricing::Admission a = admit_wave(calibration, shape, 0, int64_t{1} << 20, budget);
    return fmt::format("largest wave that fits in {}: {} tokens (in one sequence)", format_bytes(budget), a.tokens);
  } catch (const std::exception& e) {
    return fmt::format("largest wave that fits in {}: not priced: {}", format_bytes(budget), e.what());
  }
}

// One trace followed: a process of the run.
struct Member {
  explicit Member(std::string p) : path(std::move(p)), follower(path) {}
  std::string path;
  TraceFollower follower;
  LiveView view;
  FollowStatus status;
  LiveSnapshot snapshot;
  std::unique_ptr<LinePrinter> lines;
  int rank() const { return view.meta().header.rank; }
};

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

std::string rank_text(int rank) { return rank >= 0 ? std::to_string(rank) : "-"; }

// Every member of a run, the busiest (the highest peak so far) first, then
// the busiest one's own view.
std::vector<std::string> run_lines(const std::string& where, std::vector<Member*> members, const TopOptions& o,
                                   const Pricer& pricer, bool final) {
  std::sort(members.begin(), members.end(),
            [](const Member* a, const Member* b) { return a->snapshot.peak_bytes > b->snapshot.peak_bytes; });
  std::vector<std::string> out;
  out.push_back(fmt::format("peakscope top  {}  {} traces, the busiest first", where, members.size()));
  out.push_back(fmt::format("  {:>4} {:<16} {:>8} {:>12} {:>12} {:>6}  {:<36}  {}", "rank", "host", "pid", "live now",
                            "peak", "waves", "state", "trace"));
  for (const Member* m : members) {
    const TraceMeta& meta = m->view.meta();
    const size_t host_length = strnlen(meta.header.hostname, sizeof meta.header.hostname);
    out.push_back(fmt::format("  {:>4} {:<16} {:>8} {:>12} {:>12} {:>6}  {:<36}  {}", rank_text(m->rank()),
                              std::string(meta.header.hostname, host_length).substr(0, 16), meta.header.pid,
                              mib(m->snapshot.live_bytes), mib(m->snapshot.peak_bytes), m->snapshot.waves.size(),
                              follow_state_name(m->status.state), m->path));
  }
  out.push_back("");
  const Member* busiest = members.front();
  for (const std::string& l :
       screen_lines(busiest->path, busiest->status, busiest->view, busiest->snapshot, o, pricer, 0, final))
    out.push_back(l);
  return out;
}

}  // namespace

int cmd_top(int argc, char** argv) {
  TopOptions o;
  if (!parse(argc, argv, o)) return kExitOk;
  Pricer pricer;
  if (!o.calibration.empty()) {
    try {
      pricer.calibration = read_calibration(o.calibration);
    } catch (const std::exception& e) {
      throw UsageError(e.what());
    }
    if (o.budget) pricer.admitted = admitted_line(*pricer.calibration, *o.budget);
  }

  pid_t child = 0;
  std::string path = o.trace;
  std::error_code ec;
  const bool folder = !o.trace.empty() && std::filesystem::is_directory(o.trace, ec);
  if (!o.command.empty()) {
    path = o.output;
    const std::string log = o.output + ".log";
    if (!o.force && access(path.c_str(), F_OK) == 0)
      throw UsageError(fmt::format("{} exists: another run's trace (--force replaces it, -o names another)", path));
    child = start_recording(o, log);
    fmt::print(stderr, "peakscope top: recording into {} (the command's output: {})\n", path, log);
  }

  const bool screen = want_screen(o);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  std::vector<std::unique_ptr<Member>> members;
  std::set<std::string> known;
  int child_status = -1;
  std::vector<std::string> last_screen;
  auto all_members = [&] {
    std::vector<Member*> all;
    for (auto& m : members) all.push_back(m.get());
    return all;
  };
  // One line of the run's members in line mode: each one's lines carry its trace.
  const bool several_possible = folder || child > 0;
  {
    Terminal terminal(screen);
    uint64_t last_events = 0;
    auto last_tick = std::chrono::steady_clock::now();
    double rate = 0;
    for (;;) {
      bool writers_done = false;
      if (child > 0 && child_status < 0) {
        int status = 0;
        if (waitpid(child, &status, WNOHANG) == child) child_status = status;
      }
      writers_done = child > 0 && child_status >= 0;
      for (const std::string& p : discover(path, folder, child > 0))
        if (known.insert(p).second) {
          members.push_back(std::make_unique<Member>(p));
          members.back()->lines = std::make_unique<LinePrinter>(pricer);
        }
      bool all_over = !members.empty();
      uint64_t events = 0;
      for (auto& m : members) {
        if (writers_done) m->follower.writer_ended();
        m->status = m->follower.poll(m->view);
        m->snapshot = m->view.snapshot();
        all_over = all_over && m->status.over();
        events += m->status.events;
      }
      const auto now = std::chrono::steady_clock::now();
      const double dt = std::chrono::duration<double>(now - last_tick).count();
      if (dt > 0.2) {
        rate = static_cast<double>(events - last_events) / dt;
        last_events = events;
        last_tick = now;
      }
      const bool several = members.size() > 1;
      if (screen && !members.empty()) {
        last_screen = several ? run_lines(path, all_members(), o, pricer, all_over)
                              : screen_lines(path, members.front()->status, members.front()->view,
                                             members.front()->snapshot, o, pricer, rate, all_over);
        terminal.draw(last_screen);
      } else if (!screen) {
        for (auto& m : members)
          if (m->status.state != FollowStatus::State::kWaiting)
            m->lines->update(m->snapshot, m->status, several_possible ? m->path : std::string());
      }
      // A folder is followed until every trace in it has ended; a command,
      // until it has ended too (its ranks may start late).
      if ((all_over && (child == 0 || writers_done)) || g_stop) break;
      if (screen ? terminal.wait_for_quit(o.interval_s) : (usleep(static_cast<useconds_t>(o.interval_s * 1e6)), false))
        break;
    }
  }
  bool all_over = !members.empty();
  for (auto& m : members) all_over = all_over && m->status.over();
  // The last figures, in full: on the normal screen again, or after the lines.
  if (!screen) {
    std::printf("\n");
    if (members.size() > 1)
      last_screen = run_lines(path, all_members(), o, pricer, all_over);
    else if (!members.empty())
      last_screen = screen_lines(path, members.front()->status, members.front()->view, members.front()->view.snapshot(),
                                 o, pricer, 0, all_over);
  }
  for (const std::string& l : last_screen) std::printf("%s\n", l.c_str());
  for (auto& m : members) {
    const FollowStatus& follow = m->status;
    if (follow.over())
      std::printf("%s\n", fmt::format("trace {}: {}{}", m->path, follow_state_name(follow.state),
                                      follow.reason.empty() ? "" : " (" + follow.reason + ")")
                              .c_str());
    else
      std::printf("%s\n", fmt::format("stopped following {} at {} events", m->path, grouped(follow.events)).c_str());
  }
  if (members.empty()) std::printf("%s\n", fmt::format("no trace appeared at {}", path).c_str());
  if (child > 0 && child_status < 0)
    std::printf("%s\n", fmt::format("the command goes on (peakscope record, pid {})", child).c_str());
  std::fflush(stdout);
  if (child > 0 && child_status >= 0)
    return WIFEXITED(child_status) ? WEXITSTATUS(child_status) : 128 + WTERMSIG(child_status);
  return kExitOk;
}

}  // namespace psc::cli
