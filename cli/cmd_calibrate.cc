// `peakscope calibrate` (its command line: cli/command_table.cc).
//
// Fits the pricing model's liveness terms per model from traced waves
// (estimator/calibration.h) and writes them, with their fit residuals, as JSON.
// Prints what it measured per wave, so a poor fit can be traced to its wave.
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "analysis/live_view.h"
#include "cli/args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "common/parallel.h"
#include "common/progress.h"
#include "estimator/calibration.h"
#include "estimator/liveness.h"
#include "estimator/margin.h"
#include "exchange/export_output.h"
#include "traces/follower.h"
#include "traces/reader.h"

namespace psc::cli {
namespace {

struct CalibrateOptions {
  std::vector<std::string> traces;
  std::string out;
  double safety = 1.1;
  bool flat_safety = false;  // --safety given: no derived margin
  bool allow_host_floor = false;
  bool follow = false;  // --follow: recalibrate as the trace's waves end
  double interval_s = 1.0;
};

// False for -h: the usage is printed.
[[nodiscard]] bool parse(int argc, char** argv, CalibrateOptions& o) {
  ArgParser args(command_spec("calibrate"));
  args.option({"-o"}, &o.out);
  args.option({"--safety"}, [&](const std::string& name, const std::string& value) {
    o.safety = parse_number(name, value, 1.0, 64.0, "a factor between 1 and 64");
    o.flat_safety = true;
  });
  args.flag({"--allow-host-floor"}, &o.allow_host_floor);
  args.flag({"--follow"}, &o.follow);
  args.option({"--interval"}, [&](const std::string& name, const std::string& value) {
    o.interval_s = parse_number(name, value, 0.05, 600.0, "a number of seconds from 0.05 to 600");
  });
  args.positionals(&o.traces);
  if (!args.parse(argc, argv)) return false;
  if (o.traces.empty()) args.fail("no trace given");
  if (o.follow && o.traces.size() != 1) args.fail("--follow follows one trace");
  o.traces = expand_trace_folders(o.traces);  // a run's folder: every rank's trace
  if (o.out.empty()) args.fail("no output given (-o CAL.json)");
  return true;
}

void print_waves(const Liveness& t) {
  std::printf("%s: %d layers, %zu waves\n", t.path.c_str(), t.layers, t.waves.size());
  std::printf(
      "  wave  tokens  cold   measured   retained    pending  workspace  ws_after_grad  input_grad     output  "
      "first_exec@peak  peak in\n");
  for (const WaveLiveness& w : t.waves) {
    uint64_t retained = 0, pending = 0;
    for (uint64_t b : w.boundary_bytes) retained += b;
    for (uint64_t p : w.pending_gradient_bytes) pending += p;
    // first_exec@peak: a cold wave's allocations with no warm counterpart
    // that are live at its peak ("-" for a wave with no warm twin).
    // ws_after_grad: what is left of a recomputed layer's workspace once its
    // own gradients exist ("-" for a wave that made no gradient).
    std::printf("  %4d  %6lld  %4s  %9llu  %9llu  %9llu  %9llu  %13s  %10llu  %9llu  %15s  %s\n", w.index,
                static_cast<long long>(w.tokens), w.cold ? "yes" : "no",
                static_cast<unsigned long long>(w.measured_peak_bytes), static_cast<unsigned long long>(retained),
                static_cast<unsigned long long>(pending), static_cast<unsigned long long>(w.workspace_bytes),
                w.workspace_after_gradient_bytes >= 0 ? std::to_string(w.workspace_after_gradient_bytes).c_str() : "-",
                static_cast<unsigned long long>(w.input_gradient_bytes),
                static_cast<unsigned long long>(w.output_bytes),
                w.warm_twin >= 0 ? std::to_string(w.first_execution_at_peak_bytes).c_str() : "-",
                w.peak_range.empty() ? "(no range)" : w.peak_range.c_str());
  }
}

std::string percent(double v) { return v < 0 ? std::string("-") : fmt::format("{:.2f}%", v * 100); }

void print_fit(const std::string& name, const GrowthTerm& t) {
  fmt::print("  {:<40} {:>9} {:>5} {:>14.1f} {:>12.3f} {:>14.5f} {:>12.0f} {:>10} {:>10}\n", name,
             growth_name(t.growth), t.sizes, t.intercept, t.per_token, t.per_square_token, t.max_abs_residual,
             percent(t.left_out_error_linear), percent(t.left_out_error_quadratic));
}

// Each fitted term: the growth chosen, from how many sizes, the fit, its
// largest residual on the calibration waves and the errors that chose it
// (each size predicted from the others: linear, quadratic). Moments print
// their method and, per layer, the event that is largest at the largest
// calibrated size.
void print_fits(const Calibration& c) {
  fmt::print(
      "fits (bytes = intercept + per_token x tokens + per_square x sum of squared sequence lengths, per group):\n");
  fmt::print("  {:<40} {:>9} {:>5} {:>14} {:>12} {:>14} {:>12} {:>10} {:>10}\n", "term", "growth", "sizes", "intercept",
             "per_token", "per_square", "max_resid", "left_out_l", "left_out_q");
  for (size_t i = 0; i < c.boundary.size(); ++i) print_fit(fmt::format("boundary[layer.{}]", i), c.boundary[i]);
  print_fit("workspace", c.workspace);
  if (c.workspace_after_gradient) print_fit("workspace_after_gradient", *c.workspace_after_gradient);
  print_fit("input_gradient", c.input_gradient);
  print_fit("output", c.output);
  print_fit("head_saved", c.head_saved);
  if (c.waiting) print_fit("waiting", *c.waiting);
  if (c.forward_moment) print_fit("forward_moment", *c.forward_moment);
  if (!c.moments) {
    fmt::print(
        "moments: not measured (no wave of one group, no wave of several whose backward cut into one run "
        "per group): prices charge the sum of the terms' maxima\n");
    return;
  }
  auto dominant = [](const MomentFit& m) -> const GrowthTerm& {
    const GrowthTerm* top = &m.events.front();
    for (const GrowthTerm& t : m.events)
      if (t.line(t.largest) > top->line(top->largest)) top = &t;
    return *top;
  };
  auto moment = [&](const std::string& name, const MomentFit& m) {
    print_fit(fmt::format("{} ({}, {} ev)", name, m.method, m.events.size()), dominant(m));
  };
  moment("moment.head", c.moments->head);
  for (size_t i = 0; i < c.moments->before_gradient.size(); ++i) {
    moment(fmt::format("moment.before[layer.{}]", i), c.moments->before_gradient[i]);
    moment(fmt::format("moment.after[layer.{}]", i), c.moments->after_gradient[i]);
  }
}

void print_margin(const Calibration& c) {
  const Margin& m = c.margin;
  if (m.derived)
    fmt::print(
        "margin (derived): +{:.2f}% inside the calibrated sizes, +{:.2f}% more per doubling beyond {} tokens "
        "per group\n",
        m.inside * 100, m.per_doubling * 100, m.largest_tokens);
  else
    fmt::print("margin: the flat safety factor x{}\n", c.safety_factor);
  for (const std::string& line : m.evidence) fmt::print("  {}\n", line);
}

// A trace recorded with a host size floor is refused, naming it, unless
// --allow-host-floor accepts it.
void refuse_host_floors(const std::vector<Liveness>& traces, const CalibrateOptions& o) {
  if (o.allow_host_floor) return;
  for (const Liveness& t : traces)
    if (const std::string problem = host_floor_problem(t); !problem.empty())
      throw UsageError(problem + " (or pass --allow-host-floor to calibrate from it anyway)");
}

// What the calibration could not measure, and which waves would measure it.
void print_notes(const Calibration& calibration) {
  // Prices read `waiting` with the conservative growth where no group of the
  // size waited: the recipe (README, "Price the next wave") is for each to wait.
  if (calibration.waiting && calibration.waiting->sizes < calibration.head_saved.sizes)
    fmt::print(stderr,
               "peakscope calibrate: note: groups waited for another group's backward at {} of the {} group sizes; "
               "at the others, what a waiting group holds is priced with the conservative growth (record waves in "
               "which each group size runs its backward after another group's)\n",
               calibration.waiting->sizes, calibration.head_saved.sizes);
  // Only a trace's first training wave beside a warm twin measures what a
  // process's first wave keeps (library workspaces).
  if (calibration.first_execution_pairs > 0 && calibration.first_execution_first_wave_pairs == 0)
    fmt::print(stderr,
               "peakscope calibrate: note: no trace's first wave has a warm twin (a later wave of its shape), so what "
               "a process's first wave keeps (library workspaces) is not measured: a first wave is priced with the "
               "later cold waves' allowance (run the first wave's shape again later in the trace)\n");
  // Packed calibrations bound the squares of a longer longest sequence
  // (growth.h, priced_size): said here, before a price meets it.
  const GrowthTerm& w = calibration.workspace;
  if (w.bounds_longer_sequences())
    fmt::print(stderr,
               "peakscope calibrate: note: the longest calibrated sequence has {} tokens; a wave with a longer one is "
               "priced with its squares bounded as l_max^2 / {:.3g} (up to {:.3g} times its own) and warned about\n",
               std::lround(std::sqrt(w.largest.longest_square)), w.least_longest_share, 1 / w.least_longest_share);
  // Packed waves without the recipe's wave of one sequence, or at fewer than
  // five sizes: the fit cannot tell the longest sequence's squares apart.
  if (w.largest.sequences > 1 && !w.tells_longest_apart())
    fmt::print(stderr,
               "peakscope calibrate: note: packed waves at {} size{}{}; the README's recipe for packed models adds a "
               "wave of one sequence and a wave of many short sequences, five sizes or more in all (packed models "
               "drawn at random were priced up to 17% under without them: docs/accuracy.md)\n",
               w.sizes, w.sizes == 1 ? "" : "s", w.calibrated_one_sequence() ? "" : ", none of one sequence");
  // One size of one sequence: a longer one is priced from the packings.
  else if (w.largest.sequences > 1 && w.knots.size() < 2)
    fmt::print(stderr,
               "peakscope calibrate: note: one size of one sequence among the packed waves; a wave of one longer "
               "sequence is priced from the packings (an allowance): the README's recipe adds one sequence as long as "
               "your packer's longest (docs/pricing.md)\n");
  // After-gradient moments read off the before-gradient fit (calibration.h):
  // an estimate, which waves making gradients at three sizes replace.
  if (calibration.moments &&
      std::any_of(calibration.moments->after_gradient.begin(), calibration.moments->after_gradient.end(),
                  [](const MomentFit& m) { return m.method == kScaledBefore; }))
    fmt::print(stderr,
               "peakscope calibrate: note: waves made adapter gradients at fewer than 3 sizes; what a layer holds "
               "once its gradients exist is read off its before-gradient fit (scaled by the measured ratio or less "
               "the measured credit, whichever is larger: docs/accuracy.md); with gradient accumulation, begin the "
               "calibration's steps with waves of 3 sizes or more to measure it\n");
}

// The calibration of `traces` with its margin; `warnings` (host floors
// accepted) go into it. Throws CalibrationError when the waves cannot make one.
Calibration calibrate_from(std::vector<Liveness>& traces, const CalibrateOptions& o, bool quiet) {
  std::vector<std::string> warnings;
  const auto warn = [&](const std::string& note) {
    if (!quiet) std::fprintf(stderr, "peakscope calibrate: warning: %s\n", note.c_str());
    warnings.push_back(note);
  };
  for (Liveness& t : traces)
    for (const std::string& note : set_aside_partial_waves(&t, "calibrated from")) warn(note);
  refuse_host_floors(traces, o);
  for (const Liveness& t : traces)
    if (const std::string problem = host_floor_problem(t); !problem.empty()) warn(problem);
  // A CalibrationError reaches main, which prints it like any bad input.
  Calibration calibration = calibrate(traces, o.safety);
  // Cold waves without a warm twin: what their first executions allocate
  // is nowhere told apart (it reads as the waves' own terms, or is missed).
  const bool cold = std::any_of(traces.begin(), traces.end(), [](const Liveness& t) {
    return std::any_of(t.waves.begin(), t.waves.end(), [](const WaveLiveness& w) { return w.cold && w.tokens > 0; });
  });
  if (cold && calibration.first_execution_pairs == 0)
    warn(
        "no cold wave has a warm twin (the same wave run again, warm): the first-execution allowance is not "
        "measured, and cold waves are priced without it (a one-step recording of all-cold waves priced its own "
        "waves 1.3% under); record two steps or more of the same waves");
  calibration.warnings = warnings;
  if (!quiet) print_notes(calibration);
  if (!o.flat_safety) {
    if (!quiet) progress_stage("deriving the margin: each size left out in turn", 0);
    calibration.margin = derive_margin(traces, calibration);
    if (!quiet) progress_done();
  } else {
    calibration.margin.evidence.push_back(
        fmt::format("not derived: calibrate --safety {} asked for the flat factor", o.safety));
  }
  return calibration;
}

std::string calibration_text(const Calibration& calibration) {
  return calibration_to_json(calibration).dump(2, ' ', false, CalibrationJson::error_handler_t::replace) + "\n";
}

// Written beside and renamed over: a reader (a trainer's admission loop)
// sees the old calibration or the new one, never half of one.
void write_atomically(const std::string& path, const std::string& text) {
  try {
    OutputFile out(path);
    out.write(text);
    out.commit();
  } catch (const std::runtime_error& e) {
    throw UsageError(e.what());
  }
}

std::string summary_line(const Calibration& calibration, const std::string& out) {
  return fmt::format(
      "calibration: {} waves, {} layers; workspace {:.1f} + {:.1f}/token (+{}), input gradient {:.1f} + {:.1f}/token "
      "(+{}), output {:.1f} + {:.1f}/token (+{}); first execution {} bytes (+{} a further new group shape, {} a "
      "process's first wave) over {} cold/warm pairs; priced at {} -> {}",
      calibration.waves, calibration.layers, calibration.workspace.intercept, calibration.workspace.per_token,
      calibration.workspace.margin_bytes, calibration.input_gradient.intercept, calibration.input_gradient.per_token,
      calibration.input_gradient.margin_bytes, calibration.output.intercept, calibration.output.per_token,
      calibration.output.margin_bytes, calibration.first_execution_bytes, calibration.first_execution_per_shape_bytes,
      calibration.first_execution_first_wave_bytes, calibration.first_execution_pairs,
      calibration.moments ? "the worst moment" : "the sum of maxima", out);
}

// What the waves so far leave the calibration without: what a trainer's
// admission should not trust yet.
std::vector<std::string> still_lacking(const Calibration& c) {
  std::vector<std::string> lacking;
  if (c.workspace.sizes < 3) {
    const size_t more = 3 - c.workspace.sizes;
    lacking.push_back(
        fmt::format("{} more token count{} of waves ({} so far; three or more let each term choose its growth; "
                    "until then prices take the conservative growth)",
                    more, more == 1 ? "" : "s", c.workspace.sizes));
  }
  if (c.first_execution_pairs == 0)
    lacking.push_back("a cold wave and a warm wave of one shape (no first-execution allowance measured yet)");
  if (!c.moments) lacking.push_back("a wave of one gradient group (prices charge the sum of the terms' maxima)");
  return lacking;
}

// calibrate --follow: recalibrate from the trace each time waves have ended
// since the last calibration, rewrite the file when the calibration changed,
// until the recorder closes the trace. The last one is `calibrate`'s of the
// whole trace, byte for byte: the same function over the same bytes.
int follow_and_calibrate(const CalibrateOptions& o) {
  const std::string& path = o.traces.front();
  TraceFollower follower(path);
  LiveView view;
  size_t calibrated_waves = 0;
  std::string written;
  std::string last_problem;
  std::set<std::string> warned;
  std::fprintf(stderr, "peakscope calibrate: following %s; %s is rewritten as waves end\n", path.c_str(),
               o.out.c_str());
  for (;;) {
    const FollowStatus follow = follower.poll(view);
    const LiveSnapshot now = view.snapshot();
    size_t ended = 0;
    for (const LiveWave& w : now.waves) ended += w.ended;
    if (ended > calibrated_waves || (follow.over() && ended != calibrated_waves) ||
        (follow.over() && written.empty())) {
      calibrated_waves = ended;
      try {
        std::vector<Liveness> traces;
        traces.push_back(analyze_liveness(path));
        const Calibration calibration = calibrate_from(traces, o, true);
        const std::string text = calibration_text(calibration);
        if (text != written) {
          write_atomically(o.out, text);
          written = text;
          std::printf("after %zu wave%s: %s\n", ended, ended == 1 ? "" : "s", summary_line(calibration, o.out).c_str());
          for (const std::string& l : still_lacking(calibration)) std::printf("  still lacking: %s\n", l.c_str());
          // What plain calibrate warns about (waves left out, host floors), each once.
          for (const std::string& w : calibration.warnings)
            if (warned.insert(w).second) std::printf("  warning: %s\n", w.c_str());
          std::fflush(stdout);
        }
        last_problem.clear();
      } catch (const std::exception& e) {
        if (e.what() != last_problem) {
          std::printf("after %zu wave%s: no calibration yet: %s\n", ended, ended == 1 ? "" : "s", e.what());
          std::fflush(stdout);
          last_problem = e.what();
        }
      }
    }
    if (follow.over()) {
      std::printf("%s: %s\n", path.c_str(), follow_state_name(follow.state));
      if (written.empty())
        throw UsageError(fmt::format("{}: the trace ended without a calibration: {}", path,
                                     last_problem.empty() ? "no wave" : last_problem));
      return kExitOk;
    }
    usleep(static_cast<useconds_t>(o.interval_s * 1e6));
  }
}

}  // namespace

int cmd_calibrate(int argc, char** argv) {
  CalibrateOptions o;
  if (!parse(argc, argv, o)) return kExitOk;
  if (o.follow) return follow_and_calibrate(o);
  // Every trace side by side (common/parallel.h); their waves printed in order.
  const unsigned threads = trace_threads(o.traces.size());
  if (threads > 1) progress_stage(fmt::format("reading {} traces, {} at a time", o.traces.size(), threads), 0);
  std::vector<Liveness> traces = parallel_map<Liveness>(
      o.traces.size(), threads, [&](size_t i) { return analyze_liveness(o.traces[i]); },
      [](size_t) { progress_advance(1); });
  progress_done();
  refuse_host_floors(traces, o);  // before the waves are printed
  for (const Liveness& t : traces) print_waves(t);
  const Calibration calibration = calibrate_from(traces, o, false);
  write_atomically(o.out, calibration_text(calibration));
  print_fits(calibration);
  print_margin(calibration);
  if (calibration.workspace_after_gradient) {
    const GrowthTerm& a = *calibration.workspace_after_gradient;
    std::printf("workspace left once a layer's own gradients exist: %.1f + %.1f/token (%s, %zu waves)\n", a.intercept,
                a.per_token, calibration.workspace_after_gradient_method.c_str(), a.points);
  } else {
    std::printf("workspace left once a layer's own gradients exist: not measured (no wave made gradients)\n");
  }
  std::printf("%s\n", summary_line(calibration, o.out).c_str());
  return kExitOk;
}

}  // namespace psc::cli
