// `peakscope check` (its command line: cli/command_table.cc).
//
// The accuracy table (docs/design.md, "Accuracy is measured, never asserted"): per wave, the
// calibrated price against the measured peak, cold and warm summarised apart.
// Exit 1 when any wave's raw price is below its measured peak (with
// --floor-only: the floor-only price), 0 otherwise, 2 for bad input.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "common/parallel.h"
#include "common/progress.h"
#include "estimator/calibration.h"
#include "estimator/check.h"
#include "estimator/check_json.h"
#include "estimator/liveness.h"

namespace psc::cli {
namespace {

struct CheckOptions {
  std::string calibration;
  std::vector<std::string> traces;
  bool json = false;
  bool floor_only = false;
  bool allow_host_floor = false;
  bool terms = false;  // --terms: the per-term over-estimate table
};

// False for -h: the usage is printed.
[[nodiscard]] bool parse(int argc, char** argv, CheckOptions& o) {
  ArgParser args(command_spec("check"));
  args.option({"--calibration"}, &o.calibration);
  args.flag({"--json"}, &o.json);
  args.flag({"--floor-only"}, &o.floor_only);
  args.flag({"--allow-host-floor"}, &o.allow_host_floor);
  args.flag({"--terms"}, &o.terms);
  args.positionals(&o.traces);
  if (!args.parse(argc, argv)) return false;
  if (o.calibration.empty()) args.fail("no calibration given (--calibration CAL.json)");
  if (o.traces.empty()) args.fail("no trace given");
  o.traces = expand_trace_folders(o.traces);  // a run's folder: every rank's trace
  return true;
}

// Where the price puts the peak: the layer and, with moments, which moment.
std::string priced_peak(const pricing::Price& p) {
  std::string where = p.peak.layer >= 0 ? fmt::format("layer.{}", p.peak.layer) : std::string("head");
  if (p.peak.group < 0) return "-";
  if (p.peak.moment == pricing::Moment::kForward) return "forward";
  if (p.peak.moment != pricing::Moment::kNone) where += std::string(" ") + pricing::moment_name(p.peak.moment);
  return where;
}

// Where each wave's over-estimate comes from: each term's priced bytes less
// the most the wave held of it (check --terms).
void print_terms(const std::vector<CheckRow>& rows, bool floor_only) {
  std::string last_trace;
  int trace_index = -1;
  std::printf(
      "\nper-term over-estimate (priced - measured, bytes; measured = that term's own maximum in the wave, or for "
      "\"moment\" what the wave held beside boundaries and gradients at the moment the price names)\n");
  std::printf("%-6s %5s %6s %12s %16s %12s %14s %12s %12s %12s  %-28s %s\n", "trace", "wave", "tokens", "retained",
              "pending_gradient", "workspace", "input_gradient", "output", "moment", "coincidence", "priced peak",
              "outside the calibrated");
  static const char* const kColumns[] = {"retained",       "pending_gradient", "workspace",
                                         "input_gradient", "output",           "moment"};
  static const int kWidths[] = {12, 16, 12, 14, 12, 12};
  for (const CheckRow& r : rows) {
    if (r.trace != last_trace) {
      last_trace = r.trace;
      ++trace_index;
    }
    std::printf("%-6d %5d %6lld", trace_index, r.wave, static_cast<long long>(r.tokens));
    double terms_over = 0;
    for (size_t c = 0; c < std::size(kColumns); ++c) {
      auto it =
          std::find_if(r.terms.begin(), r.terms.end(), [&](const TermResidual& t) { return t.term == kColumns[c]; });
      if (it == r.terms.end()) {
        std::printf(" %*s", kWidths[c], "-");
        continue;
      }
      const long long over = std::llround(-it->residual());
      terms_over += static_cast<double>(over);
      std::printf(" %*lld", kWidths[c], over);
    }
    // The rest of the over-estimate: terms charged together whose maxima
    // the wave did not reach at the same time (and the adapter term's shape).
    const pricing::Price& p = r.priced(floor_only);
    std::string outside;
    for (const std::string& f : r.outside) outside += (outside.empty() ? "" : ",") + f;
    std::printf(
        " %12lld  %-28s %s\n",
        std::llround(static_cast<double>(p.raw_bytes) - static_cast<double>(r.measured_peak_bytes) - terms_over),
        priced_peak(p).c_str(), outside.empty() ? "-" : outside.c_str());
  }
}

void print_text(const std::vector<CheckRow>& rows, bool floor_only, bool terms, const CheckSummary& summary) {
  std::printf("%-6s %5s %6s %4s %19s %12s %14s %9s %8s %14s %15s %9s  %s\n", "trace", "wave", "tokens", "cold",
              "measured_peak_bytes", "raw_bytes", "required_bytes", "raw_error", "margin", "admitted_error",
              "floor_raw_bytes", "floor_err", "peak in");
  std::string last_trace;
  int trace_index = -1;
  for (const CheckRow& r : rows) {
    if (r.trace != last_trace) {
      last_trace = r.trace;
      ++trace_index;
      std::printf("# trace %d: %s\n", trace_index, r.trace.c_str());
    }
    const pricing::Price& p = r.priced(floor_only);
    std::printf("%-6d %5d %6lld %4s %19llu %12lld %14lld %+8.2f%% %+7.2f%% %+13.2f%% %15lld %+8.2f%%  %s%s\n",
                trace_index, r.wave, static_cast<long long>(r.tokens), r.cold ? "yes" : "no",
                static_cast<unsigned long long>(r.measured_peak_bytes), static_cast<long long>(p.raw_bytes),
                static_cast<long long>(p.required_bytes), r.raw_error_of(floor_only) * 100, r.margin * 100,
                r.admitted_error_of(floor_only) * 100, static_cast<long long>(r.floor_price.raw_bytes),
                r.floor_raw_error * 100, r.peak_range.empty() ? "(no range)" : r.peak_range.c_str(),
                r.under_estimate(floor_only) ? "  UNDER" : "");
  }
  if (terms) print_terms(rows, floor_only);
  std::printf("\n%s prices\n", floor_only ? "floor-only" : "full");
  for (const auto& [name, s] :
       {std::pair<const char*, const ErrorSummary&>{"cold", summary.cold}, {"warm", summary.warm}})
    std::printf("  %s: %zu waves, raw error median %+.2f%%, min %+.2f%%, max %+.2f%%, under-estimates %zu\n", name,
                s.waves, s.median * 100, s.min * 100, s.max * 100, s.under);
  for (const CheckRow& r : rows)
    for (const std::string& w : r.warnings)
      std::printf("warning: %s wave %d: %s\n", r.trace.c_str(), r.wave, w.c_str());
  std::printf("under_estimates %zu\n", summary.under_estimates());
}

void print_runs(const std::vector<RunCheck>& runs) {
  for (const RunCheck& run : runs) {
    std::printf("\nrun %s: by rank; the run's verdict is its busiest rank's (the largest measured wave peak)\n",
                run.id.empty() ? "(no run id)" : ("'" + run.id + "'").c_str());
    std::printf("  %4s %-24s %5s %5s %19s %13s %13s  %s\n", "rank", "process", "waves", "under", "largest_measured",
                "min_raw_error", "max_raw_error", "trace");
    for (size_t i = 0; i < run.ranks.size(); ++i) {
      const RankCheck& r = run.ranks[i];
      std::printf("%s %4d %-24s %5zu %5zu %19llu %+12.2f%% %+12.2f%%  %s\n",
                  static_cast<int>(i) == run.busiest ? "*" : " ", r.member.header.rank, member_label(r.member).c_str(),
                  r.waves, r.under, static_cast<unsigned long long>(r.largest_measured), r.min_raw_error * 100,
                  r.max_raw_error * 100, r.member.path.c_str());
    }
    const RankCheck& b = run.ranks[static_cast<size_t>(run.busiest)];
    size_t others = 0;
    for (const RankCheck& r : run.ranks) others += r.under;
    others -= b.under;
    std::printf("run_verdict rank %d: %zu under-estimates%s\n", b.member.header.rank, b.under,
                others ? fmt::format(" (the other ranks: {}, reported, not the verdict)", others).c_str() : "");
  }
}

// Exit 1: an under-estimate on a run's busiest rank, or on a trace that is
// no run's rank.
bool check_failed(const std::vector<CheckRow>& rows, const std::vector<RunCheck>& runs, bool floor_only) {
  std::set<std::string> ranked;
  for (const RunCheck& run : runs) {
    if (run.verdict_under() > 0) return true;
    for (const RankCheck& r : run.ranks) ranked.insert(r.member.path);
  }
  for (const CheckRow& r : rows)
    if (!ranked.count(r.trace) && r.under_estimate(floor_only)) return true;
  return false;
}

}  // namespace

int cmd_check(int argc, char** argv) {
  CheckOptions o;
  if (!parse(argc, argv, o)) return kExitOk;
  const Calibration calibration = read_calibration(o.calibration);
  std::vector<CheckRow> rows;
  // Every trace read and checked side by side (common/parallel.h); the rows
  // in the traces' order. A run's folder also holds traces with nothing to
  // check (the launcher's own): one without waves is named and passed over.
  struct Checked {
    bool waves = false;
    std::string host_floor;          // host_floor_problem
    std::vector<std::string> notes;  // a trace not read whole, waves it stops inside
    std::vector<CheckRow> rows;
  };
  const unsigned threads = trace_threads(o.traces.size());
  if (threads > 1) progress_stage(fmt::format("reading {} traces, {} at a time", o.traces.size(), threads), 0);
  std::vector<Checked> checked = parallel_map<Checked>(
      o.traces.size(), threads,
      [&](size_t i) {
        Liveness liveness = analyze_liveness(o.traces[i]);
        Checked c;
        // A wave the trace stops inside has a partial peak: no measurement to check.
        c.notes = set_aside_partial_waves(&liveness, "checked");
        c.waves = !liveness.waves.empty();
        c.host_floor = host_floor_problem(liveness);
        if (!c.host_floor.empty() && !o.allow_host_floor) return c;
        if (c.waves) c.rows = check_trace(calibration, liveness);
        return c;
      },
      [](size_t) { progress_advance(1); });
  progress_done();
  std::vector<std::string> warnings;
  for (const Checked& c : checked)
    for (const std::string& note : c.notes) {
      std::fprintf(stderr, "peakscope check: warning: %s\n", note.c_str());
      warnings.push_back(note);
    }
  for (const Checked& c : checked) {
    if (c.host_floor.empty()) continue;
    if (!o.allow_host_floor) throw UsageError(c.host_floor + " (or pass --allow-host-floor to check it anyway)");
    std::fprintf(stderr, "peakscope check: warning: %s\n", c.host_floor.c_str());
    warnings.push_back(c.host_floor);
  }
  for (size_t i = 0; i < o.traces.size(); ++i) {
    if (!checked[i].waves) {
      std::fprintf(stderr, "peakscope check: %s has no waves: nothing to check there\n", o.traces[i].c_str());
      continue;
    }
    for (CheckRow& r : checked[i].rows) rows.push_back(std::move(r));
  }
  const CheckSummary summary = summarize_check(rows, o.floor_only);
  const std::vector<RunCheck> runs = check_runs(group_runs(o.traces), rows, o.floor_only);
  if (o.json) {
    CalibrationJson j = check_to_json(o.calibration, rows, o.floor_only);
    j["runs"] = runs_to_json(runs);
    j["warnings"] = warnings;
    std::printf("%s\n", j.dump(2, ' ', false, CalibrationJson::error_handler_t::replace).c_str());
  } else {
    print_text(rows, o.floor_only, o.terms, summary);
    print_runs(runs);
  }
  std::fflush(stdout);
  return check_failed(rows, runs, o.floor_only) ? kExitCheckFailed : kExitOk;
}

}  // namespace psc::cli
