#include "common/progress.h"

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

namespace psc {
namespace {

ProgressReporter* g_current = nullptr;
std::thread::id g_owner;  // the thread that installed g_current: the only one shown

bool shown_here() { return g_current && std::this_thread::get_id() == g_owner; }

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void write_stderr(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

std::string millions(uint64_t n) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f M", static_cast<double>(n) / 1e6);
  return buffer;
}

}  // namespace

ProgressReporter::ProgressReporter(bool enabled, Clock clock, Sink sink)
    : enabled_(enabled),
      clock_(clock ? std::move(clock) : Clock(monotonic_ns)),
      sink_(sink ? std::move(sink) : Sink(write_stderr)) {
  if (enabled_) {
    start_ns_ = clock_();
    next_ns_ = start_ns_ + kDelayNs;
  }
}

ProgressReporter::~ProgressReporter() { clear(); }

bool ProgressReporter::stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

void ProgressReporter::stage(std::string_view label, uint64_t total) {
  label_ = std::string(label);
  total_ = total;
  done_ = 0;
}

void ProgressReporter::advance(uint64_t units) {
  done_ += units;
  if (!enabled_) return;
  const uint64_t now = clock_();
  if (now < next_ns_) return;
  next_ns_ = now + kIntervalNs;
  show(now);
}

void ProgressReporter::show(uint64_t now) {
  std::string line = "peakscope: " + label_ + ": " + millions(done_);
  if (total_ > 0) {
    char percent[32];
    std::snprintf(percent, sizeof(percent), " of %s (%d%%)", millions(total_).c_str(),
                  static_cast<int>(done_ >= total_ ? 100 : done_ * 100 / total_));
    line += percent;
  }
  char elapsed[32];
  std::snprintf(elapsed, sizeof(elapsed), ", %.0f s", static_cast<double>(now - start_ns_) / 1e9);
  line += elapsed;
  const size_t width = line.size();
  // Spaces over what the previous, longer line left.
  if (width < shown_) line.append(shown_ - width, ' ');
  sink_("\r" + line);
  shown_ = width;
}

void ProgressReporter::clear() {
  if (shown_ == 0) return;
  sink_("\r" + std::string(shown_, ' ') + "\r");
  shown_ = 0;
}

void progress_stage(std::string_view label, uint64_t total) {
  if (shown_here()) g_current->stage(label, total);
}

void progress_advance(uint64_t units) {
  if (shown_here()) g_current->advance(units);
}

void progress_done() {
  if (shown_here()) g_current->clear();
}

ProgressScope::ProgressScope(ProgressReporter& reporter) : previous_(g_current), previous_owner_(g_owner) {
  g_current = &reporter;
  g_owner = std::this_thread::get_id();
}

ProgressScope::~ProgressScope() {
  g_current = previous_;
  g_owner = previous_owner_;
}

}  // namespace psc
