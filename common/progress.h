// Progress on stderr for commands that read big traces: one line rewritten in
// place ("\r"), only on a terminal, only once a command has run for a second,
// at most four times a second, and cleared when the command ends, so nothing
// of it is left in a terminal's scrollback nor ever reaches a pipe or a file
// (tests and scripts parse stderr).
//
// The CLI installs one reporter for the command it runs; the reading code
// calls progress_stage() and progress_advance() (a global pointer load and a
// branch when none is installed) per batch of events, never per event.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

namespace psc {

class ProgressReporter {
 public:
  using Clock = std::function<uint64_t()>;              // nanoseconds, monotonic
  using Sink = std::function<void(std::string_view)>;   // writes text as it is
  static constexpr uint64_t kDelayNs = 1'000'000'000;   // nothing before 1 s
  static constexpr uint64_t kIntervalNs = 250'000'000;  // then at most 4 lines a second

  // enabled: whether to print at all (the CLI passes isatty(stderr)). The
  // clock and the sink default to CLOCK_MONOTONIC and stderr; tests pass
  // their own.
  explicit ProgressReporter(bool enabled, Clock clock = {}, Sink sink = {});
  ~ProgressReporter();  // clears the line
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // A new step: what is being done, and how many units it has (0: unknown).
  void stage(std::string_view label, uint64_t total);
  void advance(uint64_t units);
  // Clears the line if one is shown.
  void clear();

  static bool stderr_is_terminal();

 private:
  void show(uint64_t now);

  bool enabled_;
  Clock clock_;
  Sink sink_;
  uint64_t start_ns_ = 0;
  uint64_t next_ns_ = 0;  // no line before this
  std::string label_;
  uint64_t total_ = 0;
  uint64_t done_ = 0;
  size_t shown_ = 0;  // width of the line on screen, 0 for none
};

// The reporter of the running command, or none (installed by ProgressScope).
void progress_stage(std::string_view label, uint64_t total);
void progress_advance(uint64_t units);
// Clears the line before the command writes its results.
void progress_done();

// Hands units to progress_advance() a batch at a time, for loops over single
// rows or entries (an importer's), which would otherwise ask the clock for
// every one. What is left is handed on by flush() or at the end of the scope.
class ProgressBatch {
 public:
  static constexpr uint64_t kUnits = 4096;
  ProgressBatch() = default;
  ~ProgressBatch() { flush(); }
  ProgressBatch(const ProgressBatch&) = delete;
  ProgressBatch& operator=(const ProgressBatch&) = delete;

  void add(uint64_t units = 1) {
    if ((pending_ += units) >= kUnits) flush();
  }
  void flush() {
    if (pending_ == 0) return;
    progress_advance(pending_);
    pending_ = 0;
  }

 private:
  uint64_t pending_ = 0;
};

// Installs a reporter for the lifetime of the scope (the previous comes back
// after). Only the thread that installed it shows progress: the calls above
// do nothing on any other (traces analysed side by side, common/parallel.h,
// leave their progress to the installing thread).
class ProgressScope {
 public:
  explicit ProgressScope(ProgressReporter& reporter);
  ~ProgressScope();
  ProgressScope(const ProgressScope&) = delete;
  ProgressScope& operator=(const ProgressScope&) = delete;

 private:
  ProgressReporter* previous_;
  std::thread::id previous_owner_;
};

}  // namespace psc
