// peakscope check --calibration CAL.json TRACE... [--json] [--floor-only]
//
// The accuracy table of DESIGN.md ("Accuracy is measured"): per wave, the
// calibrated price against the measured peak, cold and warm summarised apart.
// Exit 1 when any wave's raw price is below its measured peak (with
// --floor-only: the floor-only price), 0 otherwise, 2 for bad input.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "estimator/calibration.h"
#include "estimator/check.h"
#include "estimator/liveness.h"
#include "tools/cli/commands.h"

namespace psc::cli {
namespace {

using Json = CalibrationJson;

constexpr const char* kUsage = "usage: peakscope check --calibration CAL.json TRACE... [--json] [--floor-only]";

struct CheckOptions {
  std::string calibration;
  std::vector<std::string> traces;
  bool json = false;
  bool floor_only = false;
};

CheckOptions parse(int argc, char** argv) {
  CheckOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--calibration") {
      if (i + 1 >= argc) throw UsageError(a + " needs a value\n" + kUsage);
      o.calibration = argv[++i];
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--floor-only") {
      o.floor_only = true;
    } else if (a == "-h" || a == "--help") {
      throw UsageError(kUsage);
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError("unknown option '" + a + "'\n" + kUsage);
    } else {
      o.traces.push_back(a);
    }
  }
  if (o.calibration.empty()) throw UsageError(std::string("no calibration given (--calibration CAL.json)\n") + kUsage);
  if (o.traces.empty()) throw UsageError(std::string("no trace given\n") + kUsage);
  return o;
}

Calibration load_calibration(const std::string& path) {
  try {
    return read_calibration(path);
  } catch (const CalibrationError& e) {
    throw UsageError(e.what());
  }
}

struct Summary {
  size_t waves = 0;
  size_t under = 0;
  double median = 0, min = 0, max = 0;
};

Summary summarize(const std::vector<double>& errors, size_t under) {
  Summary s;
  s.waves = errors.size();
  s.under = under;
  if (errors.empty()) return s;
  std::vector<double> sorted = errors;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  s.median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  s.min = sorted.front();
  s.max = sorted.back();
  return s;
}

Json row_to_json(const CheckRow& r, bool floor_only) {
  const pricing::Price& p = floor_only ? r.floor_price : r.price;
  Json j;
  j["trace"] = r.trace;
  j["wave"] = r.wave;
  j["tokens"] = r.tokens;
  j["cold"] = r.cold;
  j["groups"] = r.groups;
  j["measured_peak_bytes"] = r.measured_peak_bytes;
  j["raw_bytes"] = p.raw_bytes;
  j["required_bytes"] = p.required_bytes;
  j["raw_error"] = floor_only ? r.floor_raw_error : r.raw_error;
  j["admitted_error"] = r.measured_peak_bytes
                            ? static_cast<double>(p.required_bytes) / static_cast<double>(r.measured_peak_bytes) - 1
                            : 0.0;
  j["floor_raw_bytes"] = r.floor_price.raw_bytes;
  j["floor_raw_error"] = r.floor_raw_error;
  j["peak_range"] = r.peak_range;
  j["peak_layer"] = p.peak.layer;
  j["square_tokens"] = r.square_tokens;
  if (p.peak.moment != pricing::Moment::kNone) {
    j["peak_moment"] = pricing::moment_name(p.peak.moment);
    j["peak_moment_bytes"] = p.peak.moment_bytes;
  }
  Json terms = Json::object();
  for (const TermResidual& t : r.terms)
    terms[t.term] = {{"measured_bytes", t.measured}, {"priced_bytes", t.fitted}, {"over_bytes", -t.residual()}};
  terms["adapter_gradient_priced_bytes"] = p.components.adapter_gradient;
  terms["moment_priced_bytes"] = p.components.moment;
  terms["transient_priced_bytes"] = p.components.transient;
  j["terms"] = terms;
  return j;
}

// Where the price puts the peak: the layer and, with moments, which moment.
std::string priced_peak(const pricing::Price& p) {
  std::string where = p.peak.layer >= 0 ? fmt::format("layer.{}", p.peak.layer) : std::string("head");
  if (p.peak.group < 0) return "-";
  if (p.peak.moment != pricing::Moment::kNone) where += std::string(" ") + pricing::moment_name(p.peak.moment);
  return where;
}

void print_text(const std::vector<CheckRow>& rows, bool floor_only, const Summary& cold, const Summary& warm) {
  std::printf("%-6s %5s %6s %4s %19s %12s %14s %9s %14s %15s %9s  %s\n", "trace", "wave", "tokens", "cold",
              "measured_peak_bytes", "raw_bytes", "required_bytes", "raw_error", "admitted_error", "floor_raw_bytes",
              "floor_err", "peak in");
  std::string last_trace;
  int trace_index = -1;
  for (const CheckRow& r : rows) {
    if (r.trace != last_trace) {
      last_trace = r.trace;
      ++trace_index;
      std::printf("# trace %d: %s\n", trace_index, r.trace.c_str());
    }
    const pricing::Price& p = floor_only ? r.floor_price : r.price;
    const double raw_error = floor_only ? r.floor_raw_error : r.raw_error;
    const double admitted = r.measured_peak_bytes
                                ? static_cast<double>(p.required_bytes) / static_cast<double>(r.measured_peak_bytes) - 1
                                : 0.0;
    std::printf(
        "%-6d %5d %6lld %4s %19llu %12lld %14lld %+8.2f%% %+13.2f%% %15lld %+8.2f%%  %s%s\n", trace_index, r.wave,
        static_cast<long long>(r.tokens), r.cold ? "yes" : "no", static_cast<unsigned long long>(r.measured_peak_bytes),
        static_cast<long long>(p.raw_bytes), static_cast<long long>(p.required_bytes), raw_error * 100, admitted * 100,
        static_cast<long long>(r.floor_price.raw_bytes), r.floor_raw_error * 100,
        r.peak_range.empty() ? "(no range)" : r.peak_range.c_str(), r.under_estimate(floor_only) ? "  UNDER" : "");
  }
  std::printf(
      "\nper-term over-estimate (priced - measured, bytes; measured = that term's own maximum in the wave, or for "
      "\"moment\" what the wave held beside boundaries and gradients at the moment the price names)\n");
  std::printf("%-6s %5s %6s %12s %16s %12s %14s %12s %12s %12s  %s\n", "trace", "wave", "tokens", "retained",
              "pending_gradient", "workspace", "input_gradient", "output", "moment", "coincidence", "priced peak");
  static const char* const kColumns[] = {"retained",       "pending_gradient", "workspace",
                                         "input_gradient", "output",           "moment"};
  static const int kWidths[] = {12, 16, 12, 14, 12, 12};
  last_trace.clear();
  trace_index = -1;
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
    const pricing::Price& p = floor_only ? r.floor_price : r.price;
    std::printf(
        " %12lld  %s\n",
        std::llround(static_cast<double>(p.raw_bytes) - static_cast<double>(r.measured_peak_bytes) - terms_over),
        priced_peak(p).c_str());
  }
  std::printf("\n%s prices\n", floor_only ? "floor-only" : "full");
  for (const auto& [name, s] : {std::pair<const char*, const Summary&>{"cold", cold}, {"warm", warm}})
    std::printf("  %s: %zu waves, raw error median %+.2f%%, min %+.2f%%, max %+.2f%%, under-estimates %zu\n", name,
                s.waves, s.median * 100, s.min * 100, s.max * 100, s.under);
  std::printf("under_estimates %zu\n", cold.under + warm.under);
}

}  // namespace

int cmd_check(int argc, char** argv) {
  const CheckOptions o = parse(argc, argv);
  const Calibration calibration = load_calibration(o.calibration);
  std::vector<CheckRow> rows;
  for (const std::string& path : o.traces) {
    const Liveness trace = analyze_liveness(path);
    if (trace.layers != calibration.layers)
      throw UsageError(
          fmt::format("{}: {} decoder layers, but the calibration has {}", path, trace.layers, calibration.layers));
    for (CheckRow& r : check_trace(calibration, trace)) rows.push_back(std::move(r));
  }
  std::vector<double> cold_errors, warm_errors;
  size_t cold_under = 0, warm_under = 0;
  for (const CheckRow& r : rows) {
    (r.cold ? cold_errors : warm_errors).push_back(o.floor_only ? r.floor_raw_error : r.raw_error);
    if (r.under_estimate(o.floor_only)) ++(r.cold ? cold_under : warm_under);
  }
  const Summary cold = summarize(cold_errors, cold_under);
  const Summary warm = summarize(warm_errors, warm_under);
  if (o.json) {
    Json j;
    j["calibration"] = o.calibration;
    j["floor_only"] = o.floor_only;
    Json waves = Json::array();
    for (const CheckRow& r : rows) waves.push_back(row_to_json(r, o.floor_only));
    j["waves"] = waves;
    for (const auto& [name, s] : {std::pair<const char*, const Summary&>{"cold", cold}, {"warm", warm}})
      j["summary"][name] = {{"waves", s.waves},
                            {"median_raw_error", s.median},
                            {"min_raw_error", s.min},
                            {"max_raw_error", s.max},
                            {"under_estimates", s.under}};
    j["under_estimates"] = cold.under + warm.under;
    std::printf("%s\n", j.dump(2, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    print_text(rows, o.floor_only, cold, warm);
  }
  std::fflush(stdout);
  return cold.under + warm.under > 0 ? kExitCheckFailed : kExitOk;
}

}  // namespace psc::cli
