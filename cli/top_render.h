// What `peakscope top` (cli/cmd_top.cc) shows of the traces it follows: the
// screen of one trace or of a run's traces, the lines printed instead of a
// screen, and each wave's price from a calibration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/live_view.h"
#include "estimator/calibration.h"
#include "traces/follower.h"

namespace psc::cli {

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

// ---- pricing the waves as they end --------------------------------------------

struct Pricer {
  std::optional<Calibration> calibration;
  std::string admitted;  // "largest wave that fits ...", or why not

  // The raw price of a wave as its payload describes it: its tokens in one
  // sequence (never below a packed wave's price), its groups as equal
  // parts, its gradients pending unless a wave ran before it in its step.
  // `check` prices it exactly afterwards.
  std::optional<int64_t> price(const LiveWave& w, std::string* why) const;
};

// "largest wave that fits in BUDGET: N tokens (in one sequence)", or why not.
std::string admitted_line(const Calibration& calibration, int64_t budget);

// ---- rendering -----------------------------------------------------------------

// Line mode: a line per wave that ended, a status line when memory moved.
class LinePrinter {
 public:
  explicit LinePrinter(const Pricer& pricer) : pricer_(pricer) {}

  // `label`: the trace's path, when several are followed (prefixes each line).
  void update(const LiveSnapshot& s, const FollowStatus& follow, const std::string& label = {});

 private:
  const Pricer& pricer_;
  bool header_ = false;
  size_t printed_waves_ = 0;
  uint64_t last_live_ = UINT64_MAX;
  uint64_t last_peak_ = UINT64_MAX;
  std::string last_growing_;  // the growing ranges last printed
};

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

// The screen of one trace.
std::vector<std::string> screen_lines(const std::string& path, const FollowStatus& follow, const LiveView& view,
                                      const LiveSnapshot& s, const TopOptions& o, const Pricer& pricer,
                                      double events_per_s, bool final);
// Every member of a run, the busiest (the highest peak so far) first, then
// the busiest one's own view.
std::vector<std::string> run_lines(const std::string& where, std::vector<Member*> members, const TopOptions& o,
                                   const Pricer& pricer, bool final);

}  // namespace psc::cli
